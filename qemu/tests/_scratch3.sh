#!/bin/sh
. /src/qemu/tests/lib.sh
cp -r /usr/share/doc/rdma-core/tests /tmp/rdma-tests
find /tmp/rdma-tests -name '*.gz' -exec gunzip -f {} +
modprobe ib_uverbs; modprobe rdma_ucm; modprobe softrnic
ip link add vp0 type veth peer name vp1
ip link set vp0 up; ip link set vp1 up
ip addr add 10.0.1.1/24 dev vp0
rdma link add pr0 type softrnic_roce netdev vp0
wait_for "ibv_devinfo -d pr0 | grep -q PORT_ACTIVE"
cat > /tmp/v.py <<'PY'
import os, sys, unittest
d, dev, mod = sys.argv[1:4]
sys.path.insert(0, d); os.chdir(d)
sys.argv = ['run_tests.py', '--dev', dev]
from args_parser import parser
parser.parse_args()
from importlib.machinery import SourceFileLoader
tests = SourceFileLoader('tests', os.path.join(d, '__init__.py')).load_module()
s = unittest.defaultTestLoader.loadTestsFromName(f'tests.{mod}', tests)
unittest.TextTestRunner(verbosity=2).run(s)
PY
for t in "$@"; do
timeout 300 python3 /tmp/v.py /tmp/rdma-tests pr0 $t 2>&1 | grep -v "WeakSet\|_pending_removals\|^    \|weakref\|Exception ignored\|Bad file desc" | tail -40
echo "exit=$?"
done
dmesg | tail -20
