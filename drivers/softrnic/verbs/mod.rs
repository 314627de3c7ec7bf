// SPDX-License-Identifier: GPL-2.0
//! The verbs objects of P-RNICPI: PD, CQ, QP, SRQ, MR, MW, AH (and the user
//! context), transport-independent.  ib_core allocates most of them with the
//! `ib_*` struct first and our part after it; the entry points in
//! `glue/verbs_ops.rs` hand each object's Rust part to the code here.

pub(crate) mod ah;
pub(crate) mod cq;
pub(crate) mod local_ops;
pub(crate) mod mcast;
pub(crate) mod mr;
pub(crate) mod qp;
pub(crate) mod srq;

use core::sync::atomic::{AtomicU32, Ordering};

use kernel::prelude::*;
use kernel::sync::SpinLockIrq;

use crate::glue::table::Table;
use crate::limits::DeviceLimits;

/// A protection domain: nothing beyond ib_core's part (the PD is checked by
/// identity where objects meet).
#[repr(C)]
pub(crate) struct Pd {
    pub(crate) ib: crate::glue::objects::IbPd,
}

/// The kinds of objects counted against the device limits.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Ucontext = 0,
    Pd,
    Cq,
    Qp,
    Srq,
    Mr,
    Mw,
    Ah,
}

const KINDS: usize = 8;
const KIND_NAMES: [&str; KINDS] = ["ucontext", "pd", "cq", "qp", "srq", "mr", "mw", "ah"];

/// Live objects of every kind, across all devices: zero at module unload, or
/// something leaked (`report_live` says so).
static LIVE: [AtomicU32; KINDS] = [const { AtomicU32::new(0) }; KINDS];

impl Kind {
    fn max(self, l: &DeviceLimits) -> u32 {
        match self {
            Kind::Ucontext => u32::MAX,
            Kind::Pd => l.max_pd,
            Kind::Cq => l.max_cq,
            Kind::Qp => l.max_qp,
            Kind::Srq => l.max_srq,
            Kind::Mr => l.max_mr,
            Kind::Mw => l.max_mw,
            Kind::Ah => l.max_ah,
        }
    }
}

/// MR key indices (the upper 24 bits of an lkey/rkey) below this are MRs,
/// from it up memory windows: one rkey names exactly one of them.
pub(crate) const MW_INDEX_BASE: u32 = 0x80_0000;
pub(crate) const KEY_INDEX_MAX: u32 = 0xff_ffff;
/// QP numbers handed out (0 and 1 are the special QPs; 2..15 unused).
pub(crate) const FIRST_QPN: u32 = 16;
pub(crate) const GSI_QPN: u32 = 1;
pub(crate) const MAX_QPN: u32 = 0xff_ffff;

/// The verbs state of one device: object counts and key tables.  Lives in
/// the device allocation (never moves); initialised by `init`.
#[repr(C)]
pub(crate) struct DeviceVerbs {
    pub(crate) qps: Table<qp::Qp>,
    pub(crate) mrs: Table<mr::Mr>,
    pub(crate) mws: Table<mr::Mw>,
    pub(crate) ahs: Table<ah::Ah>,
    counts: [AtomicU32; KINDS],
    /// Live QPs whose packets go to a receive backlog (`Qp::steered`):
    /// while there are none, a received packet skips that look-up.
    pub(crate) steered_qps: AtomicU32,
    /// UD multicast groups.
    pub(crate) mcast: SpinLockIrq<mcast::Groups>,
}

impl DeviceVerbs {
    /// Count one more object of `kind`; ENOMEM past the device limit.
    pub(crate) fn charge(&self, kind: Kind, limits: &DeviceLimits) -> Result {
        let max = kind.max(limits);
        let c = &self.counts[kind as usize];
        if c.fetch_add(1, Ordering::AcqRel) >= max {
            c.fetch_sub(1, Ordering::AcqRel);
            return Err(ENOMEM);
        }
        LIVE[kind as usize].fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    pub(crate) fn uncharge(&self, kind: Kind) {
        self.counts[kind as usize].fetch_sub(1, Ordering::AcqRel);
        LIVE[kind as usize].fetch_sub(1, Ordering::AcqRel);
    }
}

/// Log the live object counts (module unload); false if any is non-zero.
pub(crate) fn report_live() -> bool {
    let n: [u32; KINDS] = core::array::from_fn(|i| LIVE[i].load(Ordering::Acquire));
    let clean = n.iter().all(|&c| c == 0);
    let msg = if clean {
        "live objects at unload"
    } else {
        "LEAK: live objects at unload"
    };
    pr_info!(
        "{}: {}={} {}={} {}={} {}={} {}={} {}={} {}={} {}={}\n",
        msg,
        KIND_NAMES[0],
        n[0],
        KIND_NAMES[1],
        n[1],
        KIND_NAMES[2],
        n[2],
        KIND_NAMES[3],
        n[3],
        KIND_NAMES[4],
        n[4],
        KIND_NAMES[5],
        n[5],
        KIND_NAMES[6],
        n[6],
        KIND_NAMES[7],
        n[7]
    );
    clean
}
