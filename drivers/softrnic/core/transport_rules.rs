// SPDX-License-Identifier: GPL-2.0
//! The transport rules of IBTA vol. 1 ch. 9 that need no I/O: how a message
//! is cut into packets and which opcode each packet carries, which packet
//! may follow which at a responder, how a request PSN compares with the one
//! expected, and the timer encodings.  Plain `core` Rust (no allocation),
//! shared by the kernel module and the host tests; `roce_wire.rs` and
//! `psn.rs` must be included next to it (as `super::roce_wire`,
//! `super::psn`).

use super::psn::{self, Psn};
use super::roce_wire::Opcode;

/// The operation of a message (a send work request, or what a responder
/// sees arriving).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MsgOp {
    Send,
    SendImm,
    SendInv,
    Write,
    WriteImm,
    Read,
    CmpSwap,
    FetchAdd,
}

/// The service a QP gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Service {
    Rc,
    Uc,
    Ud,
}

/// The bytes of an IB MTU code (1 = 256 ... 5 = 4096); `None` if invalid.
pub(crate) const fn mtu_bytes(code: u32) -> Option<u32> {
    match code {
        1..=5 => Some(128 << code),
        _ => None,
    }
}

/// Packets a message of `len` bytes takes at `mtu` (at least one).
pub(crate) const fn packets(len: u32, mtu: u32) -> u32 {
    if len == 0 || mtu == 0 {
        1
    } else {
        len.div_ceil(mtu)
    }
}

/// The opcode of packet `index` (0-based) of `npkts` of a request message;
/// `None` for an operation the service does not carry.  READ and the
/// atomics are one request packet whatever their response length.
pub(crate) const fn request_opcode(
    svc: Service,
    op: MsgOp,
    index: u32,
    npkts: u32,
) -> Option<Opcode> {
    use Opcode::*;
    let first = index == 0;
    let last = index + 1 >= npkts;
    let o = match (svc, op) {
        (Service::Ud, MsgOp::Send) => UdSendOnly,
        (Service::Ud, MsgOp::SendImm) => UdSendOnlyImm,
        (Service::Ud, _) => return None,
        (Service::Rc, MsgOp::Read) => RcRdmaReadRequest,
        (Service::Rc, MsgOp::CmpSwap) => RcCompareSwap,
        (Service::Rc, MsgOp::FetchAdd) => RcFetchAdd,
        (Service::Uc, MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd | MsgOp::SendInv) => {
            return None
        }
        (Service::Rc, MsgOp::Send | MsgOp::SendImm | MsgOp::SendInv) => match (first, last, op) {
            (true, true, MsgOp::Send) => RcSendOnly,
            (true, true, MsgOp::SendImm) => RcSendOnlyImm,
            (true, true, _) => RcSendOnlyInv,
            (true, false, _) => RcSendFirst,
            (false, false, _) => RcSendMiddle,
            (false, true, MsgOp::Send) => RcSendLast,
            (false, true, MsgOp::SendImm) => RcSendLastImm,
            (false, true, _) => RcSendLastInv,
        },
        (Service::Uc, MsgOp::Send | MsgOp::SendImm) => match (first, last, op) {
            (true, true, MsgOp::Send) => UcSendOnly,
            (true, true, _) => UcSendOnlyImm,
            (true, false, _) => UcSendFirst,
            (false, false, _) => UcSendMiddle,
            (false, true, MsgOp::Send) => UcSendLast,
            (false, true, _) => UcSendLastImm,
        },
        (Service::Rc, MsgOp::Write | MsgOp::WriteImm) => match (first, last, op) {
            (true, true, MsgOp::Write) => RcRdmaWriteOnly,
            (true, true, _) => RcRdmaWriteOnlyImm,
            (true, false, _) => RcRdmaWriteFirst,
            (false, false, _) => RcRdmaWriteMiddle,
            (false, true, MsgOp::Write) => RcRdmaWriteLast,
            (false, true, _) => RcRdmaWriteLastImm,
        },
        (Service::Uc, MsgOp::Write | MsgOp::WriteImm) => match (first, last, op) {
            (true, true, MsgOp::Write) => UcRdmaWriteOnly,
            (true, true, _) => UcRdmaWriteOnlyImm,
            (true, false, _) => UcRdmaWriteFirst,
            (false, false, _) => UcRdmaWriteMiddle,
            (false, true, MsgOp::Write) => UcRdmaWriteLast,
            (false, true, _) => UcRdmaWriteLastImm,
        },
    };
    Some(o)
}

/// The opcode of read response packet `index` of `npkts`.
pub(crate) const fn read_response_opcode(index: u32, npkts: u32) -> Opcode {
    match (index == 0, index + 1 >= npkts) {
        (true, true) => Opcode::RcRdmaReadResponseOnly,
        (true, false) => Opcode::RcRdmaReadResponseFirst,
        (false, false) => Opcode::RcRdmaReadResponseMiddle,
        (false, true) => Opcode::RcRdmaReadResponseLast,
    }
}

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    First,
    Middle,
    Last,
    Only,
}

impl Place {
    pub(crate) const fn starts(self) -> bool {
        matches!(self, Place::First | Place::Only)
    }

    pub(crate) const fn ends(self) -> bool {
        matches!(self, Place::Last | Place::Only)
    }
}

/// What a request packet is, at a responder: its operation and place.
/// `None` for responses (ACKs, read responses, atomic ACKs).
pub(crate) const fn request_kind(op: Opcode) -> Option<(MsgOp, Place)> {
    use Opcode::*;
    Some(match op {
        RcSendFirst | UcSendFirst => (MsgOp::Send, Place::First),
        RcSendMiddle | UcSendMiddle => (MsgOp::Send, Place::Middle),
        RcSendLast | UcSendLast => (MsgOp::Send, Place::Last),
        RcSendLastImm | UcSendLastImm => (MsgOp::SendImm, Place::Last),
        RcSendLastInv => (MsgOp::SendInv, Place::Last),
        RcSendOnly | UcSendOnly | UdSendOnly => (MsgOp::Send, Place::Only),
        RcSendOnlyImm | UcSendOnlyImm | UdSendOnlyImm => (MsgOp::SendImm, Place::Only),
        RcSendOnlyInv => (MsgOp::SendInv, Place::Only),
        RcRdmaWriteFirst | UcRdmaWriteFirst => (MsgOp::Write, Place::First),
        RcRdmaWriteMiddle | UcRdmaWriteMiddle => (MsgOp::Write, Place::Middle),
        RcRdmaWriteLast | UcRdmaWriteLast => (MsgOp::Write, Place::Last),
        RcRdmaWriteLastImm | UcRdmaWriteLastImm => (MsgOp::WriteImm, Place::Last),
        RcRdmaWriteOnly | UcRdmaWriteOnly => (MsgOp::Write, Place::Only),
        RcRdmaWriteOnlyImm | UcRdmaWriteOnlyImm => (MsgOp::WriteImm, Place::Only),
        RcRdmaReadRequest => (MsgOp::Read, Place::Only),
        RcCompareSwap => (MsgOp::CmpSwap, Place::Only),
        RcFetchAdd => (MsgOp::FetchAdd, Place::Only),
        _ => return None,
    })
}

/// A responder's message in progress (a multi-packet SEND or WRITE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InMessage {
    None,
    Send,
    Write,
}

/// Whether a request packet may come next (IBTA 9.8.3.1, opcode sequence
/// check): a FIRST or ONLY only between messages, a MIDDLE or LAST only
/// inside a message of the same kind.
pub(crate) const fn sequence_ok(cur: InMessage, op: MsgOp, place: Place) -> bool {
    let kind = match op {
        MsgOp::Send | MsgOp::SendImm | MsgOp::SendInv => InMessage::Send,
        MsgOp::Write | MsgOp::WriteImm => InMessage::Write,
        _ => InMessage::None,
    };
    match (cur, place.starts()) {
        (InMessage::None, true) => true,
        (InMessage::None, false) => false,
        (_, true) => false,
        (InMessage::Send, false) => matches!(kind, InMessage::Send),
        (InMessage::Write, false) => matches!(kind, InMessage::Write),
    }
}

/// The message in progress after a packet that passed `sequence_ok`.
pub(crate) const fn after_packet(op: MsgOp, place: Place) -> InMessage {
    if place.ends() {
        return InMessage::None;
    }
    match op {
        MsgOp::Write | MsgOp::WriteImm => InMessage::Write,
        _ => InMessage::Send,
    }
}

/// Whether a request packet's payload length is right for its place:
/// FIRST and MIDDLE carry exactly one MTU, LAST 1..=MTU, ONLY 0..=MTU.
pub(crate) const fn payload_len_ok(place: Place, len: u32, mtu: u32) -> bool {
    match place {
        Place::First | Place::Middle => len == mtu,
        Place::Last => len >= 1 && len <= mtu,
        Place::Only => len <= mtu,
    }
}

/// How a request PSN compares with the one a responder expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PsnCheck {
    Expected,
    /// Already executed (in the half of the PSN space behind).
    Duplicate,
    /// Ahead: packets were lost (a sequence error).
    Ahead,
}

pub(crate) const fn check_psn(psn: Psn, expected: Psn) -> PsnCheck {
    if psn.get() == expected.get() {
        PsnCheck::Expected
    } else if psn::is_duplicate(psn, expected) {
        PsnCheck::Duplicate
    } else {
        PsnCheck::Ahead
    }
}

/// Whether a duplicate SEND or RDMA WRITE packet is answered, with an ACK
/// of the newest PSN done: one that asks for an ACK (AckReq), as a new
/// packet is, or that ends its message; the ACK of any other is coalesced
/// into that one. An ACK of the newest PSN that reaches a requester while it is
/// still resending the earlier packets of that message acknowledges packets
/// it has not sent again yet; rxe's requester then stops for good.
pub(crate) const fn ack_duplicate(ack_req: bool, place: Place) -> bool {
    ack_req || place.ends()
}

/// What a requester does with a NAK-PSN-sequence-error for `psn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SeqNak {
    /// Go back to `psn`; `charge`: the retry counter pays for it (no
    /// progress since the last rewind).
    Rewind { charge: bool },
    /// Nothing to do: the echo of an RNR NAK already being retried.
    Ignore,
}

/// A sequence NAK for `psn`, which acknowledged something new (`progress`)
/// or not; `rnr_psn`: the PSN the requester last went back to for an RNR
/// NAK, with no progress since.  A responder may NAK the packets behind
/// the one it RNR NAKed as out of sequence (rxe does, after every RNR NAK):
/// that reports no loss, the requester already resends from that PSN when
/// the RNR timer ends.  Charged, it used up retry_cnt whenever the receiver
/// was slow to post receives (RETRY_EXC_ERR with rnr_retry 7, infinite);
/// rnr_retry alone bounds those retries.
pub(crate) const fn seq_nak(psn: Psn, progress: bool, rnr_psn: Option<Psn>) -> SeqNak {
    match rnr_psn {
        Some(r) if !progress && r.get() == psn.get() => SeqNak::Ignore,
        _ => SeqNak::Rewind { charge: !progress },
    }
}

/// The local ACK timeout, 4.096 us * 2^timeout (IBTA 9.7.6.1.3); `None`
/// for 0 (no timeout).
pub(crate) const fn ack_timeout_us(timeout: u8) -> Option<u64> {
    if timeout == 0 {
        None
    } else {
        let t = if timeout > 31 { 31 } else { timeout };
        Some((4096u64 << t) / 1000)
    }
}

/// The retry counter value that means "retry RNR NAKs forever".
pub(crate) const RNR_RETRY_INFINITE: u8 = 7;
