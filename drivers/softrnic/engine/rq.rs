// SPDX-License-Identifier: GPL-2.0
//! The receive side of the WQE executor, for any transport: receive WQEs
//! taken in order from the RQ or the SRQ, data placed into them or into
//! memory regions and windows by key and address (`mem.rs`), atomics run,
//! rkeys invalidated, and receive completions.  A transport's responder
//! I/O (`transport/*/responder.rs`) forwards its machine's requests for
//! these here.

use super::mem::{self, Data, Denied, Requestor, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use crate::abi::{self, Cqe};
use crate::glue::ring::Ring;
use crate::glue::IbDevice;
use crate::roce::responder::{Access, RecvDone};
use crate::verbs::qp::{After, Qp};
use crate::verbs::srq::Taken;

/// A QP's receive side while the QP lock is held.
pub(crate) struct RecvSide<'a> {
    pub(crate) qp: &'a Qp,
    pub(crate) dev: &'a IbDevice,
    pub(crate) rq: Option<&'a Ring>,
    pub(crate) rq_cons: &'a mut u32,
    pub(crate) after: &'a mut After,
}

impl RecvSide<'_> {
    pub(crate) fn who(&self) -> Requestor {
        self.qp.requestor()
    }

    /// Take the next receive WQE (RQ or SRQ).
    pub(crate) fn take(&mut self) -> Option<Taken> {
        if let Some(srq) = self.qp.srq_ref() {
            let (t, limit) = srq.inner.lock().take();
            self.after.srq_limit |= limit;
            return t;
        }
        let rq = self.rq?;
        if rq.producer() == *self.rq_cons {
            return None;
        }
        let t = Taken::read(rq, *self.rq_cons, self.qp.caps.max_recv_sge);
        *self.rq_cons = self.rq_cons.wrapping_add(1);
        rq.set_consumer(*self.rq_cons);
        t
    }

    /// Store `data` at byte `at` of a receive WQE's buffers.
    pub(crate) fn store(&self, r: &Taken, at: u64, data: &[u8]) -> Result<(), bool> {
        mem::sgl_copy(
            self.dev.verbs(),
            self.who().pd,
            r.sges(),
            at,
            Data::Store(data),
        )
    }

    /// Complete `cqe` on the receive CQ.
    pub(crate) fn complete(&mut self, cqe: &Cqe, solicited: bool) {
        if cqe.status == abi::WC_SUCCESS {
            self.qp.count(super::Counter::RdmaRecvs);
        }
        let (_, owed) = self.qp.recv_cq().push(cqe, solicited);
        self.after.recv_cq.merge(owed);
    }

    /// The receive completion `d` describes, for WQE `r`.
    pub(crate) fn done(&mut self, r: &Taken, d: RecvDone) {
        let opcode = if d.write_imm {
            abi::WC_RECV_RDMA_WITH_IMM
        } else {
            abi::WC_RECV
        };
        let mut cqe = self.qp.recv_cqe(r.wr_id, opcode, d.status, d.byte_len);
        if let Some(imm) = d.imm {
            cqe.wc_flags |= abi::WC_WITH_IMM;
            cqe.ex = imm.to_be();
        }
        if let Some(rkey) = d.invalidated {
            cqe.wc_flags |= abi::WC_WITH_INV;
            cqe.ex = rkey;
        }
        self.complete(&cqe, d.solicited);
    }

    pub(crate) fn remote_ok(&self, rkey: u32, va: u64, len: u64, access: Access) -> bool {
        self.remote_check(rkey, va, len, access).is_ok()
    }

    /// Whether `access` to `va..va+len` under `rkey` is allowed, or why not.
    pub(crate) fn remote_check(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        access: Access,
    ) -> Result<(), Denied> {
        let flag = match access {
            Access::Read => REMOTE_READ,
            Access::Write => REMOTE_WRITE,
            Access::Atomic => REMOTE_ATOMIC,
        };
        mem::with_remote(self.dev.verbs(), self.who(), rkey, va, len, flag, |_, _| ())
    }

    pub(crate) fn remote_write(&self, rkey: u32, va: u64, data: &[u8]) -> bool {
        self.remote_write_pieces(rkey, va, &[data])
    }

    /// Write the bytes of `pieces`, in order, at `va` under `rkey`: one
    /// check of the whole range, then the copies (a packet held in
    /// fragments lands whole or not at all).
    pub(crate) fn remote_write_pieces(&self, rkey: u32, va: u64, pieces: &[&[u8]]) -> bool {
        let len = pieces.iter().map(|p| p.len() as u64).sum();
        mem::with_remote(
            self.dev.verbs(),
            self.who(),
            rkey,
            va,
            len,
            REMOTE_WRITE,
            |m, iova| {
                let mut at = iova;
                pieces.iter().all(|p| {
                    let ok = m.copy(at, Data::Store(p));
                    at += p.len() as u64;
                    ok
                })
            },
        ) == Ok(true)
    }

    /// Copy `buf.len()` bytes at `va` under `rkey` into `buf` (READ).
    pub(crate) fn remote_read(&self, rkey: u32, va: u64, buf: &mut [u8]) -> bool {
        buf.is_empty()
            || mem::with_remote(
                self.dev.verbs(),
                self.who(),
                rkey,
                va,
                buf.len() as u64,
                REMOTE_READ,
                |m, iova| m.copy(iova, Data::Load(buf)),
            ) == Ok(true)
    }

    pub(crate) fn remote_atomic(
        &self,
        rkey: u32,
        va: u64,
        cmp_swap: bool,
        compare: u64,
        swap_add: u64,
    ) -> Option<u64> {
        mem::with_remote(
            self.dev.verbs(),
            self.who(),
            rkey,
            va,
            8,
            REMOTE_ATOMIC,
            |m, iova| m.atomic(iova, |w| mem::atomic_op(w, cmp_swap, compare, swap_add)),
        )
        .ok()
        .flatten()
    }

    /// Replace the word at `va` under `rkey` (remote atomic access; 8-byte
    /// aligned) by `f` of it; the value it held, or why the access was
    /// refused.
    pub(crate) fn remote_atomic_update(
        &self,
        rkey: u32,
        va: u64,
        f: impl Fn(u64) -> u64,
    ) -> Result<u64, Denied> {
        mem::with_remote(
            self.dev.verbs(),
            self.who(),
            rkey,
            va,
            8,
            REMOTE_ATOMIC,
            |m, iova| m.atomic(iova, |w| mem::atomic_update(w, &f)),
        )?
        .ok_or(Denied::Bounds)
    }

    pub(crate) fn invalidate(&self, rkey: u32) -> bool {
        mem::remote_invalidate(self.dev.verbs(), self.who(), rkey)
    }
}

impl Qp {
    pub(crate) fn recv_cqe(&self, wr_id: u64, opcode: u8, status: u8, byte_len: u32) -> Cqe {
        let mut c = self.send_cqe(wr_id, abi::WR_SEND, status);
        c.opcode = opcode;
        c.byte_len = byte_len;
        c
    }

    pub(crate) fn requestor(&self) -> Requestor {
        Requestor {
            pd: self.ib.pd_id(),
            qpn: self.qpn(),
        }
    }
}
