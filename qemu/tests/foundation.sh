#!/bin/sh
# Guest suite for the foundation: module lifecycle, rdma links, provider
# matching, port attributes and events, coexistence with rxe and siw, and bad
# input.  Runs inside the VM (qemu/run); prints "PASS name" / "FAIL name: why"
# per test.  Every background process is bounded by `timeout`.
. /src/qemu/tests/lib.sh

veth_pair() { # veth_pair A B: a veth pair, both ends up
    ip link add "$1" type veth peer name "$2" && ip link set "$1" up && ip link set "$2" up
}

test_module_load_unload_3x() {
    for i in 1 2 3; do
        modprobe softrnic || fail "modprobe #$i failed"
        grep -q '^softrnic ' /proc/modules || fail "not in /proc/modules after load #$i"
        rmmod softrnic || fail "rmmod #$i failed"
        ! grep -q '^softrnic ' /proc/modules || fail "still loaded after rmmod #$i"
    done
}

test_modinfo() {
    out=$(modinfo softrnic) || fail "modinfo failed"
    echo "$out" | grep -q 'alias: *rdma-link-softrnic_roce' || fail "no rdma-link alias for softrnic_roce"
    echo "$out" | grep -q 'alias: *rdma-link-softrnic_iwarp' || fail "no rdma-link alias for softrnic_iwarp"
    echo "$out" | grep -q '^license: *GPL' || fail "no GPL license"
    echo "$out" | grep -qE '^version: *[0-9]+\.[0-9]+\.[0-9]+' || fail "no version: $(echo "$out" | grep '^version')"
    echo "$out" | grep -q '^description: *softrnic: software RDMA NIC' || fail "no description"
}

# The root is installed as `make install` installs a host (scripts/install):
# the module in updates/ of the running kernel (the debug kernel's is the
# harness's, in extra/), the provider in libibverbs' directory with its
# driver file, and nothing else loaded before a test asks for it.
test_installed_as_a_host() {
    ! grep -q '^softrnic ' /proc/modules || fail "softrnic was loaded before any test asked for it"
    m=$(modinfo -n softrnic) || fail "modinfo finds no softrnic"
    [ "$SLOW" -gt 1 ] || [ "$m" = /lib/modules/$(uname -r)/updates/softrnic.ko ] ||
        fail "the module is $m, not in updates/"
    [ ! -e /lib/modules/$(uname -r)/extra/softrnic.ko ] || [ "$SLOW" -gt 1 ] || fail "a second copy in extra/"
    ls /usr/lib/*/libibverbs/libsoftrnic-rdmav*.so >/dev/null 2>&1 || fail "no provider in libibverbs' directory"
    grep -qx 'driver softrnic' /etc/libibverbs.d/softrnic.driver || fail "no /etc/libibverbs.d/softrnic.driver"
}

test_link_add_autoloads_module() {
    rmmod softrnic 2>/dev/null
    veth_pair va0 va1
    rdma link add ra0 type softrnic_roce netdev va0 || fail "rdma link add did not autoload softrnic"
    grep -q '^softrnic ' /proc/modules || fail "module not loaded"
    rdma link del ra0 || fail "link del"
    ip link del va0
}

test_link_add_del_3x() {
    modprobe softrnic
    veth_pair vb0 vb1
    for i in 1 2 3; do
        rdma link add rb0 type softrnic_roce netdev vb0 || fail "roce add #$i"
        rdma link add ib0x type softrnic_iwarp netdev vb1 || fail "iwarp add #$i"
        [ -d /sys/class/infiniband/rb0 ] && [ -d /sys/class/infiniband/ib0x ] || fail "devices missing after add #$i"
        rdma link del rb0 || fail "roce del #$i"
        rdma link del ib0x || fail "iwarp del #$i"
        [ ! -e /sys/class/infiniband/rb0 ] && [ ! -e /sys/class/infiniband/ib0x ] || fail "devices left after del #$i"
    done
    ip link del vb0
}

test_two_devices_of_each_type() {
    modprobe softrnic
    veth_pair vc0 vc1; veth_pair vc2 vc3
    rdma link add rc0 type softrnic_roce netdev vc0 || fail "roce 1"
    rdma link add rc1 type softrnic_roce netdev vc1 || fail "roce 2"
    rdma link add ic0 type softrnic_iwarp netdev vc2 || fail "iwarp 1"
    rdma link add ic1 type softrnic_iwarp netdev vc3 || fail "iwarp 2"
    n=$(ibv_devices | grep -cE '^ +(rc0|rc1|ic0|ic1) ')
    [ "$n" = 4 ] || fail "ibv_devices lists $n of 4 devices"
    for d in rc0 rc1 ic0 ic1; do rdma link del $d || fail "del $d"; done
    ip link del vc0; ip link del vc2
}

# One RoCE and one iWARP device, kept for the attribute tests below.
setup_pair() {
    modprobe softrnic
    veth_pair vd0 vd1
    ip addr add 10.81.0.1/24 dev vd0
    ip addr add fd00:81::1/64 dev vd0 nodad
    ip addr add 10.81.0.2/24 dev vd1
    rdma link add sr0 type softrnic_roce netdev vd0 || fail "add sr0"
    rdma link add si0 type softrnic_iwarp netdev vd1 || fail "add si0"
}

test_provider_matches_our_devices() {
    setup_pair
    out=$(IBV_SHOW_WARNINGS=1 ibv_devinfo -d sr0 2>&1) || fail "ibv_devinfo -d sr0 failed: $out"
    echo "$out" | grep -qi 'warning' && fail "libibverbs warning: $(echo "$out" | grep -i warning)"
    echo "$out" | grep -q 'transport:.*InfiniBand' || fail "sr0 transport is not InfiniBand"
    echo "$out" | grep -q 'link_layer:.*Ethernet' || fail "sr0 link layer is not Ethernet"
    out=$(IBV_SHOW_WARNINGS=1 ibv_devinfo -d si0 2>&1) || fail "ibv_devinfo -d si0 failed: $out"
    echo "$out" | grep -q 'transport:.*iWARP' || fail "si0 transport is not iWARP"
    all=$(IBV_SHOW_WARNINGS=1 ibv_devices 2>&1)
    echo "$all" | grep -qi 'warning' && fail "ibv_devices warns: $all"
    [ "$(cat /sys/class/infiniband/sr0/softrnic_transport)" = roce ] || fail "sysfs transport of sr0"
    [ "$(cat /sys/class/infiniband/si0/softrnic_transport)" = iwarp ] || fail "sysfs transport of si0"
    [ "$(cat /sys/class/infiniband/si0/node_type)" = "4: RNIC" ] || fail "si0 node type: $(cat /sys/class/infiniband/si0/node_type)"
}

test_devinfo_verbose_attributes() {
    out=$(ibv_devinfo -v -d sr0 2>&1) || fail "ibv_devinfo -v failed"
    for want in 'max_qp:[[:space:]]+65536' 'max_sge:[[:space:]]+32' 'max_pkeys:[[:space:]]+1' \
        'phys_port_cnt:[[:space:]]+1' 'max_mtu:[[:space:]]+4096' 'active_mtu:[[:space:]]+1024' \
        'state:[[:space:]]+PORT_ACTIVE' 'max_msg_sz:[[:space:]]+0x80000000' 'atomic_cap:[[:space:]]+ATOMIC_HCA'; do
        echo "$out" | grep -qE "$want" || fail "sr0 lacks '$want'"
    done
    out=$(ibv_devinfo -v -d si0 2>&1) || fail "ibv_devinfo -v si0 failed"
    # RFC 7306 atomics, used between two softrnic ends (iwarp.sh); with a
    # peer without them an atomic work request fails locally.
    echo "$out" | grep -qE 'atomic_cap:[[:space:]]+ATOMIC_HCA' || fail "si0 lacks RFC 7306 atomics"
    echo "$out" | grep -qE 'max_ah:[[:space:]]+0$' || fail "si0 claims address handles"
}

test_rdma_link_show_netdev() {
    out=$(rdma link show)
    echo "$out" | grep -q 'link sr0/1 .*netdev vd0' || fail "rdma link show: $out"
    echo "$out" | grep -q 'link si0/1 .*netdev vd1' || fail "rdma link show: $out"
}

test_gid_table_holds_netdev_addresses() {
    gids=/sys/class/infiniband/sr0/ports/1/gids
    types=/sys/class/infiniband/sr0/ports/1/gid_attrs/types
    # ib_core fills the table asynchronously; give it a moment under TCG.
    for i in $(seq 1 50); do
        all=$(for n in $(seq 0 7); do cat $gids/$n 2>/dev/null; done)
        echo "$all" | grep -q '0000:0000:0000:0000:0000:ffff:0a51:0001' &&
            echo "$all" | grep -q 'fd00:0081:0000:0000:0000:0000:0000:0001' && break
        sleep 0.2
    done
    echo "$all" | grep -q '0000:0000:0000:0000:0000:ffff:0a51:0001' || fail "no IPv4-mapped GID for 10.81.0.1: $all"
    echo "$all" | grep -q 'fd00:0081:0000:0000:0000:0000:0000:0001' || fail "no GID for fd00:81::1"
    echo "$all" | grep -q '^fe80:' || fail "no link-local GID"
    t=$(cat $types/0 2>/dev/null)
    [ "$t" = "RoCE v2" ] || fail "GID 0 type is '$t', not RoCE v2"
    [ "$(cat /sys/class/infiniband/sr0/ports/1/gid_attrs/ndevs/0)" = vd0 ] || fail "GID 0 not on vd0"
}

test_port_state_and_events_follow_netdev() {
    timeout $((20 * SLOW)) ibv_asyncwatch -d sr0 > /tmp/events 2>&1 &
    w=$!
    # Its context (which queues the events) exists once it prints its FD;
    # a fixed 2 s was too short on the loaded debug kernel (PORT_ERR came
    # before the watcher: it saw only the two PORT_ACTIVEs of the way up).
    wait_for 'grep -q "async event FD" /tmp/events' 50 || { cat /tmp/events; fail "ibv_asyncwatch did not start"; }
    ip link set vd0 down
    wait_for 'ibv_devinfo -d sr0 | grep -q "state:.*PORT_DOWN"' || fail "port not DOWN after netdev down"
    ip link set vd0 up
    wait_for 'ibv_devinfo -d sr0 | grep -q "state:.*PORT_ACTIVE"' || fail "port not ACTIVE after netdev up"
    wait_for 'grep -q PORT_ACTIVE /tmp/events' || true
    kill $w 2>/dev/null; wait $w 2>/dev/null
    grep -q 'IBV_EVENT_PORT_ERR' /tmp/events || fail "no PORT_ERR event: $(cat /tmp/events)"
    grep -q 'IBV_EVENT_PORT_ACTIVE' /tmp/events || fail "no PORT_ACTIVE event: $(cat /tmp/events)"
}

test_port_mtu_follows_netdev() {
    ip link set vd0 mtu 9000
    ibv_devinfo -d sr0 | grep -qE 'active_mtu:[[:space:]]+4096' || fail "active_mtu not 4096 at netdev mtu 9000"
    ip link set vd0 mtu 600
    ibv_devinfo -d sr0 | grep -qE 'active_mtu:[[:space:]]+512' || fail "active_mtu not 512 at netdev mtu 600"
    ip link set vd0 mtu 1500
}

test_bad_link_add_missing_netdev() {
    err=$(rdma link add bad0 type softrnic_roce netdev nosuchdev 2>&1) && fail "link add on a missing netdev succeeded"
    [ -n "$err" ] || fail "no error message"
    [ ! -e /sys/class/infiniband/bad0 ] || fail "device created"
}

test_bad_link_add_duplicate_name() {
    veth_pair ve0 ve1
    err=$(rdma link add sr0 type softrnic_roce netdev ve0 2>&1) && fail "duplicate name accepted"
    [ -n "$err" ] || fail "no error message"
    dmesg -c > /dev/null
    err=$(rdma link add sr9 type softrnic_roce netdev vd0 2>&1) && fail "second RoCE device on one netdev accepted"
    ip link del ve0
    # The kernel log says why (rate-limited).
    dmesg | grep -q "vd0 already has a softrnic_roce device; cannot add sr9" ||
        fail "no reason in the kernel log: $(dmesg | tail -n 2)"
}

test_bad_link_add_loopback() {
    dmesg -c > /dev/null
    err=$(rdma link add lo0 type softrnic_roce netdev lo 2>&1) && fail "loopback accepted"
    [ -n "$err" ] || fail "no error message"
    err=$(rdma link add lo1 type softrnic_iwarp netdev lo 2>&1) && fail "loopback accepted (iwarp)"
    [ ! -e /sys/class/infiniband/lo0 ] || fail "device created"
    for d in lo0 lo1; do
        dmesg | grep -q "lo is not an Ethernet device .*; cannot add $d" ||
            fail "no reason for $d in the kernel log: $(dmesg | tail -n 2)"
    done
}

# A process holding a user context open on DEV until killed.
hold_context() {
    timeout $((60 * SLOW)) python3 -c "
import sys, time
from pyverbs.device import Context
ctx = Context(name='$1')
print('open', flush=True)
time.sleep(55)
" > /tmp/hold.$1 2>&1 &
    echo $!
}

test_netdev_delete_under_open_context() {
    veth_pair vf0 vf1
    rdma link add sf0 type softrnic_roce netdev vf0 || fail "add"
    pid=$(hold_context sf0)
    wait_for 'grep -q open /tmp/hold.sf0' || fail "context did not open: $(cat /tmp/hold.sf0)"
    timeout $((30 * SLOW)) ip link del vf0 || fail "ip link del hung or failed with a context open"
    wait_for '[ ! -e /sys/class/infiniband/sf0 ]' || fail "device still present after its netdev went away"
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
    true
}

test_rmmod_with_open_context() {
    pid=$(hold_context sr0)
    wait_for 'grep -q open /tmp/hold.sr0' || fail "context did not open: $(cat /tmp/hold.sr0)"
    # Either refused as in use, or the context is disassociated: never a hang.
    if timeout $((30 * SLOW)) rmmod softrnic; then
        [ ! -e /sys/class/infiniband/sr0 ] || fail "device left after rmmod"
    else
        rc=$?
        [ $rc = 124 ] && fail "rmmod hung with a context open"
        kill $pid; wait $pid 2>/dev/null
        rmmod softrnic || fail "rmmod after closing the context"
    fi
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
    ! grep -q '^softrnic ' /proc/modules || fail "module still loaded"
}

test_rmmod_with_devices_present() {
    modprobe softrnic
    veth_pair vg0 vg1
    rdma link add sg0 type softrnic_roce netdev vg0 || fail "add roce"
    rdma link add sg1 type softrnic_iwarp netdev vg1 || fail "add iwarp"
    timeout $((30 * SLOW)) rmmod softrnic || fail "rmmod with devices present"
    [ ! -e /sys/class/infiniband/sg0 ] && [ ! -e /sys/class/infiniband/sg1 ] || fail "devices left"
    ip link del vg0
}

test_netns_teardown() {
    modprobe softrnic
    ip netns add nsx
    ip link add vh0 type veth peer name vh1
    ip link set vh0 netns nsx
    ip -n nsx link set vh0 up
    ip netns exec nsx rdma link add sh0 type softrnic_roce netdev vh0 || fail "add in netns"
    [ -e /sys/class/infiniband/sh0 ] || fail "device missing"
    timeout $((30 * SLOW)) ip netns del nsx || fail "netns del"
    wait_for '[ ! -e /sys/class/infiniband/sh0 ]' || fail "device survived its netns"
    ip link del vh1 2>/dev/null
    true
}

test_rxe_and_siw_beside_softrnic() {
    modprobe softrnic
    modprobe rdma_rxe || fail "no rdma_rxe"
    modprobe siw || fail "no siw"
    ip netns add nr1; ip netns add nr2
    ip link add vr1 type veth peer name vr2
    ip link set vr1 netns nr1; ip link set vr2 netns nr2
    ip -n nr1 addr add 10.82.0.1/24 dev vr1; ip -n nr1 link set vr1 up
    ip -n nr2 addr add 10.82.0.2/24 dev vr2; ip -n nr2 link set vr2 up
    ip netns exec nr1 rdma link add rxe1 type rxe netdev vr1 || fail "rxe1"
    ip netns exec nr2 rdma link add rxe2 type rxe netdev vr2 || fail "rxe2"
    veth_pair vs0 vs1
    ip addr add 10.83.0.1/24 dev vs0
    rdma link add siw0 type siw netdev vs0 || fail "siw0"
    rdma link add sr1 type softrnic_roce netdev vs1 || fail "softrnic beside rxe/siw"
    out=$(IBV_SHOW_WARNINGS=1 ibv_devices 2>&1)
    echo "$out" | grep -qi warning && fail "warnings: $out"
    for d in rxe1 rxe2 siw0 sr1; do echo "$out" | grep -q " $d " || fail "$d not listed"; done
    [ ! -e /sys/class/infiniband/rxe1/softrnic_transport ] || fail "rxe carries our attribute"
    ibv_devinfo -d siw0 | grep -q 'transport:.*iWARP' || fail "siw0 not handled by its provider"
    # rxe still moves data with softrnic loaded.
    ip netns exec nr1 timeout $((30 * SLOW)) ibv_rc_pingpong -d rxe1 -g 1 -n 5 > /tmp/pp.srv 2>&1 &
    s=$!
    sleep 2
    ip netns exec nr2 timeout $((30 * SLOW)) ibv_rc_pingpong -d rxe2 -g 1 -n 5 10.82.0.1 > /tmp/pp.cli 2>&1 ||
        fail "rxe pingpong failed: $(cat /tmp/pp.cli /tmp/pp.srv)"
    wait $s || fail "rxe pingpong server failed: $(cat /tmp/pp.srv)"
    for d in rxe1 rxe2 siw0 sr1; do rdma link del $d 2>/dev/null; done
    ip netns del nr1; ip netns del nr2; ip link del vs0
    true
}

set -- \
    test_installed_as_a_host test_module_load_unload_3x test_modinfo test_link_add_autoloads_module \
    test_link_add_del_3x test_two_devices_of_each_type \
    test_provider_matches_our_devices test_devinfo_verbose_attributes \
    test_rdma_link_show_netdev test_gid_table_holds_netdev_addresses \
    test_port_state_and_events_follow_netdev test_port_mtu_follows_netdev \
    test_bad_link_add_missing_netdev test_bad_link_add_duplicate_name \
    test_bad_link_add_loopback test_netdev_delete_under_open_context \
    test_rmmod_with_open_context test_rmmod_with_devices_present \
    test_netns_teardown test_rxe_and_siw_beside_softrnic
plan $#
run_tests "$@"
