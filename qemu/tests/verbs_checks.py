#!/usr/bin/python3
"""Guest checks of softrnic's verbs objects through pyverbs (libibverbs and
the softrnic provider): creation limits, bad arguments and their errnos,
the QP state machine, flushing, async events.

usage: verbs_checks.py ROCE_DEV IWARP_DEV [CHECK ...]
Prints "PASS name" or "FAIL name: why" per check (qemu/tests/lib.sh format).
Checks whose name starts with "event_" block on an async event: run each in
its own process under `timeout`, so a missing event fails instead of hanging.
"""

import errno
import mmap
import ctypes
import subprocess
import sys
import time
import traceback

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

ROCE, IWARP = sys.argv[1], sys.argv[2]
CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


class Fail(Exception):
    pass


def expect_errno(code, fn, *args, **kw):
    """fn(*args) must fail with errno `code` (a tuple allows any of them)."""
    codes = code if isinstance(code, tuple) else (code,)
    try:
        obj = fn(*args, **kw)
    except PyverbsRDMAError as ex:
        if ex.error_code not in codes:
            raise Fail(f'{fn.__name__}: errno {ex.error_code}, want {codes}')
        return
    if hasattr(obj, 'close'):
        obj.close()
    raise Fail(f'{fn.__name__}{args}: succeeded, want errno {codes}')


def want(cond, msg):
    if not cond:
        raise Fail(msg)


def rc_qp(pd, cq, send_wr=4, recv_wr=4, srq=None, qp_type=e.IBV_QPT_RC, **cap):
    caps = QPCap(max_send_wr=send_wr, max_recv_wr=recv_wr, max_send_sge=1,
                 max_recv_sge=1, **cap)
    return QP(pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq, srq=srq, cap=caps))


def roce_gid_index(ctx):
    """Index of an IPv4-mapped RoCEv2 GID (the veth has 10.0.0.1)."""
    for i in range(ctx.query_port(1).gid_tbl_len):
        try:
            gid = ctx.query_gid(1, i)
        except PyverbsRDMAError:
            continue
        if str(gid).startswith('0000:0000:0000:0000:0000:ffff'):
            return i, gid
    raise Fail('no IPv4-mapped GID')


def to_rts(ctx, qp):
    """Walk an RC QP of the RoCE device to RTS, connected to itself."""
    idx, gid = roce_gid_index(ctx)
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.pkey_index, attr.port_num = 0, 1
    attr.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
              e.IBV_QP_ACCESS_FLAGS)
    attr = QPAttr(qp_state=e.IBV_QPS_RTR)
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = qp.qp_num
    attr.rq_psn = 0
    attr.max_dest_rd_atomic = 1
    attr.min_rnr_timer = 12
    attr.ah_attr = AHAttr(port_num=1, is_global=1,
                          gr=GlobalRoute(dgid=gid, sgid_index=idx))
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
              e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC |
              e.IBV_QP_MIN_RNR_TIMER)
    attr = QPAttr(qp_state=e.IBV_QPS_RTS)
    attr.timeout, attr.retry_cnt, attr.rnr_retry, attr.sq_psn = 14, 7, 7, 0
    attr.max_rd_atomic = 1
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
              e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)


def to_init(qp):
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.pkey_index, attr.port_num, attr.qp_access_flags = 0, 1, 0
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
              e.IBV_QP_ACCESS_FLAGS)


def to_err(qp):
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)


def post_recv(qp, mr, wr_id, length=64):
    """Post one receive of `length` bytes at the start of `mr`."""
    qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(mr.buf, length, mr.lkey)]))


def qp_state(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


# --- PD and CQ -------------------------------------------------------------

@check
def pd_alloc_dealloc_both_transports():
    for name in (ROCE, IWARP):
        with Context(name=name) as ctx:
            pds = [PD(ctx) for _ in range(16)]
            for pd in pds:
                pd.close()


@check
def cq_depth_zero_or_too_deep_is_einval():
    with Context(name=ROCE) as ctx:
        max_cqe = ctx.query_device().max_cqe
        expect_errno(errno.EINVAL, CQ, ctx, 0)
        expect_errno(errno.EINVAL, CQ, ctx, max_cqe + 1)
        cq = CQ(ctx, max_cqe)  # the maximum itself is fine
        want(cq.cqe >= max_cqe, f'cqe {cq.cqe} < {max_cqe}')
        cq.close()


def possible_cpus():
    # The kernel's num_possible_cpus(): ranges such as "0-1" or "0,2-3".
    with open('/sys/devices/system/cpu/possible') as f:
        spans = [r.split('-') for r in f.read().strip().split(',')]
    return sum(int(r[-1]) - int(r[0]) + 1 for r in spans)


@check
def cq_comp_vectors_one_per_cpu():
    # As rxe and siw: ib_cq_pool spreads kernel consumers' queues over them.
    with Context(name=ROCE) as ctx:
        n = ctx.num_comp_vectors
        cpus = possible_cpus()
        want(n == cpus, f'{n} completion vectors for {cpus} possible CPUs')
        for v in range(n):
            CQ(ctx, 8, None, None, v).close()
        expect_errno(errno.EINVAL, CQ, ctx, 8, None, None, n)


@check
def cq_resize_keeps_waiting_completions():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        cq = CQ(ctx, 16)
        qp = rc_qp(pd, cq, recv_wr=8)
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        to_init(qp)
        for i in range(6):
            post_recv(qp, mr, i)
        to_err(qp)
        expect_errno(errno.EINVAL, cq.resize, 3)  # 6 waiting do not fit
        cq.resize(64)
        want(cq.cqe >= 64, f'cqe {cq.cqe} after resize to 64')
        n, wcs = cq.poll(16)
        want(n == 6, f'{n} completions after resize, want 6')
        want([w.wr_id for w in wcs] == list(range(6)), 'completions out of order')
        qp.close()
        mr.close()
        cq.close()


# --- QP ------------------------------------------------------------------

@check
def qp_caps_over_limits_are_einval():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        a = ctx.query_device()
        expect_errno(errno.EINVAL, rc_qp, pd, cq, send_wr=a.max_qp_wr + 1)
        expect_errno(errno.EINVAL, rc_qp, pd, cq, recv_wr=a.max_qp_wr + 1)
        caps = QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=a.max_sge + 1)
        expect_errno(errno.EINVAL, QP, pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=caps))
        expect_errno(errno.EINVAL, rc_qp, pd, cq, max_inline_data=1 << 20)


@check
def qp_actual_caps_are_returned():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        qp = rc_qp(pd, cq, send_wr=5, recv_wr=3, max_inline_data=64)
        _, init = qp.query(e.IBV_QP_CAP)
        want(init.cap.max_send_wr >= 5 and init.cap.max_recv_wr >= 3,
             f'caps {init.cap.max_send_wr}/{init.cap.max_recv_wr}')
        want(init.cap.max_inline_data >= 64, f'inline {init.cap.max_inline_data}')
        qp.close()


@check
def qp_types_per_transport():
    with Context(name=IWARP) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        rc_qp(pd, cq).close()
        expect_errno(errno.EOPNOTSUPP, rc_qp, pd, cq, qp_type=e.IBV_QPT_UD)
        expect_errno(errno.EOPNOTSUPP, rc_qp, pd, cq, qp_type=e.IBV_QPT_UC)
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        for t in (e.IBV_QPT_RC, e.IBV_QPT_UC, e.IBV_QPT_UD):
            rc_qp(pd, cq, qp_type=t).close()


@check
def qp_illegal_transitions_and_masks_are_einval():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        qp = rc_qp(pd, cq)
        # RESET → RTS is not a transition.
        expect_errno(errno.EINVAL, qp.modify, QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
        # RESET → INIT without the required PKEY_INDEX/PORT/ACCESS_FLAGS.
        expect_errno(errno.EINVAL, qp.modify, QPAttr(qp_state=e.IBV_QPS_INIT), e.IBV_QP_STATE)
        # RESET → INIT with an attribute that transition does not take.
        attr = QPAttr(qp_state=e.IBV_QPS_INIT)
        attr.pkey_index, attr.port_num, attr.qp_access_flags, attr.sq_psn = 0, 1, 0, 5
        expect_errno(errno.EINVAL, qp.modify, attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                     e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS | e.IBV_QP_SQ_PSN)
        # A bad port number.
        attr = QPAttr(qp_state=e.IBV_QPS_INIT)
        attr.pkey_index, attr.port_num, attr.qp_access_flags = 0, 2, 0
        expect_errno(errno.EINVAL, qp.modify, attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                     e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
        want(qp_state(qp) == e.IBV_QPS_RESET, 'a failed modify changed the state')
        qp.close()


def dmesg():
    return subprocess.run(['dmesg'], capture_output=True, text=True).stdout


@check
def path_mtu_over_the_netdev_is_einval_and_logged():
    """RTR with a path MTU the veth (MTU 1500) cannot carry: EINVAL, and
    the kernel log says why (a frame that big would never arrive)."""
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        qp = rc_qp(pd, cq)
        to_init(qp)
        idx, gid = roce_gid_index(ctx)
        seen = dmesg().count('does not fit')
        attr = QPAttr(qp_state=e.IBV_QPS_RTR)
        attr.path_mtu = e.IBV_MTU_4096
        attr.dest_qp_num = qp.qp_num
        attr.rq_psn, attr.max_dest_rd_atomic, attr.min_rnr_timer = 0, 1, 12
        attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=idx))
        mask = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
                e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        expect_errno(errno.EINVAL, qp.modify, attr, mask)
        want(qp_state(qp) == e.IBV_QPS_INIT, 'a refused modify changed the state')
        log = dmesg()
        want(log.count('does not fit') > seen, 'no kernel log line says why')
        want('path MTU 4096 bytes' in log, 'the log line names no MTU')
        # The largest IB MTU a 1500-byte link carries is accepted.
        attr.path_mtu = e.IBV_MTU_1024
        qp.modify(attr, mask)
        want(qp_state(qp) == e.IBV_QPS_RTR, 'RTR with path MTU 1024 refused')
        qp.close()


@check
def qp_full_rc_path_and_query():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        qp = rc_qp(pd, cq)
        to_rts(ctx, qp)
        attr, _ = qp.query(e.IBV_QP_STATE | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
                           e.IBV_QP_TIMEOUT | e.IBV_QP_AV)
        want(attr.qp_state == e.IBV_QPS_RTS, f'state {attr.qp_state}')
        want(attr.path_mtu == e.IBV_MTU_1024, f'mtu {attr.path_mtu}')
        want(attr.dest_qp_num == qp.qp_num, 'dest qpn')
        want(attr.timeout == 14, f'timeout {attr.timeout}')
        # RTS → SQD → RTS, then → RESET discards everything.
        qp.modify(QPAttr(qp_state=e.IBV_QPS_SQD), e.IBV_QP_STATE)
        want(qp_state(qp) == e.IBV_QPS_SQD, 'not in SQD')
        qp.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
        qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
        want(qp_state(qp) == e.IBV_QPS_RESET, 'not in RESET')
        qp.close()


@check
def qp_to_error_flushes_every_receive():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 32) as cq:
        qp = rc_qp(pd, cq, recv_wr=16)
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        # Receives cannot be posted in RESET; from INIT on they can.
        expect_errno(errno.EINVAL, post_recv, qp, mr, 1)
        to_init(qp)
        for i in range(10):
            post_recv(qp, mr, 100 + i)
        n, _ = cq.poll(1)
        want(n == 0, 'completion before the QP left RESET')
        to_err(qp)
        n, wcs = cq.poll(32)
        want(n == 10, f'{n} flushed completions, want 10')
        for i, w in enumerate(wcs):
            want(w.status == e.IBV_WC_WR_FLUSH_ERR, f'status {w.status}')
            want(w.wr_id == 100 + i and w.qp_num == qp.qp_num, 'wrong wr_id/qp_num')
        # A receive posted to a QP already in ERR is flushed too.
        post_recv(qp, mr, 999)
        n, wcs = cq.poll(4)
        want(n == 1 and wcs[0].wr_id == 999 and wcs[0].status == e.IBV_WC_WR_FLUSH_ERR,
             f'receive posted in ERR: {n} completions')
        qp.close()
        mr.close()


@check
def qp_destroy_while_busy():
    """Destroying a QP with work outstanding discards it: no completion
    appears afterwards, and the CQ stays usable."""
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 64) as cq:
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        qp = rc_qp(pd, cq, send_wr=16, recv_wr=16)
        to_init(qp)
        for i in range(8):
            post_recv(qp, mr, i)
        qp.close()
        n, _ = cq.poll(64)
        want(n == 0, f'{n} completions from a destroyed QP')
        qp = rc_qp(pd, cq)
        to_init(qp)
        post_recv(qp, mr, 5)
        to_err(qp)
        n, wcs = cq.poll(4)
        want(n == 1 and wcs[0].wr_id == 5, 'CQ unusable after a busy QP was destroyed')
        qp.close()
        mr.close()


# --- SRQ -----------------------------------------------------------------

@check
def srq_bad_sizes_limit_and_resize():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        a = ctx.query_device()
        expect_errno(errno.EINVAL, SRQ, pd, SrqInitAttr(SrqAttr(max_wr=0, max_sge=1)))
        expect_errno(errno.EINVAL, SRQ, pd, SrqInitAttr(SrqAttr(max_wr=a.max_srq_wr + 1, max_sge=1)))
        expect_errno(errno.EINVAL, SRQ, pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=a.max_srq_sge + 1)))
        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=10, max_sge=2)))
        q = srq.query()
        want(q.max_wr >= 10 and q.max_sge >= 2, f'query {q.max_wr}/{q.max_sge}')
        expect_errno(errno.EINVAL, srq.modify, SrqAttr(srq_limit=q.max_wr + 1), e.IBV_SRQ_LIMIT)
        srq.modify(SrqAttr(srq_limit=3), e.IBV_SRQ_LIMIT)
        want(srq.query().srq_limit == 3, 'limit not kept')
        srq.modify(SrqAttr(max_wr=100), e.IBV_SRQ_MAX_WR)
        want(srq.query().max_wr >= 100, 'resize not kept')
        # A resize whose new limit does not fit fails and changes nothing.
        before = srq.query().max_wr
        expect_errno(errno.EINVAL, srq.modify, SrqAttr(max_wr=20, srq_limit=500),
                     e.IBV_SRQ_MAX_WR | e.IBV_SRQ_LIMIT)
        want(srq.query().max_wr == before and srq.query().srq_limit == 3, 'failed modify changed the SRQ')
        srq.close()


# --- MR and MW -------------------------------------------------------------

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def anon_map(length, prot):
    addr = libc.mmap(None, length, prot, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    want(addr not in (None, ctypes.c_void_p(-1).value), 'mmap failed')
    return addr


@check
def mr_access_flag_rules():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        # Remote write / atomic without local write: EINVAL (IBTA C10-88).
        expect_errno(errno.EINVAL, MR, pd, 4096, e.IBV_ACCESS_REMOTE_WRITE)
        expect_errno(errno.EINVAL, MR, pd, 4096, e.IBV_ACCESS_REMOTE_ATOMIC)
        # On-demand paging is not supported.
        expect_errno(errno.EOPNOTSUPP, MR, pd, 4096, e.IBV_ACCESS_ON_DEMAND | e.IBV_ACCESS_LOCAL_WRITE)
        for acc in (0, e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_READ,
                    e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_ATOMIC
                    | e.IBV_ACCESS_MW_BIND):
            mr = MR(pd, 8192, acc)
            want(mr.lkey != 0 and (mr.lkey >> 8) == (mr.rkey >> 8), 'bad keys')
            mr.close()


@check
def mr_keys_are_not_sequential():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        mrs = [MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE) for _ in range(16)]
        low = {mr.lkey & 0xff for mr in mrs}
        want(len({mr.lkey for mr in mrs}) == 16, 'duplicate keys')
        want(len(low) > 4, f'key bytes not random: {sorted(low)}')
        for mr in mrs:
            mr.close()


@check
def mr_over_unmapped_or_readonly_memory_fails():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        addr = anon_map(65536, mmap.PROT_READ | mmap.PROT_WRITE)
        libc.munmap(addr, 65536)
        expect_errno(errno.EFAULT, MR, pd, 65536, e.IBV_ACCESS_LOCAL_WRITE, address=addr)
        ro = anon_map(65536, mmap.PROT_READ)
        expect_errno(errno.EFAULT, MR, pd, 65536, e.IBV_ACCESS_LOCAL_WRITE, address=ro)
        MR(pd, 65536, 0, address=ro).close()  # read-only registration is fine
        libc.munmap(ro, 65536)


@check
def mr_length_and_address_overflow_fail():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        addr = anon_map(8192, mmap.PROT_READ | mmap.PROT_WRITE)
        # Longer than max_mr_size, zero length, and a range that wraps.
        expect_errno(errno.EINVAL, MR, pd, ctx.query_device().max_mr_size + 4096, 0, address=addr)
        expect_errno(errno.EINVAL, MR, pd, (1 << 64) - 4096, 0, address=addr)
        expect_errno((errno.EINVAL, errno.EFAULT), MR, pd, 8192, 0, address=(1 << 64) - 4096)
        libc.munmap(addr, 8192)


@check
def mr_rereg_translation_access_and_pd():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, PD(ctx) as pd2:
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        lkey = mr.lkey
        mr.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, pd, 0, 0,
                 e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ)
        addr = anon_map(8192, mmap.PROT_READ | mmap.PROT_WRITE)
        mr.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION, pd, addr, 8192, 0)
        mr.rereg(e.IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0)
        want(mr.lkey == lkey, 'in-place rereg changed the key')
        expect_errno(errno.EINVAL, mr.rereg, e.IBV_REREG_MR_CHANGE_ACCESS, pd, 0, 0,
                     e.IBV_ACCESS_REMOTE_WRITE)
        mr.close()
        libc.munmap(addr, 8192)


@check
def mw_type1_and_type2_alloc_dealloc():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        for t in (e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2):
            mws = [MW(pd, t) for _ in range(4)]
            want(len({mw.rkey for mw in mws}) == 4, 'duplicate MW rkeys')
            for mw in mws:
                mw.close()


def poll_one(cq):
    """The next completion, waiting up to 5 s (the engine runs the work
    request in the background)."""
    end = time.time() + 5
    while time.time() < end:
        n, wcs = cq.poll(1)
        if n:
            return wcs[0]
        time.sleep(0.0005)
    raise Fail('no completion')


@check
def mw_type1_bind_and_bind_rights():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        qp = rc_qp(pd, cq)
        to_rts(ctx, qp)
        acc = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND
        mr = MR(pd, 8192, acc)
        mw = MW(pd, e.IBV_MW_TYPE_1)
        old = mw.rkey
        info = MWBindInfo(mr, mr.buf, 4096, e.IBV_ACCESS_REMOTE_WRITE)
        qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED, wr_id=11))
        wc = poll_one(cq)
        want(wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_BIND_MW and wc.wr_id == 11,
             f'bind: status {wc.status} opcode {wc.opcode}')
        want(mw.rkey != old and (mw.rkey >> 8) == (old >> 8), 'rkey key byte not renewed')
        # A window outside the region: MW_BIND_ERR and the QP in ERR.
        bad = MWBindInfo(mr, mr.buf + 4096, 8192, 0)
        qp.bind_mw(mw, MWBind(bad, e.IBV_SEND_SIGNALED, wr_id=12))
        wc = poll_one(cq)
        want(wc.status == e.IBV_WC_MW_BIND_ERR, f'out of range: status {wc.status}')
        want(qp_state(qp) == e.IBV_QPS_ERR, 'QP not in ERR after a bind error')
        qp.close()
        # An MR without the MW_BIND right.
        qp = rc_qp(pd, cq)
        to_rts(ctx, qp)
        plain = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE)
        qp.bind_mw(mw, MWBind(MWBindInfo(plain, plain.buf, 4096, e.IBV_ACCESS_REMOTE_READ),
                              e.IBV_SEND_SIGNALED, wr_id=13))
        wc = poll_one(cq)
        want(wc.status == e.IBV_WC_MW_BIND_ERR and wc.wr_id == 13,
             f'MR without bind rights: status {wc.status}')
        qp.close()
        for o in (mw, mr, plain):
            o.close()


@check
def mw_type2_bind_invalidate_and_other_pd():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, PD(ctx) as pd2, CQ(ctx, 8) as cq:
        qp = rc_qp(pd, cq)
        to_rts(ctx, qp)
        mr = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND)
        mw = MW(pd, e.IBV_MW_TYPE_2)
        new_rkey = (mw.rkey & ~0xff) | ((mw.rkey + 1) & 0xff)
        wr = SendWR(wr_id=21, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, MWBindInfo(mr, mr.buf, 4096, e.IBV_ACCESS_REMOTE_READ))
        qp.post_send(wr)
        wc = poll_one(cq)
        want(wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_BIND_MW, f'type 2 bind: {wc.status}')
        inv = SendWR(wr_id=22, opcode=e.IBV_WR_LOCAL_INV, send_flags=e.IBV_SEND_SIGNALED,
                     imm_data=new_rkey)
        qp.post_send(inv)
        wc = poll_one(cq)
        want(wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_LOCAL_INV, f'invalidate: {wc.status}')
        qp.close()
        # A window of another PD cannot be bound through this QP.
        other = MW(pd2, e.IBV_MW_TYPE_2)
        qp = rc_qp(pd, cq)
        to_rts(ctx, qp)
        wr = SendWR(wr_id=23, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(other, MWBindInfo(mr, mr.buf, 4096, e.IBV_ACCESS_REMOTE_READ))
        qp.post_send(wr)
        wc = poll_one(cq)
        want(wc.status == e.IBV_WC_MW_BIND_ERR, f'other PD: status {wc.status}')
        qp.close()
        for o in (mw, other, mr):
            o.close()


# --- AH --------------------------------------------------------------------

@check
def ah_from_gid_and_bad_ah():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        idx, gid = roce_gid_index(ctx)
        ah = AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=idx)))
        ah.close()
        # An IPv6 (link-local) source GID with an IPv6 destination works; a
        # destination of the other family does not.
        v6 = next(i for i in range(ctx.query_port(1).gid_tbl_len)
                  if str(ctx.query_gid(1, i)).startswith('fe80'))
        v6gid = ctx.query_gid(1, v6)
        AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=v6gid, sgid_index=v6))).close()
        expect_errno(errno.EINVAL, AH, pd,
                     attr=AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=v6)))
        # RoCE needs a GRH.
        expect_errno(errno.EINVAL, AH, pd, attr=AHAttr(port_num=1, is_global=0, dlid=1))
    with Context(name=IWARP) as ctx, PD(ctx) as pd:
        expect_errno((errno.EOPNOTSUPP, errno.EINVAL), AH, pd,
                     attr=AHAttr(port_num=1, is_global=1, gr=GlobalRoute(sgid_index=0)))


@check
def resources_listed_by_rdma_tool():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        qp = rc_qp(pd, cq)
        mr = MR(pd, 4096, 0)
        out = subprocess.run(['rdma', 'resource', 'show', 'qp'], capture_output=True, text=True).stdout
        want(f'lqpn {qp.qp_num} ' in out, f'QP {qp.qp_num} not listed: {out}')
        out = subprocess.run(['rdma', 'resource', 'show', 'mr'], capture_output=True, text=True).stdout
        want(f'lkey 0x{mr.lkey:x}' in out, f'MR not listed: {out}')
        qp.close()
        mr.close()


# --- async events (each in its own process, under timeout) -----------------

def wait_event(ctx, want_type):
    ev = ctx.get_async_event()
    got = ev.event_type
    ev.ack()
    want(got == want_type, f'event {got}, want {want_type}')


@check
def event_sq_drained():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        qp = rc_qp(pd, cq)
        to_rts(ctx, qp)
        attr = QPAttr(qp_state=e.IBV_QPS_SQD)
        attr.en_sqd_async_notify = 1
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_EN_SQD_ASYNC_NOTIFY)
        wait_event(ctx, e.IBV_EVENT_SQ_DRAINED)
        qp.close()


@check
def event_last_wqe_reached():
    with Context(name=ROCE) as ctx, PD(ctx) as pd, CQ(ctx, 8) as cq:
        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
        qp = rc_qp(pd, cq, srq=srq)
        to_rts(ctx, qp)
        to_err(qp)
        wait_event(ctx, e.IBV_EVENT_QP_LAST_WQE_REACHED)
        qp.close()
        srq.close()


@check
def event_cq_overflow_is_cq_error():
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        cq = CQ(ctx, 2)
        qp = rc_qp(pd, cq, recv_wr=16)
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        to_init(qp)
        for i in range(cq.cqe + 4):
            post_recv(qp, mr, i, 8)
        to_err(qp)
        wait_event(ctx, e.IBV_EVENT_CQ_ERR)
        qp.close()
        mr.close()
        cq.close()


def flushed_receive_wakes_channel(wr_id, arm, between=lambda cq: None):
    """Arm a CQ with a completion channel (`arm(cq)`), run `between(cq)`,
    flush one receive into it, and expect exactly one event and that
    completion."""
    with Context(name=ROCE) as ctx, PD(ctx) as pd:
        ch = CompChannel(ctx)
        cq = CQ(ctx, 8, None, ch, 0)
        qp = rc_qp(pd, cq)
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        to_init(qp)
        post_recv(qp, mr, wr_id, 8)
        arm(cq)
        between(cq)
        to_err(qp)
        ch.get_cq_event(cq)
        cq.ack_events(1)
        n, wcs = cq.poll(4)
        want(n == 1 and wcs[0].wr_id == wr_id, f'{n} completions after the event')
        qp.close()
        mr.close()
        cq.close()
        ch.close()


@check
def event_completion_channel():
    """An armed CQ raises one completion event on its channel (here for a
    flushed receive: an error completion wakes a solicited-only arm too)."""
    flushed_receive_wakes_channel(7, lambda cq: cq.req_notify(solicited_only=True))


@check
def event_arm_survives_cq_resize():
    """An arm made before ibv_resize_cq still fires on the resized CQ."""
    flushed_receive_wakes_channel(8, lambda cq: cq.req_notify(), lambda cq: cq.resize(64))


def main():
    names = sys.argv[3:] or [n for n in CHECKS if not n.startswith('event_')]
    for name in names:
        try:
            CHECKS[name]()
            print(f'PASS {name}', flush=True)
        except Fail as ex:
            print(f'FAIL {name}: {ex}', flush=True)
        except Exception as ex:  # noqa: BLE001 (any error is this check's FAIL)
            print(f'FAIL {name}: {type(ex).__name__}: {ex}', flush=True)
            traceback.print_exc(file=sys.stdout)


if __name__ == '__main__':
    main()
