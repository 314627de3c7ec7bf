#!/bin/sh
# Guest suite: the kernel's own RDMA consumers (issue 17) over softrnic,
# with rxe and siw in the same VM as the references ("REF" lines).
#   - NVMe over Fabrics: the kernel target (nvmet, nvmet-rdma) exports a
#     memory-backed null_blk and a file through configfs; the kernel host
#     (nvme-rdma, `nvme connect -t rdma`) connects; fio writes and verifies
#     4 KiB random and 128 KiB sequential I/O at queue depth 1 and 32;
#     a disconnect and a reconnect keep what was written; the link taken
#     down under fio and brought back: nvme-rdma reconnects, every block
#     verifies.
#   - NFS over RDMA: nfsd listening on RDMA port 20049 (svcrdma) and an
#     NFSv4.2 mount with proto=rdma (xprtrdma); a file tree written, read
#     back from the server's side and (after the client's caches are
#     dropped) through the mount, and compared.
#   - iSER: LIO's iSCSI target (configured through configfs, as targetcli
#     does) with an iSER portal on a RAM disk, open-iscsi's initiator
#     logging in over the iser interface; fio writes and verifies.  iSER is
#     the third consumer because it is the block storage a RoCE or iWARP
#     user most likely runs besides NVMe-oF: it runs on both transports
#     (SMC-R is RoCE only, SRP an InfiniBand protocol first), with the
#     stock initiator and target of every distribution.
# nvmet, nvme-rdma, nfsd and the NFS client live in the initial network
# namespace, so each device sits alone on one end of a veth pair there and
# each consumer connects to its own address (loopback through the device:
# both ends of every connection are the device under test).
#
#   qemu/run qemu/tests/slow/consumers.sh [DEV...] [only=TEST,...]
#
# DEV: sr (softrnic_roce), rxe, sw (softrnic_iwarp), siw; TEST: nvme_fio,
# nvme_reconnect, nvme_link_down, nfs, iser.  Lines: "PASS TEST_DEV result" ("REF ..." for rxe
# and siw, which run no softrnic code).  RoCE devices one at a time: rxe
# and softrnic both bind UDP 4791 in the namespace of their netdev.
. /src/qemu/tests/lib.sh
. /src/qemu/tests/lib_consumers.sh

DEVS="sr rxe sw siw"
TESTS="nvme_fio nvme_reconnect nvme_link_down nfs iser"
T=$((300 * SLOW))  # seconds for any one program (fio, nvme, mount, cp)

devs= only=
for arg in "$@"; do
    case $arg in
    only=*) only=$(echo "${arg#only=}" | tr ',' ' ') ;;
    sr|rxe|sw|siw) devs="$devs $arg" ;;
    *) echo "DIED consumers_args: unknown argument $arg"; exit 1 ;;
    esac
done
[ -n "$devs" ] && DEVS=$devs
[ -n "$only" ] && TESTS=$only
is_ref() { [ "$1" = rxe ] || [ "$1" = siw ]; }
n=0
for d in $DEVS; do is_ref $d || n=$((n + $(words $TESTS))); done
plan $n


# ---- NVMe over Fabrics ----

# crc_off_in_loopback: every QP on $DEV runs its stream without MPA's CRC
# (rdma -dd resource show qp: the stream's mpa_crc).
crc_off_in_loopback() {
    crcs=$(rdma -dd resource show qp link $DEV/1 | grep -o "mpa_crc [01]" | sort | uniq -c | tr -s ' \n' ' ')
    case "$crcs" in *"mpa_crc 1"*) fail "a connection in loopback asked for MPA's CRC: $crcs" ;; esac
    case "$crcs" in *"mpa_crc 0"*) ;; *) fail "no stream details on $DEV's QPs: ${crcs:-none}" ;; esac
}

t_nvme_fio() {
    need nvme fio
    nvmet_up || fail "the target's configfs set-up failed"
    nvme_connect
    on_device "nvme-rdma"
    fio_verify rand4k_qd1 $NVME1 randwrite 4k 1; r1=$BW
    fio_verify rand4k_qd32 $NVME1 randwrite 4k 32; r32=$BW m32=$MOVED
    fio_verify seq128k_qd1 $NVME1 write 128k 1; s1=$BW
    fio_verify seq128k_qd32 $NVME1 write 128k 32; s32=$BW m128=$MOVED
    fio_verify file_rand4k_qd32 $NVME2 randwrite 4k 32
    # Both ends on one softrnic_roce device: its packets go straight from
    # one QP to the other (rx.rs, loop_back), not through the network stack.
    if [ "$d" = sr ]; then
        case "$m32" in *looped_pkts*) ;; *) fail "4k qd32: no packet took the device's own loopback (counters moved: ${m32:-none})" ;; esac
    fi
    # Both ends on one softrnic_iwarp device: TCP runs the connections over
    # the loopback device, so MPA's CRC is not asked for (cm.rs, `policy`).
    # And the host answers the target's READs of its 128 KiB writes from the
    # data's own pages, by reference (stream.rs, `by_reference`).
    if [ "$d" = sw ]; then
        crc_off_in_loopback
        case "$m128" in *iw_tx_ref_bytes*) ;; *) fail "128k qd32: no READ response went by reference (counters moved: ${m128:-none})" ;; esac
    fi
    run nvme disconnect -n $NQN
    result "write KiB/s: 4k rand qd1 $r1, qd32 $r32; 128k seq qd1 $s1, qd32 $s32; file ns 4k qd32 $BW; counters at 4k qd32: ${m32:-none moved}"
}

# What was written before a disconnect is there after the reconnect.
t_nvme_reconnect() {
    need nvme
    nvmet_up || fail "the target's configfs set-up failed"
    nvme_connect
    head -c $((4 * 1024 * 1024)) /dev/urandom > /tmp/pattern
    run dd if=/tmp/pattern of=$NVME1 bs=1M oflag=direct
    run dd if=/tmp/pattern of=$NVME2 bs=1M oflag=direct
    run nvme disconnect -n $NQN
    wait_for '[ -z "$(ctrl)" ]' 100 || fail "controller still there after the disconnect"
    for i in 1 2; do
        nvme_connect
        on_device "nvme-rdma (connection $i)"
        for d in $NVME1 $NVME2; do
            timeout $T dd if=$d of=/tmp/back bs=1M count=4 iflag=direct 2>/dev/null || fail "reading $d back failed"
            cmp -s /tmp/pattern /tmp/back || fail "$d after reconnect $i: $(cmp /tmp/pattern /tmp/back 2>&1)"
        done
        run nvme disconnect -n $NQN
        wait_for '[ -z "$(ctrl)" ]' 100 || fail "controller still there after disconnect $i"
    done
    result "4 MiB on each namespace intact over 2 reconnects"
}

# The link taken down under I/O: nvme-rdma's QPs fail, it reconnects once
# the link is back (every second, NVME_CONNECT_OPTS), the I/O it held is
# resent, and fio's verification finds every block intact.
t_nvme_link_down() {
    need nvme fio
    nvmet_up || fail "the target's configfs set-up failed"
    NVME_CONNECT_OPTS="--reconnect-delay=1 --ctrl-loss-tmo=$((120 * SLOW))" nvme_connect
    timeout $T fio --name=linkdown --filename=$NVME1 --rw=randwrite --bs=4k --iodepth=16 --ioengine=libaio \
        --direct=1 --size=$FIO_SIZE --verify=crc32c --verify_fatal=1 --do_verify=1 \
        --output-format=json --output=/tmp/fio.linkdown.json > /tmp/fio.out 2>&1 &
    fio=$!
    sleep 1
    kill -0 $fio 2>/dev/null || fail "fio ended before the link went down: $(tail -n 3 /tmp/fio.out)"
    ip link set $VETH down
    # (Long enough for the QPs to run out of retries: the controller resets.)
    wait_for "grep -qv live /sys/class/nvme/$(ctrl)/state" 50
    state=$(cat /sys/class/nvme/$(ctrl)/state)
    sleep 3
    ip link set $VETH up
    wait_for "ibv_devinfo -d $DEV | grep -q PORT_ACTIVE" 100 || fail "the port did not come back"
    wait $fio; rc=$?
    cat /tmp/fio.out
    [ $rc = 0 ] || fail "fio exited $rc across the link's loss (controller state when down: $state)"
    grep -q live /sys/class/nvme/$(ctrl)/state || fail "controller $(cat /sys/class/nvme/$(ctrl)/state) after fio"
    run nvme disconnect -n $NQN
    result "controller $state while the link was down; every block verified after"
}

# ---- NFS over RDMA ----

# A tree of files of every size from 0 to 1 MiB, written through the mount.
t_nfs() {
    need exportfs rpc.nfsd rpc.mountd mount.nfs
    nfs_server_up || fail "nfsd set-up failed: $(dmesg | grep -i nfsd | tail -n 2)"
    mkdir -p /mnt/nfs /tmp/tree
    for i in 0 1 100 4095 4096 4097 65536 300000 1048576; do head -c $i /dev/urandom > /tmp/tree/f$i; done
    mkdir -p /tmp/tree/dir/sub; cp /tmp/tree/f4097 /tmp/tree/dir/sub/a; ln -s ../f0 /tmp/tree/dir/link
    run mount -t nfs -o vers=4.2,proto=rdma,port=20049 $IP:/ /mnt/nfs
    grep " /mnt/nfs " /proc/mounts | grep -q "proto=rdma" || fail "not mounted over rdma: $(grep /mnt/nfs /proc/mounts)"
    on_device "the NFS mount"
    if [ "$d" = sw ]; then crc_off_in_loopback; fi
    s0=$(date +%s%N)
    run cp -a /tmp/tree /mnt/nfs/
    run sync
    ms=$(( ($(date +%s%N) - s0) / 1000000 ))
    diff -r /tmp/tree /tmp/export/tree > /tmp/diff.out 2>&1 || fail "the server's copy differs: $(head -n 3 /tmp/diff.out)"
    # Read back through the mount, not from the client's page cache.
    echo 3 > /proc/sys/vm/drop_caches
    diff -r /tmp/tree /mnt/nfs/tree > /tmp/diff.out 2>&1 || fail "read back through the mount differs: $(head -n 3 /tmp/diff.out)"
    # A file written on the server, read through the mount.
    head -c 2000000 /dev/urandom > /tmp/export/big
    cmp /tmp/export/big /mnt/nfs/big || fail "a file the server wrote reads back differently"
    run umount /mnt/nfs
    kb=$(du -sk /tmp/tree | cut -f1)
    result "${kb} KiB tree written and read back; write ${ms} ms"
}

# ---- iSER: LIO's iSCSI target with its iSER portal, open-iscsi's initiator ----

t_iser() {
    # LIO's iSER portal is its TCP portal with iSER enabled: the same
    # address and port.  An iWARP device listens on that TCP port itself,
    # so the iSER listener is refused (siw in this VM: "isert_setup_id:
    # rdma_listen() failed: -98", EADDRINUSE, 2026-11-27): a limit of LIO
    # over iWARP, not of a device.
    case $CUR in sw|siw) skip "LIO's iSER portal shares its TCP portal's port, which an iWARP device's listener needs (siw: rdma_listen() EADDRINUSE)" ;; esac
    need iscsiadm iscsid fio
    iser_target_up || fail "the target's configfs set-up failed: $(dmesg | tail -n 2 | tr '\n' ' ')"
    iscsid_up || fail "iscsid did not start"
    run iscsiadm -m node -o new -T $IQN -p $IP:3260 -I iser
    run iscsiadm -m node -T $IQN -p $IP:3260 -I iser --login
    iscsiadm -m session | grep -q "^iser: .*$IP:3260.*$IQN" || fail "no iSER session: $(iscsiadm -m session 2>&1)"
    wait_for '[ -n "$(iser_disk)" ]' 100 || fail "no disk behind the session"
    on_device "iSER"
    disk=$(iser_disk)
    fio_verify iser_rand4k_qd32 $disk randwrite 4k 32; r32=$BW
    fio_verify iser_seq128k_qd1 $disk write 128k 1; s1=$BW
    run iscsiadm -m node -T $IQN -p $IP:3260 -I iser --logout
    result "write KiB/s: 4k rand qd32 $r32, 128k seq qd1 $s1"
}

# ---- the run ----

run_one() { # TEST TYPE
    name=${1}_$2 CUR=$2
    ref=; is_ref $2 && ref="REF "
    l=$(lacking $1)
    if [ -n "$l" ]; then
        echo "${ref}SKIP $name: this kernel has no $l (not in its config)"
        return
    fi
    if [ -n "$SETUP_FAILED" ]; then
        echo "${ref}FAIL $name: device set-up failed: $SETUP_FAILED"
        return
    fi
    ( set +e; "t_$1" ) > /tmp/test.out 2>&1 < /dev/null
    rc=$?
    case $1 in nvme_*) nvmet_down ;; nfs) nfs_server_down ;; iser) iser_target_down ;; esac
    verdict "$ref" $name $rc 40 || { echo "    --- dmesg:"; dmesg | tail -n 15 | sed 's/^/    /'; }
}

# The kernel must have the consumers (the debug kernel's config has none
# of them yet): otherwise their tests are SKIPs that say so.
lacks() { # MODULE...: those this kernel does not have
    for _x in "$@"; do modinfo $_x >/dev/null 2>&1 || echo $_x; done | tr '\n' ' ' | sed 's/ $//'
}
LACKS_NVME=$(lacks nvmet nvmet-rdma nvme-rdma null_blk)
LACKS_NFS=$(lacks nfsd rpcrdma nfsv4)
LACKS_ISER=$(lacks target_core_mod iscsi_target_mod ib_isert ib_iser)
lacking() { case $1 in nvme_*) echo $LACKS_NVME ;; nfs) echo $LACKS_NFS ;; iser) echo $LACKS_ISER ;; esac; }

# (NTH: the lib's functions have loop variables of their own.)
NTH=0
for d in $DEVS; do
    NTH=$((NTH + 1))
    SETUP_FAILED=
    setup_dev $d $NTH > /tmp/setup.out 2>&1 || SETUP_FAILED=$(tail -n 1 /tmp/setup.out)
    cat /tmp/setup.out
    for t in $TESTS; do run_one $t $d; done
    teardown_dev $d $NTH
done
