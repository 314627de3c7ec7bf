#!/bin/sh
# Guest suite: iWARP traffic through network faults (issue 15).  netem on
# both ends of the veth between two namespaces (the profiles of
# lib_pairs.sh); TCP recovers what the link loses, reorders or duplicates,
# and drops what it damages (its checksum; the MPA CRC, on between softrnic
# ends, catches what that misses).  Under each fault rping -V checks its
# data and ib_write_bw / ib_read_bw over rdma_cm complete; the figure after
# each PASS is the goodput.  siw:siw runs the same, as the reference ("REF
# PASS"), and the run ends with a goodput table, profile by profile, pair
# beside pair.
#
#   qemu/run qemu/tests/faults_iwarp.sh [PAIR...] [only=PROFILE,...] [tests=TEST,...]
#
# A pair is SERVER:CLIENT, each sw (softrnic_iwarp) or siw; the server end
# is in netns ia (ia0), the client end in ib (ib0).  softrnic asks for the
# MPA CRC (its default); siw does not.
# Lines: "PASS faults_iw_PROFILE_TEST_SERVER_CLIENT goodput".
. /src/qemu/tests/lib.sh
. /src/qemu/tests/lib_pairs.sh

NS_A=ia VETH_A=ia0 IP_A=10.67.0.1 IP6_A=fd67::1
NS_B=ib VETH_B=ib0 IP_B=10.67.0.2 IP6_B=fd67::2
T=$((60 * SLOW))
# Listen on the server's address (siw refuses a wildcard rdma_cm listen for
# a device in another namespace: see iwarp.sh).
SRV_BIND=$IP_A

pairs= only= tests=
for arg in "$@"; do
    case $arg in
    only=*) only=$(echo "${arg#only=}" | tr ',' ' ') ;;
    tests=*) tests=$(echo "${arg#tests=}" | tr ',' ' ') ;;
    *:*) pairs="$pairs $arg" ;;
    *) echo "DIED faults_iwarp_args: unknown argument $arg"; exit 1 ;;
    esac
done
PAIRS="siw:siw sw:sw sw:siw siw:sw"
# On the debug kernel, softrnic at both ends only (see iwarp.sh).
[ "$SLOW" -gt 1 ] && PAIRS="sw:sw"
PROFILES="loss1 loss5 burst reorder corrupt"
TESTS="rping write_bw read_bw"
[ -n "$pairs" ] && PAIRS=$pairs
[ -n "$only" ] && PROFILES=$only
[ -n "$tests" ] && TESTS=$tests
plan_pairs $(( $(words $PROFILES) * $(words $TESTS) ))
modprobe rdma_ucm

PORT=19800
t_rping() {
    s0=$(date +%s%N)
    server rping -s -a $IP_A -p $((PORT + 7000)) -C 20 -S 4096 -V
    ready "cm_listening $((PORT + 7000))"
    client rping -c -a $IP_A -p $((PORT + 7000)) -C 20 -S 4096 -V
    finish
    # Each iteration: a 4 KiB RDMA READ and a 4 KiB RDMA WRITE, verified.
    ms=$(( ($(date +%s%N) - s0) / 1000000 ))
    result "$(( 20 * 2 * 4096 * 1000 / 1024 / (ms > 0 ? ms : 1) ))KiB/s (${ms}ms)"
}
# 50 messages of 64 KiB (on a slower kernel, SLOW times smaller).
BW_N=50 BW_SIZE=$((65536 / SLOW))
t_write_bw() { bw_test ib_write_bw $PORT -R -s $BW_SIZE -n $BW_N; }
t_read_bw() { bw_test ib_read_bw $PORT -R -s $BW_SIZE -n $BW_N; }

# iw_COUNTER summed over the pair's softrnic ends.
sw_sum() {
    s=0
    for d in $DEV_A $DEV_B; do
        case $d in sw_*) s=$((s + $(cat /sys/class/infiniband/$d/ports/1/hw_counters/$1 2>/dev/null || echo 0))) ;; esac
    done
    echo $s
}

n=0 table=/tmp/goodput.txt
: > $table
for PAIR in $PAIRS; do
    n=$((n + 1))
    TYPE_A=${PAIR%%:*} TYPE_B=${PAIR#*:}
    PAIR_TAG=${TYPE_A}_$TYPE_B
    DEV_A=${TYPE_A}_ia$n DEV_B=${TYPE_B}_ib$n
    SETUP_FAILED=
    start=$(date +%s)
    setup_pair > /tmp/setup.out 2>&1 || SETUP_FAILED=$(lastline /tmp/setup.out)
    grep '^# ' /tmp/setup.out
    [ -z "$SETUP_FAILED" ] || sed 's/^/    /' /tmp/setup.out
    for prof in $PROFILES; do
        if [ -z "$SETUP_FAILED" ] && ! set_fault $prof > /tmp/netem.out 2>&1; then
            for t in $TESTS; do
                echo "$(is_reference && echo 'REF ')FAIL faults_iw_${prof}_${t}_$PAIR_TAG: netem: $(lastline /tmp/netem.out)"
            done
            continue
        fi
        crc0=$(sw_sum iw_crc_errors) term0=$(sw_sum iw_terminates_sent)
        for t in $TESTS; do
            PORT=$((PORT + 1))
            line=$(run_one $t | sed "s/^\(REF \)\{0,1\}\(PASS\|FAIL\) /&faults_iw_${prof}_/")
            echo "$line"
            case $line in
            PASS*|"REF PASS"*) echo "$prof $t $PAIR_TAG $(echo "$line" | head -n 1 | sed 's/^REF //' | awk '{print $3}')" >> $table ;;
            *) echo "$prof $t $PAIR_TAG failed" >> $table ;;
            esac
        done
        echo "# $PAIR $prof: softrnic MPA CRC errors +$(( $(sw_sum iw_crc_errors) - crc0 )), TERMINATEs sent +$(( $(sw_sum iw_terminates_sent) - term0 ))"
    done
    teardown_pair > /tmp/teardown.out 2>&1
    grep '^# ' /tmp/teardown.out
    echo "# $PAIR: $(( $(date +%s) - start ))s"
done

# The goodput table: one row per profile and test, one column per pair.
echo "# goodput (profile test: $(echo $PAIRS))"
for prof in $PROFILES; do
    for t in $TESTS; do
        row="# $prof $t:"
        for PAIR in $PAIRS; do
            tag=$(echo $PAIR | tr ':' '_')
            v=$(awk -v p=$prof -v t=$t -v g=$tag '$1 == p && $2 == t && $3 == g { print $4 }' $table)
            row="$row ${v:--}"
        done
        echo "$row"
    done
done
