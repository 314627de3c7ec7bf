# Helpers for guest suites that run stock RDMA programs between two RDMA
# devices in two network namespaces joined by a veth pair (traffic.sh,
# faults.sh: RoCE; iwarp.sh, faults_iwarp.sh: iWARP).  Sourced after lib.sh; the suite sets
# NS_A VETH_A IP_A IP6_A, NS_B VETH_B IP_B IP6_B, DEV_A DEV_B, TYPE_A TYPE_B
# (rxe or sr: RoCE; siw or sw, softrnic_iwarp: iWARP), PAIR, PAIR_TAG and T
# (seconds per program end).

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
    if [ "$CLI_RC" != 0 ] || [ "$SRV_RC" != 0 ]; then
        # The devices' counters tell which end gave up, and why.
        for d in $DEV_A $DEV_B; do
            echo "--- $d counters:"; rdma statistic show link $d/1 2>&1 | tr -s ' \n' ' '; echo
        done
    fi
    [ "$CLI_RC" = 0 ] || fail "$(ended client "$CLI_RC" /tmp/cli.out)"
    [ "$SRV_RC" = 0 ] || fail "$(ended server "$SRV_RC" /tmp/srv.out)"
}

# tcp_mark: remember both namespaces' TCP counters; tcp_grew NS NAME: how
# much NAME (as nstat names it) grew in NS since.
tcp_mark() {
    for _ns in $NS_A $NS_B; do NSTAT_HISTORY=/tmp/nstat.$_ns ip netns exec $_ns nstat -n; done
}
tcp_grew() {
    NSTAT_HISTORY=/tmp/nstat.$1 ip netns exec $1 nstat -s -z $2 | awk -v n=$2 '$1 == n { v = $2 } END { print v + 0 }'
}

# completed: both ends printed "data transfers complete" (the rdma_cm
# examples print "test complete" and may exit 0 after an error event).
completed() {
    grep -q 'data transfers complete' /tmp/srv.out || fail "server: no data transfers complete: $(lastline /tmp/srv.out)"
    grep -q 'data transfers complete' /tmp/cli.out || fail "client: no data transfers complete: $(lastline /tmp/cli.out)"
}

# (result TEXT and skip WHY: lib.sh.)

# pingpong rc|uc|ud|srq PORT ARGS...: both ends of ibv_X_pingpong --chk.
pingpong() {
    kind=$1 port=$2; shift 2
    server ibv_${kind}_pingpong -d $DEV_A -g $GID_A -p $port --chk "$@"
    ready "tcp_listening $port"
    client ibv_${kind}_pingpong -d $DEV_B -g $GID_B -p $port --chk "$@" $IP_A
    finish
    result "$(mbits /tmp/cli.out)"
}
# mbits FILE: the "N Mbit/s" an ibv_*_pingpong printed into FILE.
mbits() { sed -n 's/.* = \([0-9.]*\) Mbit\/sec$/\1Mbit\/s/p' "$1" | head -n 1; }

# perftest PROGRAM PORT ARGS...: both ends of a perftest program (TCP
# out-of-band exchange, or rdma_cm with -R: then the QPs' GIDs are rdma_cm's
# to find, and SRV_BIND, if set, is the address the server listens on); the
# client's results table is in /tmp/cli.out.
# On a slower kernel the QPs get a local ACK timeout of 4.3 s (-u 20) instead
# of perftest's 67 ms: on the debug kernel the round trip of a full window
# outgrew 67 ms on a clean link, and softrnic's sr:sr write/read/send_bw ended
# in IBV_WC_RETRY_EXC_ERR (rxe, which retries forever, crawled past the
# timeout instead).  The stock kernel keeps perftest's default.
# With -R, a client refused by perftest's own race (`cm_listen_race`) runs
# again, twice at most, with both ends anew; the test's result then says so
# (`allowed`) and the log keeps the refused client's output.
perftest() {
    prog=$1 port=$2; shift 2
    [ "$SLOW" -gt 1 ] && set -- -u 20 "$@"
    case " $* " in
    *" -R "*) gid_a= gid_b= listening="cm_listening $port || tcp_listening $port" cm=1 ;;
    *) gid_a=$GID_A gid_b=$GID_B listening="tcp_listening $port" cm= ;;
    esac
    tries=0
    while :; do
        server $prog -d $DEV_A ${gid_a:+-x $gid_a} ${SRV_BIND:+--bind_source_ip $SRV_BIND} -p $port -F "$@"
        ready "$listening"
        client $prog -d $DEV_B ${gid_b:+-x $gid_b} -p $port -F "$@" $IP_A
        [ -n "$cm" ] && [ $tries -lt 2 ] && cm_listen_race || break
        tries=$((tries + 1))
        kill $SRV 2>/dev/null; wait $SRV
        echo "--- perftest's rdma_cm listen race: the refused client (exit $CLI_RC), run again:"
        sed 's/^/    /' /tmp/cli.out
        allowed "perftest's rdma_cm listen race, the client run again"
    done
    finish
}

# cm_listen_race [FILE]: the client of a perftest -R run failed, refused by the
# server's CM with reason 8 (IB_CM_REJ_INVALID_SERVICE_ID: nothing listens)
# before any result.  perftest's race, not the devices': its first rdma_cm
# connection carries the parameters, then the server destroys that listener
# and listens anew for the data QPs only after a handshake that releases
# the client first, whose connect may come before the new listen; its retry
# loop then reuses what it freed (exit 139).  Seen with rxe and softrnic
# alike; perftest_communication.c and perftest_resources.c up to 25.10,
# fixed upstream in 26.04 (linux-rdma/perftest pull requests 368 and 378).
# (FILE: the client's output, /tmp/cli.out unless given.)
cm_listen_race() {
    _f=${1:-/tmp/cli.out}
    [ "$CLI_RC" != 0 ] && grep -q 'Event: RDMA_CM_EVENT_REJECTED; error: 8\.$' "$_f" &&
        ! grep -q 'BW average\|t_typical' "$_f"
}

# A perftest bandwidth run of SECS seconds (-D) measures between margins of
# SECS/4 whole seconds at each end (timed by its alarm): the window is the
# rest.  Under 4 s the margin is 0 and the window breaks (0 MiB/s on siw).
measured_window() { echo $(($1 - 2 * ($1 / 4))); }

# completed_in_window: DONE := the messages the client completed in its
# measured window (the iterations column of its BW average row), or fail
# if none.  Not its figure: perftest converts cycles to time with a CPU
# clock it calibrates after the run, by a regression that fails (r^2 < 0.9)
# when the VM is still busy, and then prints 0.00 whatever it measured
# (seen for rxe, siw and softrnic alike: "Correlation coefficient r^2: 0.83
# < 0.9", 470 iterations).
completed_in_window() {
    DONE=$(column 'BW average' 2)
    [ "${DONE:-0}" -gt 0 ] 2>/dev/null || fail "no message completed in the measured window (${DONE:-no} iterations)"
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

# qp4_test PROGRAM PORT [ARGS...]: four QPs of 64 KiB (or QP4_SIZE) messages for a
# duration, connected through rdma_cm, all posted and polled by one thread:
# an engine that loads that thread or its CPU with the QPs' work completes
# no message in perftest's measured window (issue 16's first doorbell
# change did: every QP's work item moved beside the polling thread; over
# rdma_cm, as the bench connects, not over perftest's own exchange).  The
# count, not the figure: perftest prints 0.00 MiB/s whenever its CPU clock
# calibration fails.
# With rxe as the responder (the server), the QPs get a local ACK timeout
# of 4.3 s (-u 20), as on the debug kernel (perftest): under TCG rxe
# answers a window of four QPs of 64 KiB writes more slowly than
# perftest's 67 ms, and softrnic's requester, after retry_cnt timeouts in
# a row, ends in IBV_WC_RETRY_EXC_ERR, as the spec says it must (rxe's own
# requester retries forever).  Seen in 8 runs of 10 before softrnic's
# requester halved its window on each timeout, 1 in 10 after (rxe_sr,
# rxe's counters: duplicate_request in the thousands); sr:sr passed 10 of
# 10.  (A setting, not an allowance: no ending is excused.)
# On the debug kernel it is skipped: there rxe:rxe, the reference, also
# completed no message in its window (0 iterations; on its second run the
# client outlived the 80 s timeout), as sr:sr did (session 30).
qp4_test() {
    prog=$1 port=$2; shift 2
    [ "$SLOW" -gt 1 ] && skip "on the debug kernel rxe:rxe too completes no message in the window"
    secs=4
    [ "$TYPE_A" = rxe ] && set -- -u 20 "$@"
    size=${QP4_SIZE:-65536}
    bind=$SRV_BIND; SRV_BIND=$IP_A
    perftest $prog $port -R -q 4 -s $size -D $secs "$@"
    SRV_BIND=$bind
    completed_in_window
    result "$DONE messages of $((size / 1024)) KiB over 4 QPs in the $(measured_window $secs) s window"
}

# deferred_doorbells DEV: a softrnic device's `doorbells_deferred` (0 for
# another device).
deferred_doorbells() {
    case $1 in sr_* | sw_*) cat /sys/class/infiniband/$1/ports/1/hw_counters/doorbells_deferred ;;
    *) echo 0 ;; esac
}

# many_qps_test PORT: 64 QPs of depth 4 carrying 4 KiB writes, all posted
# and polled by one thread that posts to each in turn before it polls (the
# bench's many_qps at a size a test can connect in a second).  Its posts
# run ahead of its polling, so a softrnic client leaves its doorbells to
# the work item (`doorbells_deferred` moves) instead of sending each
# message in the post, which made a pass over 1024 QPs take seconds
# (drivers/softrnic/transport/mod.rs, `Qp::posts_ahead`).  Every message
# must complete.  With rxe as the responder the QPs get the longer ACK
# timeout, as in qp4_test.
many_qps_test() {
    port=$1
    [ "$TYPE_A" = rxe ] && set -- -u 20 || set --
    d0=$(deferred_doorbells $DEV_B)
    bind=$SRV_BIND; SRV_BIND=$IP_A
    perftest ib_write_bw $port -R -q 64 -t 4 -s 4096 -n $((40 / SLOW)) "$@"
    SRV_BIND=$bind
    bw=$(column 'BW average' 4)
    [ -n "$bw" ] || fail "no BW average in the client's output"
    d=$(($(deferred_doorbells $DEV_B) - d0))
    case $DEV_B in
    sr_* | sw_*) [ $d -gt 0 ] || fail "no doorbell deferred while 64 QPs' completions went unpolled" ;;
    esac
    result "${bw} MB/s, $d doorbells deferred"
}

# lat_keeps_doorbells D0: a softrnic client's latency run (one message
# polled before the next is posted) deferred no doorbell since the
# client's count was D0: each post sends from the posting thread.
lat_keeps_doorbells() {
    d=$(($(deferred_doorbells $DEV_B) - $1))
    [ $d = 0 ] || fail "$d doorbells deferred in a latency run, which polls each completion"
}

# The fault profiles (faults.sh, faults_iwarp.sh): netem on both ends of
# the veth between the namespaces, so data and acknowledgements both suffer.
# netem arguments of a profile (empty: no qdisc).
netem_of() {
    case $1 in
    clean) echo "" ;;
    loss0.1) echo "loss 0.1%" ;;
    loss1) echo "loss 1%" ;;
    loss5) echo "loss 5%" ;;
    # Gilbert-Elliott: 0.5 % of packets enter the bad state, 25 % leave it
    # (bursts of 4 on average); half lost in the bad state, none in the
    # good one: about 1 % lost, in bursts.
    burst) echo "loss gemodel 0.5% 25% 50% 0%" ;;
    # Not in any suite's list: longer and denser bursts, for a closer look
    # at how the retry budget fares (testing.md, "The burst profile's
    # clock"): faults.sh only=harsh,harsh,... tests=rping.
    harsh) echo "loss gemodel 1% 15% 70% 0%" ;;
    # A quarter of the packets go at once, the rest 1 ms later.
    reorder) echo "delay 1ms reorder 25%" ;;
    dup) echo "duplicate 1%" ;;
    # Bit flips: the ICRC must catch those in the RoCE payload (IPv4 RoCE
    # sends UDP checksum 0, so nothing else does); over TCP its checksum
    # catches nearly all, and the MPA CRC, when on, the rest.
    corrupt) echo "corrupt 0.1%" ;;
    # faults.sh's feed for its counter verdict under corrupt (see there).
    corrupt1) echo "corrupt 1%" ;;
    *) return 1 ;;
    esac
}

# netem drops, delays and duplicates an skb whole: a GSO packet (up to 16
# of softrnic's RoCE packets, a TCP sender's TSO packet of up to 44
# segments, 64 KiB) is lost or duplicated all at once.  A profile named in
# PER_PACKET (set by the suite) caps both veths' GSO at one segment
# (gso_max_segs 1, so the senders build one skb per packet: softrnic's
# netdev_gso_mode sees it), so that its rate is per packet as on a wire;
# every other profile restores the veth's default (65535).
PER_PACKET=
set_fault() { # PROFILE: the same netem on both ends
    stop_clock
    args=$(netem_of $1) || return 1
    segs=65535
    case " $PER_PACKET " in *" $1 "*) segs=1 ;; esac
    for e in "$NS_A $VETH_A" "$NS_B $VETH_B"; do
        set -- $e
        ip netns exec $1 tc qdisc del dev $2 root 2>/dev/null
        ip -n $1 link set dev $2 gso_max_segs $segs || return 1
        [ -z "$args" ] || ip netns exec $1 tc qdisc add dev $2 root netem $args || return 1
    done
    case $args in *gemodel*) start_clock ;; esac
}

# netem's Gilbert-Elliott chain takes one step per packet, not per unit of
# time: on an idle link its bad state lasts until traffic resumes, however
# long.  A QP stalled on a lost packet sends one retransmission per ACK
# timeout, so a burst "of 4 packets" took 4 of its timeouts, and 8 in a
# row spend retry_cnt 7 (IBV_WC_RETRY_EXC_ERR, as the spec says) with
# nothing wrong at either end: a model of an ideal requester predicts it
# for 0.12 % of rping runs under the burst profile; under netem_of's
# harsh chain 12 of 120 runs failed, the model predicts 9.7 %.
# A real link's bursts pass in milliseconds: a steady trickle of UDP
# datagrams (link_clock.py, 200 a second each way) moves both chains on in
# time, and bursts still hit a busy flow's packets back to back.
CLOCK=
start_clock() {
    python3 /src/qemu/tests/link_clock.py $NS_A $IP_A $NS_B $IP_B > /dev/null 2>&1 &
    CLOCK=$!
}
stop_clock() {
    [ -n "$CLOCK" ] || return 0
    kill $CLOCK 2>/dev/null; wait $CLOCK 2>/dev/null
    CLOCK=
}

# make_dev TYPE NETNS NETDEV NAME
make_dev() {
    case $1 in
    rxe) modprobe rdma_rxe || return 1; lt=rxe ;;
    sr) modprobe softrnic || return 1; lt=softrnic_roce ;;
    siw) modprobe siw || return 1; lt=siw ;;
    sw) modprobe softrnic || return 1; lt=softrnic_iwarp ;;
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
    # Distinct interface indexes: siw binds a wildcard listen to its
    # netdev's index but in the listener's namespace, so two ends both at
    # index 2 (each the first in its namespace) collide there (rcopy's
    # wildcard rlisten: EADDRINUSE, siw:siw as much as sw:siw).
    ip link add $VETH_A netns $NS_A index 20 type veth peer name $VETH_B netns $NS_B index 21 || return 1
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
    if is_iwarp; then
        # iWARP: rdma_cm finds the devices by address; no GIDs to pick.
        GID_A= GID_B= MTU=$(ip -n $NS_A -o link show $VETH_A | sed -n 's/.* mtu \([0-9]*\).*/\1/p')
        echo "# $PAIR: $DEV_A ($NS_A $IP_A) <-> $DEV_B ($NS_B $IP_B)"
        return 0
    fi
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
    stop_clock
    kill_leftovers
    for d in $DEV_A $DEV_B; do
        rdma link show $d/1 >/dev/null 2>&1 && { timeout $((60 * SLOW)) rdma link del $d || echo "# rdma link del $d failed"; }
    done
    ip netns del $NS_A 2>/dev/null; ip netns del $NS_B 2>/dev/null
}

# run_one TEST: one PASS/FAIL line named TEST_SERVER_CLIENT.
run_one() {
    name=${1}_$PAIR_TAG
    if [ -n "$SETUP_FAILED" ]; then
        echo "$(is_reference && echo 'REF ')FAIL $name: pair setup failed: $SETUP_FAILED"
        return 1
    fi
    ( set +e; "t_$1" ) > /tmp/test.out 2>&1 < /dev/null
    rc=$?
    kill_leftovers
    # rxe:rxe runs no softrnic code: the reference, reported apart.
    ref=; is_reference && ref="REF "
    skipped=$(sed -n 's/^SKIP_REASON: //p' /tmp/test.out | tail -n 1)
    if [ $rc = 0 ] && [ -n "$skipped" ]; then
        echo "${ref}SKIP $name: $skipped"
    elif [ $rc = 0 ]; then
        res=$(sed -n 's/^RESULT: //p' /tmp/test.out | tail -n 1)
        echo "${ref}PASS $name${res:+ $res}"
        # A pass by an allowance keeps its evidence in the log.
        case $res in *"(allowed: "*)
            grep -v '^RESULT: ' /tmp/test.out | tail -n 60 | sed 's/^/    /' ;;
        esac
    else
        why=$(grep '^FAIL_REASON: ' /tmp/test.out | tail -n 1 | sed 's/^FAIL_REASON: //')
        echo "${ref}FAIL $name: ${why:-exited non-zero}"
        grep -v '^FAIL_REASON: \|^RESULT: ' /tmp/test.out | tail -n 40 | sed 's/^/    /'
    fi
    return $rc
}
# The pairs that run no softrnic code: rxe:rxe and siw:siw.
is_reference() { [ "$TYPE_A" = "$TYPE_B" ] && { [ "$TYPE_A" = rxe ] || [ "$TYPE_A" = siw ]; }; }
is_iwarp() { [ "$TYPE_A" = siw ] || [ "$TYPE_A" = sw ]; }
# plan_pairs N: the suite's plan, N verdicts for each pair of $PAIRS but the
# reference pair (rxe:rxe).
plan_pairs() {
    _n=0
    for _p in $PAIRS; do [ $_p = rxe:rxe ] || [ $_p = siw:siw ] || _n=$((_n + $1)); done
    plan $_n
}

