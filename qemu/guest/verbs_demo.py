#!/usr/bin/python3
"""The main job's verbs workload: on a RoCE and an iWARP softrnic device,
create every verbs object through libibverbs and the softrnic provider, walk
an RC QP to RTS, bind a memory window, post receives and flush them, and print
what happened.  Every completion and event it waits for is polled until it
arrives or a stated timeout passes; then it says which one did not come and
exits 1.  Lines "ROW what | result" are the main job's result table."""

import os
import signal
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR

# Seconds to wait for any one completion or event (stretched on a slower
# kernel, as the guest suites do).
TIMEOUT = 10 * int(os.environ.get('SOFTRNIC_SLOW', '1'))


def fail(msg):
    print(f'FAILED: {msg}', flush=True)
    sys.exit(1)


def wait_wcs(cq, want, what):
    """Poll CQ until WANT completions arrived; fail naming WHAT after TIMEOUT."""
    got = []
    end = time.monotonic() + TIMEOUT
    while len(got) < want:
        n, wcs = cq.poll(want - len(got))
        got += wcs[:n]
        if n == 0:
            if time.monotonic() > end:
                fail(f'{what}: {len(got)} of {want} completions after {TIMEOUT} s')
            time.sleep(0.001)
    return got


class Timeout(Exception):
    pass


def on_alarm(_sig, _frame):
    raise Timeout()


def wait_cq_event(ch, cq, what):
    """ibv_get_cq_event blocks; an alarm bounds it."""
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TIMEOUT)
    try:
        ch.get_cq_event(cq)
    except (Timeout, PyverbsError):
        fail(f'{what}: no completion event after {TIMEOUT} s')
    finally:
        signal.alarm(0)
    cq.ack_events(1)


def status_name(s):
    return {e.IBV_WC_SUCCESS: 'SUCCESS', e.IBV_WC_WR_FLUSH_ERR: 'WR_FLUSH_ERR'}.get(s, f'status {s}')


roce, iwarp = sys.argv[1], sys.argv[2]

with Context(name=roce) as ctx, PD(ctx) as pd:
    ch = CompChannel(ctx)
    cq = CQ(ctx, 256, None, ch, 0)
    mr = MR(pd, 4 << 20, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_MW_BIND)
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=128, max_sge=1)))
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=64, max_recv_wr=128, max_send_sge=2, max_recv_sge=2)))
    gid_index = next((i for i in range(16)
                      if str(ctx.query_gid(1, i)).startswith('0000:0000:0000:0000:0000:ffff')), None)
    if gid_index is None:
        fail(f'{roce} has no IPv4 RoCE GID among its first 16')
    gid = ctx.query_gid(1, gid_index)
    ah = AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index)))
    print(f'{roce}: PD, CQ ({cq.cqe} CQEs, completion channel), MR 4 MiB lkey 0x{mr.lkey:x}, '
          f'SRQ, RC QP {qp.qp_num}, AH to {gid} (GID index {gid_index})')

    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index, a.port_num, a.qp_access_flags = 0, 1, e.IBV_ACCESS_REMOTE_WRITE
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    a = QPAttr(qp_state=e.IBV_QPS_RTR)
    a.path_mtu, a.dest_qp_num, a.rq_psn, a.max_dest_rd_atomic, a.min_rnr_timer = e.IBV_MTU_1024, qp.qp_num, 0, 1, 12
    a.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
              e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.timeout, a.retry_cnt, a.rnr_retry, a.sq_psn, a.max_rd_atomic = 14, 7, 7, 0, 1
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
              e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
    state = qp.query(e.IBV_QP_STATE)[0].qp_state
    if state != e.IBV_QPS_RTS:
        fail(f'QP {qp.qp_num} is in state {state} after the modify to RTS')
    print(f'{roce}: QP {qp.qp_num} RESET -> INIT -> RTR -> RTS (state now {state})')

    mw = MW(pd, e.IBV_MW_TYPE_1)
    qp.bind_mw(mw, MWBind(MWBindInfo(mr, mr.buf, 1 << 20, e.IBV_ACCESS_REMOTE_WRITE), e.IBV_SEND_SIGNALED, 1))
    wc = wait_wcs(cq, 1, 'the memory window bind')[0]
    if wc.status != e.IBV_WC_SUCCESS:
        fail(f'the memory window bind completed with {status_name(wc.status)}')
    print(f'{roce}: MW bound over 1 MiB of the MR: 1 completion, status {status_name(wc.status)}, '
          f'rkey 0x{mw.rkey:x}')

    for i in range(100):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + 4096 * i, 4096, mr.lkey)]))
    cq.req_notify()
    qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    wait_cq_event(ch, cq, 'the flushed receives')
    wcs = wait_wcs(cq, 100, 'the flushed receives')
    flushed = sum(1 for w in wcs if w.status == e.IBV_WC_WR_FLUSH_ERR)
    in_order = [w.wr_id for w in wcs] == list(range(100))
    if flushed != 100 or not in_order:
        fail(f'100 receives flushed: {flushed} WR_FLUSH_ERR, wr_ids in order: {in_order}')
    print(f'{roce}: 100 receives posted, QP -> ERR: completion event received, '
          f'100 completions polled, {flushed} WR_FLUSH_ERR, in order')
    print(subprocess.run(['rdma', 'resource', 'show', 'qp', 'link', f'{roce}/1'],
                         capture_output=True, text=True).stdout.rstrip())
    for o in (qp, mw, ah, srq, mr, cq, ch):
        o.close()
    print(f'ROW verbs objects ({roce}) | PD, CQ with a completion channel, 4 MiB MR, SRQ, AH; RC QP '
          f'RESET->INIT->RTR->RTS; type 1 MW bound (SUCCESS); 100 receives flushed (100 WR_FLUSH_ERR, '
          f'in order, one event); all destroyed')

with Context(name=iwarp) as ctx, PD(ctx) as pd, CQ(ctx, 64) as cq:
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=16, max_recv_wr=16)))
    state = qp.query(e.IBV_QP_STATE)[0].qp_state
    print(f'{iwarp}: RC QP {qp.qp_num} created, state {state} (iWARP QPs start idle = INIT)')
    qp.close()
    print(f'ROW verbs objects ({iwarp}) | PD, CQ, RC QP (created in INIT, as iWARP QPs are); all destroyed')
