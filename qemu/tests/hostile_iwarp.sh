#!/bin/sh
# Guest suite: hostile input at a softrnic_iwarp device (issue 15).  A plain
# TCP socket in netns wb (iwarp_hostile.py) talks to an rping server on
# softrnic_iwarp device wx0 in netns wa: MPA requests that break the rules
# (the connection is closed, counted in iw_mpa_rejects, the listener keeps
# listening), and after a valid MPA setup, FPDUs that break DDP/RDMAP/MPA
# rules (the server answers with the TERMINATE the rules name, counted in
# iw_terminates_sent, and closes); strangers at the join port.  Then a normal rping -V on the same
# device must still work, and the kernel must report nothing.  Prints
# "PASS name" / "FAIL name: why".
. /src/qemu/tests/lib.sh

T=/src/qemu/tests
IP_A=10.89.0.1 IP_B=10.89.0.2
set -- test_garbage_before_key test_bad_key test_bad_revision test_oversized_private_data \
    test_markers_refused test_truncated_request test_silent_peer test_listener_survives \
    test_reply_timeout test_connect_refused \
    test_bad_ddp_version_terminates test_bad_crc_terminates test_bad_queue_terminates \
    test_unknown_stag_write_terminates test_msn_gap_terminates test_msn_replay_terminates \
    test_bad_mo_terminates test_too_long_terminates test_write_past_end_terminates \
    test_read_past_end_terminates test_foreign_pd_stag_terminates test_peer_stops_reading \
    test_reset_mid_message test_close_drains test_rtr_write test_rtr_read test_rtr_send \
    test_join_port test_join_alone test_counters test_device_still_works
plan $#

# (A peer's MPA request must come within 2 s: the silent cases end sooner.
# A QP joined by modify_qp waits 10 s x SLOW for its peer's.)
JOIN_TIMEOUT=$((10 * SLOW))
modprobe softrnic mpa_crc=1 mpa_timeout=2 join_timeout=$JOIN_TIMEOUT || { echo "DIED hostile_iwarp_setup: modprobe"; exit 1; }
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

# An rping server on wx0 (one connection), listening on PORT, with ARGS;
# its pid in /tmp/srv.pid, its output in /tmp/rs.out (each test runs in its
# own subshell; a server a failed test left behind keeps its own file).
rping_server() {  # PORT [ARGS...]
    p=$1; shift
    ip netns exec wa timeout $((60 * SLOW)) rping -s -a $IP_A -p $p -C 1 -V "$@" > /tmp/rs_$p.out 2>&1 &
    echo $! > /tmp/srv.pid
    ln -sf /tmp/rs_$p.out /tmp/rs.out
    wait_for "rdma resource show cm_id | grep -q 'state LISTEN .* src-addr $IP_A:$p '" 100 ||
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

terminates() {  # PORT CASE [SERVER_SAYS]: and the server prints that
    sent=$(counter iw_terminates_sent)
    rping_server $1
    hostile $1 "$2"
    wait_for '[ "$(counter iw_terminates_sent)" -gt "$sent" ]' 50 ||
        fail "iw_terminates_sent stayed at $sent"
    [ -z "$3" ] || wait_for "grep -q '$3' /tmp/rs_$1.out" 50 ||
        fail "the rping server did not print '$3': $(cat /tmp/rs_$1.out)"
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

# Untagged rules (RFC 5041 5.3, 7.2): an MSN out of range, the same MSN
# twice, a first segment with an MO, a message longer than the buffer.
test_msn_gap_terminates() { terminates 7509 msn_gap; }
test_msn_replay_terminates() { terminates 7510 msn_replay; }
test_bad_mo_terminates() { terminates 7511 bad_mo; }
# ... and the receive it was going into completes with a local length
# error (siw's status too).
test_too_long_terminates() { terminates 7512 too_long 'cq completion failed status 1$'; }
# Tagged and READ rules against the server's own buffer (learned from its
# READ request): a WRITE past its end, a READ request past its end.
test_write_past_end_terminates() { terminates 7513 write_past_end; }
test_read_past_end_terminates() { terminates 7514 read_past_end; }

# A WRITE with a valid STag of another process's buffer (another PD) on the
# same device: DDP "STag not associated with RDMAP stream".
test_foreign_pd_stag_terminates() {
    ip netns exec wa timeout $((60 * SLOW)) rping -s -a $IP_A -p 7516 -C 1 -V > /tmp/rs2.out 2>&1 &
    other=$!
    wait_for "rdma resource show cm_id | grep -q 'state LISTEN .* src-addr $IP_A:7516 '" 100 ||
        fail "second rping server did not listen"
    terminates 7515 "foreign_stag 7516"
    kill $other 2>/dev/null
    wait $other
    return 0
}

# A peer that stops reading while the server has 1 MiB of READ responses
# for it: the device serves another connection meanwhile, and when the
# peer resets, the stalled server's connection ends (no hang, no leak).
test_peer_stops_reading() {
    rping_server 7517 -S 65535
    ip netns exec wb timeout $((30 * SLOW)) python3 $T/iwarp_hostile.py $IP_A 7517 stop_reading > /tmp/sr.out 2>&1 &
    h=$!
    wait_for "grep -q 'reading nothing' /tmp/sr.out" 100 || fail "no stalled stream: $(cat /tmp/sr.out)"
    ip netns exec wa timeout $((60 * SLOW)) rping -s -a $IP_A -p 7518 -C 3 -S 4096 -V > /tmp/rs2.out 2>&1 &
    other=$!
    wait_for "rdma resource show cm_id | grep -q 'state LISTEN .* src-addr $IP_A:7518 '" 100 ||
        fail "second rping server did not listen"
    ip netns exec wb timeout $((30 * SLOW)) rping -c -a $IP_A -p 7518 -C 3 -S 4096 -V > /tmp/rc.out 2>&1 ||
        fail "rping beside the stalled stream: $(tail -n 1 /tmp/rc.out)"
    wait $other || fail "second rping server: $(tail -n 1 /tmp/rs2.out)"
    wait $h || fail "$(cat /tmp/sr.out)"
    cat /tmp/sr.out
    finished_server
    echo "stalled server: $(tail -n 1 /tmp/rs.out)"
}

# Half an FPDU, then a reset: the server's connection ends, and the receive
# the SEND was going into is flushed (rping's completion thread, which
# waits for it, ends: the server exits).
test_reset_mid_message() {
    rping_server 7519
    hostile 7519 reset_mid_message
    finished_server
    echo "server: $(tail -n 1 /tmp/rs.out)"
}

# A consumer's close sends what its stream built (those work requests
# completed), then FIN: a peer that reads nothing until the server is
# killed still gets whole FPDUs and a FIN, not a reset.
test_close_drains() {
    rm -f /tmp/drain_go
    rping_server 7523 -S 65535
    ip netns exec wb timeout $((60 * SLOW)) python3 $T/iwarp_hostile.py $IP_A 7523 drain_on_kill > /tmp/dr.out 2>&1 &
    h=$!
    wait_for "grep -q 'reading nothing' /tmp/dr.out" 100 || fail "no stalled stream: $(cat /tmp/dr.out)"
    sleep 1
    # (SIGTERM: timeout(1), whose pid this is, passes it on to rping.)  The
    # peer reads from now on: the drain must end within the MPA deadline,
    # 2 s in this suite, however long the process's teardown takes.
    kill $(srv)
    touch /tmp/drain_go
    wait $h || fail "$(tail -n 1 /tmp/dr.out)"
    wait_for "! pgrep -f 'rping -s -a $IP_A -p 7523' >/dev/null" 50 || fail "rping server still running"
    rm -f /tmp/srv.pid
    cat /tmp/dr.out
}

# RFC 6581 peer-to-peer mode asked for by the peer, each RTR alone offered:
# granted with that RTR, nothing sent before it, rping then served.
rtr_test() {  # PORT RTR
    rping_server $1
    hostile $1 rtr_$2
    stop_server
}
test_rtr_write() { rtr_test 7520 write; }
test_rtr_read() { rtr_test 7521 read; }
test_rtr_send() { rtr_test 7522 send; }

# The join port (QPs joined by modify_qp, drivers/softrnic/transport/iwarp/
# join.rs), open on wx0 once a join ran there: a well-formed MPA request
# that is no join request is refused at once (iw_mpa_rejects), one for a
# QP that is not waiting is reset at the MPA deadline (iw_mpa_timeouts),
# and joins work before and after.
join_once() {
    j=$(cd $T && timeout $((120 * SLOW)) python3 iwarp_join.py wx0 wy0 $((30 * SLOW)) 2>&1 | tail -n 1)
    case $j in OK*) echo "$j" ;; *) fail "join $1: $j" ;; esac
}
test_join_port() {
    # (A TCP connect to a closed port: its ARP exchange is what counts.)
    ip netns exec wb python3 -c "import socket; socket.socket().connect_ex(('$IP_A', 9))"
    join_once before
    before=$(counter iw_mpa_rejects)
    hostile 4791 join_stranger
    wait_for '[ "$(counter iw_mpa_rejects)" -gt "$before" ]' 50 ||
        fail "a request that is no join request: iw_mpa_rejects stayed at $before"
    before=$(counter iw_mpa_timeouts)
    hostile 4791 join_nobody
    wait_for '[ "$(counter iw_mpa_timeouts)" -gt "$before" ]' 100 ||
        fail "a join request for no waiting QP: iw_mpa_timeouts stayed at $before"
    join_once after
}

# A QP joined to one that never joins back gives up after join_timeout,
# whether it connects (wx0, the lower address) or waits (wy0): ERR, its
# SEND flushed, iw_mpa_timeouts counted.
test_join_alone() {
    for end in a b; do
        dev=wx0; [ $end = b ] && dev=wy0
        before=$(counter iw_mpa_timeouts $dev)
        j=$(cd $T && timeout $((120 * SLOW)) python3 iwarp_join.py wx0 wy0 $((JOIN_TIMEOUT + 30 * SLOW)) alone $end 2>&1 | tail -n 1)
        case $j in OK*) echo "$j" ;; *) fail "$j" ;; esac
        [ "$(counter iw_mpa_timeouts $dev)" -gt "$before" ] || fail "$dev: iw_mpa_timeouts stayed at $before"
    done
}

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
