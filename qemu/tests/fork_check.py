#!/usr/bin/python3
"""fork after memory registration (hostile.sh).

usage: fork_check.py DEV GID_INDEX
Two RC QPs on DEV connected to each other over its own address.  The parent
registers its buffer, then forks four children: each writes garbage over its
copy of the registered buffer, polls the inherited CQ, allocates and frees a
PD on the inherited context, and exits.  The parent then writes new bytes
into its buffer and sends it with an RDMA WRITE: the peer must receive the
parent's new bytes (the registration still maps the parent's pages, not a
page a child's copy-on-write left behind).  Prints PASS/FAIL lines.
"""
import os
import sys

from pyverbs.pd import PD
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rc_pair import End, connect_pair, wait_wc  # noqa: E402

dev, gid = sys.argv[1], int(sys.argv[2])
A, B = End(dev, gid), End(dev, gid)
qa, cqa, qb, cqb = connect_pair(A, B)
SIZE = 3 * 4096 + 100                      # several pages, one partly
failed = 0


def write_and_check(pattern, what):
    global failed
    A.mr.write(pattern, SIZE, 0)
    wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(A.mr.buf, SIZE, A.mr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(B.mr.rkey, B.mr.buf)
    qa.post_send(wr)
    wc = wait_wc(cqa, 20)
    if wc is None or wc.status != e.IBV_WC_SUCCESS:
        print('FAIL fork_%s: RDMA WRITE %s' % (what, 'timed out' if wc is None else 'status %d' % wc.status))
        failed += 1
    elif B.mr.read(SIZE, 0) != pattern:
        print('FAIL fork_%s: the peer got other bytes than the parent wrote' % what)
        failed += 1
    else:
        print('PASS fork_%s' % what)


write_and_check(bytes([0x11]) * SIZE, 'before')
pids = []
for child in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            A.mr.write(bytes([0xee]) * SIZE, SIZE, 0)
            cqa.poll(1)
            PD(A.ctx).close()
        except Exception:  # the inherited objects may refuse; that is fine
            pass
        os._exit(0)
    pids.append(pid)
for pid in pids:
    _, status = os.waitpid(pid, 0)
    if status != 0:
        print('FAIL fork_child: a child ended with status %#x' % status)
        failed += 1
write_and_check(bytes(range(256)) * (SIZE // 256) + bytes(SIZE % 256), 'after_children')
sys.exit(1 if failed else 0)
