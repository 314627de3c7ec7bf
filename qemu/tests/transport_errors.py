#!/usr/bin/python3
"""RC transport errors on a softrnic_roce device, end to end (hostile.sh).

usage: transport_errors.py DEV
Two RC QPs on DEV connected to each other (the device's own address), and
one connected to a peer that does not exist.  Checks, printing "PASS name" /
"FAIL name: why":
  retry_exhausted   a SEND to nobody ends in IBV_WC_RETRY_EXC_ERR within the
                    time timeout and retry_cnt allow; the QP is in ERR
  rnr_exhausted     a SEND to a QP with no receive posted ends in
                    IBV_WC_RNR_RETRY_EXC_ERR after rnr_retry RNR NAKs
  bad_rkey          an RDMA WRITE with a wrong rkey: IBV_WC_REM_ACCESS_ERR at
                    the requester, the responder QP in ERR
  no_remote_write   an RDMA WRITE to a QP without remote write: the same
"""
import os
import sys
import time

from pyverbs.addr import GID
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rc_pair import to_rts, wait_wc  # noqa: E402

dev = sys.argv[1]
ctx = Context(name=dev)
pd = PD(ctx)
mr = MR(pd, 1 << 16, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
idx, own = next((i, ctx.query_gid(1, i)) for i in range(ctx.query_port(1).gid_tbl_len)
                if str(ctx.query_gid(1, i)).startswith('0000:0000:0000:0000:0000:ffff'))


def qp(cq):
    return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                             cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)))


def connect(q, dest_qpn, dgid, access=e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE,
            timeout=10, retry=3, rnr=3, min_rnr=1):
    # (hop limit 1: the GRH default these tests always used.)
    to_rts(q, idx, dgid, dest_qpn, access, timeout=timeout, retry=retry, rnr=rnr, min_rnr=min_rnr,
           hop_limit=1)


def state(q):
    attr, _ = q.query(e.IBV_QP_STATE)
    return attr.qp_state


def send(q, opcode=e.IBV_WR_SEND, rkey=0, raddr=0):
    wr = SendWR(opcode=opcode, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    if opcode == e.IBV_WR_RDMA_WRITE:
        wr.set_wr_rdma(rkey, raddr)
    q.post_send(wr)


def check(name, fn):
    try:
        fn()
        print('PASS %s' % name, flush=True)
    except AssertionError as ex:
        print('FAIL %s: %s' % (name, ex), flush=True)
    except Exception as ex:  # noqa: BLE001 (any error is this check's FAIL)
        print('FAIL %s: %s: %s' % (name, type(ex).__name__, ex), flush=True)


def retry_exhausted():
    cq = CQ(ctx, 8)
    q = qp(cq)
    # 10.88.0.2 (hb) has no RoCE device; timeout 10 = 4.2 ms, 3 retries.
    connect(q, 0x123, GID('0000:0000:0000:0000:0000:ffff:0a58:0002'), timeout=10, retry=3)
    t0 = time.time()
    send(q)
    wc = wait_wc(cq, 10)
    took = time.time() - t0
    assert wc is not None, 'no completion in 10 s'
    assert wc.status == e.IBV_WC_RETRY_EXC_ERR, 'status %d' % wc.status
    # (1 + 3) timeouts of >= 4.2 ms, with timer granularity; well under 10 s.
    assert took >= 0.016, 'after %.3f s: too early for 4 timeouts' % took
    assert state(q) == e.IBV_QPS_ERR, 'QP state %d' % state(q)


def pair(access_b=e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE, rnr=3):
    # timeout 14 (67 ms): the NAKs these tests wait for must not lose the
    # race against the ACK timeout on a slow (debug) kernel.
    cq_a, cq_b = CQ(ctx, 8), CQ(ctx, 8)
    a, b = qp(cq_a), qp(cq_b)
    connect(a, b.qp_num, own, rnr=rnr, timeout=14)
    connect(b, a.qp_num, own, access=access_b, rnr=rnr, timeout=14)
    return (a, cq_a), (b, cq_b)


def rnr_exhausted():
    (a, cq_a), (b, _) = pair(rnr=2)
    send(a)  # b has no receive posted
    wc = wait_wc(cq_a, 10)
    assert wc is not None, 'no completion in 10 s'
    assert wc.status == e.IBV_WC_RNR_RETRY_EXC_ERR, 'status %d' % wc.status
    assert state(a) == e.IBV_QPS_ERR, 'requester state %d' % state(a)
    assert state(b) == e.IBV_QPS_RTS, 'responder state %d (RNR is not an error there)' % state(b)


def bad_rkey():
    (a, cq_a), (b, _) = pair()
    send(a, e.IBV_WR_RDMA_WRITE, rkey=mr.rkey ^ 0x5500, raddr=mr.buf)
    wc = wait_wc(cq_a, 10)
    assert wc is not None, 'no completion in 10 s'
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, 'status %d' % wc.status
    assert state(a) == e.IBV_QPS_ERR, 'requester state %d' % state(a)
    assert state(b) == e.IBV_QPS_ERR, 'responder state %d' % state(b)


def no_remote_write():
    (a, cq_a), (b, _) = pair(access_b=e.IBV_ACCESS_LOCAL_WRITE)
    send(a, e.IBV_WR_RDMA_WRITE, rkey=mr.rkey, raddr=mr.buf)
    wc = wait_wc(cq_a, 10)
    assert wc is not None, 'no completion in 10 s'
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, 'status %d' % wc.status
    assert state(b) == e.IBV_QPS_ERR, 'responder state %d' % state(b)


check('transport_retry_exhausted', retry_exhausted)
check('transport_rnr_exhausted', rnr_exhausted)
check('transport_bad_rkey', bad_rkey)
check('transport_no_remote_write', no_remote_write)
