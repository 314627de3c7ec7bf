#!/bin/sh
# Guest suite: hostile input at a softrnic_iwarp device (issue 15).  A plain
# TCP socket in netns wb (iwarp_hostile.py) talks to an rping server on
# softrnic_iwarp device wx0 in netns wa: MPA requests that break the rules
# (the connection is closed, counted in iw_mpa_rejects, the listener keeps
# listening), and after a valid MPA setup, FPDUs that break DDP/RDMAP/MPA
# rules (the server answers with the TERMINATE the rules name, counted in
# iw_terminates_sent, and closes).  Then a normal rping -V on the same
# device must still work, and the kernel must report nothing.  Prints
# "PASS name" / "FAIL name: why".
. /src/qemu/tests/lib.sh

T=/src/qemu/tests
IP_A=10.89.0.1 IP_B=10.89.0.2
set -- test_garbage_before_key test_bad_key test_bad_revision test_oversized_private_data \
    test_markers_refused test_truncated_request test_silent_peer test_listener_survives \
    test_reply_timeout test_connect_refused \
    test_bad_ddp_version_terminates test_bad_crc_terminates test_bad_queue_terminates \
    test_unknown_stag_write_terminates test_counters test_device_still_works
plan $#

# (A peer's MPA request must come within 2 s: the silent cases end sooner.)
modprobe softrnic mpa_crc=1 mpa_timeout=2 || { echo "DIED hostile_iwarp_setup: modprobe"; exit 1; }
ip netns add wa && ip netns add wb &&
    ip link add wa0 netns wa type veth peer name wb0 netns wb &&
    ip -n wa addr add $IP_A/24 dev wa0 && ip -n wb addr add $IP_B/24 dev wb0 &&
    ip -n wa link set wa0 up && ip -n wb link set wb0 up &&
    ip -n wa link set lo up && ip -n wb link set lo up &&
    ip netns exec wa rdma link add wx0 type softrnic_iwarp netdev wa0 &&
    ip netns exec wb rdma link add wy0 type softrnic_iwarp netdev wb0 ||
    { echo "DIED hostile_iwarp_setup: namespaces and devices"; exit 1; }

counter() {  # NAME [DEV]: the device's counter (wx0's by default)
    rdma statistic show link ${2:-wx0}/1 | tr -s ' \n' ' ' | sed -n "s/.* $1 \([0-9]*\).*/\1/p"
}

# An rping server on wx0 (one connection), listening on PORT; its pid in
# /tmp/srv.pid (each test runs in its own subshell).
rping_server() {
    ip netns exec wa timeout $((60 * SLOW)) rping -s -a $IP_A -p $1 -C 1 -V > /tmp/rs.out 2>&1 &
    echo $! > /tmp/srv.pid
    wait_for "rdma resource show cm_id | grep -q 'state LISTEN .* src-addr $IP_A:$1 '" 100 ||
        fail "rping server did not listen"
}
srv() { cat /tmp/srv.pid 2>/dev/null; }
stop_server() { p=$(srv); [ -n "$p" ] && kill $p 2>/dev/null; rm -f /tmp/srv.pid; }
# finished_server: the server ended by itself (its one connection done).
finished_server() {
    p=$(srv)
    wait_for "! kill -0 $p" 100 || fail "rping server still running: $(tail -n 1 /tmp/rs.out)"
    rm -f /tmp/srv.pid
}

hostile() {  # PORT CASE
    out=$(ip netns exec wb timeout $((30 * SLOW)) python3 $T/iwarp_hostile.py $IP_A $1 $2 2>&1)
    rc=$?
    echo "$out"
    [ $rc = 0 ] || fail "$2: $out"
}

# MPA setup refused: one server takes every case in turn (none reaches it).
setup_refused() {  # CASE
    before=$(counter iw_mpa_rejects)
    hostile 7501 $1
    wait_for '[ "$(counter iw_mpa_rejects)" -gt "$before" ]' 50 ||
        fail "iw_mpa_rejects stayed at $before"
}
test_garbage_before_key() { rping_server 7501; setup_refused garbage; }
test_bad_key() { setup_refused bad_key; }
test_bad_revision() { setup_refused bad_rev; }
test_oversized_private_data() { setup_refused big_private; }
test_markers_refused() { hostile 7501 markers; }
# A request cut short, or none at all: reset at the MPA deadline, counted.
timed_out() {  # CASE
    before=$(counter iw_mpa_timeouts)
    hostile 7501 $1
    wait_for '[ "$(counter iw_mpa_timeouts)" -gt "$before" ]' 50 ||
        fail "iw_mpa_timeouts stayed at $before"
}
test_truncated_request() { timed_out truncated; }
test_silent_peer() { timed_out silent; }
# After all that, the same listener still takes a real connection.
test_listener_survives() {
    kill -0 "$(srv)" 2>/dev/null || fail "rping server died: $(cat /tmp/rs.out)"
    ip netns exec wb timeout $((30 * SLOW)) rping -c -a $IP_A -p 7501 -C 1 -V > /tmp/rc.out 2>&1 ||
        fail "rping client: $(tail -n 1 /tmp/rc.out)"
    finished_server
}

# The other way round: a softrnic initiator (wy0) whose peer never replies
# gives up at its deadline: rping fails, the connection is reset, counted.
test_reply_timeout() {
    before=$(counter iw_mpa_timeouts wy0)
    ip netns exec wa timeout $((40 * SLOW)) python3 $T/iwarp_hostile.py $IP_A 7507 silent_listener > /tmp/sl.out 2>&1 &
    sl=$!
    wait_for "grep -q listening /tmp/sl.out" 100 || fail "listener did not start: $(cat /tmp/sl.out)"
    start=$(date +%s)
    ip netns exec wb timeout $((30 * SLOW)) rping -c -a $IP_A -p 7507 -C 1 > /tmp/rc.out 2>&1 &&
        fail "rping connected to a peer that never replied"
    took=$(( $(date +%s) - start ))
    wait $sl || fail "$(tail -n 1 /tmp/sl.out)"
    cat /tmp/sl.out
    after=$(counter iw_mpa_timeouts wy0)
    [ "$after" -gt "$before" ] || fail "wy0's iw_mpa_timeouts stayed at $before"
    echo "rping gave up after ${took}s: $(tail -n 1 /tmp/rc.out)"
}

# Nothing listens on the port: rdma_connect itself succeeds (it does not
# wait for the network) and the refusal comes as RDMA_CM_EVENT_REJECTED
# with ECONNREFUSED, as from a hardware RNIC (perftest retries on that
# event; a synchronous error made its client crash).
test_connect_refused() {
    ip netns exec wb timeout $((30 * SLOW)) rping -c -a $IP_A -p 7508 -C 1 > /tmp/rc.out 2>&1 &&
        fail "rping connected to a port nothing listens on"
    cat /tmp/rc.out
    grep -q "^rdma_connect" /tmp/rc.out && fail "rdma_connect failed at once: $(grep ^rdma_connect /tmp/rc.out)"
    grep -q "RDMA_CM_EVENT_REJECTED, error -111" /tmp/rc.out ||
        fail "no REJECTED event with ECONNREFUSED: $(tail -n 1 /tmp/rc.out)"
}

terminates() {  # PORT CASE
    sent=$(counter iw_terminates_sent)
    rping_server $1
    hostile $1 $2
    wait_for '[ "$(counter iw_terminates_sent)" -gt "$sent" ]' 50 ||
        fail "iw_terminates_sent stayed at $sent"
    stop_server
}
test_bad_ddp_version_terminates() { terminates 7502 bad_ddp_version; }
test_bad_crc_terminates() {
    crc=$(counter iw_crc_errors)
    terminates 7503 bad_crc
    [ "$(counter iw_crc_errors)" -gt "$crc" ] || fail "iw_crc_errors stayed at $crc"
}
test_bad_queue_terminates() { terminates 7504 bad_queue; }
test_unknown_stag_write_terminates() { terminates 7505 unknown_stag_write; }

test_counters() {
    rdma statistic show link wx0/1
    for c in iw_rx_fpdus iw_tx_fpdus iw_mpa_rejects iw_mpa_timeouts iw_terminates_sent iw_crc_errors; do
        [ "$(counter $c)" -gt 0 ] || fail "$c is 0"
    done
}

test_device_still_works() {
    rping_server 7506
    ip netns exec wb timeout $((30 * SLOW)) rping -c -a $IP_A -p 7506 -C 5 -S 4096 -V > /tmp/rc.out 2>&1 ||
        fail "rping client: $(tail -n 1 /tmp/rc.out)"
    finished_server
}

run_tests "$@"
stop_server
rdma link del wx0; rdma link del wy0
ip netns del wa; ip netns del wb
