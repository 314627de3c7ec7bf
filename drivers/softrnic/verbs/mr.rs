// SPDX-License-Identifier: GPL-2.0
//! Memory regions and memory windows.  Keys: the upper 24 bits index the
//! device's MR table (or, from MW_INDEX_BASE up, its MW table) for O(1)
//! lookups; the low 8 bits are random, so keys cannot be guessed.

use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::SpinLockIrq;

use crate::glue::access;
use crate::glue::memory::{KernelPages, KernelVa, PinnedPages};
use crate::glue::table::Ref;

/// The access flags a memory region or window may carry (ib_access_flags);
/// anything else is EOPNOTSUPP (e.g. ON_DEMAND: softrnic pins).
pub(crate) const MR_ACCESS_SUPPORTED: u32 = access::LOCAL_WRITE
    | access::REMOTE_WRITE
    | access::REMOTE_READ
    | access::REMOTE_ATOMIC
    | access::MW_BIND
    | access::ZERO_BASED
    | access::RELAXED_ORDERING;

/// Check MR access flags: unknown bits → EOPNOTSUPP; remote write or remote
/// atomic without local write → EINVAL (IBTA 10.6.3.1 C10-88).
pub(crate) fn check_access(access: u32) -> Result {
    if access & !MR_ACCESS_SUPPORTED != 0 {
        return Err(refuse!(
            EOPNOTSUPP,
            "MR access flags {:#x} not supported (softrnic pins memory: no on-demand paging)\n",
            access & !MR_ACCESS_SUPPORTED
        ));
    }
    let needs_local_write = access::REMOTE_WRITE | access::REMOTE_ATOMIC;
    if access & needs_local_write != 0 && access & access::LOCAL_WRITE == 0 {
        return Err(refuse!(
            EINVAL,
            "MR access {:#x}: remote write or atomic without local write (IBTA C10-88)\n",
            access
        ));
    }
    Ok(())
}

/// Make a key from a table index and a random byte: the low 8 bits of
/// every lkey, rkey and MW key, so a key cannot be guessed from an index.
pub(crate) fn make_key(index: u32) -> u32 {
    (index << 8) | u32::from(crate::glue::random_key_byte())
}

pub(crate) enum MrKind {
    /// All of kernel memory (get_dma_mr): addresses are kernel virtual
    /// addresses (ib_core's virtual DMA).
    Dma(KernelVa),
    /// Pinned user memory.
    User(PinnedPages),
    /// A fast-registration MR: a page list filled by map_mr_sg, made valid
    /// by a REG_MR work request.
    FastReg(KernelPages),
}

pub(crate) struct MrState {
    pub(crate) kind: MrKind,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) length: u64,
    /// The key that currently names the MR (a fast-registration MR changes
    /// its key byte with every registration).
    pub(crate) key: u32,
    /// Fast-registration MRs are valid between REG_MR and LOCAL_INV; the
    /// others always.
    pub(crate) valid: bool,
}

#[repr(C)]
pub(crate) struct Mr {
    pub(crate) ib: crate::glue::objects::IbMr,
    pub(crate) r: Ref,
    pub(crate) index: u32,
    pub(crate) inner: SpinLockIrq<MrState>,
}

impl Mr {
    /// The PD the MR is in now (ib_core moves it on rereg), as an identity.
    pub(crate) fn pd(&self) -> usize {
        self.ib.pd_id()
    }
}

impl MrState {
    /// The page list of a fast-registration MR (map_mr_sg); EINVAL for
    /// any other MR.
    pub(crate) fn fast_reg_pages(&mut self) -> Result<&mut KernelPages> {
        match &mut self.kind {
            MrKind::FastReg(p) => Ok(p),
            _ => Err(EINVAL),
        }
    }
}

/// Initialiser for `Mr::inner`.
pub(crate) fn new_mr_inner(state: MrState) -> impl PinInit<SpinLockIrq<MrState>> {
    new_spinlock_irq!(state, "softrnic_mr")
}

/// A memory window's binding (the transports check remote access against it).
#[derive(Clone, Copy, Default)]
pub(crate) struct MwBinding {
    pub(crate) mr_index: u32,
    /// The key the MR had when bound (an index may be reused).
    pub(crate) mr_key: u32,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) access: u32,
    /// Type 2 windows: the QP the window is bound to.
    pub(crate) qpn: u32,
}

/// A memory window's mutable state.
pub(crate) struct MwState {
    /// The rkey that names the window now (a bind changes its key byte).
    pub(crate) rkey: u32,
    pub(crate) binding: Option<MwBinding>,
}

#[repr(C)]
pub(crate) struct Mw {
    pub(crate) ib: crate::glue::objects::IbMw,
    pub(crate) r: Ref,
    pub(crate) index: u32,
    pub(crate) inner: SpinLockIrq<MwState>,
}

impl Mw {
    pub(crate) fn pd(&self) -> usize {
        self.ib.pd_id()
    }

    pub(crate) fn is_type2(&self) -> bool {
        self.ib.is_type2()
    }
}

/// Initialiser for `Mw::inner` (unbound, named by `rkey`).
pub(crate) fn new_mw_inner(rkey: u32) -> impl PinInit<SpinLockIrq<MwState>> {
    new_spinlock_irq!(
        MwState {
            rkey,
            binding: None
        },
        "softrnic_mw"
    )
}
