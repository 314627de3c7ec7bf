// SPDX-License-Identifier: GPL-2.0
//! A kernel QP's receive backlog: received packets that wait for its receive
//! work item to process them, in arrival order (an `sk_buff_head`
//! with its own lock).  See `Qp::rx_steer`.

use core::ptr::NonNull;

use kernel::types::Opaque;

use super::bindings as b;
use super::net::Skb;

#[repr(transparent)]
pub(crate) struct Backlog(Opaque<b::sk_buff_head>);

/// What `Backlog::add` did with a packet.
pub(crate) enum Added {
    /// Queued into an empty backlog: the caller must have it drained.
    First,
    /// Queued behind others.  Whoever queued the first of them has a
    /// drain coming, and a drain ends only when it finds the backlog
    /// empty, so it takes this one too.
    Behind,
    /// Not queued: the backlog is full (the packet is freed).
    Full,
}

impl Backlog {
    /// # Safety
    /// `q` points at a backlog not yet initialised, which then stays where
    /// it is until `purge` has run for the last time.
    pub(crate) unsafe fn init(q: *mut Backlog) {
        // SAFETY: per the contract (the C side initialises the list head
        // and its lock in place).
        unsafe { b::softrnic_rxq_init((*q).0.get()) }
    }

    /// Queue `skb` unless the backlog holds `max` packets already;
    /// `looped`: it comes from `rx::loop_back` (given back by `take`).
    pub(crate) fn add(&self, skb: Skb, max: u32, looped: bool) -> Added {
        let p = skb.into_raw();
        // SAFETY: an initialised backlog; we own the skb, and on 0 the
        // backlog owns it.
        match unsafe { b::softrnic_rxq_add(self.0.get(), p.as_ptr(), max, looped) } {
            0 => Added::First,
            2 => Added::Behind,
            _ => {
                // SAFETY: not queued: the skb is still ours.
                drop(unsafe { Skb::from_raw(p) });
                Added::Full
            }
        }
    }

    /// The oldest packet, now the caller's, and whether it was looped.
    pub(crate) fn take(&self) -> Option<(Skb, bool)> {
        let mut looped = false;
        // SAFETY: an initialised backlog; a dequeued skb is ours.
        let p = unsafe { b::softrnic_rxq_take(self.0.get(), &mut looped) };
        // SAFETY: as above.
        NonNull::new(p).map(|p| (unsafe { Skb::from_raw(p) }, looped))
    }

    /// Whether no packet waits (a snapshot: one may arrive at once).
    pub(crate) fn is_empty(&self) -> bool {
        // SAFETY: an initialised backlog.
        unsafe { b::softrnic_rxq_empty(self.0.get()) }
    }

    /// Free every packet queued.
    pub(crate) fn purge(&self) {
        // SAFETY: an initialised backlog.
        unsafe { b::softrnic_rxq_purge(self.0.get()) }
    }
}

/// Bottom halves off on this CPU while it lives (softirqs, which receive
/// packets, do not run on it meanwhile; nor does the caller move).  Not
/// `Send`: it ends on the CPU it began on.
pub(crate) struct BhOff(core::marker::PhantomData<*mut ()>);

impl BhOff {
    pub(crate) fn new() -> BhOff {
        // SAFETY: paired with the enable in `drop`, in the same context.
        unsafe { b::softrnic_bh_disable() };
        BhOff(core::marker::PhantomData)
    }
}

impl Drop for BhOff {
    fn drop(&mut self) {
        // SAFETY: the disable in `new`.
        unsafe { b::softrnic_bh_enable() }
    }
}
