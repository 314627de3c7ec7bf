#!/bin/sh
# rdma-core's pyverbs test suite against a softrnic_roce and a softrnic_iwarp
# device: the modules issue 3 names.  Debian ships the suite gzip-compressed
# under /usr/share/doc; it is copied to /tmp and unpacked first.  One line per
# module and device (pyverbs_run.py): PASS when unittest reports no failure
# and no error; the tests that move data wait for the engine (issue 4) and
# are listed, as is every skip with its reason.
. /src/qemu/tests/lib.sh

MODULES="${PYVERBS_MODULES:-test_device test_pd test_mr test_cq test_cq_events test_addr test_srq test_qp}"

cp -r /usr/share/doc/rdma-core/tests /tmp/rdma-tests
find /tmp/rdma-tests -name '*.gz' -exec gunzip -f {} +
modprobe softrnic
ip link add vp0 type veth peer name vp1
ip link set vp0 up; ip link set vp1 up
ip addr add 10.0.1.1/24 dev vp0
ip addr add 10.0.2.1/24 dev vp1
rdma link add pr0 type softrnic_roce netdev vp0
rdma link add pi0 type softrnic_iwarp netdev vp1
wait_for 'ibv_devinfo -d pr0 | grep -q PORT_ACTIVE'

for dev in pr0 pi0; do
    for m in $MODULES; do
        timeout 300 python3 /src/qemu/tests/pyverbs_run.py /tmp/rdma-tests $dev $m 2>&1 ||
            echo "FAIL pyverbs_${m}_$dev: runner exited non-zero (timeout or crash)"
    done
done
