// SPDX-License-Identifier: GPL-2.0
//! References on pages, for bytes a TCP socket sends by reference
//! (`MSG_SPLICE_PAGES`): a `PageRef` holds one reference on a page
//! (`get_page` / `put_page`), so the page outlives whatever made it
//! reachable (a memory region's pin or registration, our transmit buffer);
//! a `Frag` is bytes within one page.  The socket takes references of its
//! own on what it keeps.

use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use kernel::page::{Page, PAGE_SIZE};

use super::bindings as b;
use super::net::PageMap;

/// One reference on a page.
pub(crate) struct PageRef(NonNull<b::page>);

// SAFETY: a page reference is a count in the page, dropped by `put_page`,
// which may run in any context and on any CPU.
unsafe impl Send for PageRef {}
// SAFETY: `&PageRef` only reads the pointer or takes another reference.
unsafe impl Sync for PageRef {}

impl PageRef {
    /// The page `p` owns, with `p`'s reference (its last `put_page` frees
    /// it, as dropping `p` would have).
    pub(crate) fn own(p: Page) -> PageRef {
        let p = ManuallyDrop::new(p);
        // SAFETY: a `Page` always points at a page (never null).
        PageRef(unsafe { NonNull::new_unchecked(p.as_ptr().cast::<b::page>()) })
    }

    /// A reference of our own on `page`, if the socket may send it by
    /// reference (not slab memory, `sendpage_ok`).
    ///
    /// # Safety
    /// `page` is a `struct page *` the caller holds (a pin, a reference)
    /// for the call.
    pub(crate) unsafe fn sendable(page: usize) -> Option<PageRef> {
        // SAFETY: a held page, per the contract.
        NonNull::new(unsafe { b::softrnic_page_get_sendable(page as *mut b::page) }).map(PageRef)
    }

    /// A reference on the page of the kernel address `addr`, if it is in
    /// the linear map and the socket may send it by reference.
    ///
    /// # Safety
    /// `addr` is in memory its owner keeps for the call (a kernel
    /// consumer's registered buffer).
    pub(crate) unsafe fn sendable_virt(addr: usize) -> Option<PageRef> {
        // SAFETY: the shim checks the address is in the linear map; the
        // page is held per the contract.
        NonNull::new(unsafe { b::softrnic_virt_page_get_sendable(addr as kernel::ffi::c_ulong) })
            .map(PageRef)
    }

    /// Another reference on the same page.
    pub(crate) fn another(&self) -> PageRef {
        // SAFETY: we hold a reference, so the page is live.
        unsafe { b::softrnic_page_get(self.0.as_ptr()) };
        PageRef(self.0)
    }

    pub(crate) fn as_ptr(&self) -> *mut b::page {
        self.0.as_ptr()
    }

    /// Whether both reference the same page.
    pub(crate) fn same(&self, other: &PageRef) -> bool {
        self.0 == other.0
    }

    /// Run `f` on bytes `off..off + len` of the page (`None`: past the
    /// page).  Only bytes nobody writes while we read: bytes of a page of
    /// ours already built, or a memory region's bytes (a concurrent write
    /// there is the consumer's race, as for a copy).
    pub(crate) fn read<R>(&self, off: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if off > PAGE_SIZE || len > PAGE_SIZE - off {
            return None;
        }
        // SAFETY: we hold a reference, so the page stays while mapped.
        let map = unsafe { PageMap::new(self.0.as_ptr() as usize) }?;
        // SAFETY: `off + len` lies in the mapped page; the bytes are not
        // written meanwhile (the contract above).
        Some(f(unsafe {
            core::slice::from_raw_parts(map.ptr().add(off), len)
        }))
    }

    /// Bytes `off..off + len` of a page allocated by us (`own`) for writing
    /// (`None`: past the page).
    ///
    /// # Safety
    /// The page came from `own`, and no other reference (ours, a socket's)
    /// covers these bytes for as long as the slice lives: they are past
    /// every byte handed to anyone.
    pub(crate) unsafe fn own_bytes_mut(&self, off: usize, len: usize) -> Option<&mut [u8]> {
        if off > PAGE_SIZE || len > PAGE_SIZE - off {
            return None;
        }
        // SAFETY: a page of ours, allocated without __GFP_HIGHMEM, so it
        // has a permanent kernel address; `off + len <= PAGE_SIZE`; the
        // bytes are ours alone (the contract).
        Some(unsafe {
            core::slice::from_raw_parts_mut(
                b::softrnic_page_address(self.0.as_ptr())
                    .cast::<u8>()
                    .add(off),
                len,
            )
        })
    }
}

impl Drop for PageRef {
    fn drop(&mut self) {
        // SAFETY: the reference this value holds, dropped once.
        unsafe { b::softrnic_page_put(self.0.as_ptr()) }
    }
}

/// Bytes `off..off + len` of a page (the socket refuses a piece past it).
pub(crate) struct Frag {
    pub(crate) page: PageRef,
    pub(crate) off: u32,
    pub(crate) len: u32,
}
