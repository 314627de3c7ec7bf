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
# [result]" / "FAIL test_SERVER_CLIENT: why".
. /src/qemu/tests/lib.sh

PAIRS="rxe:rxe sr:sr sr:rxe rxe:sr"
TESTS="rc_pingpong uc_pingpong ud_pingpong srq_pingpong rc_pingpong_ipv6 ud_pingpong_ipv6 rping
       ucmatose udaddy rdma_server mckey write_bw read_bw send_bw atomic_bw send_lat capture"

NS_A=ta VETH_A=ta0 IP_A=10.77.0.1 IP6_A=fd77::1
NS_B=tb VETH_B=tb0 IP_B=10.77.0.2 IP6_B=fd77::2
MCAST=239.77.0.1
T_NORMAL=20     # seconds for every program end (rxe needs about 1 s)
T_QUICK=5       # ... once rc_pingpong has failed on a pair (keeps a broken pair short)
T=$T_NORMAL
ICRC=/src/qemu/tests/roce_icrc.py

pairs= only=
for arg in "$@"; do
    case $arg in
    only=*) only=$(echo "${arg#only=}" | tr ',' ' ') ;;
    *:*) pairs="$pairs $arg" ;;
    *) echo "FAIL traffic_args: unknown argument $arg"; exit 1 ;;
    esac
done
[ -n "$pairs" ] && PAIRS=$pairs
[ -n "$only" ] && TESTS=$only

# ---- helpers (used inside the tests' subshells) ----

# errline FILE: the last error-looking line of FILE; lastline: that, else the last line.
errline() {
    grep -iE 'error|fail|couldn|unable|mismatch|invalid|refused|unreach' "$1" 2>/dev/null | tail -n 1 |
        sed 's/^[[:space:]]*//' | cut -c1-160
}
lastline() {
    l=$(errline "$1")
    [ -n "$l" ] || l=$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 | sed 's/^[[:space:]]*//' | cut -c1-160)
    echo "$l"
}
# ended WHO STATUS FILE: "WHO timed out after Ts[: error line]" / "WHO exited N: last line".
ended() {
    if [ "$2" = 124 ]; then w="$1 timed out after ${T}s" l=$(errline "$3")
    else w="$1 exited $2" l=$(lastline "$3"); fi
    echo "$w${l:+: $l}"
}

# server CMD...: start CMD in netns A in the background; output in /tmp/srv.out
# (line-buffered, so that a program killed on timeout still shows how far it got).
server() {
    ip netns exec $NS_A timeout $T stdbuf -oL "$@" > /tmp/srv.out 2>&1 &
    SRV=$!
}

# client CMD...: run CMD in netns B; output in /tmp/cli.out, status in CLI_RC.
client() {
    ip netns exec $NS_B timeout $T stdbuf -oL "$@" > /tmp/cli.out 2>&1
    CLI_RC=$?
}

# ready CONDITION: wait until CONDITION holds (the server listens); fail if
# the server exits first or it takes 20 s.
ready() {
    wait_for "! kill -0 $SRV || { $1; }" 100
    if kill -0 $SRV 2>/dev/null && eval "$1" >/dev/null 2>&1; then return 0; fi
    kill $SRV 2>/dev/null; wait $SRV; rc=$?
    cat /tmp/srv.out
    fail "server not ready: $(ended server $rc /tmp/srv.out)"
}
tcp_listening() { ip netns exec $NS_A ss -Hltn "sport = :$1" | grep -q .; }
cm_listening() { rdma resource show cm_id | grep -q "state LISTEN .* src-addr $IP_A:$1 "; }

# finish: wait for the server (killed if the client failed), show both
# outputs, and fail unless both ends exited 0.
finish() {
    [ "$CLI_RC" = 0 ] || kill $SRV 2>/dev/null
    wait $SRV
    SRV_RC=$?
    echo "--- server: exit $SRV_RC"; cat /tmp/srv.out
    echo "--- client: exit $CLI_RC"; cat /tmp/cli.out
    [ "$CLI_RC" = 0 ] || fail "$(ended client "$CLI_RC" /tmp/cli.out)"
    [ "$SRV_RC" = 0 ] || fail "$(ended server "$SRV_RC" /tmp/srv.out)"
}

# completed: both ends printed "data transfers complete" (the rdma_cm
# examples print "test complete" and may exit 0 after an error event).
completed() {
    grep -q 'data transfers complete' /tmp/srv.out || fail "server: no data transfers complete: $(lastline /tmp/srv.out)"
    grep -q 'data transfers complete' /tmp/cli.out || fail "client: no data transfers complete: $(lastline /tmp/cli.out)"
}

# result TEXT: the text after the test's name on its PASS line.
result() { echo "RESULT: $*"; }

# pingpong rc|uc|ud|srq PORT ARGS...: both ends of ibv_X_pingpong --chk.
pingpong() {
    kind=$1 port=$2; shift 2
    server ibv_${kind}_pingpong -d $DEV_A -g $GID_A -p $port --chk "$@"
    ready "tcp_listening $port"
    client ibv_${kind}_pingpong -d $DEV_B -g $GID_B -p $port --chk "$@" $IP_A
    finish
    result "$(sed -n 's/.* = \([0-9.]*\) Mbit\/sec$/\1Mbit\/s/p' /tmp/cli.out | head -n 1)"
}

# perftest PROGRAM PORT ARGS...: both ends of a perftest program (TCP
# out-of-band exchange); the client's results table is in /tmp/cli.out.
perftest() {
    prog=$1 port=$2; shift 2
    server $prog -d $DEV_A -x $GID_A -p $port -F "$@"
    ready "tcp_listening $port"
    client $prog -d $DEV_B -x $GID_B -p $port -F "$@" $IP_A
    finish
}

# column HEADER_WORD N: field N of the first numeric row after the header
# line containing HEADER_WORD in the client's results table.
column() {
    awk -v h="$1" -v n="$2" 'index($0, h) { t = 1; next }
        t && $1 ~ /^[0-9]+$/ && NF >= n { print $n; exit }' /tmp/cli.out
}

bw_test() {
    perftest "$@"
    bw=$(column 'BW average' 4)
    [ -n "$bw" ] || fail "no BW average in the client's output"
    unit=$(sed -n 's/.*BW average\[\([A-Za-z]*\)\/sec\].*/\1/p' /tmp/cli.out | head -n 1)
    result "$bw${unit:-MB}/s"
}

# ---- the tests (each in its own subshell; server side = first of the pair) ----

t_rc_pingpong() { pingpong rc 18601 -s 4096 -n 100; }
t_uc_pingpong() { pingpong uc 18602 -s 4096 -n 100; }
t_ud_pingpong() { pingpong ud 18603 -s $((MTU - 40)) -n 100; }
t_srq_pingpong() { pingpong srq 18604 -s 4096 -n 100; }

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
# transmits from a deferred task (rxe) may lose all of them: the receiver
# waits for one message, and the sender runs again (about 3.5 s a run, mckey
# sleeps 3 s after joining) while the receiver waits, up to 5 times.
t_mckey() {
    server mckey -m $MCAST -b $IP_A -C 1
    ready "grep -q 'receiving data transfers' /tmp/srv.out"
    try=0
    while [ $try -lt 5 ] && kill -0 $SRV 2>/dev/null; do
        try=$((try + 1))
        client mckey -m $MCAST -b $IP_B -s -C 10
        [ "$CLI_RC" = 0 ] || break
        # (mckey exits 0 after a failed join too.)
        grep -q 'data transfers complete' /tmp/cli.out || { CLI_RC="0, no data transfers"; break; }
        wait_for "! kill -0 $SRV" 10 && break
    done
    finish
    completed
    result "received after $try sender run(s)"
}

t_write_bw() { bw_test ib_write_bw 18611 -n 300; }
t_read_bw() { bw_test ib_read_bw 18612 -n 300; }
t_send_bw() { bw_test ib_send_bw 18613 -n 300; }
t_atomic_bw() { bw_test ib_atomic_bw 18614 -n 1000; }

t_send_lat() {
    perftest ib_send_lat 18615 -n 200
    lat=$(column 't_avg' 6)
    [ -n "$lat" ] || fail "no t_avg in the client's output"
    result "${lat}us avg"
}

# Capture an RC pingpong on the server's veth, then check it: every UDP/4791
# packet dissected as InfiniBand, nothing malformed and no expert error, and
# every packet's ICRC right (Wireshark 4.4 shows infiniband.invariant.crc but
# does not verify it, so roce_icrc.py recomputes it).  The capture is copied
# to the run directory (/job) for a closer look.
t_capture() {
    f=/tmp/$PAIR_TAG.pcap
    ip netns exec $NS_A timeout 300 dumpcap -q -F pcap -i $VETH_A -w $f > /tmp/cap.out 2>&1 &
    cap=$!
    wait_for "grep -q 'Capturing on' /tmp/cap.out" 100 || { cat /tmp/cap.out; fail "dumpcap did not start"; }
    pp_why=
    ( pingpong rc 18605 -s 4096 -n 20 ) > /tmp/pp.out 2>&1 ||
        pp_why=$(sed -n 's/^FAIL_REASON: //p' /tmp/pp.out | tail -n 1)
    sleep 0.5
    kill -INT $cap 2>/dev/null; wait $cap
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

# ---- pairs ----

# make_dev TYPE NETNS NETDEV NAME
make_dev() {
    case $1 in
    rxe) modprobe rdma_rxe || return 1; lt=rxe ;;
    sr) modprobe softrnic || return 1; lt=softrnic_roce ;;
    *) echo "unknown device type $1"; return 1 ;;
    esac
    ip netns exec $2 rdma link add $4 type $lt netdev $3
}

# gid_index DEV IP: the index of DEV's RoCE v2 GID for IPv4 address IP
# (ibv_devinfo asks the kernel for the table; reading rxe's ~1000 GID sysfs
# files would take half a minute under TCG).
gid_index() {
    ibv_devinfo -v -d "$1" |
        sed -n "s/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:$(echo "$2" | sed 's/\./\\./g'), RoCE v2\$/\1/p" |
        head -n 1
}
# gid6_index DEV IP6: the same for an IPv6 address.
gid6_index() {
    ibv_devinfo -v -d "$1" | sed -n "s/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*$2, RoCE v2\$/\1/p" | head -n 1
}
active_mtu() { ibv_devinfo -d "$1" | sed -n 's/^[[:space:]]*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p'; }

setup_pair() { # TYPE_A TYPE_B
    ip netns add $NS_A && ip netns add $NS_B || return 1
    ip link add $VETH_A netns $NS_A type veth peer name $VETH_B netns $NS_B || return 1
    for s in "$NS_A $VETH_A $IP_A $IP6_A" "$NS_B $VETH_B $IP_B $IP6_B"; do
        set -- $s
        ip -n $1 link set lo up && ip -n $1 addr add $3/24 dev $2 &&
            ip -n $1 addr add $4/64 dev $2 nodad && ip -n $1 link set $2 up &&
            ip -n $1 route add 224.0.0.0/4 dev $2 || return 1
    done
    make_dev $TYPE_A $NS_A $VETH_A $DEV_A || return 1
    make_dev $TYPE_B $NS_B $VETH_B $DEV_B || return 1
    for d in $DEV_A $DEV_B; do
        wait_for "ibv_devinfo -d $d | grep -q PORT_ACTIVE" 100 || { echo "$d: port not active"; return 1; }
    done
    wait_for '[ -n "$(gid_index $DEV_A $IP_A)" ] && [ -n "$(gid_index $DEV_B $IP_B)" ]' 100 ||
        { echo "no RoCE v2 GID for $IP_A on $DEV_A or $IP_B on $DEV_B"; ibv_devinfo -v -d $DEV_A | grep GID;
          ibv_devinfo -v -d $DEV_B | grep GID; return 1; }
    GID_A=$(gid_index $DEV_A $IP_A) GID_B=$(gid_index $DEV_B $IP_B)
    MTU_A=$(active_mtu $DEV_A) MTU_B=$(active_mtu $DEV_B)
    MTU=$MTU_A; [ "$MTU_B" -lt "$MTU" ] && MTU=$MTU_B
    echo "# $PAIR: $DEV_A ($NS_A $IP_A gid $GID_A mtu $MTU_A) <-> $DEV_B ($NS_B $IP_B gid $GID_B mtu $MTU_B)"
}

# Stop whatever a test left running in the two namespaces (our servers).
kill_leftovers() {
    pids=$(ip netns pids $NS_A 2>/dev/null; ip netns pids $NS_B 2>/dev/null)
    [ -n "$pids" ] || return 0
    kill $pids 2>/dev/null
    wait_for '[ -z "$(ip netns pids $NS_A; ip netns pids $NS_B)" ]' 10 && return 0
    kill -9 $(ip netns pids $NS_A 2>/dev/null; ip netns pids $NS_B 2>/dev/null) 2>/dev/null
}

teardown_pair() {
    kill_leftovers
    for d in $DEV_A $DEV_B; do
        rdma link show $d/1 >/dev/null 2>&1 && { timeout 60 rdma link del $d || echo "# rdma link del $d failed"; }
    done
    ip netns del $NS_A 2>/dev/null; ip netns del $NS_B 2>/dev/null
}

# run_one TEST: one PASS/FAIL line named TEST_SERVER_CLIENT.
run_one() {
    name=${1}_$PAIR_TAG
    if [ -n "$SETUP_FAILED" ]; then
        echo "FAIL $name: pair setup failed: $SETUP_FAILED"
        return 1
    fi
    ( set +e; "t_$1" ) > /tmp/test.out 2>&1 < /dev/null
    rc=$?
    kill_leftovers
    if [ $rc = 0 ]; then
        res=$(sed -n 's/^RESULT: //p' /tmp/test.out | tail -n 1)
        echo "PASS $name${res:+ $res}"
    else
        why=$(grep '^FAIL_REASON: ' /tmp/test.out | tail -n 1 | sed 's/^FAIL_REASON: //')
        echo "FAIL $name: ${why:-exited non-zero}"
        grep -v '^FAIL_REASON: \|^RESULT: ' /tmp/test.out | tail -n 15 | sed 's/^/    /'
    fi
    return $rc
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
