// SPDX-License-Identifier: GPL-2.0
//! The kernel half of the RoCEv2 responder: the machine
//! (`core/roce/responder.rs`) checks and orders the requests and queues the
//! responses; this gives it the receive side (`engine/rq.rs`), completes UD
//! datagrams with their GRH, and builds the response packets.

use kernel::prelude::*;

use super::packet::{bth, Outbox};
use crate::abi;
use crate::engine::mem::{REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use crate::engine::rq::RecvSide;
use crate::engine::Counter;
use crate::glue::net::IpRoute;
use crate::glue::{IbDevice, NetDevice};
use crate::psn::Psn;
use crate::qp_state::QpState;
use crate::roce::responder::{Access, RecvDone, ResponderIo, ResponderParams, Response};
use crate::roce::{Count, SendFail};
use crate::roce_wire::{
    Aeth, AtomicAckEth, Ext, Headers, Opcode, Packet, Payload, Syndrome, CREDITS_INVALID,
};
use crate::verbs::qp::{After, Qp, QpAttrs, QpInner};
use crate::verbs::srq::Taken;

/// Responses waiting to be sent (reads, atomic ACKs, ACKs, NAKs).
pub(crate) const QUEUE: usize = 256;

/// Bytes of the GRH a UD receive buffer starts with.
pub(crate) const GRH_LEN: usize = 40;

/// The responder machine as the kernel keeps it.
pub(crate) type Responder = crate::roce::responder::Responder<Taken, KVec<Response>>;

/// A responder with its response queue.
pub(crate) fn new_responder() -> Result<Responder> {
    let mut queue = KVec::with_capacity(QUEUE, GFP_KERNEL)?;
    for _ in 0..QUEUE {
        queue.push(Response::default(), GFP_KERNEL)?;
    }
    Ok(Responder::new(queue))
}

/// Facts about the packet from the IP and UDP layers.
pub(crate) struct RxMeta<'a> {
    /// The IP header as received (for the GRH of UD receives).
    pub(crate) ip_header: &'a [u8],
    pub(crate) ipv4: bool,
    pub(crate) smac: [u8; 6],
    /// The source address, as a GID.
    pub(crate) src: [u8; 16],
}

/// The responder's parameters from the QP's attributes.
fn params(qp: &Qp, a: &QpAttrs, mtu: u32) -> ResponderParams {
    ResponderParams {
        svc: qp.service(),
        mtu,
        remote_read: a.access & REMOTE_READ != 0,
        remote_write: a.access & REMOTE_WRITE != 0,
        remote_atomic: a.access & REMOTE_ATOMIC != 0,
        max_rd: core::cmp::max(u32::from(a.max_dest_rd_atomic), 1),
        min_rnr_timer: a.min_rnr_timer,
        qkey: a.qkey,
        max_msg: crate::limits::MAX_MSG_SIZE,
    }
}

/// The responder's I/O: the receive side, and the outbox.
struct RespIo<'a> {
    r: RecvSide<'a>,
    meta: Option<&'a RxMeta<'a>>,
    /// Where responses go (`None`: this step sends nothing).
    out: Option<(&'a NetDevice, &'a mut Outbox, IpRoute, u32)>,
}

impl ResponderIo for RespIo<'_> {
    type Recv = Taken;

    fn take_recv(&mut self) -> Option<Taken> {
        self.r.take()
    }

    fn recv_store(&mut self, r: &Taken, at: u64, data: Payload<'_>) -> Result<(), bool> {
        data.placed(at)
            .try_for_each(|(at, piece)| self.r.store(r, at, piece))
    }

    fn recv_done(&mut self, r: &Taken, d: RecvDone) {
        self.r.done(r, d)
    }

    fn datagram(&mut self, wqe: Taken, pkt: &Packet<'_>) {
        let Some(meta) = self.meta else { return };
        let Some(deth) = pkt.hdr.deth else { return };
        // The 40-byte GRH area: an IPv6 header, or 20 zero bytes and the
        // IPv4 header (ib_core tells them apart by the IPv4 checksum).
        let mut grh = [0u8; GRH_LEN];
        if meta.ipv4 {
            let n = core::cmp::min(meta.ip_header.len(), 20);
            grh[20..20 + n].copy_from_slice(&meta.ip_header[..n]);
        } else {
            let n = core::cmp::min(meta.ip_header.len(), GRH_LEN);
            grh[..n].copy_from_slice(&meta.ip_header[..n]);
        }
        let total = (GRH_LEN + pkt.payload.len()) as u32;
        let copied = self
            .r
            .store(&wqe, 0, &grh)
            .and_then(|()| self.recv_store(&wqe, GRH_LEN as u64, pkt.payload));
        let status = match copied {
            Ok(()) => abi::WC_SUCCESS,
            Err(true) => abi::WC_LOC_LEN_ERR,
            Err(false) => abi::WC_LOC_PROT_ERR,
        };
        let mut cqe = self.r.qp.recv_cqe(wqe.wr_id, abi::WC_RECV, status, total);
        cqe.wc_flags |= abi::WC_GRH;
        if let Some(imm) = pkt.hdr.imm_dt {
            cqe.wc_flags |= abi::WC_WITH_IMM;
            cqe.ex = imm.data.to_be();
        }
        cqe.src_qp = deth.src_qp;
        cqe.network_hdr_type = if meta.ipv4 { 2 } else { 3 };
        cqe.smac = meta.smac;
        self.r.complete(&cqe, pkt.hdr.bth.solicited);
    }

    fn remote_ok(&mut self, rkey: u32, va: u64, len: u64, access: Access) -> bool {
        self.r.remote_ok(rkey, va, len, access)
    }

    fn remote_write(&mut self, rkey: u32, va: u64, data: Payload<'_>) -> bool {
        self.r.remote_write_pieces(rkey, va, data.pieces())
    }

    fn remote_atomic(
        &mut self,
        rkey: u32,
        va: u64,
        cmp_swap: bool,
        compare: u64,
        swap_add: u64,
    ) -> Option<u64> {
        self.r.remote_atomic(rkey, va, cmp_swap, compare, swap_add)
    }

    fn invalidate(&mut self, rkey: u32) -> bool {
        self.r.invalidate(rkey)
    }

    fn send_ack(
        &mut self,
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
        orig: Option<u64>,
    ) -> Result<(), SendFail> {
        let dev = self.r.dev;
        let Some((ndev, out, route, dest_qp)) = self.out.as_mut() else {
            return Err(SendFail::Full);
        };
        let opcode = if orig.is_some() {
            Opcode::RcAtomicAck
        } else {
            Opcode::RcAck
        };
        let mut h = Headers::new(bth(opcode, *dest_qp, psn));
        h.aeth = Some(Aeth { syndrome, msn });
        h.atomic_ack_eth = orig.map(|orig| AtomicAckEth { orig });
        out.build(dev, ndev, route, &h, 0, |_| true)
    }

    fn send_read(
        &mut self,
        psn: Psn,
        opcode: Opcode,
        msn: u32,
        rkey: u32,
        va: u64,
        len: u32,
    ) -> Result<(), SendFail> {
        let (r, dev) = (&self.r, self.r.dev);
        let Some((ndev, out, route, dest_qp)) = self.out.as_mut() else {
            return Err(SendFail::Full);
        };
        let mut h = Headers::new(bth(opcode, *dest_qp, psn));
        if opcode.layout().has(Ext::Aeth) {
            h.aeth = Some(Aeth {
                syndrome: Syndrome::Ack {
                    credits: CREDITS_INVALID,
                },
                msn,
            });
        }
        out.build(dev, ndev, route, &h, len as usize, |buf| {
            r.remote_read(rkey, va, buf)
        })
    }

    fn count(&mut self, c: Count) {
        self.r.qp.count(Counter::from(c));
    }
}

impl Qp {
    /// A request packet for this QP (the QP lock held).
    pub(crate) fn on_request(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        meta: &RxMeta<'_>,
        mtu: u32,
        after: &mut After,
    ) {
        if !matches!(
            s.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            self.count(Counter::RxBadState);
            return;
        }
        let p = params(self, &s.attrs, mtu);
        let QpInner {
            rq, rq_cons, eng, ..
        } = s;
        let mut io = RespIo {
            r: RecvSide {
                qp: self,
                dev,
                rq: rq.as_ref(),
                rq_cons,
                after: &mut *after,
            },
            meta: Some(meta),
            out: None,
        };
        let o = eng.resp.on_request(&p, &mut io, pkt);
        self.outcome(s, o, after);
    }

    /// Send queued responses (in order) while the outbox has room.
    pub(crate) fn emit_responses(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        ndev: &NetDevice,
        out: &mut Outbox,
    ) {
        if s.state == QpState::Reset || !s.eng.resp.has_responses() {
            return;
        }
        let Some(route) = self.route(s) else {
            s.eng.resp.drop_responses();
            return;
        };
        let p = params(self, &s.attrs, self.mtu(s, ndev));
        let dest_qp = s.attrs.dest_qpn;
        // Sending responses completes nothing.
        let mut after = After::default();
        let QpInner {
            rq, rq_cons, eng, ..
        } = s;
        let mut io = RespIo {
            r: RecvSide {
                qp: self,
                dev,
                rq: rq.as_ref(),
                rq_cons,
                after: &mut after,
            },
            meta: None,
            out: Some((ndev, out, route, dest_qp)),
        };
        eng.resp.emit(&p, &mut io);
    }
}
