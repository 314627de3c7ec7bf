// SPDX-License-Identifier: GPL-2.0
//! The data path of an iWARP QP: the sans-IO machines of `core/iwarp/`
//! (the MPA stream receiver, the inbound DDP/RDMAP rules, the outbound
//! segmenter) run against the QP's queues and memory (`engine/`) and the
//! connection's TCP socket.
//!
//! Receiving runs in the socket's callback: bytes are parsed and placed
//! where they lie in the socket's buffers, under the QP lock.  Sending runs
//! in the QP's work item (process context: the socket may sleep): FPDUs are
//! built under the QP lock into the stream's transmit buffer (pages the
//! socket takes by reference, `TxBuf`: the one copy of each payload byte
//! is from the memory region into them), and handed to the socket with the
//! lock dropped; a full socket resumes on its write-space callback.

use kernel::prelude::*;
use kernel::sync::Arc;

use super::cm::Cep;
use crate::abi::{self, SendWqe, Sge};
use crate::engine::mem::{self, Data, Denied, REMOTE_READ};
use crate::engine::rq::RecvSide;
use crate::engine::sq::{wqe_sges, SendQueue, Track, MAX_SGE};
use crate::engine::Counter;
use crate::glue::net::crc32c;
use crate::glue::tcp::Tcp;
use crate::glue::txbuf::TxBuf;
use crate::glue::IbDevice;
use crate::iwarp::fpdu::{build_header, cause, Cause, Segment, Trailer, MAX_HEADER};
use crate::iwarp::fpdu::{AtomicRequest, AtomicResponse, ReadRequest, Terminate};
use crate::iwarp::fpdu::{Header, Opcode, Placement, RdmapHeader};
use crate::iwarp::inbound::{Inbound, InboundIo, InboundState, ReadAwaited, Received, TaggedUse};
use crate::iwarp::mpa::Negotiated;
use crate::iwarp::outbound::{Answer, EmitFail, OutWqe, Outbound, OutboundIo, OutboundParams};
use crate::iwarp::outbound::{Outcome, Slot, Source};
use crate::iwarp::rx::Receiver;
use crate::qp_state::QpState;
use crate::roce::responder::{Access, RecvDone};
use crate::transport::Pumper;
use crate::transport_rules::MsgOp;
use crate::verbs::qp::{After, Qp, QpInner};
use crate::verbs::srq::Taken;

/// FPDU bytes built ahead of the socket at most.
const TX_AHEAD: usize = 64 * 1024;
/// What a doorbell's pump builds in the posting thread before it hands the
/// rest to the work item (see `Pumper::Doorbell`): a small message whole,
/// 4 KiB with its FPDUs' headers (at 4 KiB exactly a 4 KiB SEND's last
/// FPDU went to the work item, a hop that cost ib_send_lat 4 KiB 4x siw's
/// time).  RoCE's doorbell sends as much: 4 packets of 1024.
const DOORBELL_AHEAD: usize = 5 * 1024;
/// What a work item hands to the socket before it queues itself again, at
/// normal priority (`Engine::bulk`): a socket that takes everything (a peer
/// that reads in the same softirq) would otherwise keep it running.  At
/// high priority (the QP not streaming) it hands `FIRST_WORK_BYTES`.
const WORK_BYTES: usize = 1 << 20;
const FIRST_WORK_BYTES: usize = 128 * 1024;

/// One QP's stream.
pub(crate) struct Stream {
    pub(crate) cep: Arc<Cep>,
    tcp: Arc<Tcp>,
    rx: Receiver,
    inb: InboundState,
    out: Outbound<KVec<Slot>>,
    params: OutboundParams,
    /// READ responses owed to the peer, oldest first (at most the IRD).
    answers: KVec<Answer>,
    /// The receive a SEND is being placed into.
    recv: Option<Taken>,
    /// Its status, should the stream stop now: set when placing into it
    /// failed (a length or protection error), else it is flushed.
    recv_status: Option<u8>,
    crc: bool,
    /// Built FPDUs the socket has not taken yet.
    tx: TxBuf,
    /// Bytes of the stream the socket has taken (SENDs and WRITEs that
    /// end within them are done: `Outbound::taken`).
    taken: u64,
    /// The stream failed: nothing more is parsed or sent.
    pub(crate) broken: bool,
    /// A TERMINATE owed to the peer (the receive side found a fault):
    /// nothing more is parsed; the sender sends it after what is built,
    /// then the connection closes.
    term: Option<Cause>,
    term_sent: bool,
    /// Nothing is sent yet.  The responder waits for the initiator's
    /// first FPDU (RFC 5044 section 7.1.2; siw fails a connection whose
    /// first FPDU follows its reply too closely), or, should the
    /// initiator's application wait for ours, `RESPONDER_HOLD_USECS`.  The
    /// initiator waits `INITIATOR_HOLD_USECS` (or for the responder's first
    /// FPDU): siw as a responder sends its reply before it gives its socket
    /// to the QP, and an FPDU that lands in between is never read (its
    /// data-ready callback ignores it), so the connection hangs.  (A
    /// softrnic responder, known by RFC 7306, needs no such wait.)
    hold: bool,
    /// Peer-to-peer initiator: the RTR goes first, once the hold is over.
    rtr_owed: bool,
    /// A context is handing FPDUs to the socket (one at a time, so the
    /// stream's bytes stay in order), and whether more came meanwhile.
    pumping: bool,
    again: bool,
}

impl Stream {
    /// Restrack's driver details of the stream (`Qp::details`).
    pub(crate) fn details(&self, put: &mut dyn FnMut(&'static CStr, u64)) {
        put(c"stream_sent", self.taken);
        put(c"stream_queued", self.tx.len() as u64);
        put(c"mpa_crc", u64::from(self.crc));
        put(c"broken", u64::from(self.broken));
    }

    /// What was built but not yet taken by the socket, for a graceful
    /// close to send after the stream is gone (`Qp::iwarp_hand_on` completed
    /// its work requests; the socket may hold the start of an FPDU);
    /// nothing if the stream failed.  (A TERMINATE owed is not built: the
    /// consumer's close comes first.)
    pub(crate) fn unsent(&self) -> Option<&TxBuf> {
        (!self.broken).then_some(&self.tx)
    }

    /// The receive a SEND was being placed into when the stream stopped
    /// (it is off the ring, so no flush finds it): its wr_id, and its
    /// status: a local length error for a message too long for it (as siw
    /// reports), a local protection error for buffers its keys do not
    /// cover, else flushed.
    pub(crate) fn take_partial_recv(&mut self) -> Option<(u64, u8)> {
        let t = self.recv.take()?;
        let status = match (self.recv_status.take(), self.term) {
            (Some(s), _) => s,
            // (Refused before placing: longer than the buffers.)
            (None, Some(cause::DDP_TOO_LONG)) => abi::WC_LOC_LEN_ERR,
            (None, _) => abi::WC_WR_FLUSH_ERR,
        };
        Some((t.wr_id, status))
    }
}

/// How long a responder waits for the initiator's first FPDU at most.
pub(crate) const RESPONDER_HOLD_USECS: u64 = 200_000;
/// How long an initiator waits after the MPA reply before its first FPDU.
pub(crate) const INITIATOR_HOLD_USECS: u64 = 20_000;

impl Stream {
    /// Take the send queue from index `sq_cons` on (under the QP lock, as
    /// the stream is bound: local operations before it have completed).
    pub(crate) fn start_at(&mut self, sq_cons: u32) {
        self.out.start_at(sq_cons);
    }

    /// The stream of a connection set up with `neg`, for a send queue of
    /// `sq_slots` slots (a power of two), holding its first FPDU if `hold`;
    /// in peer-to-peer mode an initiator's RTR goes out first.
    pub(crate) fn new(
        cep: Arc<Cep>,
        tcp: Arc<Tcp>,
        neg: &Negotiated,
        sq_slots: u32,
        hold: bool,
        responder: bool,
        joined: bool,
    ) -> Result<KBox<Stream>> {
        let mut slots = KVec::new();
        slots.resize(sq_slots as usize, Slot::default(), GFP_ATOMIC)?;
        // One FPDU per TCP segment, as siw sizes them (a multiple of 8).
        let max_fpdu = (tcp.mss().max(128) & !7) as usize;
        let (mut rtr_send, mut rtr_owed) = (false, false);
        if let Some(r) = neg.rtr {
            if responder {
                rtr_send = r.send;
            } else if r.write {
                // (The only RTR softrnic offers: `mpa::request`.)
                rtr_owed = true;
            } else {
                return Err(EINVAL);
            }
        }
        Ok(KBox::new(
            Stream {
                cep,
                rx: Receiver::new(neg.crc, crc32c),
                inb: InboundState::new(u32::from(neg.ird).max(1))
                    .extensions(neg.ext)
                    .rtr_send(rtr_send),
                out: Outbound::new(slots),
                params: OutboundParams {
                    max_fpdu,
                    ord: u32::from(neg.ord).max(1),
                    extensions: neg.ext,
                    sending: true,
                    confirm: joined,
                },
                answers: KVec::new(),
                recv: None,
                recv_status: None,
                crc: neg.crc,
                tx: TxBuf::default(),
                taken: 0,
                broken: false,
                term: None,
                term_sent: false,
                hold,
                rtr_owed,
                pumping: false,
                again: false,
                tcp,
            },
            GFP_ATOMIC,
        )?)
    }
}

/// The TERMINATE cause of a refused tagged placement (a WRITE): DDP's
/// tagged-buffer errors (RFC 5041 section 7.2), and RDMAP's for access
/// rights, which DDP does not know (RFC 5040 section 7.2).
const fn tagged_cause(d: Denied) -> Cause {
    match d {
        Denied::Key => cause::DDP_TAGGED_INVALID_STAG,
        Denied::Stream => cause::DDP_TAGGED_STAG_OTHER_STREAM,
        Denied::Bounds => cause::DDP_TAGGED_BASE_BOUNDS,
        Denied::Rights => cause::ACCESS_RIGHTS,
    }
}

/// The TERMINATE cause of a refused READ or atomic request (RDMAP's remote
/// protection errors, RFC 5040 section 7.2).
const fn request_cause(d: Denied) -> Cause {
    match d {
        Denied::Key => cause::INVALID_STAG,
        Denied::Stream => cause::STAG_OTHER_STREAM,
        Denied::Bounds => cause::BASE_BOUNDS,
        Denied::Rights => cause::ACCESS_RIGHTS,
    }
}

/// The inbound rules' I/O: the QP's queues and memory, the lock held.
struct InIo<'a> {
    qp: &'a Qp,
    dev: &'a IbDevice,
    rq: Option<&'a crate::glue::ring::Ring>,
    rq_cons: &'a mut u32,
    sq: &'a crate::glue::ring::Ring,
    sq_cons: &'a mut u32,
    after: &'a mut After,
    out: &'a mut Outbound<KVec<Slot>>,
    answers: &'a mut KVec<Answer>,
    recv: &'a mut Option<Taken>,
    recv_status: &'a mut Option<u8>,
    /// Something for the sender: an answer owed, a READ completed.
    wake: bool,
    terminated: bool,
}

impl InIo<'_> {
    fn rs(&mut self) -> RecvSide<'_> {
        RecvSide {
            qp: self.qp,
            dev: self.dev,
            rq: self.rq,
            rq_cons: &mut *self.rq_cons,
            after: &mut *self.after,
        }
    }

    fn sendq(&mut self) -> SendQueue<'_> {
        SendQueue {
            qp: self.qp,
            dev: self.dev,
            sq: self.sq,
            sq_cons: &mut *self.sq_cons,
            after: &mut *self.after,
        }
    }

    /// Our oldest READ awaiting responses: its slot and the WQE.
    fn awaited(&mut self) -> Option<(u32, OutWqe)> {
        self.out
            .read_awaited()
            .filter(|(_, w)| w.op == Some(MsgOp::Read))
    }
}

impl InboundIo for InIo<'_> {
    fn check_tagged(
        &mut self,
        stag: u32,
        to: u64,
        len: usize,
        what: TaggedUse,
    ) -> Result<(), Cause> {
        match what {
            TaggedUse::Write => self
                .rs()
                .remote_check(stag, to, len as u64, Access::Write)
                .map_err(tagged_cause),
            TaggedUse::ReadResponse => {
                let (_, w) = self.awaited().ok_or(cause::DDP_TAGGED_INVALID_STAG)?;
                let end = w.sink_to.saturating_add(u64::from(w.len));
                if stag != w.sink_stag {
                    return Err(cause::DDP_TAGGED_INVALID_STAG);
                }
                if to < w.sink_to || to.saturating_add(len as u64) > end {
                    return Err(cause::DDP_TAGGED_BASE_BOUNDS);
                }
                Ok(())
            }
        }
    }

    fn place_tagged(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), Cause> {
        if let Some((index, w)) = self.awaited().filter(|(_, w)| w.sink_stag == stag) {
            // A READ response: into the READ's own buffers, by offset.
            let offset = to.wrapping_sub(w.sink_to) as u32;
            let wqe = self
                .sq
                .read::<SendWqe>(index, 0)
                .ok_or(cause::LOCAL_CATASTROPHIC)?;
            let t = Track {
                wqe,
                ..Track::default()
            };
            return if self.sendq().store(index, &t, offset, data) {
                Ok(())
            } else {
                Err(cause::DDP_TAGGED_BASE_BOUNDS)
            };
        }
        if self.rs().remote_write(stag, to, data) {
            Ok(())
        } else {
            Err(cause::DDP_TAGGED_BASE_BOUNDS)
        }
    }

    fn take_receive(&mut self) -> Result<u32, Cause> {
        let t = self.rs().take().ok_or(cause::DDP_NO_BUFFER)?;
        let cap = t
            .sges()
            .iter()
            .fold(0u64, |a, s| a + u64::from(s.length))
            .min(u64::from(u32::MAX)) as u32;
        *self.recv = Some(t);
        Ok(cap)
    }

    fn place_untagged(&mut self, offset: u32, data: &[u8]) -> Result<(), Cause> {
        let t = self.recv.take().ok_or(cause::LOCAL_CATASTROPHIC)?;
        let r = self.rs().store(&t, u64::from(offset), data);
        *self.recv = Some(t);
        r.map_err(|too_long| {
            // (A bad key is the local consumer's fault: RDMAP's local
            // catastrophic error, as siw reports it, and LOC_PROT_ERR.)
            let (status, c) = if too_long {
                (abi::WC_LOC_LEN_ERR, cause::DDP_TOO_LONG)
            } else {
                (abi::WC_LOC_PROT_ERR, cause::LOCAL_CATASTROPHIC)
            };
            *self.recv_status = Some(status);
            c
        })
    }

    fn received(&mut self, r: &Received) -> Result<(), Cause> {
        let t = self.recv.take().ok_or(cause::LOCAL_CATASTROPHIC)?;
        let mut invalidated = None;
        if let Some(stag) = r.invalidate {
            if !self.rs().invalidate(stag) {
                return Err(cause::CANNOT_INVALIDATE);
            }
            invalidated = Some(stag);
        }
        // RFC 7306 immediate data ends a WRITE with immediate (the only
        // verb softrnic sends it for): its first four bytes are the verbs'
        // immediate, in network order.
        let imm = r
            .immediate
            .map(|d| u32::from_be_bytes([d[0], d[1], d[2], d[3]]));
        let d = RecvDone {
            write_imm: imm.is_some(),
            status: abi::WC_SUCCESS,
            byte_len: if imm.is_some() { 0 } else { r.len },
            imm,
            invalidated,
            solicited: r.solicited,
        };
        self.rs().done(&t, d);
        Ok(())
    }

    fn read_awaited(&mut self) -> Option<ReadAwaited> {
        self.awaited().map(|(_, w)| ReadAwaited {
            sink_stag: w.sink_stag,
            sink_to: w.sink_to,
            len: w.len,
        })
    }

    fn read_done(&mut self) -> Result<(), Cause> {
        self.out.read_answered();
        self.wake = true;
        Ok(())
    }

    fn read_request(&mut self, r: &ReadRequest) -> Result<(), Cause> {
        // A zero-length READ touches no memory, and names none of ours when
        // it is RFC 6581's RTR: its STag is not checked (as IB does not
        // check the R_Key of a zero-length READ).
        if r.len != 0 {
            self.rs()
                .remote_check(r.src_stag, r.src_to, u64::from(r.len), Access::Read)
                .map_err(request_cause)?;
        }
        self.answers
            .push(Answer::Read(*r), GFP_ATOMIC)
            .map_err(|_| cause::LOCAL_CATASTROPHIC)?;
        self.wake = true;
        Ok(())
    }

    fn atomic_request(&mut self, a: &AtomicRequest) -> Result<(), Cause> {
        // (The inbound rules take these only on a stream with RFC 7306.)
        // A word not 64-bit aligned: RFC 7306 section 8.2's "catastrophic
        // error, localized to RDMAP stream", memory untouched.
        if a.to % 8 != 0 {
            return Err(cause::STREAM_CATASTROPHIC);
        }
        let orig = self
            .rs()
            .remote_atomic_update(a.stag, a.to, |v| a.apply(v))
            .map_err(request_cause)?;
        self.answers
            .push(
                Answer::Atomic(AtomicResponse {
                    req_id: a.req_id,
                    orig,
                }),
                GFP_ATOMIC,
            )
            .map_err(|_| cause::LOCAL_CATASTROPHIC)?;
        self.wake = true;
        Ok(())
    }

    fn atomic_response(&mut self, a: &AtomicResponse) -> Result<(), Cause> {
        // Our oldest outstanding READ or atomic: it must be an atomic.
        let (index, _) = self
            .out
            .read_awaited()
            .filter(|(_, w)| matches!(w.op, Some(MsgOp::FetchAdd | MsgOp::CmpSwap)))
            .ok_or(cause::UNEXPECTED_OPCODE)?;
        let wqe = self
            .sq
            .read::<SendWqe>(index, 0)
            .ok_or(cause::LOCAL_CATASTROPHIC)?;
        let t = Track {
            wqe,
            ..Track::default()
        };
        // The value as the verbs hand it back: a u64 in host order, as the
        // RoCE completer stores an atomic ACK's.
        if !self.sendq().store(index, &t, 0, &a.orig.to_ne_bytes()) {
            return Err(cause::LOCAL_CATASTROPHIC);
        }
        self.out.read_answered();
        self.wake = true;
        Ok(())
    }

    fn terminated(&mut self, t: &Terminate) {
        self.terminated = true;
        // A remote protection error (RFC 5040 section 7.2, RDMAP error type
        // 1) is how a responder refuses a READ or atomic request: our
        // oldest one completes with REM_ACCESS_ERR, with what was done
        // before it, ahead of the flush the QP's ERR brings.
        if t.cause.layer != 0 || t.cause.etype != 1 || !self.out.read_refused() {
            return;
        }
        while let Some(d) = self.out.take_done() {
            let Some(wqe) = self.sq.read::<SendWqe>(d.index, 0) else {
                break;
            };
            let t = Track {
                wqe,
                len: d.len,
                ..Track::default()
            };
            self.sendq().complete(d.index, &t, d.status);
        }
    }
}

/// The outbound machine's I/O: the send queue, memory and the stream's
/// transmit buffer, the lock held.
struct OutIo<'a> {
    q: SendQueue<'a>,
    answers: &'a mut KVec<Answer>,
    inb: &'a mut InboundState,
    tx: &'a mut TxBuf,
    /// Bytes `tx` may hold before the socket takes them.
    ahead: usize,
    /// The stream position of `tx`'s first byte.
    base: u64,
    crc: bool,
    /// FPDUs built.
    fpdus: u64,
    /// Payload bytes appended as the memory's own pages.
    by_ref: u64,
}

impl Stream {
    /// The outbound machine, its settings, and its I/O over the rest of
    /// the stream and the send queue `q`.
    fn outbound<'a>(
        &'a mut self,
        q: SendQueue<'a>,
        ahead: usize,
    ) -> (&'a mut Outbound<KVec<Slot>>, &'a OutboundParams, OutIo<'a>) {
        let io = OutIo {
            q,
            answers: &mut self.answers,
            inb: &mut self.inb,
            base: self.taken,
            tx: &mut self.tx,
            ahead,
            crc: self.crc,
            fpdus: 0,
            by_ref: 0,
        };
        (&mut self.out, &self.params, io)
    }
}

impl OutIo<'_> {
    fn wqe(&self, index: u32) -> Option<SendWqe> {
        self.q.sq.read::<SendWqe>(index, 0)
    }

    /// Append a READ response's payload (`len` bytes at `offset` of the
    /// memory `src` names) as the memory's own pages, for the socket to
    /// send by reference: no copy.  True if done; else nothing is appended
    /// (a copy does it).
    ///
    /// Only READ responses: a SEND or WRITE completes once the socket has
    /// taken its bytes, and its application may then reuse the buffer
    /// before TCP has sent (or resent) them; a READ's source memory is
    /// the peer's to release, once the whole response has arrived.  Only
    /// without MPA's CRC: a page sent as it is at sending time could
    /// differ from the bytes the CRC covered (the responder's application
    /// writing into memory under a READ), and the peer would end the
    /// connection over it.
    fn by_reference(&mut self, src: Source, offset: u32, len: usize) -> bool {
        let Source::Local { stag, to } = src else {
            return false;
        };
        if self.crc || len < BY_REFERENCE_MIN {
            return false;
        }
        let before = self.tx.len();
        let (q, tx) = (&self.q, &mut *self.tx);
        let done = mem::with_remote(
            q.dev.verbs(),
            q.qp.requestor(),
            stag,
            to.wrapping_add(u64::from(offset)),
            len as u64,
            REMOTE_READ,
            |m, iova| m.page_refs(iova, len, |r, off, n| tx.append_ref(r, off, n).is_ok()),
        ) == Ok(true);
        if done {
            self.by_ref += len as u64;
        } else {
            tx.truncate(before);
        }
        done
    }
}

/// A READ response's payload shorter than this is copied: a copy of a few
/// hundred bytes costs less than the page references and the socket's
/// pieces.
const BY_REFERENCE_MIN: usize = 1024;

/// Copy the payload of `src` at `offset` into `dst`.
fn load(q: &SendQueue<'_>, src: Source, offset: u32, dst: &mut [u8]) -> bool {
    match src {
        Source::None => dst.is_empty(),
        Source::Wqe(i) => match q.sq.read::<SendWqe>(i, 0) {
            Some(w) => q.load(i, &w, offset, dst),
            None => false,
        },
        Source::Local { stag, to } => {
            dst.is_empty()
                || mem::with_remote(
                    q.dev.verbs(),
                    q.qp.requestor(),
                    stag,
                    to.wrapping_add(u64::from(offset)),
                    dst.len() as u64,
                    REMOTE_READ,
                    |m, iova| m.copy(iova, Data::Load(dst)),
                ) == Ok(true)
        }
    }
}

impl OutboundIo for OutIo<'_> {
    fn producer(&mut self) -> u32 {
        self.q.producer()
    }

    fn slots(&self) -> u32 {
        self.q.slots()
    }

    fn prepare(&mut self, index: u32) -> Option<OutWqe> {
        let p = self.q.prepare(index)?;
        let w = p.wqe;
        let (mut sink_stag, mut sink_to) = (0, 0);
        if p.op == Some(MsgOp::Read) {
            let mut buf = [Sge::default(); MAX_SGE];
            if let Some(s) = wqe_sges(self.q.sq, index, &w, &mut buf).and_then(|s| s.first()) {
                (sink_stag, sink_to) = (s.lkey, s.addr);
            }
        }
        Some(OutWqe {
            op: p.op,
            len: p.len,
            fence: p.fence,
            solicited: p.solicited,
            error: p.error,
            early: p.early,
            remote_stag: w.rkey,
            remote_to: w.remote_addr,
            sink_stag,
            sink_to,
            inv_stag: w.ex,
            // (`ex` holds the verbs' big-endian immediate as stored.)
            imm: u32::from_be(w.ex),
            compare_add: w.compare_add,
            swap: w.swap,
        })
    }

    fn run_local(&mut self, index: u32) -> u8 {
        match self.wqe(index) {
            Some(w) => self.q.run_local(&w),
            None => abi::WC_LOC_QP_OP_ERR,
        }
    }

    fn position(&self) -> u64 {
        self.base + self.tx.len() as u64
    }

    fn emit(&mut self, seg: &Segment, src: Source) -> Result<(), EmitFail> {
        let mut hdr = [0u8; MAX_HEADER];
        let n =
            build_header(&mut hdr, &seg.hdr, seg.len as usize).map_err(|_| EmitFail::BadMemory)?;
        let len = seg.len as usize;
        if !self.tx.is_empty() && self.tx.len() + n + len + 8 > self.ahead {
            return Err(EmitFail::Full);
        }
        let start = self.tx.len();
        self.tx.append(&hdr[..n]).map_err(|_| EmitFail::Full)?;
        let at = self.tx.len();
        if !self.by_reference(src, seg.offset, len) {
            // The payload, copied once: from the memory into the pages the
            // socket sends from.
            let mut bad = false;
            let q = &self.q;
            let r = self.tx.append_with(len, |o, piece| {
                bad = !load(q, src, seg.offset.wrapping_add(o as u32), piece);
                !bad
            });
            if r.is_err() {
                self.tx.truncate(start);
                return Err(if bad {
                    EmitFail::BadMemory
                } else {
                    EmitFail::Full
                });
            }
        }
        let step: crate::crc::Update = crc32c;
        let tx = &*self.tx;
        let t = Trailer::over(&hdr[..n], len, self.crc.then_some(step), |c| {
            tx.pieces(at, len, |p| c.update(p))
        });
        if self.tx.append(t.as_bytes()).is_err() {
            self.tx.truncate(start);
            return Err(EmitFail::Full);
        }
        self.fpdus += 1;
        Ok(())
    }

    fn complete(&mut self, index: u32, status: u8, len: u32) {
        let Some(wqe) = self.wqe(index) else { return };
        let t = Track {
            wqe,
            len,
            ..Track::default()
        };
        self.q.complete(index, &t, status);
    }

    fn next_answer(&mut self) -> Option<Answer> {
        self.answers.first().copied()
    }

    fn answered(&mut self) {
        // (Err only when empty: nothing to take.)
        let _ = self.answers.remove(0);
        self.inb.answered();
    }
}

/// Append an FPDU with no payload (its headers and its trailer) whole,
/// or nothing.
fn append_fpdu(tx: &mut TxBuf, hdr: &[u8], trailer: &[u8]) -> Result {
    let start = tx.len();
    let r = tx.append(hdr).and_then(|()| tx.append(trailer));
    if r.is_err() {
        tx.truncate(start);
    }
    r
}

/// RFC 6581's RTR as a zero-length WRITE, appended to `tx`.  It names no
/// buffer and a receiver must not check its STag; 1 rather than 0, which
/// some hardware treats specially (siw sends 1 too).
fn rtr_fpdu(tx: &mut TxBuf, crc: bool) -> Result {
    let hdr = Header {
        opcode: Opcode::Write,
        last: true,
        place: Placement::Tagged { stag: 1, to: 0 },
        rdmap: RdmapHeader::None,
    };
    let mut b = [0u8; MAX_HEADER];
    let n = build_header(&mut b, &hdr, 0).map_err(|_| EINVAL)?;
    let step: crate::crc::Update = crc32c;
    let t = Trailer::new(&b[..n], &[], crc.then_some(step));
    append_fpdu(tx, &b[..n], t.as_bytes())
}

/// A TERMINATE for `c` (RFC 5040 section 7: untagged queue 2, MSN 1,
/// alone in its FPDU; no copy of the faulty headers, as for a catastrophic
/// error), appended to `tx`.
fn terminate_fpdu(tx: &mut TxBuf, c: Cause, crc: bool) -> Result {
    let hdr = Header {
        opcode: Opcode::Terminate,
        last: true,
        place: Placement::Untagged {
            qn: 2,
            msn: 1,
            mo: 0,
            inv_stag: 0,
        },
        rdmap: RdmapHeader::Terminate(Terminate {
            cause: c,
            has_len: false,
            has_ddp: false,
            has_rdmap: false,
        }),
    };
    let mut b = [0u8; MAX_HEADER];
    let n = build_header(&mut b, &hdr, 0).map_err(|_| EINVAL)?;
    let step: crate::crc::Update = crc32c;
    let t = Trailer::new(&b[..n], &[], crc.then_some(step));
    append_fpdu(tx, &b[..n], t.as_bytes())
}

impl Qp {
    /// Bytes from the connection's socket (its callback): parse and place
    /// them.  Returns how many were taken (all, unless the QP has no
    /// stream yet).
    pub(crate) fn iwarp_rx(&self, data: &[u8]) -> usize {
        let dev = self.dev();
        let c = dev.counters();
        let mut after = After::default();
        let (wake, end) = {
            let mut s = self.inner.lock();
            let (wake, stop) = {
                let QpInner {
                    iw,
                    rq,
                    rq_cons,
                    sq,
                    sq_cons,
                    ..
                } = &mut *s;
                let Some(st) = iw.as_deref_mut() else {
                    return 0;
                };
                if st.broken || st.term.is_some() {
                    return data.len();
                }
                let fpdus = st.rx.fpdus;
                let mut io = InIo {
                    qp: self,
                    dev: &dev,
                    rq: rq.as_ref(),
                    rq_cons,
                    sq,
                    sq_cons,
                    after: &mut after,
                    out: &mut st.out,
                    answers: &mut st.answers,
                    recv: &mut st.recv,
                    recv_status: &mut st.recv_status,
                    wake: false,
                    terminated: false,
                };
                let mut sink = Inbound {
                    io: &mut io,
                    state: &mut st.inb,
                };
                c.add(Counter::RcvdBytes, data.len() as u64);
                let r = st.rx.feed(data, &mut sink);
                let (mut wake, terminated) = (io.wake, io.terminated);
                self.count_n(Counter::IwRxFpdus, st.rx.fpdus.wrapping_sub(fpdus));
                let released = st.hold && st.rx.fpdus > fpdus;
                if released {
                    st.hold = false;
                    wake = true;
                }
                if terminated {
                    // The peer ended the stream: no TERMINATE back.
                    self.count(Counter::IwTerminatesReceived);
                    st.broken = true;
                }
                if let Err(f) = r {
                    if f.cause == cause::MPA_CRC {
                        self.count(Counter::IwCrcErrors);
                    }
                    // The sender owes the peer a TERMINATE.
                    st.term = Some(f.cause);
                }
                (
                    wake,
                    if st.broken {
                        Some(true)
                    } else {
                        st.term.map(|_| false)
                    },
                )
            };
            if stop.is_some() && s.state != QpState::Err {
                self.enter(&mut s, QpState::Err, &mut after);
            }
            (wake, stop)
        };
        self.after(after);
        match end {
            Some(true) => self.iwarp_end(true),
            Some(false) => self.schedule(),
            None if wake => self.schedule(),
            None => {}
        }
        data.len()
    }

    /// End the connection (its stream failed).
    fn iwarp_end(&self, abort: bool) {
        let cep = self.inner.lock().iw.as_ref().map(|st| st.cep.clone());
        if let Some(c) = cep {
            c.failed(abort);
        }
    }

    /// Build FPDUs and hand them to the socket; after a fault, the
    /// TERMINATE and then the close.  From the work item, or from the
    /// thread that rang the doorbell (as siw does: its first FPDUs, then
    /// the work item goes on); one context at a time.
    pub(crate) fn iwarp_pump(&self, by: Pumper) {
        {
            let mut s = self.inner.lock();
            let Some(st) = s.iw.as_deref_mut() else {
                return;
            };
            if st.pumping {
                st.again = true;
                if by == Pumper::Doorbell && s.state == QpState::Rts {
                    // That pump looks at the producer again: posts from
                    // now on need no doorbell (see `Qp::doorbell_heard`).
                    s.sq.clear_kernel_flags(crate::abi::QUEUE_ENGINE_IDLE);
                }
                return;
            }
            st.pumping = true;
        }
        loop {
            let (seen, bulk) = {
                let s = self.inner.lock();
                if s.state == QpState::Rts {
                    // Posts meanwhile need no doorbell: this pump looks.
                    s.sq.clear_kernel_flags(crate::abi::QUEUE_ENGINE_IDLE);
                }
                (s.sq.producer(), s.eng.bulk)
            };
            let cut = self.iwarp_send(by, bulk);
            let mut s = self.inner.lock();
            if cut {
                if let Some(st) = s.iw.as_deref_mut() {
                    st.pumping = false;
                }
                // A work item that used its whole budget: the QP streams.
                s.eng.bulk |= by == Pumper::Work;
                self.queue_pump(&s.eng);
                return;
            }
            let more = self.iwarp_settle(&s, seen);
            let QpInner { iw, eng, .. } = &mut *s;
            let Some(st) = iw.as_deref_mut() else {
                return;
            };
            if (st.again || more) && !st.broken {
                st.again = false;
                continue;
            }
            st.pumping = false;
            if st.tx.is_empty() {
                // Nothing built is waiting for the socket: idle.
                eng.bulk = false;
            }
            return;
        }
    }

    /// The pump stopped.  While the socket holds back FPDUs already built
    /// (its write-space callback pumps again) or the stream holds its first
    /// one (the timer does), that pump finds whatever is posted meanwhile:
    /// the provider need not ring.  Otherwise set `QUEUE_ENGINE_IDLE` and
    /// look at the producer once more (as `Qp::settle` for RoCE); returns
    /// whether WQEs came after `seen`.
    fn iwarp_settle(&self, s: &QpInner, seen: u32) -> bool {
        let rts = s.state == QpState::Rts;
        if let Some(st) = s.iw.as_deref() {
            if rts && !st.broken && (!st.tx.is_empty() || st.hold) {
                return false;
            }
        }
        self.engine_idle(s);
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        rts && s.sq.producer() != seen
    }

    /// `iwarp_pump`'s work, by the one context that pumps.  True: it
    /// stopped with more to build, for the work item (a doorbell's pump
    /// after its first build, a work item once it handed the socket
    /// `FIRST_WORK_BYTES`, or `WORK_BYTES` while the QP streams: `bulk`).
    fn iwarp_send(&self, by: Pumper, bulk: bool) -> bool {
        let dev = self.dev();
        let ahead = if by == Pumper::Doorbell {
            DOORBELL_AHEAD
        } else {
            TX_AHEAD
        };
        let mut built = false;
        let mut handed = 0;
        let budget = if bulk { WORK_BYTES } else { FIRST_WORK_BYTES };
        loop {
            // Hand over what is built.
            let (tcp, cep, mut buf) = {
                let mut s = self.inner.lock();
                let Some(st) = s.iw.as_mut() else {
                    return false;
                };
                if st.broken {
                    return false;
                }
                (st.tcp.clone(), st.cep.clone(), core::mem::take(&mut st.tx))
            };
            let (sent, r) = buf.send(&tcp);
            let failed = r.is_err();
            handed += sent;
            let mut after = After::default();
            let step = {
                let mut s = self.inner.lock();
                let (step, error) = {
                    let QpInner {
                        iw,
                        sq,
                        sq_cons,
                        state,
                        ..
                    } = &mut *s;
                    let Some(st) = iw.as_deref_mut() else {
                        // A graceful close took the stream meanwhile: what
                        // is left follows what it found (`Cep::disconnect`).
                        if !failed {
                            cep.drain_more(&buf);
                        }
                        return false;
                    };
                    let whole = buf.is_empty() && !failed;
                    st.taken += sent as u64;
                    dev.counters().add(Counter::SentBytes, sent as u64);
                    st.tx = buf;
                    // The SENDs and WRITEs the socket now holds whole are
                    // done (an application that sees the completion may
                    // look for the data at the other end).  Not once the
                    // QP is in ERR: its flush completed what was left.
                    if !st.broken && *state != QpState::Err {
                        let taken = st.taken;
                        let q = SendQueue {
                            qp: self,
                            dev: &dev,
                            sq: &*sq,
                            sq_cons: &mut *sq_cons,
                            after: &mut after,
                        };
                        let (out, params, mut io) = st.outbound(q, ahead);
                        out.taken(taken, params.confirm, &mut io);
                    }
                    if !whole {
                        // The socket is full (its write-space callback
                        // brings us back) or broken.
                        (
                            if failed {
                                Step::Close(true)
                            } else {
                                Step::Wait
                            },
                            false,
                        )
                    } else if st.term_sent {
                        // The TERMINATE went out: close.
                        (Step::Close(false), false)
                    } else if let Some(c) = st.term {
                        // What was built went out: now the TERMINATE.
                        st.term_sent = true;
                        if terminate_fpdu(&mut st.tx, c, st.crc).is_ok() {
                            self.count(Counter::IwTerminatesSent);
                            (Step::Again, false)
                        } else {
                            (Step::Close(true), false)
                        }
                    } else if st.hold {
                        (Step::Wait, false)
                    } else if st.rtr_owed {
                        st.rtr_owed = false;
                        if rtr_fpdu(&mut st.tx, st.crc).is_ok() {
                            self.count(Counter::IwTxFpdus);
                            (Step::Again, false)
                        } else {
                            (Step::Close(true), false)
                        }
                    } else {
                        st.params.sending = *state == QpState::Rts;
                        let q = SendQueue {
                            qp: self,
                            dev: &dev,
                            sq,
                            sq_cons,
                            after: &mut after,
                        };
                        let (out, params, mut io) = st.outbound(q, ahead);
                        let o: Outcome = out.emit(params, &mut io);
                        let sent = io.fpdus;
                        self.count_n(Counter::IwTxFpdus, sent);
                        self.count_n(Counter::IwTxRefBytes, io.by_ref);
                        if o.fatal {
                            // (The peer learns why.)
                            st.term = Some(cause::LOCAL_CATASTROPHIC);
                        }
                        let again = !st.tx.is_empty() || st.term.is_some();
                        (
                            if again { Step::Again } else { Step::Wait },
                            o.error || o.fatal,
                        )
                    }
                };
                if error && s.state != QpState::Err {
                    self.enter(&mut s, QpState::Err, &mut after);
                }
                step
            };
            self.after(after);
            match step {
                // A doorbell hands over what its first build made (a small
                // message whole); the work item builds the rest.
                Step::Again if by == Pumper::Doorbell => {
                    if built {
                        return true;
                    }
                    built = true;
                }
                Step::Again if handed >= budget => return true,
                Step::Again => {}
                Step::Wait => return false,
                Step::Close(abort) => {
                    self.iwarp_end(abort);
                    return false;
                }
            }
        }
    }

    /// A graceful close takes the stream, and sends what it built after it
    /// (`Stream::unsent`, `Cep::drain_more`): the SENDs and WRITEs built
    /// are done (under the QP lock, before the ERR state flushes the rest).
    pub(crate) fn iwarp_hand_on(&self, q: &mut QpInner, after: &mut After) {
        let dev = self.dev();
        let QpInner {
            iw,
            sq,
            sq_cons,
            state,
            ..
        } = q;
        let Some(st) = iw.as_deref_mut().filter(|st| !st.broken) else {
            return;
        };
        if *state == QpState::Err {
            // (Its flush completed what was left.)
            return;
        }
        let q = SendQueue {
            qp: self,
            dev: &dev,
            sq,
            sq_cons,
            after,
        };
        let (out, _, mut io) = st.outbound(q, 0);
        // (Handed on for a graceful close: nothing will confirm them.)
        out.taken(u64::MAX, false, &mut io);
    }

    /// The socket has room again.
    pub(crate) fn iwarp_writable(&self) {
        self.schedule();
    }

    /// The QP's timer: the stream has held its first FPDU long enough
    /// (see `Stream::hold`).
    pub(crate) fn iwarp_timeout(&self) {
        if let Some(st) = self.inner.lock().iw.as_deref_mut() {
            st.hold = false;
        }
        // (Or a join waited for its peer too long.)
        self.join_timer();
        self.schedule();
    }
}

/// What the sender does next.
enum Step {
    /// Hand over what was just built.
    Again,
    /// Nothing to do until more work or write space.
    Wait,
    /// End the connection (`true`: with a reset).
    Close(bool),
}
