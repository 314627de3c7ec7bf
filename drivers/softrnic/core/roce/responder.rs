// SPDX-License-Identifier: GPL-2.0
//! The responder: request packets (SEND, RDMA WRITE, RDMA READ, atomics)
//! checked against the PSN, the opcode sequence, the receive queue and the
//! memory keys, then executed; receive completions; and the responses
//! (ACKs, NAKs, read responses, atomic ACKs), which leave in PSN order from
//! one queue.  Duplicates are answered again, never executed again: a
//! duplicate atomic is answered from the saved result.  UD datagrams are
//! checked (Q_Key) and handed to the caller with a receive WQE.

use core::ops::DerefMut;

use super::{wc, Count, Outcome, RemoteError, SendFail};
use crate::psn::{self, Psn};
use crate::roce_wire::{NakCode, Opcode, Packet, Payload, Syndrome, CREDITS_INVALID};
use crate::transport_rules::{self as rules, InMessage, MsgOp, Place, PsnCheck, Service};

/// Atomic results kept for duplicate requests.
pub(crate) const ATOMIC_HISTORY: usize = 16;

/// One response to send, in PSN order.
#[derive(Clone, Copy, Debug)]
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

impl Default for Response {
    fn default() -> Response {
        Response::Atomic { psn: 0, orig: 0 }
    }
}

/// The kind of remote access a request needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    Atomic,
}

/// A receive completion to report.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvDone {
    /// A WRITE with immediate (IBV_WC_RECV_RDMA_WITH_IMM), else a receive.
    pub(crate) write_imm: bool,
    pub(crate) status: u8,
    pub(crate) byte_len: u32,
    /// Immediate data, as on the wire (big-endian value).
    pub(crate) imm: Option<u32>,
    /// The rkey a SEND with invalidate invalidated.
    pub(crate) invalidated: Option<u32>,
    pub(crate) solicited: bool,
}

/// The I/O a responder asks of the caller; `Recv` is a receive WQE taken
/// from the RQ or SRQ.
pub(crate) trait ResponderIo {
    type Recv;
    /// Take the next receive WQE.
    fn take_recv(&mut self) -> Option<Self::Recv>;
    /// Store `data` at byte `at` of a receive WQE's buffers; `Err(true)` if
    /// they are too short, `Err(false)` if their memory refuses.
    fn recv_store(&mut self, r: &Self::Recv, at: u64, data: Payload<'_>) -> Result<(), bool>;
    /// Complete a receive WQE.
    fn recv_done(&mut self, r: &Self::Recv, d: RecvDone);
    /// A UD datagram for receive WQE `r`: store it (after its GRH) and
    /// complete `r`.
    fn datagram(&mut self, r: Self::Recv, pkt: &Packet<'_>);
    /// Whether `len` bytes at `va` under `rkey` allow `access` to the
    /// requesting QP.
    fn remote_ok(&mut self, rkey: u32, va: u64, len: u64, access: Access) -> bool;
    /// Write `data` at `va` under `rkey` (checked like `remote_ok`).
    fn remote_write(&mut self, rkey: u32, va: u64, data: Payload<'_>) -> bool;
    /// Execute an atomic on the 8 bytes at `va`; the original value.
    fn remote_atomic(
        &mut self,
        rkey: u32,
        va: u64,
        cmp_swap: bool,
        compare: u64,
        swap_add: u64,
    ) -> Option<u64>;
    /// Invalidate `rkey` (SEND with invalidate); false if not allowed.
    fn invalidate(&mut self, rkey: u32) -> bool;
    /// Send an ACK, NAK or atomic ACK (`orig`).
    fn send_ack(
        &mut self,
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
        orig: Option<u64>,
    ) -> Result<(), SendFail>;
    /// Send one read response packet: `len` bytes from `va` under `rkey`.
    #[allow(clippy::too_many_arguments)]
    fn send_read(
        &mut self,
        psn: Psn,
        opcode: Opcode,
        msn: u32,
        rkey: u32,
        va: u64,
        len: u32,
    ) -> Result<(), SendFail>;
    fn count(&mut self, c: Count);
}

/// What the responder works with, from the QP's attributes.
#[derive(Clone, Copy)]
pub(crate) struct ResponderParams {
    pub(crate) svc: Service,
    pub(crate) mtu: u32,
    pub(crate) remote_read: bool,
    pub(crate) remote_write: bool,
    pub(crate) remote_atomic: bool,
    /// READ and atomic requests taken at once (max_dest_rd_atomic, >= 1).
    pub(crate) max_rd: u32,
    pub(crate) min_rnr_timer: u8,
    pub(crate) qkey: u32,
    /// The largest message a READ may ask for.
    pub(crate) max_msg: u32,
}

/// A receive in progress (a multi-packet SEND).
struct Receiving<R> {
    wqe: R,
    got: u32,
}

/// The responder's state; `S` stores the response queue.
pub(crate) struct Responder<R, S> {
    pub(crate) epsn: Psn,
    msn: u32,
    msg: InMessage,
    recv: Option<Receiving<R>>,
    /// A WRITE in progress: rkey, next address, bytes still to come.
    write: (u32, u64, u32),
    /// A sequence-error NAK was sent for the current `epsn`.
    nak_sent: bool,
    queue: S,
    head: usize,
    len: usize,
    /// READ/atomic requests queued and not yet fully answered.
    rd_pending: u32,
    atomics: [(u32, u64, bool); ATOMIC_HISTORY],
    atomic_next: usize,
}

/// Why a request failed: what the requester is told.
enum Fail {
    /// NAK with this code and move to ERR (RC); drop the message (UC).
    Nak(NakCode),
    /// No receive WQE: RNR NAK (RC), drop (UC).
    Rnr,
}

impl<R, S: DerefMut<Target = [Response]>> Responder<R, S> {
    /// A responder with `queue` (non-empty) as its response queue.
    pub(crate) fn new(queue: S) -> Self {
        Responder {
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
        }
    }

    /// Start over expecting `rq_psn` (entering RTR, or RESET with 0).
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

    /// The receive WQE a multi-packet SEND had begun to fill (the QP is
    /// going to ERR: it completes as flushed).
    pub(crate) fn take_partial_recv(&mut self) -> Option<R> {
        self.recv.take().map(|r| r.wqe)
    }

    pub(crate) fn has_responses(&self) -> bool {
        self.len != 0
    }

    /// Drop every queued response (no route to send them on).
    pub(crate) fn drop_responses(&mut self) {
        self.head = 0;
        self.len = 0;
        self.rd_pending = 0;
    }

    /// READ/atomic requests queued and not fully answered (never above
    /// `max_rd`).
    pub(crate) fn rd_pending(&self) -> u32 {
        self.rd_pending
    }

    fn cap(&self) -> usize {
        self.queue.len()
    }

    /// The queue index of the `k`-th response from the front.
    fn at(&self, k: usize) -> usize {
        match self.queue.len() {
            0 => 0,
            cap => (self.head + k) % cap,
        }
    }

    fn push(&mut self, r: Response) -> bool {
        // Consecutive ACKs collapse into the last one.
        if let (
            Response::Ack {
                syndrome: Syndrome::Ack { .. },
                ..
            },
            Some(Response::Ack {
                syndrome: Syndrome::Ack { .. },
                ..
            }),
        ) = (r, self.back())
        {
            let i = self.at(self.len - 1);
            self.queue[i] = r;
            return true;
        }
        if self.len == self.cap() {
            return false;
        }
        let i = self.at(self.len);
        self.queue[i] = r;
        self.len += 1;
        true
    }

    fn back(&self) -> Option<Response> {
        (self.len != 0).then(|| self.queue[self.at(self.len - 1)])
    }

    fn front(&self) -> Option<Response> {
        (self.len != 0).then(|| self.queue[self.head])
    }

    fn pop(&mut self) {
        if self.len != 0 {
            self.head = self.at(1);
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
            let last = match self.queue[self.at(keep)] {
                Response::Read { psn, npkts, .. } => psn.wrapping_add(npkts.saturating_sub(1)),
                Response::Atomic { psn, .. } | Response::Ack { psn, .. } => psn,
            };
            if psn::diff(Psn::new(last), psn) >= 0 {
                break;
            }
            keep += 1;
        }
        for i in keep..self.len {
            if matches!(
                self.queue[self.at(i)],
                Response::Read { .. } | Response::Atomic { .. }
            ) {
                self.rd_pending = self.rd_pending.saturating_sub(1);
            }
        }
        self.len = keep;
    }

    /// Room for a READ or atomic answer (a new request, or a duplicate
    /// after `forget_from`).  The requester has at most max_rd_atomic of
    /// them outstanding, this one included, and resends from the oldest it
    /// still waits for; so with `max_rd` answers already queued the oldest
    /// of them answers a request the requester has completed since (a
    /// duplicate it resent during a go-back, answered before): drop it.
    /// Refusing the new request instead would NAK a well-behaved requester
    /// into ERR.
    fn make_rd_room(&mut self, max_rd: u32) {
        if self.rd_pending < max_rd {
            return;
        }
        let Some(k) = (0..self.len).find(|&k| {
            matches!(
                self.queue[self.at(k)],
                Response::Read { .. } | Response::Atomic { .. }
            )
        }) else {
            return;
        };
        for j in k..self.len - 1 {
            let (to, from) = (self.at(j), self.at(j + 1));
            self.queue[to] = self.queue[from];
        }
        self.len -= 1;
        self.rd_pending -= 1;
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

    /// A request packet for this QP (in RTR, RTS, SQD or SQE).
    pub(crate) fn on_request<I: ResponderIo<Recv = R>>(
        &mut self,
        p: &ResponderParams,
        io: &mut I,
        pkt: &Packet<'_>,
    ) -> Outcome {
        let mut out = Outcome::default();
        let bth = &pkt.hdr.bth;
        let Some((op, place)) = rules::request_kind(bth.opcode) else {
            io.count(Count::BadState);
            return out;
        };
        let len_ok = rules::payload_len_ok(place, pkt.payload.len() as u32, p.mtu);
        if p.svc == Service::Ud {
            if !len_ok {
                io.count(Count::Malformed);
                return out;
            }
            self.datagram(p, io, pkt);
            return out;
        }
        let psn = bth.psn;
        match rules::check_psn(psn, self.epsn) {
            PsnCheck::Expected => {}
            PsnCheck::Duplicate if p.svc == Service::Rc => {
                io.count(Count::Duplicate);
                self.duplicate(p, io, pkt, op, place);
                return out;
            }
            PsnCheck::Ahead if p.svc == Service::Rc => {
                if !self.nak_sent {
                    self.nak_sent = true;
                    let e = self.epsn;
                    self.nak(e, NakCode::PsnSequenceError);
                    io.count(Count::SeqNakSent);
                }
                return out;
            }
            _ => {
                // UC: a lost packet loses its message; a new message
                // starts wherever the next FIRST or ONLY is.
                self.abort_message();
                if !place.starts() {
                    return out;
                }
                self.epsn = psn;
            }
        }
        if !rules::sequence_ok(self.msg, op, place) {
            if p.svc == Service::Uc {
                self.abort_message();
                if !place.starts() {
                    return out;
                }
            } else {
                self.fail(p, io, psn, Fail::Nak(NakCode::InvalidRequest), &mut out);
                return out;
            }
        }
        let r = match op {
            _ if !len_ok => Err(Fail::Nak(NakCode::InvalidRequest)),
            MsgOp::Send | MsgOp::SendImm | MsgOp::SendInv => self.recv_send(io, pkt, op, place),
            MsgOp::Write | MsgOp::WriteImm => self.recv_write(p, io, pkt, op, place),
            MsgOp::Read => self.recv_read(p, io, pkt),
            MsgOp::CmpSwap | MsgOp::FetchAdd => self.recv_atomic(p, io, pkt, op),
        };
        match r {
            Ok(npkts) => {
                self.epsn = psn.offset(npkts as i32);
                self.nak_sent = false;
                self.msg = rules::after_packet(op, place);
                if p.svc == Service::Rc
                    && bth.ack_req
                    && !matches!(op, MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd)
                {
                    self.ack(psn);
                }
            }
            Err(f) => {
                if p.svc == Service::Uc {
                    self.abort_message();
                } else {
                    self.fail(p, io, psn, f, &mut out);
                }
            }
        }
        out
    }

    /// UC: forget the message in progress (its receive WQE is kept for the
    /// next message).
    fn abort_message(&mut self) {
        self.msg = InMessage::None;
        if let Some(rc) = &mut self.recv {
            rc.got = 0;
        }
    }

    /// An RC request failed: tell the requester.
    fn fail(
        &mut self,
        p: &ResponderParams,
        io: &mut impl ResponderIo,
        psn: Psn,
        f: Fail,
        out: &mut Outcome,
    ) {
        match f {
            Fail::Rnr => {
                self.push(Response::Ack {
                    psn: psn.get(),
                    syndrome: Syndrome::RnrNak {
                        timer: p.min_rnr_timer,
                    },
                });
                io.count(Count::RnrNakSent);
            }
            Fail::Nak(code) => {
                self.nak(psn, code);
                out.remote = Some(match code {
                    NakCode::RemoteAccessError => RemoteError::Access,
                    _ => RemoteError::Request,
                });
                out.error = true;
            }
        }
    }

    fn recv_send<I: ResponderIo<Recv = R>>(
        &mut self,
        io: &mut I,
        pkt: &Packet<'_>,
        op: MsgOp,
        place: Place,
    ) -> Result<u32, Fail> {
        let len = pkt.payload.len() as u32;
        if place.starts() && self.recv.is_none() {
            let Some(wqe) = io.take_recv() else {
                return Err(Fail::Rnr);
            };
            self.recv = Some(Receiving { wqe, got: 0 });
        }
        let Some(rc) = self.recv.as_mut() else {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        };
        let copied = io.recv_store(&rc.wqe, u64::from(rc.got), pkt.payload);
        rc.got += len;
        if let Err(too_short) = copied {
            let (status, code) = if too_short {
                (wc::LOC_LEN_ERR, NakCode::InvalidRequest)
            } else {
                (wc::LOC_PROT_ERR, NakCode::RemoteOperationalError)
            };
            if let Some(rc) = self.recv.take() {
                io.recv_done(&rc.wqe, recv_done(status, 0, None, false));
            }
            return Err(Fail::Nak(code));
        }
        if place.ends() {
            let Some(rc) = self.recv.take() else {
                return Err(Fail::Nak(NakCode::InvalidRequest));
            };
            let imm = pkt.hdr.imm_dt.map(|i| i.data);
            let mut d = recv_done(wc::SUCCESS, rc.got, imm, pkt.hdr.bth.solicited);
            if let (MsgOp::SendInv, Some(ieth)) = (op, pkt.hdr.ieth) {
                if !io.invalidate(ieth.rkey) {
                    d.status = wc::REM_INV_REQ_ERR;
                    d.solicited = true;
                    io.recv_done(&rc.wqe, d);
                    return Err(Fail::Nak(NakCode::InvalidRequest));
                }
                d.invalidated = Some(ieth.rkey);
            }
            self.next_msn();
            io.recv_done(&rc.wqe, d);
        }
        Ok(1)
    }

    fn recv_write<I: ResponderIo<Recv = R>>(
        &mut self,
        p: &ResponderParams,
        io: &mut I,
        pkt: &Packet<'_>,
        op: MsgOp,
        place: Place,
    ) -> Result<u32, Fail> {
        let len = pkt.payload.len() as u32;
        if place.starts() {
            let Some(reth) = pkt.hdr.reth else {
                return Err(Fail::Nak(NakCode::InvalidRequest));
            };
            if !p.remote_write {
                return Err(Fail::Nak(NakCode::RemoteAccessError));
            }
            if reth.dma_len != 0
                && !io.remote_ok(reth.rkey, reth.va, u64::from(reth.dma_len), Access::Write)
            {
                return Err(Fail::Nak(NakCode::RemoteAccessError));
            }
            self.write = (reth.rkey, reth.va, reth.dma_len);
        }
        let (rkey, va, left) = self.write;
        if len > left || (place.ends() && len != left) {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        // A WRITE with immediate consumes a receive WQE: take it before
        // anything is written (none: an RNR NAK, nothing changed).  The
        // receive queue is consumed in order: a WQE that a UC SEND dropped
        // half-way had begun to fill is the next one.
        let wqe = if op == MsgOp::WriteImm && place.ends() {
            let held = self.recv.take().map(|r| r.wqe);
            Some(held.or_else(|| io.take_recv()).ok_or(Fail::Rnr)?)
        } else {
            None
        };
        if len != 0 && !io.remote_write(rkey, va, pkt.payload) {
            if let Some(w) = &wqe {
                let mut d = recv_done(wc::WR_FLUSH_ERR, 0, None, false);
                d.write_imm = true;
                io.recv_done(w, d);
            }
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        }
        self.write = (rkey, va.wrapping_add(u64::from(len)), left - len);
        if place.ends() {
            self.next_msn();
            if let Some(w) = &wqe {
                let imm = pkt.hdr.imm_dt.map(|i| i.data);
                let mut d = recv_done(wc::SUCCESS, 0, imm, pkt.hdr.bth.solicited);
                d.write_imm = true;
                io.recv_done(w, d);
            }
        }
        Ok(1)
    }

    fn recv_read(
        &mut self,
        p: &ResponderParams,
        io: &mut impl ResponderIo,
        pkt: &Packet<'_>,
    ) -> Result<u32, Fail> {
        let Some(reth) = pkt.hdr.reth else {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        };
        let npkts = self.queue_read(p, io, reth, pkt.hdr.bth.psn)?;
        self.next_msn();
        Ok(npkts)
    }

    /// Check a READ request (new or duplicate) and queue its response;
    /// the PSNs it takes.
    fn queue_read(
        &mut self,
        p: &ResponderParams,
        io: &mut impl ResponderIo,
        reth: crate::roce_wire::Reth,
        psn: Psn,
    ) -> Result<u32, Fail> {
        if !p.remote_read {
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        }
        if reth.dma_len > p.max_msg {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        if reth.dma_len != 0
            && !io.remote_ok(reth.rkey, reth.va, u64::from(reth.dma_len), Access::Read)
        {
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        }
        self.make_rd_room(p.max_rd);
        let npkts = rules::packets(reth.dma_len, p.mtu);
        let queued = self.push(Response::Read {
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
        self.rd_pending += 1;
        Ok(npkts)
    }

    fn recv_atomic(
        &mut self,
        p: &ResponderParams,
        io: &mut impl ResponderIo,
        pkt: &Packet<'_>,
        op: MsgOp,
    ) -> Result<u32, Fail> {
        let Some(a) = pkt.hdr.atomic_eth else {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        };
        if !p.remote_atomic {
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        }
        if a.va % 8 != 0 {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        self.make_rd_room(p.max_rd);
        if self.len == self.cap() {
            return Err(Fail::Nak(NakCode::InvalidRequest));
        }
        let cmp_swap = op == MsgOp::CmpSwap;
        let Some(orig) = io.remote_atomic(a.rkey, a.va, cmp_swap, a.compare, a.swap_add) else {
            return Err(Fail::Nak(NakCode::RemoteAccessError));
        };
        let psn = pkt.hdr.bth.psn.get();
        // Room was checked above: an atomic never runs unanswered.
        self.push(Response::Atomic { psn, orig });
        self.rd_pending += 1;
        self.atomics[self.atomic_next] = (psn, orig, true);
        self.atomic_next = (self.atomic_next + 1) % ATOMIC_HISTORY;
        self.next_msn();
        Ok(1)
    }

    /// A request already executed: answer it again.
    fn duplicate(
        &mut self,
        p: &ResponderParams,
        io: &mut impl ResponderIo,
        pkt: &Packet<'_>,
        op: MsgOp,
        place: Place,
    ) {
        let psn = pkt.hdr.bth.psn;
        match op {
            MsgOp::Read => {
                // Reads are idempotent: re-read what is asked (the request
                // may restart inside the original range), with the checks
                // of a new READ; a duplicate that fails them is dropped.
                if let Some(reth) = pkt.hdr.reth {
                    self.forget_from(psn);
                    let _ = self.queue_read(p, io, reth, psn);
                }
            }
            MsgOp::CmpSwap | MsgOp::FetchAdd => {
                // Never executed twice: the saved result, or nothing if it
                // is too old to be remembered.
                let found = self
                    .atomics
                    .iter()
                    .find(|a| a.2 && a.0 == psn.get())
                    .copied();
                if let Some((ap, orig, _)) = found {
                    self.forget_from(psn);
                    self.make_rd_room(p.max_rd);
                    if self.push(Response::Atomic { psn: ap, orig }) {
                        self.rd_pending += 1;
                    }
                }
            }
            _ => {
                // SEND/WRITE: acknowledge again (the newest PSN done), at
                // the packets that ask for it.
                if rules::ack_duplicate(pkt.hdr.bth.ack_req, place) {
                    let last = self.epsn.offset(-1);
                    self.ack(last);
                }
            }
        }
    }

    /// A UD (or GSI) datagram.
    fn datagram<I: ResponderIo<Recv = R>>(
        &mut self,
        p: &ResponderParams,
        io: &mut I,
        pkt: &Packet<'_>,
    ) {
        let Some(deth) = pkt.hdr.deth else {
            io.count(Count::Malformed);
            return;
        };
        if deth.qkey != p.qkey {
            io.count(Count::BadState);
            return;
        }
        let Some(wqe) = io.take_recv() else {
            // No receive posted: a datagram is simply lost.
            io.count(Count::BadState);
            return;
        };
        io.datagram(wqe, pkt);
    }

    /// Send queued responses, in order, while the caller takes them.
    pub(crate) fn emit(&mut self, p: &ResponderParams, io: &mut impl ResponderIo) {
        while let Some(r) = self.front() {
            let msn = self.msn;
            let res = match r {
                Response::Ack { psn, syndrome } => io
                    .send_ack(Psn::new(psn), syndrome, msn, None)
                    .map(|()| true),
                Response::Atomic { psn, orig } => {
                    let ack = Syndrome::Ack {
                        credits: CREDITS_INVALID,
                    };
                    io.send_ack(Psn::new(psn), ack, msn, Some(orig))
                        .map(|()| true)
                }
                Response::Read {
                    psn,
                    va,
                    rkey,
                    len,
                    npkts,
                    sent,
                } => {
                    let off = sent.saturating_mul(p.mtu);
                    let n = core::cmp::min(p.mtu, len - core::cmp::min(off, len));
                    let opcode = rules::read_response_opcode(sent, npkts);
                    let at = Psn::new(psn).offset(sent as i32);
                    let addr = va.wrapping_add(u64::from(off));
                    io.send_read(at, opcode, msn, rkey, addr, n).map(|()| {
                        let last = sent + 1 >= npkts;
                        if !last {
                            if let Some(Response::Read { sent, .. }) = self.queue.get_mut(self.head)
                            {
                                *sent += 1;
                            }
                        }
                        last
                    })
                }
            };
            match res {
                Ok(true) => {
                    if matches!(r, Response::Read { .. } | Response::Atomic { .. }) {
                        self.rd_pending = self.rd_pending.saturating_sub(1);
                    }
                    self.pop();
                }
                Ok(false) => {}
                Err(SendFail::BadMemory) => {
                    // The memory went away under a read: nothing more to
                    // send for it.
                    self.rd_pending = self.rd_pending.saturating_sub(1);
                    self.pop();
                }
                Err(_) => break,
            }
        }
    }
}

fn recv_done(status: u8, byte_len: u32, imm: Option<u32>, solicited: bool) -> RecvDone {
    RecvDone {
        write_imm: false,
        status,
        byte_len,
        imm,
        invalidated: None,
        solicited,
    }
}
