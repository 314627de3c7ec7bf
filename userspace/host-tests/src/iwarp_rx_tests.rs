//! The MPA stream receiver (drivers/softrnic/core/iwarp/rx.rs): FPDUs cut
//! at every byte boundary give the same events as whole ones, payload is
//! placed at its offsets with nothing staged, and CRC errors, refused
//! headers and a dead stream end in the right TERMINATE cause.

use crate::crc::{crc32c_update, Update};
use crate::iwarp::fpdu::*;
use crate::iwarp::rx::{Fault, Receiver, Sink};

/// Bytes of one FPDU: headers, payload, pad, CRC (zeros without CRC).
pub(crate) fn fpdu(h: &Header, payload: &[u8], crc_on: bool) -> Vec<u8> {
    let mut buf = [0u8; MAX_HEADER];
    let n = build_header(&mut buf, h, payload.len()).unwrap();
    let t = Trailer::new(
        &buf[..n],
        &[payload],
        crc_on.then_some(crc32c_update as Update),
    );
    [&buf[..n], payload, t.as_bytes()].concat()
}

fn send(msn: u32, mo: u32, last: bool) -> Header {
    Header {
        opcode: Opcode::Send,
        last,
        place: Placement::Untagged {
            qn: 0,
            msn,
            mo,
            inv_stag: 0,
        },
        rdmap: RdmapHeader::None,
    }
}

fn write(to: u64, last: bool) -> Header {
    Header {
        opcode: Opcode::Write,
        last,
        place: Placement::Tagged { stag: 0x100, to },
        rdmap: RdmapHeader::None,
    }
}

/// Records what the receiver hands over; refuses where told.
#[derive(Default)]
struct Record {
    events: Vec<String>,
    /// Placed bytes, by (opcode, target address) as the headers say.
    mem: Vec<(u64, u8)>,
    refuse_begin: Option<Cause>,
}

impl Sink for Record {
    fn begin(&mut self, p: &Parsed) -> Result<(), Cause> {
        self.events
            .push(format!("begin {:?} {}", p.hdr.opcode, p.payload_len));
        self.refuse_begin.map_or(Ok(()), Err)
    }

    fn place(&mut self, p: &Parsed, offset: usize, data: &[u8]) -> Result<(), Cause> {
        let base = match p.hdr.place {
            Placement::Tagged { to, .. } => to,
            Placement::Untagged { mo, .. } => u64::from(mo),
        };
        for (i, &b) in data.iter().enumerate() {
            self.mem.push((base + (offset + i) as u64, b));
        }
        Ok(())
    }

    fn end(&mut self, p: &Parsed) -> Result<(), Cause> {
        self.events
            .push(format!("end {:?} last={}", p.hdr.opcode, p.hdr.last));
        Ok(())
    }
}

fn stream(crc_on: bool) -> Vec<u8> {
    let payload: Vec<u8> = (0..=250u8).collect();
    let mut s = fpdu(&send(1, 0, false), &payload[..101], crc_on);
    s.extend(fpdu(&send(1, 101, true), &payload[101..], crc_on));
    s.extend(fpdu(&write(0x5000, true), &payload[..3], crc_on));
    s.extend(fpdu(&send(2, 0, true), &[], crc_on));
    let rr = Header {
        opcode: Opcode::ReadRequest,
        last: true,
        place: Placement::Untagged {
            qn: 1,
            msn: 1,
            mo: 0,
            inv_stag: 0,
        },
        rdmap: RdmapHeader::ReadRequest(ReadRequest {
            sink_stag: 7,
            sink_to: 8,
            len: 9,
            src_stag: 10,
            src_to: 11,
        }),
    };
    s.extend(fpdu(&rr, &[], crc_on));
    s
}

fn run(
    bytes: &[u8],
    cuts: impl Iterator<Item = usize>,
    crc_on: bool,
) -> (Record, Result<(), Fault>, u64, bool) {
    let mut r = Receiver::new(crc_on, crc32c_update);
    let mut rec = Record::default();
    let mut at = 0;
    let mut res = Ok(());
    for cut in cuts.chain([bytes.len()]) {
        let cut = cut.clamp(at, bytes.len());
        res = r.feed(&bytes[at..cut], &mut rec);
        at = cut;
        if res.is_err() {
            break;
        }
    }
    (rec, res, r.fpdus, r.at_boundary())
}

#[test]
fn any_cutting_of_the_stream_gives_the_same_fpdus() {
    for crc_on in [true, false] {
        let s = stream(crc_on);
        let (whole, res, n, boundary) = run(&s, core::iter::empty(), crc_on);
        res.unwrap();
        assert_eq!((n, boundary), (5, true));
        assert_eq!(
            whole.events,
            [
                "begin Send 101",
                "end Send last=false",
                "begin Send 150",
                "end Send last=true",
                "begin Write 3",
                "end Write last=true",
                "begin Send 0",
                "end Send last=true",
                "begin ReadRequest 0",
                "end ReadRequest last=true",
            ]
        );
        // The payload landed at the offsets its headers name.
        assert!(whole.mem[..251]
            .iter()
            .enumerate()
            .all(|(i, &(a, b))| a == i as u64 && b == i as u8));
        assert_eq!(&whole.mem[251..], &[(0x5000, 0), (0x5001, 1), (0x5002, 2)]);
        // Byte by byte, and at every single cut.
        let (bytewise, res, _, _) = run(&s, 1..s.len(), crc_on);
        res.unwrap();
        assert_eq!(
            (&bytewise.events, &bytewise.mem),
            (&whole.events, &whole.mem)
        );
        for cut in 0..s.len() {
            let (one, res, _, _) = run(&s, [cut].into_iter(), crc_on);
            res.unwrap();
            assert_eq!(one.events, whole.events, "cut at {cut}");
        }
    }
}

#[test]
fn a_bad_crc_stops_the_stream_before_the_fpdu_ends() {
    let s = stream(true);
    // Any flipped bit of the first FPDU (but for its length field) is a
    // CRC error, a refused header, or (in the payload) still a CRC error.
    let first = fpdu_len(UNTAGGED_LEN + 101);
    for i in LEN_FIELD..first {
        let mut bad = s.clone();
        bad[i] ^= 0x01;
        let (rec, res, n, _) = run(&bad, core::iter::empty(), true);
        let f = res.unwrap_err();
        assert_eq!(n, 0, "byte {i}");
        assert!(!rec.events.iter().any(|e| e.starts_with("end")), "byte {i}");
        if i >= first - CRC_LEN || i >= LEN_FIELD + UNTAGGED_LEN {
            assert_eq!(f.cause, cause::MPA_CRC, "byte {i}");
            assert!(f.fpdu.is_some());
        }
    }
    // Without CRC the trailer is not looked at.
    let mut s = stream(false);
    let last = s.len() - 1;
    s[last] = 0xFF;
    run(&s, core::iter::empty(), false).1.unwrap();
}

#[test]
fn a_refused_header_or_sink_ends_the_stream() {
    // A reserved opcode in the second FPDU: the first one completed.
    let mut s = fpdu(&send(1, 0, true), b"abcd", true);
    let second = s.len();
    s.extend(fpdu(&send(2, 0, true), b"efgh", true));
    s[second + 3] = 0x4D;
    let (rec, res, n, _) = run(&s, core::iter::empty(), true);
    assert_eq!(n, 1);
    assert_eq!(rec.events.len(), 2);
    assert_eq!(res.unwrap_err().cause, cause::UNEXPECTED_OPCODE);
    // The sink refuses the headers: no byte is placed.
    let mut r = Receiver::new(true, crc32c_update);
    let mut rec = Record {
        refuse_begin: Some(cause::INVALID_STAG),
        ..Record::default()
    };
    let f = r
        .feed(&fpdu(&write(0, true), b"xyz", true), &mut rec)
        .unwrap_err();
    assert_eq!(f.cause, cause::INVALID_STAG);
    assert_eq!(f.fpdu.unwrap().hdr.opcode, Opcode::Write);
    assert!(rec.mem.is_empty());
    // A dead stream takes nothing more.
    let f = r
        .feed(&fpdu(&send(1, 0, true), b"", true), &mut rec)
        .unwrap_err();
    assert_eq!(f.cause, cause::STREAM_CATASTROPHIC);
    assert_eq!(rec.events.len(), 1);
}

#[test]
fn random_streams_never_panic() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let good = stream(true);
    for _ in 0..3000 {
        let mut s = good.clone();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % s.len() as u64) as usize;
            s[i] = (x >> 32) as u8;
        }
        let step = 1 + (x >> 48) as usize % 64;
        let _ = run(&s, (step..s.len()).step_by(step), x & 1 == 0);
    }
}
