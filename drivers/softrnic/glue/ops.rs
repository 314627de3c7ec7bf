// SPDX-License-Identifier: GPL-2.0
//! The `ib_device_ops` table (P-RNICPI entry points) and its `extern "C"`
//! members.  Each member checks its arguments and converts raw pointers; the
//! rules themselves live in `attrs.rs` and the verbs objects.

use kernel::ffi;
use kernel::prelude::*;

use super::attrs;
use super::bindings as b;
use super::verbs_ops as v;
use super::{dev, errno};
use crate::abi;
use crate::device::{self, Transport};

/// A user context; the ib_ucontext must come first (ib_core allocates it).
#[repr(C)]
struct Ucontext {
    ib: b::ib_ucontext,
}

pub(super) fn device_ops() -> b::ib_device_ops {
    b::ib_device_ops {
        // SAFETY: returns this module's `struct module`, valid while loaded.
        owner: unsafe { b::softrnic_this_module() },
        driver_id: b::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: abi::UVERBS_ABI_VERSION,
        // SAFETY: returns a pointer to a static attribute group.
        device_group: unsafe { b::softrnic_device_group() },
        query_device: Some(query_device),
        query_port: Some(query_port),
        get_port_immutable: Some(get_port_immutable),
        get_link_layer: Some(get_link_layer),
        query_pkey: Some(query_pkey),
        query_gid: Some(query_gid),
        alloc_ucontext: Some(alloc_ucontext),
        dealloc_ucontext: Some(dealloc_ucontext),
        disassociate_ucontext: Some(disassociate_ucontext),
        dealloc_driver: Some(dealloc_driver),
        alloc_hw_port_stats: Some(alloc_hw_port_stats),
        get_hw_stats: Some(get_hw_stats),
        fill_res_qp_entry: Some(super::restrack::fill_res_qp_entry),
        counter_init: Some(super::counters::counter_init),
        counter_alloc_stats: Some(super::counters::counter_alloc_stats),
        counter_bind_qp: Some(super::counters::counter_bind_qp),
        counter_unbind_qp: Some(super::counters::counter_unbind_qp),
        counter_update_stats: Some(super::counters::counter_update_stats),
        counter_dealloc: Some(super::counters::counter_dealloc),
        mmap: Some(b::softrnic_mmap),
        mmap_free: Some(b::softrnic_mmap_free),
        alloc_pd: Some(v::alloc_pd),
        dealloc_pd: Some(v::dealloc_pd),
        create_cq: Some(v::create_cq),
        destroy_cq: Some(v::destroy_cq),
        resize_user_cq: Some(v::resize_user_cq),
        modify_cq: Some(v::modify_cq),
        poll_cq: Some(v::poll_cq),
        peek_cq: Some(v::peek_cq),
        req_notify_cq: Some(v::req_notify_cq),
        create_qp: Some(v::create_qp),
        modify_qp: Some(v::modify_qp),
        query_qp: Some(v::query_qp),
        destroy_qp: Some(v::destroy_qp),
        post_send: Some(v::post_send),
        post_recv: Some(v::post_recv),
        create_srq: Some(v::create_srq),
        modify_srq: Some(v::modify_srq),
        query_srq: Some(v::query_srq),
        destroy_srq: Some(v::destroy_srq),
        post_srq_recv: Some(v::post_srq_recv),
        get_dma_mr: Some(v::get_dma_mr),
        reg_user_mr: Some(v::reg_user_mr),
        rereg_user_mr: Some(v::rereg_user_mr),
        dereg_mr: Some(v::dereg_mr),
        alloc_mr: Some(v::alloc_mr),
        map_mr_sg: Some(v::map_mr_sg),
        alloc_mw: Some(v::alloc_mw),
        dealloc_mw: Some(v::dealloc_mw),
        attach_mcast: Some(v::attach_mcast),
        detach_mcast: Some(v::detach_mcast),
        create_ah: Some(v::create_ah),
        create_user_ah: Some(v::create_ah),
        modify_ah: Some(v::modify_ah),
        query_ah: Some(v::query_ah),
        destroy_ah: Some(v::destroy_ah),
        iw_create_listen: Some(super::iw_ops::iw_create_listen),
        iw_destroy_listen: Some(super::iw_ops::iw_destroy_listen),
        iw_connect: Some(super::iw_ops::iw_connect),
        iw_accept: Some(super::iw_ops::iw_accept),
        iw_reject: Some(super::iw_ops::iw_reject),
        iw_get_qp: Some(super::iw_ops::iw_get_qp),
        iw_add_ref: Some(super::iw_ops::iw_add_ref),
        iw_rem_ref: Some(super::iw_ops::iw_rem_ref),
        size_ib_ucontext: size_of::<Ucontext>(),
        size_ib_pd: size_of::<crate::verbs::Pd>(),
        size_ib_cq: size_of::<crate::verbs::cq::Cq>(),
        size_ib_qp: size_of::<crate::verbs::qp::Qp>(),
        size_ib_srq: size_of::<crate::verbs::srq::Srq>(),
        size_ib_mw: size_of::<crate::verbs::mr::Mw>(),
        size_ib_ah: size_of::<crate::verbs::ah::Ah>(),
        size_rdma_counter: size_of::<super::counters::QpCounter>(),
        ..Default::default()
    }
}

/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn query_device(
    ib: *mut b::ib_device,
    attr: *mut b::ib_device_attr,
    udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: ib_core passes a live device, a writable attr, and NULL or a
    // valid udata.
    let (dev, attr) = unsafe { (dev(ib), &mut *attr) };
    // SAFETY: as above.
    if !udata.is_null() && unsafe { (*udata).inlen != 0 || (*udata).outlen != 0 } {
        // softrnic defines no vendor data for query_device.
        return EINVAL.to_errno();
    }
    attrs::fill_device_attr(
        dev.driver().transport,
        u64::from_ne_bytes(node_guid(ib)),
        attr,
    );
    0
}

fn node_guid(ib: *mut b::ib_device) -> [u8; 8] {
    // SAFETY: ib is live (callers); node_guid is written once at allocation.
    unsafe { (*ib).node_guid }.to_ne_bytes()
}

/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn query_port(
    ib: *mut b::ib_device,
    port: u32,
    attr: *mut b::ib_port_attr,
) -> ffi::c_int {
    if port != 1 {
        return EINVAL.to_errno();
    }
    // SAFETY: ib_core passes a live device and a writable attr.
    let (dev, attr) = unsafe { (dev(ib), &mut *attr) };
    let netdev = dev.port_netdev();
    attrs::fill_port_attr(dev.driver().transport, netdev.as_deref(), attr);
    if netdev.is_some() {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: live device, valid out-pointers; takes RTNL itself, and
        // ib_core never calls query_port with RTNL held.
        if unsafe { b::ib_get_eth_speed(ib, port, &mut speed, &mut width) } == 0 {
            attr.active_speed = speed;
            attr.active_width = width;
        }
    }
    0
}

/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn get_port_immutable(
    ib: *mut b::ib_device,
    port: u32,
    imm: *mut b::ib_port_immutable,
) -> ffi::c_int {
    if port != 1 {
        return EINVAL.to_errno();
    }
    // SAFETY: ib_core passes a live device and a writable struct.
    let (dev, imm) = unsafe { (dev(ib), &mut *imm) };
    attrs::fill_port_immutable(dev.driver().transport, imm);
    0
}

/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn get_link_layer(_ib: *mut b::ib_device, _port: u32) -> b::rdma_link_layer {
    b::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn query_pkey(
    _ib: *mut b::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> ffi::c_int {
    match (port, crate::limits::pkey_at(index)) {
        (1, Some(key)) => {
            // SAFETY: ib_core passes a writable u16.
            unsafe { *pkey = key };
            0
        }
        _ => EINVAL.to_errno(),
    }
}

/// An iWARP port's GIDs: index 0 made from the MAC (as siw's), then one
/// IPv4-mapped GID per IPv4 address of the netdev, which a QP joined by
/// modify_qp may name as its destination (`transport/iwarp/join.rs`); a
/// zero GID past the last (an empty entry for ib_core's cache).  RoCE GIDs
/// come from ib_core's table, filled from the netdev's IP addresses.
///
/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn query_gid(
    ib: *mut b::ib_device,
    port: u32,
    index: ffi::c_int,
    gid: *mut b::ib_gid,
) -> ffi::c_int {
    // SAFETY: ib_core passes a live device and a writable gid.
    let (dev, gid) = unsafe { (dev(ib), &mut *gid) };
    let Ok(index) = u32::try_from(index) else {
        return EINVAL.to_errno();
    };
    if port != 1
        || index >= crate::limits::IWARP_GID_TABLE_LEN
        || dev.driver().transport != Transport::Iwarp
    {
        return EINVAL.to_errno();
    }
    let Some(nd) = dev.port_netdev() else {
        return ENODEV.to_errno();
    };
    let mut raw = [0u8; 16];
    match index {
        0 => raw[..6].copy_from_slice(&nd.mac()),
        n => {
            if let Some(a) = nd.ipv4_nth(n - 1) {
                raw = crate::iwarp::join::v4_gid(a);
            }
        }
    }
    gid.raw = raw;
    0
}

/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn alloc_ucontext(
    uctx: *mut b::ib_ucontext,
    udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: ib_core passes a context of our size whose `device` is ours.
    let dev = unsafe { dev((*uctx).device) };
    // SAFETY: as above.
    if let Err(e) = v::charge_ucontext(unsafe { (*uctx).device }) {
        return e.to_errno();
    }
    let resp = abi::AllocUcontextResp {
        abi_version: abi::UVERBS_ABI_VERSION,
        transport: dev.driver().transport.abi(),
        max_inline_data: dev.driver().transport.limits().max_inline_data,
        reserved: 0,
    };
    let r = v::respond(udata, &resp);
    if r.is_err() {
        // SAFETY: as above.
        v::uncharge_ucontext(unsafe { (*uctx).device });
    }
    errno(r)
}

/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn dealloc_ucontext(uctx: *mut b::ib_ucontext) {
    // SAFETY: a context alloc_ucontext succeeded on; its device is ours.
    v::uncharge_ucontext(unsafe { (*uctx).device });
}

/// Mapped rings hold their own page references, so the kernel revokes
/// nothing: user space keeps stale (harmless) pages until it unmaps.  The
/// op's presence lets ib_uverbs disassociate open contexts instead of waiting
/// for them when a device goes away (netdev deleted, rmmod).
///
/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn disassociate_ucontext(_uctx: *mut b::ib_ucontext) {}

/// # Safety
/// Called only by ib_core, as an `ib_device_ops` member, with the pointers
/// that member's contract promises (live device of ours, valid buffers).
unsafe extern "C" fn dealloc_driver(ib: *mut b::ib_device) {
    // SAFETY: called once by ib_dealloc_device on a live device of ours.
    let d = unsafe { dev(ib) };
    // Join requests waiting for QPs go before the QP table does.
    if let Some(port) = &d.driver().join {
        port.stop();
    }
    // SAFETY: every object is gone (ib_core destroyed them at unregister).
    unsafe { d.verbs().destroy() };
    device::forget(&d);
    // SAFETY: the last use of the device's driver part (its sockets close).
    unsafe { d.drop_driver() };
}

/// The counter descriptors ib_core shows (names from `engine::COUNTER_NAMES`).
pub(super) struct StatDescs(pub(super) [b::rdma_stat_desc; crate::engine::COUNTERS]);

// SAFETY: read-only data (pointers to static strings).
unsafe impl Sync for StatDescs {}

pub(super) static STAT_DESCS: StatDescs = StatDescs({
    let mut d = [b::rdma_stat_desc {
        name: core::ptr::null(),
        flags: 0,
        priv_: core::ptr::null(),
    }; crate::engine::COUNTERS];
    let mut i = 0;
    while i < crate::engine::COUNTERS {
        d[i].name = crate::engine::COUNTER_NAMES[i].as_ptr().cast();
        i += 1;
    }
    d
});

/// ib_core: the per-port counters of `rdma statistic` and sysfs hw_counters.
unsafe extern "C" fn alloc_hw_port_stats(
    _ib: *mut b::ib_device,
    _port: u32,
) -> *mut b::rdma_hw_stats {
    // SAFETY: a static descriptor table of COUNTERS entries.
    unsafe { b::softrnic_alloc_port_stats(STAT_DESCS.0.as_ptr(), crate::engine::COUNTERS as i32) }
}

unsafe extern "C" fn get_hw_stats(
    ib: *mut b::ib_device,
    stats: *mut b::rdma_hw_stats,
    _port: u32,
    _index: ffi::c_int,
) -> ffi::c_int {
    // SAFETY: ib_core calls this on our live device with the stats it
    // allocated through alloc_hw_port_stats.
    let d = unsafe { dev(ib) };
    for i in 0..crate::engine::COUNTERS {
        // SAFETY: as above; the shim checks the index.
        unsafe { b::softrnic_stats_set(stats, i as i32, d.counters().get(i)) };
    }
    crate::engine::COUNTERS as ffi::c_int
}
