// SPDX-License-Identifier: GPL-2.0
//! What inbound FPDUs may do, by DDP's rules (RFC 5041: queue numbers, MSN
//! and MO of untagged messages, tagged placement) and RDMAP's (RFC 5040
//! and RFC 7306: which message completes what).  Sans-IO: the machine
//! keeps the sequence state of one stream; memory, receive queues, READ
//! bookkeeping and completions are the caller's, through [`InboundIo`].
//! It is the [`Sink`] that `rx.rs` feeds, so every refusal becomes the
//! cause of the TERMINATE that ends the stream.
//!
//! Over TCP segments arrive in order, so one message of each model is in
//! progress at a time: a tagged one (WRITE or READ response) and an
//! untagged one on each queue; a second tagged message interleaved into
//! the first is refused, as siw refuses it.

use super::fpdu::{cause, AtomicRequest, AtomicResponse, Cause, Opcode, Parsed, Placement};
use super::fpdu::{RdmapHeader, ReadRequest, Terminate, IMMEDIATE_LEN};
use super::rx::Sink;

/// The DDP queues RDMAP uses (0 SEND, 1 READ/atomic request, 2
/// TERMINATE, 3 atomic response).
const QUEUES: usize = 4;

/// Who may write a tagged buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaggedUse {
    /// The peer's RDMA WRITE: remote write access.
    Write,
    /// The response to our READ: the local buffer our WQE named.
    ReadResponse,
}

/// A READ of ours that responses are awaited for (the oldest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReadAwaited {
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    pub(crate) len: u32,
}

/// A message delivered into a posted receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Received {
    pub(crate) len: u32,
    /// The STag a SEND with invalidate names.
    pub(crate) invalidate: Option<u32>,
    pub(crate) solicited: bool,
    /// RFC 7306 immediate data (a message with no payload of its own).
    pub(crate) immediate: Option<[u8; IMMEDIATE_LEN]>,
}

/// The caller's side of inbound messages.  Each method returns the cause
/// of a TERMINATE to refuse.
pub(crate) trait InboundIo {
    /// May `len` bytes at `to` of the buffer `stag` be written for `what`
    /// (a valid STag of this QP's protection domain, the right access,
    /// within bounds)?
    fn check_tagged(
        &mut self,
        stag: u32,
        to: u64,
        len: usize,
        what: TaggedUse,
    ) -> Result<(), Cause>;
    /// Write `data` at `to` of the buffer `stag` (checked above).
    fn place_tagged(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), Cause>;
    /// Take the next posted receive for a new message; its capacity.
    fn take_receive(&mut self) -> Result<u32, Cause>;
    /// Write `data` at `offset` of the receive taken.
    fn place_untagged(&mut self, offset: u32, data: &[u8]) -> Result<(), Cause>;
    /// The message is whole: complete the receive (and invalidate).
    fn received(&mut self, r: &Received) -> Result<(), Cause>;
    /// The oldest READ we sent that is still awaited, if any.
    fn read_awaited(&mut self) -> Option<ReadAwaited>;
    /// Its last response arrived: complete it.
    fn read_done(&mut self) -> Result<(), Cause>;
    /// The peer asks to read: check the source and queue the response.
    fn read_request(&mut self, r: &ReadRequest) -> Result<(), Cause>;
    /// The peer asks for an atomic operation (RFC 7306).
    fn atomic_request(&mut self, a: &AtomicRequest) -> Result<(), Cause>;
    /// The answer to our atomic request.
    fn atomic_response(&mut self, a: &AtomicResponse) -> Result<(), Cause>;
    /// The peer ended the stream.
    fn terminated(&mut self, t: &Terminate);
}

/// A tagged message in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TaggedMsg {
    opcode: Opcode,
    stag: u32,
    next_to: u64,
    /// Bytes so far (READ responses: checked against the READ's length).
    done: u64,
}

/// An untagged message in progress on queue 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct UntaggedMsg {
    msn: u32,
    next_mo: u32,
    capacity: u32,
    /// RFC 6581's zero-length SEND RTR: no receive taken, none completed.
    rtr: bool,
}

/// The inbound sequence state of one stream.
pub(crate) struct Inbound<'a, Io> {
    pub(crate) io: &'a mut Io,
    pub(crate) state: &'a mut InboundState,
}

/// What [`Inbound`] keeps between FPDUs (the caller stores it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InboundState {
    /// The next MSN expected on each queue (RFC 5041: the first is 1).
    msn: [u32; QUEUES],
    tagged: Option<TaggedMsg>,
    untagged: Option<UntaggedMsg>,
    /// READ and atomic requests accepted and not yet answered, and how
    /// many the IRD allows.
    reads_in: u32,
    ird: u32,
    /// RFC 7306's messages are welcome (negotiated at setup).
    extensions: bool,
    /// Peer-to-peer with the zero-length SEND as the RTR (RFC 6581): the
    /// first message, if that SEND, is the RTR and consumes no receive.
    rtr_send: bool,
}

impl InboundState {
    pub(crate) const fn new(ird: u32) -> InboundState {
        InboundState {
            msn: [1; QUEUES],
            tagged: None,
            untagged: None,
            reads_in: 0,
            ird,
            extensions: true,
            rtr_send: false,
        }
    }

    /// A responder whose initiator sends a zero-length SEND as its RTR.
    pub(crate) const fn rtr_send(mut self, on: bool) -> InboundState {
        self.rtr_send = on;
        self
    }

    /// Whether the peer may send RFC 7306's messages (atomics, immediate
    /// data): on a stream without them they draw a TERMINATE.
    pub(crate) const fn extensions(mut self, on: bool) -> InboundState {
        self.extensions = on;
        self
    }

    /// A queued READ or atomic response went out: a request slot frees.
    pub(crate) fn answered(&mut self) {
        self.reads_in = self.reads_in.saturating_sub(1);
    }

    /// Requests waiting for their response.
    pub(crate) const fn reads_in(&self) -> u32 {
        self.reads_in
    }
}

impl<Io: InboundIo> Inbound<'_, Io> {
    /// The untagged queue's MSN and MO rules for the segment in `p`.
    fn untagged_seq(&self, qn: u32, msn: u32, mo: u32) -> Result<(), Cause> {
        let q = qn as usize;
        if q >= QUEUES {
            return Err(cause::DDP_BAD_QN);
        }
        if q == 0 {
            if let Some(m) = self.state.untagged {
                if msn != m.msn {
                    return Err(cause::DDP_MSN_RANGE);
                }
                return if mo == m.next_mo {
                    Ok(())
                } else {
                    Err(cause::DDP_BAD_MO)
                };
            }
        }
        if msn != self.state.msn[q] {
            return Err(cause::DDP_MSN_RANGE);
        }
        if mo != 0 {
            return Err(cause::DDP_BAD_MO);
        }
        Ok(())
    }

    fn begin_tagged(&mut self, p: &Parsed, stag: u32, to: u64) -> Result<(), Cause> {
        let op = p.hdr.opcode;
        let len = p.payload_len;
        match self.state.tagged {
            Some(t) if t.opcode != op || t.stag != stag || t.next_to != to => {
                // Another tagged message inside this one.
                return Err(cause::DDP_TAGGED_BASE_BOUNDS);
            }
            Some(_) => {}
            None => {
                if op == Opcode::ReadResponse {
                    let r = self.io.read_awaited().ok_or(cause::UNEXPECTED_OPCODE)?;
                    if r.sink_stag != stag {
                        return Err(cause::DDP_TAGGED_INVALID_STAG);
                    }
                    if r.sink_to != to {
                        return Err(cause::DDP_TAGGED_BASE_BOUNDS);
                    }
                }
                self.state.tagged = Some(TaggedMsg {
                    opcode: op,
                    stag,
                    next_to: to,
                    done: 0,
                });
            }
        }
        if op == Opcode::ReadResponse {
            let r = self.io.read_awaited().ok_or(cause::UNEXPECTED_OPCODE)?;
            let done = self.state.tagged.map_or(0, |t| t.done);
            if done + len as u64 > u64::from(r.len) {
                return Err(cause::DDP_TAGGED_BASE_BOUNDS);
            }
        }
        // A zero-length WRITE places nothing and names no buffer (it is
        // RFC 6581's RTR, sent with any STag).
        if len == 0 {
            return Ok(());
        }
        let what = if op == Opcode::Write {
            TaggedUse::Write
        } else {
            TaggedUse::ReadResponse
        };
        to.checked_add(len as u64)
            .ok_or(cause::DDP_TAGGED_TO_WRAP)?;
        self.io.check_tagged(stag, to, len, what)
    }

    fn end_tagged(&mut self, p: &Parsed) -> Result<(), Cause> {
        let Some(mut t) = self.state.tagged else {
            return Err(cause::LOCAL_CATASTROPHIC);
        };
        t.next_to = t.next_to.wrapping_add(p.payload_len as u64);
        t.done += p.payload_len as u64;
        if !p.hdr.last {
            self.state.tagged = Some(t);
            return Ok(());
        }
        self.state.tagged = None;
        if t.opcode == Opcode::ReadResponse {
            let r = self.io.read_awaited().ok_or(cause::UNEXPECTED_OPCODE)?;
            if t.done != u64::from(r.len) {
                return Err(cause::DDP_TAGGED_BASE_BOUNDS);
            }
            self.io.read_done()?;
        }
        Ok(())
    }

    fn end_untagged(&mut self, p: &Parsed, qn: u32, inv_stag: u32) -> Result<(), Cause> {
        let op = p.hdr.opcode;
        let q = qn as usize % QUEUES;
        match p.hdr.rdmap {
            RdmapHeader::ReadRequest(r) => {
                self.state.reads_in += 1;
                self.io.read_request(&r)?;
            }
            RdmapHeader::AtomicRequest(a) => {
                self.state.reads_in += 1;
                self.io.atomic_request(&a)?;
            }
            RdmapHeader::AtomicResponse(a) => self.io.atomic_response(&a)?,
            RdmapHeader::Terminate(t) => self.io.terminated(&t),
            RdmapHeader::Immediate(_) | RdmapHeader::None => {
                let Some(mut m) = self.state.untagged else {
                    return Err(cause::LOCAL_CATASTROPHIC);
                };
                m.next_mo += p.payload_len as u32;
                if !p.hdr.last {
                    self.state.untagged = Some(m);
                    return Ok(());
                }
                self.state.untagged = None;
                if m.rtr {
                    // The RTR: it only numbers MSN 1.
                    self.state.msn[q] = self.state.msn[q].wrapping_add(1);
                    return Ok(());
                }
                let immediate = match p.hdr.rdmap {
                    RdmapHeader::Immediate(d) => Some(d),
                    _ => None,
                };
                self.io.received(&Received {
                    len: m.next_mo,
                    invalidate: op.invalidates().then_some(inv_stag),
                    solicited: op.solicited(),
                    immediate,
                })?;
            }
        }
        self.state.msn[q] = self.state.msn[q].wrapping_add(1);
        Ok(())
    }
}

impl<Io: InboundIo> Sink for Inbound<'_, Io> {
    fn begin(&mut self, p: &Parsed) -> Result<(), Cause> {
        let op = p.hdr.opcode;
        // The RTR, if a SEND, is the stream's first FPDU and nothing later.
        let rtr_send = core::mem::take(&mut self.state.rtr_send);
        if op.extension() && !self.state.extensions {
            return Err(cause::UNEXPECTED_OPCODE);
        }
        match p.hdr.place {
            Placement::Tagged { stag, to } => self.begin_tagged(p, stag, to),
            Placement::Untagged { qn, msn, mo, .. } => {
                self.untagged_seq(qn, msn, mo)?;
                match op {
                    Opcode::ReadRequest | Opcode::AtomicRequest => {
                        if self.state.reads_in >= self.state.ird {
                            // More requests than the IRD we granted.
                            return Err(cause::STREAM_CATASTROPHIC);
                        }
                        Ok(())
                    }
                    Opcode::Terminate | Opcode::AtomicResponse => Ok(()),
                    _ => {
                        // The SEND family and immediate data: a posted
                        // receive for a new message, room in it for this
                        // segment.
                        let mut m = match self.state.untagged {
                            Some(m) => m,
                            None if rtr_send
                                && op == Opcode::Send
                                && p.payload_len == 0
                                && p.hdr.last =>
                            {
                                UntaggedMsg {
                                    msn,
                                    next_mo: 0,
                                    capacity: 0,
                                    rtr: true,
                                }
                            }
                            None => UntaggedMsg {
                                msn,
                                next_mo: 0,
                                capacity: self.io.take_receive()?,
                                rtr: false,
                            },
                        };
                        if u64::from(mo) + p.payload_len as u64 > u64::from(m.capacity) {
                            return Err(cause::DDP_TOO_LONG);
                        }
                        m.next_mo = mo;
                        self.state.untagged = Some(m);
                        Ok(())
                    }
                }
            }
        }
    }

    fn place(&mut self, p: &Parsed, offset: usize, data: &[u8]) -> Result<(), Cause> {
        match p.hdr.place {
            Placement::Tagged { stag, to } => {
                self.io
                    .place_tagged(stag, to.wrapping_add(offset as u64), data)
            }
            Placement::Untagged { mo, .. } => match p.hdr.opcode {
                // A TERMINATE's payload is the copy of the headers at
                // fault: nothing to place.
                Opcode::Terminate => Ok(()),
                _ => self.io.place_untagged(mo + offset as u32, data),
            },
        }
    }

    fn end(&mut self, p: &Parsed) -> Result<(), Cause> {
        match p.hdr.place {
            Placement::Tagged { .. } => self.end_tagged(p),
            Placement::Untagged { qn, inv_stag, .. } => self.end_untagged(p, qn, inv_stag),
        }
    }
}
