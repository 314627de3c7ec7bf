// SPDX-License-Identifier: GPL-2.0
//! The RoCEv2 (IBTA reliable and unreliable transport) protocol machines,
//! sans-IO: the requester with its completer (`requester.rs`,
//! `completer.rs`) and the responder (`responder.rs`).  They hold a QP's
//! transport state and take events (work posted, a packet parsed, the timer
//! fired); what they do they ask of an I/O trait the caller implements
//! (build this packet, complete this WQE with this status, place these bytes
//! at this key and address, arm this timer), and what the QP must do
//! afterwards (enter ERR, raise an event) comes back as an `Outcome`.  The
//! kernel's executor implements the I/O traits with rings, memory regions
//! and skbs; the host simulation (`userspace/host-tests/src/sim`) with
//! plain memory and a lossy link.  Plain `core` Rust, no allocation: the
//! per-WQE and per-response storage is the caller's.
//!
//! Included next to `psn.rs`, `roce_wire.rs` and `transport_rules.rs` (as
//! `crate::psn` ...).

pub(crate) mod completer;
pub(crate) mod requester;
pub(crate) mod responder;

/// Work completion status codes (IBTA 11.4.2.1; the values of the kernel's
/// `enum ib_wc_status` and libibverbs' `enum ibv_wc_status`).
pub(crate) mod wc {
    pub(crate) const SUCCESS: u8 = 0;
    pub(crate) const LOC_LEN_ERR: u8 = 1;
    pub(crate) const LOC_QP_OP_ERR: u8 = 2;
    pub(crate) const LOC_PROT_ERR: u8 = 4;
    pub(crate) const WR_FLUSH_ERR: u8 = 5;
    pub(crate) const BAD_RESP_ERR: u8 = 7;
    pub(crate) const REM_INV_REQ_ERR: u8 = 9;
    pub(crate) const REM_ACCESS_ERR: u8 = 10;
    pub(crate) const REM_OP_ERR: u8 = 11;
    pub(crate) const RETRY_EXC_ERR: u8 = 12;
    pub(crate) const RNR_RETRY_EXC_ERR: u8 = 13;
}

/// Why a packet could not be built (the caller's answer to a send action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendFail {
    /// The batch is full: send it and come back.
    Full,
    /// No memory for the packet (try again later).
    NoMemory,
    /// No route to the peer (try again later).
    NoRoute,
    /// The memory the payload comes from is gone or no longer allowed.
    BadMemory,
}

/// What the machines count (the caller maps them onto its counters; the
/// kernel's names are rxe's where the meaning is the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Count {
    /// A packet for a QP in a state, or of a type, that takes no such packet.
    BadState,
    /// A malformed packet (a length or header its opcode forbids).
    Malformed,
    /// Responder: a request it had already executed (answered again, or
    /// dropped).
    Duplicate,
    /// Responder: a request past the expected PSN, answered by a sequence
    /// NAK (once per gap).
    SeqNakSent,
    RnrNakSent,
    RnrNakReceived,
    /// Requester: a rewind to resend from a PSN (after a timeout, a NAK or
    /// an RNR wait).
    Retransmit,
    AckTimeout,
    /// Requester: a response or ACK outside the window (already
    /// acknowledged, or never sent).
    DuplicateResponse,
    /// Requester: a sequence NAK received.
    SeqNakReceived,
    /// Requester: a retry spent (an ACK timeout, or a sequence NAK that
    /// charges one), as rxe's completer counts its retries.
    CompleterRetry,
    /// Requester: a WQE failed with RETRY_EXC_ERR.
    RetryExceeded,
    /// Requester: a WQE failed with RNR_RETRY_EXC_ERR.
    RnrRetryExceeded,
}

/// How many kinds of `Count` there are.
pub(crate) const COUNTS: usize = 13;
const _: () = assert!(Count::RnrRetryExceeded as usize + 1 == COUNTS);

/// What the QP must do after a machine's step (the machines never change
/// the QP's state themselves).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Enter ERR (a WQE failed and was completed with its error).
    pub(crate) error: bool,
    /// The send queue is corrupt (more WQEs than slots): a local work
    /// queue catastrophic error.
    pub(crate) fatal: bool,
    /// The remote requester's fault (responder): raise this event.
    pub(crate) remote: Option<RemoteError>,
    /// In SQD: every message begun before it is done (raise SQ_DRAINED).
    pub(crate) drained: bool,
    /// The requester failed the WQE at its head: why, for the kernel log.
    pub(crate) failed: Option<Failure>,
}

/// The requester's state when it failed the WQE at its head: what a user
/// needs to tell a dead link (nothing came back) from an answer that did
/// not fit (responses taken, then a hole).  PSNs are 24-bit values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The completion status (`wc`).
    pub(crate) status: u8,
    /// The failed WQE: its operation (None: a local one), first PSN, PSNs
    /// taken, and (READ, atomic) responses received.
    pub(crate) op: Option<crate::transport_rules::MsgOp>,
    pub(crate) first_psn: u32,
    pub(crate) npkts: u32,
    pub(crate) got: u32,
    /// The oldest PSN not acknowledged, and the PSN after the newest sent.
    pub(crate) una: u32,
    pub(crate) sent_to: u32,
    /// The send window when it failed.
    pub(crate) window: u32,
}

/// The affiliated error a responder raises for a bad request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RemoteError {
    /// IB_EVENT_QP_ACCESS_ERR.
    Access,
    /// IB_EVENT_QP_REQ_ERR.
    Request,
}
