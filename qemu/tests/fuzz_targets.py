#!/usr/bin/python3
"""QPs in every state for the packet fuzzer (hostile.sh, case fuzz_states).

usage: fuzz_targets.py DEV PEER_IP STATE_FILE
Creates RC, UC and UD QPs in RESET, INIT, RTR, RTS, SQD and ERR (RC and UC
"connected" to QPN 0x123 at PEER_IP, where the injector sends from), an RC
QP on an SRQ, receives posted wherever the state allows, an MR with every
remote right and a bound type 2 memory window.  Writes the targets to
STATE_FILE (`qpn_TYPE_STATE=N`, rq_psn, qkey, rkey, addr, mw_rkey, ud_qpn),
then waits for a line on stdin.  Then it prints each QP's state and how many
completions it saw, destroys everything, and checks that the device still
moves data: an RC SEND and RDMA WRITE between two fresh QPs on the device's
own address, byte for byte ("healthy" or "FAIL ...").
"""
import os
import select
import sys
import time

from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBindInfo
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e

dev, peer_ip, state_file = sys.argv[1:4]
ctx = Context(name=dev)
pd = PD(ctx)
ALL = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
       e.IBV_ACCESS_REMOTE_ATOMIC | e.IBV_ACCESS_MW_BIND)
mr = MR(pd, 1 << 16, ALL)
cq = CQ(ctx, 4096)
idx, own = next((i, ctx.query_gid(1, i)) for i in range(ctx.query_port(1).gid_tbl_len)
                if str(ctx.query_gid(1, i)).startswith('0000:0000:0000:0000:0000:ffff'))
peer = GID('0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' % tuple(int(x) for x in peer_ip.split('.')))
RQ_PSN, SQ_PSN, QKEY = 0x1000, 0x2000, 0x11111111
TYPES = {'rc': e.IBV_QPT_RC, 'uc': e.IBV_QPT_UC, 'ud': e.IBV_QPT_UD}
ACCESS = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ | \
    e.IBV_ACCESS_REMOTE_ATOMIC


def new_qp(kind, srq=None):
    cap = QPCap(max_send_wr=16, max_recv_wr=0 if srq else 128, max_send_sge=1, max_recv_sge=1)
    return QP(pd, QPInitAttr(qp_type=TYPES[kind], scq=cq, rcq=cq, srq=srq, cap=cap))


def to_init(q, kind):
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index, a.port_num = 0, 1
    if kind == 'ud':
        a.qkey = QKEY
        q.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    else:
        a.qp_access_flags = ACCESS if kind == 'rc' else e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE
        q.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)


def to_rtr(q, kind, dest=0x123, dgid=peer, rq_psn=RQ_PSN):
    a = QPAttr(qp_state=e.IBV_QPS_RTR)
    if kind == 'ud':
        q.modify(a, e.IBV_QP_STATE)
        return
    a.path_mtu, a.dest_qp_num, a.rq_psn = e.IBV_MTU_1024, dest, rq_psn
    a.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=dgid, sgid_index=idx, hop_limit=64))
    mask = e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN
    if kind == 'rc':
        a.max_dest_rd_atomic, a.min_rnr_timer = 4, 1
        mask |= e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER
    q.modify(a, mask)


def to_rts(q, kind):
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.sq_psn = SQ_PSN
    mask = e.IBV_QP_STATE | e.IBV_QP_SQ_PSN
    if kind == 'rc':
        a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic = 14, 7, 7, 4
        mask |= e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC
    q.modify(a, mask)


def post_recvs(q, n=128):
    for i in range(n):
        q.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + (i % 16) * 4096, 4096, mr.lkey)]))


qps = {}
for kind in TYPES:
    for st in ('reset', 'init', 'rtr', 'rts', 'sqd', 'err'):
        q = new_qp(kind)
        if st != 'reset':
            to_init(q, kind)
            post_recvs(q)
        if st in ('rtr', 'rts', 'sqd', 'err'):
            to_rtr(q, kind)
        if st in ('rts', 'sqd', 'err'):
            to_rts(q, kind)
        if st == 'sqd':
            q.modify(QPAttr(qp_state=e.IBV_QPS_SQD), e.IBV_QP_STATE)
        if st == 'err':
            q.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
        qps['%s_%s' % (kind, st)] = q

srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=256, max_sge=1, srq_limit=8)))
for i in range(256):
    srq.post_recv(RecvWR(wr_id=1000 + i, num_sge=1, sg=[SGE(mr.buf + (i % 16) * 4096, 4096, mr.lkey)]))
q = new_qp('rc', srq)
to_init(q, 'rc')
to_rtr(q, 'rc')
to_rts(q, 'rc')
qps['rc_srq'] = q

# A type 2 window bound on the RTS RC QP (its rkey is a fuzzing target too).
mw = MW(pd, e.IBV_MW_TYPE_2)
bind = SendWR(opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
bind.set_bind_wr(mw, MWBindInfo(mr, mr.buf, 4096, e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ))
qps['rc_rts'].post_send(bind)

with open(state_file + '.tmp', 'w') as f:
    for name, q in qps.items():
        f.write('qpn_%s=%d\n' % (name, q.qp_num))
    f.write('rq_psn=%d\nsq_psn=%d\nqkey=%d\nrkey=%d\naddr=%d\nmw_rkey=%d\nud_qpn=%d\nrc_qpn=%d\n' %
            (RQ_PSN, SQ_PSN, QKEY, mr.rkey, mr.buf, mw.rkey, qps['ud_rts'].qp_num, qps['rc_rts'].qp_num))
os.rename(state_file + '.tmp', state_file)

select.select([sys.stdin], [], [], 600)
seen = {}
while True:
    n, wcs = cq.poll(64)
    if n <= 0:
        break
    for wc in wcs:
        seen[wc.qp_num] = seen.get(wc.qp_num, 0) + 1
for name, q in qps.items():
    attr, _ = q.query(e.IBV_QP_STATE)
    print('%s state %d completions %d' % (name, attr.qp_state, seen.get(q.qp_num, 0)))
for q in qps.values():
    q.close()
srq.close()
mw.close()


# The device still works: SEND and RDMA WRITE between two new QPs on its own address.
def healthy():
    cqa, cqb = CQ(ctx, 16), CQ(ctx, 16)
    a = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqa, rcq=cqa,
                          cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)))
    b = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqb, rcq=cqb,
                          cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)))
    for x, y in ((a, b), (b, a)):
        to_init(x, 'rc')
        to_rtr(x, 'rc', dest=y.qp_num, dgid=own, rq_psn=SQ_PSN)
        to_rts(x, 'rc')
    src = MR(pd, 8192, ALL)
    src.write(bytes(range(256)) * 16, 4096, 0)
    src.write(b'\x3c' * 4096, 4096, 4096)
    b.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf, 4096, mr.lkey)]))
    a.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf, 4096, src.lkey)],
                       send_flags=e.IBV_SEND_SIGNALED))
    w = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf + 4096, 4096, src.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    w.set_wr_rdma(mr.rkey, mr.buf + 8192)
    a.post_send(w)
    done, end = 0, time.time() + 20
    while done < 2 and time.time() < end:
        n, wcs = cqa.poll(2)
        for wc in wcs[:max(n, 0)]:
            if wc.status != e.IBV_WC_SUCCESS:
                return 'send completion status %d' % wc.status
            done += 1
    if done < 2:
        return 'only %d of 2 sends completed' % done
    if mr.read(4096, 0) != bytes(range(256)) * 16:
        return 'SEND data differ'
    if mr.read(4096, 8192) != b'\x3c' * 4096:
        return 'WRITE data differ'
    return None


why = healthy()
print('healthy' if why is None else 'FAIL ' + why)
