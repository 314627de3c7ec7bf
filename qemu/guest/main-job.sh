#!/bin/sh
# The main job, inside the VM: devices, the verbs objects, then real RDMA
# traffic between two softrnic_roce devices with its figures, then the unload.
# "== step" lines are its progress (qemu/run --summary shows them as they
# come); everything else is the full log.  It ends with "== result" and the
# result table ("what | result" rows), or with "FAILED: what did not happen".
# Every wait is bounded and names what it waited for.
. /src/qemu/tests/lib.sh

ROWS=/tmp/rows
: > $ROWS
row() { echo "$*" >> $ROWS; }
step() { echo "== $*"; }
die() { echo "FAILED: $*"; exit 1; }
# within SECONDS 'CONDITION' WHAT: wait for CONDITION or die naming WHAT.
within() {
    wait_for "$2" $(($1 * 5)) || die "$3: not after $(($1 * SLOW)) s"
}
# counter DEV NAME: one of DEV's packet counters.
counter() { cat /sys/class/infiniband/$1/ports/1/hw_counters/$2; }

step "loading softrnic into kernel $(uname -r)"
modprobe softrnic || die "modprobe softrnic"
ip link add veth0 type veth peer name veth1
ip addr add 192.168.77.1/24 dev veth0
ip addr add 192.168.77.2/24 dev veth1
ip link set veth0 up; ip link set veth1 up

step "creating sr0 (softrnic_roce on veth0) and si0 (softrnic_iwarp on veth1)"
rdma link add sr0 type softrnic_roce netdev veth0 || die "rdma link add sr0 type softrnic_roce"
rdma link add si0 type softrnic_iwarp netdev veth1 || die "rdma link add si0 type softrnic_iwarp"
for d in sr0 si0; do within 20 "ibv_devinfo -d $d | grep -q PORT_ACTIVE" "port 1 of $d active"; done
rdma link show
IBV_SHOW_WARNINGS=1 ibv_devices
for d in sr0 si0; do IBV_SHOW_WARNINGS=1 ibv_devinfo -d $d; done
port() { # DEV: "link layer and transport, port state, MTU"
    ibv_devinfo -d $1 | awk '/transport:/ { t = $2 } /link_layer:/ { l = $2 } /state:/ { s = $2 }
        /active_mtu:/ { m = $2 } END { sub(/^PORT_/, "", s)
        printf "%s, port %s, MTU %s", (t == "iWARP" ? "iWARP" : "RoCEv2 over " l), s, m }'
}
row "devices | sr0: softrnic_roce on veth0 ($(port sr0)); si0: softrnic_iwarp on veth1 ($(port si0))"
echo "-- RoCEv2 GIDs of sr0"
for n in 0 1 2 3; do
    g=$(cat /sys/class/infiniband/sr0/ports/1/gids/$n 2>/dev/null) || continue
    [ "$g" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
    echo "  $n: $g ($(cat /sys/class/infiniband/sr0/ports/1/gid_attrs/types/$n))"
done

step "verbs objects on sr0 and si0 through libibverbs and the softrnic provider"
python3 /src/qemu/guest/verbs_demo.py sr0 si0 > /tmp/demo.out 2>&1
rc=$?
cat /tmp/demo.out
sed -n 's/^ROW //p' /tmp/demo.out >> $ROWS
[ $rc = 0 ] || die "verbs_demo.py exited $rc: $(grep -m 1 '^FAILED: ' /tmp/demo.out | sed 's/^FAILED: //' ||
    tail -n 1 /tmp/demo.out)"
rdma link del sr0 || die "rdma link del sr0"
rdma link del si0 || die "rdma link del si0"

step "RDMA traffic between two softrnic_roce devices, sra and srb, in two network namespaces"
ip netns add ma; ip netns add mb
ip link add ma0 type veth peer name mb0
ip link set ma0 netns ma; ip link set mb0 netns mb
ip -n ma addr add 10.99.0.1/24 dev ma0; ip -n mb addr add 10.99.0.2/24 dev mb0
ip -n ma link set ma0 up; ip -n mb link set mb0 up
ip netns exec ma rdma link add sra type softrnic_roce netdev ma0 || die "rdma link add sra"
ip netns exec mb rdma link add srb type softrnic_roce netdev mb0 || die "rdma link add srb"
gid() { ibv_devinfo -v -d "$1" | grep 'GID\[' | grep '::ffff:' | head -n 1 | sed 's/.*GID\[ *\([0-9]*\)\].*/\1/'; }
within 20 '[ -n "$(gid sra)" ] && [ -n "$(gid srb)" ]' "the IPv4 GIDs of sra and srb"
GA=$(gid sra) GB=$(gid srb)
T=$((60 * SLOW))

# both PROGRAM PORT GIDFLAG ARGS...: PROGRAM's server end on sra in ma, then
# its client end on srb in mb; dies naming the end that failed.
both() {
    prog=$1 port=$2 gflag=$3; shift 3
    ip netns exec ma timeout $T $prog -d sra $gflag $GA -p $port "$@" > /tmp/srv.out 2>&1 &
    srv=$!
    within 20 "! kill -0 $srv || ip netns exec ma ss -Hltn 'sport = :$port' | grep -q ." "the $prog server listening"
    kill -0 $srv 2>/dev/null || { cat /tmp/srv.out; die "the $prog server exited before its client came"; }
    ip netns exec mb timeout $T $prog -d srb $gflag $GB -p $port "$@" 10.99.0.1 > /tmp/cli.out 2>&1
    crc=$?
    [ $crc = 0 ] || kill $srv 2>/dev/null
    wait $srv
    src=$?
    echo "--- $prog server (exit $src):"; cat /tmp/srv.out
    echo "--- $prog client (exit $crc):"; cat /tmp/cli.out
    [ $crc != 124 ] || die "$prog client: no end after $T s"
    [ $src != 124 ] || die "$prog server: no end after $T s"
    [ $crc = 0 ] || die "$prog client exited $crc: $(tail -n 1 /tmp/cli.out)"
    [ $src = 0 ] || die "$prog server exited $src: $(tail -n 1 /tmp/srv.out)"
}

step "ibv_rc_pingpong --chk: 1000 x 64 KiB each way, data checked at both ends"
both ibv_rc_pingpong 18515 -g -s 65536 -n 1000 --chk
for f in /tmp/srv.out /tmp/cli.out; do
    grep -q '^1000 iters in' $f || die "ibv_rc_pingpong: $f reports no 1000 iterations"
done
mbit=$(sed -n 's/.* = \([0-9.]*\) Mbit\/sec$/\1/p' /tmp/cli.out | head -n 1)
row "ibv_rc_pingpong --chk | 1000 x 64 KiB each way, data checked at both ends: $mbit Mbit/s"

step "ib_write_bw: 64 KiB RDMA WRITEs for 5 s"
both ib_write_bw 18516 -x -s 65536 -D 5 -F
bw=$(awk '/BW average/ { t = 1; next } t && $1 ~ /^[0-9]+$/ { printf "%s MB/s, %.0f messages/s (%s messages)\n", $4, $5 * 1e6, $2; exit }' /tmp/cli.out)
[ -n "$bw" ] || die "ib_write_bw: no BW average in the client's output"
row "ib_write_bw | 64 KiB RDMA WRITEs for 5 s: $bw"
rdma statistic show link sra/1
row "packets (sra) | sent $(counter sra sent_pkts), received $(counter sra rcvd_pkts), retransmitted $(counter sra retransmits), bad ICRC $(counter sra rx_bad_icrc), malformed $(counter sra rx_malformed)"

step "removing every device and unloading softrnic"
ip netns del ma; ip netns del mb
within 20 '! rdma link show sra/1 && ! rdma link show srb/1' "sra and srb gone with their namespaces"
rmmod softrnic || die "rmmod softrnic"
line=$(dmesg | grep 'softrnic: .*live objects at unload' | tail -n 1)
echo "$line"
[ -n "$line" ] || die "softrnic printed no object count at unload"
case $line in *LEAK*) die "softrnic left objects behind: ${line#*softrnic: }" ;; esac
row "unload | softrnic unloaded cleanly, no live object: ${line#*unload: }"
echo "softrnic unloaded cleanly"

echo "== result"
cat $ROWS
