// SPDX-License-Identifier: GPL-2.0
//! The FPDU (RFC 5044 section 4) and the DDP (RFC 5041) and RDMAP
//! (RFC 5040, RFC 7306) headers it carries: parsing and building, no
//! allocation, no I/O.
//!
//! An FPDU is the 16-bit ULPDU_Length, one DDP segment (its header, then
//! the payload), 0 to 3 zero bytes that align the whole to 4, and the
//! CRC-32C of all that, least significant byte first (zero when the
//! connection runs without CRC).  softrnic never inserts markers (see
//! `mpa.rs`).  Every other field is big-endian.
//!
//! The DDP header is tagged (14 bytes: control, RDMAP control, STag,
//! tagged offset) for WRITE and READ response, untagged (18 bytes:
//! control, RDMAP control, four bytes the SEND-with-invalidate variants
//! use for the STag to invalidate, queue number, MSN, message offset) for
//! the rest.  Some RDMAP messages put a header of their own in the untagged
//! payload: the READ request, TERMINATE and RFC 7306's atomics and
//! immediate data.
//!
//! [`parse_header`] reads the headers from the first bytes of an FPDU, so
//! the receive path can place the payload straight from the socket into
//! its target memory before the rest has arrived.

use crate::crc::{Crc, Update};

/// Bytes of ULPDU_Length, and of the CRC trailer.
pub(crate) const LEN_FIELD: usize = 2;
pub(crate) const CRC_LEN: usize = 4;
/// Bytes of the two DDP headers (RDMAP's control byte included).
pub(crate) const TAGGED_LEN: usize = 14;
pub(crate) const UNTAGGED_LEN: usize = 18;
/// Bytes of RDMAP's own headers in the untagged payload.
pub(crate) const READ_REQUEST_LEN: usize = 28;
pub(crate) const ATOMIC_REQUEST_LEN: usize = 52;
pub(crate) const ATOMIC_RESPONSE_LEN: usize = 12;
pub(crate) const IMMEDIATE_LEN: usize = 8;
/// A TERMINATE's fixed part; the copied headers follow it.
pub(crate) const TERMINATE_LEN: usize = 4;
/// The most headers an FPDU can start with (untagged plus the atomic
/// request, the largest RDMAP header).
pub(crate) const MAX_HEADER: usize = LEN_FIELD + UNTAGGED_LEN + ATOMIC_REQUEST_LEN;

const DDP_TAGGED: u8 = 0x80;
const DDP_LAST: u8 = 0x40;
const DDP_VERSION: u8 = 1;
const RDMAP_VERSION: u8 = 1;

/// The pad after a ULPDU of `ulpdu_len` bytes.
pub(crate) const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (ulpdu_len + LEN_FIELD) % 4) % 4
}

/// The bytes of a whole FPDU around a ULPDU of `ulpdu_len` bytes.
pub(crate) const fn fpdu_len(ulpdu_len: usize) -> usize {
    LEN_FIELD + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN
}

/// The CRC trailer for the CRC-32C `crc` of an FPDU (length through pad).
pub(crate) const fn crc_bytes(crc: u32) -> [u8; CRC_LEN] {
    crc.to_le_bytes()
}

/// What follows an FPDU's payload: its pad and its CRC (zeros when the
/// stream runs without CRC).
pub(crate) struct Trailer {
    bytes: [u8; 3 + CRC_LEN],
    len: usize,
}

impl Trailer {
    /// The trailer of the FPDU whose headers (as `build_header` wrote
    /// them) are `header` and whose payload is `payload`, in pieces;
    /// `crc`: the CRC-32C step, `None` without CRC.
    pub(crate) fn new(header: &[u8], payload: &[&[u8]], crc: Option<Update>) -> Trailer {
        let payload_len: usize = payload.iter().map(|p| p.len()).sum();
        Trailer::over(header, payload_len, crc, |c| {
            for p in payload {
                c.update(p);
            }
        })
    }

    /// As `new`, for a payload of `payload_len` bytes that `payload` feeds
    /// to the CRC piece by piece (a payload that lies in pages).
    pub(crate) fn over(
        header: &[u8],
        payload_len: usize,
        crc: Option<Update>,
        payload: impl FnOnce(&mut Crc),
    ) -> Trailer {
        let pad = pad_len(header.len() - LEN_FIELD + payload_len);
        let mut bytes = [0u8; 3 + CRC_LEN];
        if let Some(step) = crc {
            let mut c = Crc::new(step);
            c.update(header);
            payload(&mut c);
            c.update(&bytes[..pad]);
            bytes[pad..pad + CRC_LEN].copy_from_slice(&crc_bytes(c.finish()));
        }
        Trailer {
            bytes,
            len: pad + CRC_LEN,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The RDMAP message types (RFC 5040 section 4.2, RFC 7306 section 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opcode {
    Write = 0,
    ReadRequest = 1,
    ReadResponse = 2,
    Send = 3,
    SendInvalidate = 4,
    SendSolicited = 5,
    SendSolicitedInvalidate = 6,
    Terminate = 7,
    Immediate = 8,
    ImmediateSolicited = 9,
    AtomicRequest = 10,
    AtomicResponse = 11,
}

impl Opcode {
    pub(crate) const fn from_raw(v: u8) -> Option<Opcode> {
        Some(match v {
            0 => Opcode::Write,
            1 => Opcode::ReadRequest,
            2 => Opcode::ReadResponse,
            3 => Opcode::Send,
            4 => Opcode::SendInvalidate,
            5 => Opcode::SendSolicited,
            6 => Opcode::SendSolicitedInvalidate,
            7 => Opcode::Terminate,
            8 => Opcode::Immediate,
            9 => Opcode::ImmediateSolicited,
            10 => Opcode::AtomicRequest,
            11 => Opcode::AtomicResponse,
            _ => return None,
        })
    }

    /// WRITE and READ response use DDP's tagged model.
    pub(crate) const fn tagged(self) -> bool {
        matches!(self, Opcode::Write | Opcode::ReadResponse)
    }

    /// The DDP queue of an untagged message: 0 the SEND family (and
    /// immediate data), 1 READ requests (and atomic requests, which share
    /// their credits), 2 TERMINATE, 3 atomic responses.
    pub(crate) const fn queue(self) -> Option<u32> {
        Some(match self {
            Opcode::Write | Opcode::ReadResponse => return None,
            Opcode::Send
            | Opcode::SendInvalidate
            | Opcode::SendSolicited
            | Opcode::SendSolicitedInvalidate
            | Opcode::Immediate
            | Opcode::ImmediateSolicited => 0,
            Opcode::ReadRequest | Opcode::AtomicRequest => 1,
            Opcode::Terminate => 2,
            Opcode::AtomicResponse => 3,
        })
    }

    /// RFC 7306's messages, which a peer without the extensions (siw)
    /// answers with TERMINATE.
    pub(crate) const fn extension(self) -> bool {
        (self as u8) >= Opcode::Immediate as u8
    }

    /// The SEND variants that carry an STag to invalidate.
    pub(crate) const fn invalidates(self) -> bool {
        matches!(
            self,
            Opcode::SendInvalidate | Opcode::SendSolicitedInvalidate
        )
    }

    pub(crate) const fn solicited(self) -> bool {
        matches!(
            self,
            Opcode::SendSolicited | Opcode::SendSolicitedInvalidate | Opcode::ImmediateSolicited
        )
    }

    /// Bytes of the RDMAP header the message carries in its untagged
    /// payload (a TERMINATE's fixed part only).
    pub(crate) const fn rdmap_header_len(self) -> usize {
        match self {
            Opcode::ReadRequest => READ_REQUEST_LEN,
            Opcode::Terminate => TERMINATE_LEN,
            Opcode::AtomicRequest => ATOMIC_REQUEST_LEN,
            Opcode::AtomicResponse => ATOMIC_RESPONSE_LEN,
            Opcode::Immediate | Opcode::ImmediateSolicited => IMMEDIATE_LEN,
            _ => 0,
        }
    }

    /// Messages that are always one segment with nothing after their
    /// header (a TERMINATE's copied headers aside).
    const fn header_only(self) -> bool {
        self.rdmap_header_len() > 0 && !matches!(self, Opcode::Terminate)
    }
}

/// Where a segment's payload goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Tagged: at `to` in the buffer the STag names.
    Tagged { stag: u32, to: u64 },
    /// Untagged: at offset `mo` of message `msn` on queue `qn`;
    /// `inv_stag` is the STag a SEND with invalidate names (else 0).
    Untagged {
        qn: u32,
        msn: u32,
        mo: u32,
        inv_stag: u32,
    },
}

/// An RDMA READ request (RFC 5040 section 4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadRequest {
    /// The requester's buffer the READ responses fill.
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    pub(crate) len: u32,
    /// The responder's buffer read.
    pub(crate) src_stag: u32,
    pub(crate) src_to: u64,
}

/// RFC 7306's atomic operations (section 5.1; AOpCode 1 is reserved: a
/// swap is a compare-and-swap whose compare mask is zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    FetchAdd = 0,
    CompareSwap = 2,
}

/// An atomic request (RFC 7306 section 5.2).  The verbs' plain 64-bit
/// operations: FetchAdd with an add mask of zero (no field boundary),
/// CompareSwap with both masks all ones (`plain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicRequest {
    pub(crate) op: AtomicOp,
    pub(crate) req_id: u32,
    pub(crate) stag: u32,
    pub(crate) to: u64,
    pub(crate) add_swap: u64,
    pub(crate) add_swap_mask: u64,
    pub(crate) compare: u64,
    pub(crate) compare_mask: u64,
}

impl AtomicRequest {
    /// The request for a verbs atomic: fetch-and-add of `add_swap`, or
    /// compare-and-swap of `compare` for `add_swap`.  (A FetchAdd sends
    /// compare data 0 and an all-ones compare mask, which the target
    /// ignores, as section 5.2.1 says.)
    pub(crate) const fn plain(
        op: AtomicOp,
        req_id: u32,
        stag: u32,
        to: u64,
        add_swap: u64,
        compare: u64,
    ) -> AtomicRequest {
        let (add_swap_mask, compare) = match op {
            AtomicOp::FetchAdd => (0, 0),
            AtomicOp::CompareSwap => (u64::MAX, compare),
        };
        AtomicRequest {
            op,
            req_id,
            stag,
            to,
            add_swap,
            add_swap_mask,
            compare,
            compare_mask: u64::MAX,
        }
    }

    /// The value the target word takes when it held `orig` (section
    /// 5.1): FetchAdd adds field by field, a carry out of a bit set in the
    /// add mask (a field's most significant bit) discarded; CompareSwap
    /// swaps the swap mask's bits when the compare mask's bits match.
    pub(crate) const fn apply(&self, orig: u64) -> u64 {
        match self.op {
            AtomicOp::FetchAdd => {
                // Bit by bit, as the section's pseudo code.
                let mut sum = 0u64;
                let mut carry = 0u64;
                let mut i = 0;
                while i < 64 {
                    let bit = 1u64 << i;
                    let a = (orig & bit != 0) as u64;
                    let b = (self.add_swap & bit != 0) as u64;
                    let t = a + b + carry;
                    if t & 1 != 0 {
                        sum |= bit;
                    }
                    carry = if self.add_swap_mask & bit != 0 {
                        0
                    } else {
                        t >> 1
                    };
                    i += 1;
                }
                sum
            }
            AtomicOp::CompareSwap => {
                if (self.compare ^ orig) & self.compare_mask == 0 {
                    (orig & !self.add_swap_mask) | (self.add_swap & self.add_swap_mask)
                } else {
                    orig
                }
            }
        }
    }
}

/// An atomic response: the request it answers and the value the target
/// held before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicResponse {
    pub(crate) req_id: u32,
    pub(crate) orig: u64,
}

/// A TERMINATE's cause (RFC 5040 section 7.2): the layer, the error type
/// and the code, as [`cause`] lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cause {
    pub(crate) layer: u8,
    pub(crate) etype: u8,
    pub(crate) code: u8,
}

/// A TERMINATE: its cause and how much of the offending FPDU it copies
/// (the DDP segment length, the DDP header, the READ request header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Terminate {
    pub(crate) cause: Cause,
    /// The M bit: `ddp_seg_len` is valid.
    pub(crate) has_len: bool,
    /// The D bit: the copied headers include the DDP header.
    pub(crate) has_ddp: bool,
    /// The R bit: they include the RDMAP header (a READ request's).
    pub(crate) has_rdmap: bool,
}

/// The causes softrnic reports, by RFC 5040 section 7.2's layer, error
/// type and code (and RFC 6581's additions to the LLP codes).
pub(crate) mod cause {
    use super::Cause;

    const fn c(layer: u8, etype: u8, code: u8) -> Cause {
        Cause { layer, etype, code }
    }

    const RDMAP: u8 = 0;
    const DDP: u8 = 1;
    const LLP: u8 = 2;

    pub(crate) const LOCAL_CATASTROPHIC: Cause = c(RDMAP, 0, 0);
    pub(crate) const INVALID_STAG: Cause = c(RDMAP, 1, 0x00);
    pub(crate) const BASE_BOUNDS: Cause = c(RDMAP, 1, 0x01);
    pub(crate) const ACCESS_RIGHTS: Cause = c(RDMAP, 1, 0x02);
    pub(crate) const STAG_OTHER_STREAM: Cause = c(RDMAP, 1, 0x03);
    pub(crate) const TO_WRAP: Cause = c(RDMAP, 1, 0x04);
    pub(crate) const CANNOT_INVALIDATE: Cause = c(RDMAP, 1, 0x09);
    pub(crate) const BAD_RDMAP_VERSION: Cause = c(RDMAP, 2, 0x05);
    pub(crate) const UNEXPECTED_OPCODE: Cause = c(RDMAP, 2, 0x06);
    /// Also: more READ requests than the IRD.
    pub(crate) const STREAM_CATASTROPHIC: Cause = c(RDMAP, 2, 0x07);
    pub(crate) const DDP_TAGGED_INVALID_STAG: Cause = c(DDP, 1, 0x00);
    pub(crate) const DDP_TAGGED_BASE_BOUNDS: Cause = c(DDP, 1, 0x01);
    pub(crate) const DDP_TAGGED_STAG_OTHER_STREAM: Cause = c(DDP, 1, 0x02);
    pub(crate) const DDP_TAGGED_TO_WRAP: Cause = c(DDP, 1, 0x03);
    pub(crate) const DDP_TAGGED_BAD_VERSION: Cause = c(DDP, 1, 0x04);
    pub(crate) const DDP_BAD_QN: Cause = c(DDP, 2, 0x01);
    pub(crate) const DDP_NO_BUFFER: Cause = c(DDP, 2, 0x02);
    pub(crate) const DDP_MSN_RANGE: Cause = c(DDP, 2, 0x03);
    pub(crate) const DDP_BAD_MO: Cause = c(DDP, 2, 0x04);
    pub(crate) const DDP_TOO_LONG: Cause = c(DDP, 2, 0x05);
    pub(crate) const DDP_UNTAGGED_BAD_VERSION: Cause = c(DDP, 2, 0x06);
    pub(crate) const LLP_LOST: Cause = c(LLP, 0, 0x01);
    pub(crate) const MPA_CRC: Cause = c(LLP, 0, 0x02);
    pub(crate) const MPA_LENGTH: Cause = c(LLP, 0, 0x03);
    pub(crate) const MPA_BAD_FRAME: Cause = c(LLP, 0, 0x04);
    pub(crate) const MPA_NO_IRD: Cause = c(LLP, 0, 0x06);
    pub(crate) const MPA_NO_RTR: Cause = c(LLP, 0, 0x07);
}

/// The RDMAP header an untagged message carries, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RdmapHeader {
    None,
    ReadRequest(ReadRequest),
    Terminate(Terminate),
    AtomicRequest(AtomicRequest),
    AtomicResponse(AtomicResponse),
    Immediate([u8; IMMEDIATE_LEN]),
}

/// The headers an FPDU starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) opcode: Opcode,
    /// DDP's L bit: the message's last segment.
    pub(crate) last: bool,
    pub(crate) place: Placement,
    pub(crate) rdmap: RdmapHeader,
}

/// What the headers of an FPDU tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) hdr: Header,
    /// ULPDU_Length.
    pub(crate) ulpdu_len: usize,
    /// Bytes from the FPDU's start to the payload.
    pub(crate) header_len: usize,
    /// Payload bytes (for a TERMINATE: the copied headers).
    pub(crate) payload_len: usize,
}

impl Parsed {
    /// Bytes of the whole FPDU.
    pub(crate) const fn fpdu_len(&self) -> usize {
        fpdu_len(self.ulpdu_len)
    }
}

/// Why an FPDU's headers are refused; [`HeaderError::cause`] is what the
/// TERMINATE reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// Fewer bytes than the headers (read more: not an error yet).
    Truncated,
    /// A DDP version other than 1.
    DdpVersion { tagged: bool },
    /// An RDMAP version other than 1.
    RdmapVersion,
    /// A reserved opcode, or a tagged/untagged bit that does not match it.
    Opcode(u8),
    /// An untagged message on a queue its opcode does not use.
    Queue(u32),
    /// ULPDU_Length shorter than the headers, or payload on a message
    /// that has none, or a header-only message split in segments.
    Length,
    /// An atomic operation code RFC 7306 does not define.
    AtomicOp(u8),
}

impl HeaderError {
    pub(crate) const fn cause(self) -> Cause {
        match self {
            HeaderError::Truncated | HeaderError::Length => cause::STREAM_CATASTROPHIC,
            HeaderError::DdpVersion { tagged: true } => cause::DDP_TAGGED_BAD_VERSION,
            HeaderError::DdpVersion { tagged: false } => cause::DDP_UNTAGGED_BAD_VERSION,
            HeaderError::RdmapVersion => cause::BAD_RDMAP_VERSION,
            HeaderError::Opcode(_) | HeaderError::AtomicOp(_) => cause::UNEXPECTED_OPCODE,
            HeaderError::Queue(_) => cause::DDP_BAD_QN,
        }
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

/// Parse the headers at the start of an FPDU.  `bytes` may end anywhere
/// after them (`Truncated` until they are all there); the payload, pad and
/// CRC are not looked at.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<Parsed, HeaderError> {
    if bytes.len() < LEN_FIELD + 2 {
        return Err(HeaderError::Truncated);
    }
    let ulpdu_len = usize::from(be16(bytes, 0));
    let ddp = &bytes[LEN_FIELD..];
    let (ctrl, rctrl) = (ddp[0], ddp[1]);
    let tagged = ctrl & DDP_TAGGED != 0;
    if ctrl & 0x03 != DDP_VERSION {
        return Err(HeaderError::DdpVersion { tagged });
    }
    if rctrl >> 6 != RDMAP_VERSION {
        return Err(HeaderError::RdmapVersion);
    }
    let opcode = Opcode::from_raw(rctrl & 0x0F).ok_or(HeaderError::Opcode(rctrl & 0x0F))?;
    if opcode.tagged() != tagged {
        return Err(HeaderError::Opcode(opcode as u8));
    }
    let last = ctrl & DDP_LAST != 0;
    let ddp_len = if tagged { TAGGED_LEN } else { UNTAGGED_LEN };
    let rdmap_len = opcode.rdmap_header_len();
    let header_len = LEN_FIELD + ddp_len + rdmap_len;
    if ulpdu_len < ddp_len + rdmap_len {
        return Err(HeaderError::Length);
    }
    if bytes.len() < header_len {
        return Err(HeaderError::Truncated);
    }
    let place = if tagged {
        Placement::Tagged {
            stag: be32(ddp, 2),
            to: be64(ddp, 6),
        }
    } else {
        let qn = be32(ddp, 6);
        if Some(qn) != opcode.queue() {
            return Err(HeaderError::Queue(qn));
        }
        Placement::Untagged {
            qn,
            msn: be32(ddp, 10),
            mo: be32(ddp, 14),
            inv_stag: be32(ddp, 2),
        }
    };
    let payload_len = ulpdu_len - ddp_len - rdmap_len;
    if opcode.header_only() && (payload_len != 0 || !last) {
        return Err(HeaderError::Length);
    }
    let r = &ddp[ddp_len..];
    let rdmap = match opcode {
        Opcode::ReadRequest => RdmapHeader::ReadRequest(ReadRequest {
            sink_stag: be32(r, 0),
            sink_to: be64(r, 4),
            len: be32(r, 12),
            src_stag: be32(r, 16),
            src_to: be64(r, 20),
        }),
        Opcode::Terminate => {
            if !last {
                return Err(HeaderError::Length);
            }
            RdmapHeader::Terminate(Terminate {
                cause: Cause {
                    layer: r[0] >> 4,
                    etype: r[0] & 0x0F,
                    code: r[1],
                },
                has_len: r[2] & 0x80 != 0,
                has_ddp: r[2] & 0x40 != 0,
                has_rdmap: r[2] & 0x20 != 0,
            })
        }
        Opcode::AtomicRequest => RdmapHeader::AtomicRequest(AtomicRequest {
            op: match r[3] & 0x0F {
                0 => AtomicOp::FetchAdd,
                2 => AtomicOp::CompareSwap,
                v => return Err(HeaderError::AtomicOp(v)),
            },
            req_id: be32(r, 4),
            stag: be32(r, 8),
            to: be64(r, 12),
            add_swap: be64(r, 20),
            add_swap_mask: be64(r, 28),
            compare: be64(r, 36),
            compare_mask: be64(r, 44),
        }),
        Opcode::AtomicResponse => RdmapHeader::AtomicResponse(AtomicResponse {
            req_id: be32(r, 0),
            orig: be64(r, 4),
        }),
        Opcode::Immediate | Opcode::ImmediateSolicited => {
            let mut d = [0u8; IMMEDIATE_LEN];
            d.copy_from_slice(&r[..IMMEDIATE_LEN]);
            RdmapHeader::Immediate(d)
        }
        _ => RdmapHeader::None,
    };
    Ok(Parsed {
        hdr: Header {
            opcode,
            last,
            place,
            rdmap,
        },
        ulpdu_len,
        header_len,
        payload_len,
    })
}

/// Why headers could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BuildError {
    BufferTooSmall,
    /// The placement or RDMAP header does not match the opcode, or the
    /// ULPDU would not fit ULPDU_Length.
    Mismatch,
}

/// Write the FPDU's headers (ULPDU_Length through the RDMAP header) for a
/// segment carrying `payload_len` bytes; the bytes written.  The payload,
/// pad and CRC follow, written by the caller.
pub(crate) fn build_header(
    buf: &mut [u8],
    hdr: &Header,
    payload_len: usize,
) -> Result<usize, BuildError> {
    let op = hdr.opcode;
    let ddp_len = if op.tagged() {
        TAGGED_LEN
    } else {
        UNTAGGED_LEN
    };
    let rdmap_len = op.rdmap_header_len();
    let header_len = LEN_FIELD + ddp_len + rdmap_len;
    if op.header_only() && (payload_len != 0 || !hdr.last) {
        return Err(BuildError::Mismatch);
    }
    let ulpdu_len =
        u16::try_from(ddp_len + rdmap_len + payload_len).map_err(|_| BuildError::Mismatch)?;
    let out = buf
        .get_mut(..header_len)
        .ok_or(BuildError::BufferTooSmall)?;
    out.fill(0);
    out[..2].copy_from_slice(&ulpdu_len.to_be_bytes());
    let ddp = &mut out[LEN_FIELD..];
    ddp[0] = DDP_VERSION
        | if op.tagged() { DDP_TAGGED } else { 0 }
        | if hdr.last { DDP_LAST } else { 0 };
    ddp[1] = (RDMAP_VERSION << 6) | op as u8;
    match (hdr.place, op.queue()) {
        (Placement::Tagged { stag, to }, None) => {
            ddp[2..6].copy_from_slice(&stag.to_be_bytes());
            ddp[6..14].copy_from_slice(&to.to_be_bytes());
        }
        (
            Placement::Untagged {
                qn,
                msn,
                mo,
                inv_stag,
            },
            Some(q),
        ) if qn == q => {
            if op.invalidates() {
                ddp[2..6].copy_from_slice(&inv_stag.to_be_bytes());
            }
            ddp[6..10].copy_from_slice(&qn.to_be_bytes());
            ddp[10..14].copy_from_slice(&msn.to_be_bytes());
            ddp[14..18].copy_from_slice(&mo.to_be_bytes());
        }
        _ => return Err(BuildError::Mismatch),
    }
    let r = &mut ddp[ddp_len..];
    match (op, hdr.rdmap) {
        (Opcode::ReadRequest, RdmapHeader::ReadRequest(q)) => {
            r[0..4].copy_from_slice(&q.sink_stag.to_be_bytes());
            r[4..12].copy_from_slice(&q.sink_to.to_be_bytes());
            r[12..16].copy_from_slice(&q.len.to_be_bytes());
            r[16..20].copy_from_slice(&q.src_stag.to_be_bytes());
            r[20..28].copy_from_slice(&q.src_to.to_be_bytes());
        }
        (Opcode::Terminate, RdmapHeader::Terminate(t)) => {
            r[0] = (t.cause.layer << 4) | (t.cause.etype & 0x0F);
            r[1] = t.cause.code;
            r[2] = if t.has_len { 0x80 } else { 0 }
                | if t.has_ddp { 0x40 } else { 0 }
                | if t.has_rdmap { 0x20 } else { 0 };
        }
        (Opcode::AtomicRequest, RdmapHeader::AtomicRequest(a)) => {
            r[3] = a.op as u8;
            r[4..8].copy_from_slice(&a.req_id.to_be_bytes());
            r[8..12].copy_from_slice(&a.stag.to_be_bytes());
            r[12..20].copy_from_slice(&a.to.to_be_bytes());
            r[20..28].copy_from_slice(&a.add_swap.to_be_bytes());
            r[28..36].copy_from_slice(&a.add_swap_mask.to_be_bytes());
            r[36..44].copy_from_slice(&a.compare.to_be_bytes());
            r[44..52].copy_from_slice(&a.compare_mask.to_be_bytes());
        }
        (Opcode::AtomicResponse, RdmapHeader::AtomicResponse(a)) => {
            r[0..4].copy_from_slice(&a.req_id.to_be_bytes());
            r[4..12].copy_from_slice(&a.orig.to_be_bytes());
        }
        (Opcode::Immediate | Opcode::ImmediateSolicited, RdmapHeader::Immediate(d)) => {
            r[..IMMEDIATE_LEN].copy_from_slice(&d);
        }
        (_, RdmapHeader::None) if rdmap_len == 0 => {}
        _ => return Err(BuildError::Mismatch),
    }
    Ok(header_len)
}

/// The payload one FPDU of `opcode` carries at most when FPDUs are kept
/// to `max_fpdu` bytes (RFC 5044's MULPDU from the TCP segment size): a
/// multiple of 4, so that every segment but the last needs no pad.
pub(crate) const fn max_payload(opcode: Opcode, max_fpdu: usize) -> usize {
    let ddp = if opcode.tagged() {
        TAGGED_LEN
    } else {
        UNTAGGED_LEN
    };
    let overhead = LEN_FIELD + ddp + opcode.rdmap_header_len() + CRC_LEN;
    let room = max_fpdu.saturating_sub(overhead);
    // At least 4 bytes a segment, so a message always progresses.
    let p = room & !3;
    if p == 0 {
        4
    } else {
        p
    }
}

/// One DDP segment of a message: its headers, and which bytes of the
/// message's payload it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) hdr: Header,
    pub(crate) offset: u32,
    pub(crate) len: u32,
}

/// The segments of a message of `len` payload bytes, in order.  `first`
/// is the first segment's header (tagged: the TO of byte 0; untagged: MO
/// 0); later ones advance the TO or MO, and only the last has L set.  A
/// zero-length message is one segment.
pub(crate) struct Segments {
    first: Header,
    len: u32,
    max: u32,
    next: u32,
    done: bool,
}

impl Segments {
    pub(crate) fn new(first: Header, len: u32, max_fpdu: usize) -> Segments {
        Segments::resume(first, len, max_fpdu, 0)
    }

    /// The segments from payload byte `offset` on (the end of a segment
    /// an earlier `Segments` of the same message gave).
    pub(crate) fn resume(first: Header, len: u32, max_fpdu: usize, offset: u32) -> Segments {
        let max = u32::try_from(max_payload(first.opcode, max_fpdu)).unwrap_or(u32::MAX);
        Segments {
            first,
            len,
            max,
            next: offset.min(len),
            done: offset > len || (offset == len && len > 0),
        }
    }
}

impl Iterator for Segments {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.done {
            return None;
        }
        let offset = self.next;
        let len = core::cmp::min(self.max, self.len - offset);
        self.next = offset + len;
        self.done = self.next == self.len;
        let place = match self.first.place {
            Placement::Tagged { stag, to } => Placement::Tagged {
                stag,
                to: to.wrapping_add(u64::from(offset)),
            },
            Placement::Untagged {
                qn,
                msn,
                mo,
                inv_stag,
            } => Placement::Untagged {
                qn,
                msn,
                mo: mo.wrapping_add(offset),
                inv_stag,
            },
        };
        Some(Segment {
            hdr: Header {
                last: self.done,
                place,
                ..self.first
            },
            offset,
            len,
        })
    }
}
