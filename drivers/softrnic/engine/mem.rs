// SPDX-License-Identifier: GPL-2.0
//! Memory access for the engine: local SGEs checked against their lkey, PD,
//! bounds and access rights; remote accesses checked against an rkey naming
//! an MR or a bound memory window; copies and atomics on the memory behind
//! them.  Every check and the access it allows happen under the MR's lock,
//! so a concurrent deregistration, invalidation or rebind is either wholly
//! before or wholly after.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::abi::Sge;
use crate::glue::bindings as b;
use crate::glue::net::PageMap;
use crate::verbs::mr::{MrKind, MrState};
use crate::verbs::{DeviceVerbs, MW_INDEX_BASE};

pub(crate) const LOCAL_WRITE: u32 = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
pub(crate) const REMOTE_WRITE: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
pub(crate) const REMOTE_READ: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_READ;
pub(crate) const REMOTE_ATOMIC: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
const ZERO_BASED: u32 = b::ib_access_flags_IB_ZERO_BASED;

/// `addr..addr+len` lies inside `base..base+size`.
pub(crate) fn inside(addr: u64, len: u64, base: u64, size: u64) -> bool {
    match (addr.checked_add(len), base.checked_add(size)) {
        (Some(end), Some(limit)) => addr >= base && end <= limit,
        _ => false,
    }
}

/// Which way a copy goes.
pub(crate) enum Data<'a> {
    /// Into the memory region.
    Store(&'a [u8]),
    /// Out of the memory region.
    Load(&'a mut [u8]),
}

impl Data<'_> {
    fn len(&self) -> usize {
        match self {
            Data::Store(s) => s.len(),
            Data::Load(d) => d.len(),
        }
    }

    /// Copy `n` bytes at `at` of the buffer to/from `p`.
    ///
    /// # Safety
    /// `p` is valid for `n` bytes of reads and writes.
    unsafe fn apply(&mut self, at: usize, p: *mut u8, n: usize) {
        match self {
            // SAFETY: `at + n` is within the buffer (callers walk it in
            // order); `p` per the contract; the regions cannot overlap (one is
            // a kernel buffer we own).
            Data::Store(s) => unsafe { core::ptr::copy_nonoverlapping(s.as_ptr().add(at), p, n) },
            // SAFETY: as above.
            Data::Load(d) => unsafe {
                core::ptr::copy_nonoverlapping(p, d.as_mut_ptr().add(at), n)
            },
        }
    }
}

/// Walk `len` bytes from byte `start` of a list of pages of `page_size`
/// bytes: `f(page index, offset in page, offset in the walk, bytes)`.
fn chunks(
    start: u64,
    len: usize,
    page_size: u64,
    mut f: impl FnMut(usize, usize, usize, usize) -> bool,
) -> bool {
    let mut done = 0usize;
    while done < len {
        let pos = start + done as u64;
        let (page, off) = ((pos / page_size) as usize, (pos % page_size) as usize);
        let n = core::cmp::min(len - done, page_size as usize - off);
        if !f(page, off, done, n) {
            return false;
        }
        done += n;
    }
    true
}

impl MrState {
    /// Copy `data` at `iova`, which the caller checked lies in the region.
    /// False if the memory behind it is not there (a short page list).
    pub(crate) fn copy(&self, iova: u64, mut data: Data<'_>) -> bool {
        let len = data.len();
        if len == 0 {
            return true;
        }
        let Some(start) = iova.checked_sub(self.iova) else {
            return false;
        };
        match &self.kind {
            MrKind::Dma => {
                // SAFETY: a DMA MR exists only for kernel consumers, whose
                // addresses are kernel virtual addresses (ib_core's virtual
                // DMA) of memory they own for the work request's lifetime.
                unsafe { data.apply(0, iova as usize as *mut u8, len) };
                true
            }
            MrKind::User(um) => {
                let page_size = crate::glue::page_size();
                chunks(
                    start + u64::from(um.offset),
                    len,
                    page_size,
                    |page, off, at, n| {
                        let Some(&pg) = um.pages.get(page) else {
                            return false;
                        };
                        // SAFETY: a page pinned by the MR's umem, alive while the
                        // MR (whose lock we hold) is.
                        let Some(map) = (unsafe { PageMap::new(pg) }) else {
                            return false;
                        };
                        // SAFETY: `off + n` stays within the mapped page.
                        unsafe { data.apply(at, map.ptr().add(off), n) };
                        true
                    },
                )
            }
            MrKind::FastReg {
                pages,
                page_size,
                offset,
                ..
            } => {
                if *page_size == 0 {
                    return false;
                }
                chunks(
                    start + offset,
                    len,
                    u64::from(*page_size),
                    |page, off, at, n| {
                        let Some(&addr) = pages.get(page) else {
                            return false;
                        };
                        // SAFETY: the kernel consumer registered these pages
                        // (kernel virtual addresses) for the registration's life.
                        unsafe { data.apply(at, (addr as usize + off) as *mut u8, n) };
                        true
                    },
                )
            }
        }
    }

    /// Run `f` on the 8-byte word at `iova` (8-byte aligned, checked in the
    /// region by the caller) as an atomic.
    pub(crate) fn atomic<R>(&self, iova: u64, f: impl FnOnce(&AtomicU64) -> R) -> Option<R> {
        if iova % 8 != 0 {
            return None;
        }
        let start = iova.checked_sub(self.iova)?;
        let word = |p: *mut u8| {
            // SAFETY: an aligned 8-byte word of memory the region covers
            // (mapped, pinned or kernel-owned as in `copy`); other accessors
            // use atomics or plain copies, never references.
            f(unsafe { AtomicU64::from_ptr(p.cast()) })
        };
        match &self.kind {
            MrKind::Dma => Some(word(iova as usize as *mut u8)),
            MrKind::User(um) => {
                let pos = start + u64::from(um.offset);
                // The iova may be aligned while the memory is not (a region
                // registered with a virt of another alignment): an atomic
                // must never straddle into the next page.
                if pos % 8 != 0 {
                    return None;
                }
                let ps = crate::glue::page_size();
                let pg = *um.pages.get((pos / ps) as usize)?;
                // SAFETY: a pinned page of the MR, as in `copy`.
                let map = unsafe { PageMap::new(pg) }?;
                // SAFETY: the word is within the mapped page (aligned, 8 bytes).
                Some(word(unsafe { map.ptr().add((pos % ps) as usize) }))
            }
            MrKind::FastReg {
                pages,
                page_size,
                offset,
                ..
            } => {
                let ps = u64::from(*page_size);
                if ps == 0 {
                    return None;
                }
                let pos = start + offset;
                let addr = *pages.get((pos / ps) as usize)?;
                let at = addr as usize + (pos % ps) as usize;
                if at % 8 != 0 {
                    return None;
                }
                Some(word(at as *mut u8))
            }
        }
    }
}

/// Run `f` on the MR named by a local key, after checking it covers
/// `addr..addr+len` in `pd` with local write if `write`.  `None` is a local
/// protection error.
pub(crate) fn with_local<R>(
    v: &DeviceVerbs,
    pd: usize,
    lkey: u32,
    addr: u64,
    len: u64,
    write: bool,
    f: impl FnOnce(&MrState) -> R,
) -> Option<R> {
    let index = lkey >> 8;
    if index >= MW_INDEX_BASE {
        return None;
    }
    let mr = v.mrs.get(index)?;
    if mr.pd() != pd {
        return None;
    }
    let m = mr.inner.lock();
    if !m.valid || m.key != lkey || (write && m.access & LOCAL_WRITE == 0) {
        return None;
    }
    if !inside(addr, len, m.iova, m.length) {
        return None;
    }
    Some(f(&m))
}

/// Copy `data` at byte `offset` of the message an SGE list describes.
/// `Err(true)` when the list is too short (a length error), `Err(false)`
/// for a key, PD, bounds or access failure (a protection error).
pub(crate) fn sgl_copy(
    v: &DeviceVerbs,
    pd: usize,
    sges: &[Sge],
    offset: u64,
    mut data: Data<'_>,
) -> Result<(), bool> {
    let write = matches!(data, Data::Store(_));
    let len = data.len();
    let mut skip = offset;
    let mut done = 0usize;
    for sge in sges {
        if done == len {
            break;
        }
        let sl = u64::from(sge.length);
        if skip >= sl {
            skip -= sl;
            continue;
        }
        let n = core::cmp::min((sl - skip) as usize, len - done);
        let addr = sge.addr.wrapping_add(skip);
        let ok = with_local(
            v,
            pd,
            sge.lkey,
            addr,
            n as u64,
            write,
            |m| match &mut data {
                Data::Store(s) => m.copy(addr, Data::Store(&s[done..done + n])),
                Data::Load(d) => m.copy(addr, Data::Load(&mut d[done..done + n])),
            },
        );
        if ok != Some(true) {
            return Err(false);
        }
        done += n;
        skip = 0;
    }
    if done < len {
        return Err(true);
    }
    Ok(())
}

/// Check every SGE of a list now (lkey, PD, bounds, access); the total
/// length, or `None` for a protection error.
pub(crate) fn sgl_check(v: &DeviceVerbs, pd: usize, sges: &[Sge], write: bool) -> Option<u64> {
    let mut total = 0u64;
    for sge in sges {
        if sge.length != 0 {
            with_local(
                v,
                pd,
                sge.lkey,
                sge.addr,
                u64::from(sge.length),
                write,
                |_| (),
            )?;
        }
        total += u64::from(sge.length);
    }
    Some(total)
}

/// Who asks for a remote access: the responder QP's PD and number.
#[derive(Clone, Copy)]
pub(crate) struct Requestor {
    pub(crate) pd: usize,
    pub(crate) qpn: u32,
}

/// Run `f(region, iova)` on the memory an rkey names for `va..va+len`, after
/// checking the key, the PD (or the QP a type 2 window is bound to), the
/// bounds and that the access rights include `need`.  `None` is a remote
/// access error.
pub(crate) fn with_remote<R>(
    v: &DeviceVerbs,
    who: Requestor,
    rkey: u32,
    va: u64,
    len: u64,
    need: u32,
    f: impl FnOnce(&MrState, u64) -> R,
) -> Option<R> {
    let index = rkey >> 8;
    if index < MW_INDEX_BASE {
        let mr = v.mrs.get(index)?;
        if mr.pd() != who.pd {
            return None;
        }
        let m = mr.inner.lock();
        if !m.valid || m.key != rkey || m.access & need != need {
            return None;
        }
        if !inside(va, len, m.iova, m.length) {
            return None;
        }
        return Some(f(&m, va));
    }
    let mw = v.mws.get(index)?;
    let ms = mw.inner.lock();
    let bnd = ms.binding?;
    if ms.rkey != rkey || bnd.access & need != need {
        return None;
    }
    if mw.is_type2() {
        if bnd.qpn != who.qpn {
            return None;
        }
    } else if mw.pd() != who.pd {
        return None;
    }
    let addr = if bnd.access & ZERO_BASED != 0 {
        bnd.addr.checked_add(va)?
    } else {
        va
    };
    if !inside(addr, len, bnd.addr, bnd.length) {
        return None;
    }
    // The MR must still be the one bound (same key, same PD): its table
    // index may have been reused by another MR since.
    let mr = v.mrs.get(bnd.mr_index)?;
    if mr.pd() != mw.pd() {
        return None;
    }
    let m = mr.inner.lock();
    if !m.valid || m.key != bnd.mr_key || !inside(addr, len, m.iova, m.length) {
        return None;
    }
    Some(f(&m, addr))
}

/// Invalidate the MR or type 2 window an rkey names, for a SEND with
/// Invalidate received by QP `who`.  False when the key cannot be
/// invalidated by it.
pub(crate) fn remote_invalidate(v: &DeviceVerbs, who: Requestor, rkey: u32) -> bool {
    let index = rkey >> 8;
    if index >= MW_INDEX_BASE {
        let Some(mw) = v.mws.get(index) else {
            return false;
        };
        let mut ms = mw.inner.lock();
        if !mw.is_type2() || ms.rkey != rkey || mw.pd() != who.pd {
            return false;
        }
        ms.binding = None;
        true
    } else {
        let Some(mr) = v.mrs.get(index) else {
            return false;
        };
        let mut m = mr.inner.lock();
        if !matches!(m.kind, MrKind::FastReg { .. }) || m.key != rkey || mr.pd() != who.pd {
            return false;
        }
        m.valid = false;
        true
    }
}

/// The atomic operations of the responder.
pub(crate) fn atomic_op(a: &AtomicU64, cmp_swap: bool, compare: u64, swap_add: u64) -> u64 {
    if cmp_swap {
        match a.compare_exchange(compare, swap_add, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(v) | Err(v) => v,
        }
    } else {
        a.fetch_add(swap_add, Ordering::SeqCst)
    }
}
