//! The inbound rules (drivers/softrnic/core/iwarp/inbound.rs) behind the
//! stream receiver: FPDU bytes in, placements and completions out, and
//! each broken rule ending the stream with its RFC 5040/5041 cause.

use std::collections::{BTreeMap, VecDeque};

use crate::crc::crc32c_update;
use crate::iwarp::fpdu::*;
use crate::iwarp::inbound::*;
use crate::iwarp::rx::{Fault, Receiver};
use crate::iwarp_rx_tests::fpdu;

/// Memory regions by STag: base, bytes, remote write allowed.
struct Region {
    base: u64,
    bytes: Vec<u8>,
    remote_write: bool,
}

#[derive(Default)]
struct Io {
    regions: BTreeMap<u32, Region>,
    /// Posted receives: their buffers.
    posted: VecDeque<Vec<u8>>,
    current: Option<Vec<u8>>,
    received: Vec<(Received, Vec<u8>)>,
    reads: VecDeque<ReadAwaited>,
    reads_done: u32,
    read_requests: Vec<ReadRequest>,
    atomics: Vec<AtomicRequest>,
    terminated: Option<Terminate>,
}

impl InboundIo for Io {
    fn check_tagged(
        &mut self,
        stag: u32,
        to: u64,
        len: usize,
        what: TaggedUse,
    ) -> Result<(), Cause> {
        let r = self.regions.get(&stag).ok_or(cause::INVALID_STAG)?;
        if what == TaggedUse::Write && !r.remote_write {
            return Err(cause::ACCESS_RIGHTS);
        }
        if to < r.base || to + len as u64 > r.base + r.bytes.len() as u64 {
            return Err(cause::BASE_BOUNDS);
        }
        Ok(())
    }

    fn place_tagged(&mut self, stag: u32, to: u64, data: &[u8]) -> Result<(), Cause> {
        let r = self.regions.get_mut(&stag).ok_or(cause::INVALID_STAG)?;
        let at = (to - r.base) as usize;
        r.bytes[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn take_receive(&mut self) -> Result<u32, Cause> {
        let b = self.posted.pop_front().ok_or(cause::DDP_NO_BUFFER)?;
        let cap = b.len() as u32;
        self.current = Some(b);
        Ok(cap)
    }

    fn place_untagged(&mut self, offset: u32, data: &[u8]) -> Result<(), Cause> {
        let b = self.current.as_mut().ok_or(cause::LOCAL_CATASTROPHIC)?;
        b[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn received(&mut self, r: &Received) -> Result<(), Cause> {
        let b = self.current.take().ok_or(cause::LOCAL_CATASTROPHIC)?;
        self.received.push((*r, b[..r.len as usize].to_vec()));
        Ok(())
    }

    fn read_awaited(&mut self) -> Option<ReadAwaited> {
        self.reads.front().copied()
    }

    fn read_done(&mut self) -> Result<(), Cause> {
        self.reads.pop_front();
        self.reads_done += 1;
        Ok(())
    }

    fn read_request(&mut self, r: &ReadRequest) -> Result<(), Cause> {
        self.read_requests.push(*r);
        Ok(())
    }

    fn atomic_request(&mut self, a: &AtomicRequest) -> Result<(), Cause> {
        self.atomics.push(*a);
        Ok(())
    }

    fn atomic_response(&mut self, _a: &AtomicResponse) -> Result<(), Cause> {
        Ok(())
    }

    fn terminated(&mut self, t: &Terminate) {
        self.terminated = Some(*t);
    }
}

fn new_io() -> Io {
    let mut io = Io::default();
    io.regions.insert(
        0x100,
        Region {
            base: 0x10_000,
            bytes: vec![0; 8192],
            remote_write: true,
        },
    );
    io.regions.insert(
        0x200,
        Region {
            base: 0x20_000,
            bytes: vec![0; 64],
            remote_write: false,
        },
    );
    io
}

fn send_seg(op: Opcode, msn: u32, mo: u32, last: bool, inv_stag: u32) -> Header {
    Header {
        opcode: op,
        last,
        place: Placement::Untagged {
            qn: 0,
            msn,
            mo,
            inv_stag,
        },
        rdmap: RdmapHeader::None,
    }
}

fn tagged(op: Opcode, stag: u32, to: u64, last: bool) -> Header {
    Header {
        opcode: op,
        last,
        place: Placement::Tagged { stag, to },
        rdmap: RdmapHeader::None,
    }
}

fn request(op: Opcode, msn: u32, rdmap: RdmapHeader) -> Header {
    Header {
        opcode: op,
        last: true,
        place: Placement::Untagged {
            qn: op.queue().unwrap(),
            msn,
            mo: 0,
            inv_stag: 0,
        },
        rdmap,
    }
}

/// A whole message as its segments' FPDUs (`max_fpdu` bytes each).
fn message(first: Header, payload: &[u8], max_fpdu: usize) -> Vec<u8> {
    Segments::new(first, payload.len() as u32, max_fpdu)
        .flat_map(|s| {
            fpdu(
                &s.hdr,
                &payload[s.offset as usize..(s.offset + s.len) as usize],
                true,
            )
        })
        .collect()
}

fn feed(io: &mut Io, st: &mut InboundState, bytes: &[u8]) -> Result<(), Fault> {
    let mut rx = Receiver::new(true, crc32c_update);
    let mut sink = Inbound { io, state: st };
    // In odd pieces, as a socket hands them over.
    for chunk in bytes.chunks(97) {
        rx.feed(chunk, &mut sink)?;
    }
    Ok(())
}

#[test]
fn sends_land_in_posted_receives_in_msn_order() {
    let mut io = new_io();
    io.posted.extend([vec![0; 5000], vec![0; 16], vec![0; 16]]);
    let mut st = InboundState::new(4);
    let data: Vec<u8> = (0..4000u32).map(|i| i as u8).collect();
    let mut s = message(send_seg(Opcode::Send, 1, 0, true, 0), &data, 1024);
    s.extend(message(
        send_seg(Opcode::SendSolicitedInvalidate, 2, 0, true, 0x77),
        b"hello",
        1024,
    ));
    let imm = request(Opcode::Immediate, 3, RdmapHeader::Immediate(*b"12345678"));
    s.extend(fpdu(
        &Header {
            place: Placement::Untagged {
                qn: 0,
                msn: 3,
                mo: 0,
                inv_stag: 0,
            },
            ..imm
        },
        &[],
        true,
    ));
    feed(&mut io, &mut st, &s).unwrap();
    assert_eq!(io.received.len(), 3);
    assert_eq!(io.received[0].1, data);
    assert_eq!(io.received[0].0.len, 4000);
    let (r, b) = &io.received[1];
    assert_eq!(
        (r.invalidate, r.solicited, &b[..]),
        (Some(0x77), true, &b"hello"[..])
    );
    assert_eq!(io.received[2].0.immediate, Some(*b"12345678"));
    assert_eq!(io.received[2].0.len, 0);
}

#[test]
fn broken_untagged_rules_end_the_stream_with_their_cause() {
    let cases: Vec<(Vec<u8>, Cause)> = vec![
        // The first SEND must carry MSN 1.
        (
            fpdu(&send_seg(Opcode::Send, 2, 0, true, 0), b"x", true),
            cause::DDP_MSN_RANGE,
        ),
        // A new message starts at MO 0.
        (
            fpdu(&send_seg(Opcode::Send, 1, 8, true, 0), b"x", true),
            cause::DDP_BAD_MO,
        ),
        // A gap inside a message.
        (
            [
                fpdu(&send_seg(Opcode::Send, 1, 0, false, 0), b"abcd", true),
                fpdu(&send_seg(Opcode::Send, 1, 8, true, 0), b"efgh", true),
            ]
            .concat(),
            cause::DDP_BAD_MO,
        ),
        // More than the posted receive holds.
        (
            fpdu(&send_seg(Opcode::Send, 1, 0, true, 0), &[1; 17], true),
            cause::DDP_TOO_LONG,
        ),
    ];
    for (bytes, want) in cases {
        let mut io = new_io();
        io.posted.push_back(vec![0; 16]);
        let mut st = InboundState::new(4);
        let f = feed(&mut io, &mut st, &bytes).unwrap_err();
        assert_eq!(f.cause, want);
        assert!(io.received.is_empty());
    }
    // No receive posted.
    let mut io = new_io();
    let mut st = InboundState::new(4);
    let f = feed(
        &mut io,
        &mut st,
        &fpdu(&send_seg(Opcode::Send, 1, 0, true, 0), b"x", true),
    )
    .unwrap_err();
    assert_eq!(f.cause, cause::DDP_NO_BUFFER);
}

#[test]
fn writes_are_placed_only_where_their_stag_allows() {
    let mut io = new_io();
    let mut st = InboundState::new(4);
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    feed(
        &mut io,
        &mut st,
        &message(tagged(Opcode::Write, 0x100, 0x10_010, true), &data, 1000),
    )
    .unwrap();
    let r = &io.regions[&0x100];
    assert_eq!(&r.bytes[0x10..0x10 + 3000], &data[..]);
    assert!(r.bytes[..0x10].iter().all(|&b| b == 0));
    assert!(r.bytes[0x10 + 3000..].iter().all(|&b| b == 0));
    // RFC 6581's RTR: a zero-length WRITE with any STag places nothing.
    feed(
        &mut io,
        &mut st,
        &fpdu(&tagged(Opcode::Write, 1, 0, true), &[], true),
    )
    .unwrap();
    let cases = [
        (
            tagged(Opcode::Write, 0x999, 0x10_000, true),
            cause::INVALID_STAG,
        ),
        (
            tagged(Opcode::Write, 0x200, 0x20_000, true),
            cause::ACCESS_RIGHTS,
        ),
        (
            tagged(Opcode::Write, 0x100, 0x10_000 + 8190, true),
            cause::BASE_BOUNDS,
        ),
        (
            tagged(Opcode::Write, 0x100, u64::MAX - 1, true),
            cause::DDP_TAGGED_TO_WRAP,
        ),
        // A READ response nobody asked for.
        (
            tagged(Opcode::ReadResponse, 0x100, 0x10_000, true),
            cause::UNEXPECTED_OPCODE,
        ),
    ];
    for (h, want) in cases {
        let mut io = new_io();
        let mut st = InboundState::new(4);
        let f = feed(&mut io, &mut st, &fpdu(&h, b"abcd", true)).unwrap_err();
        assert_eq!(f.cause, want, "{h:?}");
        assert!(io.regions[&0x100].bytes.iter().all(|&b| b == 0));
    }
    // A second WRITE inside the first.
    let mut io = new_io();
    let mut st = InboundState::new(4);
    let s = [
        fpdu(
            &tagged(Opcode::Write, 0x100, 0x10_000, false),
            b"abcd",
            true,
        ),
        fpdu(&tagged(Opcode::Write, 0x100, 0x10_100, true), b"efgh", true),
    ]
    .concat();
    assert_eq!(
        feed(&mut io, &mut st, &s).unwrap_err().cause,
        cause::DDP_TAGGED_BASE_BOUNDS
    );
}

#[test]
fn read_responses_must_match_the_read() {
    let awaited = ReadAwaited {
        sink_stag: 0x100,
        sink_to: 0x10_000,
        len: 2500,
    };
    let data = vec![0xAB; 2500];
    let mut io = new_io();
    io.reads.push_back(awaited);
    let mut st = InboundState::new(4);
    feed(
        &mut io,
        &mut st,
        &message(
            tagged(Opcode::ReadResponse, 0x100, 0x10_000, true),
            &data,
            1000,
        ),
    )
    .unwrap();
    assert_eq!(io.reads_done, 1);
    assert_eq!(&io.regions[&0x100].bytes[..2500], &data[..]);
    let cases = [
        (
            tagged(Opcode::ReadResponse, 0x200, 0x10_000, true),
            2500,
            cause::DDP_TAGGED_INVALID_STAG,
        ),
        (
            tagged(Opcode::ReadResponse, 0x100, 0x10_004, true),
            2500,
            cause::DDP_TAGGED_BASE_BOUNDS,
        ),
        // Shorter or longer than the READ asked.
        (
            tagged(Opcode::ReadResponse, 0x100, 0x10_000, true),
            2000,
            cause::DDP_TAGGED_BASE_BOUNDS,
        ),
        (
            tagged(Opcode::ReadResponse, 0x100, 0x10_000, true),
            2504,
            cause::DDP_TAGGED_BASE_BOUNDS,
        ),
    ];
    for (h, len, want) in cases {
        let mut io = new_io();
        io.reads.push_back(awaited);
        let mut st = InboundState::new(4);
        let f = feed(&mut io, &mut st, &message(h, &vec![1; len], 1000)).unwrap_err();
        assert_eq!(f.cause, want, "{h:?} {len}");
        assert_eq!(io.reads_done, 0);
    }
}

#[test]
fn read_and_atomic_requests_stay_within_the_ird() {
    let rr = |msn| {
        request(
            Opcode::ReadRequest,
            msn,
            RdmapHeader::ReadRequest(ReadRequest {
                sink_stag: 1,
                sink_to: 2,
                len: 3,
                src_stag: 0x100,
                src_to: 0x10_000,
            }),
        )
    };
    let at = |msn| {
        request(
            Opcode::AtomicRequest,
            msn,
            RdmapHeader::AtomicRequest(AtomicRequest {
                op: AtomicOp::FetchAdd,
                req_id: 9,
                stag: 0x100,
                to: 0x10_000,
                add_swap: 1,
                add_swap_mask: u64::MAX,
                compare: 0,
                compare_mask: u64::MAX,
            }),
        )
    };
    let mut io = new_io();
    let mut st = InboundState::new(2);
    let s = [fpdu(&rr(1), &[], true), fpdu(&at(2), &[], true)].concat();
    feed(&mut io, &mut st, &s).unwrap();
    assert_eq!(
        (io.read_requests.len(), io.atomics.len(), st.reads_in()),
        (1, 1, 2)
    );
    // A third before an answer: beyond the IRD.
    let f = feed(&mut io, &mut st, &fpdu(&rr(3), &[], true)).unwrap_err();
    assert_eq!(f.cause, cause::STREAM_CATASTROPHIC);
    // Once one is answered, the next fits; a replayed MSN does not.
    let mut io2 = new_io();
    let mut st2 = st.clone();
    st2.answered();
    feed(&mut io2, &mut st2, &fpdu(&rr(3), &[], true)).unwrap();
    st2.answered();
    let f = feed(&mut io2, &mut st2, &fpdu(&rr(3), &[], true)).unwrap_err();
    assert_eq!(f.cause, cause::DDP_MSN_RANGE);
}

#[test]
fn a_terminate_reaches_the_caller() {
    let t = Terminate {
        cause: cause::DDP_NO_BUFFER,
        has_len: true,
        has_ddp: true,
        has_rdmap: false,
    };
    let mut io = new_io();
    let mut st = InboundState::new(1);
    let h = request(Opcode::Terminate, 1, RdmapHeader::Terminate(t));
    // With a copy of the offending headers as its payload.
    feed(&mut io, &mut st, &fpdu(&h, &[0x55; 20], true)).unwrap();
    assert_eq!(io.terminated, Some(t));
}

#[test]
fn without_rfc_7306_its_messages_draw_a_terminate() {
    let at = request(
        Opcode::AtomicRequest,
        1,
        RdmapHeader::AtomicRequest(AtomicRequest {
            op: AtomicOp::FetchAdd,
            req_id: 1,
            stag: 0x100,
            to: 0x10_000,
            add_swap: 1,
            add_swap_mask: 0,
            compare: 0,
            compare_mask: 0,
        }),
    );
    let imm = request(Opcode::Immediate, 1, RdmapHeader::Immediate(*b"12345678"));
    for h in [at, imm] {
        let mut io = new_io();
        io.posted.push_back(vec![0; 16]);
        let mut st = InboundState::new(4).extensions(false);
        let f = feed(&mut io, &mut st, &fpdu(&h, &[], true)).unwrap_err();
        assert_eq!(f.cause, cause::UNEXPECTED_OPCODE);
        assert!(io.atomics.is_empty() && io.received.is_empty());
    }
}

#[test]
fn a_send_rtr_consumes_no_receive() {
    // RFC 6581 with the zero-length SEND as the RTR: the first message
    // numbers MSN 1 and takes no posted receive; the next SEND (MSN 2)
    // lands in the first one posted.
    let mut io = new_io();
    io.posted.extend([vec![0; 16]]);
    let mut st = InboundState::new(4).rtr_send(true);
    let mut s = fpdu(&send_seg(Opcode::Send, 1, 0, true, 0), &[], true);
    s.extend(message(
        send_seg(Opcode::Send, 2, 0, true, 0),
        b"after",
        1024,
    ));
    feed(&mut io, &mut st, &s).unwrap();
    assert_eq!(io.received.len(), 1);
    assert_eq!(io.received[0].1, b"after");
    // Only the first FPDU can be the RTR: a later zero-length SEND is a
    // message (with no receive posted: DDP's "no buffer").
    let r = feed(
        &mut io,
        &mut st,
        &fpdu(&send_seg(Opcode::Send, 3, 0, true, 0), &[], true),
    );
    assert_eq!(r.unwrap_err().cause, cause::DDP_NO_BUFFER);
    // Without the RTR negotiated, a first zero-length SEND is a message.
    let mut io = new_io();
    io.posted.extend([vec![0; 16]]);
    let mut st = InboundState::new(4);
    feed(
        &mut io,
        &mut st,
        &fpdu(&send_seg(Opcode::Send, 1, 0, true, 0), &[], true),
    )
    .unwrap();
    assert_eq!(io.received.len(), 1);
    assert_eq!(io.received[0].0.len, 0);
}
