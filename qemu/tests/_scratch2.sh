#!/bin/sh
# scratch: full pyverbs suite on a softrnic_roce device (not committed)
. /src/qemu/tests/lib.sh
cp -r /usr/share/doc/rdma-core/tests /tmp/rdma-tests
find /tmp/rdma-tests -name '*.gz' -exec gunzip -f {} +
modprobe ib_uverbs; modprobe rdma_ucm; modprobe rdma_rxe
modprobe softrnic
ip link add vp0 type veth peer name vp1
ip link set vp0 up; ip link set vp1 up
ip addr add 10.0.1.1/24 dev vp0
ip addr add 10.0.2.1/24 dev vp1
rdma link add ${2:-pr0} type ${1:-softrnic_roce} netdev vp0
wait_for "ibv_devinfo -d ${2:-pr0} | grep -q PORT_ACTIVE"
for m in ${MODS:-test_qp test_mr test_cq test_cq_events test_srq test_atomic test_qpex test_cqex test_rdmacm test_addr test_device test_pd test_odp test_parent_domain test_shared_pd test_relaxed_ordering test_fork test_flow test_rss_traffic test_tag_matching}; do
  echo "=== $m"
  timeout 600 python3 /src/qemu/tests/pyverbs_run.py /tmp/rdma-tests ${2:-pr0} $m --all 2>&1 | grep -v WeakSet | head -80
done
rdma statistic show link ${2:-pr0}/1 | tr -s ' \n' ' '
dmesg | tail -5
