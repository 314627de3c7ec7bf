"""QPs joined by modify_qp on two softrnic_iwarp devices (GID index 0, the
iWARP GID: the MAC, which softrnic looks up in the netdev's ARP table):
connect_pair as for IB and RoCE, then a SEND each way, an RDMA WRITE and an
RDMA READ, every byte checked.  Prints one line, "OK <what moved>" or
"FAIL <why>"; exits 0 either way (the suite reads the line).

With "alone a" or "alone b" only that end's QP moves to RTS, the other's
staying in INIT: a SEND posted there must complete, flushed, once the join
has waited `join_timeout` (the module parameter) for its peer: "a" (the
lower address) as the end that connects, "b" as the end that waits.

usage: iwarp_join.py DEV_A DEV_B [SECONDS [alone a|b]]  (each completion's
wait, 30 s)"""
import sys

from pyverbs.mr import MR
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e

import rc_pair

SIZE = 8192
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ


WAIT = int(sys.argv[3]) if len(sys.argv) > 3 else 30


def alone(which):
    """One end joins a QP that never joins back."""
    a, b = rc_pair.End(sys.argv[1], 0), rc_pair.End(sys.argv[2], 0)
    (qa, cqa), (qb, cqb) = a.qp(), b.qp()
    end, q, cq, peer, peer_q = (a, qa, cqa, b, qb) if which == 'a' else (b, qb, cqb, a, qa)
    rc_pair.connect(end, q, peer, peer_q.qp_num, access=ACCESS)
    mr = MR(end.pd, SIZE, ACCESS)
    q.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)],
                       send_flags=e.IBV_SEND_SIGNALED))
    wc = rc_pair.wait_wc(cq, WAIT)
    if wc is None:
        raise RuntimeError(f'{which} alone: no completion in {WAIT} s')
    if wc.status != e.IBV_WC_WR_FLUSH_ERR:
        raise RuntimeError(f'{which} alone: completion status {wc.status}, not flushed')
    print(f'OK {which} alone: its SEND flushed when the join gave up')


def main():
    a, b = rc_pair.End(sys.argv[1], 0), rc_pair.End(sys.argv[2], 0)
    qa, cqa, qb, cqb = rc_pair.connect_pair(a, b, access=ACCESS)
    mra, mrb = MR(a.pd, 4 * SIZE, ACCESS), MR(b.pd, 4 * SIZE, ACCESS)

    def post_recv(q, mr, off):
        q.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf + off, SIZE, mr.lkey)]))

    def post_send(q, mr, off, opcode, **kw):
        wr = SendWR(wr_id=2, opcode=opcode, num_sge=1, sg=[SGE(mr.buf + off, SIZE, mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        if 'rkey' in kw:
            wr.set_wr_rdma(kw['rkey'], kw['addr'])
        q.post_send(wr)

    def done(cq, what):
        wc = rc_pair.wait_wc(cq, WAIT)
        if wc is None:
            raise RuntimeError(f'{what}: no completion in {WAIT} s (the join never came up?)')
        if wc.status != e.IBV_WC_SUCCESS:
            raise RuntimeError(f'{what}: completion status {wc.status}')

    def check(mr, off, byte, what):
        got = mr.read(SIZE, off)
        if got != bytes([byte]) * SIZE:
            raise RuntimeError(f'{what}: the data differs')

    # SEND a -> b and b -> a (the join may still be coming up: both wait).
    mra.write(b'\x5a' * SIZE, SIZE, 0)
    mrb.write(b'\xa5' * SIZE, SIZE, 0)
    post_recv(qb, mrb, SIZE)
    post_recv(qa, mra, SIZE)
    post_send(qa, mra, 0, e.IBV_WR_SEND)
    post_send(qb, mrb, 0, e.IBV_WR_SEND)
    for cq, what in ((cqa, 'send a->b'), (cqb, 'send b->a'), (cqa, 'recv at a'), (cqb, 'recv at b')):
        done(cq, what)
    check(mrb, SIZE, 0x5a, 'send a->b')
    check(mra, SIZE, 0xa5, 'send b->a')
    # WRITE b -> a, READ a <- b.
    mrb.write(b'\x3c' * SIZE, SIZE, 2 * SIZE)
    post_send(qb, mrb, 2 * SIZE, e.IBV_WR_RDMA_WRITE, rkey=mra.rkey, addr=mra.buf + 2 * SIZE)
    done(cqb, 'write b->a')
    mrb.write(b'\xc3' * SIZE, SIZE, 3 * SIZE)
    post_send(qa, mra, 3 * SIZE, e.IBV_WR_RDMA_READ, rkey=mrb.rkey, addr=mrb.buf + 3 * SIZE)
    done(cqa, 'read a<-b')
    check(mra, 3 * SIZE, 0xc3, 'read a<-b')
    # The READ's response came on b's stream after the WRITE b had sent
    # before: the WRITE has landed.
    check(mra, 2 * SIZE, 0x3c, 'write b->a')
    print(f'OK QPs {qa.qp_num} and {qb.qp_num}: SEND both ways, WRITE, READ, {SIZE} bytes each, checked')


try:
    if len(sys.argv) > 5 and sys.argv[4] == 'alone':
        alone(sys.argv[5])
    else:
        main()
except Exception as x:  # noqa: BLE001 (any failure is the verdict)
    print(f'FAIL {x}')
