#!/bin/sh
# runs under: qemu/run-pair
# Guest suite (make check): the quick form of slow/two_machines.sh, two
# VMs, each its own kernel, joined by a QEMU socket network: softrnic here
# against the kernel's own drivers there (rxe for softrnic_roce, siw for
# softrnic_iwarp): rping -V with the server here, ib_write_bw with the
# server on the peer, NVMe over Fabrics with the target on the peer.  The
# softrnic:softrnic pairs and the other directions are make check-slow's.
set -- sr:rxe sw:siw only=rping,write_bw_rev,nvme
. /src/qemu/tests/slow/two_machines.sh
