// SPDX-License-Identifier: GPL-2.0
//! Memory regions and memory windows.  Keys: the upper 24 bits index the
//! device's MR table (or, from MW_INDEX_BASE up, its MW table) for O(1)
//! lookups; the low 8 bits are random, so keys cannot be guessed.

use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::SpinLockIrq;

use crate::glue::bindings as b;
use crate::glue::table::{Keyed, Ref};
use crate::glue::umem::Umem;

/// The access flags a memory region or window may carry (ib_access_flags);
/// anything else is EOPNOTSUPP (e.g. ON_DEMAND: softrnic pins).
pub(crate) const MR_ACCESS_SUPPORTED: u32 = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | b::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | b::ib_access_flags_IB_ACCESS_REMOTE_READ
    | b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | b::ib_access_flags_IB_ACCESS_MW_BIND
    | b::ib_access_flags_IB_ZERO_BASED
    | b::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;

/// Check MR access flags: unknown bits → EOPNOTSUPP; remote write or remote
/// atomic without local write → EINVAL (IBTA 10.6.3.1 C10-88).
pub(crate) fn check_access(access: u32) -> Result {
    if access & !MR_ACCESS_SUPPORTED != 0 {
        return Err(EOPNOTSUPP);
    }
    let needs_local_write =
        b::ib_access_flags_IB_ACCESS_REMOTE_WRITE | b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    if access & needs_local_write != 0 && access & b::ib_access_flags_IB_ACCESS_LOCAL_WRITE == 0 {
        return Err(EINVAL);
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
    Dma,
    /// Pinned user memory.
    User(UserMem),
    /// A fast-registration MR: a page list filled by map_mr_sg (kernel
    /// virtual addresses of `page_size` pages; the region starts `offset`
    /// bytes into the first), made valid by a REG_MR work request.
    FastReg {
        pages: KVec<u64>,
        max_pages: u32,
        page_size: u32,
        offset: u64,
    },
}

/// Pinned user pages: the umem (dropping it unpins them) and its pages in
/// order, for the engine's copies.
pub(crate) struct UserMem {
    _umem: Umem,
    /// `struct page *` of every page.
    pub(crate) pages: kernel::alloc::KVVec<usize>,
    /// Where the region starts in the first page.
    pub(crate) offset: u32,
}

impl UserMem {
    pub(crate) fn new(umem: Umem) -> Result<UserMem> {
        let (pages, offset) = crate::glue::net::umem_pages(&umem)?;
        Ok(UserMem {
            _umem: umem,
            pages,
            offset,
        })
    }
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
    pub(crate) ib: b::ib_mr,
    pub(crate) r: Ref,
    pub(crate) index: u32,
    pub(crate) inner: SpinLockIrq<MrState>,
}

// SAFETY: REF_OFFSET is the offset of the Ref field, initialised before the
// MR enters the table and drained before it is freed.
unsafe impl Keyed for Mr {
    const REF_OFFSET: usize = core::mem::offset_of!(Mr, r);
}
// SAFETY: mutable state sits behind the spinlock; the ib_mr fields are
// written only by ib_core or at creation and rereg (serialised by ib_core).
unsafe impl Sync for Mr {}
// SAFETY: as above.
unsafe impl Send for Mr {}

impl Mr {
    /// The PD the MR is in now (ib_core moves it on rereg), as an identity.
    pub(crate) fn pd(&self) -> usize {
        // SAFETY: a pointer-sized aligned field of a live MR; ib_core writes
        // it only between our ops, a racing read sees the old or new PD.
        unsafe { core::ptr::read_volatile(&self.ib.pd) as usize }
    }
}

impl MrState {
    /// Append a page (map_mr_sg callback); ENOMEM past the MR's capacity.
    pub(crate) fn push_page(&mut self, addr: u64) -> Result {
        match &mut self.kind {
            MrKind::FastReg {
                pages, max_pages, ..
            } => {
                if pages.len() >= *max_pages as usize {
                    return Err(ENOMEM);
                }
                pages.push(addr, GFP_ATOMIC)?;
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }

    pub(crate) fn clear_pages(&mut self) {
        if let MrKind::FastReg { pages, .. } = &mut self.kind {
            pages.clear();
        }
    }

    /// After map_mr_sg: the page size and where the mapped range (starting
    /// at `iova`) begins in the first page.
    pub(crate) fn set_page_layout(&mut self, size: u32, iova: u64) {
        if let MrKind::FastReg {
            pages,
            page_size,
            offset,
            ..
        } = &mut self.kind
        {
            *page_size = size;
            *offset = pages.first().map_or(0, |&p| iova.wrapping_sub(p));
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
    pub(crate) ib: b::ib_mw,
    pub(crate) r: Ref,
    pub(crate) index: u32,
    pub(crate) inner: SpinLockIrq<MwState>,
}

impl Mw {
    pub(crate) fn pd(&self) -> usize {
        self.ib.pd as usize
    }

    pub(crate) fn is_type2(&self) -> bool {
        self.ib.type_ == b::ib_mw_type_IB_MW_TYPE_2
    }
}

// SAFETY: as for Mr.
unsafe impl Keyed for Mw {
    const REF_OFFSET: usize = core::mem::offset_of!(Mw, r);
}
// SAFETY: as for Mr.
unsafe impl Sync for Mw {}
// SAFETY: as for Mr.
unsafe impl Send for Mw {}

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
