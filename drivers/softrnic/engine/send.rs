// SPDX-License-Identifier: GPL-2.0
//! The requester's executor: the RoCEv2 requester machine
//! (`core/roce/requester.rs`) decides what goes out and when; this reads
//! and checks the WQEs it asks for (SGEs against the memory keys), builds
//! the packets it plans (headers, payload straight from memory), runs local
//! operations, and completes WQEs on the send CQ.

use kernel::prelude::*;

use super::mem::{self, Data};
use super::packet::{bth, Outbox};
use crate::abi::{self, SendWqe, Sge};
use crate::glue::net::IpRoute;
use crate::glue::ring::Ring;
use crate::glue::{IbDevice, NetDevice};
use crate::qp_state::{QpState, QpType};
use crate::roce::requester::{Prepared, RequestPacket, RequesterIo, RequesterParams};
use crate::roce::{Count, Outcome, SendFail};
use crate::roce_wire::{AtomicEth, Deth, Ext, Headers, Ieth, ImmDt, Reth};
use crate::transport_rules::{self as rules, MsgOp, Service};
use crate::verbs::ah::Av;
use crate::verbs::local_ops::{self, OnQp};
use crate::verbs::qp::{After, Qp, QpAttrs, QpInner};

/// Maximum SGEs a send WQE may carry (device limit).
pub(crate) const MAX_SGE: usize = 32;

/// What the requester knows of one send WQE.
pub(crate) type Track = crate::roce::requester::Track<SendWqe>;

pub(crate) fn msg_op(opcode: u32) -> Option<MsgOp> {
    Some(match opcode {
        abi::WR_SEND => MsgOp::Send,
        abi::WR_SEND_WITH_IMM => MsgOp::SendImm,
        abi::WR_SEND_WITH_INV => MsgOp::SendInv,
        abi::WR_RDMA_WRITE => MsgOp::Write,
        abi::WR_RDMA_WRITE_WITH_IMM => MsgOp::WriteImm,
        abi::WR_RDMA_READ => MsgOp::Read,
        abi::WR_ATOMIC_CMP_AND_SWP => MsgOp::CmpSwap,
        abi::WR_ATOMIC_FETCH_AND_ADD => MsgOp::FetchAdd,
        _ => return None,
    })
}

/// The requester's parameters from the QP's state and attributes.
pub(crate) fn params(svc: Service, state: QpState, a: &QpAttrs, mtu: u32) -> RequesterParams {
    RequesterParams {
        svc,
        mtu,
        max_rd: core::cmp::max(u32::from(a.max_rd_atomic), 1),
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        rts: state == QpState::Rts,
        sqd: state == QpState::Sqd,
    }
}

/// The requester's I/O: the send ring, memory, the outbox, the send CQ.
pub(crate) struct ReqIo<'a> {
    pub(crate) qp: &'a Qp,
    pub(crate) dev: &'a IbDevice,
    pub(crate) sq: &'a Ring,
    pub(crate) sq_cons: &'a mut u32,
    pub(crate) attrs: &'a QpAttrs,
    pub(crate) after: &'a mut After,
    /// Where packets go (`None`: this step sends nothing).
    pub(crate) out: Option<(&'a NetDevice, &'a mut Outbox)>,
    pub(crate) dying: bool,
}

impl RequesterIo<SendWqe> for ReqIo<'_> {
    fn producer(&mut self) -> u32 {
        self.sq.producer()
    }

    fn slots(&self) -> u32 {
        self.sq.slots()
    }

    fn prepare(&mut self, index: u32) -> Option<Prepared<SendWqe>> {
        let w = self.sq.read::<SendWqe>(index, 0)?;
        let mut p = Prepared {
            wqe: w,
            op: None,
            len: 0,
            fence: w.send_flags & abi::SEND_FENCE != 0,
            solicited: w.send_flags & abi::SEND_SOLICITED != 0,
            error: 0,
        };
        if local_ops::is_local(w.opcode) {
            return Some(p);
        }
        match self.qp.check_wqe(self.sq, index, &w) {
            Ok((op, len)) => {
                p.op = Some(op);
                p.len = len;
            }
            Err(status) => p.error = status,
        }
        Some(p)
    }

    fn run_local(&mut self, wqe: &SendWqe) -> u8 {
        let on = OnQp {
            pd: self.qp.ib.pd as usize,
            qpn: self.qp.qpn(),
        };
        match local_ops::execute(self.dev.verbs(), &on, wqe) {
            Ok(()) => abi::WC_SUCCESS,
            Err(st) => st,
        }
    }

    fn send(&mut self, p: &RequestPacket<'_, SendWqe>) -> Result<(), SendFail> {
        let Some((ndev, out)) = self.out.as_mut() else {
            return Err(SendFail::Full);
        };
        self.qp
            .build_request(self.sq, self.attrs, self.dev, ndev, out, p)
    }

    fn complete(&mut self, index: u32, t: &Track, status: u8) {
        *self.sq_cons = index.wrapping_add(1);
        self.sq.set_consumer(*self.sq_cons);
        if status != abi::WC_SUCCESS || t.wqe.send_flags & abi::SEND_SIGNALED != 0 {
            let mut cqe = self.qp.send_cqe(t.wqe.wr_id, t.wqe.opcode, status);
            cqe.byte_len = t.len;
            let (_, owed) = self.qp.send_cq().push(&cqe, false);
            self.after.send_cq.merge(owed);
        }
    }

    fn store(&mut self, index: u32, t: &Track, offset: u32, data: &[u8]) -> bool {
        let mut buf = [Sge::default(); MAX_SGE];
        let Some(sges) = Qp::wqe_sges(self.sq, index, &t.wqe, &mut buf) else {
            return false;
        };
        let pd = self.qp.ib.pd as usize;
        mem::sgl_copy(
            self.dev.verbs(),
            pd,
            sges,
            u64::from(offset),
            Data::Store(data),
        )
        .is_ok()
    }

    fn arm_timer(&mut self, usecs: u64) {
        self.qp.arm_timer(self.dying, usecs);
    }

    fn stop_timer(&mut self) {
        self.qp.stop_timer();
    }

    fn retry_later(&mut self) {
        self.qp.queue_work(self.dying);
    }

    fn count(&mut self, c: Count) {
        self.dev.counters().bump(super::Counter::from(c));
    }
}

impl Qp {
    pub(crate) fn service(&self) -> Service {
        match self.ty {
            QpType::Rc => Service::Rc,
            QpType::Uc => Service::Uc,
            _ => Service::Ud,
        }
    }

    /// The path MTU in bytes (UD: the port's).
    pub(crate) fn mtu(&self, s: &QpInner, ndev: &NetDevice) -> u32 {
        let code = if self.service() == Service::Ud {
            crate::limits::ib_mtu_for(ndev.mtu(), crate::limits::ROCE_MAX_HEADER_BYTES)
                .unwrap_or(crate::limits::IB_MTU_256)
        } else {
            s.attrs.path_mtu
        };
        rules::mtu_bytes(code).unwrap_or(256)
    }

    /// The UDP source port of this QP's packets: fixed per QP so a flow
    /// stays on one path, different between QPs for ECMP entropy.
    pub(crate) fn sport(&self) -> u16 {
        let h = self.qpn().wrapping_mul(0x9E37_79B1);
        0xC000 | ((h >> 18) as u16 & 0x3fff)
    }

    /// The route of this QP's packets to address vector `av`.
    pub(crate) fn ip_route(&self, av: &Av) -> IpRoute {
        IpRoute {
            saddr: av.sgid,
            daddr: av.dgid,
            ipv4: av.ipv4,
            sport: self.sport(),
            tclass: av.traffic_class,
            ttl: if av.hop_limit == 0 { 64 } else { av.hop_limit },
            flow_label: av.flow_label,
        }
    }

    /// The route of a connected QP's packets.
    pub(crate) fn route(&self, s: &QpInner) -> Option<IpRoute> {
        s.attrs.av.as_ref().map(|av| self.ip_route(av))
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

    /// Check a new message WQE against the memory keys and the limits:
    /// its operation and length, or the completion status it fails with.
    /// (The requester machine checks the operation against the service and
    /// the length against the MTU.)
    fn check_wqe(&self, sq: &Ring, index: u32, w: &SendWqe) -> Result<(MsgOp, u32), u8> {
        let op = msg_op(w.opcode).ok_or(abi::WC_LOC_QP_OP_ERR)?;
        let len = if w.send_flags & abi::SEND_INLINE != 0 {
            if w.inline_len > self.caps.max_inline {
                return Err(abi::WC_LOC_LEN_ERR);
            }
            u64::from(w.inline_len)
        } else {
            if w.num_sge > self.caps.max_send_sge {
                return Err(abi::WC_LOC_LEN_ERR);
            }
            let mut buf = [Sge::default(); MAX_SGE];
            let sges = Self::wqe_sges(sq, index, w, &mut buf).ok_or(abi::WC_LOC_LEN_ERR)?;
            // READ and atomic results are written into the SGEs.
            let write = matches!(op, MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd);
            mem::sgl_check(self.dev().verbs(), self.ib.pd as usize, sges, write)
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

    /// Run the requester: request packets from the send queue into `out`.
    pub(crate) fn emit_requests(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        ndev: &NetDevice,
        out: &mut Outbox,
        after: &mut After,
    ) {
        if !matches!(s.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let p = params(self.service(), s.state, &s.attrs, self.mtu(s, ndev));
        let QpInner {
            sq,
            sq_cons,
            attrs,
            eng,
            ..
        } = s;
        let mut io = ReqIo {
            qp: self,
            dev,
            sq,
            sq_cons,
            attrs,
            after: &mut *after,
            out: Some((ndev, out)),
            dying: eng.dying,
        };
        let o = eng.req.emit(&p, &mut io);
        self.outcome(s, o, after);
    }

    /// Do what a protocol machine's step left to the QP.
    pub(crate) fn outcome(&self, s: &mut QpInner, o: Outcome, after: &mut After) {
        if let Some(e) = o.remote {
            after.event = Some(match e {
                crate::roce::RemoteError::Access => crate::glue::events::Event::QpAccessErr,
                crate::roce::RemoteError::Request => crate::glue::events::Event::QpRequestErr,
            });
        }
        after.fatal |= o.fatal;
        after.sq_drained |= o.drained && s.attrs.sqd_notify;
        if o.error && s.state != QpState::Err {
            self.enter(s, QpState::Err, after);
        }
    }

    /// Build the request packet `p` plans.
    fn build_request(
        &self,
        sq: &Ring,
        attrs: &QpAttrs,
        dev: &IbDevice,
        ndev: &NetDevice,
        out: &mut Outbox,
        p: &RequestPacket<'_, SendWqe>,
    ) -> Result<(), SendFail> {
        let svc = self.service();
        let t = p.track;
        let w = &t.wqe;
        let layout = p.opcode.layout();
        let (route, dest_qp) = if svc == Service::Ud {
            let av = dev.verbs().ah_av(w.ah_num).ok_or(SendFail::BadMemory)?;
            (self.ip_route(&av), w.remote_qpn)
        } else {
            let av = attrs.av.as_ref().ok_or(SendFail::NoRoute)?;
            (self.ip_route(av), attrs.dest_qpn)
        };
        let mut hdr = Headers::new(bth(p.opcode, dest_qp, p.psn));
        hdr.bth.solicited = p.solicited;
        hdr.bth.ack_req = p.ack_req;
        if layout.has(Ext::Deth) {
            let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
                attrs.qkey
            } else {
                w.remote_qkey
            };
            hdr.deth = Some(Deth {
                qkey,
                src_qp: self.qpn(),
            });
        }
        if layout.has(Ext::Reth) {
            // A READ retransmitted from the middle asks for the rest.
            hdr.reth = Some(Reth {
                va: w.remote_addr.wrapping_add(u64::from(p.offset)),
                rkey: w.rkey,
                dma_len: t.len - core::cmp::min(p.offset, t.len),
            });
        }
        if layout.has(Ext::AtomicEth) {
            let (swap_add, compare) = if p.op == MsgOp::CmpSwap {
                (w.swap, w.compare_add)
            } else {
                (w.compare_add, 0)
            };
            hdr.atomic_eth = Some(AtomicEth {
                va: w.remote_addr,
                rkey: w.rkey,
                swap_add,
                compare,
            });
        }
        if layout.has(Ext::ImmDt) {
            hdr.imm_dt = Some(ImmDt {
                data: u32::from_be(w.ex),
            });
        }
        if layout.has(Ext::Ieth) {
            hdr.ieth = Some(Ieth { rkey: w.ex });
        }
        let inline = w.send_flags & abi::SEND_INLINE != 0;
        let pd = self.ib.pd as usize;
        let (index, offset) = (p.index, p.offset);
        out.build(dev, ndev, &route, &hdr, p.payload as usize, |buf| {
            if buf.is_empty() {
                return true;
            }
            if inline {
                sq.read_bytes(index, size_of::<SendWqe>() + offset as usize, buf)
                    .is_some()
            } else {
                let mut sb = [Sge::default(); MAX_SGE];
                let Some(sges) = Self::wqe_sges(sq, index, w, &mut sb) else {
                    return false;
                };
                mem::sgl_copy(dev.verbs(), pd, sges, u64::from(offset), Data::Load(buf)).is_ok()
            }
        })
    }
}
