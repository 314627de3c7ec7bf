//! Host micro-benchmarks of the sans-IO code (`cargo bench -p
//! softrnic-host-tests`, `benches/core.rs`): CRC-32 (the ICRC's) and CRC-32C
//! (MPA's) in GB/s, RoCE packets built and parsed per second, and FPDUs
//! built and received (parsed, CRC checked, placed) per second.  The
//! kernel uses its own CRC routines (with the CPU's instructions where it
//! has them); these figures are the portable table-driven code the host
//! tests run, and the header work around it, which the kernel shares.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::crc::{crc32_update, crc32c_update, Update};
use crate::icrc;
use crate::iwarp::fpdu::{build_header, Header, Opcode, Parsed, Placement, RdmapHeader};
use crate::iwarp::fpdu::{Cause, Trailer, MAX_HEADER};
use crate::iwarp::rx::{Receiver, Sink};
use crate::psn::Psn;
use crate::roce_wire::{build_packet, parse, Bth, Headers, Opcode as RoceOp, Payload, Reth};

/// One figure: what, how much per second, the unit.
pub struct Figure {
    pub name: &'static str,
    pub per_sec: f64,
    pub unit: &'static str,
}

/// Run `f` (which handles `per_call` units) for about `secs` seconds.
fn rate(secs: f64, per_call: f64, mut f: impl FnMut()) -> f64 {
    let limit = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < limit {
        for _ in 0..64 {
            f();
        }
        calls += 64;
    }
    calls as f64 * per_call / start.elapsed().as_secs_f64()
}

fn roce_write(payload: &[u8]) -> Vec<u8> {
    let mut hdr = Headers::new(Bth {
        opcode: RoceOp::RcRdmaWriteOnly,
        solicited: false,
        mig_req: false,
        pad_cnt: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp: 0x11,
        ack_req: true,
        psn: Psn::new(7),
    });
    hdr.reth = Some(Reth {
        va: 0x1000,
        rkey: 0x22,
        dma_len: payload.len() as u32,
    });
    let mut buf = vec![0u8; 64 + payload.len()];
    let n = build_packet(&mut buf, &hdr, payload).expect("a valid packet");
    buf.truncate(n);
    buf
}

fn fpdu(h: &Header, payload: &[u8], crc: bool) -> Vec<u8> {
    let mut buf = [0u8; MAX_HEADER];
    let n = build_header(&mut buf, h, payload.len()).expect("a valid header");
    let t = Trailer::new(
        &buf[..n],
        &[payload],
        crc.then_some(crc32c_update as Update),
    );
    [&buf[..n], payload, t.as_bytes()].concat()
}

/// A sink that copies what is placed into one buffer, as placement would.
struct Place(Vec<u8>);

impl Sink for Place {
    fn begin(&mut self, _p: &Parsed) -> Result<(), Cause> {
        Ok(())
    }
    fn place(&mut self, _p: &Parsed, offset: usize, data: &[u8]) -> Result<(), Cause> {
        if let Some(d) = self.0.get_mut(offset..offset + data.len()) {
            d.copy_from_slice(data);
        }
        Ok(())
    }
    fn end(&mut self, _p: &Parsed) -> Result<(), Cause> {
        Ok(())
    }
}

/// Every figure, each measured for about `secs` seconds.
pub fn run(secs: f64) -> Vec<Figure> {
    let mut out = Vec::new();
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let gb = data.len() as f64 / 1e9;
    out.push(Figure {
        name: "CRC-32 (ICRC step), 4 KiB",
        per_sec: rate(secs, gb, || {
            black_box(crc32_update(!0, black_box(&data)));
        }),
        unit: "GB/s",
    });
    out.push(Figure {
        name: "CRC-32C (MPA), 4 KiB",
        per_sec: rate(secs, gb, || {
            black_box(crc32c_update(!0, black_box(&data)));
        }),
        unit: "GB/s",
    });

    // A RoCEv2 packet: IPv4 + UDP + the IB transport packet.
    let ib = roce_write(&data);
    let mut pkt = vec![
        0x45u8, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    let total = 20 + 8 + ib.len();
    pkt[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    pkt.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7]);
    pkt.extend_from_slice(&((8 + ib.len()) as u16).to_be_bytes());
    pkt.extend_from_slice(&[0, 0]);
    pkt.extend_from_slice(&ib);
    let body = pkt.len() - 4;
    out.push(Figure {
        name: "ICRC of a 4 KiB RoCEv2 WRITE",
        per_sec: rate(secs, 1e-6, || {
            black_box(icrc::icrc(black_box(&pkt[..body])));
        }),
        unit: "M packets/s",
    });
    let small = roce_write(&data[..64]);
    out.push(Figure {
        name: "RoCE WRITE headers parsed (64 B payload)",
        per_sec: rate(secs, 1e-6, || {
            black_box(parse(black_box(&small)).is_ok());
        }),
        unit: "M packets/s",
    });
    let mut buf = vec![0u8; 256];
    out.push(Figure {
        name: "RoCE WRITE built (64 B payload)",
        per_sec: rate(secs, 1e-6, || {
            let p = parse(&small).expect("parses");
            let Payload::Linear(payload) = p.payload else {
                return;
            };
            black_box(build_packet(&mut buf, &p.hdr, payload).is_ok());
        }),
        unit: "M packets/s",
    });

    // A stream of 16 WRITE FPDUs of 1408 bytes (an MSS-sized FPDU each).
    for crc in [false, true] {
        let mut stream = Vec::new();
        for i in 0..16u64 {
            let h = Header {
                opcode: Opcode::Write,
                last: i == 15,
                place: Placement::Tagged {
                    stag: 0x100,
                    to: i * 1408,
                },
                rdmap: RdmapHeader::None,
            };
            stream.extend(fpdu(&h, &data[..1408], crc));
        }
        let mut sink = Place(vec![0u8; 16 * 1408]);
        out.push(Figure {
            name: if crc {
                "FPDUs received, CRC on (1408 B each, placed)"
            } else {
                "FPDUs received, CRC off (1408 B each, placed)"
            },
            per_sec: rate(secs, 16e-6, || {
                let mut r = Receiver::new(crc, crc32c_update);
                black_box(r.feed(black_box(&stream), &mut sink).is_ok());
            }),
            unit: "M FPDUs/s",
        });
    }
    let h = Header {
        opcode: Opcode::Write,
        last: true,
        place: Placement::Tagged { stag: 0x100, to: 0 },
        rdmap: RdmapHeader::None,
    };
    let mut hb = [0u8; MAX_HEADER];
    out.push(Figure {
        name: "FPDU headers built (WRITE)",
        per_sec: rate(secs, 1e-6, || {
            black_box(build_header(&mut hb, black_box(&h), 1408).is_ok());
        }),
        unit: "M FPDUs/s",
    });
    out
}
