#!/usr/bin/python3
"""Run one module of rdma-core's pyverbs test suite against one device and
print a one-line verdict plus every skip and its reason: PASS when unittest
reports no failure and no error and at least one test ran, SKIP when every
test of the module was skipped, FAIL otherwise.

usage: pyverbs_run.py TESTS_DIR DEVICE MODULE [--iwarp [--join]] [--ref]
  --iwarp  an iWARP device: use GID index 0 of port 1 (rdma-core's base.py
           skips every GID whose last 8 bytes are zero, and an iWARP GID is
           the MAC in its first 6, on siw as on softrnic, so without it
           every test that needs a port skips with "No supported port is
           up"), and skip the tests that need what iWARP does not have
           (IWARP_NOT_APPLICABLE), each with its reason
  --join   the iWARP device joins RC QPs by modify_qp (softrnic_iwarp:
           drivers/softrnic/transport/iwarp/join.rs): run the tests that
           join them so (JOINED_BY_MODIFY) rather than skip them
  --ref    a reference device (siw): its verdict line reads "REF ...", not
           counted
"""

import os
import sys
import unittest

# Tests that need what an iWARP RNIC does not have.  siw fails each the same
# way in the same VM (pyverbs.sh runs siw beside softrnic_iwarp): these are
# limits of iWARP and rdma_cm, not of a device.
JOINED_BY_MODIFY = (
    'joins two RC QPs by modify_qp with QP numbers and GIDs, as IB and RoCE '
    'connect them; an iWARP QP reaches RTS only through its connection '
    '(iw_cm, through rdma_cm)')
IWARP_NOT_APPLICABLE = {
    **{name: JOINED_BY_MODIFY for name in (
        'test_atomic_cmp_and_swap', 'test_atomic_fetch_and_add', 'test_atomic_invalid_lkey',
        'test_atomic_invalid_mr_access', 'test_atomic_invalid_qp_access',
        'test_atomic_invalid_rkey', 'test_rc_traffic_cq_ex', 'test_mr_rereg_access',
        'test_mr_rereg_access_bad_flow', 'test_mr_rereg_addr', 'test_mr_rereg_atomic',
        'test_mr_rereg_pd', 'test_invalidate_mw_type1', 'test_mw_type1', 'test_mw_type2',
        'test_mw_type2_invalidate_dealloc', 'test_mw_type2_invalidate_local',
        'test_mw_type2_invalidate_remote', 'test_qp_ex_rc_atomic_cmp_swp',
        'test_qp_ex_rc_atomic_fetch_add', 'test_qp_ex_rc_bind_mw', 'test_qp_ex_rc_rdma_read',
        'test_qp_ex_rc_rdma_read_zero_size', 'test_qp_ex_rc_rdma_write',
        'test_qp_ex_rc_rdma_write_imm', 'test_qp_ex_rc_rdma_write_zero_length',
        'test_qp_ex_rc_send', 'test_qp_ex_rc_send_imm', 'test_ro_rc_traffic',
        'test_modify_srq_limit', 'test_rc_srq_traffic', 'test_cq_events_rc')},
    'test_rdmacm_async_traffic':
        'asserts the ACK timeout that rdma_cm sets on IB and RoCE QPs only',
    'test_rdmacm_async_traffic_external_qp':
        'waits for CONNECT_RESPONSE, which rdma_cm raises on IB and RoCE only '
        '(on iWARP the connection is ESTABLISHED at once)',
}

# Tests of QPs joined by modify_qp that assert what only IB has, skipped on
# softrnic_iwarp (`--join`), each with its reason.
COMPLETES_WHEN_SENT = (
    'asserts that an RDMA WRITE or SEND the responder refuses completes in '
    'error at the requester (IB\'s ACK/NAK); an iWARP WRITE or SEND completes '
    'once it is sent (RFC 5040): the refusal comes back as a TERMINATE that '
    'ends the stream, after that completion')
JOINED_IB_ONLY = {
    **{name: COMPLETES_WHEN_SENT for name in (
        'test_mr_rereg_addr', 'test_mr_rereg_pd', 'test_mr_rereg_access_bad_flow',
        'test_invalidate_mw_type1', 'test_mw_type2_invalidate_dealloc',
        'test_mw_type2_invalidate_local', 'test_mw_type2_invalidate_remote',
        'test_qp_ex_rc_bind_mw')},
    'test_atomic_invalid_qp_access':
        'asserts IB\'s QP-level remote atomic enable; RFC 7306 atomics are granted '
        'per STag, and rdma_cm gives an iWARP QP remote read and write only, so '
        'a QP-level check would refuse every atomic over rdma_cm',
    'test_qp_ex_rc_send_imm':
        'SEND with immediate: RFC 7306 carries immediate data only in a message '
        'of its own (softrnic sends it after a WRITE: WRITE with immediate)',
}

tests_dir, dev, module = sys.argv[1:4]
flags = sys.argv[4:]
iwarp = '--iwarp' in flags
joins = '--join' in flags
ref = 'REF ' if '--ref' in flags else ''
sys.path.insert(0, tests_dir)
os.chdir(tests_dir)
sys.argv = ['run_tests.py', '--dev', dev] + (['--port', '1', '--gid', '0'] if iwarp else [])
from args_parser import parser  # noqa: E402  (rdma-core's own argument parser)
parser.parse_args()
from importlib.machinery import SourceFileLoader  # noqa: E402
tests = SourceFileLoader('tests', os.path.join(tests_dir, '__init__.py')).load_module()


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


loaded = unittest.defaultTestLoader.loadTestsFromName(f'tests.{module}', tests)
kept = unittest.TestSuite()
for t in flatten(loaded):
    name = t.id().rsplit('.', 1)[-1]
    why = IWARP_NOT_APPLICABLE.get(name) if iwarp else None
    if why == JOINED_BY_MODIFY and joins:
        why = JOINED_IB_ONLY.get(name)
    if why:
        # Still run, as a skip with its reason (unittest counts it).
        setattr(type(t), name, unittest.skip(f'not on iWARP: {why}')(getattr(type(t), name)))
    kept.addTest(t)
res = unittest.TextTestRunner(stream=open(os.devnull, 'w'), verbosity=0).run(kept)
# A module whose tests were all skipped tested nothing: SKIP, not PASS.
bad = len(res.failures) + len(res.errors) + len(res.unexpectedSuccesses)
if bad:
    verdict = 'FAIL'
elif res.testsRun == len(res.skipped):
    verdict = 'SKIP'
else:
    verdict = 'PASS'
sep = ':' if verdict != 'PASS' else ''
print(f'{ref}{verdict} pyverbs_{module}_{dev}{sep} ran {res.testsRun}, failures {len(res.failures)}, '
      f'errors {len(res.errors)}, skipped {len(res.skipped)}')
for t, why in res.failures + res.errors:
    print(f'    broken: {t.id()}')
    print('\n'.join('      ' + line for line in why.strip().splitlines()[-6:]))
for t in res.unexpectedSuccesses:
    print(f'    unexpected success: {t.id()}')
for t, why in res.skipped:
    print(f'    skip: {t.id().rsplit(".", 1)[-1]}: {why}')
# The suite's per-device tally of single tests (pyverbs.sh sums these).
print(f'# tally {dev} ran {res.testsRun} skipped {len(res.skipped)} failed {bad}')
