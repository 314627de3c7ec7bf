#!/usr/bin/python3
"""Run one module of rdma-core's pyverbs test suite against one device and
print a one-line verdict plus every skip and its reason: PASS when unittest
reports no failure and no error and at least one test ran, SKIP when every
test of the module was skipped, FAIL otherwise.

usage: pyverbs_run.py TESTS_DIR DEVICE MODULE [--no-data] [--gid N]
  --no-data  leave out the tests that move data (for a device whose
             transport does not move data yet)
  --gid N    use GID index N of port 1 (given to rdma-core's own parser)
"""

import os
import sys
import unittest

# Tests that post sends and wait for data to arrive (or for a bind/invalidate
# work request to complete): they need a transport engine.
NEEDS_DATA_PATH = {
    'test_mr_rereg_access', 'test_mr_rereg_access_bad_flow', 'test_mr_rereg_addr',
    'test_mr_rereg_atomic', 'test_mr_rereg_pd', 'test_invalidate_mw_type1',
    'test_mw_type1', 'test_mw_type2', 'test_mw_type2_invalidate_dealloc',
    'test_mw_type2_invalidate_local', 'test_mw_type2_invalidate_remote',
    'test_mw_type1_bind_zero_based', 'test_reg_mr_with_odp',
    'test_resize_cq', 'test_cq_events_rc', 'test_cq_events_ud',
    'test_modify_srq_limit', 'test_rc_srq_traffic',
    'test_ud_traffic', 'test_rc_traffic', 'test_uc_traffic', 'test_xrc_traffic',
}

tests_dir, dev, module = sys.argv[1:4]
extra = sys.argv[4:]
run_all = '--no-data' not in extra
gid = extra[extra.index('--gid') + 1:][:1] if '--gid' in extra else []
sys.path.insert(0, tests_dir)
os.chdir(tests_dir)
sys.argv = ['run_tests.py', '--dev', dev] + (['--port', '1', '--gid'] + gid if gid else [])
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
kept, left = unittest.TestSuite(), []
for t in flatten(loaded):
    name = t.id().rsplit('.', 1)[-1]
    if not run_all and name in NEEDS_DATA_PATH:
        left.append(name)
    else:
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
print(f'{verdict} pyverbs_{module}_{dev}{sep} ran {res.testsRun}, failures {len(res.failures)}, '
      f'errors {len(res.errors)}, skipped {len(res.skipped)}'
      + (f', left for the engine {len(left)}' if left else ''))
for t, why in res.failures + res.errors:
    print(f'    broken: {t.id()}')
    print('\n'.join('      ' + line for line in why.strip().splitlines()[-6:]))
for t in res.unexpectedSuccesses:
    print(f'    unexpected success: {t.id()}')
for t, why in res.skipped:
    print(f'    skip: {t.id().rsplit(".", 1)[-1]}: {why}')
for name in left:
    print(f'    engine: {name}')
# The suite's per-device tally of single tests (pyverbs.sh sums these).
print(f'# tally {dev} ran {res.testsRun} skipped {len(res.skipped)} failed {bad}')
