// SPDX-License-Identifier: GPL-2.0
//! Bytes built for a TCP socket, as pieces of pages the socket takes by
//! reference (`MSG_SPLICE_PAGES`, `tcp_shim.c`).  What the stream builds
//! (headers, trailers, payload copied from a memory region) goes into pages
//! of our own: one copy of each payload byte.  A READ response's payload
//! may instead be the memory region's own pages (`append_ref`): no copy.
//! TCP holds its own reference on a page until the peer has acknowledged
//! its bytes; bytes of our pages it took are never written again (only
//! bytes past the last one built are), so a SEND or WRITE may still
//! complete as soon as the socket has taken it.

use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;

use super::pageref::{Frag, PageRef};
use super::tcp::{Tcp, SEND_PAGES};

/// The unsent bytes of a stream, in order.
#[derive(Default)]
pub(crate) struct TxBuf {
    /// The pieces; the first starts at the first unsent byte.
    frags: KVec<Frag>,
    len: usize,
    /// Our page the next bytes built go into, from `used` on.
    scratch: Option<PageRef>,
    used: usize,
}

impl TxBuf {
    /// Unsent bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append `n` bytes that `fill` writes piece by piece (`fill(offset in
    /// the n bytes, piece)`).  Nothing is appended when `fill` refuses a
    /// piece or a page cannot be had.
    pub(crate) fn append_with(
        &mut self,
        n: usize,
        mut fill: impl FnMut(usize, &mut [u8]) -> bool,
    ) -> Result {
        let before = self.len;
        let r = self.build(n, &mut fill);
        if r.is_err() {
            self.truncate(before);
        }
        r
    }

    fn build(&mut self, n: usize, fill: &mut impl FnMut(usize, &mut [u8]) -> bool) -> Result {
        let mut done = 0;
        while done < n {
            if self.scratch.is_none() || self.used == PAGE_SIZE {
                self.scratch = Some(PageRef::own(Page::alloc_page(GFP_ATOMIC)?));
                self.used = 0;
            }
            let Some(sc) = self.scratch.as_ref() else {
                return Err(ENOMEM);
            };
            let k = core::cmp::min(n - done, PAGE_SIZE - self.used);
            // SAFETY: `scratch` came from `own`; bytes from `used` on were
            // never handed to anyone (the pieces end before it), and the
            // slice is gone before `used` moves past them.
            let piece = unsafe { sc.own_bytes_mut(self.used, k) }.ok_or(EINVAL)?;
            if !fill(done, piece) {
                return Err(EFAULT);
            }
            match self.frags.last_mut() {
                Some(f) if f.page.same(sc) && (f.off + f.len) as usize == self.used => {
                    f.len += k as u32;
                }
                _ => self.frags.push(
                    Frag {
                        page: sc.another(),
                        off: self.used as u32,
                        len: k as u32,
                    },
                    GFP_ATOMIC,
                )?,
            }
            // (Bytes of a failed append stay used: never written again.)
            self.used += k;
            self.len += k;
            done += k;
        }
        Ok(())
    }

    pub(crate) fn append(&mut self, bytes: &[u8]) -> Result {
        self.append_with(bytes.len(), |at, p| {
            p.copy_from_slice(&bytes[at..at + p.len()]);
            true
        })
    }

    /// Append `len` bytes at `off` of a page we hold a reference on, which
    /// the socket sends as they are when it sends them.
    pub(crate) fn append_ref(&mut self, page: PageRef, off: usize, len: usize) -> Result {
        if off > PAGE_SIZE || len > PAGE_SIZE - off {
            return Err(EINVAL);
        }
        self.frags.push(
            Frag {
                page,
                off: off as u32,
                len: len as u32,
            },
            GFP_ATOMIC,
        )?;
        self.len += len;
        Ok(())
    }

    /// Run `f` on the unsent bytes `from..from + n`, piece by piece.
    pub(crate) fn pieces(&self, from: usize, n: usize, mut f: impl FnMut(&[u8])) {
        let mut skip = from;
        let mut left = core::cmp::min(n, self.len.saturating_sub(from));
        for fr in self.frags.iter() {
            if left == 0 {
                break;
            }
            let l = fr.len as usize;
            if skip >= l {
                skip -= l;
                continue;
            }
            let k = core::cmp::min(l - skip, left);
            // (Always within the page: `Frag`s are built so.)
            let _ = fr.page.read(fr.off as usize + skip, k, &mut f);
            left -= k;
            skip = 0;
        }
    }

    /// Keep the first `len` unsent bytes (undo appends).
    pub(crate) fn truncate(&mut self, len: usize) {
        while self.len > len {
            let excess = self.len - len;
            let Some(last) = self.frags.last_mut() else {
                break;
            };
            if last.len as usize > excess {
                last.len -= excess as u32;
                self.len = len;
            } else {
                self.len -= last.len as usize;
                let _ = self.frags.pop();
            }
        }
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
    /// references of the pieces they emptied: the socket holds its own.
    fn consume(&mut self, n: usize) {
        let mut n = core::cmp::min(n, self.len);
        self.len -= n;
        let mut whole = 0;
        for f in self.frags.iter_mut() {
            if n == 0 {
                break;
            }
            if (f.len as usize) <= n {
                n -= f.len as usize;
                whole += 1;
            } else {
                f.off += n as u32;
                f.len -= n as u32;
                n = 0;
            }
        }
        let mut i = 0;
        self.frags.retain(|_| {
            i += 1;
            i > whole
        });
    }

    /// Hand the socket what it takes now, by reference: the bytes taken
    /// (fewer than `len` when it is full), and an error when the connection
    /// is broken.
    pub(crate) fn send(&mut self, tcp: &Tcp) -> (usize, Result) {
        let mut taken = 0;
        while self.len > 0 {
            let n = core::cmp::min(self.frags.len(), SEND_PAGES);
            match tcp.send_frags(&self.frags[..n]) {
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
