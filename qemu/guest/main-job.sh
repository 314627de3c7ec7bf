#!/bin/sh
# The main job, inside the VM.
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
echo "== (data traffic arrives with the RoCE engine issue)"
rdma link del sr0
rdma link del si0
rmmod softrnic
dmesg | grep 'softrnic: .*live objects at unload' | tail -n 1
echo "== softrnic unloaded cleanly"
