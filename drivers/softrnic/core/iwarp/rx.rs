// SPDX-License-Identifier: GPL-2.0
//! The receive half of an MPA stream: TCP's bytes, in whatever pieces the
//! socket gives them, become FPDUs handed to a [`Sink`].  Sans-IO and
//! without a staging buffer: only the headers (at most [`MAX_HEADER`]
//! bytes) are collected; payload bytes go to the sink as they arrive, at
//! their offset in the segment, so the kernel side can copy them from the
//! socket straight into the target memory.
//!
//! Order for each FPDU: `begin` once its headers are in (the sink checks
//! them: STag, bounds, MSN, a posted receive), `place` for each run of
//! payload, `end` once the pad and the CRC are in and the CRC matched.  A
//! CRC mismatch is reported instead of `end`: bytes already placed stay
//! where they are, but the message they belong to never completes (the
//! stream ends with TERMINATE), as RFC 5041 allows placement before a
//! message is delivered.

use super::fpdu::{self, cause, Cause, HeaderError, Parsed, CRC_LEN, LEN_FIELD, MAX_HEADER};
use crate::crc::{Crc, Update};

/// Where the parser is inside the current FPDU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Collecting headers (`have` bytes so far).
    Header,
    /// Payload bytes: `done` of the segment's so far.
    Payload { done: usize },
    /// Pad, then CRC: `done` of the trailer's bytes so far.
    Trailer { done: usize },
}

/// What the receiving side does with FPDUs.  Each call returns the cause
/// of a TERMINATE to refuse the FPDU.
pub(crate) trait Sink {
    /// An FPDU's headers are in: check them before any payload.
    fn begin(&mut self, p: &Parsed) -> Result<(), Cause>;
    /// `data` goes at byte `offset` of the FPDU's payload.
    fn place(&mut self, p: &Parsed, offset: usize, data: &[u8]) -> Result<(), Cause>;
    /// The FPDU is whole and its CRC matched (or is not used).
    fn end(&mut self, p: &Parsed) -> Result<(), Cause>;
}

/// Why the stream stops: the TERMINATE to send, with the headers of the
/// FPDU at fault (for the TERMINATE's copy) when they were parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    pub(crate) cause: Cause,
    pub(crate) fpdu: Option<Parsed>,
}

/// The FPDU receive state of one stream.
pub(crate) struct Receiver {
    crc_on: bool,
    step: Update,
    crc: Crc,
    phase: Phase,
    head: [u8; MAX_HEADER],
    have: usize,
    parsed: Option<Parsed>,
    trailer: [u8; 3 + CRC_LEN],
    /// The stream failed: nothing more is taken.
    dead: bool,
    /// FPDUs completed (counter for `rdma statistic`).
    pub(crate) fpdus: u64,
}

impl Receiver {
    /// A receiver for a stream with the CRC on or off (as MPA setup
    /// decided); `step` is the CRC-32C step (the kernel's `crc32c` or the
    /// table-driven one).
    pub(crate) const fn new(crc_on: bool, step: Update) -> Receiver {
        Receiver {
            crc_on,
            step,
            crc: Crc::new(step),
            phase: Phase::Header,
            head: [0; MAX_HEADER],
            have: 0,
            parsed: None,
            trailer: [0; 3 + CRC_LEN],
            dead: false,
            fpdus: 0,
        }
    }

    /// Whether the stream sits between FPDUs (a clean place to close).
    pub(crate) fn at_boundary(&self) -> bool {
        self.phase == Phase::Header && self.have == 0
    }

    fn fail(&mut self, cause: Cause) -> Fault {
        self.dead = true;
        Fault {
            cause,
            fpdu: self.parsed,
        }
    }

    /// Take `bytes` from the stream; all of them are used unless the
    /// stream fails.  The sink sees each FPDU as described above.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], sink: &mut impl Sink) -> Result<(), Fault> {
        if self.dead {
            return Err(Fault {
                cause: cause::STREAM_CATASTROPHIC,
                fpdu: None,
            });
        }
        while !bytes.is_empty() {
            match self.phase {
                Phase::Header => {
                    // First the length and the two control bytes, which
                    // tell the headers' size; then the rest of them.
                    let want = match fpdu::parse_header(&self.head[..self.have]) {
                        Ok(p) => p.header_len,
                        Err(HeaderError::Truncated) => self.header_need(),
                        Err(e) => return Err(self.fail(e.cause())),
                    };
                    let n = bytes.len().min(want - self.have);
                    self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                    self.have += n;
                    bytes = &bytes[n..];
                    let p = match fpdu::parse_header(&self.head[..self.have]) {
                        Ok(p) => p,
                        Err(HeaderError::Truncated) => continue,
                        Err(e) => return Err(self.fail(e.cause())),
                    };
                    self.parsed = Some(p);
                    self.crc = Crc::new(self.step);
                    if self.crc_on {
                        self.crc.update(&self.head[..p.header_len]);
                    }
                    if let Err(c) = sink.begin(&p) {
                        return Err(self.fail(c));
                    }
                    self.phase = Phase::Payload { done: 0 };
                }
                Phase::Payload { done } => {
                    let Some(p) = self.parsed else {
                        return Err(self.fail(cause::LOCAL_CATASTROPHIC));
                    };
                    let n = bytes.len().min(p.payload_len - done);
                    if n > 0 {
                        if self.crc_on {
                            self.crc.update(&bytes[..n]);
                        }
                        if let Err(c) = sink.place(&p, done, &bytes[..n]) {
                            return Err(self.fail(c));
                        }
                        bytes = &bytes[n..];
                    }
                    self.phase = if done + n == p.payload_len {
                        Phase::Trailer { done: 0 }
                    } else {
                        Phase::Payload { done: done + n }
                    };
                }
                Phase::Trailer { done } => {
                    let Some(p) = self.parsed else {
                        return Err(self.fail(cause::LOCAL_CATASTROPHIC));
                    };
                    let len = fpdu::pad_len(p.ulpdu_len) + CRC_LEN;
                    let n = bytes.len().min(len - done);
                    self.trailer[done..done + n].copy_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    if done + n < len {
                        self.phase = Phase::Trailer { done: done + n };
                        continue;
                    }
                    let pad = len - CRC_LEN;
                    if self.crc_on {
                        self.crc.update(&self.trailer[..pad]);
                        let got = [
                            self.trailer[pad],
                            self.trailer[pad + 1],
                            self.trailer[pad + 2],
                            self.trailer[pad + 3],
                        ];
                        if got != fpdu::crc_bytes(self.crc.finish()) {
                            return Err(self.fail(cause::MPA_CRC));
                        }
                    }
                    if let Err(c) = sink.end(&p) {
                        return Err(self.fail(c));
                    }
                    self.fpdus += 1;
                    self.phase = Phase::Header;
                    self.have = 0;
                    self.parsed = None;
                }
            }
        }
        Ok(())
    }

    /// Header bytes to collect before `parse_header` can tell more: the
    /// length field and the two control bytes, then the opcode's headers.
    fn header_need(&self) -> usize {
        let first = LEN_FIELD + 2;
        if self.have < first {
            return first;
        }
        let tagged = self.head[LEN_FIELD] & 0x80 != 0;
        let ddp = if tagged {
            fpdu::TAGGED_LEN
        } else {
            fpdu::UNTAGGED_LEN
        };
        let rdmap = fpdu::Opcode::from_raw(self.head[LEN_FIELD + 1] & 0x0F)
            .map_or(0, |o| o.rdmap_header_len());
        (LEN_FIELD + ddp + rdmap).min(MAX_HEADER)
    }
}
