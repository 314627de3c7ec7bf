// SPDX-License-Identifier: GPL-2.0
//! Bytes built for a TCP socket, in pages of our own that the socket takes
//! by reference (`MSG_SPLICE_PAGES`, `tcp_shim.c`): an iWARP stream copies
//! each payload byte once, from the memory region into these pages, and TCP
//! sends from them.  TCP holds its own reference on a page until the peer
//! has acknowledged its bytes; the bytes it took are never written again
//! (only bytes past the last one built are), so a SEND or WRITE may still
//! complete as soon as the socket has taken it.

use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;

use super::bindings as b;
use super::tcp::{Tcp, SEND_PAGES};

/// The unsent bytes of a stream, in order.
#[derive(Default)]
pub(crate) struct TxBuf {
    /// The first holds the first unsent byte (at `head`); the pages after
    /// the last byte are room for the next.
    pages: KVec<Page>,
    head: usize,
    len: usize,
}

impl TxBuf {
    /// Unsent bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes `at..at + n` of page `i` (`at + n` within the page, `i`
    /// allocated).
    fn piece(&self, i: usize, at: usize, n: usize) -> &[u8] {
        let p = self.pages[i].as_ptr().cast::<b::page>();
        // SAFETY: `p` is a page we own, allocated without __GFP_HIGHMEM, so
        // it has a permanent kernel address; `at + n <= PAGE_SIZE`.  The
        // bytes are initialised (appended) and only read from now on.
        unsafe { core::slice::from_raw_parts(b::softrnic_page_address(p).cast::<u8>().add(at), n) }
    }

    /// The bytes `at..at + n` of page `i` for writing: only past the last
    /// byte built, which neither the socket nor a reader has seen.
    fn piece_mut(&mut self, i: usize, at: usize, n: usize) -> &mut [u8] {
        let p = self.pages[i].as_ptr().cast::<b::page>();
        // SAFETY: as in `piece`; the bytes are past every byte built, so no
        // other reference (ours or the socket's) covers them, and `&mut
        // self` keeps ours unique.
        unsafe {
            core::slice::from_raw_parts_mut(b::softrnic_page_address(p).cast::<u8>().add(at), n)
        }
    }

    /// Append `n` bytes that `fill` writes piece by piece (`fill(offset in
    /// the n bytes, piece)`).  Nothing is appended when `fill` refuses a
    /// piece or a page cannot be had.
    pub(crate) fn append_with(
        &mut self,
        n: usize,
        mut fill: impl FnMut(usize, &mut [u8]) -> bool,
    ) -> Result {
        let end = self.head + self.len;
        let pages = (end + n).div_ceil(PAGE_SIZE);
        while self.pages.len() < pages {
            let p = Page::alloc_page(GFP_ATOMIC)?;
            self.pages.push(p, GFP_ATOMIC)?;
        }
        let mut done = 0;
        while done < n {
            let pos = end + done;
            let (i, at) = (pos / PAGE_SIZE, pos % PAGE_SIZE);
            let k = core::cmp::min(n - done, PAGE_SIZE - at);
            if !fill(done, self.piece_mut(i, at, k)) {
                return Err(EFAULT);
            }
            done += k;
        }
        self.len += n;
        Ok(())
    }

    pub(crate) fn append(&mut self, bytes: &[u8]) -> Result {
        self.append_with(bytes.len(), |at, p| {
            p.copy_from_slice(&bytes[at..at + p.len()]);
            true
        })
    }

    /// Run `f` on the unsent bytes `from..from + n`, piece by piece.
    pub(crate) fn pieces(&self, from: usize, n: usize, mut f: impl FnMut(&[u8])) {
        let n = core::cmp::min(n, self.len.saturating_sub(from));
        let mut done = 0;
        while done < n {
            let pos = self.head + from + done;
            let (i, at) = (pos / PAGE_SIZE, pos % PAGE_SIZE);
            let k = core::cmp::min(n - done, PAGE_SIZE - at);
            f(self.piece(i, at, k));
            done += k;
        }
    }

    /// Keep the first `len` unsent bytes (undo appends).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = core::cmp::min(self.len, len);
    }

    /// Copy the unsent bytes to the end of `out`, all or none (a draining
    /// connection must not send part of an FPDU as if it were whole).
    pub(crate) fn copy_into(&self, out: &mut KVec<u8>) -> Result {
        let before = out.len();
        let mut r = Ok(());
        self.pieces(0, self.len, |p| {
            if r.is_ok() {
                r = out.extend_from_slice(p, GFP_ATOMIC).map_err(Error::from);
            }
        });
        if r.is_err() {
            out.truncate(before);
        }
        r
    }

    /// Drop the first `n` unsent bytes (the socket took them), and the
    /// pages they emptied: the socket holds its own references.
    fn consume(&mut self, n: usize) {
        let n = core::cmp::min(n, self.len);
        self.len -= n;
        self.head += n;
        // (A page the socket took only part of stays: the next bytes go
        // after what it took.)
        while self.head >= PAGE_SIZE && !self.pages.is_empty() {
            // (Dropping ours: the socket holds its own reference.)
            let _ = self.pages.remove(0);
            self.head -= PAGE_SIZE;
        }
    }

    /// Hand the socket what it takes now, by reference: the bytes taken
    /// (fewer than `len` when it is full), and an error when the connection
    /// is broken.
    pub(crate) fn send(&mut self, tcp: &Tcp) -> (usize, Result) {
        let mut taken = 0;
        while self.len > 0 {
            let n = core::cmp::min((self.head + self.len).div_ceil(PAGE_SIZE), SEND_PAGES);
            let len = core::cmp::min(self.len, n * PAGE_SIZE - self.head);
            match tcp.send_pages(&self.pages[..n], self.head, len) {
                Ok(0) => break,
                Ok(k) => {
                    self.consume(k);
                    taken += k;
                }
                Err(e) => return (taken, Err(e)),
            }
        }
        (taken, Ok(()))
    }
}
