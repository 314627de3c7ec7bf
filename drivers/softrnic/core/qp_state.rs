// SPDX-License-Identifier: GPL-2.0
//! QP state machine rules: which modify_qp transitions are legal and which
//! attribute-mask bits each one requires and accepts.  Plain `core` Rust,
//! shared by the kernel module (`#[path]`) and the host test crate.
//!
//! For InfiniBand/RoCE QPs the rules are exactly those of the kernel's
//! `ib_modify_qp_is_ok()` (drivers/infiniband/core/verbs.c), so that
//! applications and ULPs see the same EINVALs as on rxe and hardware that
//! use it.  iWARP QPs are driven by the iw_cm/rdma_cm with much smaller
//! masks, hence a relaxed rule set of their own.
//!
//! A modify without `attr::STATE` changes attributes in the current state;
//! the caller passes `next == cur` for it, as the kernel's callers do.  With
//! `attr::CUR_STATE` the caller passes the user's claimed current state as
//! `cur`, again as the kernel's callers do.

/// The QP states, numbered as `enum ib_qp_state`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpState {
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
}

impl QpState {
    /// Every state, in `enum ib_qp_state` order.
    pub(crate) const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// The state for an `enum ib_qp_state` value; `None` for values a user
    /// may pass but that name no state.
    pub(crate) const fn from_raw(raw: u32) -> Option<QpState> {
        match raw {
            0 => Some(QpState::Reset),
            1 => Some(QpState::Init),
            2 => Some(QpState::Rtr),
            3 => Some(QpState::Rts),
            4 => Some(QpState::Sqd),
            5 => Some(QpState::Sqe),
            6 => Some(QpState::Err),
            _ => None,
        }
    }

    /// The requester sends in this state (RTS, and SQD for the messages
    /// already begun).
    pub(crate) const fn sends(self) -> bool {
        matches!(self, QpState::Rts | QpState::Sqd)
    }
}

/// The QP types softrnic supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpType {
    Rc,
    Uc,
    Ud,
    Gsi,
}

impl QpType {
    /// Every supported type.
    pub(crate) const ALL: [QpType; 4] = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi];

    /// The type for an `enum ib_qp_type` value.  SMI (0) has no meaning on
    /// RoCE/iWARP, and raw packet, XRC and driver types are not offered, so
    /// they are `None`, like any unknown value.
    pub(crate) const fn from_raw(raw: u32) -> Option<QpType> {
        match raw {
            1 => Some(QpType::Gsi),
            2 => Some(QpType::Rc),
            3 => Some(QpType::Uc),
            4 => Some(QpType::Ud),
            _ => None,
        }
    }
}

/// The bits of `enum ib_qp_attr_mask` (include/rdma/ib_verbs.h).
pub(crate) mod attr {
    pub(crate) const STATE: u32 = 1 << 0;
    pub(crate) const CUR_STATE: u32 = 1 << 1;
    pub(crate) const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    pub(crate) const ACCESS_FLAGS: u32 = 1 << 3;
    pub(crate) const PKEY_INDEX: u32 = 1 << 4;
    pub(crate) const PORT: u32 = 1 << 5;
    pub(crate) const QKEY: u32 = 1 << 6;
    pub(crate) const AV: u32 = 1 << 7;
    pub(crate) const PATH_MTU: u32 = 1 << 8;
    pub(crate) const TIMEOUT: u32 = 1 << 9;
    pub(crate) const RETRY_CNT: u32 = 1 << 10;
    pub(crate) const RNR_RETRY: u32 = 1 << 11;
    pub(crate) const RQ_PSN: u32 = 1 << 12;
    pub(crate) const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub(crate) const ALT_PATH: u32 = 1 << 14;
    pub(crate) const MIN_RNR_TIMER: u32 = 1 << 15;
    pub(crate) const SQ_PSN: u32 = 1 << 16;
    pub(crate) const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub(crate) const PATH_MIG_STATE: u32 = 1 << 18;
    /// Resizing queues: no transition accepts it.
    pub(crate) const CAP: u32 = 1 << 19;
    pub(crate) const DEST_QPN: u32 = 1 << 20;
    /// Bits 21..=24 are reserved: never accepted.
    pub(crate) const RESERVED1: u32 = 1 << 21;
    pub(crate) const RESERVED2: u32 = 1 << 22;
    pub(crate) const RESERVED3: u32 = 1 << 23;
    pub(crate) const RESERVED4: u32 = 1 << 24;
    pub(crate) const RATE_LIMIT: u32 = 1 << 25;
    /// `IB_QP_ATTR_STANDARD_BITS`: `STATE..=DEST_QPN`.
    pub(crate) const STANDARD_BITS: u32 = (1 << 21) - 1;
}

/// Required and optional attributes of one transition for one QP type.
#[derive(Clone, Copy)]
struct Attrs {
    req: u32,
    opt: u32,
}

const NONE: Attrs = Attrs { req: 0, opt: 0 };

const fn req(req: u32) -> Attrs {
    Attrs { req, opt: 0 }
}

const fn opt(opt: u32) -> Attrs {
    Attrs { req: 0, opt }
}

const fn req_opt(req: u32, opt: u32) -> Attrs {
    Attrs { req, opt }
}

/// One legal transition and its attributes per QP type.
struct Row {
    from: QpState,
    to: QpState,
    rc: Attrs,
    uc: Attrs,
    ud: Attrs,
    gsi: Attrs,
}

impl Row {
    const fn attrs(&self, ty: QpType) -> Attrs {
        match ty {
            QpType::Rc => self.rc,
            QpType::Uc => self.uc,
            QpType::Ud => self.ud,
            QpType::Gsi => self.gsi,
        }
    }
}

/// Shorthand for a transition that takes no attribute for any type (every
/// move to RESET or ERR, and ERR→ERR).
const fn bare(from: QpState, to: QpState) -> Row {
    Row {
        from,
        to,
        rc: NONE,
        uc: NONE,
        ud: NONE,
        gsi: NONE,
    }
}

use attr::*;
use QpState as S;

/// The kernel's `qp_state_table` for RC, UC, UD and GSI.  A (from, to) pair
/// not listed is illegal.  Quirks kept on purpose, because the kernel has them:
/// RESET→ERR is not listed; RTR→RTR and SQE→SQE are not listed (so an
/// attribute-only modify in RTR or SQE fails); SQE→RTS is listed for RC with
/// no attributes although an RC QP never enters SQE; GSI takes no PORT (the
/// port is fixed at creation).
#[rustfmt::skip]
const TABLE: [Row; 22] = [
    bare(S::Reset, S::Reset),
    Row { from: S::Reset, to: S::Init,
        rc:  req(PKEY_INDEX | PORT | ACCESS_FLAGS),
        uc:  req(PKEY_INDEX | PORT | ACCESS_FLAGS),
        ud:  req(PKEY_INDEX | PORT | QKEY),
        gsi: req(PKEY_INDEX | QKEY),
    },

    bare(S::Init, S::Reset),
    bare(S::Init, S::Err),
    Row { from: S::Init, to: S::Init,
        rc:  opt(PKEY_INDEX | PORT | ACCESS_FLAGS),
        uc:  opt(PKEY_INDEX | PORT | ACCESS_FLAGS),
        ud:  opt(PKEY_INDEX | PORT | QKEY),
        gsi: opt(PKEY_INDEX | QKEY),
    },
    Row { from: S::Init, to: S::Rtr,
        rc:  req_opt(AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
                     ALT_PATH | ACCESS_FLAGS | PKEY_INDEX),
        uc:  req_opt(AV | PATH_MTU | DEST_QPN | RQ_PSN,
                     ALT_PATH | ACCESS_FLAGS | PKEY_INDEX),
        ud:  opt(PKEY_INDEX | QKEY),
        gsi: opt(PKEY_INDEX | QKEY),
    },

    bare(S::Rtr, S::Reset),
    bare(S::Rtr, S::Err),
    Row { from: S::Rtr, to: S::Rts,
        rc:  req_opt(TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC,
                     CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE),
        uc:  req_opt(SQ_PSN, CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE),
        ud:  req_opt(SQ_PSN, CUR_STATE | QKEY),
        gsi: req_opt(SQ_PSN, CUR_STATE | QKEY),
    },

    bare(S::Rts, S::Reset),
    bare(S::Rts, S::Err),
    Row { from: S::Rts, to: S::Rts,
        rc:  opt(CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE | MIN_RNR_TIMER),
        uc:  opt(CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE),
        ud:  opt(CUR_STATE | QKEY),
        gsi: opt(CUR_STATE | QKEY),
    },
    Row { from: S::Rts, to: S::Sqd,
        rc:  opt(EN_SQD_ASYNC_NOTIFY),
        uc:  opt(EN_SQD_ASYNC_NOTIFY),
        ud:  opt(EN_SQD_ASYNC_NOTIFY),
        gsi: opt(EN_SQD_ASYNC_NOTIFY),
    },

    bare(S::Sqd, S::Reset),
    bare(S::Sqd, S::Err),
    Row { from: S::Sqd, to: S::Rts,
        rc:  opt(CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE),
        uc:  opt(CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE),
        ud:  opt(CUR_STATE | QKEY),
        gsi: opt(CUR_STATE | QKEY),
    },
    Row { from: S::Sqd, to: S::Sqd,
        rc:  opt(PORT | AV | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC
                 | MAX_DEST_RD_ATOMIC | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX
                 | MIN_RNR_TIMER | PATH_MIG_STATE),
        uc:  opt(AV | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE),
        ud:  opt(PKEY_INDEX | QKEY),
        gsi: opt(PKEY_INDEX | QKEY),
    },

    bare(S::Sqe, S::Reset),
    bare(S::Sqe, S::Err),
    Row { from: S::Sqe, to: S::Rts,
        rc:  NONE,
        uc:  opt(CUR_STATE | ACCESS_FLAGS),
        ud:  opt(CUR_STATE | QKEY),
        gsi: opt(CUR_STATE | QKEY),
    },

    bare(S::Err, S::Reset),
    bare(S::Err, S::Err),
];

fn row(from: QpState, to: QpState) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.from == from && r.to == to)
}

/// The kernel rejects `CUR_STATE` unless the QP is in a state where the
/// user may legitimately know better than the driver (RTR/RTS/SQD/SQE,
/// e.g. after an asynchronous move to SQE).  Every row accepting the bit
/// starts in one of these anyway; the check is kept for fidelity.
const fn cur_state_may_be_given(cur: QpState) -> bool {
    matches!(cur, S::Rtr | S::Rts | S::Sqd | S::Sqe)
}

/// Whether modify_qp from `cur` to `next` with attribute `mask` is legal for
/// an IB/RoCE QP of type `ty`: exactly `ib_modify_qp_is_ok()`.  Every
/// required bit must be present, and no bit outside required ∪ optional ∪
/// {STATE, RATE_LIMIT}: the kernel exempts RATE_LIMIT on every legal
/// transition, whether or not the driver then supports it.
pub(crate) fn modify_is_ok(cur: QpState, next: QpState, ty: QpType, mask: u32) -> bool {
    if mask & CUR_STATE != 0 && !cur_state_may_be_given(cur) {
        return false;
    }
    let Some(row) = row(cur, next) else {
        return false;
    };
    let a = row.attrs(ty);
    mask & a.req == a.req && mask & !(a.req | a.opt | STATE | RATE_LIMIT) == 0
}

/// Whether modify_qp from `cur` to `next` with `mask` is legal for an iWARP
/// (RC) QP.  iWARP has no PSNs, paths, MTU or P_Keys, and the iw_cm/rdma_cm
/// move QPs with `STATE | ACCESS_FLAGS | PORT` (to INIT and RTR), bare
/// `STATE` (SQD, ERR), and a `PORT`-only mask with no `STATE` for "RTS" on
/// the accept path (librdmacm's `ucma_modify_qp_rts()`: the CM itself moves
/// the QP to RTS when MPA completes).  So, relative to RC:
/// - the IBTA-required attributes are all optional, nothing is required;
/// - `PORT` is also accepted on INIT→RTR, and RTR→RTR accepts `PORT` only;
/// - SQE→RTS is illegal (iWARP's SQE is Terminate, which never resumes);
/// - `RATE_LIMIT` is not exempt: iWARP QPs have no rate limit.
///
/// Other bits outside the RC row are still rejected, `CUR_STATE` as for RC.
/// Whether an established connection exists for RTS is the caller's check.
pub(crate) fn modify_is_ok_iwarp(cur: QpState, next: QpState, mask: u32) -> bool {
    if mask & CUR_STATE != 0 && !cur_state_may_be_given(cur) {
        return false;
    }
    let allowed = match (cur, next) {
        (S::Sqe, S::Rts) => return false,
        (S::Rtr, S::Rtr) => PORT,
        _ => {
            let Some(row) = row(cur, next) else {
                return false;
            };
            let extra = if (cur, next) == (S::Init, S::Rtr) {
                PORT
            } else {
                0
            };
            row.rc.req | row.rc.opt | extra
        }
    };
    mask & !(allowed | STATE) == 0
}
