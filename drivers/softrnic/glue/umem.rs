// SPDX-License-Identifier: GPL-2.0
//! Pinned user memory (`struct ib_umem`, SVC-RNICPI's "pin"): ib_core checks
//! the range (overflow, mapping, write permission) and pins the pages.

use core::ptr::NonNull;

use kernel::prelude::*;

use super::bindings as b;

pub(crate) struct Umem(NonNull<b::ib_umem>);

// SAFETY: an ib_umem is plain pinned-memory bookkeeping, usable from any thread.
unsafe impl Send for Umem {}
// SAFETY: as above; it is only read after creation.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pin `len` bytes at user address `addr` of the current process with
    /// `access` (IB_ACCESS_* flags; write access pins for writing).
    pub(crate) fn get(dev: *mut b::ib_device, addr: u64, len: u64, access: u32) -> Result<Umem> {
        let mut err = 0;
        // SAFETY: `dev` is a live device of ours; the shim returns a umem or
        // NULL with the errno in `err`.
        let p = unsafe { b::softrnic_umem_get(dev, addr, len, access as i32, &mut err) };
        NonNull::new(p)
            .map(Umem)
            .ok_or_else(|| Error::from_errno(if err < 0 { err } else { EFAULT.to_errno() }))
    }
}

impl Umem {
    pub(crate) fn as_ptr(&self) -> *mut b::ib_umem {
        self.0.as_ptr()
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: we own the umem; releasing unpins the pages (may sleep:
        // umems are dropped only in process context).
        unsafe { b::ib_umem_release(self.0.as_ptr()) }
    }
}
