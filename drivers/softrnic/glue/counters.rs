// SPDX-License-Identifier: GPL-2.0
//! Per-QP counters: `rdma statistic qp` binds QPs to counters (by hand, or
//! automatically by QP type or process) and shows each counter's sums.
//! ib_core's model is a hardware one: a QP bound to a counter counts there
//! and no longer in the port's default counters, and ib_core adds every
//! counter's figures to the port's.  So a bound QP counts in its own
//! `Qp::stats` instead of the device's (`Qp::count`), and a counter is what
//! its QPs counted while bound: `retired` for those that left, plus the
//! live counts of those still bound.  Per QP are the protocol machines'
//! counts, completions and iWARP's FPDUs; packets and bytes on the wire,
//! and drops before a QP is known, stay the device's.
//!
//! ib_core calls bind, unbind and update under the counter's mutex, and
//! dealloc once nothing is bound: the counter's own state needs no lock.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};

use kernel::alloc::KVec;
use kernel::ffi;
use kernel::prelude::*;
use kernel::types::Opaque;

use super::bindings as b;
use super::dev;
use crate::engine::COUNTERS;

/// ib_core's counter with softrnic's state after it (`size_rdma_counter`;
/// ib_core allocates it zeroed, and calls `counter_init` first).
#[repr(C)]
pub(super) struct QpCounter {
    ib: Opaque<b::rdma_counter>,
    /// What QPs counted while bound here, summed when they left.
    retired: [AtomicU64; COUNTERS],
    /// The numbers of the QPs bound here (under ib_core's counter mutex).
    bound: UnsafeCell<KVec<u32>>,
}

/// # Safety
/// `c` is a counter ib_core allocated for our device (a `QpCounter`).
unsafe fn ours<'a>(c: *mut b::rdma_counter) -> &'a QpCounter {
    // SAFETY: per the contract; the ib_core part is first (repr(C)).
    unsafe { &*c.cast::<QpCounter>() }
}

/// # Safety
/// Called by ib_core, once, on a counter it has just allocated zeroed.
pub(super) unsafe extern "C" fn counter_init(c: *mut b::rdma_counter) {
    let p = c.cast::<QpCounter>();
    // SAFETY: our counter's memory, not yet shared; zeroed atomics are
    // valid, the vector is written once here (an empty one owns nothing,
    // so ib_core's error paths, which free it without counter_dealloc,
    // leak nothing).
    unsafe { core::ptr::addr_of_mut!((*p).bound).write(UnsafeCell::new(KVec::new())) };
}

/// # Safety
/// Called by ib_core on a counter of ours, after `counter_init`.
pub(super) unsafe extern "C" fn counter_alloc_stats(
    _c: *mut b::rdma_counter,
) -> *mut b::rdma_hw_stats {
    // SAFETY: a static descriptor table of COUNTERS entries.
    unsafe { b::softrnic_alloc_port_stats(super::ops::STAT_DESCS.0.as_ptr(), COUNTERS as i32) }
}

/// # Safety
/// Called by ib_core under the counter's mutex, with a counter of ours and
/// a live QP of ours that no counter holds.
pub(super) unsafe extern "C" fn counter_bind_qp(
    c: *mut b::rdma_counter,
    ibqp: *mut b::ib_qp,
    _port: u32,
) -> ffi::c_int {
    // SAFETY: per the contract.
    let (counter, q) = unsafe { (ours(c), super::verbs_ops::qp_ref(ibqp)) };
    // SAFETY: ib_core holds the counter's mutex: no other access.
    let bound = unsafe { &mut *counter.bound.get() };
    if bound.push(q.qpn(), GFP_KERNEL).is_err() {
        return ENOMEM.to_errno();
    }
    // (Left over from an earlier binding: already in that counter.)
    for i in 0..COUNTERS {
        q.stats.take(i);
    }
    q.bound.store(true, Ordering::Relaxed);
    // SAFETY: ib_core reads `counter` of a QP it owns; drivers set it.
    unsafe { (*ibqp).counter = c };
    0
}

/// # Safety
/// Called by ib_core under the counter's mutex, with a live QP of ours
/// bound to a counter of ours.
pub(super) unsafe extern "C" fn counter_unbind_qp(ibqp: *mut b::ib_qp, _port: u32) -> ffi::c_int {
    // SAFETY: per the contract.
    let (c, q) = unsafe { ((*ibqp).counter, super::verbs_ops::qp_ref(ibqp)) };
    if c.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: per the contract.
    let counter = unsafe { ours(c) };
    q.bound.store(false, Ordering::Relaxed);
    for i in 0..COUNTERS {
        counter.retired[i].fetch_add(q.stats.take(i), Ordering::Relaxed);
    }
    // SAFETY: ib_core holds the counter's mutex.
    let bound = unsafe { &mut *counter.bound.get() };
    if let Some(at) = bound.iter().position(|&n| n == q.qpn()) {
        // (In range: `position` found it.)
        let _ = bound.remove(at);
    }
    // SAFETY: as in bind.
    unsafe { (*ibqp).counter = core::ptr::null_mut() };
    0
}

/// # Safety
/// Called by ib_core under the counter's mutex, with a counter of ours
/// whose `stats` it allocated through `counter_alloc_stats`.
pub(super) unsafe extern "C" fn counter_update_stats(c: *mut b::rdma_counter) -> ffi::c_int {
    // SAFETY: per the contract.
    let (counter, d, stats) = unsafe { (ours(c), dev((*c).device), (*c).stats) };
    // SAFETY: ib_core holds the counter's mutex.
    let bound = unsafe { &*counter.bound.get() };
    for i in 0..COUNTERS {
        let mut sum = counter.retired[i].load(Ordering::Relaxed);
        for &qpn in bound.iter() {
            // (A bound QP is alive: ib_core unbinds before destroying.)
            if let Some(q) = d.verbs().qps.get(qpn) {
                sum = sum.wrapping_add(q.stats.get(i));
            }
        }
        // SAFETY: ib_core's stats of this counter; the shim checks `i`.
        unsafe { b::softrnic_stats_set(stats, i as i32, sum) };
    }
    0
}

/// # Safety
/// Called by ib_core once no QP is bound, before it frees the counter.
pub(super) unsafe extern "C" fn counter_dealloc(c: *mut b::rdma_counter) -> ffi::c_int {
    let p = c.cast::<QpCounter>();
    // SAFETY: written in counter_init; nothing uses it any more.
    unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*p).bound)) };
    0
}
