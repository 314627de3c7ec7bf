#!/bin/sh
# ad-hoc: rping -V between iWARP devices (softrnic_iwarp, siw)
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
ip netns exec ta timeout 30 rping -s -a 10.77.0.1 -p 7301 -C ${N:-10} -S ${S:-1024} -V -v > /tmp/s.out 2>&1 &
sleep 2
ip netns exec tb timeout 25 rping -c -a 10.77.0.1 -p 7301 -C ${N:-10} -S ${S:-1024} -V -v > /tmp/c.out 2>&1; echo "client rc $?"
wait; echo "-- client:"; tail -3 /tmp/c.out; echo "-- server:"; tail -3 /tmp/s.out
rdma link del wa; rdma link del wb
ip netns del ta; ip netns del tb
sleep 1
}
run softrnic_iwarp softrnic_iwarp
run softrnic_iwarp siw
run siw softrnic_iwarp
rmmod softrnic && echo "rmmod ok"
