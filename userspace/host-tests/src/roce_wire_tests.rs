//! Tests of `core/roce_wire.rs`: the opcode table restated from IBTA vol. 1
//! Table 38, hand-written packets checked byte by byte against the header
//! layouts of §9.2 and §9.3, build → parse round trips for every opcode,
//! every rejection, property tests and a bounded fuzz run.

use crate::psn::Psn;
use crate::roce_wire::*;
use proptest::prelude::*;

/// A payload's bytes in one vector.
fn bytes(p: Payload<'_>) -> Vec<u8> {
    p.pieces().concat()
}

/// The opcode table restated independently of the module: the extension
/// headers in wire order and whether a payload follows, for every byte.
fn spec(value: u8) -> Option<(Vec<Ext>, bool)> {
    use Ext::*;
    // The SEND and RDMA WRITE opcodes RC and UC share (low five bits).
    let send_write = |op: u8| -> Option<(Vec<Ext>, bool)> {
        Some(match op {
            0x00 | 0x01 | 0x02 | 0x04 => (vec![], true),
            0x03 | 0x05 => (vec![ImmDt], true),
            0x06 | 0x0a => (vec![Reth], true),
            0x07 | 0x08 => (vec![], true),
            0x09 => (vec![ImmDt], true),
            0x0b => (vec![Reth, ImmDt], true),
            _ => return None,
        })
    };
    let op = value & 0x1f;
    match value >> 5 {
        0 => match op {
            0x0c => Some((vec![Reth], false)),
            0x0d | 0x0f | 0x10 => Some((vec![Aeth], true)),
            0x0e => Some((vec![], true)),
            0x11 => Some((vec![Aeth], false)),
            0x12 => Some((vec![Aeth, AtomicAckEth], false)),
            0x13 | 0x14 => Some((vec![AtomicEth], false)),
            0x16 | 0x17 => Some((vec![Ieth], true)),
            _ => send_write(op),
        },
        1 => send_write(op),
        3 => match op {
            0x04 => Some((vec![Deth], true)),
            0x05 => Some((vec![Deth, ImmDt], true)),
            _ => None,
        },
        _ => None,
    }
}

fn ext_len(ext: Ext) -> usize {
    match ext {
        Ext::Deth => 8,
        Ext::Reth => 16,
        Ext::AtomicEth => 28,
        Ext::Aeth => 4,
        Ext::AtomicAckEth => 8,
        Ext::ImmDt => 4,
        Ext::Ieth => 4,
    }
}

#[test]
fn opcode_table_matches_ibta() {
    let mut known = 0;
    for value in 0..=255u8 {
        let op = Opcode::from_u8(value);
        match spec(value) {
            None => assert_eq!(op, None, "opcode {value:#04x}"),
            Some((exts, payload)) => {
                known += 1;
                let op = op.unwrap_or_else(|| panic!("opcode {value:#04x} missing"));
                assert_eq!(op as u8, value);
                let layout = op.layout();
                assert_eq!(layout.exts, &exts[..], "{op:?}");
                assert_eq!(layout.payload, payload, "{op:?}");
                let len = 12 + exts.iter().map(|&e| ext_len(e)).sum::<usize>();
                assert_eq!(layout.header_len(), len, "{op:?}");
                assert!(len <= MAX_HEADER_LEN);
                let transport = match value >> 5 {
                    0 => Transport::Rc,
                    1 => Transport::Uc,
                    _ => Transport::Ud,
                };
                assert_eq!(op.transport(), transport);
                // Combined extension headers follow one global order.
                let order: Vec<usize> = exts
                    .iter()
                    .map(|e| Ext::ALL.iter().position(|a| a == e).unwrap())
                    .collect();
                assert!(order.windows(2).all(|w| w[0] < w[1]), "{op:?}");
            }
        }
    }
    assert_eq!(known, 37);
    assert_eq!(Opcode::ALL.len(), 37);
    assert!(Opcode::ALL.windows(2).all(|w| (w[0] as u8) < (w[1] as u8)));
    for (i, ext) in Ext::ALL.iter().enumerate() {
        assert_eq!(ext.len(), ext_len(*ext));
        assert_eq!(Ext::ALL.iter().position(|e| e == ext), Some(i));
    }
    // The values named in the brief and in the kernel's ib_pack.h.
    assert_eq!(Opcode::RcSendFirst as u8, 0x00);
    assert_eq!(Opcode::RcRdmaReadRequest as u8, 0x0c);
    assert_eq!(Opcode::RcAck as u8, 0x11);
    assert_eq!(Opcode::RcAtomicAck as u8, 0x12);
    assert_eq!(Opcode::RcCompareSwap as u8, 0x13);
    assert_eq!(Opcode::RcFetchAdd as u8, 0x14);
    assert_eq!(Opcode::RcSendLastInv as u8, 0x16);
    assert_eq!(Opcode::RcSendOnlyInv as u8, 0x17);
    assert_eq!(Opcode::UcSendFirst as u8, 0x20);
    assert_eq!(Opcode::UcRdmaWriteOnlyImm as u8, 0x2b);
    assert_eq!(Opcode::UdSendOnly as u8, 0x64);
    assert_eq!(Opcode::UdSendOnlyImm as u8, 0x65);
}

fn bth(opcode: Opcode) -> Bth {
    Bth {
        opcode,
        solicited: false,
        mig_req: false,
        pad_cnt: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp: 0,
        ack_req: false,
        psn: Psn::new(0),
    }
}

/// Concatenates byte groups into one packet.
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Builds the headers of `hdr` and checks they are exactly `expect`.
fn assert_builds(hdr: &Headers, expect: &[u8]) {
    let mut buf = [0xaau8; 64];
    assert_eq!(build(&mut buf, hdr), Ok(expect.len()));
    assert_eq!(&buf[..expect.len()], expect);
    assert!(
        buf[expect.len()..].iter().all(|&b| b == 0xaa),
        "wrote past the headers"
    );
}

#[test]
fn rc_send_only_bytes() {
    let headers: &[u8] = &[
        0x04, // OpCode: RC SEND Only
        0x90, // SE=1 M=0 PadCnt=01 TVer=0000
        0x80, 0x01, // P_Key
        0x80, // FECN=1 BECN=0
        0x12, 0x34, 0x56, // DestQP
        0x80, // AckReq=1
        0xab, 0xcd, 0xef, // PSN
    ];
    let packet = cat(&[headers, b"abc", &[0], &[0xde, 0xad, 0xbe, 0xef]]);
    let p = parse(&packet).unwrap();
    let b = p.hdr.bth;
    assert_eq!(b.opcode, Opcode::RcSendOnly);
    assert!(b.solicited && !b.mig_req);
    assert_eq!(b.pad_cnt, 1);
    assert_eq!(b.pkey, 0x8001);
    assert!(b.fecn && !b.becn);
    assert_eq!(b.dest_qp, 0x12_3456);
    assert!(b.ack_req);
    assert_eq!(b.psn, Psn::new(0xab_cdef));
    assert_eq!(p.hdr, Headers::new(b));
    assert_eq!(bytes(p.payload), b"abc");
    assert_eq!(p.icrc, [0xde, 0xad, 0xbe, 0xef]);
    assert_builds(&p.hdr, headers);

    // build_packet lays out payload, pad and a zero ICRC.
    let mut buf = [0xaau8; 64];
    let n = build_packet(&mut buf, &p.hdr, b"abc").unwrap();
    assert_eq!(&buf[..n], &cat(&[headers, b"abc", &[0; 5]])[..]);
}

#[test]
fn bth_flag_bits_each_alone() {
    // Each single-bit field at its IBTA position, the others clear.
    let base = [0x00u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    // SE, M, FECN, BECN, AckReq in that order.
    let cases = [(1, 0x80), (1, 0x40), (4, 0x80), (4, 0x40), (8, 0x80)];
    for (i, (at, bit)) in cases.into_iter().enumerate() {
        let mut hdr = base;
        hdr[at] = bit;
        let packet = cat(&[&hdr, &[0; 4]]);
        let b = parse(&packet).unwrap().hdr.bth;
        let set = [b.solicited, b.mig_req, b.fecn, b.becn, b.ack_req];
        let expect: Vec<bool> = (0..5).map(|j| j == i).collect();
        assert_eq!(&set[..], &expect[..], "byte {at} bit {bit:#x}");
        assert_eq!((b.pad_cnt, b.pkey, b.dest_qp, b.psn.get()), (0, 0, 0, 0));
        assert_builds(&Headers::new(b), &hdr);
    }
    // PadCnt is bits 5:4 of byte 1.
    for pad in 0..4u8 {
        let hdr = [0x00, pad << 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let packet = cat(&[&hdr, &[7; 3], &[0; 4]]);
        let p = parse(&packet).unwrap();
        assert_eq!(p.hdr.bth.pad_cnt, pad);
        assert_eq!(p.payload.len(), 3 - usize::from(pad));
    }
}

#[test]
fn reserved_bits_are_ignored_and_written_as_zero() {
    // BTH byte 4 bits 5:0 and byte 8 bits 6:0, DETH byte 4, AETH syndrome bit 7.
    let ud: &[u8] = &[
        0x64, 0x00, 0xff, 0xff, 0x3f, 0x00, 0x00, 0x01, 0x7f, 0x00, 0x00, 0x02, // BTH
        0x11, 0x22, 0x33, 0x44, 0xff, 0x00, 0x00, 0x05, // DETH
    ];
    let packet = cat(&[ud, &[0; 4]]);
    let p = parse(&packet).unwrap();
    assert!(!p.hdr.bth.fecn && !p.hdr.bth.becn && !p.hdr.bth.ack_req);
    assert_eq!(p.hdr.bth.dest_qp, 1);
    assert_eq!(p.hdr.bth.psn, Psn::new(2));
    assert_eq!(
        p.hdr.deth,
        Some(Deth {
            qkey: 0x1122_3344,
            src_qp: 5
        })
    );
    let mut clean = ud.to_vec();
    clean[4] = 0;
    clean[8] = 0;
    clean[16] = 0;
    assert_builds(&p.hdr, &clean);

    let ack: &[u8] = &[
        0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, // BTH
        0x9f, 0x00, 0x00, 0x07, // AETH, reserved bit 7 set
    ];
    let packet = cat(&[ack, &[0; 4]]);
    let p = parse(&packet).unwrap();
    assert_eq!(
        p.hdr.aeth,
        Some(Aeth {
            syndrome: Syndrome::Ack {
                credits: CREDITS_INVALID
            },
            msn: 7
        })
    );
}

#[test]
fn rdma_write_only_imm_bytes() {
    let headers: &[u8] = &[
        0x0b, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x00, // BTH
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // RETH VA
        0x11, 0x22, 0x33, 0x44, // RETH R_Key
        0x00, 0x00, 0x10, 0x00, // RETH DMA length
        0xca, 0xfe, 0xba, 0xbe, // ImmDt
    ];
    let packet = cat(&[headers, &[1, 2, 3, 4], &[0; 4]]);
    let p = parse(&packet).unwrap();
    assert_eq!(p.hdr.bth.opcode, Opcode::RcRdmaWriteOnlyImm);
    assert_eq!(
        p.hdr.reth,
        Some(Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            dma_len: 0x1000
        })
    );
    assert_eq!(p.hdr.imm_dt, Some(ImmDt { data: 0xcafe_babe }));
    assert_eq!(bytes(p.payload), &[1, 2, 3, 4]);
    assert_eq!(p.hdr.wire_len(), 32);
    assert_builds(&p.hdr, headers);
}

#[test]
fn rdma_read_request_bytes() {
    let headers: &[u8] = &[
        0x0c, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x01, 0x00, // BTH
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, // VA
        0x00, 0x00, 0x00, 0x01, // R_Key
        0x80, 0x00, 0x00, 0x00, // DMA length 2^31
    ];
    let packet = cat(&[headers, &[0; 4]]);
    let p = parse(&packet).unwrap();
    assert_eq!(p.hdr.bth.psn, Psn::new(0x100));
    assert_eq!(
        p.hdr.reth,
        Some(Reth {
            va: 0xffff_ffff_ffff_fff0,
            rkey: 1,
            dma_len: 1 << 31
        })
    );
    assert!(p.payload.is_empty());
    assert_builds(&p.hdr, headers);
}

#[test]
fn aeth_syndromes_bytes() {
    let cases: [(u8, Syndrome); 9] = [
        (0x00, Syndrome::Ack { credits: 0 }),
        (0x1f, Syndrome::Ack { credits: 31 }),
        (0x20, Syndrome::RnrNak { timer: 0 }),
        (0x2e, Syndrome::RnrNak { timer: 14 }),
        (0x60, Syndrome::Nak(NakCode::PsnSequenceError)),
        (0x61, Syndrome::Nak(NakCode::InvalidRequest)),
        (0x62, Syndrome::Nak(NakCode::RemoteAccessError)),
        (0x63, Syndrome::Nak(NakCode::RemoteOperationalError)),
        (0x64, Syndrome::Nak(NakCode::InvalidRdRequest)),
    ];
    for (raw, syndrome) in cases {
        let headers = [
            0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x09, // BTH
            raw, 0xfe, 0xdc, 0xba, // AETH
        ];
        let packet = cat(&[&headers, &[0; 4]]);
        let p = parse(&packet).unwrap();
        assert_eq!(p.hdr.bth.opcode, Opcode::RcAck);
        assert_eq!(
            p.hdr.aeth,
            Some(Aeth {
                syndrome,
                msn: 0xfe_dcba
            })
        );
        assert_eq!(syndrome.to_u8(), Ok(raw));
        assert_builds(&p.hdr, &headers);
    }
    for raw in 0..=255u8 {
        let decoded = Syndrome::from_u8(raw);
        let valid = match (raw >> 5) & 3 {
            0 | 1 => true,
            3 => raw & 0x1f <= 4,
            _ => false,
        };
        assert_eq!(decoded.is_some(), valid, "{raw:#04x}");
        if let Some(s) = decoded {
            assert_eq!(s.to_u8(), Ok(raw & 0x7f));
        }
    }
}

#[test]
fn atomic_bytes() {
    let cmp_swap: &[u8] = &[
        0x13, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x05, // BTH
        0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x08, // VA
        0xaa, 0xbb, 0xcc, 0xdd, // R_Key
        0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22, // swap
        0x33, 0x33, 0x33, 0x33, 0x44, 0x44, 0x44, 0x44, // compare
    ];
    let packet = cat(&[cmp_swap, &[0; 4]]);
    let p = parse(&packet).unwrap();
    assert_eq!(
        p.hdr.atomic_eth,
        Some(AtomicEth {
            va: 0x7f00_0000_1008,
            rkey: 0xaabb_ccdd,
            swap_add: 0x1111_1111_2222_2222,
            compare: 0x3333_3333_4444_4444
        })
    );
    assert_eq!(p.hdr.wire_len(), MAX_HEADER_LEN);
    assert_builds(&p.hdr, cmp_swap);

    let atomic_ack: &[u8] = &[
        0x12, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x05, // BTH
        0x1f, 0x00, 0x00, 0x03, // AETH
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, // original data
    ];
    let packet = cat(&[atomic_ack, &[0; 4]]);
    let p = parse(&packet).unwrap();
    assert_eq!(p.hdr.aeth.map(|a| a.msn), Some(3));
    assert_eq!(
        p.hdr.atomic_ack_eth,
        Some(AtomicAckEth {
            orig: 0x0123_4567_89ab_cdef
        })
    );
    assert_builds(&p.hdr, atomic_ack);
}

#[test]
fn ud_and_invalidate_bytes() {
    let ud: &[u8] = &[
        0x65, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0xff, 0xff, 0xff, // BTH to QP1
        0x80, 0x01, 0x00, 0x00, 0x00, 0xab, 0xcd, 0xef, // DETH
        0x00, 0x00, 0x00, 0x2a, // ImmDt
    ];
    let packet = cat(&[ud, &[9; 256], &[0; 4]]);
    let p = parse(&packet).unwrap();
    assert_eq!(p.hdr.bth.psn, Psn::new(0xff_ffff));
    assert_eq!(
        p.hdr.deth,
        Some(Deth {
            qkey: 0x8001_0000,
            src_qp: 0xab_cdef
        })
    );
    assert_eq!(p.hdr.imm_dt, Some(ImmDt { data: 42 }));
    assert_eq!(bytes(p.payload), &[9; 256][..]);
    assert_builds(&p.hdr, ud);

    let inv: &[u8] = &[
        0x17, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, // BTH
        0x00, 0x00, 0x12, 0x34, // IETH
    ];
    let packet = cat(&[inv, &[0; 4]]);
    let p = parse(&packet).unwrap();
    assert_eq!(p.hdr.ieth, Some(Ieth { rkey: 0x1234 }));
    assert!(p.payload.is_empty());
    assert_builds(&p.hdr, inv);
}

/// Values of every extension header, from which the headers of any opcode
/// are filled in.
#[derive(Clone, Copy, Debug)]
struct Exts {
    deth: Deth,
    reth: Reth,
    atomic_eth: AtomicEth,
    aeth: Aeth,
    atomic_ack_eth: AtomicAckEth,
    imm_dt: ImmDt,
    ieth: Ieth,
}

/// The headers of `bth.opcode` with the values of `v`.
fn headers(bth: Bth, v: &Exts) -> Headers {
    let l = bth.opcode.layout();
    Headers {
        bth,
        deth: l.has(Ext::Deth).then_some(v.deth),
        reth: l.has(Ext::Reth).then_some(v.reth),
        atomic_eth: l.has(Ext::AtomicEth).then_some(v.atomic_eth),
        aeth: l.has(Ext::Aeth).then_some(v.aeth),
        atomic_ack_eth: l.has(Ext::AtomicAckEth).then_some(v.atomic_ack_eth),
        imm_dt: l.has(Ext::ImmDt).then_some(v.imm_dt),
        ieth: l.has(Ext::Ieth).then_some(v.ieth),
    }
}

/// Every field at its minimum (`max == false`) or maximum.
fn boundary(op: Opcode, max: bool, syndrome: Syndrome) -> Headers {
    let (b, u16v, u24, u32v, u64v) = if max {
        (true, u16::MAX, (1 << 24) - 1, u32::MAX, u64::MAX)
    } else {
        (false, 0, 0, 0, 0)
    };
    let bth = Bth {
        opcode: op,
        solicited: b,
        mig_req: b,
        pad_cnt: 0,
        pkey: u16v,
        fecn: b,
        becn: b,
        dest_qp: u24,
        ack_req: b,
        psn: Psn::new(u24),
    };
    let v = Exts {
        deth: Deth {
            qkey: u32v,
            src_qp: u24,
        },
        reth: Reth {
            va: u64v,
            rkey: u32v,
            dma_len: u32v,
        },
        atomic_eth: AtomicEth {
            va: u64v,
            rkey: u32v,
            swap_add: u64v,
            compare: u64v,
        },
        aeth: Aeth { syndrome, msn: u24 },
        atomic_ack_eth: AtomicAckEth { orig: u64v },
        imm_dt: ImmDt { data: u32v },
        ieth: Ieth { rkey: u32v },
    };
    headers(bth, &v)
}

fn all_syndromes() -> Vec<Syndrome> {
    let mut all: Vec<Syndrome> = (0..32).map(|c| Syndrome::Ack { credits: c }).collect();
    all.extend((0..32).map(|t| Syndrome::RnrNak { timer: t }));
    all.extend(NakCode::ALL.iter().map(|&c| Syndrome::Nak(c)));
    all
}

#[test]
fn round_trip_every_opcode_at_boundaries() {
    let mut buf = [0u8; 128];
    for &op in Opcode::ALL {
        let syndromes = if op.layout().has(Ext::Aeth) {
            all_syndromes()
        } else {
            vec![Syndrome::Ack { credits: 0 }]
        };
        let lens: &[usize] = if op.layout().payload {
            &[0, 1, 2, 3, 4, 5, 63, 64]
        } else {
            &[0]
        };
        for max in [false, true] {
            for &syndrome in &syndromes {
                for &len in lens {
                    let mut hdr = boundary(op, max, syndrome);
                    let payload: Vec<u8> = (0..len as u8).collect();
                    let n = build_packet(&mut buf, &hdr, &payload).unwrap();
                    let pad = usize::from(pad_count(len));
                    assert_eq!(n, hdr.wire_len() + len + pad + ICRC_LEN);
                    assert_eq!(n % 4, 0);
                    let p = parse(&buf[..n]).unwrap();
                    hdr.bth.pad_cnt = pad as u8;
                    assert_eq!(p.hdr, hdr, "{op:?}");
                    assert_eq!(bytes(p.payload), &payload[..]);
                    assert_eq!(p.icrc, [0; 4]);
                }
            }
        }
    }
}

#[test]
fn build_rejects() {
    let mut buf = [0u8; 128];
    let ack = Headers {
        aeth: Some(Aeth {
            syndrome: Syndrome::Ack { credits: 0 },
            msn: 0,
        }),
        ..Headers::new(bth(Opcode::RcAck))
    };
    assert_eq!(build(&mut buf, &ack), Ok(16));
    // Every buffer too small, for headers and for whole packets.
    for len in 0..16 {
        assert_eq!(
            build(&mut buf[..len], &ack),
            Err(BuildError::BufferTooSmall)
        );
    }
    for len in 0..20 {
        assert_eq!(
            build_packet(&mut buf[..len], &ack, &[]),
            Err(BuildError::BufferTooSmall)
        );
    }
    let send = Headers::new(bth(Opcode::RcSendOnly));
    assert_eq!(build_packet(&mut buf, &send, &[1; 5]), Ok(12 + 8 + 4));
    for len in 0..24 {
        assert_eq!(
            build_packet(&mut buf[..len], &send, &[1; 5]),
            Err(BuildError::BufferTooSmall)
        );
    }
    // A payload for an opcode without one.
    assert_eq!(
        build_packet(&mut buf, &ack, &[1]),
        Err(BuildError::UnexpectedPayload)
    );
    // Missing and extra extension headers.
    assert_eq!(
        build(&mut buf, &Headers::new(bth(Opcode::RcAck))),
        Err(BuildError::HeaderMismatch)
    );
    let extra = Headers {
        imm_dt: Some(ImmDt { data: 1 }),
        ..ack
    };
    assert_eq!(build(&mut buf, &extra), Err(BuildError::HeaderMismatch));
    let max = all_ones();
    for &op in Opcode::ALL {
        for ext in Ext::ALL {
            let mut hdr = headers(bth(op), &max);
            match ext {
                Ext::Deth => hdr.deth = hdr.deth.xor(Some(max.deth)),
                Ext::Reth => hdr.reth = hdr.reth.xor(Some(max.reth)),
                Ext::AtomicEth => hdr.atomic_eth = hdr.atomic_eth.xor(Some(max.atomic_eth)),
                Ext::Aeth => hdr.aeth = hdr.aeth.xor(Some(max.aeth)),
                Ext::AtomicAckEth => {
                    hdr.atomic_ack_eth = hdr.atomic_ack_eth.xor(Some(max.atomic_ack_eth))
                }
                Ext::ImmDt => hdr.imm_dt = hdr.imm_dt.xor(Some(max.imm_dt)),
                Ext::Ieth => hdr.ieth = hdr.ieth.xor(Some(max.ieth)),
            }
            assert_eq!(
                build(&mut buf, &hdr),
                Err(BuildError::HeaderMismatch),
                "{op:?} {ext:?}"
            );
        }
    }
    // Fields that do not fit their bits.
    let range = |hdr: Headers| assert_eq!(build(&mut [0; 64], &hdr), Err(BuildError::FieldRange));
    let mut b = bth(Opcode::RcSendOnly);
    b.dest_qp = 1 << 24;
    range(Headers::new(b));
    let mut b = bth(Opcode::RcSendOnly);
    b.pad_cnt = 4;
    range(Headers::new(b));
    range(Headers {
        deth: Some(Deth {
            qkey: 0,
            src_qp: 1 << 24,
        }),
        ..Headers::new(bth(Opcode::UdSendOnly))
    });
    for syndrome in [
        Syndrome::Ack { credits: 32 },
        Syndrome::RnrNak { timer: 32 },
        Syndrome::RnrNak { timer: 0xff },
    ] {
        assert_eq!(syndrome.to_u8(), Err(BuildError::FieldRange));
        range(Headers {
            aeth: Some(Aeth { syndrome, msn: 0 }),
            ..Headers::new(bth(Opcode::RcAck))
        });
    }
    range(Headers {
        aeth: Some(Aeth {
            syndrome: Syndrome::Ack { credits: 0 },
            msn: 1 << 24,
        }),
        ..Headers::new(bth(Opcode::RcAck))
    });
}

fn all_ones() -> Exts {
    Exts {
        deth: Deth {
            qkey: u32::MAX,
            src_qp: (1 << 24) - 1,
        },
        reth: Reth {
            va: u64::MAX,
            rkey: u32::MAX,
            dma_len: u32::MAX,
        },
        atomic_eth: AtomicEth {
            va: u64::MAX,
            rkey: u32::MAX,
            swap_add: u64::MAX,
            compare: u64::MAX,
        },
        aeth: Aeth {
            syndrome: Syndrome::Ack { credits: 31 },
            msn: (1 << 24) - 1,
        },
        atomic_ack_eth: AtomicAckEth { orig: u64::MAX },
        imm_dt: ImmDt { data: u32::MAX },
        ieth: Ieth { rkey: u32::MAX },
    }
}

/// A valid packet of every opcode, with a payload of `len` bytes where the
/// opcode has one.
fn samples(len: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for &op in Opcode::ALL {
        let hdr = headers(bth(op), &all_ones());
        let payload = if op.layout().payload {
            vec![0x5a; len]
        } else {
            vec![]
        };
        let mut buf = vec![0; 128 + len];
        let n = build_packet(&mut buf, &hdr, &payload).unwrap();
        buf.truncate(n);
        out.push(buf);
    }
    out
}

#[test]
fn parse_rejects_truncation() {
    assert_eq!(parse(&[]), Err(ParseError::Truncated));
    for packet in samples(0) {
        let op = Opcode::from_u8(packet[0]).unwrap();
        let header_len = op.layout().header_len();
        assert_eq!(packet.len(), header_len + ICRC_LEN);
        assert!(parse(&packet).is_ok());
        for len in 0..packet.len() {
            let expect = if len < header_len {
                ParseError::Truncated
            } else {
                ParseError::NoIcrc
            };
            assert_eq!(parse(&packet[..len]), Err(expect), "{op:?} {len}");
        }
    }
}

#[test]
fn parse_rejects_tver_and_unknown_opcodes() {
    let packet = cat(&[&[0x04, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0], &[0; 4]]);
    assert!(parse(&packet).is_ok());
    for tver in 1..16u8 {
        let mut bad = packet.clone();
        bad[1] |= tver;
        assert_eq!(parse(&bad), Err(ParseError::BadTver(tver)));
    }
    // Long enough for any header set.
    let mut packet = vec![0; 64];
    let mut unknown = 0;
    for value in 0..=255u8 {
        packet[0] = value;
        if Opcode::from_u8(value).is_none() {
            unknown += 1;
            assert_eq!(parse(&packet), Err(ParseError::UnknownOpcode(value)));
            // Even when shorter than any header.
            assert_eq!(parse(&packet[..12]), Err(ParseError::UnknownOpcode(value)));
        }
    }
    assert_eq!(unknown, 256 - 37);
}

#[test]
fn parse_rejects_pad_and_payload() {
    // A pad count larger than what precedes the ICRC.
    for &op in Opcode::ALL {
        let layout = op.layout();
        let lens: &[usize] = if layout.payload { &[0, 1, 2] } else { &[0] };
        for &len in lens {
            for pad in 0..4u8 {
                let mut b = bth(op);
                b.pad_cnt = pad;
                let hdr = headers(b, &all_ones());
                let mut packet = vec![0; hdr.wire_len()];
                build(&mut packet, &hdr).unwrap();
                packet.extend(vec![3; len]);
                packet.extend([0; 4]);
                let r = parse(&packet);
                if usize::from(pad) > len {
                    assert_eq!(r, Err(ParseError::PadTooLong), "{op:?} {len} {pad}");
                } else {
                    let p = r.unwrap();
                    assert_eq!(p.payload.len(), len - usize::from(pad));
                    assert_eq!(p.hdr, hdr);
                }
            }
        }
    }
    // Bytes before the ICRC of an opcode without payload.
    for packet in samples(0) {
        let op = Opcode::from_u8(packet[0]).unwrap();
        if op.layout().payload {
            continue;
        }
        for extra in 1..6 {
            let n = packet.len() - ICRC_LEN;
            let mut long = packet[..n].to_vec();
            long.extend(vec![0; extra]);
            long.extend([0; 4]);
            assert_eq!(parse(&long), Err(ParseError::UnexpectedPayload), "{op:?}");
        }
    }
}

#[test]
fn parse_rejects_reserved_syndromes() {
    for raw in 0..=255u8 {
        if Syndrome::from_u8(raw).is_some() {
            continue;
        }
        for op in [
            Opcode::RcAck,
            Opcode::RcAtomicAck,
            Opcode::RcRdmaReadResponseFirst,
            Opcode::RcRdmaReadResponseLast,
            Opcode::RcRdmaReadResponseOnly,
        ] {
            let mut packet = samples(4).into_iter().find(|p| p[0] == op as u8).unwrap();
            packet[12] = raw;
            assert_eq!(parse(&packet), Err(ParseError::BadSyndrome(raw)));
        }
    }
}

#[test]
fn credit_and_rnr_timer_tables() {
    assert_eq!(ack_credits(0), Some(0));
    assert_eq!(ack_credits(4), Some(4));
    assert_eq!(ack_credits(5), Some(6));
    assert_eq!(ack_credits(30), Some(32768));
    assert_eq!(ack_credits(CREDITS_INVALID), None);
    assert_eq!(ack_credits(0xff), None);
    // From code 5 on, each code doubles the credits two codes back.
    for c in 5..31 {
        assert_eq!(ack_credits(c), ack_credits(c - 2).map(|n| 2 * n));
    }
    assert_eq!(rnr_timer_us(0), 655_360);
    assert_eq!(rnr_timer_us(1), 10);
    assert_eq!(rnr_timer_us(14), 1_280);
    assert_eq!(rnr_timer_us(31), 491_520);
    assert_eq!(rnr_timer_us(32 + 1), 10);
    // Likewise the RNR delays from code 5 on.
    for t in 5..32 {
        assert_eq!(rnr_timer_us(t), 2 * rnr_timer_us(t - 2), "{t}");
    }
}

#[test]
fn pad_count_rounds_to_four() {
    for len in 0..64usize {
        let pad = usize::from(pad_count(len));
        assert!(pad < 4 && (len + pad) % 4 == 0);
    }
    assert_eq!(pad_count(usize::MAX), 1);
}

/// xorshift64: a deterministic pseudo-random sequence for the fuzz run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Checks what holds for every accepted packet: the parts add up, and the
/// headers rebuilt in place parse back to the same packet.
fn check_accepted(packet: &[u8]) {
    let Ok(p) = parse(packet) else {
        return;
    };
    let header_len = p.hdr.wire_len();
    let pad = usize::from(p.hdr.bth.pad_cnt);
    assert_eq!(header_len + p.payload.len() + pad + ICRC_LEN, packet.len());
    assert_eq!(
        &packet[header_len..header_len + p.payload.len()],
        bytes(p.payload)
    );
    let mut rebuilt = packet.to_vec();
    assert_eq!(build(&mut rebuilt, &p.hdr), Ok(header_len));
    assert_eq!(parse(&rebuilt), Ok(p));
}

#[test]
fn fuzz_parse_random_and_mutated_packets() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let seeds: Vec<Vec<u8>> = [0, 1, 3, 8, 33].into_iter().flat_map(samples).collect();
    let (mut accepted, mut rejected) = (0u32, 0u32);
    let mut buf = Vec::with_capacity(256);
    for i in 0..200_000 {
        buf.clear();
        if i % 4 == 0 {
            // Random bytes, often starting with a known opcode.
            let len = rng.below(80);
            buf.extend((0..len).map(|_| rng.next() as u8));
            if len > 0 && rng.below(2) == 0 {
                buf[0] = Opcode::ALL[rng.below(Opcode::ALL.len())] as u8;
            }
        } else {
            buf.extend_from_slice(&seeds[rng.below(seeds.len())]);
            for _ in 0..1 + rng.below(3) {
                match rng.below(5) {
                    0 if !buf.is_empty() => {
                        let at = rng.below(buf.len());
                        buf[at] ^= 1 << rng.below(8);
                    }
                    1 if !buf.is_empty() => {
                        let at = rng.below(buf.len());
                        buf[at] = rng.next() as u8;
                    }
                    2 => {
                        let len = rng.below(buf.len() + 1);
                        buf.truncate(len);
                    }
                    3 => buf.extend((0..rng.below(8)).map(|_| rng.next() as u8)),
                    _ if buf.len() > 1 => {
                        // The bytes most checks depend on: opcode and flags.
                        buf[rng.below(2)] = rng.next() as u8;
                    }
                    _ => {}
                }
            }
        }
        match parse(&buf) {
            Ok(_) => accepted += 1,
            Err(_) => rejected += 1,
        }
        check_accepted(&buf);
    }
    // Both outcomes are well exercised.
    assert!(
        accepted > 20_000 && rejected > 20_000,
        "{accepted} {rejected}"
    );
}

fn arb_syndrome() -> impl Strategy<Value = Syndrome> {
    prop_oneof![
        (0u8..32).prop_map(|credits| Syndrome::Ack { credits }),
        (0u8..32).prop_map(|timer| Syndrome::RnrNak { timer }),
        proptest::sample::select(NakCode::ALL.to_vec()).prop_map(Syndrome::Nak),
    ]
}

fn arb_bth() -> impl Strategy<Value = Bth> {
    (
        proptest::sample::select(Opcode::ALL),
        any::<[bool; 5]>(),
        0u8..4,
        any::<u16>(),
        0u32..1 << 24,
        any::<u32>(),
    )
        .prop_map(|(opcode, [se, m, f, b, a], pad, pkey, qp, psn)| Bth {
            opcode,
            solicited: se,
            mig_req: m,
            // Only opcodes with a payload may have pad bytes.
            pad_cnt: if opcode.layout().payload { pad } else { 0 },
            pkey,
            fecn: f,
            becn: b,
            dest_qp: qp,
            ack_req: a,
            psn: Psn::new(psn),
        })
}

fn arb_exts() -> impl Strategy<Value = Exts> {
    (
        (any::<u32>(), 0u32..1 << 24),
        (any::<u64>(), any::<u32>(), any::<u32>()),
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()),
        (arb_syndrome(), 0u32..1 << 24),
        (any::<u64>(), any::<u32>(), any::<u32>()),
    )
        .prop_map(|(d, r, a, k, (orig, imm, inv))| Exts {
            deth: Deth {
                qkey: d.0,
                src_qp: d.1,
            },
            reth: Reth {
                va: r.0,
                rkey: r.1,
                dma_len: r.2,
            },
            atomic_eth: AtomicEth {
                va: a.0,
                rkey: a.1,
                swap_add: a.2,
                compare: a.3,
            },
            aeth: Aeth {
                syndrome: k.0,
                msn: k.1,
            },
            atomic_ack_eth: AtomicAckEth { orig },
            imm_dt: ImmDt { data: imm },
            ieth: Ieth { rkey: inv },
        })
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        let _ = parse(&bytes);
        check_accepted(&bytes);
    }

    #[test]
    fn parse_never_panics_after_a_known_opcode(
        op in proptest::sample::select(Opcode::ALL),
        flags in 0u8..0x40,
        rest in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = vec![op as u8, flags];
        bytes.extend(rest);
        let _ = parse(&bytes);
        check_accepted(&bytes);
    }

    #[test]
    fn build_then_parse_is_identity(
        bth in arb_bth(),
        exts in arb_exts(),
        payload in proptest::collection::vec(any::<u8>(), 0..48),
        icrc in any::<[u8; 4]>(),
    ) {
        let hdr = headers(bth, &exts);
        let payload = if bth.opcode.layout().payload { payload } else { vec![] };
        // Headers by `build`, then payload, PadCnt pad bytes and ICRC.
        let mut packet = vec![0; hdr.wire_len()];
        prop_assert_eq!(build(&mut packet, &hdr), Ok(hdr.wire_len()));
        packet.extend(&payload);
        packet.extend(vec![0xee; usize::from(bth.pad_cnt)]);
        packet.extend(icrc);
        let p = parse(&packet).unwrap();
        prop_assert_eq!(p.hdr, hdr);
        prop_assert_eq!(bytes(p.payload), &payload[..]);
        prop_assert_eq!(p.icrc, icrc);

        // build_packet: the same with the PadCnt of the payload.
        let mut buf = vec![0; 128];
        let n = build_packet(&mut buf, &hdr, &payload).unwrap();
        let p = parse(&buf[..n]).unwrap();
        let mut expect = hdr;
        expect.bth.pad_cnt = pad_count(payload.len());
        prop_assert_eq!(p.hdr, expect);
        prop_assert_eq!(bytes(p.payload), &payload[..]);
    }

    /// A packet of which only the headers are at hand (the linear area of
    /// a fragmented packet) parses as it does whole.
    #[test]
    fn parse_headers_of_a_head_agrees_with_parse(
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
        extra in 0usize..64,
    ) {
        let head_len = bytes.len().min(MAX_HEADER_LEN + extra);
        let got = parse_headers(&bytes[..head_len], bytes.len());
        match parse(&bytes) {
            Ok(p) => {
                let (hdr, header_len, payload_len) = got.unwrap();
                prop_assert_eq!(hdr, p.hdr);
                prop_assert_eq!(payload_len, p.payload.len());
                prop_assert_eq!(
                    &bytes[header_len..header_len + payload_len],
                    &self::bytes(p.payload)[..]
                );
            }
            Err(e) => prop_assert_eq!(got.map(|_| ()), Err(e)),
        }
    }

    /// Keeping the front of pieces cut anywhere keeps exactly those bytes.
    #[test]
    fn keep_front_keeps_the_first_bytes(
        data in proptest::collection::vec(any::<u8>(), 0..64),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
        keep in any::<prop::sample::Index>(),
    ) {
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
        at.sort();
        let mut pieces = Vec::new();
        let mut from = 0;
        for &c in at.iter().chain(core::iter::once(&data.len())) {
            pieces.push(&data[from..c]);
            from = c;
        }
        let keep = keep.index(data.len() + 1);
        let n = keep_front(&mut pieces, keep);
        prop_assert_eq!(pieces[..n].concat(), &data[..keep]);
        prop_assert!(n <= pieces.len());
        prop_assert_eq!(Payload::Pieces(&pieces[..n]), Payload::Linear(&data[..keep]));
    }

}
