#!/usr/bin/python3
"""RC retry and RNR behaviour across a veth, end to end (faults.sh).

usage: faults_qp.py DEV_A GID_A DEV_B GID_B PEER_NETNS PEER_VETH [SLACK]
       faults_qp.py --count   (how many verdicts a run prints: faults.sh's plan)

One process holds an RC QP on DEV_A (the requester) and one on DEV_B (the
responder); the devices sit on the two ends of the veth, so every packet
crosses it.  PEER_NETNS/PEER_VETH is B's end, set down to cut the link.
SLACK (seconds, default 1) is the time allowed on top of the spec's bounds
for a slow guest.  Prints "PASS name [result]" / "FAIL name: why":
  link_down_retry_exc   the link down past the retry budget: a SEND ends in
                        IBV_WC_RETRY_EXC_ERR no sooner than (retry_cnt + 1)
                        local ACK timeouts and no later than 4 times that
  link_down_short       the link down for less than the budget: the SEND
                        completes once it is back up
  rnr_retry_N           N = 0..6: no receive posted, IBV_WC_RNR_RETRY_EXC_ERR
                        after exactly N + 1 RNR NAKs (counted by softrnic ends)
  rnr_retry_7           7 is infinite: the SEND waits, RNR NAKed again and
                        again, and completes once a receive is posted
  rnr_budget_per_message  rnr_retry 1, four SENDs each met by one RNR NAK
                        (the receive is posted during the responder's 655 ms
                        RNR timer): all complete; the budget is per request
                        (it once lasted the QP's life: the pyverbs rdmacm
                        external-QP test failed with RNR_RETRY_EXC_ERR)
  shallow_rq            64 SENDs into a one-deep receive queue: every one
                        arrives, in order, with its own bytes, though the
                        receiver pauses 20 ms before every 8th repost (rxe
                        also NAKs the packets behind each RNR NAKed one as
                        out of sequence: those NAKs must not use up
                        retry_cnt)
"""
import os
import subprocess
import sys
import time

from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rc_pair import End, connect_pair, wait_wc  # noqa: E402

MSG = 1000
COUNT_ONLY = sys.argv[1:] == ['--count']
if not COUNT_ONLY:
    DEV_A, GID_A, DEV_B, GID_B, PEER_NS, PEER_VETH = sys.argv[1:7]
    GID_A, GID_B = int(GID_A), int(GID_B)
    SLACK = float(sys.argv[7]) if len(sys.argv) > 7 else 1.0
    A = End(DEV_A, GID_A)
    B = End(DEV_B, GID_B)


def pair(recv_depth=4, **kw):
    return connect_pair(A, B, recv_depth, **kw)


def rnr_naks():
    """RNR NAKs so far, as counted by a softrnic end (None when both are rxe)."""
    n = B.counter('send_rnr_err')
    return n if n is not None else A.counter('rcvd_rnr_err')


def send(q, offset=0, length=MSG, wr_id=0):
    q.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                       sg=[SGE(A.mr.buf + offset, length, A.mr.lkey)],
                       send_flags=e.IBV_SEND_SIGNALED))


def recv(q, offset=0, length=MSG, wr_id=0):
    q.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(B.mr.buf + offset, length, B.mr.lkey)]))


def state(q):
    attr, _ = q.query(e.IBV_QP_STATE)
    return attr.qp_state


def link(up):
    subprocess.run(['ip', '-n', PEER_NS, 'link', 'set', PEER_VETH, 'up' if up else 'down'], check=True)


def ack_timeout(t):
    return 4.096e-6 * (1 << t)


def check(name, fn):
    try:
        res = fn()
        print('PASS %s%s' % (name, ' ' + res if res else ''), flush=True)
    except AssertionError as ex:
        print('FAIL %s: %s' % (name, ex), flush=True)
    except Exception as ex:  # noqa: BLE001 (any error is this check's FAIL)
        print('FAIL %s: %s: %s' % (name, type(ex).__name__, ex), flush=True)


def link_down_retry_exc():
    timeout, retry = 12, 3                 # 16.8 ms, 4 transmissions
    qa, cqa, qb, _ = pair(timeout=timeout, retry=retry)
    recv(qb)
    link(False)
    try:
        t0 = time.time()
        send(qa)
        budget = (retry + 1) * ack_timeout(timeout)
        wc = wait_wc(cqa, 4 * budget + SLACK + 5)
        took = time.time() - t0
    finally:
        link(True)
    assert wc is not None, 'no completion in %.1f s' % (4 * budget + SLACK + 5)
    assert wc.status == e.IBV_WC_RETRY_EXC_ERR, 'status %d' % wc.status
    assert took >= budget * 0.99, 'after %.3f s, before the %.3f s budget' % (took, budget)
    assert took <= 4 * budget + SLACK, 'after %.3f s, past 4 x %.3f s (+%.1f s slack)' % (took, budget, SLACK)
    assert state(qa) == e.IBV_QPS_ERR, 'requester state %d' % state(qa)
    return '%.0fms (budget %.0f..%.0fms)' % (took * 1e3, budget * 1e3, 4 * budget * 1e3)


def link_down_short():
    # The budget must outlast the outage with room to spare: bringing a veth
    # down and up again through ip(8) takes a few hundred ms on the debug
    # kernel, where 8 x 67 ms once ran out.  1.07 s here, 4.3 s there.
    timeout, retry = (15 if SLACK <= 1 else 17), 7
    budget = (retry + 1) * ack_timeout(timeout)
    qa, cqa, qb, cqb = pair(timeout=timeout, retry=retry)
    recv(qb)
    A.mr.write(b'\x5a' * MSG, MSG, 0)
    before = A.counter('retransmits')
    link(False)
    t0 = time.time()
    try:
        send(qa)
        time.sleep(0.15)
    finally:
        link(True)
    down = time.time() - t0
    wc = wait_wc(cqa, 10 + SLACK)
    assert wc is not None, 'no completion in %.1f s after the link came back' % (10 + SLACK)
    assert wc.status == e.IBV_WC_SUCCESS, 'status %d (link down %.2f s, budget %.2f s)' % (
        wc.status, down, budget)
    wr = wait_wc(cqb, 5)
    assert wr is not None and wr.status == e.IBV_WC_SUCCESS, 'no good receive completion'
    assert B.mr.read(MSG, 0) == b'\x5a' * MSG, 'received bytes differ'
    res = 'link down %.2f s, budget %.2f s' % (down, budget)
    if before is not None:
        time.sleep(0.05)  # ib_core caches hw counters for 10 ms
        resent = A.counter('retransmits') - before
        assert resent >= 1, 'completed without a retransmission'
        res += ', %d retransmitted' % resent
    return res


def rnr_exhausted(n):
    def run():
        qa, cqa, qb, _ = pair(rnr=n)  # (qb kept: dropping it destroys it)
        before_b, before_a = B.counter('send_rnr_err'), A.counter('rcvd_rnr_err')
        send(qa)
        wc = wait_wc(cqa, 10 + SLACK)
        assert wc is not None, 'no completion in %.1f s' % (10 + SLACK)
        assert wc.status == e.IBV_WC_RNR_RETRY_EXC_ERR, 'status %d' % wc.status
        assert state(qa) == e.IBV_QPS_ERR, 'requester state %d' % state(qa)
        time.sleep(0.05)  # ib_core caches hw counters for 10 ms
        seen = []
        if before_b is not None:
            sent = B.counter('send_rnr_err') - before_b
            assert sent == n + 1, 'responder sent %d RNR NAKs, expected %d' % (sent, n + 1)
            seen.append('%d sent' % sent)
        if before_a is not None:
            got = A.counter('rcvd_rnr_err') - before_a
            assert got == n + 1, 'requester took %d RNR NAKs, expected %d' % (got, n + 1)
            seen.append('%d received' % got)
        return 'RNR NAKs: ' + (', '.join(seen) if seen else 'not counted by rxe')
    return run


def rnr_infinite():
    qa, cqa, qb, cqb = pair(rnr=7)
    before = rnr_naks()
    A.mr.write(b'\xa5' * MSG, MSG, 0)
    send(qa)
    time.sleep(0.5)
    n, _ = cqa.poll(1)
    assert n == 0, 'completed with no receive posted'
    if before is not None:
        now = rnr_naks()  # (0.5 s later: past the counters' 10 ms cache)
        assert now - before > 8, 'only %d RNR NAKs in 0.5 s (past rnr_retry 6)' % (now - before)
    recv(qb)
    wc = wait_wc(cqa, 5 + SLACK)
    assert wc is not None, 'no completion after the receive was posted'
    assert wc.status == e.IBV_WC_SUCCESS, 'status %d' % wc.status
    assert B.mr.read(MSG, 0) == b'\xa5' * MSG, 'received bytes differ'
    return '%d RNR NAKs before the receive' % (now - before) if before is not None else ''


def rnr_budget_per_message():
    count = 4
    # min_rnr_timer 0 is the longest RNR timer, 655.36 ms: time to post the
    # receive between the first RNR NAK and the retry.
    qa, cqa, qb, cqb = pair(rnr=1, min_rnr=0)
    time.sleep(0.05)  # ib_core caches hw counters for 10 ms
    before = rnr_naks()
    names = ('rcvd_rnr_err', 'ack_timeouts', 'retransmits')
    a0 = [A.counter(c) for c in names]
    per, last = [], before
    for i in range(count):
        A.mr.write(bytes([0x30 + i]) * MSG, MSG, 0)
        send(qa, 0, MSG, i)
        time.sleep(0.2)
        n, _ = cqa.poll(1)
        assert n == 0, 'SEND %d completed with no receive posted' % i
        recv(qb, 0, MSG, i)
        wc = wait_wc(cqa, 5 + SLACK)
        assert wc is not None, 'SEND %d: no completion after the receive was posted' % i
        assert wc.status == e.IBV_WC_SUCCESS, 'SEND %d: status %d' % (i, wc.status)
        wc = wait_wc(cqb, 1 + SLACK)
        assert wc is not None and wc.status == e.IBV_WC_SUCCESS, 'receive %d missing' % i
        assert B.mr.read(MSG, 0) == bytes([0x30 + i]) * MSG, 'receive %d: bytes differ' % i
        if before is not None:
            time.sleep(0.05)
            now = rnr_naks()
            per.append(now - last)
            last = now
    if before is None:
        return ''
    got = last - before
    # (The requester's counters, when it is softrnic, tell an ACK timeout
    # before the RNR NAK came back from an RNR NAK it did not take.)
    a = ', '.join('%s +%d' % (c, A.counter(c) - v) for c, v in zip(names, a0) if v is not None)
    assert got == count, '%d RNR NAKs for %d SENDs, expected one each: per SEND %s; requester %s' % (
        got, count, per, a or 'rxe')
    return '%d SENDs, one RNR NAK each' % count


def shallow_rq():
    count = 64
    qa, cqa, qb, cqb = pair(recv_depth=1, rnr=7)
    for i in range(count):
        A.mr.write(bytes([i]) * MSG, MSG, i * MSG)
    before = rnr_naks()
    recv(qb, 0, MSG, 0)
    for i in range(count):
        send(qa, i * MSG, MSG, i)
    got = 0
    end = time.time() + 30 + SLACK
    while got < count and time.time() < end:
        n, wcs = cqb.poll(1)
        if n == 0:
            time.sleep(0.0005)
            continue
        wc = wcs[0]
        assert wc.status == e.IBV_WC_SUCCESS, 'receive %d: status %d' % (got, wc.status)
        data = B.mr.read(MSG, 0)
        assert data == bytes([got]) * MSG, 'receive %d holds message %d' % (got, data[0])
        got += 1
        if got < count:
            if got % 8 == 0:
                # A slow receiver: the sender meets many RNR NAKs in a row
                # (the RNR timer is 10 us), with no progress between them.
                time.sleep(0.02)
            recv(qb, 0, MSG, got)
    if got < count:
        n, wcs = cqa.poll(count)
        bad = [(w.wr_id, w.status) for w in wcs[:n] if w.status != e.IBV_WC_SUCCESS]
        ctr = {c: A.counter(c) for c in ('rcvd_rnr_err', 'ack_timeouts', 'retransmits')}
        assert False, '%d of %d messages arrived; sender QP state %d, errors (wr_id, status) %s, %s' % (
            got, count, state(qa), bad or 'none', ctr)
    sent = 0
    while sent < count and time.time() < end:
        n, wcs = cqa.poll(1)
        if n == 0:
            time.sleep(0.0005)
            continue
        assert wcs[0].status == e.IBV_WC_SUCCESS, 'send %d: status %d' % (sent, wcs[0].status)
        sent += 1
    assert sent == count, '%d of %d sends completed' % (sent, count)
    return '%d RNR NAKs' % (rnr_naks() - before) if before is not None else ''


CHECKS = [] if os.environ.get('ONLY') == 'rnr' else [
    ('link_down_retry_exc', link_down_retry_exc), ('link_down_short', link_down_short)]
CHECKS += [('rnr_retry_%d' % n, rnr_exhausted(n)) for n in range(7)]
CHECKS += [('rnr_retry_7', rnr_infinite), ('rnr_budget_per_message', rnr_budget_per_message),
           ('shallow_rq', shallow_rq)]
if COUNT_ONLY:
    print(len(CHECKS))
else:
    for name, fn in CHECKS:
        check(name, fn)
