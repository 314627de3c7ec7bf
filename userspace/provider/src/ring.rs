//! The rings shared with the kernel (see `softrnic_abi`'s "Queues"): mapping
//! a ring from its `QueueInfo`, the header counters as atomics, slot
//! addressing, and the per-queue lock.

use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use core::ops::{Deref, DerefMut};
use core::ptr::{addr_of_mut, null_mut};
use core::sync::atomic::{AtomicU32, Ordering};

use softrnic_abi as abi;

use crate::errno;

/// One mapped ring: `QUEUE_HEADER_BYTES` of header, then `slots` slots.
pub struct Ring {
    base: *mut u8,
    len: usize,
    slots: u32,
    slot_bytes: u32,
}

impl Ring {
    /// No ring (a QP on an SRQ has no receive ring; a queue whose remap
    /// failed has none either).
    pub const NONE: Ring = Ring {
        base: null_mut(),
        len: 0,
        slots: 0,
        slot_bytes: 0,
    };

    /// Maps the ring `info` describes on the uverbs file `fd`, after checking
    /// its geometry (the provider does not trust the numbers blindly either:
    /// a wrong size would let slot addressing run past the mapping).
    /// `min_slot` is the smallest slot this kind of queue can use.
    ///
    /// # Safety
    /// `fd` is the context's uverbs command file.
    pub unsafe fn map(fd: c_int, info: &abi::QueueInfo, min_slot: usize) -> Result<Ring, c_int> {
        let geometry_ok = info.slots.is_power_of_two()
            && info.slot_bytes.is_power_of_two()
            && info.slot_bytes as usize >= abi::MIN_SLOT_BYTES.max(min_slot);
        let needed = (info.slots as usize)
            .checked_mul(info.slot_bytes as usize)
            .and_then(|b| b.checked_add(abi::QUEUE_HEADER_BYTES));
        let len = usize::try_from(info.mmap_len).map_err(|_| libc::EINVAL)?;
        let off = libc::off_t::try_from(info.mmap_key).map_err(|_| libc::EINVAL)?;
        if !geometry_ok || needed.is_none_or(|n| n > len) {
            return Err(libc::EINVAL);
        }
        // SAFETY: a fresh shared mapping of the kernel's ring; nothing else
        // in this process refers to that address range.
        let base = unsafe {
            libc::mmap(
                null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                off,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(errno());
        }
        Ok(Ring {
            base: base.cast(),
            len,
            slots: info.slots,
            slot_bytes: info.slot_bytes,
        })
    }

    pub fn is_mapped(&self) -> bool {
        !self.base.is_null()
    }

    /// The header's address (null when unmapped), for `Ring::idle_at`.
    pub fn header_addr(&self) -> *mut u8 {
        self.base
    }

    /// Whether the ring whose header is at `base` holds nothing and has
    /// none of `flags` set, read without the queue's lock.  Consumer, then
    /// producer: both only move forward, the consumer never past the
    /// producer, so equal values mean the ring was empty when the producer
    /// was read, whatever a thread holding the lock did meanwhile.
    ///
    /// # Safety
    /// `base` is the header of a ring that stays mapped during the call.
    pub unsafe fn idle_at(base: *mut u8, flags: u32) -> bool {
        // SAFETY: per the caller's promise.
        let word = |offset: usize| unsafe { header_word(base, offset) };
        let cons = word(offset_of!(abi::QueueHeader, consumer)).load(Ordering::Acquire);
        let prod = word(offset_of!(abi::QueueHeader, producer)).load(Ordering::Acquire);
        cons == prod
            && word(offset_of!(abi::QueueHeader, kernel_flags)).load(Ordering::Acquire) & flags == 0
    }

    /// Bytes of one slot (0 when unmapped).
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes as usize
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(self.is_mapped());
        // SAFETY: the header is mapped for as long as `self` is.
        unsafe { header_word(self.base, offset) }
    }

    pub fn producer(&self) -> &AtomicU32 {
        self.word(offset_of!(abi::QueueHeader, producer))
    }

    pub fn consumer(&self) -> &AtomicU32 {
        self.word(offset_of!(abi::QueueHeader, consumer))
    }

    pub fn arm_seq(&self) -> &AtomicU32 {
        self.word(offset_of!(abi::QueueHeader, arm_seq))
    }

    pub fn arm_flags(&self) -> &AtomicU32 {
        self.word(offset_of!(abi::QueueHeader, arm_flags))
    }

    pub fn kernel_flags(&self) -> &AtomicU32 {
        self.word(offset_of!(abi::QueueHeader, kernel_flags))
    }

    /// Start of the slot for the free-running counter value `index`.
    pub fn slot(&self, index: u32) -> *mut u8 {
        debug_assert!(self.is_mapped());
        // SAFETY: the offset is masked to a slot inside the mapping (map
        // checked slots * slot_bytes + header <= len).
        unsafe {
            self.base
                .add(abi::slot_offset(index, self.slots, self.slot_bytes))
        }
    }

    /// Whether `prod` and `cons` can be a producer and consumer of this ring
    /// (at most `slots` apart).  The header is shared memory that the
    /// application can scribble over; a loop between two corrupt indices
    /// would otherwise run for up to 2^32 slots.
    pub fn span_ok(&self, prod: u32, cons: u32) -> bool {
        prod.wrapping_sub(cons) <= self.slots
    }

    /// Whether a work-queue producer at `prod` may post one more WQE given
    /// the consumer `cons`.  At most `slots - 1` are outstanding: the ring
    /// could hold `slots`, but `slots - 1` is the max_wr the kernel reports
    /// (slots_for keeps one spare), and users size their CQs by max_wr.
    pub fn has_room(&self, prod: u32, cons: u32) -> bool {
        prod.wrapping_sub(cons) < self.slots.saturating_sub(1)
    }

    /// Whether slot `prod` is free, looking at the kernel's consumer again
    /// (into `cons`) only when the cached value says the ring is full.
    /// Acquire: the kernel has copied a slot out before it moved past it.
    pub fn room_for(&self, prod: u32, cons: &mut u32) -> bool {
        if self.has_room(prod, *cons) {
            return true;
        }
        *cons = self.consumer().load(Ordering::Acquire);
        self.has_room(prod, *cons)
    }
}

/// The u32 field at `offset` of the ring header at `base`.
///
/// # Safety
/// `base` is the header of a ring that stays mapped for `'a`, and `offset`
/// is that of one of its u32 fields.
unsafe fn header_word<'a>(base: *mut u8, offset: usize) -> &'a AtomicU32 {
    // SAFETY: per the caller's promise; the u32 fields are 4-byte aligned,
    // and every access to them (here and in the kernel) is atomic.
    unsafe { AtomicU32::from_ptr(base.add(offset).cast()) }
}

impl Drop for Ring {
    /// Unmaps the ring: nothing points into it once its owner lets go.
    fn drop(&mut self) {
        if self.is_mapped() {
            // SAFETY: base/len describe a mapping made by `map`, and no
            // pointer derived from it outlives the Ring (slot pointers are
            // used only under the queue's lock, which owns the Ring).
            unsafe { libc::munmap(self.base.cast(), self.len) };
        }
    }
}

/// Entries of type `E` that fit after a `H` header in a slot of `slot_bytes`.
pub fn entries_after<H, E>(slot_bytes: usize) -> usize {
    slot_bytes.saturating_sub(size_of::<H>()) / size_of::<E>()
}

/// A queue's provider-side state behind a pthread spinlock (each ring
/// counter has one writer per side; the lock makes the threads of this
/// process one writer).  Lives inside calloc'ed objects, so it is
/// initialised in place.
pub struct Locked<T> {
    lock: UnsafeCell<libc::pthread_spinlock_t>,
    data: UnsafeCell<T>,
}

impl<T> Locked<T> {
    /// # Safety
    /// `this` points to writable, unused memory for a `Locked<T>`.
    pub unsafe fn init(this: *mut Self, value: T) {
        // SAFETY: per the caller's promise; the lock is process-private.
        unsafe {
            libc::pthread_spin_init(
                UnsafeCell::raw_get(addr_of_mut!((*this).lock)),
                libc::PTHREAD_PROCESS_PRIVATE,
            );
            UnsafeCell::raw_get(addr_of_mut!((*this).data)).write(value);
        }
    }

    /// # Safety
    /// Initialised, and nobody holds or waits for the lock (the object is
    /// being freed); the value is dropped.
    pub unsafe fn destroy(this: *mut Self) {
        // SAFETY: per the caller's promise.
        unsafe {
            libc::pthread_spin_destroy((*this).lock.get());
            (*this).data.get().drop_in_place();
        }
    }

    pub fn lock(&self) -> Guard<'_, T> {
        // SAFETY: initialised when its object was created.
        unsafe { self.raw_lock() };
        Guard(self)
    }

    /// Takes the lock without a guard (the extended CQ poll API holds it
    /// from start_poll to end_poll, across calls).
    ///
    /// # Safety
    /// Initialised; the caller releases it with `raw_unlock`.
    pub unsafe fn raw_lock(&self) {
        // SAFETY: per the caller's promise.
        unsafe { libc::pthread_spin_lock(self.lock.get()) };
    }

    /// # Safety
    /// The calling thread holds the lock (taken with `raw_lock`).
    pub unsafe fn raw_unlock(&self) {
        // SAFETY: per the caller's promise.
        unsafe { libc::pthread_spin_unlock(self.lock.get()) };
    }

    /// The value, for a thread that took the lock with `raw_lock`.
    ///
    /// # Safety
    /// The calling thread holds the lock, and uses the reference only while
    /// it does.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn locked_data(&self) -> &mut T {
        // SAFETY: the lock gives exclusive access.
        unsafe { &mut *self.data.get() }
    }
}

pub struct Guard<'a, T>(&'a Locked<T>);

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while its thread holds the lock.
        unsafe { &*self.0.data.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in deref; the lock makes the access exclusive.
        unsafe { &mut *self.0.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard exists only while its thread holds the lock.
        unsafe { self.0.raw_unlock() }
    }
}

/// A ring on a memfd instead of the uverbs file, for unit tests: the same
/// mapping code, with the test playing the kernel's side.
#[cfg(test)]
pub fn test_ring(slots: u32, slot_bytes: u32, min_slot: usize) -> Ring {
    let info = abi::QueueInfo {
        mmap_key: 0,
        mmap_len: abi::ring_bytes(slots, slot_bytes) as u64,
        slots,
        slot_bytes,
    };
    // SAFETY: plain syscalls on a new file descriptor.
    unsafe {
        let fd = libc::memfd_create(c"softrnic-test-ring".as_ptr(), 0);
        assert!(fd >= 0);
        assert_eq!(libc::ftruncate(fd, info.mmap_len as libc::off_t), 0);
        let ring = Ring::map(fd, &info, min_slot).expect("map test ring");
        libc::close(fd);
        ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memfd_map(info: &abi::QueueInfo, min_slot: usize) -> Result<Ring, c_int> {
        // SAFETY: plain syscalls on a new file descriptor.
        unsafe {
            let fd = libc::memfd_create(c"softrnic-test-ring".as_ptr(), 0);
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, 1 << 20), 0);
            let r = Ring::map(fd, info, min_slot);
            libc::close(fd);
            r
        }
    }

    #[test]
    fn map_checks_geometry() {
        let good = abi::QueueInfo {
            mmap_key: 0,
            mmap_len: abi::ring_bytes(8, 64) as u64,
            slots: 8,
            slot_bytes: 64,
        };
        assert!(memfd_map(&good, 64).is_ok());
        let bad = [
            abi::QueueInfo { slots: 6, ..good },
            abi::QueueInfo { slots: 0, ..good },
            abi::QueueInfo {
                slot_bytes: 96,
                ..good
            },
            abi::QueueInfo {
                slot_bytes: 32,
                ..good
            },
            abi::QueueInfo {
                mmap_len: 256 + 8 * 64 - 1,
                ..good
            },
            abi::QueueInfo {
                mmap_key: u64::MAX,
                ..good
            },
        ];
        for info in bad {
            assert_eq!(memfd_map(&info, 64).err(), Some(libc::EINVAL), "{info:?}");
        }
        // A send ring needs room for the WQE header.
        assert_eq!(memfd_map(&good, 104).err(), Some(libc::EINVAL));
    }

    #[test]
    fn slots_wrap_and_room() {
        let ring = test_ring(4, 64, 64);
        assert_eq!(ring.slot(0), ring.slot(4));
        assert_eq!(ring.slot(u32::MAX), ring.slot(3));
        // SAFETY: both pointers are into the same mapping.
        let d = unsafe { ring.slot(1).offset_from(ring.slot(0)) };
        assert_eq!(d, 64);
        assert!(ring.has_room(2, 0));
        assert!(!ring.has_room(3, 0));
        assert!(ring.has_room(0, u32::MAX - 1));
        assert!(!ring.has_room(1, u32::MAX - 1));
    }
}
