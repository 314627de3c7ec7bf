#!/bin/sh
# Guest suite: the stock RDMA programs (ibverbs pingpongs, rdma_cm examples,
# perftest) between two RoCE devices in two network namespaces joined by a
# veth pair, for each pair of device types in PAIRS, plus a capture of one
# pingpong per pair checked with tshark and an ICRC check (roce_icrc.py).
#
#   qemu/run qemu/tests/traffic.sh [PAIR...] [only=TEST,TEST...]
#
# A pair is SERVER:CLIENT, each rxe (rdma_rxe) or sr (softrnic_roce); the
# server end lives in netns ta (ta0, 10.77.0.1), the client end in netns tb
# (tb0, 10.77.0.2).  One RoCE device per namespace: rxe and softrnic each bind
# UDP 4791 in the namespace of their netdev.  The devices themselves are in
# the shared rdma namespace, so each program end runs in its netns with -d and
# the GID index of its veth's IPv4 address.  Prints "PASS test_SERVER_CLIENT
# [result]" / "FAIL test_SERVER_CLIENT: why"; the rxe:rxe pair, which runs no
# softrnic code, is the reference: "REF PASS ..." / "REF FAIL ...".
. /src/qemu/tests/lib.sh
. /src/qemu/tests/lib_pairs.sh

PAIRS="rxe:rxe sr:sr sr:rxe rxe:sr"
# On the debug kernel (make check-debug) a pair takes over 20 minutes (at
# 83dbe6c: rxe:rxe 1328 s, sr:sr 1363 s) and the four outran the hour a
# suite has.  There sr:sr alone runs: softrnic at both ends, in both roles,
# is all of its code the debug kernel can check; interoperability with rxe
# is the stock kernel's run.
[ "$SLOW" -gt 1 ] && PAIRS="sr:sr"
TESTS="rc_pingpong uc_pingpong ud_pingpong srq_pingpong rc_pingpong_ipv6 ud_pingpong_ipv6 rping
       ucmatose udaddy rdma_server mckey write_bw read_bw send_bw atomic_bw write_bw_4qp many_qps send_lat qp_details qp_counters gso capture"

NS_A=ta VETH_A=ta0 IP_A=10.77.0.1 IP6_A=fd77::1
NS_B=tb VETH_B=tb0 IP_B=10.77.0.2 IP6_B=fd77::2
MCAST=239.77.0.1
T_NORMAL=$((20 * SLOW))  # seconds for every program end (rxe needs about 1 s)
T_QUICK=$((5 * SLOW))    # ... once rc_pingpong has failed on a pair (keeps a broken pair short)
T=$T_NORMAL
ICRC=/src/qemu/tests/roce_icrc.py

pairs= only=
for arg in "$@"; do
    case $arg in
    only=*) only=$(echo "${arg#only=}" | tr ',' ' ') ;;
    *:*) pairs="$pairs $arg" ;;
    *) echo "DIED traffic_args: unknown argument $arg"; exit 1 ;;
    esac
done
[ -n "$pairs" ] && PAIRS=$pairs
[ -n "$only" ] && TESTS=$only
plan_pairs $(words $TESTS)

# ---- the tests (each in its own subshell; server side = first of the pair) ----

t_rc_pingpong() { pingpong rc 18601 -s 4096 -n 100; }
t_uc_pingpong() { pingpong uc 18602 -s 4096 -n 100; }
t_ud_pingpong() { pingpong ud 18603 -s $((MTU - 40)) -n 100; }
# (16 QPs on one SRQ: 16 times the exchanges, so SLOW times fewer.)
t_srq_pingpong() { pingpong srq 18604 -s 4096 -n $((100 / SLOW)); }

# RoCEv2 over IPv6: the same pingpongs on the GIDs of the veths' IPv6
# addresses (the out-of-band exchange stays on IPv4).
ipv6_gids() {
    wait_for '[ -n "$(gid6_index $DEV_A $IP6_A)" ] && [ -n "$(gid6_index $DEV_B $IP6_B)" ]' 100 ||
        fail "no RoCE v2 GID for $IP6_A or $IP6_B"
    GID_A=$(gid6_index $DEV_A $IP6_A) GID_B=$(gid6_index $DEV_B $IP6_B)
}
t_rc_pingpong_ipv6() { ipv6_gids; pingpong rc 18606 -s 4096 -n 50; }
t_ud_pingpong_ipv6() { ipv6_gids; pingpong ud 18607 -s $((MTU - 40)) -n 50; }

t_rping() {
    server rping -s -a $IP_A -p 7201 -C 10 -S 1024 -V
    ready "cm_listening 7201"
    client rping -c -a $IP_A -p 7201 -C 10 -S 1024 -V
    finish
}

t_ucmatose() {
    server ucmatose -b $IP_A -p 7202 -C 10
    ready "cm_listening 7202"
    client ucmatose -s $IP_A -b $IP_B -p 7202 -C 10
    finish
    completed
}

t_udaddy() {
    server udaddy -b $IP_A -C 10
    ready "cm_listening 7174"
    client udaddy -s $IP_A -b $IP_B -C 10
    finish
    completed
}

t_rdma_server() {
    server rdma_server -s $IP_A -p 7203
    ready "cm_listening 7203"
    client rdma_client -s $IP_A -p 7203
    finish
}

# Multicast: the receiver (netns A) joins and posts its receives (it then
# prints "receiving data transfers"), then the sender (netns B) joins and
# sends 10 unsignaled messages.  mckey's sender leaves the group and destroys
# its QP right after posting, without waiting for the sends, so a device that
# transmits from a deferred task (rxe) may lose all of them: rxe's sent_pkts
# counter stayed put in 3 of 8 sender runs here, and softrnic's rcvd_pkts
# matched it every time.  So with rxe as the sender, the receiver waits for
# one message while the sender runs again (about 3.5 s a run, mckey sleeps
# 3 s after joining), up to 25 times, and each run that delivered nothing
# must show the evidence by the counters: rxe sent no packet, and the
# receiver got none.  A softrnic sender gets one run.
MCKEY_RUNS=25
# pkts DEV tx|rx: packets DEV sent or received so far (rxe's or softrnic's counters).
pkts() {
    case $1:$2 in
    rxe*:tx) counter $1 sent_pkts ;; rxe*:rx) counter $1 rcvd_pkts ;;
    *:tx) counter $1 sent_pkts ;; *:rx) counter $1 rcvd_pkts ;;
    esac
}
counter() { cat /sys/class/infiniband/$1/ports/1/hw_counters/$2; }
t_mckey() {
    T=$((MCKEY_RUNS * 7 * SLOW))  # (this test's subshell only)
    server mckey -m $MCAST -b $IP_A -C 1
    ready "grep -q 'receiving data transfers' /tmp/srv.out"
    try=0 runs=1 lost=
    [ $TYPE_B = rxe ] && runs=$MCKEY_RUNS
    while [ $try -lt $runs ] && kill -0 $SRV 2>/dev/null; do
        try=$((try + 1))
        sent=$(pkts $DEV_B tx) got=$(pkts $DEV_A rx)
        client mckey -m $MCAST -b $IP_B -s -C 10
        [ "$CLI_RC" = 0 ] || break
        # (mckey exits 0 after a failed join too.)
        grep -q 'data transfers complete' /tmp/cli.out || { CLI_RC="0, no data transfers"; break; }
        wait_for "! kill -0 $SRV" 10 && break
        sent=$(( $(pkts $DEV_B tx) - sent )) got=$(( $(pkts $DEV_A rx) - got ))
        lost="$lost${lost:+, }run $try: sender sent $sent packets, receiver got $got"
        [ $sent = 0 ] && [ $got = 0 ] || break
    done
    # Where the messages went, should they be lost.
    if kill -0 $SRV 2>/dev/null; then
        for d in $DEV_A $DEV_B; do echo "--- $d after $try sender runs ($lost):"; rdma statistic show link $d/1; done
        kill $SRV
    fi
    finish
    completed
    [ $try = 1 ] && result "received after 1 sender run" ||
        result "received after $try sender runs (allowed: rxe sent none of the earlier runs' messages: $lost)"
}

# Iterations: fewer on a slower kernel (the debug kernel, with another VM on
# the machine, moved rxe:rxe at about a sixtieth of the stock kernel's rate
# and timed out; the point there is the kernel's checks, not the figures).
# A softrnic client writes into its mapped send ring and rings the doorbell
# (an empty POST_SEND, counted in `doorbells`) only while the engine is
# idle; while writes await their ACKs it is busy and picks up new ones
# itself.  How often the engine goes idle depends on where the scheduler
# puts the poster and the engine (on one CPU the engine finishes each write
# before perftest posts the next: 117 and 128 doorbells in two runs of
# 2026-11-26, 300 doorbells for 303 idle periods in a probe, 1 to 12
# doorbells otherwise), so the rule is the protocol's: each idle
# period (`engine_idle`, counted when the engine sets the flag) lets the
# one posting thread ring once, as the doorbell clears the flag.  More
# doorbells than idle periods are posts to a busy engine that rang.
t_write_bw() {
    n=$((300 / SLOW))
    [ $TYPE_B = sr ] && d0=$(counter $DEV_B doorbells) i0=$(counter $DEV_B engine_idle)
    bw_test ib_write_bw 18611 -n $n
    [ $TYPE_B = sr ] || return 0
    d=$(($(counter $DEV_B doorbells) - d0)) i=$(($(counter $DEV_B engine_idle) - i0))
    [ $d -le $i ] || fail "$d doorbells for $i idle periods of the engine ($n writes): posts to a busy engine rang"
    result "$bw${unit:-MB}/s, $d doorbells, $i idle periods for $n writes"
}
t_read_bw() { bw_test ib_read_bw 18612 -n $((300 / SLOW)); }
t_send_bw() { bw_test ib_send_bw 18613 -n $((300 / SLOW)); }
t_atomic_bw() { bw_test ib_atomic_bw 18614 -n $((1000 / SLOW)); }
t_write_bw_4qp() { qp4_test ib_write_bw 18616; }

t_many_qps() { many_qps_test 18617; }

t_send_lat() {
    d0=$(deferred_doorbells $DEV_B)
    perftest ib_send_lat 18615 -n 200
    lat=$(column 't_avg' 6)
    [ -n "$lat" ] || fail "no t_avg in the client's output"
    lat_keeps_doorbells $d0
    result "${lat}us avg"
}

# veth_feature FEATURE on|off: an ethtool feature of both veths.
veth_feature() {
    ip netns exec $NS_A ethtool -K $VETH_A $1 $2 && ip netns exec $NS_B ethtool -K $VETH_B $1 $2
}

# A softrnic sender's long packets to one QP leave up to 16 to a GSO packet
# (`tx_gso`); over a veth a softrnic receiver takes it whole (`rx_gso`),
# rxe gets it cut into datagrams by the stack.  64 KiB SENDs both ways,
# every byte checked (--chk), and every packet counted as sent and received
# once.  Then at IB MTU 4096.  With the veths' UDP segmentation off
# (ethtool), softrnic sends one skb per packet: no GSO packet at all.
gso_counts() { for d in $ends; do echo "$d $(counter $d tx_gso) $(counter $d rx_gso)"; done; }
# gso_grown BEFORE: per softrnic end, "DEV TX RX": what its counters grew by.
gso_grown() { gso_counts | paste -d ' ' "$1" - | awk '{ print $1, $5 - $2, $6 - $3 }'; }
t_gso() {
    ends=
    for d in $DEV_A $DEV_B; do case $d in sr_*) ends="$ends $d" ;; esac; done
    [ -n "$ends" ] || skip "no softrnic end"
    gso_counts > /tmp/gso0
    p0=$(( $(pkts $DEV_A tx) + $(pkts $DEV_B tx) - $(pkts $DEV_A rx) - $(pkts $DEV_B rx) ))
    ( pingpong rc 18621 -s 65536 -n $((50 / SLOW)) ) > /tmp/gso.out 2>&1 ||
        { cat /tmp/gso.out; fail "pingpong: $(sed -n 's/^FAIL_REASON: //p' /tmp/gso.out | tail -n 1)"; }
    p=$(( $(pkts $DEV_A tx) + $(pkts $DEV_B tx) - $(pkts $DEV_A rx) - $(pkts $DEV_B rx) - p0 ))
    [ $p = 0 ] || fail "$p more packets sent than received"
    gso_grown /tmp/gso0 > /tmp/gso.d
    said=
    while read -r d tx rx; do
        [ $tx -gt 0 ] || fail "$d sent no GSO packet"
        # (Its peer is the other end: a softrnic one sends it GSO packets.)
        [ $TYPE_A != $TYPE_B ] || [ $rx -gt 0 ] || fail "$d took no GSO packet whole"
        said="$said$d tx_gso +$tx rx_gso +$rx, "
    done < /tmp/gso.d
    # IB MTU 4096 (the veths at 9000): a full packet is longer than a page,
    # and takes a compound page of its own (glue/net_shim.c: the
    # page-fragment cache fails such requests once its block runs short).
    ip -n $NS_A link set $VETH_A mtu 9000 && ip -n $NS_B link set $VETH_B mtu 9000 || fail "mtu 9000"
    gso_counts > /tmp/gso0
    ( pingpong rc 18623 -s 65536 -m 4096 -n $((20 / SLOW)) ) > /tmp/gso.out 2>&1; rc=$?
    ip -n $NS_A link set $VETH_A mtu 1500; ip -n $NS_B link set $VETH_B mtu 1500
    [ $rc = 0 ] || { cat /tmp/gso.out; fail "pingpong at IB MTU 4096: $(sed -n 's/^FAIL_REASON: //p' /tmp/gso.out | tail -n 1)"; }
    gso_grown /tmp/gso0 > /tmp/gso.d
    while read -r d tx rx; do
        [ $tx -gt 0 ] || fail "$d sent no GSO packet at IB MTU 4096"
    done < /tmp/gso.d
    veth_feature tx-udp-segmentation off || fail "ethtool"
    gso_counts > /tmp/gso0
    ( pingpong rc 18622 -s 65536 -n $((20 / SLOW)) ) > /tmp/gso.out 2>&1; rc=$?
    veth_feature tx-udp-segmentation on
    [ $rc = 0 ] || { cat /tmp/gso.out; fail "pingpong, UDP segmentation off: $(sed -n 's/^FAIL_REASON: //p' /tmp/gso.out | tail -n 1)"; }
    gso_grown /tmp/gso0 > /tmp/gso.d
    while read -r d tx rx; do
        [ $tx = 0 ] || fail "$d sent $tx GSO packets with the veths' UDP segmentation off"
    done < /tmp/gso.d
    result "${said}none with UDP segmentation off"
}

# Capture an RC pingpong on the server's veth, then check it: every UDP/4791
# packet dissected as InfiniBand, nothing malformed and no expert error, and
# every packet's ICRC right (Wireshark 4.4 shows infiniband.invariant.crc but
# does not verify it, so roce_icrc.py recomputes it).  The capture is copied
# to the run directory (/job) for a closer look.
# A softrnic end's QPs show their driver details (restrack's
# fill_res_qp_entry: `rdma -dd resource show qp`) while an RC pingpong runs.
t_qp_details() {
    dev=
    for d in $DEV_A $DEV_B; do case $d in sr_*) dev=$d ;; esac; done
    [ -n "$dev" ] || skip "no softrnic end"
    server ibv_rc_pingpong -d $DEV_A -g $GID_A -p 18620 -s 64 -n 1000000
    ready "tcp_listening 18620"
    ip netns exec $NS_B timeout $T ibv_rc_pingpong -d $DEV_B -g $GID_B -p 18620 -s 64 -n 1000000 $IP_A \
        > /tmp/cli.out 2>&1 &
    wait_for "rdma resource show qp link $dev/1 | grep -q 'type RC .*state RTS'" 100 ||
        fail "no RC QP in RTS on $dev: $(rdma resource show qp link $dev/1)"
    out=$(rdma -dd resource show qp link $dev/1 | tr -s ' \n' ' ')
    echo "$out"
    for f in sq_slots sq_queued rq_slots cpu una next_psn window reads_out retry_left expected_psn; do
        # (rdma(8) prints a driver's details with a drv_ prefix.)
        echo " $out " | grep -q " drv_$f [0-9]" || fail "no $f in the QP's details: $out"
    done
}

# Per-QP counters (rdma statistic qp, auto mode by QP type): a softrnic
# end's RC QP counts in its own counter while it lives, and the link's
# figures (ib_core adds the counters' to the port's) lose nothing.
t_qp_counters() {
    dev=
    for d in $DEV_A $DEV_B; do case $d in sr_*) dev=$d ;; esac; done
    [ -n "$dev" ] || skip "no softrnic end"
    hw() { cat /sys/class/infiniband/$dev/ports/1/hw_counters/$1; }
    rdma statistic qp set link $dev/1 auto type on || fail "auto mode refused"
    sends0=$(hw rdma_sends)
    server ibv_rc_pingpong -d $DEV_A -g $GID_A -p 18621 -s 64 -n 3000
    ready "tcp_listening 18621"
    ip netns exec $NS_B timeout $T ibv_rc_pingpong -d $DEV_B -g $GID_B -p 18621 -s 64 -n 3000 $IP_A \
        > /tmp/cli.out 2>&1 &
    cli=$!
    wait_for "rdma statistic qp show link $dev/1 | grep -q 'rdma_sends [1-9]'" 100
    shown=$(rdma statistic qp show link $dev/1 | tr -s ' \n' ' ')
    wait $cli; c=$?
    wait $SRV; s=$?
    rdma statistic qp set link $dev/1 auto off
    echo "$shown"
    [ $c = 0 ] && [ $s = 0 ] || fail "pingpong: client $c, server $s"
    echo " $shown " | grep -q "cntn [0-9]* qp-type RC .* rdma_sends [1-9]" ||
        fail "no RC QP counter with SENDs counted: $shown"
    grown=$(( $(hw rdma_sends) - sends0 ))
    [ $grown -ge 3000 ] || fail "the link's rdma_sends grew by $grown, not 3000, once the QP's counter was gone"
    result "$(echo " $shown " | sed -n 's/.* rdma_sends \([0-9]*\) .*/\1/p') SENDs in the QP's counter mid-run"
}

t_capture() {
    # A capture sees softrnic's GSO packets whole, as the veth takes them;
    # with the veths' UDP tunnel segmentation off the stack cuts them
    # before the capture, as for a NIC that takes none, so each datagram
    # checked here carries the ICRC softrnic computed for the headers the
    # cut gave it (core/roce_gso.rs).
    veth_feature tx-udp_tnl-segmentation off || fail "ethtool"
    f=/tmp/$PAIR_TAG.pcap
    ip netns exec $NS_A timeout $((300 * SLOW)) dumpcap -q -F pcap -i $VETH_A -w $f > /tmp/cap.out 2>&1 &
    cap=$!
    wait_for "grep -q 'Capturing on' /tmp/cap.out" 100 || { cat /tmp/cap.out; fail "dumpcap did not start"; }
    pp_why=
    ( pingpong rc 18605 -s 4096 -n 20 ) > /tmp/pp.out 2>&1 ||
        pp_why=$(sed -n 's/^FAIL_REASON: //p' /tmp/pp.out | tail -n 1)
    sleep 0.5
    kill -INT $cap 2>/dev/null; wait $cap
    veth_feature tx-udp_tnl-segmentation on
    [ -d /job ] && cp $f /job/ 2>/dev/null
    [ -s $f ] || { cat /tmp/cap.out /tmp/pp.out; fail "no capture file"; }

    # One tshark pass (each start costs seconds under TCG): per frame its
    # protocols, malformed marker, expert severities (error = 0x800000) and
    # UDP ports.  ICMP errors quote RoCE packets: reported, not counted.
    tshark -r $f -T fields -E separator=/t -E occurrence=a -e frame.number -e frame.protocols \
        -e _ws.malformed -e _ws.expert.severity -e udp.srcport -e udp.dstport > /tmp/frames.txt 2>/tmp/tshark.err ||
        { cat /tmp/tshark.err; fail "tshark could not read the capture"; }
    awk -F '\t' '
        $2 ~ /:icmp/ { if ($6 ~ /(^|,)4791(,|$)/) icmp++; next }
        $2 ~ /:udp:infiniband/ { ib++ }
        $3 != "" || $4 ~ /(^|,)8388608(,|$)/ { bad++; if (badlist == "") badlist = $1; else if (bad <= 5) badlist = badlist "," $1 }
        $2 ~ /:udp/ && $2 !~ /infiniband/ && ($5 == 4791 || $6 == 4791) { undissected++ }
        END { printf "%d %d %d %d %s\n", ib, bad, undissected, icmp, badlist }' /tmp/frames.txt > /tmp/counts.txt
    read n_ib n_bad n_undissected n_unreach bad_frames < /tmp/counts.txt
    python3 $ICRC $f > /tmp/icrc.out 2>&1
    icrc_rc=$?
    echo "RoCE packets $n_ib, malformed or expert errors $n_bad, UDP/4791 not dissected $n_undissected," \
        "ICMP errors about UDP/4791 $n_unreach"
    cat /tmp/icrc.out
    [ "$n_bad" = 0 ] || fail "$n_bad malformed packets or expert errors (frames $bad_frames)"
    [ "$n_undissected" = 0 ] || fail "$n_undissected UDP/4791 packets not dissected as InfiniBand"
    [ "$n_ib" -gt 0 ] || fail "no RoCE packets captured${pp_why:+ (pingpong: $pp_why)}"
    [ $icrc_rc = 0 ] || fail "ICRC: $(grep -m 1 '^frame' /tmp/icrc.out) ($(tail -n 1 /tmp/icrc.out))"
    checked=$(sed -n 's/^checked \([0-9]*\) .*/\1/p' /tmp/icrc.out)
    [ "$checked" = "$n_ib" ] || fail "ICRC checked $checked packets, tshark dissected $n_ib"
    [ -z "$pp_why" ] || { cat /tmp/pp.out; fail "pingpong under capture: $pp_why"; }
    result "$n_ib RoCE packets, ICRC ok"
}

n=0
for PAIR in $PAIRS; do
    n=$((n + 1))
    TYPE_A=${PAIR%%:*} TYPE_B=${PAIR#*:}
    PAIR_TAG=${TYPE_A}_$TYPE_B
    DEV_A=${TYPE_A}_a$n DEV_B=${TYPE_B}_b$n
    T=$T_NORMAL SETUP_FAILED=
    start=$(date +%s)
    setup_pair > /tmp/setup.out 2>&1 || SETUP_FAILED=$(lastline /tmp/setup.out)
    grep '^# ' /tmp/setup.out
    [ -z "$SETUP_FAILED" ] || sed 's/^/    /' /tmp/setup.out
    for t in $TESTS; do
        if ! run_one $t && [ $t = rc_pingpong ] && [ -z "$SETUP_FAILED" ]; then
            T=$T_QUICK
            echo "# rc_pingpong failed on $PAIR: ${T}s per program end for the rest of this pair"
        fi
    done
    teardown_pair > /tmp/teardown.out 2>&1
    grep '^# ' /tmp/teardown.out
    echo "# $PAIR: $(( $(date +%s) - start ))s"
done
