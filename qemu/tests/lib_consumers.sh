# Helpers for the kernel's RDMA consumers, shared by consumers.sh, the
# two-machine suite (whose peer runs them through its agent) and the bench:
# device types and a device alone on a veth, an NVMe-oF target and host,
# fio with verification, an NFS server with its RDMA port, an iSER target
# and initiator.  Sourced after lib.sh; T is the seconds any one program
# may take.  Mounts configfs (nvmet, null_blk and LIO live there).

CFG=/sys/kernel/config
T=${T:-$((300 * SLOW))}
grep -q " $CFG " /proc/mounts || mount -t configfs none $CFG 2>/dev/null

link_type() {
    case $1 in sr) echo softrnic_roce ;; sw) echo softrnic_iwarp ;; *) echo $1 ;; esac
}
module_of() {
    case $1 in sr|sw) echo softrnic ;; rxe) echo rdma_rxe ;; siw) echo siw ;; esac
}
# run CMD...: CMD with the suite's timeout, its output kept in /tmp/run.out
# (and shown); fail naming it if it does not exit 0.
run() {
    timeout $T "$@" > /tmp/run.out 2>&1
    rc=$?
    cat /tmp/run.out
    [ $rc = 0 ] || fail "$1 $([ $rc = 124 ] && echo "timed out after ${T}s" || echo "exited $rc"): $(grep -v '^[[:space:]]*$' /tmp/run.out | tail -n 1 | cut -c1-200)"
}

# need PROGRAM...: scripts/setup installs them; a missing one fails.
need() {
    for _x in "$@"; do command -v $_x >/dev/null || fail "$_x is not installed in the root (scripts/setup)"; done
}

# ---- NVMe over Fabrics ----

NQN=nqn.2026-11.org.softrnic:consumers
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:5e0f7a1c-0000-4000-8000-000000000017
NVME_PORT=4420
# Both namespaces (SLOW times smaller on a slower kernel): 64 MiB.
NS_MB=$((64 / SLOW))
# fio's bytes per job: 8 MiB written, then read back and verified.
FIO_SIZE=$((8 / SLOW))M

nvmet_up() { # target at $IP:4420: namespace 1 a null_blk in memory, 2 a file
    modprobe null_blk nr_devices=0 && modprobe nvmet && modprobe nvmet-rdma || return 1
    nb=$CFG/nullb/nullb0
    [ -d $nb ] || { mkdir $nb && echo $NS_MB > $nb/size && echo 1 > $nb/memory_backed &&
        echo 4096 > $nb/blocksize && echo 1 > $nb/power; } || return 1
    [ -b /dev/nullb0 ] || { echo "no /dev/nullb0"; return 1; }
    truncate -s ${NS_MB}M /tmp/nvme-ns2.img || return 1
    s=$CFG/nvmet/subsystems/$NQN
    mkdir -p $s && echo 1 > $s/attr_allow_any_host || return 1
    for _ns in 1 2; do mkdir -p $s/namespaces/$_ns || return 1; done
    echo -n /dev/nullb0 > $s/namespaces/1/device_path || return 1
    # The file lies on tmpfs, which has no O_DIRECT: buffered I/O.
    echo -n /tmp/nvme-ns2.img > $s/namespaces/2/device_path && echo 1 > $s/namespaces/2/buffered_io || return 1
    for _ns in 1 2; do echo 1 > $s/namespaces/$_ns/enable || return 1; done
    p=$CFG/nvmet/ports/1
    mkdir -p $p && echo rdma > $p/addr_trtype && echo ipv4 > $p/addr_adrfam &&
        echo $IP > $p/addr_traddr && echo $NVME_PORT > $p/addr_trsvcid || return 1
    ln -s $s $p/subsystems/$NQN
}
nvmet_down() {
    [ -z "$(ctrl)" ] || timeout $T nvme disconnect -n $NQN >/dev/null 2>&1
    p=$CFG/nvmet/ports/1 s=$CFG/nvmet/subsystems/$NQN
    rm -f $p/subsystems/$NQN 2>/dev/null; rmdir $p 2>/dev/null
    for _ns in 1 2; do
        [ -d $s/namespaces/$_ns ] && { echo 0 > $s/namespaces/$_ns/enable; rmdir $s/namespaces/$_ns; }
    done 2>/dev/null
    rmdir $s 2>/dev/null
    return 0
}
# nvme_connect: connect to the target at NVME_ADDR (default IP); NVME1 and
# NVME2, its namespaces' block devices.
nvme_connect() {
    # (/dev/nvme-fabrics comes with nvme-fabrics; no udev here loads it.)
    modprobe nvme-rdma || fail "no nvme-rdma module"
    run nvme connect -t rdma -a ${NVME_ADDR:-$IP} -s $NVME_PORT -n $NQN --hostnqn=$HOSTNQN ${NVME_CONNECT_OPTS:-}
    wait_for "[ -n \"\$(ns_dev 1)\" ] && [ -n \"\$(ns_dev 2)\" ]" 100 ||
        fail "the namespaces did not appear: $(ls /sys/class/nvme 2>&1; cat /sys/class/nvme/*/subsysnqn 2>&1)"
    NVME1=/dev/$(ns_dev 1) NVME2=/dev/$(ns_dev 2)
    [ -b $NVME1 ] && [ -b $NVME2 ] || fail "no block device for a namespace"
    grep -q rdma /sys/class/nvme/$(ctrl)/transport || fail "controller not over rdma"
}
ctrl() { # the controller connected to $NQN
    for c in /sys/class/nvme/nvme*; do
        [ "$(cat $c/subsysnqn 2>/dev/null)" = $NQN ] && { basename $c; return; }
    done
}
ns_dev() { # ns_dev NSID: the block device of namespace NSID of $NQN
    for b in /sys/block/nvme*n*; do
        # (nvmeXcYnZ: one path of a multipath namespace, no device node)
        case ${b##*/} in *c[0-9]*n*) continue ;; esac
        [ "$(cat $b/nsid 2>/dev/null)" = $1 ] && [ "$(cat $b/device/subsysnqn 2>/dev/null)" = $NQN ] &&
            [ -b /dev/${b##*/} ] && { echo ${b##*/}; return; }
    done
    return 1
}
# stall_counters DEV: "name=value" lines of DEV's counters that show
# where a slow run's time went (softrnic's names, rxe's where it has them).
stall_counters() {
    d=/sys/class/infiniband/${1:-none}/ports/1/hw_counters
    [ -d "$d" ] || return 0
    for c in sent_pkts retransmits ack_timeouts rcvd_rnr_err send_rnr_err rcvd_seq_err \
        out_of_seq_request duplicate_request rx_dropped looped_pkts iw_tx_ref_bytes; do
        [ -r "$d/$c" ] && echo "$c=$(cat "$d/$c")"
    done
}
# fio_verify NAME DEV RW BS DEPTH: write $FIO_SIZE, read it back and verify
# every block (crc32c in each); the write bandwidth in KiB/s into BW.
fio_verify() {
    fio_before=$(stall_counters "${DEV:-}")
    run fio --name=$1 --filename=$2 --rw=$3 --bs=$4 --iodepth=$5 --ioengine=libaio --direct=1 \
        --size=$FIO_SIZE --verify=crc32c --verify_fatal=1 --do_verify=1 \
        --output-format=json --output=/tmp/fio.$1.json
    BW=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]
e=j["error"]; print(j["write"]["bw"] if e == 0 else "error%d" % e)' /tmp/fio.$1.json) ||
        fail "fio $1: no JSON result"
    case $BW in error*) fail "fio $1 reported $BW" ;; esac
    echo "# fio $1: write $BW KiB/s"
    # (What moved on the device meanwhile: retransmissions, timeouts and
    # RNR NAKs explain a run slower than the reference's.)
    # MOVED: the same, for a result line.
    fio_after=$(stall_counters "${DEV:-}")
    MOVED=$(printf '%s\n%s\n' "$fio_before" "$fio_after" |
        awk -F= '$1 in v { d = $2 - v[$1]; if (d) { printf "%s%s +%d", s, $1, d; s = ", " }; next } { v[$1] = $2 }')
    [ -z "$fio_after" ] || echo "# fio $1: $DEV counters moved: $MOVED"
}

# ---- the device under test (consumers.sh, the bench) ----

# setup_dev TYPE N: veth cNa (10.82.N.1/24) with a TYPE device cons_TYPE on
# it; IP its address, DEV its name.
setup_dev() {
    IP=10.82.$2.1 DEV=cons_$1 VETH=c$2a
    ip link add c$2a type veth peer name c$2b && ip addr add $IP/24 dev c$2a &&
        ip link set c$2a up && ip link set c$2b up || return 1
    modprobe $(module_of $1) || return 1
    rdma link add $DEV type $(link_type $1) netdev c$2a || return 1
    wait_for "ibv_devinfo -d $DEV | grep -q PORT_ACTIVE" 100 || { echo "$DEV: port not active"; return 1; }
    echo "# $DEV ($(link_type $1)) on c$2a, $IP"
}
teardown_dev() {
    rdma link del $DEV 2>/dev/null
    ip link del c$2a 2>/dev/null
    # rxe keeps its UDP socket in the namespace while loaded: unload it so
    # that the next RoCE device can bind port 4791.
    [ "$1" = rxe ] && rmmod rdma_rxe 2>/dev/null
    return 0
}
# on_device: the consumer's QPs are on $DEV (the connection went through the
# device under test, not another one with the same address reachable).
on_device() {
    rdma resource show qp link $DEV/1 2>/dev/null | grep -q "lqpn" ||
        fail "no QP on $DEV while $1 is connected (rdma resource show qp: $(rdma resource show qp | tr -s ' \n' ' ' | cut -c1-300))"
}
# ---- NFS over RDMA: the server ----

nfs_server_up() {
    modprobe nfsd && modprobe rpcrdma || return 1
    mkdir -p /var/lib/nfs/v4recovery /run/rpcbind /tmp/export
    touch /var/lib/nfs/etab /var/lib/nfs/rmtab
    grep -q nfsd /proc/mounts || mount -t nfsd nfsd /proc/fs/nfsd || return 1
    # No NFSv4 client-recovery store here: keep the grace period short
    # (opens wait for it to end).
    echo 10 > /proc/fs/nfsd/nfsv4gracetime; echo 10 > /proc/fs/nfsd/nfsv4leasetime
    exportfs -i -o rw,no_root_squash,insecure,no_subtree_check,fsid=0 "*:/tmp/export" || return 1
    pgrep -x rpc.mountd >/dev/null || rpc.mountd -N 2 -N 3 || return 1
    rpc.nfsd -N 3 --no-udp 4 || return 1
    grep -q '^rdma 20049' /proc/fs/nfsd/portlist || echo "rdma 20049" > /proc/fs/nfsd/portlist || return 1
}
nfs_server_down() {
    grep -q " /mnt/nfs " /proc/mounts && timeout $T umount -f /mnt/nfs
    timeout $T rpc.nfsd 0
    exportfs -ua
    pkill -x rpc.mountd
    return 0
}

# ---- iSER: LIO's target, open-iscsi's initiator ----

IQN=iqn.2026-11.org.softrnic:consumers
INITIATOR=iqn.2026-11.org.softrnic:initiator
LIO=$CFG/target

iser_target_up() { # a 64 MiB RAM disk behind $IQN, an iSER portal at $IP:3260
    modprobe target_core_mod && modprobe iscsi_target_mod && modprobe ib_isert || return 1
    rd=$LIO/core/rd_mcp_0/rd0
    mkdir -p $rd && echo rd_pages=$((NS_MB * 256)) > $rd/control && echo 1 > $rd/enable || return 1
    tpg=$LIO/iscsi/$IQN/tpgt_1
    mkdir -p $tpg/lun/lun_0 && ln -s $rd $tpg/lun/lun_0/rd0 || return 1
    # No authentication, any initiator (LIO's demo mode), writable.
    for a in "authentication 0" "generate_node_acls 1" "cache_dynamic_acls 1" "demo_mode_write_protect 0"; do
        set -- $a; echo $2 > $tpg/attrib/$1 || return 1
    done
    mkdir $tpg/np/$IP:3260 && echo 1 > $tpg/np/$IP:3260/iser || return 1
    echo 1 > $tpg/enable
}
iser_target_down() {
    timeout $T iscsiadm -m node --logoutall=all >/dev/null 2>&1
    pkill -x iscsid 2>/dev/null
    tpg=$LIO/iscsi/$IQN/tpgt_1
    [ -d $tpg ] || return 0
    echo 0 > $tpg/enable 2>/dev/null
    [ -e $tpg/np/$IP:3260/iser ] && echo 0 > $tpg/np/$IP:3260/iser 2>/dev/null
    rmdir $tpg/np/$IP:3260 2>/dev/null
    rm -f $tpg/lun/lun_0/rd0; rmdir $tpg/lun/lun_0 $tpg $LIO/iscsi/$IQN 2>/dev/null
    rmdir $LIO/core/rd_mcp_0/rd0 $LIO/core/rd_mcp_0 2>/dev/null
    return 0
}
# The initiator's files go to a writable copy of /etc/iscsi (the root is
# read-only); iscsid runs for iscsiadm.
iscsid_up() {
    if ! grep -q " /etc/iscsi " /proc/mounts; then
        mkdir -p /tmp/etc-iscsi && cp -a /etc/iscsi/. /tmp/etc-iscsi/ && mount --bind /tmp/etc-iscsi /etc/iscsi || return 1
    fi
    echo "InitiatorName=$INITIATOR" > /etc/iscsi/initiatorname.iscsi
    mkdir -p /run/lock/iscsi /var/lib/iscsi
    # (No udev here: the SCSI disk driver is loaded by hand.)
    modprobe ib_iser && modprobe sd_mod || return 1
    pgrep -x iscsid >/dev/null || iscsid || return 1
    wait_for 'pgrep -x iscsid' 50
}
iser_disk() { # the SCSI disk of the session
    for b in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
        [ -b /dev/${b##*/} ] && { echo /dev/${b##*/}; return; }
    done
    return 1
}
