// SPDX-License-Identifier: GPL-2.0
//! The memory behind memory regions, with safe copies and atomics: pinned
//! user pages (`PinnedPages`, owning the umem that pins them), and the
//! kernel virtual memory of kernel consumers (`KernelVa` for a DMA MR,
//! `KernelPages` for a fast-registration page list).  The engine checks keys,
//! PDs, bounds and rights (`engine/mem.rs`) and then calls these with
//! offsets; every raw pointer stays in here.

use core::sync::atomic::AtomicU64;

use kernel::alloc::KVVec;
use kernel::prelude::*;

use super::net::PageMap;
use super::pageref::PageRef;
use super::umem::Umem;

/// Which way a copy goes.
pub(crate) enum Data<'a> {
    /// Into the memory.
    Store(&'a [u8]),
    /// Out of the memory.
    Load(&'a mut [u8]),
}

impl Data<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Data::Store(s) => s.len(),
            Data::Load(d) => d.len(),
        }
    }

    /// Copy `n` bytes at `at` of the buffer to/from `p`; false (nothing
    /// copied) if `at + n` is past the buffer.
    ///
    /// # Safety
    /// `p` is valid for `n` bytes of reads and writes and does not overlap
    /// the buffer.
    unsafe fn apply(&mut self, at: usize, p: *mut u8, n: usize) -> bool {
        match self {
            Data::Store(s) => match s.get(at..at.saturating_add(n)) {
                // SAFETY: `src` has `n` bytes; `p` per the contract.
                Some(src) => unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), p, n) },
                None => return false,
            },
            Data::Load(d) => match d.get_mut(at..at.saturating_add(n)) {
                // SAFETY: as above, the other way.
                Some(dst) => unsafe { core::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), n) },
                None => return false,
            },
        }
        true
    }
}

/// Walk `len` bytes from byte `start` of a region that begins `first`
/// bytes into a list of pages of `page_size` bytes: `f(the page's entry,
/// offset in the page, offset in the walk, bytes)`.  False past the list,
/// or when `f` is.
fn walk<T: Copy>(
    pages: &[T],
    first: u64,
    page_size: u64,
    start: u64,
    len: usize,
    mut f: impl FnMut(T, usize, usize, usize) -> bool,
) -> bool {
    let Some(start) = start.checked_add(first) else {
        return false;
    };
    if page_size == 0 {
        return false;
    }
    let mut done = 0usize;
    while done < len {
        let Some(pos) = start.checked_add(done as u64) else {
            return false;
        };
        let (page, off) = ((pos / page_size) as usize, (pos % page_size) as usize);
        let n = core::cmp::min(len - done, page_size as usize - off);
        let Some(&p) = pages.get(page) else {
            return false;
        };
        if !f(p, off, done, n) {
            return false;
        }
        done += n;
    }
    true
}

/// Pinned user memory: the umem (dropping it unpins the pages) and its
/// pages in order.
pub(crate) struct PinnedPages {
    _umem: Umem,
    /// `struct page *` of every page, pinned while `_umem` lives.
    pages: KVVec<usize>,
    /// Where the region starts in the first page.
    offset: u32,
}

impl PinnedPages {
    pub(crate) fn new(umem: Umem) -> Result<PinnedPages> {
        let (pages, offset) = super::net::umem_pages(&umem)?;
        Ok(PinnedPages {
            _umem: umem,
            pages,
            offset,
        })
    }

    /// `walk` over the region's pinned pages.
    fn walk(
        &self,
        start: u64,
        len: usize,
        f: impl FnMut(usize, usize, usize, usize) -> bool,
    ) -> bool {
        walk(
            &self.pages,
            u64::from(self.offset),
            super::page_size(),
            start,
            len,
            f,
        )
    }

    /// Copy `data` at byte `start` of the region; false if that is past its
    /// pages.
    pub(crate) fn copy(&self, start: u64, mut data: Data<'_>) -> bool {
        self.walk(start, data.len(), |pg, off, at, n| {
            // SAFETY: a page pinned by our umem, alive as long as `self`.
            let Some(map) = (unsafe { PageMap::new(pg) }) else {
                return false;
            };
            // SAFETY: `off + n` stays within the mapped page (`walk`);
            // page memory never overlaps a kernel buffer of ours.
            unsafe { data.apply(at, map.ptr().add(off), n) }
        })
    }

    /// Hand `f` the pages behind `len` bytes at byte `start` of the region,
    /// each piece with a reference of its own (`f(page, offset in it,
    /// bytes)`); false at the first piece that cannot go by reference.
    pub(crate) fn page_refs(
        &self,
        start: u64,
        len: usize,
        mut f: impl FnMut(PageRef, usize, usize) -> bool,
    ) -> bool {
        self.walk(start, len, |pg, off, _, n| {
            // SAFETY: a page pinned by our umem, alive as long as `self`.
            match unsafe { PageRef::sendable(pg) } {
                Some(r) => f(r, off, n),
                None => false,
            }
        })
    }

    /// Run `f` on the 8-byte word at byte `start` of the region as an
    /// atomic; `None` if it is not 8-byte aligned in memory or past the
    /// pages.
    pub(crate) fn atomic<R>(&self, start: u64, f: impl FnOnce(&AtomicU64) -> R) -> Option<R> {
        let pos = start.checked_add(u64::from(self.offset))?;
        // The iova may be aligned while the memory is not (a region
        // registered with a virt of another alignment): an atomic must
        // never straddle into the next page.
        if pos % 8 != 0 {
            return None;
        }
        let ps = super::page_size();
        let pg = *self.pages.get((pos / ps) as usize)?;
        // SAFETY: a page pinned by our umem, as in `copy`.
        let map = unsafe { PageMap::new(pg) }?;
        // SAFETY: an aligned 8-byte word inside the mapped page; other
        // accessors use atomics or plain copies, never references.
        let word = unsafe { AtomicU64::from_ptr(map.ptr().add((pos % ps) as usize).cast()) };
        Some(f(word))
    }
}

/// All of kernel memory, addressed by kernel virtual address: a DMA MR of a
/// kernel consumer (`get_dma_mr`; ib_core's virtual DMA hands us the
/// consumer's kernel addresses).  Such an MR is, by the verbs' design, the
/// kernel consumer's capability to have any of its memory read and written
/// through its lkey; only `get_dma_mr` makes one, for kernel PDs only.
pub(crate) struct KernelVa(());

impl KernelVa {
    /// # Safety
    /// For a DMA MR of a kernel PD only: the addresses its work requests
    /// name are kernel virtual addresses of memory the consumer owns for
    /// the duration of the request.
    pub(crate) unsafe fn new() -> KernelVa {
        KernelVa(())
    }

    pub(crate) fn copy(&self, addr: u64, mut data: Data<'_>) -> bool {
        let n = data.len();
        // SAFETY: per `new`'s contract the consumer's address is valid for
        // the request's bytes; kernel consumers' buffers are not ours.
        unsafe { data.apply(0, addr as usize as *mut u8, n) }
    }

    /// As `PinnedPages::page_refs`, at kernel address `addr`.
    pub(crate) fn page_refs(
        &self,
        addr: u64,
        len: usize,
        f: impl FnMut(PageRef, usize, usize) -> bool,
    ) -> bool {
        // SAFETY: per `new`'s contract the consumer's memory is there for
        // the request.
        unsafe { virt_refs(addr as usize, len, f) }
    }

    pub(crate) fn atomic<R>(&self, addr: u64, f: impl FnOnce(&AtomicU64) -> R) -> Option<R> {
        if addr % 8 != 0 {
            return None;
        }
        // SAFETY: an aligned word of the consumer's memory (`new`).
        Some(f(unsafe { AtomicU64::from_ptr(addr as usize as *mut u64) }))
    }
}

/// A fast-registration page list (`map_mr_sg`): kernel virtual addresses of
/// pages of `page_size` bytes a kernel consumer registers, the region
/// starting `offset` bytes into the first.
pub(crate) struct KernelPages {
    pages: KVec<u64>,
    max_pages: u32,
    page_size: u32,
    offset: u64,
}

impl KernelPages {
    pub(crate) fn new(max_pages: u32) -> Result<KernelPages> {
        Ok(KernelPages {
            pages: KVec::with_capacity(max_pages as usize, GFP_KERNEL)?,
            max_pages,
            page_size: 0,
            offset: 0,
        })
    }

    /// Append a page; ENOMEM past the list's capacity.
    ///
    /// # Safety
    /// `addr` is the kernel virtual address of a page of the size
    /// `set_layout` gives, which the kernel consumer keeps for as long as
    /// it uses the registration (ib_core's `map_mr_sg` contract).
    pub(crate) unsafe fn push(&mut self, addr: u64) -> Result {
        if self.pages.len() >= self.max_pages as usize {
            return Err(ENOMEM);
        }
        self.pages.push(addr, GFP_ATOMIC)?;
        Ok(())
    }

    pub(crate) fn clear(&mut self) {
        self.pages.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// After `map_mr_sg`: the page size, and where the mapped range
    /// (starting at `iova`) begins in the first page.
    pub(crate) fn set_layout(&mut self, size: u32, iova: u64) {
        self.page_size = size;
        self.offset = self.pages.first().map_or(0, |&p| iova.wrapping_sub(p));
    }

    /// The kernel address of byte `start` of the region, if it is in a page
    /// and `len` bytes from it stay in that page.
    fn addr(&self, pos: u64, len: u64) -> Option<usize> {
        let ps = u64::from(self.page_size);
        if ps == 0 || pos % ps + len > ps {
            return None;
        }
        let page = *self.pages.get((pos / ps) as usize)?;
        Some(page as usize + (pos % ps) as usize)
    }

    /// `walk` over the registered pages, as `set_layout` laid them out.
    fn walk(
        &self,
        start: u64,
        len: usize,
        f: impl FnMut(u64, usize, usize, usize) -> bool,
    ) -> bool {
        walk(
            &self.pages,
            self.offset,
            u64::from(self.page_size),
            start,
            len,
            f,
        )
    }

    pub(crate) fn copy(&self, start: u64, mut data: Data<'_>) -> bool {
        self.walk(start, data.len(), |addr, off, at, n| {
            // SAFETY: `off + n` lies in a page the consumer registered
            // (`push`).
            unsafe { data.apply(at, (addr as usize + off) as *mut u8, n) }
        })
    }

    /// As `PinnedPages::page_refs`.
    pub(crate) fn page_refs(
        &self,
        start: u64,
        len: usize,
        mut f: impl FnMut(PageRef, usize, usize) -> bool,
    ) -> bool {
        self.walk(start, len, |addr, off, _, n| {
            // SAFETY: `off + n` lies in a page the consumer registered
            // (`push`), kept while it uses the registration.
            unsafe { virt_refs(addr as usize + off, n, &mut f) }
        })
    }

    pub(crate) fn atomic<R>(&self, start: u64, f: impl FnOnce(&AtomicU64) -> R) -> Option<R> {
        let at = self.addr(start.checked_add(self.offset)?, 8)?;
        if at % 8 != 0 {
            return None;
        }
        // SAFETY: an aligned word inside a registered page (`push`).
        Some(f(unsafe { AtomicU64::from_ptr(at as *mut u64) }))
    }
}

/// Hand `f` the pages of kernel memory `addr..addr + len`, split at page
/// boundaries, each with a reference of its own; false at the first that
/// cannot go by reference (not in the linear map, slab memory).
///
/// # Safety
/// The memory is kept by its owner for the call.
unsafe fn virt_refs(
    addr: usize,
    len: usize,
    mut f: impl FnMut(PageRef, usize, usize) -> bool,
) -> bool {
    let ps = kernel::page::PAGE_SIZE;
    let mut done = 0;
    while done < len {
        let a = addr.wrapping_add(done);
        let (off, n) = (a % ps, core::cmp::min(len - done, ps - a % ps));
        // SAFETY: a byte of memory kept for the call (the contract).
        let Some(r) = (unsafe { PageRef::sendable_virt(a) }) else {
            return false;
        };
        if !f(r, off, n) {
            return false;
        }
        done += n;
    }
    true
}
