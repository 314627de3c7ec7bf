# `make profile`, inside the VM: where the CPU goes while a pair of devices
# of one type (rxe, siw, sr = softrnic_roce, sw = softrnic_iwarp) runs one
# perftest scenario, two namespaces apart (lib_pairs.sh, as the bench).
#   qemu/run --timeout S qemu/bench/profile.sh [SCENARIO] [TYPE...]
# SCENARIO: write_bw (ib_write_bw, 64 KiB, 1 QP; the default), write_bw64
# (the same with 64 B messages: the per-message cost), write_bw1k (1 KiB,
# one packet a message at MTU 1024), send_lat
# (ib_send_lat, 8 B) or write_lat (ib_write_lat, 8 B) or nvme (NVMe over
# Fabrics, one device alone in loopback as consumers.sh runs it: fio 4 KiB
# random writes at depth 32 for 12 s through nvme-rdma to nvmet-rdma's
# memory-backed null_blk) or
# nvme128 (the same with 128 KiB sequential writes at depth 32) or many
# (ib_write_bw, 4 KiB, MANY_QPS QPs (default 1024) of send queue depth 4,
# as the bench's many_qps: one thread posting to every QP in turn).
# TYPE: default "sr rxe"; srn is sr with the veths' UDP segmentation off
# (softrnic_roce sending one skb per packet: no GSO packets).
#
# For each type it prints the CPU use (vmstat), a perf profile of the whole
# run (cpu-clock samples: by command and library, then by symbol) and, for
# softrnic, the time spent in its C shims (function_graph on glue/*.c: the
# Rust code has no ftrace entry points, but every packet passes the shims,
# and a shim's duration includes the Rust it calls back).  Read them knowing:
#  - cpu-clock is a timer interrupt (TCG has no PMU, so no NMI): time spent
#    with interrupts off is sampled where they come back on, i.e. at
#    `_raw_spin_unlock_irq_enable` (SpinLockIrq) or `..._irqrestore`;
#  - the shim durations include function_graph's own cost (about a
#    microsecond per traced call under TCG), and the traced run is slower;
#  - on a busy host (a kernel build beside the VM) the samples landed in the
#    idle task while vmstat showed both CPUs busy: profile on an idle host.
. /src/qemu/tests/lib.sh
. /src/qemu/tests/lib_pairs.sh
. /src/qemu/tests/lib_consumers.sh

SCEN=${1:-write_bw}
[ $# -gt 0 ] && shift
TYPES=${*:-sr rxe}
NS_A=pa VETH_A=pa0 IP_A=10.78.0.1 IP6_A=fd78::1
NS_B=pb VETH_B=pb0 IP_B=10.78.0.2 IP6_B=fd78::2
DEV_A=prof_a DEV_B=prof_b
SRV_BIND=$IP_A
T=180
PORT=7700
TR=/sys/kernel/tracing
# The glue's C functions a packet passes: receive (the UDP encapsulation
# handler, which runs the whole receive path), transmit (and, over veth, the
# peer's receive in the softirq it raises), skb allocation, headers, ICRC,
# table lookups, page maps, deferral.
SHIMS="softrnic_udp_encap_recv softrnic_skb_xmit softrnic_skb_alloc softrnic_skb_push_headers
  softrnic_skb_pieces softrnic_skb_free softrnic_crc32_le softrnic_crc32c softrnic_table_get
  softrnic_kmap softrnic_port_netdev softrnic_work_queue softrnic_timer_arm
  softrnic_tcp_send softrnic_tcp_read softrnic_tcp_data_ready process_one_work"

command -v perf >/dev/null || { echo "FAIL no perf in the guest (scripts/profile installs linux-perf)"; exit 1; }
modprobe rdma_ucm
# (perftest listens with a backlog of its QP count: see perf.sh.)
sysctl -qw net.rdma_ucm.max_backlog=4096
mountpoint -q $TR || mount -t tracefs nodev $TR

nvme_fio() { # RW BS: 12 s of fio at depth 32 on the connected namespace
    fio --name=prof --filename=$NVME1 --rw=$1 --bs=$2 --iodepth=32 --ioengine=libaio \
        --direct=1 --time_based --runtime=12 --size=32M --output-format=json --output=/tmp/fio.prof.json
}

# scenario: the perftest run (client in the foreground).
scenario() {
    case $SCEN in
    write_bw) perftest ib_write_bw $PORT -R -s 65536 -q 1 -D 12 ;;
    write_bw64) perftest ib_write_bw $PORT -R -s 64 -q 1 -D 12 ;;
    write_bw1k) perftest ib_write_bw $PORT -R -s 1024 -q 1 -D 12 ;;
    send_lat) perftest ib_send_lat $PORT -R -s 8 -n 60000 ;;
    write_lat) perftest ib_write_lat $PORT -R -s 8 -n 60000 ;;
    many) perftest ib_write_bw $PORT -R -s 4096 -q ${MANY_QPS:-1024} -t 4 -D 12 ;;
    nvme) nvme_fio randwrite 4k ;;
    nvme128) nvme_fio write 128k ;;
    *) echo "FAIL unknown scenario $SCEN (write_bw, write_bw64, write_bw1k, send_lat, write_lat, nvme, nvme128, many)"; exit 1 ;;
    esac
}

# up / down: the devices the scenario runs on (a pair two namespaces apart;
# for nvme one device alone, the target and the host connected through it).
up() {
    if [ "${SCEN#nvme}" != "$SCEN" ]; then
        setup_dev $TYPE 9 && nvmet_up && (nvme_connect) && NVME1=/dev/$(ns_dev 1)
    elif [ $TYPE = srn ]; then
        setup_pair sr sr && ip netns exec $NS_A ethtool -K $VETH_A tx-udp-segmentation off &&
            ip netns exec $NS_B ethtool -K $VETH_B tx-udp-segmentation off
    else
        setup_pair $TYPE $TYPE
    fi
}
down() {
    if [ "${SCEN#nvme}" != "$SCEN" ]; then
        nvmet_down; teardown_dev $TYPE 9
    else
        teardown_pair
    fi
}

# figure: the client's result line.
figure() {
    case $SCEN in
    write_bw* | many) echo "MiB/s (perftest average): $(column 'BW average' 4), Mpps $(column 'MsgRate' 5)" ;;
    send_lat|write_lat) echo "us typical $(column t_typical 5) p99 $(column t_typical 8)" ;;
    nvme*) python3 -c 'import json; j = json.load(open("/tmp/fio.prof.json"))["jobs"][0]; w = j["write"]
print("fio %s %s, depth 32: %.0f IOPS, %.0f KiB/s, mean completion %.2f ms"
      % (j["job options"]["rw"], j["job options"]["bs"], w["iops"], w["bw"], w["clat_ns"]["mean"] / 1e6))' ;;
    esac
}

# shim_times: per traced function, total time, calls and time per call,
# from function_graph's output (leaf lines "f();" and closing "} /* f */").
shim_times() {
    awk -F'|' '/ us +\|/ && (/\(\);/ || /\/\*/) {
        d = $1; sub(/^.*\) */, "", d); gsub(/[^0-9.]/, "", d)
        f = $NF; sub(/.*\/\* */, "", f); gsub(/[ ;()*\/}]/, "", f); sub(/\[.*/, "", f)
        n[f]++; t[f] += d }
      END { for (f in n) printf "%10.0f us %8d calls %8.2f us/call  %s\n", t[f], n[f], t[f] / n[f], f }' "$1" |
        sort -rn | head -n 20
}

rc=0
for TYPE in $TYPES; do
    t=$TYPE; [ $TYPE = srn ] && t=sr
    TYPE_A=$t TYPE_B=$t PAIR=$t:$t
    echo "=== $TYPE: $SCEN"
    up > /tmp/up.out 2>&1 || { cat /tmp/up.out; echo "FAIL $TYPE: setup"; rc=1; down; continue; }
    # 1. perf over the whole run (started first: started mid-run under
    # load it missed the traffic), at high priority with a large buffer so
    # the busy engine cannot starve its reader.
    vmstat 1 > /tmp/vmstat.out &
    VM=$!
    nice -n -20 perf record -q -m 2048 -e cpu-clock -a -g -F 499 -o /tmp/prof.data > /tmp/perf.out 2>&1 &
    PERF=$!
    ( scenario ) > /tmp/run.out 2>&1
    src=$?
    kill -INT $PERF; wait $PERF
    kill $VM; wait $VM 2>/dev/null
    [ $src = 0 ] || { echo "FAIL $TYPE: the run failed"; tail -n 20 /tmp/run.out; rc=1; down; continue; }
    figure
    echo "-- CPU (vmstat: us sy id, context switches/s; the busiest 8 seconds)"
    awk '$1 ~ /^[0-9]+$/ { print $(NF-5), $(NF-4), $(NF-3), $(NF-6) }' /tmp/vmstat.out | sort -n -k3 | head -n 8 | tr '\n' ';'
    echo
    R="perf report -i /tmp/prof.data --stdio --no-children -g none"
    echo "-- by command and library"
    $R --sort comm,dso --percent-limit 1 2>/dev/null | grep -v '^#' | grep . | head -n 15
    echo "-- by symbol"
    $R --sort sym --percent-limit 0.4 2>/dev/null | grep -v '^#' | grep . | head -n 40
    # Samples taken when interrupts came back on stand for the time they
    # were off: who turned them back on (the caller of the unlock).
    echo "-- interrupts-off time, by the function that ended it"
    perf report -i /tmp/prof.data --stdio --no-children --sort sym -G --percent-limit 2 \
        -S _raw_spin_unlock_irq_enable,_raw_spin_unlock_irqrestore 2>/dev/null |
        grep -v '^#' | grep . | head -n 50
    # 2. softrnic only: the shims' durations over 2 s of a second run.
    if [ $t = sr ] || [ $t = sw ]; then
        : > $TR/set_ftrace_filter
        for f in $SHIMS; do echo $f >> $TR/set_ftrace_filter 2>/dev/null; done
        echo function_graph > $TR/current_tracer
        echo funcgraph-tail > $TR/trace_options
        echo 16384 > $TR/buffer_size_kb
        echo 0 > $TR/tracing_on
        echo > $TR/trace
        ( sleep 4; echo 1 > $TR/tracing_on; sleep 2; echo 0 > $TR/tracing_on ) &
        TRACER=$!
        ( scenario ) > /tmp/run.out 2>&1 || { echo "FAIL $TYPE: the traced run failed"; rc=1; }
        wait $TRACER
        echo "-- C shims, 2 s of a traced run ($(figure))"
        shim_times $TR/trace
        echo nop > $TR/current_tracer
        : > $TR/set_ftrace_filter
    fi
    down
done
exit $rc
