#!/bin/sh
# runs under: qemu/run-pair
# Guest suite, two machines (issue 17): softrnic in this VM against
# softrnic, rxe and siw in another VM, each VM its own kernel, joined by a
# QEMU socket network (qemu/run-pair): nothing shared but the wire.  The
# peer's half of each test runs there through its agent (lib_peer.sh).
# For each pair LOCAL:PEER (this VM's device type, the peer's):
#   rping, rping_rev        rping -V, the server here / on the peer
#   write_bw, write_bw_rev  ib_write_bw over rdma_cm, 64 KiB messages
#   nvme, nvme_rev          NVMe over Fabrics, the target on the peer / here
#                           (a memory-backed null_blk), fio writing and
#                           verifying 4 KiB random (depth 32) and 128 KiB
#                           sequential (depth 1) I/O
#
#   qemu/run-pair qemu/tests/slow/two_machines.sh [PAIR...] [only=TEST,...]
#
# A pair is sr:sr, sr:rxe (RoCE) or sw:sw, sw:siw (iWARP); this VM always
# runs softrnic.  In `make check-slow` for now (first runs, session 36).
. /src/qemu/tests/lib.sh
. /src/qemu/tests/lib_consumers.sh
. /src/qemu/tests/lib_peer.sh

PAIRS="sr:sr sr:rxe sw:sw sw:siw"
TESTS="rping rping_rev write_bw write_bw_rev nvme nvme_rev"
T=$((120 * SLOW))

pairs= only=
for arg in "$@"; do
    case $arg in
    only=*) only=$(echo "${arg#only=}" | tr ',' ' ') ;;
    *:*) pairs="$pairs $arg" ;;
    *) echo "DIED two_machines_args: unknown argument $arg"; exit 1 ;;
    esac
done
[ -n "$pairs" ] && PAIRS=$pairs
[ -n "$only" ] && TESTS=$only
plan $(( $(words $PAIRS) * $(words $TESTS) ))

# ---- devices at both ends of the wire ----

# setup_pair LOCAL PEER N: LDEV here and PDEV on the peer, both on eth0.
setup_pair() {
    LDEV=l_$1$3 PDEV=p_$2$3
    modprobe $(module_of $1) || return 1
    rdma link add $LDEV type $(link_type $1) netdev eth0 || return 1
    on_peer 60 "modprobe $(module_of $2) && rdma link add $PDEV type $(link_type $2) netdev eth0" || return 1
    wait_for "ibv_devinfo -d $LDEV | grep -q PORT_ACTIVE" 100 || { echo "$LDEV: port not active"; return 1; }
    on_peer 60 "i=0; until ibv_devinfo -d $PDEV | grep -q PORT_ACTIVE; do i=\$((i+1)); [ \$i -lt 100 ] || exit 1; sleep 0.2; done" ||
        { echo "$PDEV (peer): port not active"; return 1; }
    echo "# $LDEV ($(link_type $1)) here, $LOCAL_IP <-> $PDEV ($(link_type $2)) on the peer, $PEER_IP"
}
teardown_pair() { # LOCAL PEER
    rdma link del $LDEV 2>/dev/null
    # (rxe keeps its UDP socket while loaded: unloaded for the next RoCE device)
    on_peer 60 "rdma link del $PDEV; [ $2 != rxe ] || rmmod rdma_rxe; true" >/dev/null
}
# Stop what a test left running, here and on the peer.
leftovers() {
    pkill -x rping; pkill -x ib_write_bw
    on_peer 20 "pkill -x rping; pkill -x ib_write_bw; true" >/dev/null
}

# listening_here PORT / listening_there PORT: an rdma_cm listener on it
# (at the VM's address, or at any: perftest's server binds none).
listening_here() { rdma resource show cm_id | grep -qE "state LISTEN .* src-addr ($LOCAL_IP|0\.0\.0\.0):$1 "; }
listening_there() { on_peer 10 "rdma resource show cm_id" | grep -qE "state LISTEN .* src-addr ($PEER_IP|0\.0\.0\.0):$1 "; }

# ---- the tests ----

# here_serves PORT SERVER CLIENT: SERVER here (an rdma_cm listener on
# PORT), CLIENT on the peer; peer_serves: the other way round.  Both ends
# must exit 0; their outputs are in /tmp/srv.out and /tmp/cli.out.
here_serves() {
    timeout $T $2 > /tmp/srv.out 2>&1 &
    srv=$!
    wait_for "listening_here $1 || ! kill -0 $srv" 100
    on_peer $T "$3" > /tmp/cli.out 2>&1
    cli=$?
    [ $cli = 0 ] || kill $srv 2>/dev/null
    wait $srv; s=$?
    echo "--- server (here): $s"; cat /tmp/srv.out; echo "--- client (peer): $cli"; cat /tmp/cli.out
    [ $s = 0 ] && [ $cli = 0 ] || fail "server (here) exited $s, client (peer) $cli: $(tail -n 1 /tmp/srv.out)"
}
peer_serves() {
    peer_bg $T "$2"
    wait_for "listening_there $1" 100 || { peer_kill $PEER_JOB; fail "the peer's server never listened"; }
    timeout $T $3 > /tmp/cli.out 2>&1
    cli=$?
    [ $cli = 0 ] || peer_kill $PEER_JOB
    peer_wait $PEER_JOB > /tmp/srv.out 2>&1; s=$?
    echo "--- server (peer): $s"; cat /tmp/srv.out; echo "--- client (here): $cli"; cat /tmp/cli.out
    [ $s = 0 ] && [ $cli = 0 ] || fail "server (peer) exited $s, client (here) $cli: $(tail -n 1 /tmp/srv.out)"
}

RPING="-C 10 -S 4096 -V"
t_rping() { here_serves 7201 "rping -s -a $LOCAL_IP -p 7201 $RPING" "rping -c -a $LOCAL_IP -p 7201 $RPING"; }
t_rping_rev() { peer_serves 7202 "rping -s -a $PEER_IP -p 7202 $RPING" "rping -c -a $PEER_IP -p 7202 $RPING"; }

BW="-R -F -s 65536 -n $((200 / SLOW))"
bw_of() { # the client's BW average (MB/s) in FILE
    awk 'index($0, "BW average") { t = 1; next } t && $1 ~ /^[0-9]+$/ && NF >= 4 { print $4; exit }' "$1"
}
t_write_bw() {
    here_serves 7203 "ib_write_bw -d $LDEV -p 7203 $BW" "ib_write_bw -d $PDEV -p 7203 $BW $LOCAL_IP"
    result "$(bw_of /tmp/cli.out)MB/s"
}
t_write_bw_rev() {
    peer_serves 7204 "ib_write_bw -d $PDEV -p 7204 $BW" "ib_write_bw -d $LDEV -p 7204 $BW $PEER_IP"
    result "$(bw_of /tmp/cli.out)MB/s"
}

PEER_LIB=". /src/qemu/tests/lib.sh; . /src/qemu/tests/lib_consumers.sh"
# (A kernel built without NVMe-oF skips these.)
has_modules() { for m in "$@"; do modinfo $m >/dev/null 2>&1 || skip "this kernel has no $m (not in its config)"; done; }
t_nvme() { # the target on the peer, the host here
    has_modules nvme-rdma
    need nvme fio
    on_peer $T "$PEER_LIB; IP=$PEER_IP nvmet_up" || fail "the peer's target set-up failed"
    NVME_ADDR=$PEER_IP nvme_connect
    DEV=$LDEV  # (fio_verify shows its counters)
    rdma resource show qp link $LDEV/1 | grep -q lqpn || fail "no QP on $LDEV"
    fio_verify two_rand4k_qd32 $NVME1 randwrite 4k 32; r=$BW
    fio_verify two_seq128k_qd1 $NVME1 write 128k 1; q=$BW
    run nvme disconnect -n $NQN
    on_peer $T "$PEER_LIB; nvmet_down" >/dev/null
    result "write KiB/s: 4k rand qd32 $r, 128k seq qd1 $q"
}
t_nvme_rev() { # the target here, the host on the peer
    has_modules nvmet-rdma null_blk
    IP=$LOCAL_IP nvmet_up || fail "the target's set-up failed"
    on_peer $T "$PEER_LIB; NVME_ADDR=$LOCAL_IP; nvme_connect &&
        fio_verify two_rand4k_qd32 \$NVME1 randwrite 4k 32 && echo \"# BW \$BW\" &&
        fio_verify two_seq128k_qd1 \$NVME1 write 128k 1 && echo \"# BW \$BW\" && run nvme disconnect -n \$NQN" \
        > /tmp/peer.out 2>&1
    rc=$?
    cat /tmp/peer.out
    nvmet_down
    [ $rc = 0 ] || fail "the peer's host: $(sed -n 's/^FAIL_REASON: //p' /tmp/peer.out | tail -n 1)"
    result "write KiB/s: $(sed -n 's/^# BW //p' /tmp/peer.out | tr '\n' ' ')"
}

# ---- the run ----

run_one() { # TEST
    name=${1}_$PAIR_TAG
    if [ -n "$SETUP_FAILED" ]; then
        echo "FAIL $name: set-up failed: $SETUP_FAILED"
        return
    fi
    ( set +e; "t_$1" ) > /tmp/test.out 2>&1 < /dev/null
    rc=$?
    leftovers 2>/dev/null
    verdict "" $name $rc 30 || {
        echo "    --- dmesg here:"; dmesg | tail -n 8 | sed 's/^/    /'
        echo "    --- dmesg on the peer:"; on_peer 20 "dmesg | tail -n 8" | sed 's/^/    /'
    }
}

if ! wire_up > /tmp/wire.out 2>&1; then
    why=$(tail -n 1 /tmp/wire.out)
    for p in $PAIRS; do for t in $TESTS; do echo "FAIL ${t}_$(echo $p | tr : _): the wire is down: $why"; done; done
    peer_quit 2>/dev/null
    exit 0
fi
n=0
for PAIR in $PAIRS; do
    n=$((n + 1))
    PAIR_TAG=$(echo $PAIR | tr : _)
    SETUP_FAILED=
    setup_pair ${PAIR%%:*} ${PAIR#*:} $n > /tmp/setup.out 2>&1 || SETUP_FAILED=$(tail -n 1 /tmp/setup.out)
    cat /tmp/setup.out
    for t in $TESTS; do run_one $t; done
    teardown_pair ${PAIR%%:*} ${PAIR#*:}
done
peer_quit
