#!/bin/sh
# scratch: quick engine bring-up (not committed)
modprobe ib_uverbs; modprobe rdma_ucm; modprobe rdma_rxe
modprobe softrnic || exit 1
ip netns add a; ip netns add b
ip link add va type veth peer name vb
ip link set va netns a; ip link set vb netns b
ip -n a addr add 10.1.0.1/24 dev va; ip -n b addr add 10.1.0.2/24 dev vb
ip -n a link set va up; ip -n b link set vb up; ip -n a link set lo up; ip -n b link set lo up
ip netns exec a rdma link add ra type softrnic_roce netdev va || echo "link add ra failed"
ip netns exec b rdma link add rb type ${1:-softrnic_roce} netdev vb || echo "link add rb failed"
sleep 1
gid() { ibv_devinfo -v -d $1 | grep "GID\[" | grep "::ffff:" | head -1 | sed 's/.*GID\[ *\([0-9]*\)\].*/\1/'; }
GA=$(gid ra); GB=$(gid rb); echo "gids $GA $GB"
pair() { # name server-cmd client-cmd
    n=$1; s=$2; c=$3
    ip netns exec a timeout 30 sh -c "$s" > /tmp/srv.out 2>&1 &
    sleep 1
    ip netns exec b timeout 30 sh -c "$c" > /tmp/cli.out 2>&1; rc=$?
    wait $!; src=$?
    if [ $rc = 0 ] && [ $src = 0 ]; then echo "PASS $n $(grep -E 'Mbit|^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' /tmp/cli.out | tail -1)"; else echo "FAIL $n c=$rc s=$src"; tail -5 /tmp/cli.out; tail -5 /tmp/srv.out; fi
}
for dir in ab ba; do
  if [ $dir = ab ]; then A=ra; B=rb; GS=$GA; GC=$GB; SIP=10.1.0.1; S=a; C=b; else A=rb; B=ra; GS=$GB; GC=$GA; SIP=10.1.0.2; S=b; C=a; fi
  P() { n=$1; s=$2; c=$3; ip netns exec $S timeout 40 sh -c "$s" > /tmp/srv.out 2>&1 & sp=$!; sleep 1.5; ip netns exec $C timeout 40 sh -c "$c" > /tmp/cli.out 2>&1; rc=$?; wait $sp; src=$?; if [ $rc = 0 ] && [ $src = 0 ]; then echo "PASS $n.$dir $(grep -E 'Mbit|^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' /tmp/cli.out | tail -1)"; else echo "FAIL $n.$dir c=$rc s=$src"; cat /tmp/cli.out; tail -8 /tmp/srv.out; fi; }
  P rc "ibv_rc_pingpong -d $A -g $GS -n 20 -s 9000 --chk" "ibv_rc_pingpong -d $B -g $GC -n 20 -s 9000 --chk $SIP"
  P uc "ibv_uc_pingpong -d $A -g $GS -n 20 -s 4000 --chk" "ibv_uc_pingpong -d $B -g $GC -n 20 -s 4000 --chk $SIP"
  P ud "ibv_ud_pingpong -d $A -g $GS -n 20 -s 512 --chk" "ibv_ud_pingpong -d $B -g $GC -n 20 -s 512 --chk $SIP"
  P srq "ibv_srq_pingpong -d $A -g $GS -n 20 -s 2000 --chk" "ibv_srq_pingpong -d $B -g $GC -n 20 -s 2000 --chk $SIP"
  P rping "rping -s -a $SIP -C 5 -S 1024 -V" "rping -c -a $SIP -C 5 -S 1024 -V"
  P write_bw "ib_write_bw -d $A -x $GS -n 200 -s 65536" "sleep 1; ib_write_bw -d $B -x $GC -n 200 -s 65536 $SIP"
  P read_bw "ib_read_bw -d $A -x $GS -n 200 -s 65536" "sleep 1; ib_read_bw -d $B -x $GC -n 200 -s 65536 $SIP"
  P send_bw "ib_send_bw -d $A -x $GS -n 200 -s 65536" "sleep 1; ib_send_bw -d $B -x $GC -n 200 -s 65536 $SIP"
  P atomic_bw "ib_atomic_bw -d $A -x $GS -n 200" "sleep 1; ib_atomic_bw -d $B -x $GC -n 200 $SIP"
  P send_lat "ib_send_lat -d $A -x $GS -n 200" "sleep 1; ib_send_lat -d $B -x $GC -n 200 $SIP"
  rdma statistic show link ra/1 | tr -s ' \n' ' '; echo
done
rdma statistic show link ra/1
dmesg | grep -v "9p\|Free\|x86\|Run \|netfs\|Write\|clocksource" | tail -30
rdma link del ra; rdma link del rb
rmmod softrnic; dmesg | tail -3
