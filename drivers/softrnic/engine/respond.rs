// SPDX-License-Identifier: GPL-2.0
//! The responder: request packets (SEND, RDMA WRITE, RDMA READ, atomics)
//! checked against the PSN, the opcode sequence, the receive queue and the
//! memory keys, then executed; receive completions; and the responses
//! (ACKs, NAKs, read responses, atomic ACKs), which leave in PSN order from
//! one queue.  Duplicates are answered again, never executed again: a
//! duplicate atomic is answered from the saved result.

use kernel::prelude::*;

use super::mem::{self, Data, Requestor, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE};
use super::packet::{bth, Built, Outbox};
use super::Counter;
use crate::abi::{self, Cqe};
use crate::glue::events::Event;
use crate::glue::net::IpRoute;
use crate::glue::{IbDevice, NetDevice};
use crate::psn::Psn;
use crate::qp_state::QpState;
use crate::roce_wire::{
    Aeth, AtomicAckEth, Headers, NakCode, Opcode, Packet, Reth, Syndrome, CREDITS_INVALID,
};
use crate::transport_rules::{self as rules, InMessage, MsgOp, Place, PsnCheck, Service};
use crate::verbs::qp::{After, Qp, QpInner};
use crate::verbs::srq::Taken;

/// Responses waiting to be sent (reads, atomic ACKs, ACKs, NAKs).
const QUEUE: usize = 256;
/// Atomic results kept for duplicate requests.
const ATOMIC_HISTORY: usize = 16;

/// One response to send, in PSN order.
#[derive(Clone, Copy)]
pub(crate) enum Response {
    Read {
        psn: u32,
        va: u64,
        rkey: u32,
        len: u32,
        npkts: u32,
        sent: u32,
    },
    Atomic {
        psn: u32,
        orig: u64,
    },
    Ack {
        psn: u32,
        syndrome: Syndrome,
    },
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

/// A receive in progress (a multi-packet SEND).
struct Receiving {
    wqe: Taken,
    got: u32,
}

pub(crate) struct Responder {
    pub(crate) epsn: Psn,
    msn: u32,
    msg: InMessage,
    recv: Option<Receiving>,
    /// A WRITE in progress: rkey, next address, bytes still to come.
    write: (u32, u64, u32),
    /// A sequence-error NAK was sent for the current `epsn`.
    nak_sent: bool,
    queue: KVec<Response>,
    head: usize,
    len: usize,
    /// READ/atomic requests queued and not yet fully answered.
    rd_pending: u32,
    atomics: [(u32, u64, bool); ATOMIC_HISTORY],
    atomic_next: usize,
}

impl Responder {
    pub(crate) fn new() -> Result<Responder> {
        let mut queue = KVec::with_capacity(QUEUE, GFP_KERNEL)?;
        for _ in 0..QUEUE {
            queue.push(Response::Atomic { psn: 0, orig: 0 }, GFP_KERNEL)?;
        }
        Ok(Responder {
            epsn: Psn::new(0),
            msn: 0,
            msg: InMessage::None,
            recv: None,
            write: (0, 0, 0),
            nak_sent: false,
            queue,
            head: 0,
            len: 0,
            rd_pending: 0,
            atomics: [(0, 0, false); ATOMIC_HISTORY],
            atomic_next: 0,
        })
    }

    /// Start over expecting `rq_psn` (entering RTR).
    pub(crate) fn restart(&mut self, rq_psn: u32) {
        self.epsn = Psn::new(rq_psn);
        self.msn = 0;
        self.msg = InMessage::None;
        self.recv = None;
        self.nak_sent = false;
        self.head = 0;
        self.len = 0;
        self.rd_pending = 0;
        self.atomics = [(0, 0, false); ATOMIC_HISTORY];
    }

    fn push(&mut self, r: Response) -> bool {
        // Consecutive ACKs collapse into the last one.
        if let (Response::Ack { .. }, Some(last)) = (r, self.back_mut()) {
            if let Response::Ack {
                syndrome: Syndrome::Ack { .. },
                ..
            } = last
            {
                if let Response::Ack {
                    syndrome: Syndrome::Ack { .. },
                    ..
                } = r
                {
                    *last = r;
                    return true;
                }
            }
        }
        if self.len == QUEUE {
            return false;
        }
        let i = (self.head + self.len) % QUEUE;
        self.queue[i] = r;
        self.len += 1;
        true
    }

    fn back_mut(&mut self) -> Option<&mut Response> {
        if self.len == 0 {
            return None;
        }
        let i = (self.head + self.len - 1) % QUEUE;
        self.queue.get_mut(i)
    }

    fn front(&self) -> Option<Response> {
        (self.len != 0).then(|| self.queue[self.head])
    }

    fn pop(&mut self) {
        if self.len != 0 {
            self.head = (self.head + 1) % QUEUE;
            self.len -= 1;
        }
    }

    /// Forget the queued responses that end at or after `psn`: a duplicate
    /// READ or atomic request at `psn` means the requester went back there
    /// and will ask again for everything from it on (go-back-N), so their
    /// answers would only be discarded, and they would hold READ/atomic
    /// resources (`rd_pending`) that the requester counts as free.  The one
    /// a restarted READ lands in the middle of goes too.
    fn forget_from(&mut self, psn: Psn) {
        let mut keep = 0;
        while keep < self.len {
            let last = match self.queue[(self.head + keep) % QUEUE] {
                Response::Read { psn, npkts, .. } => psn.wrapping_add(npkts.saturating_sub(1)),
                Response::Atomic { psn, .. } | Response::Ack { psn, .. } => psn,
            };
            if crate::psn::diff(Psn::new(last), psn) >= 0 {
                break;
            }
            keep += 1;
        }
        for i in keep..self.len {
            if matches!(
                self.queue[(self.head + i) % QUEUE],
                Response::Read { .. } | Response::Atomic { .. }
            ) {
                self.rd_pending = self.rd_pending.saturating_sub(1);
            }
        }
        self.len = keep;
    }

    /// One more message done: the MSN is a 24-bit counter.
    fn next_msn(&mut self) {
        self.msn = self.msn.wrapping_add(1) & 0xff_ffff;
    }

    fn ack(&mut self, psn: Psn) {
        self.push(Response::Ack {
            psn: psn.get(),
            syndrome: Syndrome::Ack {
                credits: CREDITS_INVALID,
            },
        });
    }

    fn nak(&mut self, psn: Psn, code: NakCode) {
        self.push(Response::Ack {
            psn: psn.get(),
            syndrome: Syndrome::Nak(code),
        });
    }

    /// The wr_id of a receive WQE a multi-packet SEND had begun to fill
    /// (the QP is going to ERR: it completes as flushed).
    pub(crate) fn take_partial_recv(&mut self) -> Option<u64> {
        self.recv.take().map(|r| r.wqe.wr_id)
    }

    pub(crate) fn has_responses(&self) -> bool {
        self.len != 0
    }
}

/// Why a request failed at the responder: what the requester is told.
enum Fail {
    /// NAK with this code and move to ERR (RC); drop the message (UC).
    Nak(NakCode),
    /// No receive WQE: RNR NAK (RC), drop (UC).
    Rnr,
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
            dev.counters().bump(Counter::RxBadState);
            return;
        }
        let bth = &pkt.hdr.bth;
        let Some((op, place)) = rules::request_kind(bth.opcode) else {
            return;
        };
        let svc = self.service();
        let len_ok = rules::payload_len_ok(place, pkt.payload.len() as u32, mtu);
        if svc == Service::Ud {
            if !len_ok {
                dev.counters().bump(Counter::RxMalformed);
                return;
            }
            self.recv_datagram(s, dev, pkt, meta, after);
            return;
        }
        let psn = bth.psn;
        match rules::check_psn(psn, s.eng.resp.epsn) {
            PsnCheck::Expected => {}
            PsnCheck::Duplicate if svc == Service::Rc => {
                dev.counters().bump(Counter::RxDuplicate);
                self.duplicate(s, dev, pkt, op, place, mtu);
                return;
            }
            PsnCheck::Ahead if svc == Service::Rc => {
                if !s.eng.resp.nak_sent {
                    s.eng.resp.nak_sent = true;
                    let e = s.eng.resp.epsn;
                    s.eng.resp.nak(e, NakCode::PsnSequenceError);
                    dev.counters().bump(Counter::SeqNakSent);
                }
                return;
            }
            _ => {
                // UC: a lost packet loses its message; a new message
                // starts wherever the next FIRST or ONLY is.
                self.abort_message(s);
                if !place.starts() {
                    return;
                }
                s.eng.resp.epsn = psn;
            }
        }
        if !rules::sequence_ok(s.eng.resp.msg, op, place) {
            if svc == Service::Uc {
                self.abort_message(s);
                if !place.starts() {
                    return;
                }
            } else {
                self.fail(s, psn, Fail::Nak(NakCode::InvalidRequest), after);
                return;
            }
        }
        let r = match op {
            _ if !len_ok => Err(Fail::Nak(NakCode::InvalidRequest)),
            MsgOp::Send | MsgOp::SendImm | MsgOp::SendInv => {
                self.recv_send(s, dev, pkt, op, place, after)
            }
            MsgOp::Write | MsgOp::WriteImm => self.recv_write(s, dev, pkt, op, place, after),
            MsgOp::Read => self.recv_read(s, dev, pkt, mtu),
            MsgOp::CmpSwap | MsgOp::FetchAdd => self.recv_atomic(s, dev, pkt, op),
        };
        match r {
            Ok(npkts) => {
                let resp = &mut s.eng.resp;
                resp.epsn = psn.offset(npkts as i32);
                resp.nak_sent = false;
                resp.msg = rules::after_packet(op, place);
                if svc == Service::Rc
                    && bth.ack_req
                    && !matches!(op, MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd)
                {
                    resp.ack(psn);
                }
            }
            Err(f) => {
                if svc == Service::Uc {
                    self.abort_message(s);
                } else {
                    self.fail(s, psn, f, after);
                }
            }
        }
    }

    /// UC: forget the message in progress (its receive WQE is kept for the
    /// next message).
    fn abort_message(&self, s: &mut QpInner) {
        let resp = &mut s.eng.resp;
        resp.msg = InMessage::None;
        if let Some(rc) = &mut resp.recv {
            rc.got = 0;
        }
    }

    /// An RC request failed: tell the requester.
    fn fail(&self, s: &mut QpInner, psn: Psn, f: Fail, after: &mut After) {
        match f {
            Fail::Rnr => {
                let timer = s.attrs.min_rnr_timer;
                s.eng.resp.push(Response::Ack {
                    psn: psn.get(),
                    syndrome: Syndrome::RnrNak { timer },
                });
                self.dev().counters().bump(Counter::RnrNakSent);
            }
            Fail::Nak(code) => {
                s.eng.resp.nak(psn, code);
                after.event = Some(match code {
                    NakCode::RemoteAccessError => Event::QpAccessErr,
                    _ => Event::QpRequestErr,
                });
                self.enter(s, QpState::Err, after);
            }
        }
    }

    /// Take the next receive WQE (RQ or SRQ).
    fn take_recv(&self, s: &mut QpInner, after: &mut After) -> Option<Taken> {
        if let Some(srq) = self.srq_ref() {
            let (t, limit) = srq.inner.lock().take();
            after.srq_limit |= limit;
            return t;
        }
        let rq = s.rq.as_ref()?;
        let prod = rq.producer();
        if prod == s.rq_cons {
            return None;
        }
        let t = Taken::read(rq, s.rq_cons, self.caps.max_recv_sge);
        s.rq_cons = s.rq_cons.wrapping_add(1);
        rq.set_consumer(s.rq_cons);
        t
    }

    fn recv_cqe(&self, wr_id: u64, opcode: u8, status: u8, byte_len: u32) -> Cqe {
        let mut c = self.send_cqe(wr_id, abi::WR_SEND, status);
        c.opcode = opcode;
        c.byte_len = byte_len;
        c
    }

    fn complete_recv(&self, cqe: &Cqe, solicited: bool, after: &mut After) {
        let (_, owed) = self.recv_cq().push(cqe, solicited);
        after.recv_cq.merge(owed);
    }

    #[allow(clippy::too_many_arguments)]
    fn recv_send(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        op: MsgOp,
        place: Place,
        after: &mut After,
    ) -> Result<u32, Fail> {
        let len = pkt.payload.len() as u32;
        if place.starts() && s.eng.resp.recv.is_none() {
            let Some(wqe) = self.take_recv(s, after) else {
                return Err(Fail::Rnr);
            };
            s.eng.resp.recv = Some(Receiving { wqe, got: 0 });
        }
        let who = self.requestor();
        let Some(rc) = s.eng.resp.recv.as_mut() else {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        };
        let at = u64::from(rc.got);
        let copied = mem::sgl_copy(
            dev.verbs(),
            who.pd,
            rc.wqe.sges(),
            at,
            Data::Store(pkt.payload),
        );
        rc.got += len;
        if let Err(too_short) = copied {
            let (status, code) = if too_short {
                (abi::WC_LOC_LEN_ERR, NakCode::InvalidRequest)
            } else {
                (abi::WC_LOC_PROT_ERR, NakCode::RemoteOperationalError)
            };
            let wr_id = rc.wqe.wr_id;
            s.eng.resp.recv = None;
            self.complete_recv(&self.recv_cqe(wr_id, abi::WC_RECV, status, 0), false, after);
            return Err(Fail::Nak(code));
        }
        if place.ends() {
            let Some(rc) = s.eng.resp.recv.take() else {
                return Err(Fail::Nak(NakCode::InvalidRequest));
            };
            let mut cqe = self.recv_cqe(rc.wqe.wr_id, abi::WC_RECV, abi::WC_SUCCESS, rc.got);
            with_imm(&mut cqe, pkt);
            if let (MsgOp::SendInv, Some(ieth)) = (op, pkt.hdr.ieth) {
                if !mem::remote_invalidate(dev.verbs(), who, ieth.rkey) {
                    cqe.status = abi::WC_REM_INV_REQ_ERR;
                    self.complete_recv(&cqe, true, after);
                    return Err(Fail::Nak(NakCode::InvalidRequest));
                }
                cqe.wc_flags |= abi::WC_WITH_INV;
                cqe.ex = ieth.rkey;
            }
            s.eng.resp.next_msn();
            self.complete_recv(&cqe, pkt.hdr.bth.solicited, after);
        }
        Ok(1)
    }

    #[allow(clippy::too_many_arguments)]
    fn recv_write(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        op: MsgOp,
        place: Place,
        after: &mut After,
    ) -> Result<u32, Fail> {
        let len = pkt.payload.len() as u32;
        let who = self.requestor();
        if place.starts() {
            let Some(reth) = pkt.hdr.reth else {
                return Err(Fail::Nak(NakCode::InvalidRequest));
            };
            if s.attrs.access & REMOTE_WRITE == 0 {
                return Err(Fail::Nak(NakCode::RemoteAccessError));
            }
            if reth.dma_len != 0
                && mem::with_remote(
                    dev.verbs(),
                    who,
                    reth.rkey,
                    reth.va,
                    u64::from(reth.dma_len),
                    REMOTE_WRITE,
                    |_, _| (),
                )
                .is_none()
            {
                return Err(Fail::Nak(NakCode::RemoteAccessError));
            }
            s.eng.resp.write = (reth.rkey, reth.va, reth.dma_len);
        }
        let (rkey, va, left) = s.eng.resp.write;
        if len > left || (place.ends() && len != left) {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        // A WRITE with immediate consumes a receive WQE: take it before
        // anything is written (none: an RNR NAK, nothing changed).
        let wqe = if op == MsgOp::WriteImm && place.ends() {
            Some(self.take_recv(s, after).ok_or(Fail::Rnr)?)
        } else {
            None
        };
        if len != 0 {
            let ok = mem::with_remote(
                dev.verbs(),
                who,
                rkey,
                va,
                u64::from(len),
                REMOTE_WRITE,
                |m, iova| m.copy(iova, Data::Store(pkt.payload)),
            );
            if ok != Some(true) {
                if let Some(w) = wqe {
                    let st = abi::WC_WR_FLUSH_ERR;
                    let cqe = self.recv_cqe(w.wr_id, abi::WC_RECV_RDMA_WITH_IMM, st, 0);
                    self.complete_recv(&cqe, false, after);
                }
                return Err(Fail::Nak(NakCode::RemoteAccessError));
            }
        }
        s.eng.resp.write = (rkey, va.wrapping_add(u64::from(len)), left - len);
        if place.ends() {
            s.eng.resp.next_msn();
            if let Some(wqe) = wqe {
                let mut cqe =
                    self.recv_cqe(wqe.wr_id, abi::WC_RECV_RDMA_WITH_IMM, abi::WC_SUCCESS, 0);
                with_imm(&mut cqe, pkt);
                self.complete_recv(&cqe, pkt.hdr.bth.solicited, after);
            }
        }
        Ok(1)
    }

    fn recv_read(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        mtu: u32,
    ) -> Result<u32, Fail> {
        let Some(reth) = pkt.hdr.reth else {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        };
        let npkts = self.queue_read(s, dev, &reth, pkt.hdr.bth.psn, mtu)?;
        s.eng.resp.next_msn();
        Ok(npkts)
    }

    /// Check a READ request (new or duplicate) and queue its response;
    /// the PSNs it takes.
    fn queue_read(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        reth: &Reth,
        psn: Psn,
        mtu: u32,
    ) -> Result<u32, Fail> {
        if s.attrs.access & REMOTE_READ == 0 {
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        }
        if reth.dma_len > crate::limits::MAX_MSG_SIZE {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        if reth.dma_len != 0
            && mem::with_remote(
                dev.verbs(),
                self.requestor(),
                reth.rkey,
                reth.va,
                u64::from(reth.dma_len),
                REMOTE_READ,
                |_, _| (),
            )
            .is_none()
        {
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        }
        if s.eng.resp.rd_pending >= rd_limit(s) {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        let npkts = rules::packets(reth.dma_len, mtu);
        let queued = s.eng.resp.push(Response::Read {
            psn: psn.get(),
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
            npkts,
            sent: 0,
        });
        if !queued {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        s.eng.resp.rd_pending += 1;
        Ok(npkts)
    }

    fn recv_atomic(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        op: MsgOp,
    ) -> Result<u32, Fail> {
        let Some(a) = pkt.hdr.atomic_eth else {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        };
        if s.attrs.access & REMOTE_ATOMIC == 0 {
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        }
        if a.va % 8 != 0 {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        if s.eng.resp.rd_pending >= rd_limit(s) {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        let orig = mem::with_remote(
            dev.verbs(),
            self.requestor(),
            a.rkey,
            a.va,
            8,
            REMOTE_ATOMIC,
            |m, iova| {
                m.atomic(iova, |w| {
                    mem::atomic_op(w, op == MsgOp::CmpSwap, a.compare, a.swap_add)
                })
            },
        );
        let Some(Some(orig)) = orig else {
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        };
        let psn = pkt.hdr.bth.psn.get();
        let resp = &mut s.eng.resp;
        if !resp.push(Response::Atomic { psn, orig }) {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        resp.rd_pending += 1;
        resp.atomics[resp.atomic_next] = (psn, orig, true);
        resp.atomic_next = (resp.atomic_next + 1) % ATOMIC_HISTORY;
        resp.next_msn();
        Ok(1)
    }

    /// A request already executed: answer it again.
    fn duplicate(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        op: MsgOp,
        place: Place,
        mtu: u32,
    ) {
        let psn = pkt.hdr.bth.psn;
        match op {
            MsgOp::Read => {
                // Reads are idempotent: re-read what is asked (the request
                // may restart inside the original range), with the checks
                // of a new READ; a duplicate that fails them is dropped.
                if let Some(reth) = pkt.hdr.reth {
                    s.eng.resp.forget_from(psn);
                    let _ = self.queue_read(s, dev, &reth, psn, mtu);
                }
            }
            MsgOp::CmpSwap | MsgOp::FetchAdd => {
                // Never executed twice: the saved result, or nothing if it
                // is too old to be remembered.
                let found = s
                    .eng
                    .resp
                    .atomics
                    .iter()
                    .find(|a| a.2 && a.0 == psn.get())
                    .copied();
                if let Some((p, orig, _)) = found {
                    s.eng.resp.forget_from(psn);
                    if s.eng.resp.push(Response::Atomic { psn: p, orig }) {
                        s.eng.resp.rd_pending += 1;
                    }
                }
            }
            _ => {
                // SEND/WRITE: acknowledge again (the newest PSN done), at
                // the packets that ask for it.
                if rules::ack_duplicate(pkt.hdr.bth.ack_req, place) {
                    let last = s.eng.resp.epsn.offset(-1);
                    s.eng.resp.ack(last);
                }
            }
        }
    }

    /// A UD (or GSI) datagram.
    fn recv_datagram(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        meta: &RxMeta<'_>,
        after: &mut After,
    ) {
        let Some(deth) = pkt.hdr.deth else { return };
        if deth.qkey != s.attrs.qkey {
            dev.counters().bump(Counter::RxBadState);
            return;
        }
        let Some(wqe) = self.take_recv(s, after) else {
            // No receive posted: a datagram is simply lost.
            dev.counters().bump(Counter::RxBadState);
            return;
        };
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
        let pd = self.ib.pd as usize;
        let v = dev.verbs();
        let total = (GRH_LEN + pkt.payload.len()) as u32;
        let mut status = abi::WC_SUCCESS;
        let copied = mem::sgl_copy(v, pd, wqe.sges(), 0, Data::Store(&grh)).and_then(|()| {
            mem::sgl_copy(v, pd, wqe.sges(), GRH_LEN as u64, Data::Store(pkt.payload))
        });
        if let Err(too_short) = copied {
            status = if too_short {
                abi::WC_LOC_LEN_ERR
            } else {
                abi::WC_LOC_PROT_ERR
            };
        }
        let mut cqe = self.recv_cqe(wqe.wr_id, abi::WC_RECV, status, total);
        cqe.wc_flags |= abi::WC_GRH;
        with_imm(&mut cqe, pkt);
        cqe.src_qp = deth.src_qp;
        cqe.network_hdr_type = if meta.ipv4 { 2 } else { 3 };
        cqe.smac = meta.smac;
        self.complete_recv(&cqe, pkt.hdr.bth.solicited, after);
    }

    pub(crate) fn requestor(&self) -> Requestor {
        Requestor {
            pd: self.ib.pd as usize,
            qpn: self.qpn(),
        }
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
            s.eng.resp.head = 0;
            s.eng.resp.len = 0;
            return;
        };
        let mtu = self.mtu(s, ndev);
        let dest_qp = s.attrs.dest_qpn;
        while let Some(r) = s.eng.resp.front() {
            let msn = s.eng.resp.msn;
            let res = match r {
                Response::Ack { psn, syndrome } => {
                    let mut h = Headers::new(bth(Opcode::RcAck, dest_qp, Psn::new(psn)));
                    h.aeth = Some(Aeth { syndrome, msn });
                    out.build(dev, ndev, &route, &h, 0, |_| true).map(|()| true)
                }
                Response::Atomic { psn, orig } => {
                    let mut h = Headers::new(bth(Opcode::RcAtomicAck, dest_qp, Psn::new(psn)));
                    h.aeth = Some(Aeth {
                        syndrome: Syndrome::Ack {
                            credits: CREDITS_INVALID,
                        },
                        msn,
                    });
                    h.atomic_ack_eth = Some(AtomicAckEth { orig });
                    out.build(dev, ndev, &route, &h, 0, |_| true).map(|()| true)
                }
                Response::Read {
                    psn,
                    va,
                    rkey,
                    len,
                    npkts,
                    sent,
                } => self.read_response(
                    s,
                    dev,
                    ndev,
                    out,
                    &route,
                    dest_qp,
                    msn,
                    (psn, va, rkey, len, npkts, sent),
                    mtu,
                ),
            };
            match res {
                Ok(true) => {
                    if matches!(r, Response::Read { .. } | Response::Atomic { .. }) {
                        s.eng.resp.rd_pending = s.eng.resp.rd_pending.saturating_sub(1);
                    }
                    s.eng.resp.pop();
                }
                Ok(false) => {}
                Err(Built::Full) => break,
                Err(Built::BadMemory) => {
                    // The memory went away under a read: nothing more to
                    // send for it.
                    s.eng.resp.rd_pending = s.eng.resp.rd_pending.saturating_sub(1);
                    s.eng.resp.pop();
                }
                Err(_) => break,
            }
        }
    }

    /// Send the next packet of a read response; `Ok(true)` when it was the
    /// last.
    #[allow(clippy::too_many_arguments)]
    fn read_response(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        ndev: &NetDevice,
        out: &mut Outbox,
        route: &IpRoute,
        dest_qp: u32,
        msn: u32,
        r: (u32, u64, u32, u32, u32, u32),
        mtu: u32,
    ) -> Result<bool, Built> {
        let (psn, va, rkey, len, npkts, sent) = r;
        let off = sent * mtu;
        let n = core::cmp::min(mtu, len - core::cmp::min(off, len));
        let opcode = rules::read_response_opcode(sent, npkts);
        let mut h = Headers::new(bth(opcode, dest_qp, Psn::new(psn).offset(sent as i32)));
        if opcode.layout().has(crate::roce_wire::Ext::Aeth) {
            h.aeth = Some(Aeth {
                syndrome: Syndrome::Ack {
                    credits: CREDITS_INVALID,
                },
                msn,
            });
        }
        let who = self.requestor();
        let addr = va.wrapping_add(u64::from(off));
        out.build(dev, ndev, route, &h, n as usize, |buf| {
            buf.is_empty()
                || mem::with_remote(
                    dev.verbs(),
                    who,
                    rkey,
                    addr,
                    buf.len() as u64,
                    REMOTE_READ,
                    |m, iova| m.copy(iova, Data::Load(buf)),
                ) == Some(true)
        })?;
        let last = sent + 1 >= npkts;
        if !last {
            if let Some(Response::Read { sent, .. }) = s.eng.resp.queue.get_mut(s.eng.resp.head) {
                *sent += 1;
            }
        }
        Ok(last)
    }
}

/// READ and atomic requests the responder takes at once
/// (`max_dest_rd_atomic`, at least one).
fn rd_limit(s: &QpInner) -> u32 {
    core::cmp::max(u32::from(s.attrs.max_dest_rd_atomic), 1)
}

/// A receive completion for a packet with immediate data carries it.
fn with_imm(cqe: &mut Cqe, pkt: &Packet<'_>) {
    if let Some(imm) = pkt.hdr.imm_dt {
        cqe.wc_flags |= abi::WC_WITH_IMM;
        cqe.ex = imm.data.to_be();
    }
}

/// Bytes of the GRH a UD receive buffer starts with.
pub(crate) const GRH_LEN: usize = 40;
