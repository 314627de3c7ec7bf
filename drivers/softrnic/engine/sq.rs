// SPDX-License-Identifier: GPL-2.0
//! The send side of the WQE executor, for any transport: send WQEs read
//! from the ring once and checked (SGEs against the memory keys, inline
//! length, message size), local operations run, results of READs and
//! atomics stored into the WQE's buffers, and send completions.  A
//! transport's requester I/O (`transport/*/requester.rs`) forwards its
//! machine's requests for these here.

use kernel::prelude::*;

use super::mem::{self, Data};
use crate::abi::{self, SendWqe, Sge};
use crate::glue::ring::Ring;
use crate::glue::IbDevice;
use crate::roce::requester::Prepared;
use crate::transport_rules::MsgOp;
use crate::verbs::local_ops::{self, OnQp};
use crate::verbs::qp::{After, Qp};

/// Maximum SGEs a send WQE may carry (device limit).
pub(crate) const MAX_SGE: usize = 32;

/// What the requester knows of one send WQE.
pub(crate) type Track = crate::roce::requester::Track<SendWqe>;

/// The message operation of a send opcode; `None` for local operations
/// and unknown opcodes.
pub(crate) fn msg_op(opcode: u32) -> Option<MsgOp> {
    Some(match opcode {
        abi::WR_SEND => MsgOp::Send,
        abi::WR_SEND_WITH_IMM => MsgOp::SendImm,
        abi::WR_SEND_WITH_INV => MsgOp::SendInv,
        abi::WR_RDMA_WRITE => MsgOp::Write,
        abi::WR_RDMA_WRITE_WITH_IMM => MsgOp::WriteImm,
        // (The transports see a READ; the executor invalidates.)
        abi::WR_RDMA_READ | abi::WR_RDMA_READ_WITH_INV => MsgOp::Read,
        abi::WR_ATOMIC_CMP_AND_SWP => MsgOp::CmpSwap,
        abi::WR_ATOMIC_FETCH_AND_ADD => MsgOp::FetchAdd,
        _ => return None,
    })
}

/// A QP's send queue while the QP lock is held.
pub(crate) struct SendQueue<'a> {
    pub(crate) qp: &'a Qp,
    pub(crate) dev: &'a IbDevice,
    pub(crate) sq: &'a Ring,
    pub(crate) sq_cons: &'a mut u32,
    pub(crate) after: &'a mut After,
}

impl SendQueue<'_> {
    pub(crate) fn producer(&self) -> u32 {
        self.sq.producer()
    }

    pub(crate) fn slots(&self) -> u32 {
        self.sq.slots()
    }

    /// Read and check the WQE in slot `index`.
    pub(crate) fn prepare(&self, index: u32) -> Option<Prepared<SendWqe>> {
        let w = self.sq.read::<SendWqe>(index, 0)?;
        let mut p = Prepared {
            wqe: w,
            op: None,
            len: 0,
            fence: w.send_flags & abi::SEND_FENCE != 0,
            solicited: w.send_flags & abi::SEND_SOLICITED != 0,
            error: 0,
            early: local_ops::runs_early(w.opcode),
        };
        if local_ops::is_local(w.opcode) {
            return Some(p);
        }
        match self.check(index, &w) {
            Ok((op, len)) => {
                p.op = Some(op);
                p.len = len;
            }
            Err(status) => p.error = status,
        }
        Some(p)
    }

    /// Check a message WQE against the memory keys and the limits: its
    /// operation and length, or the completion status it fails with.  (The
    /// requester machine checks the operation against the service and the
    /// length against the MTU.)
    fn check(&self, index: u32, w: &SendWqe) -> Result<(MsgOp, u32), u8> {
        let op = msg_op(w.opcode).ok_or(abi::WC_LOC_QP_OP_ERR)?;
        if w.opcode == abi::WR_RDMA_READ_WITH_INV {
            // A kernel verb (ibv_wr_opcode has none; 11 is a driver's).
            if self.qp.user {
                return Err(abi::WC_LOC_QP_OP_ERR);
            }
            local_ops::read_inv_check(self.dev.verbs(), &self.on_qp(), w.ex)?;
        }
        let caps = &self.qp.caps;
        let len = if w.send_flags & abi::SEND_INLINE != 0 {
            if w.inline_len > caps.max_inline {
                return Err(abi::WC_LOC_LEN_ERR);
            }
            u64::from(w.inline_len)
        } else {
            if w.num_sge > caps.max_send_sge {
                return Err(abi::WC_LOC_LEN_ERR);
            }
            let mut buf = [Sge::default(); MAX_SGE];
            let sges = wqe_sges(self.sq, index, w, &mut buf).ok_or(abi::WC_LOC_LEN_ERR)?;
            // READ and atomic results are written into the SGEs.
            let write = matches!(op, MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd);
            mem::sgl_check(self.dev.verbs(), self.qp.ib.pd_id(), sges, write)
                .ok_or(abi::WC_LOC_PROT_ERR)?
        };
        if len > u64::from(crate::limits::MAX_MSG_SIZE) {
            return Err(abi::WC_LOC_LEN_ERR);
        }
        if matches!(op, MsgOp::CmpSwap | MsgOp::FetchAdd) && (len < 8 || w.remote_addr % 8 != 0) {
            return Err(abi::WC_LOC_LEN_ERR);
        }
        Ok((op, len as u32))
    }

    /// Run a local operation (bind, invalidate, fast-register).
    pub(crate) fn run_local(&self, wqe: &SendWqe) -> u8 {
        match local_ops::execute(self.dev.verbs(), &self.on_qp(), wqe) {
            Ok(()) => abi::WC_SUCCESS,
            Err(st) => st,
        }
    }

    fn on_qp(&self) -> OnQp {
        OnQp {
            pd: self.qp.ib.pd_id(),
            qpn: self.qp.qpn(),
        }
    }

    /// The WQE in slot `index` is done: consume it, and complete it on the
    /// send CQ unless it succeeded unsignaled.
    pub(crate) fn complete(&mut self, index: u32, t: &Track, mut status: u8) {
        if status == abi::WC_SUCCESS && t.wqe.opcode == abi::WR_RDMA_READ_WITH_INV {
            // Checked when taken; only a key re-registered meanwhile fails
            // here, and the consumer sees that in the completion.
            if let Err(st) = local_ops::read_inv(self.dev.verbs(), &self.on_qp(), t.wqe.ex) {
                status = st;
            }
        }
        *self.sq_cons = index.wrapping_add(1);
        self.sq.set_consumer(*self.sq_cons);
        let send = matches!(
            t.wqe.opcode,
            abi::WR_SEND | abi::WR_SEND_WITH_IMM | abi::WR_SEND_WITH_INV
        );
        if send && status == abi::WC_SUCCESS {
            self.qp.count(super::Counter::RdmaSends);
        }
        if status != abi::WC_SUCCESS || t.wqe.send_flags & abi::SEND_SIGNALED != 0 {
            let mut cqe = self.qp.send_cqe(t.wqe.wr_id, t.wqe.opcode, status);
            cqe.byte_len = t.len;
            let (_, owed) = self.qp.send_cq().push(&cqe, false);
            self.after.send_cq.merge(owed);
        }
    }

    /// Store a READ's data or an atomic's result at `offset` of the WQE's
    /// buffers.
    pub(crate) fn store(&self, index: u32, t: &Track, offset: u32, data: &[u8]) -> bool {
        self.copy(index, &t.wqe, offset, Data::Store(data))
    }

    /// Copy `buf.len()` bytes of WQE `index`'s message from `offset` (its
    /// inline data or its SGEs) into `buf`.
    pub(crate) fn load(&self, index: u32, w: &SendWqe, offset: u32, buf: &mut [u8]) -> bool {
        if buf.is_empty() {
            return true;
        }
        if w.send_flags & abi::SEND_INLINE != 0 {
            return self
                .sq
                .read_bytes(index, size_of::<SendWqe>() + offset as usize, buf)
                .is_some();
        }
        self.copy(index, w, offset, Data::Load(buf))
    }

    /// Copy to or from WQE `index`'s SGEs, from byte `offset`.
    fn copy(&self, index: u32, w: &SendWqe, offset: u32, data: Data<'_>) -> bool {
        let mut sb = [Sge::default(); MAX_SGE];
        let Some(sges) = wqe_sges(self.sq, index, w, &mut sb) else {
            return false;
        };
        let pd = self.qp.ib.pd_id();
        mem::sgl_copy(self.dev.verbs(), pd, sges, u64::from(offset), data).is_ok()
    }
}

/// Read a WQE's SGEs from its slot.
pub(crate) fn wqe_sges<'a>(
    sq: &Ring,
    index: u32,
    w: &SendWqe,
    buf: &'a mut [Sge; MAX_SGE],
) -> Option<&'a [Sge]> {
    let n = w.num_sge as usize;
    if n > MAX_SGE {
        return None;
    }
    for (i, sge) in buf.iter_mut().enumerate().take(n) {
        *sge = sq.read::<Sge>(index, size_of::<SendWqe>() + i * size_of::<Sge>())?;
    }
    Some(&buf[..n])
}
