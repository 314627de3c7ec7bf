#!/usr/bin/python3
"""Live QPs for the hostile-packet tests (hostile.sh), on a RoCE device.

usage: hostile_target.py DEV PEER_IP STATE_FILE
Creates an RC QP in RTS "connected" to a peer that does not exist (PEER_IP,
QPN 0x123) and a UD QP in RTS (Q_Key 0x11111111) with receives posted, writes
their numbers and PSNs to STATE_FILE as `key=value` lines, then waits for a
line on stdin.  It then prints what its QPs saw ("ud_recv N", "ud_bad_data
N": datagrams whose bytes are not one of hostile_inject.py's, "rc_state S",
"rc_completions N") and exits.
"""
import os
import select
import sys

from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE
import pyverbs.enums as e

dev, peer_ip, state_file = sys.argv[1:4]
ctx = Context(name=dev)
pd = PD(ctx)
# Each UD receive its own buffer (a GRH and up to 4 KiB: hostile_inject.py's
# fragmented datagram), so every datagram can be checked at the end.
UD_BUF, RC_BUF = 4352, 0x48000
mr = MR(pd, 1 << 19, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
        e.IBV_ACCESS_REMOTE_READ)
cq = CQ(ctx, 256)
idx = next(i for i in range(ctx.query_port(1).gid_tbl_len)
           if str(ctx.query_gid(1, i)).startswith('0000:0000:0000:0000:0000:ffff'))
cap = QPCap(max_send_wr=16, max_recv_wr=64, max_send_sge=1, max_recv_sge=1)

# The peer's GID: ::ffff:PEER_IP.
peer = '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' % tuple(int(x) for x in peer_ip.split('.'))
from pyverbs.addr import GID  # noqa: E402
dgid = GID(peer)

RQ_PSN, SQ_PSN = 0x1000, 0x2000
rc = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
a = QPAttr(qp_state=e.IBV_QPS_INIT)
a.pkey_index, a.port_num = 0, 1
a.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ
rc.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
a = QPAttr(qp_state=e.IBV_QPS_RTR)
a.path_mtu, a.dest_qp_num, a.rq_psn = e.IBV_MTU_1024, 0x123, RQ_PSN
a.max_dest_rd_atomic, a.min_rnr_timer = 4, 12
a.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=dgid, sgid_index=idx))
rc.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
          e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
a = QPAttr(qp_state=e.IBV_QPS_RTS)
a.timeout, a.retry_cnt, a.rnr_retry, a.sq_psn, a.max_rd_atomic = 14, 7, 7, SQ_PSN, 4
rc.modify(a, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
          e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)

QKEY = 0x11111111
ud = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap))
a = QPAttr(qp_state=e.IBV_QPS_INIT)
a.pkey_index, a.port_num, a.qkey = 0, 1, QKEY
ud.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
ud.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
a = QPAttr(qp_state=e.IBV_QPS_RTS)
a.sq_psn = 0
ud.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
for i in range(64):
    ud.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + i * UD_BUF, UD_BUF, mr.lkey)]))
for i in range(16):
    rc.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[SGE(mr.buf + RC_BUF, 2048, mr.lkey)]))
# What hostile_inject.py's valid datagrams carry.
GOOD = (b'hostile!' * 8, bytes(i % 251 for i in range(4030)))

with open(state_file, 'w') as f:
    f.write('rc_qpn=%d\nud_qpn=%d\nrq_psn=%d\nsq_psn=%d\nqkey=%d\nrkey=%d\naddr=%d\n' %
            (rc.qp_num, ud.qp_num, RQ_PSN, SQ_PSN, QKEY, mr.rkey, mr.buf))

# (At most 5 minutes, longer on a slower kernel: SOFTRNIC_SLOW.)
select.select([sys.stdin], [], [], 300 * int(os.environ.get('SOFTRNIC_SLOW', '1')))
ud_recv, ud_bad_data, rc_comp, bad = 0, 0, 0, []
while True:
    n, wcs = cq.poll(16)
    if n <= 0:
        break
    for wc in wcs:
        if wc.qp_num == ud.qp_num and wc.status == e.IBV_WC_SUCCESS:
            ud_recv += 1
            data = mr.read(wc.byte_len - 40, wc.wr_id * UD_BUF + 40)
            ud_bad_data += data not in GOOD
        elif wc.qp_num == rc.qp_num:
            rc_comp += 1
        else:
            bad.append((wc.qp_num, wc.status))
attr, _ = rc.query(e.IBV_QP_STATE)
print('ud_recv %d' % ud_recv)
print('ud_bad_data %d' % ud_bad_data)
print('rc_completions %d' % rc_comp)
print('rc_state %d' % attr.qp_state)
print('other %s' % bad)
