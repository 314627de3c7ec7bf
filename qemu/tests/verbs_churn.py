#!/usr/bin/python3
"""One worker of the concurrent churn test (verbs.sh): create, use and
destroy CQs, QPs, MRs and MWs in a random order on one device, checking
every flush, while other workers do the same.

usage: verbs_churn.py DEVICE SEED ITERATIONS   — prints "done N" at the end.
       verbs_churn.py DEVICE SEED COUNT hold  — creates COUNT each of CQs, QPs
       (in INIT, receives posted), MRs and MWs, all alive at once, prints
       "holding", waits a second (long enough to be killed there), then
       destroys them in a random order and prints "done"."""

import random
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR, MW
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR

dev, seed, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
ctx = Context(name=dev)
pd = PD(ctx)

if sys.argv[4:] == ['hold']:
    objs = []
    for i in range(iters):
        cq = CQ(ctx, rnd.randint(1, 64))
        kind = rnd.choice([e.IBV_QPT_RC, e.IBV_QPT_UC, e.IBV_QPT_UD])
        qp = QP(pd, QPInitAttr(qp_type=kind, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND)
        mw = MW(pd, rnd.choice([e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2]))
        if kind != e.IBV_QPT_UD and rnd.random() < 0.5:
            a = QPAttr(qp_state=e.IBV_QPS_INIT)
            a.pkey_index, a.port_num, a.qp_access_flags = 0, 1, 0
            qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
            qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
        objs += [(2, qp), (2, mw), (1, cq), (1, mr)]
    print('holding', flush=True)
    time.sleep(1)
    # QPs and MWs before the CQs and MRs they use; otherwise any order.
    rnd.shuffle(objs)
    for _, o in sorted(objs, key=lambda x: -x[0]):
        o.close()
    print('done %d' % len(objs))
    sys.exit(0)
keep = []
flushed = 0
for i in range(iters):
    cq = CQ(ctx, rnd.randint(16, 300))
    depth = rnd.randint(1, 16)
    cap = QPCap(max_send_wr=rnd.randint(1, 64), max_recv_wr=depth)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index, a.port_num, a.qp_access_flags = 0, 1, 0
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    mr = MR(pd, 4096 * rnd.randint(1, 8), e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND)
    mw = MW(pd, rnd.choice([e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2]))
    posted = rnd.randint(0, depth)
    for k in range(posted):
        qp.post_recv(RecvWR(wr_id=k, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
    if rnd.random() < 0.3:
        cq.resize(rnd.randint(16, 600))
    if rnd.random() < 0.6:
        qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
        n, wcs = cq.poll(64)
        if n != posted or any(w.status != e.IBV_WC_WR_FLUSH_ERR for w in wcs):
            sys.exit(f'iteration {i}: {n} flushed of {posted}')
        flushed += n
    keep.append(mr)
    if len(keep) > 5:
        keep.pop(0).close()
    qp.close()
    mw.close()
    cq.close()
print(f'done {flushed}')
