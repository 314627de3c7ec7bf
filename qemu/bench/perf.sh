#!/bin/sh
# `make bench`, inside the VM: the same perftest scenarios on rdma_rxe, siw,
# softrnic_roce and softrnic_iwarp, each as a pair of devices of one type in
# two network namespaces joined by a veth pair (lib_pairs.sh), every QP
# connected through rdma_cm (-R) so that all four run the same programs the
# same way.  ROUNDS rounds, each running every implementation in turn, so
# that all of them share the background of the whole run.  TCG makes
# absolute figures meaningless; only ratios within one run are.
#
#   qemu/run --timeout S qemu/bench/perf.sh [ROUNDS] [quick]
#
# Prints one CSV row per figure between "== csv" and "== end csv"
# (round,impl,scenario,size,qps,metric,value,unit); scripts/bench turns
# them into Documentation/benchmarks.{md,csv,svg}.  A scenario that fails
# is a row with metric "failed" and a "FAIL" line with why; the run then
# exits 1.  "quick" runs one size per scenario (to try the bench itself).
. /src/qemu/tests/lib.sh
. /src/qemu/tests/lib_pairs.sh
. /src/qemu/tests/lib_consumers.sh

ROUNDS=${1:-3}
QUICK=; [ "${2:-}" = quick ] && QUICK=1
IMPLS=${BENCH_IMPLS:-rxe siw sr sw}
SIZES="64 1024 4096 65536 1048576"
LAT_SIZES="8 4096"
# (Not under 4 s: see lib_pairs.sh, `measured_window`.)
SECS=4
MANY_QPS="1024 4096"
[ -n "$QUICK" ] && SIZES=65536 LAT_SIZES=8 MANY_QPS=64

NS_A=ba VETH_A=ba0 IP_A=10.79.0.1 IP6_A=fd79::1
NS_B=bb VETH_B=bb0 IP_B=10.79.0.2 IP6_B=fd79::2
DEV_A=bench_a DEV_B=bench_b
SRV_BIND=$IP_A
T=180
PORT=7600

modprobe rdma_ucm
# perftest's server listens with a backlog of its QP count, which rdma_ucm
# caps at max_backlog (1024): with 4096 QPs it refused the connection
# requests beyond the events perftest had not yet read (softrnic_iwarp on
# 2026-11-28: 2647 of 4096 rejected, none at 4096).  The same for every
# implementation.
sysctl -qw net.rdma_ucm.max_backlog=4096
FAILED=0
ROWS=/tmp/bench.rows
: > $ROWS
row() { # SCENARIO SIZE QPS METRIC VALUE UNIT
    echo "$ROUND,$IMPL,$1,$2,$3,$4,$5,$6" >> $ROWS
}

# figure SCENARIO SIZE QPS CMD...: run CMD (a t_* style function printing
# "METRIC VALUE UNIT" lines on success) in a subshell; a failure is a
# "failed" row and a FAIL line.
figure() {
    scen=$1 size=$2 qps=$3; shift 3
    PORT=$((PORT + 1))
    ( set +e; "$@" ) > /tmp/fig.out 2>&1 < /dev/null
    rc=$?
    kill_leftovers
    if [ $rc = 0 ] && grep -q '^FIGURE ' /tmp/fig.out; then
        sed -n 's/^FIGURE //p' /tmp/fig.out | while read -r metric value unit; do
            row "$scen" "$size" "$qps" "$metric" "$value" "$unit"
        done
        echo "# $IMPL $scen size $size qps $qps: $(sed -n 's/^FIGURE //p' /tmp/fig.out | tr '\n' ' ')"
        sed -n 's/^DETAIL /    /p' /tmp/fig.out
        # (A client refused by perftest's own race ran again: lib_pairs.sh.)
        n=$(grep -c "^--- perftest's rdma_cm listen race" /tmp/fig.out)
        [ "$n" = 0 ] || echo "    run again $n time(s) after perftest's rdma_cm listen race (lib_pairs.sh, cm_listen_race)"
    else
        why=$(grep '^FAIL_REASON: ' /tmp/fig.out | tail -n 1 | sed 's/^FAIL_REASON: //')
        echo "FAIL ${IMPL}_${scen}_${size}_${qps}: ${why:-exited $rc, no figure}"
        grep -v '^FAIL_REASON: ' /tmp/fig.out | tail -n 60 | sed 's/^/    /'
        row "$scen" "$size" "$qps" failed 1 ""
        FAILED=$((FAILED + 1))
    fi
}
out() { echo "FIGURE $*"; }

# pt PROGRAM ARGS...: both ends of a perftest program over rdma_cm (the
# server bound to its address); the client's results table in /tmp/cli.out.
pt() {
    prog=$1; shift
    perftest $prog $PORT -R "$@"
}

# bw PROGRAM SIZE QPS [ARGS...]: bandwidth (MiB/s) and message rate (kpps)
# of a perftest bandwidth program run for SECS seconds, from the messages
# it completed in its measured window (lib_pairs.sh: `completed_in_window`,
# `measured_window`), not from its BW average.
bw() {
    prog=$1 size=$2 qps=$3; shift 3
    pt $prog -s $size -q $qps -D $SECS "$@"
    completed_in_window
    window=$(measured_window $SECS)
    echo "DETAIL $DONE messages in ${window} s; perftest's own BW average $(column 'BW average' 4) MiB/s"
    out bw_mibs $(awk -v n="$DONE" -v s="$size" -v w=$window 'BEGIN { printf "%.2f", n * s / w / 1048576 }') MiB/s
    out msg_rate $(awk -v n="$DONE" -v w=$window 'BEGIN { printf "%.4f", n / w / 1000 }') kpps
}

# lat PROGRAM SIZE: median (perftest's t_typical) and 99th percentile.
lat() {
    pt $1 -s $2 -n 500
    line=$(awk 'index($0, "t_typical") { t = 1; next } t && $1 ~ /^[0-9]+$/ { print $5, $8; exit }' /tmp/cli.out)
    [ -n "$line" ] || fail "no latency row in the client's output"
    set -- $line
    out lat_median $1 us
    out lat_p99 $2 us
}

# lossy: ib_write_bw 64 KiB under 1 % netem loss on both veth ends, of
# packets as a wire loses them.  netem drops an skb, and a GSO packet is
# one skb for many wire packets: a TCP sender's (siw, softrnic_iwarp) of up
# to 64 KiB, softrnic_roce's of up to 16 packets.  So for this figure the
# veths take one segment per GSO packet (lib_pairs.sh's PER_PACKET: TCP
# then sends one segment per skb, softrnic_roce one packet per skb, as rxe
# always does).
PER_PACKET=loss1
lossy() {
    set_fault loss1 || fail "netem"
    ( bw ib_write_bw 65536 1 ); rc=$?
    set_fault clean
    return $rc
}

# The kernel's consumers (issue 17), each over one device alone on a veth
# in the initial namespace, loopback (lib_consumers.sh, as consumers.sh
# tests them): NVMe-oF and iSER fio writes of 32 MiB (throughput only: the
# suites verify), NFS over RDMA a 32 MiB file.
CONS_MB=32
fio_figures() { # FIO_JSON: write MiB/s and kIOPS
    python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
if j["error"]: sys.exit("fio error %d" % j["error"])
w = j["write"]
print("FIGURE write_mibs %.2f MiB/s" % (w["bw"] / 1024))
print("FIGURE write_kiops %.3f kIOPS" % (w["iops"] / 1000))' "$1" || fail "fio's figures"
}
fio_run() { # DEV RW BS DEPTH
    timeout $T fio --name=bench --filename=$1 --rw=$2 --bs=$3 --iodepth=$4 --ioengine=libaio --direct=1 \
        --size=${CONS_MB}M --output-format=json --output=/tmp/fio.json > /tmp/fio.out 2>&1
}
nvme_fig() { # RW BS DEPTH
    nvmet_up || fail "the NVMe-oF target's set-up failed"
    nvme_connect
    fio_run $NVME1 "$@"; rc=$?
    nvmet_down
    [ $rc = 0 ] || fail "fio exited $rc: $(tail -n 1 /tmp/fio.out)"
    fio_figures /tmp/fio.json
}
nfs_fig() {
    nfs_server_up || fail "nfsd's set-up failed"
    mkdir -p /mnt/nfs
    run mount -t nfs -o vers=4.2,proto=rdma,port=20049 $IP:/ /mnt/nfs
    # (The first open waits out the server's grace period: not timed.)
    echo warm > /mnt/nfs/warm || { nfs_server_down; fail "no write through the mount"; }
    t0=$(date +%s%N)
    timeout $T dd if=/dev/zero of=/mnt/nfs/bench bs=1M count=$CONS_MB conv=fsync 2>/dev/null; rc=$?
    t1=$(date +%s%N)
    nfs_server_down
    [ $rc = 0 ] || fail "dd through the mount exited $rc"
    out write_mibs $(awk -v n=$CONS_MB -v t=$((t1 - t0)) 'BEGIN { printf "%.2f", n * 1e9 / t }') MiB/s
}
iser_fig() { # RW BS DEPTH
    iser_target_up || { iser_target_down; fail "the iSER target's set-up failed"; }
    iscsid_up || { iser_target_down; fail "iscsid"; }
    timeout $T iscsiadm -m node -o new -T $IQN -p $IP:3260 -I iser >/dev/null &&
        timeout $T iscsiadm -m node -T $IQN -p $IP:3260 -I iser --login >/dev/null &&
        wait_for '[ -n "$(iser_disk)" ]' 100 || { iser_target_down; fail "no iSER session"; }
    fio_run $(iser_disk) "$@"; rc=$?
    iser_target_down
    [ $rc = 0 ] || fail "fio exited $rc: $(tail -n 1 /tmp/fio.out)"
    fio_figures /tmp/fio.json
}

calibrate() {
    # One core's memcpy: a slice assignment between two 64 MiB buffers
    # allocated (and faulted in) beforehand is one memcpy.
    mc=$(python3 -c '
import time
a = bytearray(b"x" * (64 << 20)); b = bytearray(len(a)); n = 0; t = time.perf_counter()
while time.perf_counter() - t < 1.0:
    b[:] = a; n += 1
print("%.0f" % (n * 64 / (time.perf_counter() - t)))')
    [ -n "$mc" ] || fail "no memcpy figure"
    out memcpy_mibs $mc MiB/s
    # A trivial syscall: dd moving single bytes makes two (read, write) per byte.
    t0=$(date +%s%N)
    dd if=/dev/zero of=/dev/null bs=1 count=200000 2>/dev/null || fail "dd failed"
    t1=$(date +%s%N)
    out syscall_ns $(( (t1 - t0) / 400000 )) ns
}

# syscalls SIZE N1 N2 PROGRAM [ARGS...]: the client's system calls per
# operation of a perftest bandwidth run, on runs of N1 and N2 iterations
# (the difference removes connection setup and teardown).  The kernel counts
# them per system call (a hist trigger on raw_syscalls:sys_enter for the
# client's command name); strace would stop the client at each call, long
# enough for the engine to drain its queue, and so make every post ring.
# Only the calls that carry verbs count: write and ioctl (commands: a post
# to rxe or siw, a softrnic doorbell, an arm) and read and the polls
# (completion events).  Calls whose number follows the run's length in time
# rather than its operations (clock_gettime, nanosleep, sched_yield under
# TCG) are left out of the figure; each call's difference goes to the log.
TRACE=/sys/kernel/tracing
VERBS_CALLS='sys_write sys_ioctl sys_read sys_poll sys_ppoll sys_epoll_wait sys_epoll_pwait'
syscalls() {
    size=$1 n1=$2 n2=$3 prog=$4; shift 4
    ev=$TRACE/events/raw_syscalls/sys_enter
    [ -e $ev/trigger ] || mount -t tracefs nodev $TRACE 2>/dev/null
    [ -e $ev/trigger ] || fail "no raw_syscalls:sys_enter tracepoint"
    cp "$(command -v $prog)" /tmp/benchcli || fail "no $prog"
    trig='hist:keys=id.syscall:vals=hitcount:sort=hitcount.descending if comm == "benchcli"'
    for n in $n1 $n2; do
        tries=0
        while :; do
            # (Removing the trigger drops its counts: a run again starts at 0.)
            echo "!$trig" > $ev/trigger 2>/dev/null
            echo "$trig" > $ev/trigger || fail "cannot set a hist trigger"
            # (The client runs as benchcli: only its calls are counted.)
            server $prog -d $DEV_A --bind_source_ip $SRV_BIND -p $PORT -F -R -s $size -n $n "$@"
            ready "cm_listening $PORT"
            client /tmp/benchcli -d $DEV_B -p $PORT -F -R -s $size -n $n "$@" $IP_A
            # perftest's own listen race, as in lib_pairs.sh's perftest.
            [ $tries -lt 2 ] && cm_listen_race || break
            tries=$((tries + 1))
            kill $SRV 2>/dev/null; wait $SRV
            echo "--- perftest's rdma_cm listen race: the refused client (exit $CLI_RC), run again:"
            sed 's/^/    /' /tmp/cli.out
            PORT=$((PORT + 1))
        done
        # "{ id: sys_write [  1] } hitcount: 1234" -> "sys_write 1234"
        sed -n 's/^{ id: \(sys_[a-z0-9_]*\).*hitcount: *\([0-9]*\).*/\1 \2/p' $ev/hist > /tmp/hist.$n
        echo "!$trig" > $ev/trigger
        finish
        PORT=$((PORT + 1))
        [ -s /tmp/hist.$n ] || fail "no syscall counts for the $n-iteration run"
    done
    awk -v d=$((n2 - n1)) -v verbs=" $VERBS_CALLS " '
        FNR == NR { a[$1] = $2; next }
        { b[$1] = $2 }
        END {
            for (k in a) if (!(k in b)) b[k] = 0
            for (k in b) {
                x = (b[k] - a[k]) / d
                if (index(verbs, " " k " ")) sum += x
                printf "DETAIL %s %.3f per op%s\n", k, x, index(verbs, " " k " ") ? "" : " (not counted)"
            }
            # A client that makes almost no call per operation (softrnic
            # while its engine is busy) can make a few more in the short
            # run than in the long one (how often the engine went idle
            # and the provider rang varies): the difference goes below 0,
            # which no count per operation can be.  It is 0 within that
            # noise; the log keeps the difference.
            if (sum < 0) {
                printf "DETAIL difference %.3f per op: below the runs\x27 variation in fixed calls, reported as 0\n", sum
                sum = 0
            }
            printf "FIGURE syscalls_per_op %.3f calls\n", sum
        }' /tmp/hist.$n1 /tmp/hist.$n2
}

ROUND=0
while [ $ROUND -lt "$ROUNDS" ]; do
    ROUND=$((ROUND + 1))
    IMPL=host
    [ $ROUND = 1 ] && figure calibrate 0 0 calibrate
    for IMPL in $IMPLS; do
        TYPE_A=$IMPL TYPE_B=$IMPL PAIR=$IMPL:$IMPL PAIR_TAG=${IMPL}_$IMPL
        echo "# round $ROUND: $IMPL"
        if ! setup_pair $IMPL $IMPL > /tmp/setup.out 2>&1; then
            cat /tmp/setup.out
            figure setup 0 0 fail "pair setup failed: $(tail -n 1 /tmp/setup.out)"
            teardown_pair
            continue
        fi
        for p in write read send; do
            for s in $SIZES; do
                for q in 1 4; do figure ${p}_bw $s $q bw ib_${p}_bw $s $q; done
            done
        done
        for p in send write; do
            for s in $LAT_SIZES; do figure ${p}_lat $s 1 lat ib_${p}_lat $s; done
        done
        figure msg_rate 64 4 bw ib_write_bw 64 4 --post_list 16
        figure loss1_write_bw 65536 1 lossy
        # (A small send queue each: perftest sizes one CQ for all of them,
        # which must fit every device's max_cqe.)
        for q in $MANY_QPS; do figure many_qps 4096 $q bw ib_write_bw 4096 $q -t 4; done
        if [ $ROUND = 1 ]; then
            # Posts and polls: small writes (the engine may drain the
            # queue between posts, then each post rings) and 64 KiB ones
            # (the engine stays busy); then with completion events (arms).
            # (READs, not SENDs, with events: over iWARP ib_send_bw's
            # sender waits for receive credits that the receiver sends as
            # RDMA WRITEs, which complete nothing at the sender; with -e a
            # sender out of credits and with no signalled send in flight
            # sleeps for good.  siw and softrnic_iwarp both hung so, 180 s,
            # on 2026-11-27; perftest up to its current tree.  READs need
            # no credits; perftest refuses -e for WRITEs.)
            figure syscalls_write_bw 64 1 syscalls 64 2000 12000 ib_write_bw
            figure syscalls_write_bw 65536 1 syscalls 65536 200 1200 ib_write_bw
            figure syscalls_read_bw_events 64 1 syscalls 64 2000 12000 ib_read_bw -e
        fi
        teardown_pair
        if setup_dev $IMPL 9 > /tmp/setup.out 2>&1; then
            figure nvmeof_randwrite 4096 32 nvme_fig randwrite 4k 32
            figure nvmeof_write 131072 32 nvme_fig write 128k 32
            figure nfs_write 1048576 1 nfs_fig
            # (iSER over iWARP: LIO's TCP portal holds the port iw_cm
            # would listen on; consumers.sh says what happens there.)
            case $IMPL in sr|rxe) figure iser_randwrite 4096 32 iser_fig randwrite 4k 32 ;; esac
        else
            cat /tmp/setup.out
            figure consumers 0 0 fail "device set-up failed: $(tail -n 1 /tmp/setup.out)"
        fi
        teardown_dev $IMPL 9
    done
done

echo "== csv"
echo "round,impl,scenario,size,qps,metric,value,unit"
cat $ROWS
echo "== end csv"
echo "failed figures: $FAILED"
[ $FAILED = 0 ]
