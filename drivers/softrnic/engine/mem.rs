// SPDX-License-Identifier: GPL-2.0
//! Memory access for the engine: local SGEs checked against their lkey, PD,
//! bounds and access rights; remote accesses checked against an rkey naming
//! an MR or a bound memory window; copies and atomics on the memory behind
//! them.  Every check and the access it allows happen under the MR's lock,
//! so a concurrent deregistration, invalidation or rebind is either wholly
//! before or wholly after.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::abi::Sge;
use crate::glue::access;
pub(crate) use crate::glue::memory::Data;
use crate::glue::pageref::PageRef;
use crate::verbs::mr::{MrKind, MrState};
use crate::verbs::{DeviceVerbs, MW_INDEX_BASE};

pub(crate) const LOCAL_WRITE: u32 = access::LOCAL_WRITE;
pub(crate) const REMOTE_WRITE: u32 = access::REMOTE_WRITE;
pub(crate) const REMOTE_READ: u32 = access::REMOTE_READ;
pub(crate) const REMOTE_ATOMIC: u32 = access::REMOTE_ATOMIC;
const ZERO_BASED: u32 = access::ZERO_BASED;

/// `addr..addr+len` lies inside `base..base+size`.
pub(crate) fn inside(addr: u64, len: u64, base: u64, size: u64) -> bool {
    match (addr.checked_add(len), base.checked_add(size)) {
        (Some(end), Some(limit)) => addr >= base && end <= limit,
        _ => false,
    }
}

impl MrState {
    /// Copy `data` at `iova`, which the caller checked lies in the region.
    /// False if the memory behind it is not there (a short page list).
    pub(crate) fn copy(&self, iova: u64, data: Data<'_>) -> bool {
        if data.len() == 0 {
            return true;
        }
        let Some(start) = iova.checked_sub(self.iova) else {
            return false;
        };
        match &self.kind {
            MrKind::Dma(k) => k.copy(iova, data),
            MrKind::User(p) => p.copy(start, data),
            MrKind::FastReg(p) => p.copy(start, data),
        }
    }

    /// Hand `f` the pages behind `len` bytes at `iova` (checked in the
    /// region by the caller), each piece with a reference of its own for a
    /// socket to send by reference (`f(page, offset in it, bytes)`).  False
    /// at the first piece that cannot go so (slab or vmalloc memory, a
    /// short page list), or that `f` refuses; the pieces before it were
    /// handed to `f`.
    pub(crate) fn page_refs(
        &self,
        iova: u64,
        len: usize,
        f: impl FnMut(PageRef, usize, usize) -> bool,
    ) -> bool {
        let Some(start) = iova.checked_sub(self.iova) else {
            return false;
        };
        match &self.kind {
            MrKind::Dma(k) => k.page_refs(iova, len, f),
            MrKind::User(p) => p.page_refs(start, len, f),
            MrKind::FastReg(p) => p.page_refs(start, len, f),
        }
    }

    /// Run `f` on the 8-byte word at `iova` (8-byte aligned, checked in the
    /// region by the caller) as an atomic.
    pub(crate) fn atomic<R>(&self, iova: u64, f: impl FnOnce(&AtomicU64) -> R) -> Option<R> {
        if iova % 8 != 0 {
            return None;
        }
        let start = iova.checked_sub(self.iova)?;
        match &self.kind {
            MrKind::Dma(k) => k.atomic(iova, f),
            MrKind::User(p) => p.atomic(start, f),
            MrKind::FastReg(p) => p.atomic(start, f),
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

/// Why a remote access was refused (iWARP's TERMINATE names it; RoCE NAKs
/// them all alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// No valid region or window has this key.
    Key,
    /// The key belongs to another PD (or a type 2 window to another QP).
    Stream,
    /// The access rights do not include the access.
    Rights,
    /// `va..va+len` is not inside it.
    Bounds,
}

/// Run `f(region, iova)` on the memory an rkey names for `va..va+len`, after
/// checking the key, the PD (or the QP a type 2 window is bound to), the
/// bounds and that the access rights include `need`.
pub(crate) fn with_remote<R>(
    v: &DeviceVerbs,
    who: Requestor,
    rkey: u32,
    va: u64,
    len: u64,
    need: u32,
    f: impl FnOnce(&MrState, u64) -> R,
) -> Result<R, Denied> {
    let index = rkey >> 8;
    if index < MW_INDEX_BASE {
        let mr = v.mrs.get(index).ok_or(Denied::Key)?;
        let m = mr.inner.lock();
        if !m.valid || m.key != rkey {
            return Err(Denied::Key);
        }
        if mr.pd() != who.pd {
            return Err(Denied::Stream);
        }
        if m.access & need != need {
            return Err(Denied::Rights);
        }
        if !inside(va, len, m.iova, m.length) {
            return Err(Denied::Bounds);
        }
        return Ok(f(&m, va));
    }
    let mw = v.mws.get(index).ok_or(Denied::Key)?;
    let ms = mw.inner.lock();
    let bnd = ms.binding.ok_or(Denied::Key)?;
    if ms.rkey != rkey {
        return Err(Denied::Key);
    }
    let ours = if mw.is_type2() {
        bnd.qpn == who.qpn
    } else {
        mw.pd() == who.pd
    };
    if !ours {
        return Err(Denied::Stream);
    }
    if bnd.access & need != need {
        return Err(Denied::Rights);
    }
    let addr = if bnd.access & ZERO_BASED != 0 {
        bnd.addr.checked_add(va).ok_or(Denied::Bounds)?
    } else {
        va
    };
    if !inside(addr, len, bnd.addr, bnd.length) {
        return Err(Denied::Bounds);
    }
    // The MR must still be the one bound (same key, same PD): its table
    // index may have been reused by another MR since.
    let mr = v.mrs.get(bnd.mr_index).ok_or(Denied::Key)?;
    if mr.pd() != mw.pd() {
        return Err(Denied::Key);
    }
    let m = mr.inner.lock();
    if !m.valid || m.key != bnd.mr_key {
        return Err(Denied::Key);
    }
    if !inside(addr, len, m.iova, m.length) {
        return Err(Denied::Bounds);
    }
    Ok(f(&m, addr))
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
        if !matches!(m.kind, MrKind::FastReg(_)) || m.key != rkey || mr.pd() != who.pd {
            return false;
        }
        m.valid = false;
        true
    }
}

/// Replace the word by `f` of it, atomically (a compare-and-swap loop: for
/// the masked operations of RFC 7306, which no CPU instruction does); the
/// value it held.
pub(crate) fn atomic_update(a: &AtomicU64, f: impl Fn(u64) -> u64) -> u64 {
    let mut cur = a.load(Ordering::SeqCst);
    loop {
        match a.compare_exchange(cur, f(cur), Ordering::SeqCst, Ordering::SeqCst) {
            Ok(v) => return v,
            Err(v) => cur = v,
        }
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
