#!/bin/sh
# Guest suite (make check): the quick form of slow/consumers.sh, the
# kernel's own RDMA consumers over each softrnic transport alone, loopback:
# NVMe over Fabrics (nvmet-rdma and nvme-rdma, fio writing and verifying
# 4 KiB random and 128 KiB sequential I/O at depth 1 and 32) and NFS over
# RDMA (a tree written and compared).  The references (rxe, siw), the
# reconnects, the link taken down and iSER are make check-slow's.
set -- sr sw only=nvme_fio,nfs
. /src/qemu/tests/slow/consumers.sh
