#!/bin/sh
# Guest suite: the user-ABI fuzzer (abi_fuzz.c) against a softrnic_roce and a
# softrnic_iwarp device: random verbs with random arguments through
# libibverbs, random bytes over the mmapped queues, random commands through
# the uverbs write() and ioctl() interfaces, from several processes at once.
# Afterwards every user object must be gone (the rdma tool's resource counts
# are back where they were) and the device must still work; qemu/run fails
# the boot on any kernel report (and on the debug kernel, on any kmemleak
# finding).
#
#   qemu/run qemu/tests/fuzz.sh [SECONDS] [WORKERS]   (default 20 s, 4 workers)
. /src/qemu/tests/lib.sh

TESTS="test_abi_fuzz_roce test_abi_fuzz_iwarp"
plan $(words $TESTS)
SECONDS_EACH=${1:-20}
WORKERS=${2:-4}
modprobe softrnic || exit 1
ip link add fz0 type veth peer name fz1
ip addr add 10.55.0.1/24 dev fz0
ip addr add 10.55.0.2/24 dev fz1
ip link set fz0 up; ip link set fz1 up
rdma link add fr0 type softrnic_roce netdev fz0 || exit 1
rdma link add fi0 type softrnic_iwarp netdev fz1 || exit 1
for d in fr0 fi0; do
    wait_for "ibv_devinfo -d $d | grep -q PORT_ACTIVE" 100 || echo "# $d: port not active"
done
gcc -O1 -o /tmp/abi_fuzz /src/qemu/tests/abi_fuzz.c -libverbs || { echo "DIED abi_fuzz_build: gcc failed"; exit 1; }

# The device's line of `rdma resource show`: "pd N cq N qp N cm_id N mr N ctx N srq N".
objects() { rdma resource show | grep " $1: " | sed 's/^[0-9]*: [^:]*: //'; }

fuzz_device() { # DEVICE SEED
    before=$(objects $1)
    echo "objects before: $before"
    timeout $((SECONDS_EACH * 2 + 120)) /tmp/abi_fuzz $1 $SECONDS_EACH $WORKERS $2 > /tmp/fuzz.out 2> /tmp/fuzz.err
    rc=$?
    cat /tmp/fuzz.out; grep -v '^worker' /tmp/fuzz.err | sort | uniq -c | sort -rn | head -n 5
    [ $rc = 0 ] || fail "abi_fuzz exited $rc"
    # The fuzzer must have done something: verbs made by workers that lived
    # to the end.
    verbs=$(sed -n 's/^worker [0-9]*: \([0-9]*\) verbs.*/\1/p' /tmp/fuzz.err | awk '{s += $1} END {print s + 0}')
    echo "# $1: $(cat /tmp/fuzz.out), $verbs verbs by the workers that finished" >> /tmp/fuzz.summary
    grep -m 1 '^worker' /tmp/fuzz.err | sed 's/^/#   e.g. /' >> /tmp/fuzz.summary
    [ "$verbs" -gt 1000 ] || fail "only $verbs verbs made"
    # Contexts are released when the last worker's file is closed.
    wait_for "[ \"\$(objects $1)\" = \"$before\" ]" 100 ||
        fail "objects left: $(objects $1) (before: $before)"
    echo "objects after: $(objects $1)"
}

# The device still works after the fuzzing: an RC pingpong on itself.
still_works() { # DEVICE
    gid=$(ibv_devinfo -v -d $1 | sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:10\.55\.0\.[12].*/\1/p' | head -n 1)
    [ -n "$gid" ] || fail "$1 has no IPv4 GID"
    timeout $((60 * SLOW)) ibv_rc_pingpong -d $1 -g $gid -p 18911 -n 20 --chk > /tmp/pp_s.out 2>&1 &
    s=$!
    wait_for "ss -Hltn 'sport = :18911' | grep -q ." 100 || fail "pingpong server did not start"
    timeout $((60 * SLOW)) ibv_rc_pingpong -d $1 -g $gid -p 18911 -n 20 --chk localhost > /tmp/pp_c.out 2>&1 ||
        { cat /tmp/pp_c.out; fail "pingpong after fuzzing failed"; }
    wait $s || { cat /tmp/pp_s.out; fail "pingpong server after fuzzing failed"; }
}

test_abi_fuzz_roce() { fuzz_device fr0 1; still_works fr0; }
test_abi_fuzz_iwarp() { fuzz_device fi0 100; }

run_tests $TESTS
cat /tmp/fuzz.summary 2>/dev/null
