// SPDX-License-Identifier: GPL-2.0
//! Key tables: xarrays from a number (QP number, MR/MW key index, AH number)
//! to an object, with O(1) lookups that are safe against a concurrent destroy.
//!
//! An object found by key (`Keyed`) owns a handle (`Ref`): the table holds
//! the handle, a lookup takes a reference on it under RCU, with no lock, only
//! while the object is alive, and destroy first removes the entry, then
//! drains the references (`Ref::drain`) before the object's memory goes.
//! Other tables (AHs) are read by copy under the table's lock.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use kernel::prelude::*;

use super::bindings as b;
use super::check;

/// The handle of a table object: its liveness count (see the module).
#[repr(transparent)]
pub(crate) struct Ref(*mut b::softrnic_handle);

// SAFETY: the handle is used only through the kernel's thread-safe
// refcount, completion and RCU APIs; the pointer is written once, in `init`.
unsafe impl Sync for Ref {}
// SAFETY: as above.
unsafe impl Send for Ref {}

impl Ref {
    /// Allocate the handle, holding one reference (the creator's).
    ///
    /// # Safety
    /// `this` points to writable memory for a `Ref` that nothing else uses
    /// yet; once this succeeds, `drain` must run exactly once.
    pub(crate) unsafe fn init(this: *mut Ref) -> Result {
        // SAFETY: allocates a handle (may sleep: callers are create verbs).
        let h = unsafe { b::softrnic_handle_new() };
        if h.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: per the contract.
        unsafe { this.write(Ref(h)) };
        Ok(())
    }

    /// Drop the creator's reference, wait for every lookup to let go, then
    /// free the handle (after an RCU grace period).
    ///
    /// # Safety
    /// `init` succeeded; the object is out of its table (or never went
    /// in); called once.  May sleep.
    pub(crate) unsafe fn drain(&self) {
        // SAFETY: per the contract.
        unsafe { b::softrnic_handle_drain(self.handle()) }
    }

    fn handle(&self) -> *mut b::softrnic_handle {
        self.0
    }
}

/// An object that lives in a key table.
///
/// # Safety
/// `REF_OFFSET` is the byte offset of a `Ref` inside `Self`, initialised
/// before the object is inserted into a table and drained before it is freed.
pub(crate) unsafe trait Keyed {
    const REF_OFFSET: usize;
}

/// An object whose table entry is the object itself (no handle), read and
/// written by copy under the table's lock.
///
/// # Safety
/// `Self` is not `Keyed`: a keyed table's entries are handles, which
/// `read` and `write` would take for the object.
pub(crate) unsafe trait Plain {}

/// An xarray of objects of type `T`, embedded in the device.
#[repr(C)]
pub(crate) struct Table<T> {
    xa: UnsafeCell<b::xarray>,
    /// The cyclic allocation cursor; written only under the xarray's lock.
    next: UnsafeCell<u32>,
    _t: core::marker::PhantomData<T>,
}

// SAFETY: the xarray does its own locking; entries are Sync objects.
unsafe impl<T: Sync> Sync for Table<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Send for Table<T> {}

/// A counted reference to a table object; dropped → reference released.
pub(crate) struct Found<T: Keyed>(NonNull<T>, NonNull<b::softrnic_handle>);

impl<T: Keyed> core::ops::Deref for Found<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the reference taken by `Table::get` keeps the object alive.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Keyed> Drop for Found<T> {
    fn drop(&mut self) {
        // SAFETY: balances the reference `Table::get` took on this handle,
        // which that reference keeps alive.
        unsafe { b::softrnic_handle_put(self.1.as_ptr()) }
    }
}

impl<T> Table<T> {
    /// # Safety
    /// `this` points to writable, pinned memory for a table nothing uses yet.
    pub(crate) unsafe fn init(this: *mut Table<T>) {
        // SAFETY: per the contract; `xa` is the first field (repr(C)).
        unsafe {
            b::softrnic_table_init(this.cast());
            (*this).next = UnsafeCell::new(0);
        }
    }

    /// Destroy an empty table.
    ///
    /// # Safety
    /// No other user of the table remains.
    pub(crate) unsafe fn destroy(&self) {
        // SAFETY: per the contract.
        unsafe { b::softrnic_table_destroy(self.xa.get()) }
    }

    /// Reserve a free index in `min..=max` (cyclic, so a freed number is
    /// not reused at once).  Lookups find nothing there until `publish`.
    /// `atomic`: the caller may not sleep.
    pub(crate) fn reserve(&self, min: u32, max: u32, atomic: bool) -> Result<u32> {
        let mut index = 0u32;
        // SAFETY: initialised xarray; the cursor is only touched under its lock.
        check(unsafe {
            b::softrnic_table_reserve(self.xa.get(), &mut index, min, max, self.next.get(), atomic)
        })
        .map_err(|e| if e == EBUSY { ENOMEM } else { e })?;
        Ok(index)
    }

    /// Reserve exactly `index` (EBUSY if it is taken).
    pub(crate) fn reserve_at(&self, index: u32) -> Result {
        // SAFETY: initialised xarray.
        check(unsafe { b::softrnic_table_reserve_at(self.xa.get(), index) })
    }

    /// Remove the object (or reservation) at `index`.
    pub(crate) fn erase(&self, index: u32) {
        // SAFETY: initialised xarray.
        unsafe { b::softrnic_table_erase(self.xa.get(), index) }
    }
}

impl<T: Plain> Table<T> {
    /// Make `obj` findable at the `index` reserved for it, for `read` and
    /// `write`.
    ///
    /// # Safety
    /// `obj` is fully initialised and stays valid until it is erased from
    /// the table.
    pub(crate) unsafe fn publish_plain(&self, index: u32, obj: *const T) {
        // SAFETY: initialised xarray; the slot was reserved, so storing
        // needs no allocation.
        unsafe { b::softrnic_table_publish(self.xa.get(), index, obj as *mut _) }
    }

    /// A copy of the `V` found `offset` bytes into the object at `index`,
    /// taken under the table lock (for objects without a `Ref`, whose destroy
    /// erases them under the same lock).
    ///
    /// # Safety
    /// `offset` is the offset of a field of type `V` in `T`.
    pub(crate) unsafe fn read<V: Copy>(&self, index: u32, offset: usize) -> Option<V> {
        let mut out = core::mem::MaybeUninit::<V>::uninit();
        // SAFETY: initialised xarray; the shim copies size_of::<V>() bytes
        // from a live entry into `out`, or nothing.
        let found = unsafe {
            b::softrnic_table_copy(
                self.xa.get(),
                index,
                out.as_mut_ptr().cast(),
                offset,
                size_of::<V>(),
            )
        };
        // SAFETY: `found` means all bytes of `out` were written from a `V`.
        found.then(|| unsafe { out.assume_init() })
    }

    /// Overwrite the `V` found `offset` bytes into the object at `index`,
    /// under the table lock (the counterpart of `read`).
    ///
    /// # Safety
    /// `offset` is the offset of a field of type `V` in `T`.
    pub(crate) unsafe fn write<V: Copy>(&self, index: u32, offset: usize, v: &V) -> Result {
        // SAFETY: initialised xarray; the shim copies into a live entry.
        let found = unsafe {
            b::softrnic_table_write(
                self.xa.get(),
                index,
                core::ptr::from_ref(v).cast(),
                offset,
                size_of::<V>(),
            )
        };
        if found {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }
}

impl<T: Keyed> Table<T> {
    /// Make `obj` findable at the `index` reserved for it, through its
    /// handle.
    ///
    /// # Safety
    /// `obj` is fully initialised (its `Ref` too) and stays valid until it
    /// is erased from the table and drained.
    pub(crate) unsafe fn publish(&self, index: u32, obj: *const T) {
        // SAFETY: REF_OFFSET locates the object's initialised Ref (trait
        // contract).
        let r = unsafe { &*obj.cast::<u8>().add(T::REF_OFFSET).cast::<Ref>() };
        // SAFETY: initialised xarray; the slot was reserved (no allocation);
        // the handle and object are valid per the contract.
        unsafe { b::softrnic_table_publish_handle(self.xa.get(), index, r.handle(), obj as *mut _) }
    }

    /// The live object at `index`, with a reference held.
    pub(crate) fn get(&self, index: u32) -> Option<Found<T>> {
        let mut h = core::ptr::null_mut();
        // SAFETY: initialised xarray whose entries are handles of `T`s
        // (`publish`); the shim takes a reference or returns NULL.
        let p = unsafe { b::softrnic_table_get(self.xa.get(), index, &mut h) };
        Some(Found(NonNull::new(p.cast::<T>())?, NonNull::new(h)?))
    }
}
