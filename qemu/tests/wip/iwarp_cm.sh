#!/bin/sh
# ad-hoc: ucmatose -C 0 (connect, no data, disconnect) between iWARP devices
modprobe softrnic; modprobe siw; modprobe rdma_ucm
run() { # TA TB
ip netns add ta; ip netns add tb
ip link add ta0 netns ta type veth peer name tb0 netns tb
ip -n ta addr add 10.77.0.1/24 dev ta0; ip -n ta link set ta0 up; ip -n ta link set lo up
ip -n tb addr add 10.77.0.2/24 dev tb0; ip -n tb link set tb0 up; ip -n tb link set lo up
ip netns exec ta rdma link add wa type $1 netdev ta0
ip netns exec tb rdma link add wb type $2 netdev tb0
sleep 1
echo "=== server $1, client $2"
ip netns exec ta timeout 30 ucmatose -b 10.77.0.1 -p 7300 -C 0 -c 2 > /tmp/s.out 2>&1 &
sleep 2
ip netns exec tb timeout 20 ucmatose -s 10.77.0.1 -b 10.77.0.2 -p 7300 -C 0 -c 2; echo "client rc $?"
wait; echo "-- server:"; cat /tmp/s.out
rdma link del wa; rdma link del wb
ip netns del ta; ip netns del tb
sleep 1
}
run softrnic_iwarp softrnic_iwarp
run softrnic_iwarp siw
run siw softrnic_iwarp
dmesg | grep -v "^\[.*\] \(siw\|softrnic\): \(loaded\|unloaded\)" | tail -30
rmmod softrnic && echo "rmmod ok"
