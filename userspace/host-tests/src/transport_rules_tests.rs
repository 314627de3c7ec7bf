//! The transport rules of `core/transport_rules.rs`: segmentation and
//! opcodes, the responder's opcode-sequence check, PSN classification
//! across the 24-bit wrap, timers.

use proptest::prelude::*;

use crate::psn::Psn;
use crate::roce_wire::Opcode;
use crate::transport_rules::*;

const OPS: [MsgOp; 8] = [
    MsgOp::Send,
    MsgOp::SendImm,
    MsgOp::SendInv,
    MsgOp::Write,
    MsgOp::WriteImm,
    MsgOp::Read,
    MsgOp::CmpSwap,
    MsgOp::FetchAdd,
];

#[test]
fn mtu_codes() {
    assert_eq!(mtu_bytes(1), Some(256));
    assert_eq!(mtu_bytes(3), Some(1024));
    assert_eq!(mtu_bytes(5), Some(4096));
    assert_eq!(mtu_bytes(0), None);
    assert_eq!(mtu_bytes(6), None);
}

#[test]
fn packet_counts() {
    assert_eq!(packets(0, 1024), 1);
    assert_eq!(packets(1, 1024), 1);
    assert_eq!(packets(1024, 1024), 1);
    assert_eq!(packets(1025, 1024), 2);
    assert_eq!(packets(65536, 1024), 64);
    assert_eq!(packets(u32::MAX, 256), 16_777_216);
}

#[test]
fn services_carry_only_their_operations() {
    for op in OPS {
        let rc = request_opcode(Service::Rc, op, 0, 1);
        assert!(rc.is_some(), "RC carries {op:?}");
        let uc = request_opcode(Service::Uc, op, 0, 1);
        assert_eq!(
            uc.is_some(),
            matches!(
                op,
                MsgOp::Send | MsgOp::SendImm | MsgOp::Write | MsgOp::WriteImm
            ),
            "UC and {op:?}"
        );
        let ud = request_opcode(Service::Ud, op, 0, 1);
        assert_eq!(
            ud.is_some(),
            matches!(op, MsgOp::Send | MsgOp::SendImm),
            "UD and {op:?}"
        );
    }
    assert_eq!(
        request_opcode(Service::Ud, MsgOp::SendImm, 0, 1),
        Some(Opcode::UdSendOnlyImm)
    );
    assert_eq!(
        request_opcode(Service::Rc, MsgOp::Read, 0, 9),
        Some(Opcode::RcRdmaReadRequest)
    );
}

#[test]
fn read_responses() {
    assert_eq!(read_response_opcode(0, 1), Opcode::RcRdmaReadResponseOnly);
    assert_eq!(read_response_opcode(0, 3), Opcode::RcRdmaReadResponseFirst);
    assert_eq!(read_response_opcode(1, 3), Opcode::RcRdmaReadResponseMiddle);
    assert_eq!(read_response_opcode(2, 3), Opcode::RcRdmaReadResponseLast);
    for op in [
        Opcode::RcRdmaReadResponseOnly,
        Opcode::RcAck,
        Opcode::RcAtomicAck,
    ] {
        assert_eq!(request_kind(op), None, "{op:?} is a response");
    }
}

#[test]
fn sequence_errors() {
    use InMessage as M;
    // MIDDLE or LAST with no message open.
    assert!(!sequence_ok(M::None, MsgOp::Send, Place::Middle));
    assert!(!sequence_ok(M::None, MsgOp::Write, Place::Last));
    // A new message while one is open.
    assert!(!sequence_ok(M::Send, MsgOp::Send, Place::First));
    assert!(!sequence_ok(M::Write, MsgOp::Read, Place::Only));
    // The wrong kind of continuation.
    assert!(!sequence_ok(M::Send, MsgOp::Write, Place::Middle));
    assert!(!sequence_ok(M::Write, MsgOp::SendImm, Place::Last));
    // The right ones.
    assert!(sequence_ok(M::Send, MsgOp::SendInv, Place::Last));
    assert!(sequence_ok(M::Write, MsgOp::WriteImm, Place::Last));
    assert!(sequence_ok(M::None, MsgOp::CmpSwap, Place::Only));
}

#[test]
fn duplicates_are_acked_where_asked_or_at_message_end() {
    // A requester resending a message hears nothing until it has resent
    // the packet that asks for an ACK or ends the message.
    assert!(!ack_duplicate(false, Place::First));
    assert!(!ack_duplicate(false, Place::Middle));
    assert!(ack_duplicate(true, Place::First));
    assert!(ack_duplicate(true, Place::Middle));
    assert!(ack_duplicate(false, Place::Last));
    assert!(ack_duplicate(false, Place::Only));
}

#[test]
fn payload_lengths() {
    assert!(payload_len_ok(Place::First, 1024, 1024));
    assert!(!payload_len_ok(Place::First, 1000, 1024));
    assert!(!payload_len_ok(Place::Middle, 1025, 1024));
    assert!(!payload_len_ok(Place::Last, 0, 1024));
    assert!(payload_len_ok(Place::Last, 1, 1024));
    assert!(payload_len_ok(Place::Only, 0, 1024));
    assert!(!payload_len_ok(Place::Only, 1025, 1024));
}

#[test]
fn timers() {
    assert_eq!(ack_timeout_us(0), None);
    // 4.096 us * 2^14 = 67.1 ms (rdma_cm's default).
    assert_eq!(ack_timeout_us(14), Some(67_108));
    assert_eq!(ack_timeout_us(31), ack_timeout_us(40));
}

proptest! {
    /// Every message, cut at every MTU: the opcodes the requester sends
    /// are FIRST/MIDDLE.../LAST or ONLY of its operation, each is accepted
    /// by the responder's sequence check in turn, the message closes at the
    /// end, and the payloads add up to the length, full MTUs but the last.
    #[test]
    fn messages_segment_and_sequence(
        op in 0usize..5, len in 0u32..20_000, code in 1u32..=5, uc in any::<bool>()
    ) {
        let op = OPS[op];
        let svc = if uc && op != MsgOp::SendInv { Service::Uc } else { Service::Rc };
        let mtu = mtu_bytes(code).unwrap();
        let n = packets(len, mtu);
        let mut state = InMessage::None;
        let mut total = 0u32;
        for i in 0..n {
            let opcode = request_opcode(svc, op, i, n).unwrap();
            let (kind, place) = request_kind(opcode).unwrap();
            let want_kind = match (op, place.ends()) {
                (MsgOp::SendImm | MsgOp::SendInv | MsgOp::WriteImm, false) => {
                    if op == MsgOp::WriteImm { MsgOp::Write } else { MsgOp::Send }
                }
                _ => op,
            };
            prop_assert_eq!(kind, want_kind);
            prop_assert_eq!(place.starts(), i == 0);
            prop_assert_eq!(place.ends(), i + 1 == n);
            prop_assert!(sequence_ok(state, kind, place));
            state = after_packet(kind, place);
            let chunk = core::cmp::min(mtu, len - total);
            prop_assert!(payload_len_ok(place, chunk, mtu) || (len == 0 && place == Place::Only));
            total += chunk;
        }
        prop_assert_eq!(state, InMessage::None);
        prop_assert_eq!(total, len);
    }

    /// PSN classification is a pure function of the 24-bit distance: the
    /// expected PSN, up to 2^23 behind (duplicates) and ahead, whatever the
    /// base, across the wrap.
    #[test]
    fn psn_checks_wrap(base in 0u32..(1 << 24), d in 1i32..(1 << 23)) {
        let e = Psn::new(base);
        prop_assert_eq!(check_psn(e, e), PsnCheck::Expected);
        prop_assert_eq!(check_psn(e.offset(-d), e), PsnCheck::Duplicate);
        prop_assert_eq!(check_psn(e.offset(d), e), PsnCheck::Ahead);
    }
}

/// A bounded fuzz run of the responder's rules: random request streams
/// (every opcode byte, PSNs around the expected one, payload lengths around
/// the MTU) go through the PSN check, the opcode-sequence check and the
/// length check as the responder applies them.  Whatever they accept must
/// add up to well-formed messages: FIRST MIDDLE* LAST or a single ONLY, one
/// kind throughout, every packet but the last exactly one MTU.  Nothing may
/// panic or overflow (host tests run with overflow checks).
#[test]
fn fuzz_responder_rules_accept_only_whole_messages() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let family = |op: MsgOp| match op {
        MsgOp::Send | MsgOp::SendImm | MsgOp::SendInv => 0,
        MsgOp::Write | MsgOp::WriteImm => 1,
        _ => 2,
    };
    let (mut completed, mut naks) = (0u32, 0u32);
    for round in 0..2_000u32 {
        let mtu = [256, 512, 1024, 2048, 4096][rnd(5) as usize];
        let mut expected = Psn::new(rnd(1 << 24) as u32);
        let mut cur = InMessage::None;
        let mut msg: Vec<(MsgOp, Place, u32)> = Vec::new();
        for _ in 0..200 {
            let Some(op) = Opcode::from_u8(rnd(256) as u8) else {
                continue;
            };
            let psn = match rnd(4) {
                0 => Psn::new(rnd(1 << 24) as u32),
                1 => expected.offset(rnd(7) as i32 - 3),
                _ => expected,
            };
            let len = match rnd(4) {
                0 => rnd(u64::from(mtu) * 2) as u32,
                1 => u32::MAX - rnd(3) as u32,
                _ => mtu,
            };
            let Some((mop, place)) = request_kind(op) else {
                continue; // a response: not the responder's business
            };
            if check_psn(psn, expected) != PsnCheck::Expected {
                continue;
            }
            if !sequence_ok(cur, mop, place) || !payload_len_ok(place, len, mtu) {
                // NAK: the QP goes to error; the model starts afresh.
                naks += 1;
                cur = InMessage::None;
                msg.clear();
                continue;
            }
            msg.push((mop, place, len));
            cur = after_packet(mop, place);
            expected = expected.next();
            if !place.ends() {
                continue;
            }
            let (first, last) = (msg[0], msg[msg.len() - 1]);
            assert!(
                first.1.starts(),
                "round {round}: message starts with {:?}",
                first.1
            );
            assert_eq!(
                msg.len() == 1,
                first.1 == Place::Only,
                "round {round}: {msg:?}"
            );
            let inner = msg.len().saturating_sub(2);
            assert!(msg.iter().skip(1).take(inner).all(|p| p.1 == Place::Middle));
            assert!(
                msg.iter().all(|p| family(p.0) == family(first.0)),
                "mixed kinds: {msg:?}"
            );
            assert!(
                msg[..msg.len() - 1].iter().all(|p| p.2 == mtu),
                "short inner packet: {msg:?}"
            );
            assert!(last.2 <= mtu);
            completed += 1;
            msg.clear();
        }
    }
    // The run exercised both outcomes.
    assert!(
        completed > 1000 && naks > 1000,
        "completed {completed}, naks {naks}"
    );
}

#[test]
fn sequence_nak_after_rnr_nak_is_its_echo() {
    let p = Psn::new(7);
    // A loss: go back, and pay for it unless it acknowledged something.
    assert_eq!(seq_nak(p, false, None), SeqNak::Rewind { charge: true });
    assert_eq!(seq_nak(p, true, None), SeqNak::Rewind { charge: false });
    // The packets behind an RNR NAKed one, NAKed as out of sequence: the
    // RNR retry already goes back there, and retry_cnt is not charged.
    assert_eq!(seq_nak(p, false, Some(p)), SeqNak::Ignore);
    // Another PSN, or progress since, is a loss of its own.
    assert_eq!(
        seq_nak(p, false, Some(Psn::new(6))),
        SeqNak::Rewind { charge: true }
    );
    assert_eq!(seq_nak(p, true, Some(p)), SeqNak::Rewind { charge: false });
}
