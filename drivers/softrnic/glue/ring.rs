// SPDX-License-Identifier: GPL-2.0
//! Ring memory: the header-plus-slots layout of `abi.rs`, in vmalloc memory
//! that is either private to the kernel (kernel consumers' queues) or mapped
//! into a user context through an rdma_user_mmap entry.
//!
//! User rings are shared with an untrusted process: the header words are read
//! and written only as atomics, slots are copied in and out whole, and every
//! index is masked, so nothing user space writes can make the kernel touch
//! memory outside the ring.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use kernel::prelude::*;

use super::bindings as b;
use crate::abi::{self, QueueHeader, QueueInfo};

/// Plain data that may be copied to and from a ring slot: every bit pattern
/// is a valid value (integers and arrays of integers only).
///
/// # Safety
/// Implement only for `#[repr(C)]` types made of integers, without padding.
pub(crate) unsafe trait Pod: Copy {}
// SAFETY: all four are repr(C) integer-only ABI structs without padding.
unsafe impl Pod for abi::SendWqe {}
// SAFETY: as above.
unsafe impl Pod for abi::RecvWqe {}
// SAFETY: as above.
unsafe impl Pod for abi::Sge {}
// SAFETY: as above.
unsafe impl Pod for abi::Cqe {}

enum Owner {
    /// vzalloc memory, freed with the ring.
    Kernel,
    /// vmalloc_user memory owned by the mmap entry; removing the entry frees
    /// it once no mmap() call is using it (user mappings hold page refs).
    User(NonNull<b::softrnic_mmap_entry>, u64),
}

pub(crate) struct Ring {
    base: NonNull<u8>,
    len: usize,
    slots: u32,
    slot_bytes: u32,
    owner: Owner,
}

// SAFETY: the ring memory is plain memory reachable from any thread; shared
// words are accessed atomically and callers serialise slot access per side.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

/// An opaque user context pointer, as ib_core hands it to the verbs.
#[derive(Clone, Copy)]
pub(crate) struct UserCtx(pub(super) NonNull<b::ib_ucontext>);

impl Ring {
    /// A zeroed ring of `slots` (a power of two) slots of `slot_bytes`;
    /// mappable through `uctx` when given.
    pub(crate) fn new(uctx: Option<UserCtx>, slots: u32, slot_bytes: u32) -> Result<Ring> {
        if !slots.is_power_of_two() || !slot_bytes.is_power_of_two() {
            return Err(EINVAL);
        }
        let len = (slots as usize)
            .checked_mul(slot_bytes as usize)
            .and_then(|n| n.checked_add(abi::QUEUE_HEADER_BYTES + 4095))
            .ok_or(ENOMEM)?
            & !4095;
        match uctx {
            None => {
                // SAFETY: plain allocation; NULL on failure.
                let p = unsafe { b::softrnic_vzalloc(len) };
                let base = NonNull::new(p.cast::<u8>()).ok_or(ENOMEM)?;
                Ok(Ring {
                    base,
                    len,
                    slots,
                    slot_bytes,
                    owner: Owner::Kernel,
                })
            }
            Some(ctx) => {
                // SAFETY: plain allocation (zeroed, mappable); NULL on failure.
                let p = unsafe { b::softrnic_vmalloc_user(len) };
                let base = NonNull::new(p.cast::<u8>()).ok_or(ENOMEM)?;
                let mut key = 0u64;
                // SAFETY: `ctx` is the live context of the verb being served;
                // `p` is `len` bytes of vmalloc_user memory.
                let entry = unsafe { b::softrnic_mmap_entry_new(ctx.0.as_ptr(), p, len, &mut key) };
                let Some(entry) = NonNull::new(entry) else {
                    // SAFETY: the entry was not created, so we still own `p`.
                    unsafe { b::softrnic_vfree(p) };
                    return Err(ENOMEM);
                };
                Ok(Ring {
                    base,
                    len,
                    slots,
                    slot_bytes,
                    owner: Owner::User(entry, key),
                })
            }
        }
    }

    pub(crate) fn slots(&self) -> u32 {
        self.slots
    }

    /// Where user space maps this ring (zero for a kernel ring).
    pub(crate) fn info(&self) -> QueueInfo {
        let key = match self.owner {
            Owner::User(_, key) => key,
            Owner::Kernel => 0,
        };
        QueueInfo {
            mmap_key: key,
            mmap_len: self.len as u64,
            slots: self.slots,
            slot_bytes: self.slot_bytes,
        }
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: `offset` is the offset of a u32 field of QueueHeader (callers
        // use offset_of!), inside the ring, 4-byte aligned (page-aligned base).
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    pub(crate) fn producer(&self) -> u32 {
        self.word(core::mem::offset_of!(QueueHeader, producer))
            .load(Ordering::Acquire)
    }

    pub(crate) fn set_producer(&self, v: u32) {
        self.word(core::mem::offset_of!(QueueHeader, producer))
            .store(v, Ordering::Release)
    }

    pub(crate) fn consumer(&self) -> u32 {
        self.word(core::mem::offset_of!(QueueHeader, consumer))
            .load(Ordering::Acquire)
    }

    pub(crate) fn set_consumer(&self, v: u32) {
        self.word(core::mem::offset_of!(QueueHeader, consumer))
            .store(v, Ordering::Release)
    }

    pub(crate) fn arm_seq(&self) -> u32 {
        self.word(core::mem::offset_of!(QueueHeader, arm_seq))
            .load(Ordering::Acquire)
    }

    pub(crate) fn arm_flags(&self) -> u32 {
        self.word(core::mem::offset_of!(QueueHeader, arm_flags))
            .load(Ordering::Relaxed)
    }

    /// Sets `bits` in the kernel's flags; returns the flags before.
    pub(crate) fn set_kernel_flags(&self, bits: u32) -> u32 {
        self.word(core::mem::offset_of!(QueueHeader, kernel_flags))
            .fetch_or(bits, Ordering::Release)
    }

    /// Write a WQE into slot `index`: its header, then its Sges or inline
    /// bytes; `None` if they do not fit the slot.
    pub(crate) fn write_wqe<H: Pod>(
        &self,
        index: u32,
        header: &H,
        sges: &[abi::Sge],
        inline: &[u8],
    ) -> Option<()> {
        let at = size_of::<H>();
        self.write(index, 0, header)?;
        for (i, sge) in sges.iter().enumerate() {
            self.write(index, at + i * size_of::<abi::Sge>(), sge)?;
        }
        if !inline.is_empty() {
            self.write_bytes(index, at, inline)?;
        }
        Some(())
    }

    /// Copy slot `from` of this ring into slot `at` of `to` (as many bytes
    /// as the smaller slot holds): moving entries to a resized ring.
    pub(crate) fn copy_slot(&self, from: u32, to: &Ring, at: u32) -> Option<()> {
        let n = core::cmp::min(self.slot_bytes, to.slot_bytes) as usize;
        let src = self.slot(from, 0, n)?;
        let dst = to.slot(at, 0, n)?;
        // SAFETY: both ranges are in bounds (see `slot`) and in two distinct
        // rings (`to` is borrowed separately from `self`).
        unsafe { core::ptr::copy_nonoverlapping(src, dst, n) };
        Some(())
    }

    /// Carry a CQ's arm words over to its resized ring.  These words belong
    /// to user space; the kernel writes them only while the provider holds
    /// its CQ lock around the resize command, so nothing races.
    pub(crate) fn copy_arm_from(&self, old: &Ring) {
        let seq = core::mem::offset_of!(QueueHeader, arm_seq);
        let flags = core::mem::offset_of!(QueueHeader, arm_flags);
        self.word(flags).store(old.arm_flags(), Ordering::Relaxed);
        self.word(seq).store(old.arm_seq(), Ordering::Release);
    }

    pub(crate) fn clear_kernel_flags(&self, bits: u32) {
        self.word(core::mem::offset_of!(QueueHeader, kernel_flags))
            .fetch_and(!bits, Ordering::Release);
    }

    fn slot(&self, index: u32, offset: usize, size: usize) -> Option<*mut u8> {
        if offset.checked_add(size)? > self.slot_bytes as usize {
            return None;
        }
        let at = abi::slot_offset(index, self.slots, self.slot_bytes) + offset;
        // SAFETY: the index is masked by slot_offset and offset+size fits the
        // slot, so [at, at+size) lies inside the `len`-byte ring.
        Some(unsafe { self.base.as_ptr().add(at) })
    }

    /// A copy of the `T` at `offset` in slot `index`; `None` if it would
    /// cross the slot's end.
    pub(crate) fn read<T: Pod>(&self, index: u32, offset: usize) -> Option<T> {
        let p = self.slot(index, offset, size_of::<T>())?;
        // SAFETY: in-bounds (see `slot`); any bit pattern is a valid T (Pod);
        // an unaligned read because user space chooses nothing about the
        // layout but offsets may still be odd for inline data.
        Some(unsafe { p.cast::<T>().read_unaligned() })
    }

    /// Store `v` at `offset` in slot `index`.
    pub(crate) fn write<T: Pod>(&self, index: u32, offset: usize, v: &T) -> Option<()> {
        let p = self.slot(index, offset, size_of::<T>())?;
        // SAFETY: in-bounds (see `slot`).
        unsafe { p.cast::<T>().write_unaligned(*v) };
        Some(())
    }

    /// Copy raw bytes from `offset` in slot `index` (inline data).
    pub(crate) fn read_bytes(&self, index: u32, offset: usize, dst: &mut [u8]) -> Option<()> {
        let p = self.slot(index, offset, dst.len())?;
        // SAFETY: in-bounds source; `dst` is a distinct buffer.
        unsafe { core::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) };
        Some(())
    }

    /// Store raw bytes at `offset` in slot `index` (inline data).
    pub(crate) fn write_bytes(&self, index: u32, offset: usize, data: &[u8]) -> Option<()> {
        let p = self.slot(index, offset, data.len())?;
        // SAFETY: in-bounds destination; `data` is a distinct buffer.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Some(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        match self.owner {
            // SAFETY: vzalloc memory owned by this ring alone.
            Owner::Kernel => unsafe { b::softrnic_vfree(self.base.as_ptr().cast()) },
            // SAFETY: the entry is live and ours; after removal the kernel no
            // longer touches the memory (we are being dropped) and the entry
            // frees it in mmap_free.
            Owner::User(entry, _) => unsafe { b::softrnic_mmap_entry_remove(entry.as_ptr()) },
        }
    }
}
