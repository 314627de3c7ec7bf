// SPDX-License-Identifier: GPL-2.0
//! What goes out on an iWARP stream: send-queue WQEs become RDMAP
//! messages (RFC 5040, RFC 7306 where both ends have it), cut into FPDU
//! segments (`fpdu::Segments`), with the answers to the peer's READ and
//! atomic requests put first.  Sans-IO: the caller owns the send queue,
//! the memory the payload comes from and the TCP socket; the machine keeps
//! the MSNs, the ORD, the fences, and where a message stopped when the
//! socket was full.
//!
//! TCP delivers what it accepts, so a SEND or WRITE is complete once the
//! socket has taken its last byte (`taken`: not when its FPDUs are built,
//! which may be long before, behind a full socket); a READ or atomic once
//! its answer is back (`read_answered`).  Completions are reported in the
//! send queue's order.
//!
//! A QP joined by modify_qp, as IB joins QPs, gets IB's promise for its
//! WRITEs too (`OutboundParams::confirm`): a WRITE completes once its data
//! is placed at the peer.  RFC 5040 gives no acknowledgment of placement,
//! but it orders a READ's response after the placement of every WRITE
//! before the READ: when nothing later would tell, the machine sends a
//! zero-length READ of its own after the WRITEs (a "confirming READ",
//! RFC 6581's RTR READ on the wire) and completes them with its response.

use super::fpdu::{
    AtomicOp, AtomicRequest, AtomicResponse, Header, Opcode, Placement, RdmapHeader, ReadRequest,
    Segment, Segments, IMMEDIATE_LEN,
};
use crate::roce::wc;
use crate::transport_rules::MsgOp;

/// A send WQE as the caller read and checked it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OutWqe {
    /// `None`: a local operation (bind, invalidate, fast-register).
    pub(crate) op: Option<MsgOp>,
    pub(crate) len: u32,
    pub(crate) fence: bool,
    pub(crate) solicited: bool,
    /// Non-zero: the WQE failed its checks with this completion status.
    pub(crate) error: u8,
    /// A local operation that may run before the WQEs ahead of it
    /// complete (fast registration, MW bind: a key nothing earlier uses).
    pub(crate) early: bool,
    /// WRITE, READ source, atomics: the peer's buffer.
    pub(crate) remote_stag: u32,
    pub(crate) remote_to: u64,
    /// READ: the local buffer the responses fill (one STag: a tagged sink).
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    /// SEND with invalidate: the STag; WRITE with immediate: the data.
    pub(crate) inv_stag: u32,
    pub(crate) imm: u32,
    /// Atomics: the operands as the verbs name them.
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
}

/// An answer owed to the peer, in the order its requests came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// READ response: the bytes of `src` go to the peer's sink.
    Read(ReadRequest),
    /// The atomic's result, computed by the caller when it accepted it.
    Atomic(AtomicResponse),
}

/// Where a segment's payload comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// Bytes `offset..offset + len` of the WQE in this send queue slot.
    Wqe(u32),
    /// Local memory: `len` bytes at `to + offset` of the buffer `stag`
    /// (a READ response).
    Local { stag: u32, to: u64 },
    /// No payload.
    None,
}

/// The caller's answer when a segment cannot go out now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EmitFail {
    /// The socket takes no more now: come back when it has room.
    Full,
    /// The payload's memory is gone or not allowed (fails the WQE; for a
    /// READ response, the stream).
    BadMemory,
}

/// The caller's side of the outbound stream.
pub(crate) trait OutboundIo {
    fn producer(&mut self) -> u32;
    fn slots(&self) -> u32;
    /// Read and check the WQE in slot `index`.
    fn prepare(&mut self, index: u32) -> Option<OutWqe>;
    /// Run a local operation; its completion status.
    fn run_local(&mut self, index: u32) -> u8;
    /// Queue one FPDU: the segment's headers, its payload from `src`.
    fn emit(&mut self, seg: &Segment, src: Source) -> Result<(), EmitFail>;
    /// The stream position after everything queued so far (bytes since
    /// the stream began, as `taken` counts them).
    fn position(&self) -> u64;
    /// The WQE in slot `index` (the head) is done with `status`; `len`
    /// is its message length as `prepare` gave it.
    fn complete(&mut self, index: u32, status: u8, len: u32);
    /// The oldest answer owed to the peer, if any (not yet taken).
    fn next_answer(&mut self) -> Option<Answer>;
    /// That answer went out whole.
    fn answered(&mut self);
}

/// Settings of the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutboundParams {
    /// The largest FPDU (from the TCP segment size).
    pub(crate) max_fpdu: usize,
    /// READ and atomic requests in flight at once (ORD, at least 1).
    pub(crate) ord: u32,
    /// RFC 7306 immediate data and atomics: only between softrnic ends.
    pub(crate) extensions: bool,
    /// New messages may start (RTS).
    pub(crate) sending: bool,
    /// A WRITE completes once the peer has placed it (a READ answered
    /// after it), not when the socket took it: IB's promise, for QPs
    /// joined by modify_qp.
    pub(crate) confirm: bool,
}

/// A message partly handed to the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InProgress {
    /// The send queue slot, or `None` for an answer or a confirming READ.
    index: Option<u32>,
    /// A confirming READ, sent after the WRITE in this slot.
    confirms: Option<u32>,
    first: Header,
    len: u32,
    /// Payload bytes already out.
    offset: u32,
    src: Source,
    /// WRITE with immediate: the immediate message follows the WRITE.
    then_immediate: Option<[u8; IMMEDIATE_LEN]>,
}

/// Per-slot progress of the send queue (the caller's storage).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) wqe: OutWqe,
    /// Out whole (READ/atomic: the request is out).
    pub(crate) sent: bool,
    /// SEND/WRITE: the stream position its last byte ends at; done once
    /// the socket has taken the stream that far.
    pub(crate) ends_at: u64,
    /// Done, awaiting its turn at the head.
    pub(crate) done: bool,
    pub(crate) status: u8,
    /// A confirming READ went out right after this slot's message and is
    /// not answered yet.
    pub(crate) confirming: bool,
}

/// A WQE done at the head of the send queue (`Outbound::take_done`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Done {
    pub(crate) index: u32,
    pub(crate) status: u8,
    /// Its message length, as `prepare` gave it.
    pub(crate) len: u32,
}

/// The outbound state of one stream.
pub(crate) struct Outbound<S> {
    slots: S,
    /// The oldest WQE not yet completed, and the next to start.
    head: u32,
    next: u32,
    /// The next MSN on queues 0, 1 and 3 (2, TERMINATE, is always 1).
    msn: [u32; 4],
    /// READ and atomic requests out and not answered.
    reads_out: u32,
    cur: Option<InProgress>,
    /// Requests counted for atomics' request identifiers.
    atomic_id: u32,
}

impl<S: core::ops::DerefMut<Target = [Slot]>> Outbound<S> {
    /// An outbound machine with `slots` as its per-slot storage (a power of
    /// two no smaller than the send queue).
    pub(crate) fn new(slots: S) -> Self {
        Outbound {
            slots,
            head: 0,
            next: 0,
            msn: [1; 4],
            reads_out: 0,
            cur: None,
            atomic_id: 0,
        }
    }

    /// Start at send-queue index `index` (nothing sent yet): the WQEs
    /// before it completed before the machine existed (local operations,
    /// which run at the head of the queue while a QP has no connection).
    pub(crate) fn start_at(&mut self, index: u32) {
        self.head = index;
        self.next = index;
    }

    fn slot(&mut self, index: u32) -> &mut Slot {
        let n = self.slots.len();
        &mut self.slots[index as usize & n.wrapping_sub(1)]
    }

    /// READ and atomic requests out and unanswered.
    pub(crate) const fn reads_out(&self) -> u32 {
        self.reads_out
    }

    /// The oldest unanswered request: a READ or atomic in its slot, or a
    /// confirming READ after one (`true`).  Answers come in this order.
    fn oldest_read(&mut self) -> Option<(u32, bool)> {
        let mut i = self.head;
        while i != self.next {
            let s = *self.slot(i);
            if s.sent && !s.done && is_read_or_atomic(s.wqe.op) {
                return Some((i, false));
            }
            if s.confirming {
                return Some((i, true));
            }
            i = i.wrapping_add(1);
        }
        None
    }

    /// The READ awaiting responses (for `inbound`'s checks): a confirming
    /// READ is a zero-length READ into no buffer.
    pub(crate) fn read_awaited(&mut self) -> Option<(u32, OutWqe)> {
        let (i, confirming) = self.oldest_read()?;
        if confirming {
            let w = OutWqe {
                op: Some(MsgOp::Read),
                ..OutWqe::default()
            };
            return Some((i, w));
        }
        Some((i, self.slot(i).wqe))
    }

    /// The answer to the oldest READ or atomic request arrived (its last
    /// response, or the atomic response): it completes, in order, at the
    /// next `emit`.  False if none was awaited.
    pub(crate) fn read_answered(&mut self) -> bool {
        self.read_done(wc::SUCCESS)
    }

    /// The peer refused our oldest READ or atomic request (a TERMINATE for
    /// a remote protection error, RFC 5040 section 7.2): it is done, with
    /// REM_ACCESS_ERR, as an IB responder's NAK would leave it.  False if
    /// none was awaited.
    pub(crate) fn read_refused(&mut self) -> bool {
        self.read_done(wc::REM_ACCESS_ERR)
    }

    /// The oldest READ or atomic request is done with `status`.  The
    /// SENDs and WRITEs before it are done too: the socket took them
    /// before the request, which the peer has answered.
    fn read_done(&mut self, status: u8) -> bool {
        let Some((i, confirming)) = self.oldest_read() else {
            return false;
        };
        let mut j = self.head;
        while j != i {
            let s = self.slot(j);
            if s.sent && !s.done {
                s.done = true;
                s.status = wc::SUCCESS;
            }
            j = j.wrapping_add(1);
        }
        let s = self.slot(i);
        if confirming {
            // (A zero-length READ is never refused: the WRITEs it
            // confirms were placed before it was looked at.)
            s.confirming = false;
            if !s.done {
                s.done = true;
                s.status = wc::SUCCESS;
            }
        } else {
            s.done = true;
            s.status = status;
        }
        self.reads_out = self.reads_out.saturating_sub(1);
        true
    }

    /// The oldest WQE if it is done (its index, status and length), taken off:
    /// for completing what is done before a flush, with no `emit` to come.
    pub(crate) fn take_done(&mut self) -> Option<Done> {
        if self.head == self.next {
            return None;
        }
        let h = self.head;
        let s = *self.slot(h);
        if !s.done {
            return None;
        }
        self.head = h.wrapping_add(1);
        Some(Done {
            index: h,
            status: s.status,
            len: s.wqe.len,
        })
    }

    /// The socket has taken the stream up to `position`: the SENDs and
    /// WRITEs it holds whole are done (with `confirm`, the WRITEs wait for
    /// a READ's answer); complete what is done, in order.
    pub(crate) fn taken(&mut self, position: u64, confirm: bool, io: &mut impl OutboundIo) {
        let mut i = self.head;
        while i != self.next {
            let s = self.slot(i);
            if s.sent && !s.done && !is_read_or_atomic(s.wqe.op) {
                if s.ends_at > position {
                    break;
                }
                if !(confirm && is_write(s.wqe.op)) {
                    s.done = true;
                    s.status = wc::SUCCESS;
                }
            }
            i = i.wrapping_add(1);
        }
        self.retire(io);
    }

    /// With `confirm`: the slot of the newest WRITE out and unconfirmed
    /// that no request after it will confirm, if a READ may go out now.
    fn needs_confirming(&mut self, p: &OutboundParams) -> Option<u32> {
        if !p.confirm || self.cur.is_some() || self.reads_out >= p.ord.max(1) {
            return None;
        }
        let mut found = None;
        let mut i = self.head;
        while i != self.next {
            let s = *self.slot(i);
            if s.sent && !s.done && is_write(s.wqe.op) {
                found = Some(i);
            }
            // A request after the WRITEs found so far answers for them.
            if s.confirming || (s.sent && !s.done && is_read_or_atomic(s.wqe.op)) {
                found = None;
            }
            i = i.wrapping_add(1);
        }
        found
    }

    /// A zero-length READ request, after the message in slot `index`.
    fn confirming_read(&mut self, index: u32) -> InProgress {
        InProgress {
            index: None,
            confirms: Some(index),
            first: self.untagged(
                Opcode::ReadRequest,
                0,
                RdmapHeader::ReadRequest(ReadRequest {
                    sink_stag: 0,
                    sink_to: 0,
                    len: 0,
                    src_stag: 0,
                    src_to: 0,
                }),
            ),
            len: 0,
            offset: 0,
            src: Source::None,
            then_immediate: None,
        }
    }

    /// Complete done WQEs from the head, in order.
    fn retire(&mut self, io: &mut impl OutboundIo) {
        while let Some(d) = self.take_done() {
            io.complete(d.index, d.status, d.len);
        }
    }

    fn next_msn(&mut self, qn: usize) -> u32 {
        let m = self.msn[qn];
        self.msn[qn] = m.wrapping_add(1);
        m
    }

    fn untagged(&mut self, opcode: Opcode, inv_stag: u32, rdmap: RdmapHeader) -> Header {
        let qn = opcode.queue().unwrap_or(0);
        Header {
            opcode,
            last: true,
            place: Placement::Untagged {
                qn,
                msn: self.next_msn(qn as usize),
                mo: 0,
                inv_stag,
            },
            rdmap,
        }
    }

    /// The message for WQE `w` (an operation `supported` allows).
    fn message(&mut self, index: u32, w: &OutWqe) -> InProgress {
        let op = w.op.unwrap_or(MsgOp::Send);
        let tagged = |stag, to| Header {
            opcode: Opcode::Write,
            last: true,
            place: Placement::Tagged { stag, to },
            rdmap: RdmapHeader::None,
        };
        let mut m = InProgress {
            index: Some(index),
            confirms: None,
            first: tagged(w.remote_stag, w.remote_to),
            len: w.len,
            offset: 0,
            src: Source::Wqe(index),
            then_immediate: None,
        };
        match op {
            MsgOp::Send | MsgOp::SendInv => {
                let opcode = match (op == MsgOp::SendInv, w.solicited) {
                    (false, false) => Opcode::Send,
                    (false, true) => Opcode::SendSolicited,
                    (true, false) => Opcode::SendInvalidate,
                    (true, true) => Opcode::SendSolicitedInvalidate,
                };
                m.first = self.untagged(opcode, w.inv_stag, RdmapHeader::None);
            }
            MsgOp::Write => {}
            MsgOp::WriteImm => {
                m.then_immediate = Some(imm_bytes(w.imm));
            }
            MsgOp::Read => {
                m.first = self.untagged(
                    Opcode::ReadRequest,
                    0,
                    RdmapHeader::ReadRequest(ReadRequest {
                        sink_stag: w.sink_stag,
                        sink_to: w.sink_to,
                        len: w.len,
                        src_stag: w.remote_stag,
                        src_to: w.remote_to,
                    }),
                );
                m.len = 0;
                m.src = Source::None;
            }
            MsgOp::CmpSwap | MsgOp::FetchAdd => {
                self.atomic_id = self.atomic_id.wrapping_add(1);
                let (op, add_swap, compare) = if op == MsgOp::CmpSwap {
                    (AtomicOp::CompareSwap, w.swap, w.compare_add)
                } else {
                    (AtomicOp::FetchAdd, w.compare_add, 0)
                };
                m.first = self.untagged(
                    Opcode::AtomicRequest,
                    0,
                    RdmapHeader::AtomicRequest(AtomicRequest::plain(
                        op,
                        self.atomic_id,
                        w.remote_stag,
                        w.remote_to,
                        add_swap,
                        compare,
                    )),
                );
                m.len = 0;
                m.src = Source::None;
            }
            // (Refused by `supported`.)
            MsgOp::SendImm => {}
        }
        m
    }

    /// Push `m` out from where it stopped, to its end.
    fn push(
        &mut self,
        p: &OutboundParams,
        io: &mut impl OutboundIo,
        m: &mut InProgress,
    ) -> Result<(), EmitFail> {
        loop {
            let Some(seg) = Segments::resume(m.first, m.len, p.max_fpdu, m.offset).next() else {
                return Ok(());
            };
            io.emit(&seg, m.src)?;
            m.offset = seg.offset + seg.len;
            if !seg.hdr.last {
                continue;
            }
            let Some(d) = m.then_immediate.take() else {
                return Ok(());
            };
            // The immediate data message follows its WRITE.
            let opcode = if self.slot_solicited(m.index) {
                Opcode::ImmediateSolicited
            } else {
                Opcode::Immediate
            };
            m.first = self.untagged(opcode, 0, RdmapHeader::Immediate(d));
            m.len = 0;
            m.offset = 0;
            m.src = Source::None;
        }
    }

    fn slot_solicited(&mut self, index: Option<u32>) -> bool {
        index.is_some_and(|i| self.slot(i).wqe.solicited)
    }

    /// Hand the socket what may go out now: answers first, then the send
    /// queue in order, as far as the ORD, the fences and the socket allow.
    pub(crate) fn emit(&mut self, p: &OutboundParams, io: &mut impl OutboundIo) -> Outcome {
        let mut out = Outcome::default();
        self.retire(io);
        let prod = io.producer();
        if prod.wrapping_sub(self.head) > io.slots() {
            // More WQEs than slots: the ring is corrupt.
            out.fatal = true;
            return out;
        }
        loop {
            // Finish what the socket stopped.
            if let Some(mut m) = self.cur.take() {
                match self.push(p, io, &mut m) {
                    Ok(()) => self.finished(io, &m),
                    Err(EmitFail::Full) => {
                        self.cur = Some(m);
                        return out;
                    }
                    Err(EmitFail::BadMemory) => {
                        if !self.failed(io, &m, &mut out) {
                            return out;
                        }
                    }
                }
                continue;
            }
            if let Some(a) = io.next_answer() {
                self.cur = Some(self.answer(a));
                continue;
            }
            if !p.sending || self.next == prod {
                if let Some(i) = self.needs_confirming(p) {
                    self.cur = Some(self.confirming_read(i));
                    continue;
                }
                return out;
            }
            let index = self.next;
            let Some(w) = io.prepare(index) else {
                return out;
            };
            // Local operations and WQEs that fail their checks complete in
            // order: once everything before them has.
            let at_head_only = w.op.is_none() || w.error != 0 || !supported(p, w.op);
            if at_head_only && index != self.head {
                // A fast registration or MW bind runs when reached (a
                // chain of REG_MR and READ, as rdma_rw posts for every
                // READ over iWARP, waits for no earlier READ) and
                // completes in order.  One that fails changed nothing: it
                // runs again at the head (it may need what an earlier WQE
                // does on completion, a READ with invalidate freeing the
                // MR it registers anew).
                let early = w.op.is_none() && w.error == 0 && w.early && !w.fence;
                if !early || io.run_local(index) != wc::SUCCESS {
                    // Waiting for the head: a WRITE before it that awaits
                    // its confirmation gets its READ now, or the two would
                    // wait for each other.
                    if let Some(i) = self.needs_confirming(p) {
                        self.cur = Some(self.confirming_read(i));
                        continue;
                    }
                    return out;
                }
                *self.slot(index) = Slot {
                    wqe: w,
                    done: true,
                    status: wc::SUCCESS,
                    ..Slot::default()
                };
                self.next = index.wrapping_add(1);
                continue;
            }
            if !at_head_only {
                if w.fence && self.reads_out > 0 {
                    return out;
                }
                if is_read_or_atomic(w.op) && self.reads_out >= p.ord.max(1) {
                    return out;
                }
            }
            *self.slot(index) = Slot {
                wqe: w,
                ..Slot::default()
            };
            self.next = index.wrapping_add(1);
            if !at_head_only {
                self.cur = Some(self.message(index, &w));
                continue;
            }
            let status = if w.error != 0 {
                w.error
            } else if w.op.is_some() {
                wc::LOC_QP_OP_ERR
            } else {
                io.run_local(index)
            };
            let sl = self.slot(index);
            sl.done = true;
            sl.status = status;
            self.retire(io);
            if status != wc::SUCCESS {
                out.error = true;
                return out;
            }
        }
    }

    fn answer(&mut self, a: Answer) -> InProgress {
        match a {
            Answer::Read(r) => InProgress {
                index: None,
                confirms: None,
                first: Header {
                    opcode: Opcode::ReadResponse,
                    last: true,
                    place: Placement::Tagged {
                        stag: r.sink_stag,
                        to: r.sink_to,
                    },
                    rdmap: RdmapHeader::None,
                },
                len: r.len,
                offset: 0,
                src: Source::Local {
                    stag: r.src_stag,
                    to: r.src_to,
                },
                then_immediate: None,
            },
            Answer::Atomic(resp) => InProgress {
                index: None,
                confirms: None,
                first: self.untagged(Opcode::AtomicResponse, 0, RdmapHeader::AtomicResponse(resp)),
                len: 0,
                offset: 0,
                src: Source::None,
                then_immediate: None,
            },
        }
    }

    /// `m` is all out.
    fn finished(&mut self, io: &mut impl OutboundIo, m: &InProgress) {
        if let Some(i) = m.confirms {
            self.slot(i).confirming = true;
            self.reads_out += 1;
            return;
        }
        let Some(index) = m.index else {
            io.answered();
            return;
        };
        let at = io.position();
        let s = self.slot(index);
        s.sent = true;
        if is_read_or_atomic(s.wqe.op) {
            self.reads_out += 1;
        } else {
            s.ends_at = at;
        }
    }

    /// The payload of `m` could not be read; whether to go on.
    fn failed(&mut self, io: &mut impl OutboundIo, m: &InProgress, out: &mut Outcome) -> bool {
        match m.index {
            // A READ response from memory the peer may no longer read:
            // the stream ends (the caller sends TERMINATE).
            None => {
                out.fatal = true;
                false
            }
            Some(index) if m.offset == 0 => {
                let s = self.slot(index);
                s.done = true;
                s.status = wc::LOC_PROT_ERR;
                self.retire(io);
                out.error = true;
                false
            }
            // Part of the message is out already: the stream cannot
            // continue it.
            Some(_) => {
                out.fatal = true;
                false
            }
        }
    }
}

/// What a step left to the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// A WQE completed in error: the QP goes to ERR (flushing the rest).
    pub(crate) error: bool,
    /// The stream cannot go on: TERMINATE and close.
    pub(crate) fatal: bool,
}

/// Whether an iWARP stream can carry `op`: SEND with immediate has no
/// RDMAP message; WRITE with immediate and atomics need RFC 7306 at both
/// ends.
fn supported(p: &OutboundParams, op: Option<MsgOp>) -> bool {
    match op {
        Some(MsgOp::SendImm) => false,
        Some(MsgOp::WriteImm | MsgOp::CmpSwap | MsgOp::FetchAdd) => p.extensions,
        _ => true,
    }
}

fn is_write(op: Option<MsgOp>) -> bool {
    matches!(op, Some(MsgOp::Write | MsgOp::WriteImm))
}

fn is_read_or_atomic(op: Option<MsgOp>) -> bool {
    matches!(op, Some(MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd))
}

/// The verbs' 32-bit immediate data in RFC 7306's 8 bytes (first four,
/// network order).
pub(crate) fn imm_bytes(imm: u32) -> [u8; IMMEDIATE_LEN] {
    let mut d = [0u8; IMMEDIATE_LEN];
    d[..4].copy_from_slice(&imm.to_be_bytes());
    d
}
