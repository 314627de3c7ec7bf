// SPDX-License-Identifier: GPL-2.0
//! MPA connection setup (RFC 5044 section 7, enhanced by RFC 6581): the
//! request and reply frames that both ends exchange on a new TCP stream
//! before any FPDU, and the rules that turn them into the connection's
//! settings.  Sans-IO: frames are parsed from and built into byte slices;
//! [`FrameReader`] collects one frame from a TCP stream read in pieces
//! without taking a byte beyond it.
//!
//! A frame is a 16-byte key, a flag byte (M markers, C CRC, R reject, and
//! the "enhanced" bit that announces RFC 6581's IRD/ORD words), the
//! revision, a 16-bit private-data length and the private data.  With
//! revision 2 and the enhanced bit, the private data starts with two 16-bit
//! words: IRD with the peer-to-peer bit and the zero-length-SEND RTR bit,
//! ORD with the zero-length WRITE and READ RTR bits.
//!
//! softrnic never uses markers: it refuses a request that asks for them (a
//! reply with R set) and fails a connection whose reply asks for them, as
//! Linux siw does.  It answers with the request's revision; it sends
//! revision 2 with the IRD/ORD words, which siw requires of a reply to its
//! own revision-2 request.
//!
//! RFC 7306 (atomics, immediate data) leaves it to the ends to know that
//! both have it.  softrnic finds out in setup with two bits of the flag
//! byte's reserved field (RFC 5044 7.1: zero when sent, ignored when
//! received): an initiator that has the extensions sets `EXT_OFFER` in its
//! request, a softrnic responder that takes them sets `EXT_ACCEPT` (another
//! bit) in its reply.  Two bits, not one, because siw builds its reply from
//! the request's header and so echoes reserved bits: an echoed offer is not
//! an acceptance.  (siw uses a third reserved bit, 0x08, for its own GSO
//! hint; softrnic neither sets nor reads it.)

/// Bytes of a frame before its private data.
pub(crate) const HEADER_LEN: usize = 20;
/// The most private data RFC 5044 allows in a frame; the IRD/ORD words
/// count in it.
pub(crate) const MAX_PRIVATE: usize = 512;
/// Bytes of the RFC 6581 IRD/ORD words at the head of the private data.
pub(crate) const IRD_ORD_LEN: usize = 4;
/// The largest IRD or ORD the words can carry (14 bits).
pub(crate) const MAX_IRD_ORD: u16 = 0x3FFF;

const REQUEST_KEY: &[u8; 16] = b"MPA ID Req Frame";
const REPLY_KEY: &[u8; 16] = b"MPA ID Rep Frame";

const FLAG_MARKERS: u8 = 0x80;
const FLAG_CRC: u8 = 0x40;
const FLAG_REJECT: u8 = 0x20;
const FLAG_ENHANCED: u8 = 0x10;
/// softrnic's RFC 7306 offer (request) and acceptance (reply).
const FLAG_EXT_OFFER: u8 = 0x02;
const FLAG_EXT_ACCEPT: u8 = 0x01;

const IRD_P2P: u16 = 0x8000;
const IRD_RTR_SEND: u16 = 0x4000;
const ORD_RTR_WRITE: u16 = 0x8000;
const ORD_RTR_READ: u16 = 0x4000;

/// Which of the two frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Request,
    Reply,
}

impl Kind {
    const fn key(self) -> &'static [u8; 16] {
        match self {
            Kind::Request => REQUEST_KEY,
            Kind::Reply => REPLY_KEY,
        }
    }
}

/// The zero-length messages RFC 6581 offers as the ready-to-receive (RTR)
/// message of a peer-to-peer connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rtr {
    pub(crate) send: bool,
    pub(crate) write: bool,
    pub(crate) read: bool,
}

/// RFC 6581's words: the sender's inbound and outbound READ limits, and
/// the peer-to-peer mode with its RTR options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IrdOrd {
    pub(crate) ird: u16,
    pub(crate) ord: u16,
    pub(crate) p2p: bool,
    pub(crate) rtr: Rtr,
}

impl IrdOrd {
    fn to_bytes(self) -> [u8; IRD_ORD_LEN] {
        let mut ird = self.ird.min(MAX_IRD_ORD);
        let mut ord = self.ord.min(MAX_IRD_ORD);
        if self.p2p {
            ird |= IRD_P2P;
        }
        if self.rtr.send {
            ird |= IRD_RTR_SEND;
        }
        if self.rtr.write {
            ord |= ORD_RTR_WRITE;
        }
        if self.rtr.read {
            ord |= ORD_RTR_READ;
        }
        let [a, b] = ird.to_be_bytes();
        let [c, d] = ord.to_be_bytes();
        [a, b, c, d]
    }

    fn from_bytes(b: [u8; IRD_ORD_LEN]) -> IrdOrd {
        let ird = u16::from_be_bytes([b[0], b[1]]);
        let ord = u16::from_be_bytes([b[2], b[3]]);
        IrdOrd {
            ird: ird & MAX_IRD_ORD,
            ord: ord & MAX_IRD_ORD,
            p2p: ird & IRD_P2P != 0,
            rtr: Rtr {
                send: ird & IRD_RTR_SEND != 0,
                write: ord & ORD_RTR_WRITE != 0,
                read: ord & ORD_RTR_READ != 0,
            },
        }
    }
}

/// One MPA request or reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame<'a> {
    pub(crate) kind: Kind,
    pub(crate) markers: bool,
    pub(crate) crc: bool,
    /// Reply only: the responder refuses the connection.
    pub(crate) reject: bool,
    pub(crate) rev: u8,
    /// The RFC 6581 words (revision 2 with the enhanced bit).
    pub(crate) ird_ord: Option<IrdOrd>,
    /// RFC 7306: offered (request) or accepted (reply) by a softrnic end.
    pub(crate) ext: bool,
    /// The consumer's private data (after the IRD/ORD words).
    pub(crate) private: &'a [u8],
}

/// Why bytes are not an acceptable MPA frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Fewer bytes than the header and its private data.
    Truncated,
    /// The first 16 bytes are not the expected key (garbage on the
    /// stream, or a request where a reply belongs).
    BadKey,
    /// A revision other than 1 or 2.
    BadRevision(u8),
    /// More private data than RFC 5044 allows.
    PrivateTooLong(usize),
    /// The enhanced bit on a revision-2 frame too short for the words.
    NoIrdOrd,
    /// A buffer too small to build into.
    BufferTooSmall,
}

/// The bit that says `ext` in a frame of this kind.
const fn ext_flag(kind: Kind) -> u8 {
    match kind {
        Kind::Request => FLAG_EXT_OFFER,
        Kind::Reply => FLAG_EXT_ACCEPT,
    }
}

/// Parse a whole frame of the given kind.  A frame's private data length
/// decides where it ends: bytes after it belong to the FPDU stream.
pub(crate) fn parse(kind: Kind, bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
    let header: &[u8; HEADER_LEN] =
        bytes
            .first_chunk()
            .ok_or(if bytes.len() >= 16 && &bytes[..16] != kind.key() {
                FrameError::BadKey
            } else {
                FrameError::Truncated
            })?;
    if &header[..16] != kind.key() {
        return Err(FrameError::BadKey);
    }
    let flags = header[16];
    let rev = header[17];
    if !(1..=2).contains(&rev) {
        return Err(FrameError::BadRevision(rev));
    }
    let pd_len = usize::from(u16::from_be_bytes([header[18], header[19]]));
    if pd_len > MAX_PRIVATE {
        return Err(FrameError::PrivateTooLong(pd_len));
    }
    let mut private = bytes
        .get(HEADER_LEN..HEADER_LEN + pd_len)
        .ok_or(FrameError::Truncated)?;
    let mut ird_ord = None;
    if rev == 2 && flags & FLAG_ENHANCED != 0 {
        let (words, rest) = private
            .split_first_chunk::<IRD_ORD_LEN>()
            .ok_or(FrameError::NoIrdOrd)?;
        ird_ord = Some(IrdOrd::from_bytes(*words));
        private = rest;
    }
    Ok(Frame {
        kind,
        markers: flags & FLAG_MARKERS != 0,
        crc: flags & FLAG_CRC != 0,
        reject: kind == Kind::Reply && flags & FLAG_REJECT != 0,
        rev,
        ird_ord,
        ext: flags & ext_flag(kind) != 0,
        private,
    })
}

impl Frame<'_> {
    /// Bytes of this frame on the wire.
    pub(crate) fn wire_len(&self) -> usize {
        HEADER_LEN + self.ird_ord.map_or(0, |_| IRD_ORD_LEN) + self.private.len()
    }

    /// Write the frame into `buf`; its length.  The IRD/ORD words go out
    /// only with revision 2.
    pub(crate) fn build(&self, buf: &mut [u8]) -> Result<usize, FrameError> {
        let words = if self.rev == 2 { self.ird_ord } else { None };
        let pd_len = words.map_or(0, |_| IRD_ORD_LEN) + self.private.len();
        if pd_len > MAX_PRIVATE {
            return Err(FrameError::PrivateTooLong(pd_len));
        }
        if !(1..=2).contains(&self.rev) {
            return Err(FrameError::BadRevision(self.rev));
        }
        let len = HEADER_LEN + pd_len;
        let out = buf.get_mut(..len).ok_or(FrameError::BufferTooSmall)?;
        out[..16].copy_from_slice(self.kind.key());
        let mut flags = 0;
        if self.markers {
            flags |= FLAG_MARKERS;
        }
        if self.crc {
            flags |= FLAG_CRC;
        }
        if self.reject && self.kind == Kind::Reply {
            flags |= FLAG_REJECT;
        }
        if words.is_some() {
            flags |= FLAG_ENHANCED;
        }
        if self.ext {
            flags |= ext_flag(self.kind);
        }
        out[16] = flags;
        out[17] = self.rev;
        // (`pd_len` is at most MAX_PRIVATE: it fits 16 bits.)
        out[18..20].copy_from_slice(&(pd_len as u16).to_be_bytes());
        let mut at = HEADER_LEN;
        if let Some(w) = words {
            out[at..at + IRD_ORD_LEN].copy_from_slice(&w.to_bytes());
            at += IRD_ORD_LEN;
        }
        out[at..].copy_from_slice(self.private);
        Ok(len)
    }
}

/// What [`FrameReader::feed`] needs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// This many more bytes (at least) before the frame is whole.
    More(usize),
    /// The frame is whole: [`FrameReader::frame`] has it.
    Done,
}

/// Collects one frame from a stream read in pieces.  It asks for exactly
/// the bytes the frame has, so that whatever follows stays in the socket
/// for the FPDU receive path; it checks the key and the length as soon as
/// it has them, so garbage or an oversized frame fails early.
pub(crate) struct FrameReader {
    kind: Kind,
    buf: [u8; HEADER_LEN + MAX_PRIVATE],
    have: usize,
}

impl FrameReader {
    pub(crate) const fn new(kind: Kind) -> FrameReader {
        FrameReader {
            kind,
            buf: [0; HEADER_LEN + MAX_PRIVATE],
            have: 0,
        }
    }

    /// The frame's length once the header is in (never beyond the buffer,
    /// even fed again after refusing an oversized frame).
    fn total(&self) -> Option<usize> {
        (self.have >= HEADER_LEN).then(|| {
            let pd = usize::from(u16::from_be_bytes([self.buf[18], self.buf[19]]));
            (HEADER_LEN + pd).min(self.buf.len())
        })
    }

    /// How many bytes to read next (never past the frame's end).
    pub(crate) fn wanted(&self) -> usize {
        self.total().unwrap_or(HEADER_LEN).saturating_sub(self.have)
    }

    /// Take bytes read from the stream; at most [`wanted`](Self::wanted)
    /// of them are used (the count is returned with what comes next).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(usize, Need), FrameError> {
        let mut used = 0;
        // Twice: up to the header, then (its length known) up to the end.
        for _ in 0..2 {
            let n = (bytes.len() - used).min(self.wanted());
            self.buf[self.have..self.have + n].copy_from_slice(&bytes[used..used + n]);
            self.have += n;
            used += n;
            self.check()?;
        }
        Ok(match self.wanted() {
            0 => (used, Need::Done),
            w => (used, Need::More(w)),
        })
    }

    /// Refuse what is already wrong in the bytes so far.
    fn check(&self) -> Result<(), FrameError> {
        let key_seen = self.have.min(16);
        if self.buf[..key_seen] != self.kind.key()[..key_seen] {
            return Err(FrameError::BadKey);
        }
        if self.have >= HEADER_LEN {
            let rev = self.buf[17];
            if !(1..=2).contains(&rev) {
                return Err(FrameError::BadRevision(rev));
            }
            let pd = usize::from(u16::from_be_bytes([self.buf[18], self.buf[19]]));
            if pd > MAX_PRIVATE {
                return Err(FrameError::PrivateTooLong(pd));
            }
        }
        Ok(())
    }

    /// The whole frame, parsed.
    pub(crate) fn frame(&self) -> Result<Frame<'_>, FrameError> {
        parse(self.kind, &self.buf[..self.have])
    }
}

/// How a side treats the CRC (RFC 5044 section 7.1: on by default; off
/// only by local policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CrcPolicy {
    /// Use it only if the peer asks.
    Off,
    /// Ask for it; do without if the peer does.
    On,
    /// Ask for it and refuse a connection without it.
    Required,
}

/// A side's settings for connection setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) crc: CrcPolicy,
    /// Revision 2 (RFC 6581) rather than 1.
    pub(crate) rev: u8,
    /// Peer-to-peer mode with an RTR message (initiator: ask for it).
    pub(crate) p2p: bool,
    /// The most inbound and outbound READs this side supports.
    pub(crate) max_ird: u16,
    pub(crate) max_ord: u16,
    /// RFC 7306 atomics and immediate data (offer them, or take an offer).
    pub(crate) ext: bool,
}

/// What a connection settled on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Negotiated {
    pub(crate) crc: bool,
    pub(crate) rev: u8,
    /// This side's inbound and outbound READ limits.
    pub(crate) ird: u16,
    pub(crate) ord: u16,
    /// Peer-to-peer: the RTR message the initiator sends first (exactly
    /// one of the three), `None` outside peer-to-peer mode.
    pub(crate) rtr: Option<Rtr>,
    /// Both ends have RFC 7306 (both are softrnic).
    pub(crate) ext: bool,
}

/// Why a connection cannot be set up (TERMINATE's LLP error codes of
/// RFC 5044 and RFC 6581 where one applies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetupError {
    /// A frame that cannot be parsed (LLP code 0x04).
    Frame(FrameError),
    /// The peer asked for markers, which softrnic does not do.
    Markers,
    /// This side requires the CRC; the peer does not use it.
    CrcRequired,
    /// Peer-to-peer without an RTR both sides can use (LLP code 0x07).
    NoRtr,
    /// The responder refused the connection (its reply had R set).
    Rejected,
}

impl SetupError {
    /// The TERMINATE error code (layer LLP, type MPA) for this failure.
    pub(crate) const fn llp_code(self) -> u8 {
        match self {
            SetupError::NoRtr => 0x07,
            _ => 0x04,
        }
    }
}

/// The initiator's request: its policy, the READ limits the consumer
/// asked for (`ird`, `ord`), its private data.
pub(crate) fn request<'a>(p: &Policy, ird: u16, ord: u16, private: &'a [u8]) -> Frame<'a> {
    Frame {
        kind: Kind::Request,
        markers: false,
        crc: p.crc != CrcPolicy::Off,
        reject: false,
        rev: p.rev,
        ird_ord: (p.rev == 2).then_some(IrdOrd {
            ird: ird.min(p.max_ird),
            ord: ord.min(p.max_ord),
            p2p: p.p2p,
            // A peer-to-peer initiator offers the zero-length WRITE only:
            // it costs neither side a READ slot or a posted receive (a
            // responder takes the READ or SEND a peer offers: `accept`).
            rtr: if p.p2p {
                Rtr {
                    write: true,
                    ..Rtr::default()
                }
            } else {
                Rtr::default()
            },
        }),
        ext: p.ext,
        private,
    }
}

/// The responder's decision on a request: the settings, and the reply's
/// IRD/ORD words (`None` for a revision-1 request).  The consumer's own
/// IRD and ORD (from its accept) are clamped to what the request allows.
pub(crate) fn accept(
    p: &Policy,
    req: &Frame<'_>,
    ird: u16,
    ord: u16,
) -> Result<(Negotiated, Option<IrdOrd>), SetupError> {
    if req.markers {
        return Err(SetupError::Markers);
    }
    // A responder that wants the CRC sets C in its reply, which binds both
    // sides (RFC 5044 section 7.1.2): it can always have it.
    let crc = req.crc || p.crc != CrcPolicy::Off;
    let Some(theirs) = req.ird_ord else {
        // Revision 1 (or 2 without the words): no exchange of limits; the
        // consumer's stand.
        let n = Negotiated {
            crc,
            rev: req.rev,
            ird: ird.min(p.max_ird),
            ord: ord.min(p.max_ord),
            rtr: None,
            ext: req.ext && p.ext,
        };
        return Ok((n, None));
    };
    // Never send more READs than the peer takes (our ORD by its IRD), and
    // take as many as it will send (our IRD by its ORD) as far as the
    // device can: the relaxed negotiation siw does too, where a strict one
    // would refuse a peer whose consumer asked for more than we hold.
    let my_ird = ird.max(theirs.ord).min(p.max_ird);
    let my_ord = ord.min(theirs.ird).min(p.max_ord);
    let rtr = if theirs.p2p {
        let o = theirs.rtr;
        // One RTR: a zero-length WRITE costs nothing to either side; a
        // READ takes an ORD slot; a SEND takes a posted receive.
        Some(if o.write {
            Rtr {
                write: true,
                ..Rtr::default()
            }
        } else if o.read && my_ird > 0 {
            Rtr {
                read: true,
                ..Rtr::default()
            }
        } else if o.send {
            Rtr {
                send: true,
                ..Rtr::default()
            }
        } else {
            return Err(SetupError::NoRtr);
        })
    } else {
        None
    };
    let words = IrdOrd {
        ird: my_ird,
        ord: my_ord,
        p2p: rtr.is_some(),
        rtr: rtr.unwrap_or_default(),
    };
    let n = Negotiated {
        crc,
        rev: req.rev,
        ird: my_ird,
        ord: my_ord,
        rtr,
        ext: req.ext && p.ext,
    };
    Ok((n, Some(words)))
}

/// The responder's reply for a decision (`accept`'s result) or a refusal.
pub(crate) fn reply<'a>(
    req: &Frame<'_>,
    decision: Option<&(Negotiated, Option<IrdOrd>)>,
    private: &'a [u8],
) -> Frame<'a> {
    match decision {
        Some((n, words)) => Frame {
            kind: Kind::Reply,
            markers: false,
            crc: n.crc,
            reject: false,
            rev: n.rev,
            ird_ord: *words,
            ext: n.ext,
            private,
        },
        None => Frame {
            kind: Kind::Reply,
            markers: false,
            crc: req.crc,
            reject: true,
            rev: req.rev,
            ird_ord: req.ird_ord.map(|_| IrdOrd::default()),
            ext: false,
            private,
        },
    }
}

/// The initiator's settings from the reply to its request `req` (made
/// with the consumer's `ird` and `ord`).
pub(crate) fn connected(
    p: &Policy,
    ird: u16,
    ord: u16,
    req: &Frame<'_>,
    rep: &Frame<'_>,
) -> Result<Negotiated, SetupError> {
    if rep.reject {
        return Err(SetupError::Rejected);
    }
    if rep.markers {
        return Err(SetupError::Markers);
    }
    if p.crc == CrcPolicy::Required && !rep.crc {
        return Err(SetupError::CrcRequired);
    }
    // A revision-2 request with the words wants them back (siw's rule
    // too): a revision-1 reply cannot tell the limits it took.
    let (mine, theirs) = match (req.ird_ord, rep.ird_ord) {
        (Some(m), Some(t)) => (m, t),
        (None, _) => {
            // Revision 1: no exchange of limits; the consumer's stand.
            return Ok(Negotiated {
                crc: rep.crc,
                rev: rep.rev,
                ird: ird.min(p.max_ird),
                ord: ord.min(p.max_ord),
                rtr: None,
                ext: req.ext && rep.ext,
            });
        }
        (Some(_), None) => return Err(SetupError::Frame(FrameError::NoIrdOrd)),
    };
    let rtr = if mine.p2p {
        if !theirs.p2p {
            None
        } else {
            let r = theirs.rtr;
            let offered = mine.rtr;
            // Exactly one of the options offered.
            let picked = [
                r.write && offered.write,
                r.read && offered.read,
                r.send && offered.send,
            ];
            let chosen = [r.write, r.read, r.send];
            if chosen.iter().filter(|&&c| c).count() != 1 || !picked.contains(&true) {
                return Err(SetupError::NoRtr);
            }
            Some(r)
        }
    } else {
        None
    };
    Ok(Negotiated {
        crc: rep.crc,
        rev: rep.rev,
        ird: mine.ird.max(theirs.ord).min(p.max_ird),
        ord: mine.ord.min(theirs.ird),
        rtr,
        ext: req.ext && rep.ext,
    })
}
