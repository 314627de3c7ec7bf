// SPDX-License-Identifier: GPL-2.0
//! Completion queues: a ring of `abi::Cqe` the kernel produces into.  User
//! CQs are mapped and polled by the provider; kernel CQs are polled through
//! `poll`.  Arming: kernel consumers call `arm`; user processes bump the
//! ring's `arm_seq` (no system call) and `push` notices it.

use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::SpinLockIrq;

use crate::abi::{self, Cqe};
use crate::glue::events::{self, Event};
use crate::glue::ring::{Ring, UserCtx};

/// ib_cq_notify_flags
pub(crate) const NOTIFY_SOLICITED: u32 = 1;
pub(crate) const NOTIFY_NEXT_COMP: u32 = 2;
pub(crate) const NOTIFY_REPORT_MISSED: u32 = 4;

#[repr(C)]
pub(crate) struct Cq {
    pub(crate) ib: crate::glue::objects::IbCq,
    pub(crate) inner: SpinLockIrq<CqState>,
}

pub(crate) struct CqState {
    ring: Ring,
    user: bool,
    /// The producer counter, kernel-private: never re-read from the header
    /// user space can write.  The consumer is read from the header (user-
    /// written for user CQs, kernel-private memory for kernel CQs).
    prod: u32,
    /// The CQ overflowed: it is in error and takes no more completions.
    error: bool,
    /// Kernel consumers' arm (NOTIFY_* bits), cleared when an event fires.
    kernel_arm: u32,
    /// The user arm sequence already answered with an event.
    user_arm_done: u32,
    moderation: (u16, u16),
}

/// Largest depth user space or a kernel consumer may ask for.
fn depth_ok(cqe: u32, max_cqe: u32) -> Result<u32> {
    if cqe == 0 || cqe > max_cqe {
        return Err(refuse!(EINVAL, "CQ of {} entries: 1 to {}\n", cqe, max_cqe));
    }
    abi::slots_for(cqe).ok_or(EINVAL)
}

impl CqState {
    /// A CQ able to hold `cqe` completions; mapped into `uctx` if given.
    pub(crate) fn new(uctx: Option<UserCtx>, cqe: u32, max_cqe: u32) -> Result<CqState> {
        let slots = depth_ok(cqe, max_cqe)?;
        let ring = Ring::new(uctx, slots, abi::CQE_BYTES)?;
        Ok(CqState {
            ring,
            user: uctx.is_some(),
            prod: 0,
            error: false,
            kernel_arm: 0,
            user_arm_done: 0,
            moderation: (0, 0),
        })
    }

    /// Completions the CQ holds (`ib_cq.cqe`).
    pub(crate) fn depth(&self) -> u32 {
        self.ring.slots() - 1
    }

    pub(crate) fn info(&self) -> abi::QueueInfo {
        self.ring.info()
    }

    fn outstanding(&self) -> u32 {
        self.prod.wrapping_sub(self.ring.consumer())
    }
}

/// What `CqState::push` found, for the caller to act on once the CQ lock
/// is dropped.
enum Pushed {
    Quiet,
    Notify,
    Overflow,
    Dropped,
}

/// Events a caller owes a CQ after adding completions under its own lock
/// (a QP's): delivered by `Cq::deliver` once every lock is dropped, so a
/// consumer's handler may call straight back into the verbs.
#[must_use]
#[derive(Clone, Copy, Default)]
pub(crate) struct Owed {
    notify: bool,
    overflow: bool,
}

impl Owed {
    pub(crate) fn merge(&mut self, other: Owed) {
        self.notify |= other.notify;
        self.overflow |= other.overflow;
    }
}

impl Cq {
    /// Completions written and not yet polled.
    pub(crate) fn unpolled(&self) -> u32 {
        self.inner.lock().outstanding()
    }

    /// Add a completion.  Err: the CQ overflowed (it is now in error and
    /// the completion is lost) or was already in error.
    pub(crate) fn push(&self, cqe: &Cqe, solicited: bool) -> (Result, Owed) {
        // An unsuccessful completion wakes a solicited-only arm too (IBTA
        // 11.4.2.2).
        let solicited = solicited || cqe.status != abi::WC_SUCCESS;
        let pushed = {
            let mut s = self.inner.lock();
            s.push(cqe, solicited)
        };
        match pushed {
            Pushed::Quiet => (Ok(()), Owed::default()),
            Pushed::Notify => (
                Ok(()),
                Owed {
                    notify: true,
                    overflow: false,
                },
            ),
            Pushed::Overflow => (
                Err(ENOSPC),
                Owed {
                    notify: false,
                    overflow: true,
                },
            ),
            Pushed::Dropped => (Err(ENOSPC), Owed::default()),
        }
    }

    /// Raise what `push` found: the completion event of an armed CQ, the CQ
    /// error event of an overflow.
    pub(crate) fn deliver(&self, owed: Owed) {
        if owed.overflow {
            // Debug level: any user can overflow its own CQs, so this must not
            // be a way to flood the kernel log (the CQ error event reports it).
            pr_debug!("CQ overflow: completion lost, CQ in error\n");
            events::cq_event(&self.ib, Event::CqErr);
        }
        if owed.notify {
            events::cq_notify(&self.ib);
        }
    }
}

impl CqState {
    fn push(&mut self, cqe: &Cqe, solicited: bool) -> Pushed {
        if self.error {
            return Pushed::Dropped;
        }
        if self.outstanding() >= self.ring.slots() - 1 {
            self.error = true;
            self.ring.set_kernel_flags(abi::QUEUE_OVERFLOWED);
            return Pushed::Overflow;
        }
        if self.ring.write(self.prod, 0, cqe).is_none() {
            return Pushed::Dropped;
        }
        self.prod = self.prod.wrapping_add(1);
        self.ring.set_producer(self.prod);
        // Pairs with the provider's fence after arming: either we see its
        // arm, or it sees this CQE when it polls again after arming.
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        if self.armed_for(solicited) {
            Pushed::Notify
        } else {
            Pushed::Quiet
        }
    }

    /// Consume the arm if this completion satisfies it.
    fn armed_for(&mut self, solicited: bool) -> bool {
        if self.user {
            let seq = self.ring.arm_seq();
            if seq == self.user_arm_done {
                return false;
            }
            let only_solicited = self.ring.arm_flags() & abi::ARM_SOLICITED != 0;
            if only_solicited && !solicited {
                return false;
            }
            self.user_arm_done = seq;
            true
        } else {
            let fire = self.kernel_arm & NOTIFY_NEXT_COMP != 0
                || (self.kernel_arm & NOTIFY_SOLICITED != 0 && solicited);
            if fire {
                self.kernel_arm = 0;
            }
            fire
        }
    }

    /// ib_req_notify_cq for kernel consumers.  Returns 1 when
    /// REPORT_MISSED_EVENTS was asked and completions are already waiting.
    pub(crate) fn arm(&mut self, flags: u32) -> i32 {
        let kind = flags & (NOTIFY_SOLICITED | NOTIFY_NEXT_COMP);
        // NEXT_COMP covers SOLICITED: keep the wider arm.
        if kind == NOTIFY_NEXT_COMP || self.kernel_arm & NOTIFY_NEXT_COMP == 0 {
            self.kernel_arm = kind;
        }
        if flags & NOTIFY_REPORT_MISSED != 0 && self.outstanding() != 0 {
            1
        } else {
            0
        }
    }

    /// Take the next completion (kernel CQs).
    pub(crate) fn pop(&mut self) -> Option<Cqe> {
        let cons = self.ring.consumer();
        if self.user || cons == self.prod {
            return None;
        }
        let cqe = self.ring.read::<Cqe>(cons, 0)?;
        self.ring.set_consumer(cons.wrapping_add(1));
        Some(cqe)
    }

    /// Drop the waiting completions of QP `qpn` (it was reset), kernel CQs
    /// only: the provider cleans user CQs itself.  The others move towards
    /// the producer and the consumer moves past the gap.
    pub(crate) fn clean(&mut self, qpn: u32) {
        if self.user {
            return;
        }
        let cons = self.ring.consumer();
        let mut dst = self.prod;
        let mut i = self.prod;
        while i != cons {
            i = i.wrapping_sub(1);
            let Some(cqe) = self.ring.read::<Cqe>(i, 0) else {
                return;
            };
            if cqe.qp_num == qpn {
                continue;
            }
            dst = dst.wrapping_sub(1);
            if dst != i && self.ring.write(dst, 0, &cqe).is_none() {
                return;
            }
        }
        self.ring.set_consumer(dst);
    }

    /// ci_peek_cq: how many completions (up to `n`) are waiting.
    pub(crate) fn peek(&self, n: u32) -> u32 {
        core::cmp::min(self.outstanding(), n)
    }

    pub(crate) fn set_moderation(&mut self, count: u16, period: u16) {
        self.moderation = (count, period);
    }

    /// Swap in `next` (a ring for the new depth), carrying the waiting
    /// completions, the arm and the error state over; returns the old state.
    /// EINVAL (with `next` handed back) when the waiting completions do not
    /// fit.  Both are to be dropped outside the lock (dropping a user ring
    /// may sleep).
    pub(crate) fn resize(&mut self, next: CqState) -> Result<CqState, (Error, CqState)> {
        let waiting = self.outstanding();
        if waiting > next.ring.slots() - 1 || waiting > self.ring.slots() {
            return Err((EINVAL, next));
        }
        let cons = self.ring.consumer();
        for i in 0..waiting {
            if self
                .ring
                .copy_slot(cons.wrapping_add(i), &next.ring, i)
                .is_none()
            {
                return Err((EINVAL, next));
            }
        }
        let mut next = next;
        next.prod = waiting;
        next.ring.set_producer(waiting);
        next.ring.set_consumer(0);
        next.ring.copy_arm_from(&self.ring);
        next.user_arm_done = self.user_arm_done;
        next.kernel_arm = self.kernel_arm;
        next.moderation = self.moderation;
        next.error = self.error;
        if self.error {
            next.ring.set_kernel_flags(abi::QUEUE_OVERFLOWED);
        }
        Ok(core::mem::replace(self, next))
    }
}

/// Initialiser for `Cq::inner`.
pub(crate) fn new_inner(state: CqState) -> impl PinInit<SpinLockIrq<CqState>> {
    new_spinlock_irq!(state, "softrnic_cq")
}
