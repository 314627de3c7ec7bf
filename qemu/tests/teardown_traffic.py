#!/usr/bin/python3
"""RDMA traffic from outside the namespaces it crosses (hostile.sh).

usage: teardown_traffic.py DEV_A GID_A DEV_B GID_B SECONDS
An RC QP on DEV_A streams 16 KiB RDMA WRITEs and SENDs to one on DEV_B, 16
in flight, for SECONDS or until the QPs fail.  The process itself stays in
the initial network namespace, so the test can delete the namespace or the
netdev under DEV_B while the data moves.  Prints "moving" once 32 WRITEs
have completed, then, at the end, how many completions of each status each
side saw ("A {status: n}", "B {...}") or the error that ended it.
"""
import os
import sys
import time

from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rc_pair import End, connect_pair  # noqa: E402

dev_a, gid_a, dev_b, gid_b, seconds = sys.argv[1:6]
A, B = End(dev_a, int(gid_a)), End(dev_b, int(gid_b))
qa, cqa, qb, cqb = connect_pair(A, B, recv_depth=64)
SIZE, DEPTH = 16384, 16
seen_a, seen_b = {}, {}
inflight, done, moving = 0, 0, False
end = time.time() + float(seconds)
try:
    for i in range(64):
        qb.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(B.mr.buf + 65536, 1024, B.mr.lkey)]))
    while time.time() < end:
        while inflight < DEPTH:
            if done % 8 == 7:
                wr = SendWR(wr_id=done, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(A.mr.buf, 1024, A.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
            else:
                wr = SendWR(wr_id=done, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                            sg=[SGE(A.mr.buf, SIZE, A.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(B.mr.rkey, B.mr.buf + (done % 4) * SIZE)
            qa.post_send(wr)
            inflight += 1
        n, wcs = cqa.poll(DEPTH)
        for wc in wcs[:max(n, 0)]:
            seen_a[wc.status] = seen_a.get(wc.status, 0) + 1
            inflight -= 1
            done += 1
        n, wcs = cqb.poll(16)
        for wc in wcs[:max(n, 0)]:
            seen_b[wc.status] = seen_b.get(wc.status, 0) + 1
            if wc.status == e.IBV_WC_SUCCESS:
                qb.post_recv(RecvWR(wr_id=0, num_sge=1, sg=[SGE(B.mr.buf + 65536, 1024, B.mr.lkey)]))
        if not moving and seen_a.get(e.IBV_WC_SUCCESS, 0) >= 32:
            moving = True
            print('moving', flush=True)
        if any(s != e.IBV_WC_SUCCESS for s in seen_a):
            break
        if n <= 0:
            time.sleep(0.001)
except Exception as ex:  # the device went away under us: say how
    print('ended by %s: %s' % (type(ex).__name__, ex), flush=True)
print('A %s' % seen_a)
print('B %s' % seen_b, flush=True)
