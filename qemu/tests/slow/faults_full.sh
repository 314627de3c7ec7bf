#!/bin/sh
# The whole fault matrix (faults.sh full): every netem profile, rxe:rxe as
# the reference beside sr:sr and sr:rxe, and the goodput table.
set -- full "$@"
. /src/qemu/tests/faults.sh
