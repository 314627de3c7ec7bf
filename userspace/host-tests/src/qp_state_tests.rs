//! Tests of `core/qp_state.rs` against the kernel's `ib_modify_qp_is_ok()`
//! table (Linux 7.3 drivers/infiniband/core/verbs.c) and the masks that the
//! kernel's CMs and MAD layer really send.

use crate::qp_state::attr::*;
use crate::qp_state::{modify_is_ok, modify_is_ok_iwarp, QpState, QpType};
use QpState as S;
use QpType as T;

/// Every bit of a u32 mask, defined or not.
fn bits() -> impl Iterator<Item = u32> {
    (0..32).map(|i| 1u32 << i)
}

/// The bits set in `mask`.
fn bits_of(mask: u32) -> impl Iterator<Item = u32> {
    bits().filter(move |b| mask & b != 0)
}

fn ok(cur: S, next: S, ty: T, mask: u32) -> bool {
    modify_is_ok(cur, next, ty, mask)
}

/// The kernel table restated independently, transition by transition with
/// the types inside (the module has them the other way round):
/// `Some((required, optional))` for a legal transition.
fn spec(cur: S, next: S, ty: T) -> Option<(u32, u32)> {
    let resume = match ty {
        T::Rc => CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE,
        T::Uc => CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE,
        T::Ud | T::Gsi => CUR_STATE | QKEY,
    };
    let init = match ty {
        T::Rc | T::Uc => PKEY_INDEX | PORT | ACCESS_FLAGS,
        T::Ud => PKEY_INDEX | PORT | QKEY,
        T::Gsi => PKEY_INDEX | QKEY,
    };
    Some(match (cur, next) {
        (S::Reset, S::Err) => return None,
        (_, S::Reset) | (_, S::Err) => (0, 0),
        (S::Reset, S::Init) => (init, 0),
        (S::Init, S::Init) => (0, init),
        (S::Init, S::Rtr) => match ty {
            T::Rc => (
                AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
                ALT_PATH | ACCESS_FLAGS | PKEY_INDEX,
            ),
            T::Uc => (
                AV | PATH_MTU | DEST_QPN | RQ_PSN,
                ALT_PATH | ACCESS_FLAGS | PKEY_INDEX,
            ),
            T::Ud | T::Gsi => (0, PKEY_INDEX | QKEY),
        },
        (S::Rtr, S::Rts) => match ty {
            T::Rc => (
                TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC,
                resume,
            ),
            _ => (SQ_PSN, resume),
        },
        (S::Rts | S::Sqd, S::Rts) => (0, resume),
        (S::Rts, S::Sqd) => (0, EN_SQD_ASYNC_NOTIFY),
        (S::Sqd, S::Sqd) => match ty {
            T::Rc => (
                0,
                PORT | AV
                    | TIMEOUT
                    | RETRY_CNT
                    | RNR_RETRY
                    | MAX_QP_RD_ATOMIC
                    | MAX_DEST_RD_ATOMIC
                    | ALT_PATH
                    | ACCESS_FLAGS
                    | PKEY_INDEX
                    | MIN_RNR_TIMER
                    | PATH_MIG_STATE,
            ),
            T::Uc => (
                0,
                AV | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE,
            ),
            T::Ud | T::Gsi => (0, PKEY_INDEX | QKEY),
        },
        (S::Sqe, S::Rts) => match ty {
            T::Rc => (0, 0),
            T::Uc => (0, CUR_STATE | ACCESS_FLAGS),
            T::Ud | T::Gsi => (0, CUR_STATE | QKEY),
        },
        _ => return None,
    })
}

#[test]
fn raw_values_match_the_kernel_enums() {
    for (raw, s) in QpState::ALL.iter().enumerate() {
        assert_eq!(*s as u32, raw as u32);
        assert_eq!(QpState::from_raw(raw as u32), Some(*s));
    }
    assert_eq!(QpState::from_raw(7), None);
    assert_eq!(QpState::from_raw(u32::MAX), None);

    assert_eq!(QpType::from_raw(0), None, "SMI is not supported");
    assert_eq!(QpType::from_raw(1), Some(T::Gsi));
    assert_eq!(QpType::from_raw(2), Some(T::Rc));
    assert_eq!(QpType::from_raw(3), Some(T::Uc));
    assert_eq!(QpType::from_raw(4), Some(T::Ud));
    // RAW_IPV6, RAW_ETHERTYPE, (gap), RAW_PACKET, XRC_INI, XRC_TGT, DRIVER, RESERVED1..
    for raw in [5, 6, 7, 8, 9, 10, 0xff, 0x1000, 0x1007, u32::MAX] {
        assert_eq!(QpType::from_raw(raw), None, "type {raw:#x}");
    }
}

#[test]
fn attr_mask_bits_match_ib_verbs_h() {
    let named = [
        STATE,
        CUR_STATE,
        EN_SQD_ASYNC_NOTIFY,
        ACCESS_FLAGS,
        PKEY_INDEX,
        PORT,
        QKEY,
        AV,
        PATH_MTU,
        TIMEOUT,
        RETRY_CNT,
        RNR_RETRY,
        RQ_PSN,
        MAX_QP_RD_ATOMIC,
        ALT_PATH,
        MIN_RNR_TIMER,
        SQ_PSN,
        MAX_DEST_RD_ATOMIC,
        PATH_MIG_STATE,
        CAP,
        DEST_QPN,
        RESERVED1,
        RESERVED2,
        RESERVED3,
        RESERVED4,
        RATE_LIMIT,
    ];
    for (i, bit) in named.iter().enumerate() {
        assert_eq!(*bit, 1 << i, "bit {i}");
    }
    assert_eq!(STANDARD_BITS, 0x1f_ffff);
    assert_eq!(RATE_LIMIT, 0x200_0000);
}

/// The whole table, cell by cell and bit by bit, against `spec`.
#[test]
fn every_cell_matches_the_kernel_table() {
    let mut legal = 0;
    for ty in QpType::ALL {
        for cur in QpState::ALL {
            for next in QpState::ALL {
                let Some((req, opt)) = spec(cur, next, ty) else {
                    assert!(!ok(cur, next, ty, STATE), "{cur:?}->{next:?} {ty:?}");
                    assert!(!ok(cur, next, ty, 0), "{cur:?}->{next:?} {ty:?}");
                    assert!(!ok(cur, next, ty, u32::MAX), "{cur:?}->{next:?} {ty:?}");
                    for b in bits() {
                        assert!(
                            !ok(cur, next, ty, STATE | b),
                            "{cur:?}->{next:?} {ty:?} {b:#x}"
                        );
                    }
                    continue;
                };
                legal += 1;
                let at = |m: u32| format!("{cur:?}->{next:?} {ty:?} mask {m:#x}");
                let min = STATE | req;
                assert!(ok(cur, next, ty, min), "{}", at(min));
                // IB_QP_STATE itself is never checked.
                assert!(ok(cur, next, ty, req), "{}", at(req));
                assert!(ok(cur, next, ty, min | opt), "{}", at(min | opt));
                assert!(
                    ok(cur, next, ty, min | opt | RATE_LIMIT),
                    "{}",
                    at(min | opt)
                );
                for b in bits_of(req) {
                    assert!(!ok(cur, next, ty, (min | opt) & !b), "{}", at(min & !b));
                }
                for b in bits() {
                    let expect = (req | opt | STATE | RATE_LIMIT) & b != 0;
                    assert_eq!(ok(cur, next, ty, min | b), expect, "{}", at(min | b));
                }
            }
        }
    }
    // 22 rows of qp_state_table, for each of the 4 types.
    assert_eq!(legal, 22 * 4);
}

#[test]
fn connection_setup_with_minimal_masks() {
    // RC as ib_cm sets it up (cma_ib_init_qp_attr, cm_init_qp_rtr/rts_attr).
    let rc = [
        (S::Reset, S::Init, PKEY_INDEX | PORT | ACCESS_FLAGS),
        (
            S::Init,
            S::Rtr,
            AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
        ),
        (
            S::Rtr,
            S::Rts,
            TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC,
        ),
        (S::Rts, S::Sqd, 0),
        (S::Sqd, S::Rts, 0),
    ];
    // UC: no responder resources, no RNR, no retries, no timeout.
    let uc = [
        (S::Reset, S::Init, PKEY_INDEX | PORT | ACCESS_FLAGS),
        (S::Init, S::Rtr, AV | PATH_MTU | DEST_QPN | RQ_PSN),
        (S::Rtr, S::Rts, SQ_PSN),
        (S::Rts, S::Sqd, 0),
        (S::Sqd, S::Rts, 0),
    ];
    // UD as cma_init_ud_qp does it; GSI as the MAD layer does it.
    let ud = [
        (S::Reset, S::Init, PKEY_INDEX | PORT | QKEY),
        (S::Init, S::Rtr, 0),
        (S::Rtr, S::Rts, SQ_PSN),
        (S::Rts, S::Sqd, 0),
        (S::Sqd, S::Rts, 0),
    ];
    let gsi = [
        (S::Reset, S::Init, PKEY_INDEX | QKEY),
        (S::Init, S::Rtr, 0),
        (S::Rtr, S::Rts, SQ_PSN),
        (S::Rts, S::Sqd, 0),
        (S::Sqd, S::Rts, 0),
    ];
    for (ty, steps) in [(T::Rc, rc), (T::Uc, uc), (T::Ud, ud), (T::Gsi, gsi)] {
        for (cur, next, req) in steps {
            assert!(ok(cur, next, ty, STATE | req), "{ty:?} {cur:?}->{next:?}");
            for b in bits_of(req) {
                assert!(
                    !ok(cur, next, ty, STATE | (req & !b)),
                    "{ty:?} {cur:?}->{next:?} without {b:#x}"
                );
            }
        }
    }
}

#[test]
fn required_attributes_are_required() {
    // Spot checks that read like the IBTA tables.
    assert!(!ok(S::Reset, S::Init, T::Rc, STATE | PKEY_INDEX | PORT));
    assert!(!ok(S::Reset, S::Init, T::Uc, STATE | PORT | ACCESS_FLAGS));
    assert!(!ok(S::Reset, S::Init, T::Ud, STATE | PKEY_INDEX | PORT));
    assert!(!ok(S::Reset, S::Init, T::Gsi, STATE | PKEY_INDEX));
    assert!(!ok(S::Reset, S::Init, T::Rc, STATE));
    let rc_rtr = AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    assert!(!ok(
        S::Init,
        S::Rtr,
        T::Rc,
        STATE | (rc_rtr & !MIN_RNR_TIMER)
    ));
    assert!(!ok(S::Init, S::Rtr, T::Rc, STATE | (rc_rtr & !AV)));
    assert!(!ok(
        S::Init,
        S::Rtr,
        T::Uc,
        STATE | AV | PATH_MTU | DEST_QPN
    ));
    assert!(!ok(S::Rtr, S::Rts, T::Ud, STATE));
    assert!(!ok(S::Rtr, S::Rts, T::Gsi, STATE));
    assert!(!ok(S::Rtr, S::Rts, T::Rc, STATE | SQ_PSN));
}

#[test]
fn attributes_outside_the_row_are_rejected() {
    // Connected types take no Q_Key; datagram types no access flags or path.
    assert!(!ok(
        S::Reset,
        S::Init,
        T::Rc,
        STATE | PKEY_INDEX | PORT | ACCESS_FLAGS | QKEY
    ));
    assert!(!ok(
        S::Reset,
        S::Init,
        T::Ud,
        STATE | PKEY_INDEX | PORT | QKEY | ACCESS_FLAGS
    ));
    assert!(!ok(S::Init, S::Rtr, T::Ud, STATE | AV));
    // UC has no responder resources or RNR timer.
    let uc_rtr = STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN;
    assert!(ok(S::Init, S::Rtr, T::Uc, uc_rtr));
    assert!(!ok(S::Init, S::Rtr, T::Uc, uc_rtr | MAX_DEST_RD_ATOMIC));
    assert!(!ok(S::Init, S::Rtr, T::Uc, uc_rtr | MIN_RNR_TIMER));
    assert!(!ok(S::Rtr, S::Rts, T::Uc, STATE | SQ_PSN | TIMEOUT));
    // PSNs only where they are set; SQ_PSN not again in RTS.
    assert!(!ok(S::Rts, S::Rts, T::Rc, STATE | SQ_PSN));
    assert!(!ok(S::Init, S::Init, T::Rc, STATE | RQ_PSN));
    // CAP, reserved and undefined bits: never.
    for ty in QpType::ALL {
        for b in [
            CAP,
            RESERVED1,
            RESERVED2,
            RESERVED3,
            RESERVED4,
            1 << 26,
            1 << 31,
        ] {
            assert!(!ok(S::Rts, S::Rts, ty, STATE | b), "{ty:?} {b:#x}");
            assert!(!ok(S::Reset, S::Reset, ty, STATE | b), "{ty:?} {b:#x}");
        }
    }
}

#[test]
fn illegal_transitions_are_rejected_whatever_the_mask() {
    let illegal = [
        (S::Reset, S::Rtr),
        (S::Reset, S::Rts),
        (S::Reset, S::Sqd),
        (S::Init, S::Rts),
        (S::Init, S::Sqd),
        (S::Rtr, S::Init),
        (S::Rtr, S::Rtr),
        (S::Rtr, S::Sqd),
        (S::Rts, S::Init),
        (S::Rts, S::Rtr),
        (S::Sqd, S::Init),
        (S::Sqd, S::Rtr),
        (S::Sqe, S::Sqd),
        (S::Sqe, S::Sqe),
        (S::Err, S::Init),
        (S::Err, S::Rts),
    ];
    for ty in QpType::ALL {
        for (cur, next) in illegal {
            for mask in [0, STATE, STATE | STANDARD_BITS, u32::MAX] {
                assert!(
                    !ok(cur, next, ty, mask),
                    "{ty:?} {cur:?}->{next:?} {mask:#x}"
                );
            }
        }
        // Nothing is moved into SQE by modify_qp: the QP enters it on its own.
        for cur in QpState::ALL {
            assert!(!ok(cur, S::Sqe, ty, STATE), "{ty:?} {cur:?}->SQE");
        }
    }
}

#[test]
fn reset_and_err_from_every_state() {
    for ty in QpType::ALL {
        for cur in QpState::ALL {
            assert!(ok(cur, S::Reset, ty, STATE), "{ty:?} {cur:?}->RESET");
            // No attribute rides along, not even CUR_STATE.
            for b in [
                ACCESS_FLAGS,
                PKEY_INDEX,
                QKEY,
                CUR_STATE,
                EN_SQD_ASYNC_NOTIFY,
            ] {
                assert!(
                    !ok(cur, S::Reset, ty, STATE | b),
                    "{ty:?} {cur:?}->RESET {b:#x}"
                );
                assert!(
                    !ok(cur, S::Err, ty, STATE | b),
                    "{ty:?} {cur:?}->ERR {b:#x}"
                );
            }
            // The kernel has no RESET->ERR entry: a fresh QP goes to ERR via INIT.
            assert_eq!(
                ok(cur, S::Err, ty, STATE),
                cur != S::Reset,
                "{ty:?} {cur:?}->ERR"
            );
        }
    }
}

#[test]
fn sqe_recovers_to_rts_only_as_the_kernel_allows() {
    // UC and UD/GSI resume from SQE with their attributes.
    assert!(ok(S::Sqe, S::Rts, T::Uc, STATE | ACCESS_FLAGS));
    assert!(!ok(S::Sqe, S::Rts, T::Uc, STATE | ALT_PATH));
    assert!(!ok(S::Sqe, S::Rts, T::Uc, STATE | QKEY));
    assert!(ok(S::Sqe, S::Rts, T::Ud, STATE | QKEY));
    assert!(!ok(S::Sqe, S::Rts, T::Ud, STATE | ACCESS_FLAGS));
    // The MAD layer recovers QP1 this way (ib_mad_recv_done error path).
    assert!(ok(S::Sqe, S::Rts, T::Gsi, STATE | CUR_STATE));
    // RC never enters SQE; the kernel's row is valid but takes nothing.
    assert!(ok(S::Sqe, S::Rts, T::Rc, STATE));
    assert!(!ok(S::Sqe, S::Rts, T::Rc, STATE | CUR_STATE));
    assert!(!ok(S::Sqe, S::Rts, T::Rc, STATE | ACCESS_FLAGS));
}

#[test]
fn sqd_drains_and_modifies_attributes() {
    for ty in QpType::ALL {
        assert!(
            ok(S::Rts, S::Sqd, ty, STATE | EN_SQD_ASYNC_NOTIFY),
            "{ty:?}"
        );
        // The notify flag belongs to the RTS->SQD request only.
        assert!(
            !ok(S::Sqd, S::Sqd, ty, STATE | EN_SQD_ASYNC_NOTIFY),
            "{ty:?}"
        );
        assert!(
            !ok(S::Rts, S::Rts, ty, STATE | EN_SQD_ASYNC_NOTIFY),
            "{ty:?}"
        );
        assert!(ok(S::Sqd, S::Sqd, ty, STATE | PKEY_INDEX), "{ty:?}");
        assert!(ok(S::Sqd, S::Sqd, ty, 0), "{ty:?}");
    }
    // RC may even move port and path while drained, UC only the path.
    let rc = PORT | AV | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC | MAX_DEST_RD_ATOMIC;
    assert!(ok(
        S::Sqd,
        S::Sqd,
        T::Rc,
        STATE | rc | ALT_PATH | PATH_MIG_STATE
    ));
    assert!(ok(S::Sqd, S::Sqd, T::Uc, STATE | AV | ALT_PATH));
    assert!(!ok(S::Sqd, S::Sqd, T::Uc, STATE | PORT));
    assert!(!ok(S::Sqd, S::Sqd, T::Uc, STATE | TIMEOUT));
    assert!(!ok(S::Sqd, S::Sqd, T::Ud, STATE | PORT));
    assert!(!ok(S::Sqd, S::Sqd, T::Ud, STATE | AV));
    // Still no PSNs, MTU or destination QPN.
    for b in [SQ_PSN, RQ_PSN, PATH_MTU, DEST_QPN] {
        assert!(!ok(S::Sqd, S::Sqd, T::Rc, STATE | b), "{b:#x}");
    }
}

#[test]
fn qkey_belongs_to_ud_and_gsi() {
    // Everywhere UD/GSI may change the Q_Key, RC/UC may not.
    let qkey_ok = [
        (S::Init, S::Init),
        (S::Init, S::Rtr),
        (S::Rtr, S::Rts),
        (S::Rts, S::Rts),
        (S::Sqd, S::Rts),
        (S::Sqd, S::Sqd),
        (S::Sqe, S::Rts),
    ];
    for (cur, next) in qkey_ok {
        let req = if (cur, next) == (S::Rtr, S::Rts) {
            SQ_PSN
        } else {
            0
        };
        assert!(
            ok(cur, next, T::Ud, STATE | req | QKEY),
            "UD {cur:?}->{next:?}"
        );
        assert!(
            ok(cur, next, T::Gsi, STATE | req | QKEY),
            "GSI {cur:?}->{next:?}"
        );
        assert!(ok(cur, next, T::Ud, STATE | req), "UD {cur:?}->{next:?}");
    }
    for cur in QpState::ALL {
        for next in QpState::ALL {
            for ty in [T::Rc, T::Uc] {
                assert!(!ok(cur, next, ty, STATE | QKEY), "{ty:?} {cur:?}->{next:?}");
            }
        }
    }
    // The Q_Key is required when leaving RESET.
    assert!(!ok(S::Reset, S::Init, T::Ud, STATE | PKEY_INDEX | PORT));
    assert!(!ok(S::Reset, S::Init, T::Gsi, STATE | PKEY_INDEX));
    // No P_Key change once in RTS, for any type.
    assert!(!ok(S::Rts, S::Rts, T::Ud, STATE | PKEY_INDEX));
}

#[test]
fn gsi_has_no_port_attribute() {
    // QP1 is bound to its port at creation: PORT is neither required nor accepted.
    assert!(ok(S::Reset, S::Init, T::Gsi, STATE | PKEY_INDEX | QKEY));
    assert!(!ok(
        S::Reset,
        S::Init,
        T::Gsi,
        STATE | PKEY_INDEX | QKEY | PORT
    ));
    assert!(!ok(S::Init, S::Init, T::Gsi, STATE | PORT));
    assert!(ok(S::Init, S::Init, T::Ud, STATE | PORT));
    assert!(!ok(S::Sqd, S::Sqd, T::Gsi, STATE | PORT));
    // UD with the GSI mask lacks its port.
    assert!(!ok(S::Reset, S::Init, T::Ud, STATE | PKEY_INDEX | QKEY));
}

#[test]
fn cur_state_only_on_the_resume_transitions() {
    for ty in QpType::ALL {
        for cur in QpState::ALL {
            for next in QpState::ALL {
                let Some((req, _)) = spec(cur, next, ty) else {
                    continue;
                };
                let allowed = next == S::Rts
                    && matches!(cur, S::Rtr | S::Rts | S::Sqd | S::Sqe)
                    && !(ty == T::Rc && cur == S::Sqe);
                assert_eq!(
                    ok(cur, next, ty, STATE | req | CUR_STATE),
                    allowed,
                    "{ty:?} {cur:?}->{next:?}"
                );
            }
        }
    }
}

#[test]
fn rate_limit_is_exempt_on_every_legal_transition() {
    for ty in QpType::ALL {
        for cur in QpState::ALL {
            for next in QpState::ALL {
                let legal = spec(cur, next, ty).is_some();
                let req = spec(cur, next, ty).map_or(0, |(r, _)| r);
                assert_eq!(
                    ok(cur, next, ty, STATE | req | RATE_LIMIT),
                    legal,
                    "{ty:?} {cur:?}->{next:?}"
                );
            }
        }
    }
    // It does not stand in for a required attribute.
    assert!(!ok(S::Rtr, S::Rts, T::Ud, STATE | RATE_LIMIT));
}

#[test]
fn attribute_only_modify_is_cur_to_cur() {
    // No IB_QP_STATE: the caller checks cur -> cur.
    assert!(ok(S::Init, S::Init, T::Rc, ACCESS_FLAGS));
    assert!(ok(S::Rts, S::Rts, T::Rc, MIN_RNR_TIMER | ALT_PATH));
    assert!(ok(S::Rts, S::Rts, T::Ud, QKEY));
    assert!(ok(S::Sqd, S::Sqd, T::Rc, AV | TIMEOUT));
    // RESET and ERR accept an empty modify but no attribute.
    assert!(ok(S::Reset, S::Reset, T::Rc, 0));
    assert!(!ok(S::Reset, S::Reset, T::Rc, ACCESS_FLAGS));
    assert!(ok(S::Err, S::Err, T::Ud, 0));
    assert!(!ok(S::Err, S::Err, T::Ud, QKEY));
    // The kernel has no RTR->RTR or SQE->SQE row: attribute changes there fail.
    for ty in QpType::ALL {
        assert!(!ok(S::Rtr, S::Rtr, ty, 0), "{ty:?}");
        assert!(!ok(S::Rtr, S::Rtr, ty, ACCESS_FLAGS), "{ty:?}");
        assert!(!ok(S::Sqe, S::Sqe, ty, 0), "{ty:?}");
    }
}

fn iw(cur: S, next: S, mask: u32) -> bool {
    modify_is_ok_iwarp(cur, next, mask)
}

#[test]
fn iwarp_accepts_the_rdma_cm_masks() {
    // rdma_create_qp / cma_init_conn_qp and cma_modify_qp_rtr on an iw_cm device.
    let cm = STATE | ACCESS_FLAGS | PORT;
    assert!(iw(S::Reset, S::Init, cm));
    assert!(iw(S::Init, S::Init, cm));
    assert!(iw(S::Init, S::Rtr, cm));
    // librdmacm's ucma_modify_qp_rts on accept: PORT only, no STATE, QP in RTR.
    assert!(iw(S::Rtr, S::Rtr, PORT));
    assert!(iw(S::Rtr, S::Rtr, 0));
    // iw_cm_disconnect / ucma_shutdown and error paths: bare STATE.
    assert!(iw(S::Rts, S::Sqd, STATE));
    for cur in [S::Init, S::Rtr, S::Rts, S::Sqd, S::Err] {
        assert!(iw(cur, S::Err, STATE), "{cur:?}");
    }
    // Those masks fail the IBTA rules, which is why iWARP needs its own.
    assert!(!ok(S::Reset, S::Init, T::Rc, cm));
    assert!(!ok(S::Init, S::Rtr, T::Rc, cm));
    assert!(!ok(S::Rtr, S::Rtr, T::Rc, PORT));
}

#[test]
fn iwarp_requires_nothing_but_keeps_the_rc_transitions() {
    for cur in QpState::ALL {
        for next in QpState::ALL {
            let rc = spec(cur, next, T::Rc);
            let legal = match (cur, next) {
                (S::Sqe, S::Rts) => false,
                (S::Rtr, S::Rtr) => true,
                _ => rc.is_some(),
            };
            assert_eq!(iw(cur, next, STATE), legal, "{cur:?}->{next:?}");
            assert_eq!(iw(cur, next, 0), legal, "{cur:?}->{next:?}");
            if !legal {
                assert!(!iw(cur, next, u32::MAX), "{cur:?}->{next:?}");
                continue;
            }
            let mut allowed = rc.map_or(0, |(r, o)| r | o);
            if matches!((cur, next), (S::Init, S::Rtr) | (S::Rtr, S::Rtr)) {
                allowed |= PORT;
            }
            assert!(iw(cur, next, STATE | allowed), "{cur:?}->{next:?}");
            for b in bits() {
                let expect = (allowed | STATE) & b != 0;
                assert_eq!(iw(cur, next, STATE | b), expect, "{cur:?}->{next:?} {b:#x}");
            }
        }
    }
}

#[test]
fn iwarp_still_rejects_what_rc_rejects() {
    // Illegal transitions stay illegal.
    for (cur, next) in [
        (S::Reset, S::Rts),
        (S::Reset, S::Rtr),
        (S::Reset, S::Err),
        (S::Init, S::Rts),
        (S::Rtr, S::Sqd),
        (S::Err, S::Rts),
    ] {
        assert!(!iw(cur, next, STATE), "{cur:?}->{next:?}");
    }
    // Terminate (SQE) does not resume.
    assert!(!iw(S::Sqe, S::Rts, STATE));
    // Datagram and unknown bits.
    assert!(!iw(S::Reset, S::Init, STATE | ACCESS_FLAGS | QKEY));
    assert!(!iw(S::Rts, S::Rts, STATE | CAP));
    assert!(!iw(S::Rts, S::Rts, STATE | RATE_LIMIT));
    assert!(!iw(S::Rtr, S::Rtr, ACCESS_FLAGS));
    assert!(!iw(S::Init, S::Rtr, STATE | QKEY));
    // PORT is accepted where the CM sends it, not after RTS.
    assert!(!iw(S::Rts, S::Rts, PORT));
    // CUR_STATE as for RC.
    assert!(iw(S::Rts, S::Rts, STATE | CUR_STATE));
    assert!(iw(S::Rtr, S::Rts, STATE | CUR_STATE));
    assert!(!iw(S::Init, S::Init, STATE | CUR_STATE));
    assert!(!iw(S::Rtr, S::Rtr, CUR_STATE));
    assert!(!iw(S::Rts, S::Sqd, STATE | CUR_STATE));
    // The IB-only attributes RC lists are tolerated, not required.
    assert!(iw(
        S::Init,
        S::Rtr,
        STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN
    ));
    assert!(iw(S::Rtr, S::Rts, STATE | SQ_PSN | MAX_QP_RD_ATOMIC));
    assert!(iw(S::Rtr, S::Rts, STATE));
}

#[test]
fn iwarp_accepts_everything_rc_accepts_but_sqe_resume_and_rate_limit() {
    for cur in QpState::ALL {
        for next in QpState::ALL {
            let Some((req, opt)) = spec(cur, next, T::Rc) else {
                continue;
            };
            let mask = STATE | req | opt;
            assert!(ok(cur, next, T::Rc, mask));
            let expect = (cur, next) != (S::Sqe, S::Rts);
            assert_eq!(iw(cur, next, mask), expect, "{cur:?}->{next:?}");
            assert!(!iw(cur, next, mask | RATE_LIMIT), "{cur:?}->{next:?}");
        }
    }
}
