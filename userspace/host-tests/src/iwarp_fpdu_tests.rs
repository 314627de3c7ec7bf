//! The FPDU and its DDP and RDMAP headers
//! (drivers/softrnic/core/iwarp/fpdu.rs): the control bytes siw puts on
//! the wire, round trips of every message, lengths and pad, the CRC's byte
//! order, and refused headers with the TERMINATE cause each gets.

use crate::crc::crc32c;
use crate::iwarp::fpdu::*;

fn untagged(qn: u32, msn: u32, mo: u32) -> Placement {
    Placement::Untagged {
        qn,
        msn,
        mo,
        inv_stag: 0,
    }
}

/// One header of each message type.
fn samples() -> Vec<Header> {
    let tagged = Placement::Tagged {
        stag: 0x1234_5678,
        to: 0x0102_0304_0506_0708,
    };
    let mut v = vec![
        Header {
            opcode: Opcode::Write,
            last: false,
            place: tagged,
            rdmap: RdmapHeader::None,
        },
        Header {
            opcode: Opcode::ReadResponse,
            last: true,
            place: tagged,
            rdmap: RdmapHeader::None,
        },
        Header {
            opcode: Opcode::ReadRequest,
            last: true,
            place: untagged(1, 7, 0),
            rdmap: RdmapHeader::ReadRequest(ReadRequest {
                sink_stag: 1,
                sink_to: 2,
                len: 3,
                src_stag: 4,
                src_to: 5,
            }),
        },
        Header {
            opcode: Opcode::Terminate,
            last: true,
            place: untagged(2, 1, 0),
            rdmap: RdmapHeader::Terminate(Terminate {
                cause: cause::DDP_MSN_RANGE,
                has_len: true,
                has_ddp: true,
                has_rdmap: false,
            }),
        },
        Header {
            opcode: Opcode::AtomicRequest,
            last: true,
            place: untagged(1, 9, 0),
            rdmap: RdmapHeader::AtomicRequest(AtomicRequest {
                op: AtomicOp::CompareSwap,
                req_id: 11,
                stag: 12,
                to: 0x1000,
                add_swap: u64::MAX,
                add_swap_mask: u64::MAX,
                compare: 5,
                compare_mask: u64::MAX,
            }),
        },
        Header {
            opcode: Opcode::AtomicResponse,
            last: true,
            place: untagged(3, 4, 0),
            rdmap: RdmapHeader::AtomicResponse(AtomicResponse {
                req_id: 11,
                orig: 0xDEAD_BEEF,
            }),
        },
        Header {
            opcode: Opcode::ImmediateSolicited,
            last: true,
            place: untagged(0, 3, 0),
            rdmap: RdmapHeader::Immediate([1, 2, 3, 4, 5, 6, 7, 8]),
        },
    ];
    for opcode in [
        Opcode::Send,
        Opcode::SendInvalidate,
        Opcode::SendSolicited,
        Opcode::SendSolicitedInvalidate,
    ] {
        v.push(Header {
            opcode,
            last: false,
            place: Placement::Untagged {
                qn: 0,
                msn: 0xFFFF_FFFF,
                mo: 4096,
                inv_stag: if opcode.invalidates() { 0xABCD } else { 0 },
            },
            rdmap: RdmapHeader::None,
        });
    }
    v
}

#[test]
fn every_message_round_trips() {
    for h in samples() {
        let payload = if h.opcode.rdmap_header_len() > 0 && h.opcode != Opcode::Terminate {
            0
        } else {
            37
        };
        let mut buf = [0u8; MAX_HEADER];
        let n = build_header(&mut buf, &h, payload).unwrap();
        let p = parse_header(&buf[..n]).unwrap();
        assert_eq!(p.hdr, h, "{:?}", h.opcode);
        assert_eq!(p.header_len, n);
        assert_eq!(p.payload_len, payload);
        assert_eq!(p.ulpdu_len, n - LEN_FIELD + payload);
        // Fewer bytes than the headers: read more.
        assert_eq!(parse_header(&buf[..n - 1]), Err(HeaderError::Truncated));
    }
}

#[test]
fn control_bytes_match_what_siw_sends() {
    // DDP control and RDMAP control of a message's last segment.
    let want = [
        (Opcode::Write, [0xC1, 0x40]),
        (Opcode::ReadRequest, [0x41, 0x41]),
        (Opcode::ReadResponse, [0xC1, 0x42]),
        (Opcode::Send, [0x41, 0x43]),
        (Opcode::SendInvalidate, [0x41, 0x44]),
        (Opcode::SendSolicited, [0x41, 0x45]),
        (Opcode::SendSolicitedInvalidate, [0x41, 0x46]),
        (Opcode::Terminate, [0x41, 0x47]),
    ];
    for (op, bytes) in want {
        let h = samples()
            .into_iter()
            .find(|h| h.opcode == op)
            .map(|h| Header { last: true, ..h })
            .unwrap();
        let mut buf = [0u8; MAX_HEADER];
        build_header(&mut buf, &h, 0).unwrap();
        assert_eq!(buf[2..4], bytes, "{op:?}");
    }
    // A middle segment clears L.
    let mut buf = [0u8; MAX_HEADER];
    build_header(&mut buf, &samples()[0], 100).unwrap();
    assert_eq!(buf[2..4], [0x81, 0x40]);
}

#[test]
fn lengths_pad_and_crc() {
    // A zero-length SEND: 2 + 18 bytes, no pad, 24 with the CRC.
    assert_eq!((pad_len(18), fpdu_len(18)), (0, 24));
    // A READ request: ULPDU 46, FPDU 52.
    assert_eq!(fpdu_len(UNTAGGED_LEN + READ_REQUEST_LEN), 52);
    // One payload byte after a tagged header: 17 bytes, 3 of pad.
    assert_eq!((pad_len(15), fpdu_len(15)), (3, 24));
    for len in 0..64 {
        assert_eq!((LEN_FIELD + len + pad_len(len)) % 4, 0);
        assert!(pad_len(len) < 4);
    }
    // The CRC goes out least significant byte first (RFC 3720's vector).
    assert_eq!(crc_bytes(crc32c(&[0u8; 32])), [0xAA, 0x36, 0x91, 0x8A]);
}

/// A payload fed to the CRC in pieces (as it lies in the transmit pages)
/// gives the trailer of the whole payload, pad and CRC alike.
#[test]
fn a_trailer_over_pieces_is_the_trailer_of_the_whole() {
    use crate::crc::{crc32c_update, Update};
    let step = Some(crc32c_update as Update);
    let mut hdr = [0u8; MAX_HEADER];
    let n = build_header(&mut hdr, &samples()[0], 4099).unwrap();
    let payload: Vec<u8> = (0..4099u32).map(|i| (i * 7 + 3) as u8).collect();
    for crc in [None, step] {
        let whole = Trailer::new(&hdr[..n], &[&payload], crc);
        for cuts in [
            vec![0, 4099],
            vec![0, 1, 4096, 4099],
            vec![0, 100, 101, 2000, 4099],
        ] {
            let t = Trailer::over(&hdr[..n], payload.len(), crc, |c| {
                for w in cuts.windows(2) {
                    c.update(&payload[w[0]..w[1]]);
                }
            });
            assert_eq!(t.as_bytes(), whole.as_bytes(), "cuts {cuts:?}");
        }
        assert_eq!(whole.as_bytes().len(), pad_len(n - LEN_FIELD + 4099) + 4);
    }
}

#[test]
fn refused_headers_name_their_terminate_cause() {
    let send = Header {
        opcode: Opcode::Send,
        last: true,
        place: untagged(0, 1, 0),
        rdmap: RdmapHeader::None,
    };
    let mut good = [0u8; MAX_HEADER];
    let n = build_header(&mut good, &send, 8).unwrap();
    let good = &good[..n];
    let with = |at: usize, v: u8| {
        let mut b = good.to_vec();
        b[at] = v;
        parse_header(&b)
    };
    assert_eq!(
        with(2, 0x42),
        Err(HeaderError::DdpVersion { tagged: false })
    );
    assert_eq!(
        HeaderError::DdpVersion { tagged: false }.cause(),
        cause::DDP_UNTAGGED_BAD_VERSION
    );
    assert_eq!(with(3, 0x83), Err(HeaderError::RdmapVersion));
    assert_eq!(with(3, 0x4C), Err(HeaderError::Opcode(12)));
    assert_eq!(HeaderError::Opcode(12).cause(), cause::UNEXPECTED_OPCODE);
    // The tagged bit on an untagged message.
    assert_eq!(with(2, 0xC1), Err(HeaderError::Opcode(3)));
    // A SEND on the READ request queue.
    let mut b = good.to_vec();
    b[8..12].copy_from_slice(&1u32.to_be_bytes());
    assert_eq!(parse_header(&b), Err(HeaderError::Queue(1)));
    assert_eq!(HeaderError::Queue(1).cause(), cause::DDP_BAD_QN);
    // ULPDU_Length shorter than the headers.
    let mut b = good.to_vec();
    b[0..2].copy_from_slice(&17u16.to_be_bytes());
    assert_eq!(parse_header(&b), Err(HeaderError::Length));
    // A READ request with payload, or in two segments.
    let rr = samples()[2];
    let mut buf = [0u8; MAX_HEADER];
    assert_eq!(build_header(&mut buf, &rr, 4), Err(BuildError::Mismatch));
    let n = build_header(&mut buf, &rr, 0).unwrap();
    let mut b = buf[..n].to_vec();
    b[0..2].copy_from_slice(&50u16.to_be_bytes());
    assert_eq!(parse_header(&b), Err(HeaderError::Length));
    let mut b = buf[..n].to_vec();
    b[2] &= !0x40;
    assert_eq!(parse_header(&b), Err(HeaderError::Length));
    // An atomic operation RFC 7306 does not define.
    let at = samples()[4];
    let n = build_header(&mut buf, &at, 0).unwrap();
    let mut b = buf[..n].to_vec();
    b[2 + UNTAGGED_LEN + 3] = 7;
    assert_eq!(parse_header(&b), Err(HeaderError::AtomicOp(7)));
    // AOpCode 1 is reserved (RFC 7306 figure 5: there is no plain swap).
    b[2 + UNTAGGED_LEN + 3] = 1;
    assert_eq!(parse_header(&b), Err(HeaderError::AtomicOp(1)));
    // Placement that does not match the opcode will not build.
    let bad = Header {
        place: untagged(0, 1, 0),
        ..samples()[0]
    };
    assert_eq!(build_header(&mut buf, &bad, 0), Err(BuildError::Mismatch));
    // More than ULPDU_Length can say.
    assert_eq!(
        build_header(&mut buf, &samples()[0], 70_000),
        Err(BuildError::Mismatch)
    );
}

#[test]
fn random_bytes_never_panic() {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut buf = [0u8; MAX_HEADER + 8];
    let mut parsed = 0;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % buf.len() as u64) as usize;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (x >> (i % 8 * 8)) as u8 ^ i as u8;
        }
        // Valid versions half the time, so the parser gets past them.
        if x & 1 == 0 {
            buf[2] = (buf[2] & 0xC0) | 1;
            buf[3] = 0x40 | (buf[3] & 0x0F);
        }
        if let Ok(p) = parse_header(&buf[..len]) {
            assert!(p.header_len <= len && p.header_len - LEN_FIELD + p.payload_len == p.ulpdu_len);
            parsed += 1;
        }
    }
    assert!(parsed > 0);
}

#[test]
fn messages_are_cut_into_aligned_segments() {
    // siw's figures for a 1448-byte MSS (rounded to 1448): 1424 bytes of
    // SEND payload a segment, 1428 of WRITE payload.
    assert_eq!(max_payload(Opcode::Send, 1448), 1424);
    assert_eq!(max_payload(Opcode::Write, 1448), 1428);
    assert_eq!(max_payload(Opcode::Write, 10), 4);
    let first = Header {
        opcode: Opcode::Write,
        last: true,
        place: Placement::Tagged { stag: 5, to: 1000 },
        rdmap: RdmapHeader::None,
    };
    let segs: Vec<Segment> = Segments::new(first, 3000, 1448).collect();
    assert_eq!(
        segs.iter()
            .map(|s| (s.offset, s.len, s.hdr.last))
            .collect::<Vec<_>>(),
        [(0, 1428, false), (1428, 1428, false), (2856, 144, true)]
    );
    assert_eq!(segs[2].hdr.place, Placement::Tagged { stag: 5, to: 3856 });
    for s in &segs[..2] {
        // No pad inside a message.
        assert_eq!(pad_len(TAGGED_LEN + s.len as usize), 0);
    }
    let send = Header {
        opcode: Opcode::Send,
        last: true,
        place: Placement::Untagged {
            qn: 0,
            msn: 4,
            mo: 0,
            inv_stag: 0,
        },
        rdmap: RdmapHeader::None,
    };
    let segs: Vec<Segment> = Segments::new(send, 0, 1448).collect();
    assert_eq!(segs.len(), 1);
    assert!(segs[0].hdr.last && segs[0].len == 0);
    let segs: Vec<Segment> = Segments::new(send, 2848, 1448).collect();
    assert_eq!(segs.len(), 2);
    assert!(matches!(
        segs[1].hdr.place,
        Placement::Untagged {
            msn: 4,
            mo: 1424,
            ..
        }
    ));
}

/// RFC 7306 section 5.1's operations: the verbs' plain ones, and the
/// masked forms (an add mask bit is a field boundary that stops a carry;
/// compare and swap masks choose the bits).
#[test]
fn atomics_apply_as_rfc_7306_defines_them() {
    let fa = |orig: u64, add: u64, mask: u64| {
        AtomicRequest {
            add_swap_mask: mask,
            ..AtomicRequest::plain(AtomicOp::FetchAdd, 1, 2, 0, add, 0)
        }
        .apply(orig)
    };
    // Plain: a 64-bit add that wraps; the request as section 5.2.1 wants.
    let p = AtomicRequest::plain(AtomicOp::FetchAdd, 1, 2, 8, 5, 99);
    assert_eq!(
        (p.add_swap_mask, p.compare, p.compare_mask),
        (0, 0, u64::MAX)
    );
    assert_eq!(p.apply(10), 15);
    assert_eq!(fa(u64::MAX, 2, 0), 1);
    assert_eq!(fa(0x0000_0000_FFFF_FFFF, 1, 0), 0x0000_0001_0000_0000);
    // Two 32-bit fields: the low field's carry stays in it.
    let two = 0x8000_0000_8000_0000;
    assert_eq!(
        fa(0x0000_0005_FFFF_FFFF, 0x0000_0001_0000_0001, two),
        0x0000_0006_0000_0000
    );
    // Every bit its own field: addition without carries (XOR).
    assert_eq!(fa(0b1011, 0b0110, u64::MAX), 0b1101);
    // Compare-and-swap, plain: swaps on a match only.
    let cs = AtomicRequest::plain(AtomicOp::CompareSwap, 1, 2, 0, 0xAAAA, 7);
    assert_eq!(cs.apply(7), 0xAAAA);
    assert_eq!(cs.apply(8), 8);
    // Masked: compare the low byte, swap the high byte.
    let m = AtomicRequest {
        compare_mask: 0xFF,
        add_swap_mask: 0xFF00,
        ..AtomicRequest::plain(AtomicOp::CompareSwap, 1, 2, 0, 0x1234, 0x77)
    };
    assert_eq!(m.apply(0x5577), 0x1277);
    assert_eq!(m.apply(0x5578), 0x5578);
    // A swap: compare mask zero always matches.
    let sw = AtomicRequest {
        compare_mask: 0,
        ..AtomicRequest::plain(AtomicOp::CompareSwap, 1, 2, 0, 42, 0)
    };
    assert_eq!(sw.apply(9), 42);
}
