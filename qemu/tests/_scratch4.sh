#!/bin/sh
. /src/qemu/tests/lib.sh
modprobe softrnic
ip netns add ha; ip netns add hb
ip link add ha0 type veth peer name hb0
ip link set ha0 netns ha; ip link set hb0 netns hb
ip -n ha link set ha0 up; ip -n hb link set hb0 up
ip -n ha addr add 10.88.0.1/24 dev ha0; ip -n hb addr add 10.88.0.2/24 dev hb0
ip netns exec ha rdma link add hx0 type softrnic_roce netdev ha0
ip netns exec hb rdma link add hy0 type softrnic_roce netdev hb0
sleep 1
cat /sys/module/softrnic/refcnt
ip netns exec ha timeout 40 ib_read_bw -d hx0 -x 1 -D 15 -p 18800 > /tmp/s.out 2>&1 &
S=$!
sleep 2
ip netns exec hb timeout 40 ib_read_bw -d hy0 -x 1 -D 15 -p 18800 10.88.0.1 > /tmp/c.out 2>&1 &
C=$!
sleep 5
echo refcnt $(cat /sys/module/softrnic/refcnt); lsmod | grep softrnic
ps aux | grep ib_read | grep -v grep
rmmod softrnic; echo "rmmod rc=$?"
ls /sys/module/ | grep softrnic
wait $C; echo c=$?; wait $S; echo s=$?
cat /tmp/c.out | tail -5
dmesg | tail -10
