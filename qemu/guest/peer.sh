#!/bin/sh
# The peer VM of a two-machine suite (qemu/run-pair): its end of the wire
# (eth0, 10.90.0.2/24), then the agent that runs the suite's commands here
# (peer_agent.py) until the suite says quit.
# (No udev in the VM: the NIC's driver is loaded by hand.)
modprobe virtio_net 2>/dev/null
i=0; while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
ip addr add 10.90.0.2/24 dev eth0 && ip link set eth0 up || { echo "peer: no eth0"; ip link; exit 1; }
exec python3 /src/qemu/tests/peer_agent.py serve 7100
