#!/bin/sh
# rdma-core's pyverbs test suite: every module that is not vendor-specific
# (mlx5, efa, cuda) against a softrnic_roce device and a softrnic_iwarp
# device, and, as the reference for iWARP, against a siw device (its lines
# read "REF ...": not counted).  On the iWARP devices pyverbs_run.py gives
# rdma-core's parser GID index 0 and skips, with their reasons, the tests
# that need what iWARP has not; on siw that includes IB-style QP joining by
# modify_qp, which softrnic_iwarp does (`--join`); see pyverbs_run.py.  Debian ships the suite gzip-compressed under
# /usr/share/doc; it is copied to /tmp and unpacked first.  One verdict per
# module and device (pyverbs_run.py): PASS when unittest reports no failure
# and no error, SKIP when every test of the module was skipped, with every
# skip and its reason; then each device's count of single tests run,
# passed and skipped.
. /src/qemu/tests/lib.sh

MODULES="${PYVERBS_MODULES:-test_addr test_atomic test_cq test_cq_events test_cqex
    test_device test_flow test_fork test_mr test_odp test_parent_domain test_pd test_qp
    test_qpex test_rdmacm test_relaxed_ordering test_rss_traffic test_shared_pd test_srq
    test_tag_matching}"

plan $(( 2 * $(words $MODULES) ))
cp -r /usr/share/doc/rdma-core/tests /tmp/rdma-tests
find /tmp/rdma-tests -name '*.gz' -exec gunzip -f {} +
modprobe softrnic
ip link add vp0 type veth peer name vp1
ip link set vp0 up; ip link set vp1 up
ip addr add 10.0.1.1/24 dev vp0
ip addr add 10.0.2.1/24 dev vp1
ip link add vq0 type veth peer name vq1
ip link set vq0 up; ip link set vq1 up
ip addr add 10.0.3.1/24 dev vq0
modprobe siw
modprobe rdma_ucm
rdma link add pr0 type softrnic_roce netdev vp0
rdma link add pi0 type softrnic_iwarp netdev vp1
rdma link add si0 type siw netdev vq0
wait_for 'ibv_devinfo -d pr0 | grep -q PORT_ACTIVE'

: > /tmp/tally
run() {  # DEVICE MODULE [--iwarp] [--ref]: the module's verdict; a runner that dies is its FAIL
    name=pyverbs_${2}_$1
    out=$(timeout $((300 * SLOW)) python3 /src/qemu/tests/pyverbs_run.py /tmp/rdma-tests "$@" 2>&1)
    rc=$?
    echo "$out" | grep '^# tally ' >> /tmp/tally
    if [ $rc = 0 ]; then
        echo "$out"
        return
    fi
    said=$(echo "$out" | grep -m 1 "^\(REF \)\{0,1\}\(PASS\|FAIL\|SKIP\) $name\b" | sed 's/^REF //' | cut -d ' ' -f 1)
    echo "$out" | grep -v "^\(REF \)\{0,1\}\(PASS\|FAIL\|SKIP\) $name\b" | tail -n 30
    ref=; case " $* " in *" --ref "*) ref="REF " ;; esac
    echo "${ref}FAIL $name: runner $([ $rc = 124 ] && echo "timed out" || echo "exited $rc")${said:+ after it reported $said}"
}
for m in $MODULES; do run pr0 $m; done
for m in $MODULES; do run pi0 $m --iwarp --join; done
# siw, the reference, runs no softrnic code: not on the debug kernel
# (a third of the suite's runs; the stock kernel's run has its figures).
REF_DEVS=si0
[ "$SLOW" -gt 1 ] && REF_DEVS=
for d in $REF_DEVS; do for m in $MODULES; do run $d $m --iwarp --ref; done; done
# Single tests, per device (a module's verdict hides how many it skipped).
for d in pr0 pi0 $REF_DEVS; do
    awk -v d=$d '$3 == d { r += $5; s += $7; f += $9 }
        END { printf "# pyverbs on %s: %d tests ran: %d passed, %d skipped, %d failed\n", d, r, r - s - f, s, f }' /tmp/tally
done
