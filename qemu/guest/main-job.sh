#!/bin/sh
# The main job, inside the VM: devices, the verbs objects, then real RDMA
# traffic between two softrnic_roce devices with its throughput.
set -e
echo "== kernel $(uname -r); loading softrnic"
modprobe softrnic
ip link add veth0 type veth peer name veth1
ip addr add 192.168.77.1/24 dev veth0
ip addr add 192.168.77.2/24 dev veth1
ip link set veth0 up; ip link set veth1 up
echo "== rdma link add sr0 type softrnic_roce netdev veth0"
rdma link add sr0 type softrnic_roce netdev veth0
echo "== rdma link add si0 type softrnic_iwarp netdev veth1"
rdma link add si0 type softrnic_iwarp netdev veth1
echo "== rdma link show"
rdma link show
echo "== ibv_devices"
IBV_SHOW_WARNINGS=1 ibv_devices
for d in sr0 si0; do
    echo "== ibv_devinfo -d $d"
    IBV_SHOW_WARNINGS=1 ibv_devinfo -d $d
done
echo "== RoCEv2 GIDs of sr0"
for n in 0 1 2 3; do
    g=$(cat /sys/class/infiniband/sr0/ports/1/gids/$n 2>/dev/null) || continue
    [ "$g" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
    echo "  $n: $g ($(cat /sys/class/infiniband/sr0/ports/1/gid_attrs/types/$n))"
done
echo "== verbs objects through libibverbs and the softrnic provider"
python3 /src/qemu/guest/verbs_demo.py sr0 si0
rdma link del sr0
rdma link del si0

echo "== RDMA traffic between two softrnic_roce devices in two network namespaces"
ip netns add ma; ip netns add mb
ip link add ma0 type veth peer name mb0
ip link set ma0 netns ma; ip link set mb0 netns mb
ip -n ma addr add 10.99.0.1/24 dev ma0; ip -n mb addr add 10.99.0.2/24 dev mb0
ip -n ma link set ma0 up; ip -n mb link set mb0 up
ip netns exec ma rdma link add sra type softrnic_roce netdev ma0
ip netns exec mb rdma link add srb type softrnic_roce netdev mb0
gid() { ibv_devinfo -v -d "$1" | grep 'GID\[' | grep '::ffff:' | head -n 1 | sed 's/.*GID\[ *\([0-9]*\)\].*/\1/'; }
listening() { for _ in $(seq 100); do ip netns exec ma ss -Hltn "sport = :$1" | grep -q . && return 0; sleep 0.2; done; return 1; }
echo "-- ibv_rc_pingpong --chk, 1000 x 64 KiB each way (data checked at both ends)"
ip netns exec ma timeout 60 ibv_rc_pingpong -d sra -g "$(gid sra)" -s 65536 -n 1000 --chk > /tmp/pp_s.out 2>&1 &
s=$!
listening 18515
ip netns exec mb timeout 60 ibv_rc_pingpong -d srb -g "$(gid srb)" -s 65536 -n 1000 --chk 10.99.0.1
wait $s
echo "-- ib_write_bw, 64 KiB RDMA WRITEs for 5 s"
ip netns exec ma timeout 60 ib_write_bw -d sra -x "$(gid sra)" -s 65536 -D 5 -F > /tmp/bw_s.out 2>&1 &
s=$!
listening 18515
ip netns exec mb timeout 60 ib_write_bw -d srb -x "$(gid srb)" -s 65536 -D 5 -F 10.99.0.1 | grep -A 1 '#bytes'
wait $s
echo "-- packet counters of sra"
rdma statistic show link sra/1
ip netns del ma; ip netns del mb
for _ in $(seq 50); do rdma link show sra/1 >/dev/null 2>&1 || break; sleep 0.2; done
rmmod softrnic
dmesg | grep 'softrnic: .*live objects at unload' | tail -n 1
echo "== softrnic unloaded cleanly"
