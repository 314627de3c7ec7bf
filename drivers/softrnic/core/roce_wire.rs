// SPDX-License-Identifier: GPL-2.0
//! The InfiniBand transport headers that RoCEv2 carries in UDP (IBTA vol. 1
//! ch. 9 and Annex A17): parsing and building, no allocation, no I/O.  Plain
//! `core` Rust, shared by the kernel module (`#[path]`) and the host test
//! crate; `psn.rs` and `icrc.rs` must be included next to it (as
//! `super::psn`, `super::icrc`).
//!
//! A RoCEv2 UDP payload is: BTH, the extension headers of its opcode in the
//! order of the opcode table (§9.2, Table 38), the payload, 0 to 3 pad bytes
//! (the BTH's PadCnt) and the 4-byte ICRC.  [`parse`] checks the structure
//! (lengths, opcode, TVer, pad, AETH syndrome); it does not check the ICRC,
//! P_Key, QP or PSN, which need device and QP state.  All fields are
//! big-endian on the wire.  Reserved bits are written as zero and ignored on
//! receipt.

use super::psn::Psn;

/// Bytes of the ICRC trailer (defined with the ICRC).
pub(crate) use super::icrc::ICRC_LEN;

/// Why a packet was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// The packet ends inside the BTH or its extension headers.
    Truncated,
    /// The headers are complete but fewer than 4 bytes remain for the ICRC.
    NoIcrc,
    /// The BTH's TVer is not 0 (the only transport header version).
    BadTver(u8),
    /// An opcode softrnic does not speak: RD, CNP, XRC, the RC FLUSH and
    /// ATOMIC WRITE of IBTA 1.5, or a reserved value.
    UnknownOpcode(u8),
    /// The BTH's PadCnt is larger than the bytes between headers and ICRC.
    PadTooLong,
    /// Bytes between headers and ICRC for an opcode that carries no payload.
    UnexpectedPayload,
    /// An AETH syndrome of a reserved type or NAK code.
    BadSyndrome(u8),
}

/// Why headers could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BuildError {
    /// The buffer is shorter than what is to be written.
    BufferTooSmall,
    /// The extension headers given are not those of the opcode.
    HeaderMismatch,
    /// A payload for an opcode that carries none.
    UnexpectedPayload,
    /// A field does not fit its bits (a QPN, MSN or pad count, or a credit
    /// count or RNR timer code).
    FieldRange,
}

/// The transports of the opcode's top three bits (§9.2, Table 38).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    Rc,
    Uc,
    Ud,
}

/// The extension transport headers (§9.3), each of fixed length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ext {
    Deth,
    Reth,
    AtomicEth,
    Aeth,
    AtomicAckEth,
    ImmDt,
    Ieth,
}

impl Ext {
    /// Every extension header, in the order they appear when combined.
    pub(crate) const ALL: [Ext; 7] = [
        Ext::Deth,
        Ext::Reth,
        Ext::AtomicEth,
        Ext::Aeth,
        Ext::AtomicAckEth,
        Ext::ImmDt,
        Ext::Ieth,
    ];

    /// Bytes on the wire.
    pub(crate) const fn len(self) -> usize {
        match self {
            Ext::Deth => Deth::LEN,
            Ext::Reth => Reth::LEN,
            Ext::AtomicEth => AtomicEth::LEN,
            Ext::Aeth => Aeth::LEN,
            Ext::AtomicAckEth => AtomicAckEth::LEN,
            Ext::ImmDt => ImmDt::LEN,
            Ext::Ieth => Ieth::LEN,
        }
    }
}

/// What follows the BTH for an opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The extension headers, in wire order.
    pub exts: &'static [Ext],
    /// Whether a payload (possibly empty) follows the headers.
    pub payload: bool,
}

impl Layout {
    /// Bytes of BTH and extension headers.
    pub(crate) const fn header_len(&self) -> usize {
        let mut len = Bth::LEN;
        let mut i = 0;
        while i < self.exts.len() {
            len += self.exts[i].len();
            i += 1;
        }
        len
    }

    /// Whether the layout has extension header `ext`.
    pub(crate) const fn has(&self, ext: Ext) -> bool {
        let mut i = 0;
        while i < self.exts.len() {
            if self.exts[i] as u8 == ext as u8 {
                return true;
            }
            i += 1;
        }
        false
    }
}

/// Declares the opcode table once: the enum, its values, and each opcode's
/// extension headers (in wire order) and whether it carries a payload.
macro_rules! opcodes {
    ($($name:ident = $value:literal, [$($ext:ident),*], $payload:literal;)*) => {
        /// The BTH opcodes of RC, UC and UD (§9.2, Tables 38 and 39).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub(crate) enum Opcode {
            $($name = $value,)*
        }

        impl Opcode {
            /// Every opcode, in numeric order.
            pub(crate) const ALL: &'static [Opcode] = &[$(Opcode::$name,)*];

            /// The opcode of a BTH opcode byte; `None` if unknown.
            pub(crate) const fn from_u8(value: u8) -> Option<Opcode> {
                match value {
                    $($value => Some(Opcode::$name),)*
                    _ => None,
                }
            }

            /// The headers and payload that follow the BTH.
            pub(crate) const fn layout(self) -> Layout {
                match self {
                    $(Opcode::$name => Layout {
                        exts: &[$(Ext::$ext),*],
                        payload: $payload,
                    },)*
                }
            }
        }
    };
}

opcodes! {
    RcSendFirst = 0x00, [], true;
    RcSendMiddle = 0x01, [], true;
    RcSendLast = 0x02, [], true;
    RcSendLastImm = 0x03, [ImmDt], true;
    RcSendOnly = 0x04, [], true;
    RcSendOnlyImm = 0x05, [ImmDt], true;
    RcRdmaWriteFirst = 0x06, [Reth], true;
    RcRdmaWriteMiddle = 0x07, [], true;
    RcRdmaWriteLast = 0x08, [], true;
    RcRdmaWriteLastImm = 0x09, [ImmDt], true;
    RcRdmaWriteOnly = 0x0a, [Reth], true;
    RcRdmaWriteOnlyImm = 0x0b, [Reth, ImmDt], true;
    RcRdmaReadRequest = 0x0c, [Reth], false;
    RcRdmaReadResponseFirst = 0x0d, [Aeth], true;
    RcRdmaReadResponseMiddle = 0x0e, [], true;
    RcRdmaReadResponseLast = 0x0f, [Aeth], true;
    RcRdmaReadResponseOnly = 0x10, [Aeth], true;
    RcAck = 0x11, [Aeth], false;
    RcAtomicAck = 0x12, [Aeth, AtomicAckEth], false;
    RcCompareSwap = 0x13, [AtomicEth], false;
    RcFetchAdd = 0x14, [AtomicEth], false;
    RcSendLastInv = 0x16, [Ieth], true;
    RcSendOnlyInv = 0x17, [Ieth], true;
    UcSendFirst = 0x20, [], true;
    UcSendMiddle = 0x21, [], true;
    UcSendLast = 0x22, [], true;
    UcSendLastImm = 0x23, [ImmDt], true;
    UcSendOnly = 0x24, [], true;
    UcSendOnlyImm = 0x25, [ImmDt], true;
    UcRdmaWriteFirst = 0x26, [Reth], true;
    UcRdmaWriteMiddle = 0x27, [], true;
    UcRdmaWriteLast = 0x28, [], true;
    UcRdmaWriteLastImm = 0x29, [ImmDt], true;
    UcRdmaWriteOnly = 0x2a, [Reth], true;
    UcRdmaWriteOnlyImm = 0x2b, [Reth, ImmDt], true;
    UdSendOnly = 0x64, [Deth], true;
    UdSendOnlyImm = 0x65, [Deth, ImmDt], true;
}

impl Opcode {
    /// The transport, from the top three bits.
    pub(crate) const fn transport(self) -> Transport {
        match (self as u8) >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            _ => Transport::Ud,
        }
    }
}

/// A cursor reading big-endian fields off a byte slice.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ParseError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or(ParseError::Truncated)?;
        self.0 = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, ParseError> {
        Ok(u8::from_be_bytes(self.take()?))
    }

    fn u16(&mut self) -> Result<u16, ParseError> {
        Ok(u16::from_be_bytes(self.take()?))
    }

    fn u32(&mut self) -> Result<u32, ParseError> {
        Ok(u32::from_be_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, ParseError> {
        Ok(u64::from_be_bytes(self.take()?))
    }
}

/// A cursor writing big-endian fields into a byte slice.
struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn put<const N: usize>(&mut self, bytes: [u8; N]) -> Result<(), BuildError> {
        let dst = self
            .buf
            .get_mut(self.pos..)
            .and_then(|rest| rest.first_chunk_mut::<N>())
            .ok_or(BuildError::BufferTooSmall)?;
        *dst = bytes;
        self.pos += N;
        Ok(())
    }

    fn slice(&mut self, bytes: &[u8]) -> Result<(), BuildError> {
        let end = self
            .pos
            .checked_add(bytes.len())
            .ok_or(BuildError::BufferTooSmall)?;
        let dst = self
            .buf
            .get_mut(self.pos..end)
            .ok_or(BuildError::BufferTooSmall)?;
        dst.copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }
}

/// The largest value of a 24-bit field (QPN, MSN).
const MAX_24: u32 = (1 << 24) - 1;

/// `value` if it fits in `bits` bits.
const fn check_bits(value: u32, bits: u32) -> Result<u32, BuildError> {
    if value >> bits == 0 {
        Ok(value)
    } else {
        Err(BuildError::FieldRange)
    }
}

/// Base Transport Header (§9.2), 12 bytes:
///
/// ```text
/// byte 0   OpCode
/// byte 1   SE(7) M(6) PadCnt(5:4) TVer(3:0)
/// 2..4     P_Key
/// byte 4   FECN(7) BECN(6) reserved(5:0)
/// 5..8     DestQP
/// byte 8   AckReq(7) reserved(6:0)
/// 9..12    PSN
/// ```
///
/// TVer is always 0: it is checked by [`parse`] and written by [`build`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bth {
    pub opcode: Opcode,
    /// SE: the receiver's CQ is to raise a solicited event.
    pub solicited: bool,
    /// M: the path migration state (MigReq).
    pub mig_req: bool,
    /// PadCnt: pad bytes (0 to 3) after the payload.
    pub pad_cnt: u8,
    pub pkey: u16,
    /// Forward and backward explicit congestion notification (Annex A10).
    pub fecn: bool,
    pub becn: bool,
    /// Destination QP, 24 bits.
    pub dest_qp: u32,
    /// AckReq: the responder is to acknowledge this packet.
    pub ack_req: bool,
    pub psn: Psn,
}

impl Bth {
    pub(crate) const LEN: usize = 12;

    fn read(r: &mut Reader<'_>) -> Result<Bth, ParseError> {
        let opcode = r.u8()?;
        let flags = r.u8()?;
        let pkey = r.u16()?;
        let qp = r.u32()?;
        let apsn = r.u32()?;
        let tver = flags & 0x0f;
        if tver != 0 {
            return Err(ParseError::BadTver(tver));
        }
        Ok(Bth {
            opcode: match Opcode::from_u8(opcode) {
                Some(op) => op,
                None => return Err(ParseError::UnknownOpcode(opcode)),
            },
            solicited: flags & 0x80 != 0,
            mig_req: flags & 0x40 != 0,
            pad_cnt: (flags >> 4) & 3,
            pkey,
            fecn: qp & (1 << 31) != 0,
            becn: qp & (1 << 30) != 0,
            dest_qp: qp & MAX_24,
            ack_req: apsn & (1 << 31) != 0,
            psn: Psn::new(apsn),
        })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BuildError> {
        let pad_cnt = check_bits(u32::from(self.pad_cnt), 2)? as u8;
        let dest_qp = check_bits(self.dest_qp, 24)?;
        let flags =
            (u8::from(self.solicited) << 7) | (u8::from(self.mig_req) << 6) | (pad_cnt << 4);
        let qp = (u32::from(self.fecn) << 31) | (u32::from(self.becn) << 30) | dest_qp;
        let apsn = (u32::from(self.ack_req) << 31) | self.psn.get();
        w.put([self.opcode as u8, flags])?;
        w.put(self.pkey.to_be_bytes())?;
        w.put(qp.to_be_bytes())?;
        w.put(apsn.to_be_bytes())
    }
}

/// Datagram Extended Transport Header (§9.3.2), 8 bytes: Q_Key (4),
/// reserved (1), SrcQP (3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deth {
    pub qkey: u32,
    /// Source QP, 24 bits.
    pub src_qp: u32,
}

impl Deth {
    pub(crate) const LEN: usize = 8;

    fn read(r: &mut Reader<'_>) -> Result<Deth, ParseError> {
        Ok(Deth {
            qkey: r.u32()?,
            src_qp: r.u32()? & MAX_24,
        })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BuildError> {
        let src_qp = check_bits(self.src_qp, 24)?;
        w.put(self.qkey.to_be_bytes())?;
        w.put(src_qp.to_be_bytes())
    }
}

/// RDMA Extended Transport Header (§9.3.3), 16 bytes: VA (8), R_Key (4),
/// DMA length (4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl Reth {
    pub(crate) const LEN: usize = 16;

    fn read(r: &mut Reader<'_>) -> Result<Reth, ParseError> {
        Ok(Reth {
            va: r.u64()?,
            rkey: r.u32()?,
            dma_len: r.u32()?,
        })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BuildError> {
        w.put(self.va.to_be_bytes())?;
        w.put(self.rkey.to_be_bytes())?;
        w.put(self.dma_len.to_be_bytes())
    }
}

/// Atomic Extended Transport Header (§9.3.4), 28 bytes: VA (8), R_Key (4),
/// swap or add data (8), compare data (8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicEth {
    pub va: u64,
    pub rkey: u32,
    /// The value to swap in (CmpSwap) or to add (FetchAdd).
    pub swap_add: u64,
    /// The value to compare with (CmpSwap; FetchAdd ignores it).
    pub compare: u64,
}

impl AtomicEth {
    pub(crate) const LEN: usize = 28;

    fn read(r: &mut Reader<'_>) -> Result<AtomicEth, ParseError> {
        Ok(AtomicEth {
            va: r.u64()?,
            rkey: r.u32()?,
            swap_add: r.u64()?,
            compare: r.u64()?,
        })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BuildError> {
        w.put(self.va.to_be_bytes())?;
        w.put(self.rkey.to_be_bytes())?;
        w.put(self.swap_add.to_be_bytes())?;
        w.put(self.compare.to_be_bytes())
    }
}

/// The NAK codes of an AETH syndrome (§9.3.5; the syndrome
/// encoding is in ch. 9.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum NakCode {
    PsnSequenceError = 0,
    InvalidRequest = 1,
    RemoteAccessError = 2,
    RemoteOperationalError = 3,
    InvalidRdRequest = 4,
}

impl NakCode {
    /// Every code.
    pub(crate) const ALL: [NakCode; 5] = [
        NakCode::PsnSequenceError,
        NakCode::InvalidRequest,
        NakCode::RemoteAccessError,
        NakCode::RemoteOperationalError,
        NakCode::InvalidRdRequest,
    ];
}

/// The syndrome byte of an AETH: bit 7 reserved, bits 6:5 the type (00 ACK,
/// 01 RNR NAK, 10 reserved, 11 NAK), bits 4:0 its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Syndrome {
    /// ACK with the 5-bit end-to-end credit count code ([`ack_credits`]).
    Ack {
        credits: u8,
    },
    /// Receiver not ready, with the 5-bit RNR timer code ([`rnr_timer_us`]).
    RnrNak {
        timer: u8,
    },
    Nak(NakCode),
}

/// The credit count code of an ACK that means "no credit information"
/// (an SRQ-attached or flow-control-free responder).
pub(crate) const CREDITS_INVALID: u8 = 31;

impl Syndrome {
    /// The syndrome of a syndrome byte; `None` for a reserved type or NAK code.
    pub(crate) const fn from_u8(raw: u8) -> Option<Syndrome> {
        let value = raw & 0x1f;
        match (raw >> 5) & 3 {
            0 => Some(Syndrome::Ack { credits: value }),
            1 => Some(Syndrome::RnrNak { timer: value }),
            3 => match value {
                0 => Some(Syndrome::Nak(NakCode::PsnSequenceError)),
                1 => Some(Syndrome::Nak(NakCode::InvalidRequest)),
                2 => Some(Syndrome::Nak(NakCode::RemoteAccessError)),
                3 => Some(Syndrome::Nak(NakCode::RemoteOperationalError)),
                4 => Some(Syndrome::Nak(NakCode::InvalidRdRequest)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The syndrome byte; `FieldRange` for a credit or timer code above 31.
    pub(crate) const fn to_u8(self) -> Result<u8, BuildError> {
        let (kind, value) = match self {
            Syndrome::Ack { credits } => (0, credits),
            Syndrome::RnrNak { timer } => (1, timer),
            Syndrome::Nak(code) => (3, code as u8),
        };
        if value > 0x1f {
            return Err(BuildError::FieldRange);
        }
        Ok((kind << 5) | value)
    }
}

/// Credits granted by an ACK's credit count code (the end-to-end credit
/// encoding of ch. 9.7); `None` for [`CREDITS_INVALID`] or codes above it.
pub(crate) const fn ack_credits(code: u8) -> Option<u32> {
    const CREDITS: [u16; 31] = [
        0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
        2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
    ];
    let i = code as usize;
    if i < CREDITS.len() {
        Some(CREDITS[i] as u32)
    } else {
        None
    }
}

/// Microseconds an RNR NAK's timer code asks the requester to wait
/// (the RNR timer encoding of ch. 9.7); codes above 31 are taken mod 32.
pub(crate) const fn rnr_timer_us(code: u8) -> u32 {
    const MICROS: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    MICROS[(code & 0x1f) as usize]
}

/// ACK Extended Transport Header (§9.3.5), 4 bytes: syndrome (1), MSN (3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aeth {
    pub syndrome: Syndrome,
    /// Message sequence number, 24 bits.
    pub msn: u32,
}

impl Aeth {
    pub(crate) const LEN: usize = 4;

    fn read(r: &mut Reader<'_>) -> Result<Aeth, ParseError> {
        let smsn = r.u32()?;
        let raw = (smsn >> 24) as u8;
        match Syndrome::from_u8(raw) {
            Some(syndrome) => Ok(Aeth {
                syndrome,
                msn: smsn & MAX_24,
            }),
            None => Err(ParseError::BadSyndrome(raw)),
        }
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BuildError> {
        let syndrome = self.syndrome.to_u8()?;
        let msn = check_bits(self.msn, 24)?;
        w.put(((u32::from(syndrome) << 24) | msn).to_be_bytes())
    }
}

/// Atomic ACK Extended Transport Header (§9.3.6), 8 bytes: the original
/// remote data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AtomicAckEth {
    pub orig: u64,
}

impl AtomicAckEth {
    pub(crate) const LEN: usize = 8;

    fn read(r: &mut Reader<'_>) -> Result<AtomicAckEth, ParseError> {
        Ok(AtomicAckEth { orig: r.u64()? })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BuildError> {
        w.put(self.orig.to_be_bytes())
    }
}

/// Immediate Data Extended Transport Header (§9.3.7), 4 bytes.  `data` is
/// the value of the big-endian field (`be32_to_cpu` of the verbs' `imm_data`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ImmDt {
    pub data: u32,
}

impl ImmDt {
    pub(crate) const LEN: usize = 4;

    fn read(r: &mut Reader<'_>) -> Result<ImmDt, ParseError> {
        Ok(ImmDt { data: r.u32()? })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BuildError> {
        w.put(self.data.to_be_bytes())
    }
}

/// Invalidate Extended Transport Header (§9.3.8), 4 bytes: the R_Key to
/// invalidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ieth {
    pub rkey: u32,
}

impl Ieth {
    pub(crate) const LEN: usize = 4;

    fn read(r: &mut Reader<'_>) -> Result<Ieth, ParseError> {
        Ok(Ieth { rkey: r.u32()? })
    }

    fn write(&self, w: &mut Writer<'_>) -> Result<(), BuildError> {
        w.put(self.rkey.to_be_bytes())
    }
}

/// The BTH and the extension headers of one packet: exactly those of the
/// opcode's [`Layout`] are `Some`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Headers {
    pub bth: Bth,
    pub deth: Option<Deth>,
    pub reth: Option<Reth>,
    pub atomic_eth: Option<AtomicEth>,
    pub aeth: Option<Aeth>,
    pub atomic_ack_eth: Option<AtomicAckEth>,
    pub imm_dt: Option<ImmDt>,
    pub ieth: Option<Ieth>,
}

impl Headers {
    /// A BTH with no extension headers (fill in those of the opcode).
    pub(crate) const fn new(bth: Bth) -> Headers {
        Headers {
            bth,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            imm_dt: None,
            ieth: None,
        }
    }

    /// Bytes of these headers on the wire (from the opcode).
    pub(crate) const fn wire_len(&self) -> usize {
        self.bth.opcode.layout().header_len()
    }

    /// Whether extension header `ext` is present.
    pub(crate) const fn has(&self, ext: Ext) -> bool {
        match ext {
            Ext::Deth => self.deth.is_some(),
            Ext::Reth => self.reth.is_some(),
            Ext::AtomicEth => self.atomic_eth.is_some(),
            Ext::Aeth => self.aeth.is_some(),
            Ext::AtomicAckEth => self.atomic_ack_eth.is_some(),
            Ext::ImmDt => self.imm_dt.is_some(),
            Ext::Ieth => self.ieth.is_some(),
        }
    }
}

/// A packet's payload: one slice, or the pieces of a packet that the
/// network stack keeps in fragments, in order (the receive path copies from
/// them; nothing linearises the packet first).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload<'a> {
    Linear(&'a [u8]),
    Pieces(&'a [&'a [u8]]),
}

impl<'a> Payload<'a> {
    /// The payload's bytes, in order, as slices.
    pub(crate) fn pieces(&self) -> &[&'a [u8]] {
        match self {
            Payload::Linear(s) => core::slice::from_ref(s),
            Payload::Pieces(p) => p,
        }
    }

    /// Bytes in the payload.
    pub(crate) fn len(&self) -> usize {
        self.pieces().iter().map(|p| p.len()).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pieces().iter().all(|p| p.is_empty())
    }

    /// Each piece with the offset it lands at when the payload is placed
    /// from `start` on.
    pub(crate) fn placed(&self, start: u64) -> impl Iterator<Item = (u64, &'a [u8])> + '_ {
        self.pieces().iter().scan(start, |at, p| {
            let here = *at;
            *at += p.len() as u64;
            Some((here, *p))
        })
    }
}

/// Payloads are equal when their bytes are, however they are cut.
impl PartialEq for Payload<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .pieces()
                .iter()
                .flat_map(|p| p.iter())
                .eq(other.pieces().iter().flat_map(|p| p.iter()))
    }
}

impl Eq for Payload<'_> {}

/// A parsed packet: its headers, payload (without pad) and ICRC trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packet<'a> {
    pub hdr: Headers,
    pub payload: Payload<'a>,
    /// The ICRC as it is on the wire (checked by the caller, who has the IP
    /// and UDP headers it also covers).
    pub icrc: [u8; ICRC_LEN],
}

/// Parses a RoCEv2 UDP payload, from the BTH to the ICRC inclusive.
///
/// Checks, in order: a complete BTH, TVer 0, a known opcode, complete
/// extension headers, room for the ICRC, a valid AETH syndrome, no payload
/// bytes for an opcode without payload, and a PadCnt not larger than the
/// bytes before the ICRC.  Never panics.
pub(crate) fn parse(packet: &[u8]) -> Result<Packet<'_>, ParseError> {
    let (hdr, header_len, payload_len) = parse_headers(packet, packet.len())?;
    let payload = packet
        .get(header_len..header_len + payload_len)
        .ok_or(ParseError::Truncated)?;
    let icrc = packet.last_chunk::<ICRC_LEN>().ok_or(ParseError::NoIcrc)?;
    Ok(Packet {
        hdr,
        payload: Payload::Linear(payload),
        icrc: *icrc,
    })
}

/// [`parse`] for a packet of `len` bytes (BTH to ICRC inclusive) of which
/// only the first are at hand in `head`: at least its headers, or all of it
/// when it is shorter than [`MAX_HEADER_LEN`] + [`ICRC_LEN`].  The same
/// checks in the same order; returns the headers, their length and the
/// payload's length (without pad).
pub(crate) fn parse_headers(
    head: &[u8],
    len: usize,
) -> Result<(Headers, usize, usize), ParseError> {
    let mut r = Reader(head.get(..len).unwrap_or(head));
    let bth = Bth::read(&mut r)?;
    let layout = bth.opcode.layout();
    let header_len = layout.header_len();
    let after_headers = len.checked_sub(header_len).ok_or(ParseError::Truncated)?;
    if after_headers < ICRC_LEN {
        return Err(ParseError::NoIcrc);
    }
    let mut hdr = Headers::new(bth);
    for ext in layout.exts {
        match ext {
            Ext::Deth => hdr.deth = Some(Deth::read(&mut r)?),
            Ext::Reth => hdr.reth = Some(Reth::read(&mut r)?),
            Ext::AtomicEth => hdr.atomic_eth = Some(AtomicEth::read(&mut r)?),
            Ext::Aeth => hdr.aeth = Some(Aeth::read(&mut r)?),
            Ext::AtomicAckEth => hdr.atomic_ack_eth = Some(AtomicAckEth::read(&mut r)?),
            Ext::ImmDt => hdr.imm_dt = Some(ImmDt::read(&mut r)?),
            Ext::Ieth => hdr.ieth = Some(Ieth::read(&mut r)?),
        }
    }
    let body = after_headers - ICRC_LEN;
    if !layout.payload && body != 0 {
        return Err(ParseError::UnexpectedPayload);
    }
    let payload_len = body
        .checked_sub(usize::from(bth.pad_cnt))
        .ok_or(ParseError::PadTooLong)?;
    Ok((hdr, header_len, payload_len))
}

/// Why a packet read in pieces was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PiecesError {
    /// Fewer than 4 bytes for the ICRC after the headers.
    Malformed,
    BadIcrc,
}

/// The packet whose headers [`parse_headers`] read (`hdr`, with
/// `payload_len`): `headers` its bytes from the IP header through its
/// transport headers, `pieces` the bytes after them in order (payload, pad
/// and ICRC; shortened in place).  The ICRC is checked (with `update`)
/// over both before anything else is read, so a corrupted header cannot
/// steer a placement; the payload is then the pieces themselves, not a
/// copy.  `None`: a packet that never left the host, whose sender wrote no
/// ICRC (the kernel's `rx::loop_back`).
pub(crate) fn packet_in_pieces<'a, 'p: 'a>(
    headers: &[u8],
    hdr: Headers,
    payload_len: usize,
    pieces: &'a mut [&'p [u8]],
    update: Option<super::crc::Update>,
) -> Result<Packet<'a>, PiecesError> {
    let (trailer, body) = split_icrc(pieces).ok_or(PiecesError::Malformed)?;
    if let Some(update) = update {
        if !super::icrc::check_parts(headers, &pieces[..body], trailer, update) {
            return Err(PiecesError::BadIcrc);
        }
    }
    let kept = keep_front(&mut pieces[..body], payload_len);
    let pieces: &'a [&'p [u8]] = pieces;
    Ok(Packet {
        hdr,
        payload: Payload::Pieces(&pieces[..kept]),
        icrc: trailer,
    })
}

/// Keep the first `len` bytes of `pieces`, shortening them in place; how
/// many pieces hold them.
pub(crate) fn keep_front(pieces: &mut [&[u8]], len: usize) -> usize {
    let mut left = len;
    for (i, p) in pieces.iter_mut().enumerate() {
        if left == 0 {
            return i;
        }
        if p.len() >= left {
            *p = &p[..left];
            return i + 1;
        }
        left -= p.len();
    }
    pieces.len()
}

/// Split the bytes after a packet's headers, held in `pieces`, into its
/// body (payload and pad, left in the pieces, shortened in place) and its
/// ICRC trailer: the trailer and how many pieces hold the body, or `None`
/// when there are fewer than 4 bytes.
pub(crate) fn split_icrc(pieces: &mut [&[u8]]) -> Option<([u8; ICRC_LEN], usize)> {
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    let body = total.checked_sub(ICRC_LEN)?;
    let mut trailer = [0u8; ICRC_LEN];
    let (mut at, mut got) = (0usize, 0usize);
    for p in pieces.iter() {
        let end = at + p.len();
        if end > body {
            let from = body.saturating_sub(at);
            let n = p.len() - from;
            trailer[got..got + n].copy_from_slice(&p[from..]);
            got += n;
        }
        at = end;
    }
    Some((trailer, keep_front(pieces, body)))
}

/// Writes the BTH and extension headers of `hdr` at the start of `buf` and
/// returns the bytes written ([`Headers::wire_len`]).  On error the contents
/// of `buf` are unspecified.
pub(crate) fn build(buf: &mut [u8], hdr: &Headers) -> Result<usize, BuildError> {
    let layout = hdr.bth.opcode.layout();
    for ext in Ext::ALL {
        if layout.has(ext) != hdr.has(ext) {
            return Err(BuildError::HeaderMismatch);
        }
    }
    let len = layout.header_len();
    let mut w = Writer {
        buf: buf.get_mut(..len).ok_or(BuildError::BufferTooSmall)?,
        pos: 0,
    };
    hdr.bth.write(&mut w)?;
    for ext in layout.exts {
        let written = match ext {
            Ext::Deth => hdr.deth.map(|h| h.write(&mut w)),
            Ext::Reth => hdr.reth.map(|h| h.write(&mut w)),
            Ext::AtomicEth => hdr.atomic_eth.map(|h| h.write(&mut w)),
            Ext::Aeth => hdr.aeth.map(|h| h.write(&mut w)),
            Ext::AtomicAckEth => hdr.atomic_ack_eth.map(|h| h.write(&mut w)),
            Ext::ImmDt => hdr.imm_dt.map(|h| h.write(&mut w)),
            Ext::Ieth => hdr.ieth.map(|h| h.write(&mut w)),
        };
        written.unwrap_or(Err(BuildError::HeaderMismatch))?;
    }
    Ok(w.pos)
}

/// The most header bytes any opcode has: BTH + AtomicETH (the atomics).
pub(crate) const MAX_HEADER_LEN: usize = Bth::LEN + AtomicEth::LEN;

/// The pad bytes after a payload of `len` bytes (to a multiple of 4).
pub(crate) const fn pad_count(len: usize) -> u8 {
    (len.wrapping_neg() & 3) as u8
}

/// Writes a whole packet at the start of `buf`: the headers of `hdr` with
/// PadCnt set from the payload's length (`hdr.bth.pad_cnt` is not used),
/// `payload`, zero pad bytes, and a zero ICRC for the caller to fill in.
/// Returns the bytes written.
pub(crate) fn build_packet(
    buf: &mut [u8],
    hdr: &Headers,
    payload: &[u8],
) -> Result<usize, BuildError> {
    if !hdr.bth.opcode.layout().payload && !payload.is_empty() {
        return Err(BuildError::UnexpectedPayload);
    }
    let pad = pad_count(payload.len());
    let total = hdr
        .wire_len()
        .checked_add(payload.len())
        .and_then(|n| n.checked_add(usize::from(pad) + ICRC_LEN))
        .ok_or(BuildError::BufferTooSmall)?;
    let buf = buf.get_mut(..total).ok_or(BuildError::BufferTooSmall)?;
    let mut hdr = *hdr;
    hdr.bth.pad_cnt = pad;
    let pos = build(buf, &hdr)?;
    let mut w = Writer { buf, pos };
    w.slice(payload)?;
    for _ in 0..pad {
        w.put([0])?;
    }
    w.put([0; ICRC_LEN])?;
    Ok(w.pos)
}
