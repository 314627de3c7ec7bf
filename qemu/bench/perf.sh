#!/bin/sh
# `make bench`, inside the VM: the perftest and pingpong figures of softrnic
# beside rdma_rxe, in the same VM, with the same programs and settings
# (qemu/tests/traffic.sh: two namespaces, one veth pair), ROUNDS times each
# (pairs alternating so both see the same background), and the median of
# each figure with the ratio softrnic / rxe.  TCG makes absolute figures
# meaningless; only the ratios within one run are.
ROUNDS=${1:-3}
TESTS=rc_pingpong,write_bw,read_bw,send_bw,atomic_bw,send_lat
: > /tmp/bench.all
i=0
while [ $i -lt "$ROUNDS" ]; do
    i=$((i + 1))
    for pair in rxe:rxe sr:sr; do
        # (rxe:rxe verdicts come as "REF PASS ...": the suite does not count them.)
        sh /src/qemu/tests/traffic.sh $pair only=$TESTS 2>&1 | sed 's/^REF //' |
            grep -E '^(PASS|FAIL) ' | tee -a /tmp/bench.all
    done
done
echo
echo "== medians of $ROUNDS rounds (higher is better, except send_lat)"
printf '%-12s %14s %14s %8s\n' test rxe softrnic ratio
for t in $(echo $TESTS | tr ',' ' '); do
    med() {  # PAIR: the median figure of test $t for PAIR
        grep "^PASS ${t}_$1 " /tmp/bench.all | sed 's/^PASS [^ ]* \([0-9.]*\).*/\1/' | sort -n |
            awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'
    }
    unit=$(grep "^PASS ${t}_sr_sr " /tmp/bench.all | head -n 1 | sed 's/^PASS [^ ]* [0-9.]*\([^ ]*\).*/\1/')
    r=$(med rxe_rxe); s=$(med sr_sr)
    ratio=$(awk -v r="$r" -v s="$s" -v t="$t" 'BEGIN {
        if (r == "-" || s == "-" || r == 0 || s == 0) { print "-"; exit }
        printf "%.2f", (t == "send_lat") ? r / s : s / r }')
    printf '%-12s %14s %14s %8s\n' "$t" "$r$unit" "$s$unit" "$ratio"
done
echo "(ratio: softrnic / rxe for throughput, rxe / softrnic for latency: above 1 means softrnic is faster)"
grep -c '^FAIL ' /tmp/bench.all | sed 's/^/failed runs: /'
