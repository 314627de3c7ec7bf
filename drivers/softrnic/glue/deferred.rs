// SPDX-License-Identifier: GPL-2.0
//! A QP's work item (it pumps the QP's packets on the QP's CPU) and timer
//! (retransmission, RNR), embedded in the QP ib_core allocated.  Glue sets
//! them up when it creates the QP, before anything can see it; from then on
//! queueing, arming and stopping are safe, and after `shutdown` queueing
//! and arming are ignored by the kernel itself (`disable_work_sync`,
//! `timer_shutdown_sync`), so nothing runs once the QP is gone.

use kernel::types::Opaque;

use super::bindings as b;
use crate::verbs::qp::Qp;

/// A work item inside a QP, on the engine's high-priority workqueue or (if
/// `BULK`) its normal-priority one (net_shim.c says why): fixed per item,
/// so flushing and shutting it down cover every queueing.
#[repr(transparent)]
pub(crate) struct Work<const BULK: bool>(Opaque<b::work_struct>);

/// A kernel QP's receive work item (it processes the QP's backlog), on an
/// unbound workqueue: the scheduler runs it on whichever CPU is free.
#[repr(transparent)]
pub(crate) struct RxWork(Opaque<b::work_struct>);

/// A timer inside a QP.
#[repr(transparent)]
pub(crate) struct Timer(Opaque<b::timer_list>);

impl RxWork {
    pub(crate) fn queue(&self) {
        // SAFETY: set up by `Qp::init_deferred` before the QP was published;
        // after `shutdown` the kernel ignores this.
        unsafe { b::softrnic_rx_work_queue(self.0.get()) }
    }

    /// Wait for a running work to end, and ignore any queueing from now on
    /// (process context).
    pub(crate) fn shutdown(&self) {
        // SAFETY: set up, as above.
        unsafe { b::softrnic_work_disable(self.0.get()) }
    }
}

impl<const BULK: bool> Work<BULK> {
    /// Queue the work on `cpu` (or anywhere if that CPU is offline).
    pub(crate) fn queue(&self, cpu: u32) {
        // SAFETY: set up by `Qp::init_deferred` before the QP was published;
        // after `shutdown` the kernel ignores this.
        unsafe { b::softrnic_work_queue(self.0.get(), cpu, BULK) }
    }

    /// Wait until the work, if queued or running, has run to the end
    /// (process context).
    pub(crate) fn flush(&self) {
        // SAFETY: set up, as above.
        unsafe { b::softrnic_work_flush(self.0.get()) }
    }

    /// Wait for a running work to end, and ignore any queueing from now on
    /// (process context).
    pub(crate) fn shutdown(&self) {
        // SAFETY: set up, as above.
        unsafe { b::softrnic_work_disable(self.0.get()) }
    }
}

impl Timer {
    /// (Re)start the timer to fire in `usecs`.
    pub(crate) fn arm(&self, usecs: u64) {
        // SAFETY: set up by `Qp::init_deferred`; after `shutdown` the kernel
        // ignores this.
        unsafe { b::softrnic_timer_arm(self.0.get(), usecs) }
    }

    pub(crate) fn stop(&self) {
        // SAFETY: set up, as above.
        unsafe { b::softrnic_timer_stop(self.0.get()) }
    }

    /// Wait for a running callback to end, and ignore any arming from now
    /// on (process context).
    pub(crate) fn shutdown(&self) {
        // SAFETY: set up, as above.
        unsafe { b::softrnic_timer_shutdown(self.0.get()) }
    }
}

/// Run `f` pinned to the current CPU (preemption off), given its number.
pub(crate) fn on_this_cpu<R>(f: impl FnOnce(u32) -> R) -> R {
    // SAFETY: paired with the put below.
    let cpu = unsafe { b::softrnic_cpu_get() };
    let r = f(cpu);
    // SAFETY: undoes the get above.
    unsafe { b::softrnic_cpu_put() };
    r
}

/// The number of CPUs work can be spread over (the possible CPUs; at
/// least one, so it can divide).
pub(crate) fn cpu_count() -> u32 {
    // SAFETY: a plain query.
    let n = unsafe { b::softrnic_cpu_count() };
    core::cmp::max(n, 1)
}

impl Qp {
    /// Set up the QP's work items, timer and receive backlog.
    ///
    /// # Safety
    /// `qp` is the QP ib_core allocated, at its final place, not yet
    /// visible to anything else, its work items, timer and backlog not set
    /// up yet.
    pub(crate) unsafe fn init_deferred(qp: *mut Qp) {
        // SAFETY: per the contract.
        unsafe {
            b::softrnic_work_init((*qp).work.0.get(), Some(qp_work::<false>));
            b::softrnic_work_init((*qp).bulk_work.0.get(), Some(qp_work::<true>));
            b::softrnic_work_init((*qp).rx_work.0.get(), Some(qp_rx_work));
            b::softrnic_timer_init((*qp).timer.0.get(), Some(qp_timer));
            super::backlog::Backlog::init(core::ptr::addr_of_mut!((*qp).backlog));
        }
    }
}

/// The QP's work items: pump (`BULK`: the normal-priority one, which runs
/// while the QP streams, see `Engine::bulk`).
unsafe extern "C" fn qp_work<const BULK: bool>(w: *mut b::work_struct) {
    let field = if BULK {
        core::mem::offset_of!(Qp, bulk_work)
    } else {
        core::mem::offset_of!(Qp, work)
    };
    // SAFETY: `w` is the `work` (or, `BULK`, the `bulk_work`) field of a
    // live QP: destroy shuts both down before the QP goes.
    let qp = unsafe { &*w.byte_sub(field).cast::<Qp>() };
    qp.pump(crate::transport::Pumper::Work);
}

/// The QP's receive work item: its backlog.
unsafe extern "C" fn qp_rx_work(w: *mut b::work_struct) {
    // SAFETY: `w` is the `rx_work` field of a live QP: destroy shuts it
    // down before the QP goes.
    let qp = unsafe { &*w.byte_sub(core::mem::offset_of!(Qp, rx_work)).cast::<Qp>() };
    qp.rx_drain();
}

/// The QP's timer: a retransmission or RNR timeout.
unsafe extern "C" fn qp_timer(t: *mut b::timer_list) {
    // SAFETY: `t` is the `timer` field of a live QP: destroy shuts the timer
    // down before the QP goes.
    let qp = unsafe { &*t.byte_sub(core::mem::offset_of!(Qp, timer)).cast::<Qp>() };
    qp.timeout();
}
