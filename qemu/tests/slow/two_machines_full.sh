#!/bin/sh
# runs under: qemu/run-pair
# Two machines, every test of qemu/tests/two_machines.sh for every pair:
# rping and ib_write_bw with the server at each end, NVMe-oF with the
# target at each end (make check runs rping both ways and NVMe-oF one way).
exec sh /src/qemu/tests/two_machines.sh only=rping,rping_rev,write_bw,write_bw_rev,nvme,nvme_rev "$@"
