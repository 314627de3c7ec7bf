// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues: one receive ring shared by many QPs, with a limit
//! that raises SRQ_LIMIT_REACHED once when the queue drains below it.

use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::SpinLockIrq;

use crate::abi::{self, RecvWqe, Sge};
use crate::glue::ring::{Ring, UserCtx};

#[repr(C)]
pub(crate) struct Srq {
    pub(crate) ib: crate::glue::objects::IbSrq,
    pub(crate) inner: SpinLockIrq<SrqState>,
}

pub(crate) struct SrqState {
    ring: Ring,
    user: bool,
    pub(crate) max_sge: u32,
    /// Armed limit (0: not armed).
    pub(crate) limit: u32,
    /// The consumer counter (the transports consume), kernel-private: a
    /// user ring's header is user memory.  The producer is read from the
    /// header.
    cons: u32,
}

impl SrqState {
    /// An SRQ of `max_wr` WQEs of `max_sge` Sges (EINVAL: zero or over the
    /// device limits).
    pub(crate) fn new(
        uctx: Option<UserCtx>,
        max_wr: u32,
        max_sge: u32,
        l: &crate::limits::DeviceLimits,
    ) -> Result<SrqState> {
        if max_wr == 0 || max_wr > l.max_srq_wr || max_sge == 0 || max_sge > l.max_srq_sge {
            return Err(refuse!(
                EINVAL,
                "SRQ of {} WRs of {} SGEs: 1 to {} WRs, 1 to {} SGEs\n",
                max_wr,
                max_sge,
                l.max_srq_wr,
                l.max_srq_sge
            ));
        }
        let slots = abi::slots_for(max_wr).ok_or(EINVAL)?;
        let ring = Ring::new(uctx, slots, abi::recv_slot_bytes(max_sge))?;
        Ok(SrqState {
            ring,
            user: uctx.is_some(),
            max_sge,
            limit: 0,
            cons: 0,
        })
    }

    pub(crate) fn max_wr(&self) -> u32 {
        self.ring.slots() - 1
    }

    pub(crate) fn info(&self) -> abi::QueueInfo {
        self.ring.info()
    }

    fn outstanding(&self) -> u32 {
        core::cmp::min(
            self.ring.producer().wrapping_sub(self.cons),
            self.ring.slots(),
        )
    }

    /// Arm the limit (EINVAL if above the queue's depth).
    pub(crate) fn set_limit(&mut self, limit: u32) -> Result {
        if limit > self.max_wr() {
            return Err(EINVAL);
        }
        self.limit = limit;
        Ok(())
    }

    /// Swap in a ring for a new depth, carrying the waiting WQEs and the
    /// limit over; returns the old state.  EINVAL (with `next` handed back)
    /// when they do not fit.  Both are to be dropped outside the lock.
    pub(crate) fn resize(&mut self, next: SrqState) -> Result<SrqState, (Error, SrqState)> {
        let waiting = self.outstanding();
        if waiting > next.max_wr() || next.max_sge < self.max_sge || self.limit > next.max_wr() {
            return Err((EINVAL, next));
        }
        for i in 0..waiting {
            if self
                .ring
                .copy_slot(self.cons.wrapping_add(i), &next.ring, i)
                .is_none()
            {
                return Err((EINVAL, next));
            }
        }
        let mut next = next;
        next.ring.set_producer(waiting);
        next.ring.set_consumer(0);
        next.limit = self.limit;
        Ok(core::mem::replace(self, next))
    }

    /// Queue one receive WQE of a kernel consumer.
    pub(crate) fn post(&mut self, wr_id: u64, sges: &[Sge]) -> Result {
        if self.user || sges.len() > self.max_sge as usize {
            return Err(EINVAL);
        }
        let prod = self.ring.producer();
        if prod.wrapping_sub(self.cons) >= self.max_wr() {
            return Err(ENOMEM);
        }
        let w = RecvWqe {
            wr_id,
            num_sge: sges.len() as u32,
            _reserved: 0,
        };
        self.ring.write_wqe(prod, &w, sges, &[]).ok_or(EINVAL)?;
        self.ring.set_producer(prod.wrapping_add(1));
        Ok(())
    }
}

/// A receive WQE taken off a receive queue by a responder.
pub(crate) struct Taken {
    pub(crate) wr_id: u64,
    pub(crate) sges: [Sge; crate::engine::sq::MAX_SGE],
    pub(crate) nsge: usize,
}

impl Taken {
    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sges[..self.nsge]
    }

    /// Read the WQE in slot `index` of `ring`, allowing `max_sge` SGEs.
    pub(crate) fn read(ring: &Ring, index: u32, max_sge: u32) -> Option<Taken> {
        let w = ring.read::<RecvWqe>(index, 0)?;
        if w.num_sge > max_sge || w.num_sge as usize > crate::engine::sq::MAX_SGE {
            return None;
        }
        let mut t = Taken {
            wr_id: w.wr_id,
            sges: [Sge::default(); crate::engine::sq::MAX_SGE],
            nsge: w.num_sge as usize,
        };
        for i in 0..t.nsge {
            t.sges[i] = ring.read::<Sge>(index, size_of::<RecvWqe>() + i * size_of::<Sge>())?;
        }
        Some(t)
    }
}

impl SrqState {
    /// Take the next receive WQE.  The second value says the SRQ just
    /// drained below its armed limit (the limit disarms: raise
    /// SRQ_LIMIT_REACHED once).  A malformed WQE is skipped.
    pub(crate) fn take(&mut self) -> (Option<Taken>, bool) {
        if self.outstanding() == 0 {
            return (None, false);
        }
        let t = Taken::read(&self.ring, self.cons, self.max_sge);
        self.cons = self.cons.wrapping_add(1);
        self.ring.set_consumer(self.cons);
        let limit_hit = self.limit != 0 && self.outstanding() < self.limit;
        if limit_hit {
            self.limit = 0;
        }
        (t, limit_hit)
    }
}

/// Initialiser for `Srq::inner`.
pub(crate) fn new_inner(state: SrqState) -> impl PinInit<SpinLockIrq<SrqState>> {
    new_spinlock_irq!(state, "softrnic_srq")
}
