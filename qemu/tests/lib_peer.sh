# Helpers for two-machine suites (qemu/run-pair), sourced after lib.sh: this
# VM is 10.90.0.1 on eth0, the peer VM 10.90.0.2, where an agent runs the
# commands we send it (peer_agent.py).  A command's words are joined by
# spaces and run by the peer's /bin/sh: quote for it, inside one argument.
LOCAL_IP=10.90.0.1 PEER_IP=10.90.0.2
AGENT="python3 /src/qemu/tests/peer_agent.py"
# on_peer SECONDS CMD: run CMD on the peer; its output here, its status ours.
on_peer() { _t=$1; shift; $AGENT run $PEER_IP:7100 $_t "$@"; }
# peer_bg SECONDS CMD: start CMD on the peer in the background; PEER_JOB
# names it for peer_wait (its output, its status) and peer_kill.
peer_bg() { _t=$1; shift; PEER_JOB=$($AGENT start $PEER_IP:7100 $_t "$@"); }
peer_wait() { $AGENT wait $PEER_IP:7100 $1; }
peer_kill() { $AGENT kill $PEER_IP:7100 $1 >/dev/null 2>&1; }
peer_quit() { $AGENT quit $PEER_IP:7100; }
# wire_up: our end of the wire, and the agent answering across it.
wire_up() {
    # (No udev in the VM: the NIC's driver is loaded by hand.)
    modprobe virtio_net 2>/dev/null
    wait_for '[ -e /sys/class/net/eth0 ]' 100 || { echo "no eth0"; ip link; return 1; }
    ip addr add $LOCAL_IP/24 dev eth0 && ip link set eth0 up || return 1
    # (The agent's client retries its connection for 2 minutes: the peer
    # may still be booting.)
    on_peer 30 true || { echo "no answer from the peer's agent"; return 1; }
}
