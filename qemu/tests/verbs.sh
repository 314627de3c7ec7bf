#!/bin/sh
# Guest suite for the verbs objects (issue 3): pyverbs checks of limits, bad
# arguments, the QP state machine, flushing and async events on a RoCE and an
# iWARP device (verbs_checks.py), device-fatal on netdev removal, and the
# leak check at module unload.  Prints "PASS name" / "FAIL name: why".
. /src/qemu/tests/lib.sh

CHECKS=/src/qemu/tests/verbs_checks.py

setup() {
    modprobe softrnic || return 1
    ip link add vv0 type veth peer name vv1
    ip link set vv0 up; ip link set vv1 up
    ip addr add 10.0.0.1/24 dev vv0
    rdma link add sr0 type softrnic_roce netdev vv0 || return 1
    rdma link add si0 type softrnic_iwarp netdev vv1 || return 1
    wait_for 'ibv_devinfo -d sr0 | grep -q PORT_ACTIVE'
}

test_device_fatal_on_netdev_removal() {
    ip link add vf0 type veth peer name vf1 && ip link set vf0 up && ip link set vf1 up
    rdma link add sf0 type softrnic_roce netdev vf0 || fail "link add"
    timeout $((20 * SLOW)) ibv_asyncwatch -d sf0 > /tmp/watch.out 2>&1 &
    w=$!
    wait_for 'grep -q "async event FD" /tmp/watch.out' 50 || { cat /tmp/watch.out; fail "ibv_asyncwatch did not start"; }
    ip link del vf0
    wait_for '! rdma link show sf0/1' || fail "device not removed"
    wait $w
    cat /tmp/watch.out
    grep -q 'IBV_EVENT_DEVICE_FATAL\|device fatal' /tmp/watch.out || fail "no DEVICE_FATAL event"
}

test_gid_change_event() {
    timeout $((20 * SLOW)) ibv_asyncwatch -d sr0 > /tmp/gid.out 2>&1 &
    w=$!
    # Its context (which queues the event) exists once it prints its FD; a
    # fixed sleep was too short on the loaded debug kernel.
    wait_for 'grep -q "async event FD" /tmp/gid.out' 50 || { cat /tmp/gid.out; fail "ibv_asyncwatch did not start"; }
    ip addr add 10.0.9.1/24 dev vv0
    wait_for 'grep -q GID_CHANGE /tmp/gid.out' 60
    kill $w 2>/dev/null
    cat /tmp/gid.out
    grep -q 'GID_CHANGE\|gid change' /tmp/gid.out || fail "no GID_CHANGE event"
    ibv_devinfo -v -d sr0 | grep -q '::ffff:10.0.9.1' || fail "new GID not in the table"
}

# A kernel consumer: ib_mad opens every RoCE port with its own CQ, PD (and
# DMA MR for the local lkey) and the GSI QP, posts its receive buffers and
# moves QP1 to RTS; all through our ops, in the kernel.
test_kernel_consumer_gsi_qp() {
    out=$(rdma resource show qp link sr0/1)
    echo "$out"
    echo "$out" | grep -q 'lqpn 1 type GSI state RTS' || fail "no GSI QP in RTS"
    echo "$out" | grep -q 'comm \[ib_core\]' || fail "GSI QP not owned by ib_core"
    rdma resource show cq dev sr0 | grep -q 'comm \[ib_core\]' || fail "no ib_core CQ"
    rdma resource show pd dev sr0 | grep -q 'local_dma_lkey' || fail "no ib_core PD"
}

# rdma_cm on one iWARP device: a wildcard listen stays up (rdma_cm asks
# every iWARP device to listen), and rping -V through the loopback reaches
# the same device's listener (both connection ends on one device).
test_rdma_cm_on_iwarp_loopback() {
    ip addr add 10.0.5.1/24 dev vv1
    timeout $((4 * SLOW)) rping -s -C 1 > /tmp/rping_any.out 2>&1
    rc=$?
    cat /tmp/rping_any.out
    [ $rc = 124 ] || fail "wildcard listen did not stay up (rc $rc)"
    timeout $((30 * SLOW)) rping -s -a 10.0.5.1 -C 3 -V > /tmp/rping_s.out 2>&1 &
    s=$!
    sleep 1
    timeout $((20 * SLOW)) rping -c -a 10.0.5.1 -C 3 -V > /tmp/rping_c.out 2>&1
    rc=$?
    wait $s
    src=$?
    cat /tmp/rping_s.out /tmp/rping_c.out
    [ $rc = 0 ] || fail "rping client exited $rc"
    [ $src = 0 ] || fail "rping server exited $src"
}

# rdma_cm on a RoCE device: the CM REQ goes out on ib_mad's GSI QP (no
# transport yet, so nobody answers); killing the client and removing the
# device must not wait for that MAD forever.
test_rdma_cm_on_roce_then_device_removal() {
    # The peer end lives in its own namespace, without an RDMA device: it
    # answers ARP (so the CM REQ is sent) and nothing else.
    ip netns add cmpeer
    ip link add vc0 type veth peer name vc1 netns cmpeer && ip link set vc0 up
    ip -n cmpeer addr add 10.0.6.2/24 dev vc1 && ip -n cmpeer link set vc1 up
    ip addr add 10.0.6.1/24 dev vc0
    rdma link add sc0 type softrnic_roce netdev vc0 || fail "link add"
    wait_for 'ibv_devinfo -d sc0 | grep -q PORT_ACTIVE'
    timeout $((8 * SLOW)) rping -c -a 10.0.6.2 -C 1 -v > /tmp/rping.out 2>&1
    echo "rping client: $?"
    cat /tmp/rping.out
    grep -q ADDR_ERROR /tmp/rping.out && fail "address resolution failed: no CM REQ was sent"

    timeout $((60 * SLOW)) rdma link del sc0 || fail "rdma link del hung or failed"
    ip link del vc0
    ip netns del cmpeer
}

# A process with mapped rings and live objects while its device goes away:
# ib_uverbs disassociates it (our destroy ops run under it); the process
# keeps touching its (now stale) rings and exits normally.
test_device_removed_under_live_objects() {
    ip link add vd0 type veth peer name vd1 && ip link set vd0 up && ip link set vd1 up
    ip addr add 10.0.7.1/24 dev vd0
    rdma link add sd0 type softrnic_roce netdev vd0 || fail "link add"
    wait_for 'ibv_devinfo -d sd0 | grep -q PORT_ACTIVE'
    cat > /tmp/hold.py <<'PY'
import sys, time
import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr
from pyverbs.wr import RecvWR, SGE
ctx = Context(name='sd0'); pd = PD(ctx); cq = CQ(ctx, 64); mr = MR(pd, 65536, e.IBV_ACCESS_LOCAL_WRITE)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=8, max_recv_wr=32)))
a = QPAttr(qp_state=e.IBV_QPS_INIT); a.pkey_index, a.port_num, a.qp_access_flags = 0, 1, 0
qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
print('ready', flush=True)
end = time.time() + 4
while time.time() < end:
    try:
        qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
    except Exception:
        pass
    try:
        cq.poll(4)
    except Exception:
        pass
print('survived', flush=True)
PY
    timeout $((30 * SLOW)) python3 /tmp/hold.py > /tmp/hold.out 2>&1 &
    p=$!
    wait_for 'grep -q ready /tmp/hold.out' 100 || fail "objects not created: $(cat /tmp/hold.out)"
    ip link del vd0
    wait_for '! rdma link show sd0/1' || fail "device not removed under live objects"
    wait $p
    rc=$?
    cat /tmp/hold.out
    [ $rc != 124 ] || fail "the process hung"
    grep -q survived /tmp/hold.out || fail "the process did not finish its loop"
}

# Four processes create, use and destroy objects on one device at once.
test_concurrent_object_churn() {
    for i in 1 2 3 4; do
        timeout $((120 * SLOW)) python3 /src/qemu/tests/verbs_churn.py sr0 $i 100 > /tmp/churn.$i 2>&1 &
    done
    wait
    for i in 1 2 3 4; do
        cat /tmp/churn.$i
        grep -q '^done' /tmp/churn.$i || fail "worker $i: $(tail -n 1 /tmp/churn.$i)"
    done
}

# Kernel consumers: softrnic_kverbs_test (qemu/tests/kmod) uses PD, CQ, RC
# QP, fast registration, data (SEND/RECV, RDMA WRITE and READ through the
# fast-registered rkey, READ with invalidate), LOCAL_INV, peek,
# REPORT_MISSED_EVENTS and flushing through ib_core on sr0, as a kernel ULP
# would, and logs PASS/FAIL lines.
test_kernel_consumer_verbs() {
    dmesg -c > /dev/null
    modprobe softrnic_kverbs_test dev=sr0 || fail "test module did not load"
    rmmod softrnic_kverbs_test
    out=$(dmesg | grep 'softrnic_kverbs_test: ')
    echo "$out"
    echo "$out" | grep -q 'softrnic_kverbs_test: done' || fail "the test did not run to the end"
    ! echo "$out" | grep -q 'FAIL' || fail "$(echo "$out" | grep FAIL | head -n 1)"
    [ "$(echo "$out" | grep -c PASS)" -ge 20 ] || fail "fewer checks than expected"
}

test_no_object_leaks_at_unload() {
    # Everything above created and destroyed objects; ib_core's own (MAD
    # QP, CQ, PD, DMA MR) go with the devices.
    rdma link del sr0; rdma link del si0
    rmmod softrnic || fail "rmmod"
    line=$(dmesg | grep 'softrnic: .*live objects at unload' | tail -n 1)
    echo "$line"
    echo "$line" | grep -q 'LEAK' && fail "leak: $line"
    echo "$line" | grep -q 'ucontext=0 pd=0 cq=0 qp=0 srq=0 mr=0 mw=0 ah=0' || fail "counts: $line"
}

EVENTS="event_sq_drained event_last_wqe_reached event_cq_overflow_is_cq_error event_completion_channel
        event_arm_survives_cq_resize"
set -- test_gid_change_event test_kernel_consumer_gsi_qp test_device_fatal_on_netdev_removal \
    test_rdma_cm_on_iwarp_loopback test_rdma_cm_on_roce_then_device_removal \
    test_device_removed_under_live_objects test_concurrent_object_churn test_kernel_consumer_verbs \
    test_no_object_leaks_at_unload
# The plan: verbs_checks.py's checks (those it runs by default: all but the
# event_ ones, run one by one below), verbs_bad's on each device (on si0
# without --limits, which adds mw_limit_enforced), the events, the tests here.
n_checks=$(awk '/^@check/ { getline; if ($2 !~ /^event_/) n++ } END { print n + 0 }' $CHECKS)
n_bad=$(grep -o 'result("[a-z_]*"' /src/qemu/tests/verbs_bad.c | sort -u | wc -l)
plan $((n_checks + n_bad + n_bad - 1 + $(words $EVENTS) + $#))

if ! setup; then
    echo "DIED verbs_setup: could not create sr0/si0"
    exit 1
fi
runner verbs_checks.py timeout $((300 * SLOW)) python3 $CHECKS sr0 si0
if gcc -O1 -o /tmp/verbs_bad /src/qemu/tests/verbs_bad.c -libverbs; then
    runner verbs_bad timeout $((120 * SLOW)) /tmp/verbs_bad sr0 --limits
    runner verbs_bad_iwarp timeout $((30 * SLOW)) /tmp/verbs_bad si0 |
        sed 's/^\(PASS\|FAIL\) \([a-z_]*\)/\1 \2_iwarp/'
else
    echo "DIED verbs_bad_build: gcc failed"
fi
for ev in $EVENTS; do
    out=$(timeout $((30 * SLOW)) python3 $CHECKS sr0 si0 $ev 2>&1)
    echo "$out" | grep -q "^PASS $ev" && echo "PASS $ev" || { echo "FAIL $ev: no event or error"; echo "$out" | tail -n 8 | sed 's/^/    /'; }
done
run_tests "$@"
