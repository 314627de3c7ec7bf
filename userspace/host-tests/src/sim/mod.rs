//! A deterministic simulation of two RoCE endpoints (RC, UC or UD) joined
//! by a lossy link, driving the kernel module's own protocol machines
//! (`core/roce/`).  Everything random comes from one seeded generator, so
//! a seed replays a run exactly; time is simulated (nanoseconds; a 10 Gbit/s link), so a run
//! of millions of packets takes seconds.  The approach of smoltcp's and
//! TigerBeetle's tests: the state machines without I/O, a world that owns
//! the I/O and the clock, faults injected by the world, and properties
//! checked as the run goes, not only at its end.
//!
//! Both endpoints post work to each other at once.  What is checked:
//! - every work request completes exactly once, in posting order, with the
//!   status the rules give (RC: SUCCESS on a link that loses, duplicates,
//!   reorders, corrupts and delays, within the retry budget);
//! - every byte lands where its key and offset say: WRITE data at its
//!   target (RC: complete when the WRITE completes), READ data and atomic
//!   results in the requester's buffer, SEND data in the receive buffer
//!   its completion names, in order (RC), in order with gaps (UC), intact
//!   (UD); and nowhere else: guard bytes after every buffer never change;
//! - atomics execute exactly once (the original values form the chain the
//!   requester expects);
//! - no requester sends past its window or has more READ/atomics in flight
//!   than max_rd_atomic, no responder queues more than max_dest_rd_atomic;
//! - the run ends: every request completes, no timer or retry loops on.

pub mod endpoint;
pub mod iwarp;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use endpoint::{Attrs, Cqe, Endpoint, Mr, Recv, Wqe, BAD_ICRC};

use crate::roce::wc;
use crate::transport_rules::{MsgOp, Service};

/// splitmix64: small, fast, and the same on every machine.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `p` per million.
    pub fn ppm(&mut self, p: u32) -> bool {
        self.below(1_000_000) < u64::from(p)
    }
}

/// The link's faults, in parts per million of packets.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    pub loss: u32,
    pub dup: u32,
    pub corrupt: u32,
    /// Packets held back (reordered behind later ones).
    pub reorder: u32,
    /// Base one-way delay and its jitter, nanoseconds.
    pub delay: u64,
    pub jitter: u64,
    /// Losses in bursts (Gilbert-Elliott, as netem's `loss gemodel`), per
    /// direction: a packet moves the link into its bad state with `enter`
    /// ppm, out of it with `leave` ppm; in the bad state `lose` ppm are
    /// lost (on top of `loss`).
    pub burst: Option<Burst>,
}

#[derive(Clone, Copy, Debug)]
pub struct Burst {
    pub enter: u32,
    pub leave: u32,
    pub lose: u32,
}

impl Faults {
    pub const NONE: Faults = Faults {
        loss: 0,
        dup: 0,
        corrupt: 0,
        reorder: 0,
        delay: 5_000,
        jitter: 0,
        burst: None,
    };

    /// A link that loses and corrupts but keeps order and never duplicates:
    /// what UC may assume (an IB fabric delivers a path's packets in order,
    /// and a RoCE flow keeps one path).  A UC responder takes any FIRST or
    /// ONLY packet as a new message, whatever its PSN (no duplicate
    /// detection in UC), so a late or repeated one is delivered again.
    pub const LOSSY_IN_ORDER: Faults = Faults {
        loss: 20_000,
        dup: 0,
        corrupt: 10_000,
        reorder: 0,
        delay: 5_000,
        jitter: 0,
        burst: None,
    };

    /// A hostile link: 2 % loss, 1 % duplication, 1 % corruption, 2 %
    /// reordering, jittered delay.
    pub const HOSTILE: Faults = Faults {
        loss: 20_000,
        dup: 10_000,
        corrupt: 10_000,
        reorder: 20_000,
        delay: 5_000,
        jitter: 2_000,
        burst: None,
    };
}

/// What a run does.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub svc: Service,
    pub seed: u64,
    /// Stop posting once this many packets have crossed the link.
    pub packets: u64,
    pub faults: Faults,
    pub mtu: u32,
    pub max_rd: u32,
    /// Receives are sometimes withheld (RNR NAKs on RC).
    pub starve_recvs: bool,
}

impl Config {
    pub fn new(svc: Service, seed: u64, packets: u64) -> Config {
        Config {
            svc,
            seed,
            packets,
            faults: Faults::HOSTILE,
            mtu: 256,
            max_rd: 4,
            starve_recvs: true,
        }
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Report {
    pub packets: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub reordered: u64,
    pub requests: u64,
    pub receives: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    pub rnr_naks: u64,
    pub seq_naks: u64,
    pub bad_icrc: u64,
    /// Local operations (fast registrations) run before the WQEs ahead of
    /// them completed.
    pub early_locals: u64,
    pub sim_ns: u64,
    /// A digest of every completion, to show a seed replays exactly.
    pub digest: u64,
    /// Every property violation, in order (empty: the run is clean).
    pub faults: Vec<String>,
}

// The memory of each endpoint (offsets).
const SQ_SLOTS: usize = 64;
const RQ_SLOTS: usize = 64;
const MAX_LEN: u64 = 40 * 256;
const GUARD: u64 = 64;
const SLOT: u64 = MAX_LEN + GUARD;
/// Static data: the sources of SENDs and WRITEs, and what READs read.
const SRC: u64 = 0;
const SRC_LEN: u64 = 64 * 1024;
/// READ and atomic results, one slot per send-queue slot.
const SINK: u64 = SRC + SRC_LEN;
/// The peer's WRITE targets, one slot per send-queue slot of the peer.
const TARGET: u64 = SINK + SQ_SLOTS as u64 * SLOT;
/// Receive buffers, one slot per receive-queue slot.
const RECV: u64 = TARGET + SQ_SLOTS as u64 * SLOT;
/// The atomic word.
const ATOMIC: u64 = RECV + RQ_SLOTS as u64 * SLOT;
const MEM: usize = (ATOMIC + 64) as usize;

const RKEY_TARGET: u32 = 0x100;
const RKEY_SRC: u32 = 0x200;
const RKEY_ATOMIC: u32 = 0x300;

fn guard_byte(i: u64) -> u8 {
    (i as u8).wrapping_mul(31) ^ 0xA5
}

/// A message the receiving side expects a receive completion for.
#[derive(Clone, Copy, Debug)]
struct Expected {
    /// Source offset and length of a SEND; `None`: a WRITE with immediate.
    src: Option<(u64, u32)>,
    imm: Option<u32>,
}

/// A posted send WR, until it completes.
#[derive(Clone, Copy, Debug)]
struct Posted {
    wqe: Wqe,
    /// Atomics: the original value the target must return.
    orig: u64,
}

/// One direction's book-keeping (the requester's view and what its peer
/// must receive).
#[derive(Default)]
struct Book {
    posted: VecDeque<Posted>,
    next_wr: u64,
    /// Receive completions the peer owes, in order.
    expect: VecDeque<Expected>,
    /// The model of the peer's atomic word.
    atomic: u64,
    completed: u64,
}

struct Packet {
    to: usize,
    frame: Vec<u8>,
}

pub struct World {
    cfg: Config,
    rng: Rng,
    ep: [Endpoint; 2],
    book: [Book; 2],
    /// Receives posted per endpoint (their wr_id) and the next slot.
    recv_next: [u64; 2],
    link: BinaryHeap<Reverse<(u64, u64, usize)>>,
    frames: Vec<Option<Packet>>,
    free: Vec<usize>,
    seq: u64,
    now: u64,
    /// When each endpoint's transmitter is free again.
    tx_free: [u64; 2],
    /// Each direction's burst state (bad).
    bad: [bool; 2],
    report: Report,
    posting: bool,
    /// The last events (SIM_TRACE=1 prints them with a failure).
    trace: VecDeque<String>,
    tracing: bool,
}

/// Nanoseconds a byte takes on the wire (10 Gbit/s).
const NS_PER_BYTE: f64 = 0.8;
/// An endpoint stops building packets while its transmitter is this far
/// behind (its queue to the wire is full).
const TX_BACKLOG: u64 = 20_000;

impl World {
    pub fn new(cfg: Config) -> World {
        let attrs = Attrs {
            svc: cfg.svc,
            mtu: cfg.mtu,
            timeout: 7,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 2,
            max_rd: cfg.max_rd,
            qkey: 0x1111_0000,
        };
        let mut rng = Rng::new(cfg.seed);
        let mk = |qpn, peer, rng: &mut Rng| {
            let mut e = Endpoint::new(qpn, peer, attrs, MEM, SQ_SLOTS);
            for (i, b) in e.d.mem.iter_mut().enumerate() {
                *b = guard_byte(i as u64);
            }
            for b in &mut e.d.mem[SRC as usize..(SRC + SRC_LEN) as usize] {
                *b = rng.next() as u8;
            }
            e.d.mem[ATOMIC as usize..ATOMIC as usize + 8].copy_from_slice(&0u64.to_ne_bytes());
            e.d.mrs = vec![
                mr(
                    RKEY_TARGET,
                    TARGET,
                    SQ_SLOTS as u64 * SLOT,
                    false,
                    true,
                    false,
                ),
                mr(RKEY_SRC, SRC, SRC_LEN, true, false, false),
                mr(RKEY_ATOMIC, ATOMIC, 8, false, false, true),
            ];
            e
        };
        let a = mk(0x11, 0x22, &mut rng);
        let b = mk(0x22, 0x11, &mut rng);
        World {
            cfg,
            rng,
            ep: [a, b],
            book: [Book::default(), Book::default()],
            recv_next: [0, 0],
            link: BinaryHeap::new(),
            frames: Vec::new(),
            free: Vec::new(),
            seq: 0,
            now: 0,
            tx_free: [0, 0],
            bad: [false, false],
            report: Report::default(),
            posting: true,
            trace: VecDeque::new(),
            tracing: std::env::var("SIM_TRACE").is_ok(),
        }
    }

    fn note(&mut self, f: impl FnOnce() -> String) {
        if self.tracing {
            if self.trace.len() == 400 {
                self.trace.pop_front();
            }
            let m = f();
            self.trace.push_back(format!("{:>10} {m}", self.now));
        }
    }

    fn describe(frame: &[u8]) -> String {
        match crate::roce_wire::parse(&frame[28..]) {
            Ok(p) => format!(
                "qp {:#x} {:?} psn {:#x}{} aeth {:?} len {}",
                p.hdr.bth.dest_qp,
                p.hdr.bth.opcode,
                p.hdr.bth.psn.get(),
                if p.hdr.bth.ack_req { " A" } else { "" },
                p.hdr.aeth.map(|a| a.syndrome),
                p.payload.len()
            ),
            Err(e) => format!("unparsable {e:?}"),
        }
    }

    fn fault(&mut self, m: String) {
        if self.tracing && self.report.faults.is_empty() {
            for l in &self.trace {
                eprintln!("{l}");
            }
        }
        if self.report.faults.len() < 20 {
            self.report.faults.push(format!("t={}ns: {m}", self.now));
        }
    }

    /// A random operation the service carries.
    fn pick_op(&mut self) -> MsgOp {
        let r = self.rng.below(100);
        match self.cfg.svc {
            Service::Ud => {
                if r < 50 {
                    MsgOp::Send
                } else {
                    MsgOp::SendImm
                }
            }
            Service::Uc => match r {
                0..30 => MsgOp::Send,
                30..45 => MsgOp::SendImm,
                45..85 => MsgOp::Write,
                _ => MsgOp::WriteImm,
            },
            Service::Rc => match r {
                0..20 => MsgOp::Send,
                20..30 => MsgOp::SendImm,
                30..55 => MsgOp::Write,
                55..65 => MsgOp::WriteImm,
                65..85 => MsgOp::Read,
                85..93 => MsgOp::FetchAdd,
                _ => MsgOp::CmpSwap,
            },
        }
    }

    fn pick_len(&mut self) -> u32 {
        let mtu = u64::from(self.cfg.mtu);
        let max = if self.cfg.svc == Service::Ud {
            mtu
        } else {
            match self.rng.below(10) {
                0..3 => mtu,
                3..8 => 8 * mtu,
                _ => MAX_LEN,
            }
        };
        // Zero-length messages too (a few).
        self.rng.below(max + 1) as u32
    }

    /// Endpoint `i` posts a send WR to its peer.
    fn post(&mut self, i: usize) {
        let op = self.pick_op();
        let len = self.pick_len();
        let seq = self.book[i].next_wr;
        self.book[i].next_wr += 1;
        let slot = seq % SQ_SLOTS as u64;
        let mut w = Wqe {
            wr_id: seq,
            op: Some(op),
            laddr: SRC,
            len,
            imm: self.rng.next() as u32,
            fence: self.rng.ppm(50_000),
            solicited: self.rng.ppm(100_000),
            dest_qp: self.ep[1 - i].d.qpn,
            qkey: self.ep[1 - i].d.attrs.qkey,
            ..Wqe::default()
        };
        let mut orig = 0;
        // Now and then a local operation instead: a fast registration
        // (runs when reached) or a local invalidate (waits for the head).
        if self.rng.ppm(30_000) {
            w.op = None;
            w.len = 0;
            w.early = self.rng.ppm(500_000);
            self.book[i].posted.push_back(Posted { wqe: w, orig });
            self.ep[i].post_send(w);
            return;
        }
        match op {
            MsgOp::Send | MsgOp::SendImm | MsgOp::SendInv => {
                let off = self.rng.below(SRC_LEN - u64::from(len) + 1);
                w.laddr = SRC + off;
                self.book[i].expect.push_back(Expected {
                    src: Some((off, len)),
                    imm: (op == MsgOp::SendImm).then_some(w.imm),
                });
            }
            MsgOp::Write | MsgOp::WriteImm => {
                let off = self.rng.below(SRC_LEN - u64::from(len) + 1);
                w.laddr = SRC + off;
                w.raddr = TARGET + slot * SLOT;
                w.rkey = RKEY_TARGET;
                // The target slot is free again: fresh guard bytes (a UC
                // WRITE may have left part of an older message).
                let peer = &mut self.ep[1 - i].d.mem;
                for k in w.raddr..w.raddr + SLOT {
                    peer[k as usize] = guard_byte(k);
                }
                if op == MsgOp::WriteImm {
                    self.book[i].expect.push_back(Expected {
                        src: None,
                        imm: Some(w.imm),
                    });
                }
            }
            MsgOp::Read => {
                w.laddr = SINK + slot * SLOT;
                w.raddr = SRC + self.rng.below(SRC_LEN - u64::from(len) + 1);
                w.rkey = RKEY_SRC;
                self.reguard_sink(i, w.laddr);
            }
            MsgOp::CmpSwap | MsgOp::FetchAdd => {
                w.len = 8;
                w.laddr = SINK + slot * SLOT;
                w.raddr = ATOMIC;
                w.rkey = RKEY_ATOMIC;
                self.reguard_sink(i, w.laddr);
                orig = self.book[i].atomic;
                if op == MsgOp::CmpSwap {
                    // Compare with the value the word must hold by then: a
                    // second execution, or a lost one, breaks the chain.
                    w.compare = orig;
                    w.swap_add = self.rng.next();
                    self.book[i].atomic = w.swap_add;
                } else {
                    w.swap_add = self.rng.below(1000) + 1;
                    self.book[i].atomic = orig.wrapping_add(w.swap_add);
                }
            }
        }
        self.book[i].posted.push_back(Posted { wqe: w, orig });
        self.ep[i].post_send(w);
    }

    fn reguard_sink(&mut self, i: usize, at: u64) {
        let mem = &mut self.ep[i].d.mem;
        for k in at..at + SLOT {
            mem[k as usize] = guard_byte(k);
        }
    }

    /// Keep both sides' send queues full and their receive queues stocked
    /// (now and then withheld, for RNR).
    fn top_up(&mut self) {
        for i in 0..2 {
            while self.posting && self.ep[i].sq_room() && !self.ep[i].d.error {
                self.post(i);
            }
            let starve = self.cfg.starve_recvs && self.now / 2_000_000 % 7 == 3;
            if starve {
                continue;
            }
            // At most RQ_SLOTS - 2 queued and one being filled: a slot is
            // reused only once its receive completed.
            let want = 16 + self.rng.below(RQ_SLOTS as u64 - 18) as usize;
            while self.ep[i].d.rq.len() < want {
                let n = self.recv_next[i];
                self.recv_next[i] += 1;
                let addr = RECV + (n % RQ_SLOTS as u64) * SLOT;
                let mem = &mut self.ep[i].d.mem;
                for k in addr..addr + SLOT {
                    mem[k as usize] = guard_byte(k);
                }
                self.ep[i].d.rq.push_back(Recv {
                    wr_id: n,
                    addr,
                    len: MAX_LEN as u32,
                });
            }
        }
    }

    /// Send what endpoint `i` has to send.
    fn pump(&mut self, i: usize) {
        for _ in 0..64 {
            if self.tx_free[i] > self.now + TX_BACKLOG {
                break;
            }
            let more = self.ep[i].pump();
            let out = std::mem::take(&mut self.ep[i].d.outbox);
            for f in out {
                self.transmit(i, f);
            }
            self.drain_faults(i);
            if !more {
                break;
            }
        }
    }

    fn drain_faults(&mut self, i: usize) {
        let f = std::mem::take(&mut self.ep[i].d.faults);
        for m in f {
            self.fault(format!("endpoint {i}: {m}"));
        }
    }

    /// Put a frame from endpoint `from` on the link, with its faults.
    fn transmit(&mut self, from: usize, mut frame: Vec<u8>) {
        let to = 1 - from;
        self.report.packets += 1;
        self.note(|| format!("{from} sends {}", Self::describe(&frame)));
        let depart = self.now.max(self.tx_free[from]) + (frame.len() as f64 * NS_PER_BYTE) as u64;
        self.tx_free[from] = depart;
        let f = self.cfg.faults;
        let mut burst_lost = false;
        if let Some(b) = f.burst {
            let bad = &mut self.bad[from];
            *bad = if *bad {
                !self.rng.ppm(b.leave)
            } else {
                self.rng.ppm(b.enter)
            };
            burst_lost = *bad && self.rng.ppm(b.lose);
        }
        if burst_lost || self.rng.ppm(f.loss) {
            self.note(|| "  lost".into());
            self.report.lost += 1;
            return;
        }
        if self.rng.ppm(f.corrupt) {
            self.report.corrupted += 1;
            // A bit of the transport packet (the part the ICRC covers).
            let at = 28 + self.rng.below(frame.len() as u64 - 28) as usize;
            frame[at] ^= 1 << self.rng.below(8);
        }
        let copies = if self.rng.ppm(f.dup) {
            self.report.duplicated += 1;
            2
        } else {
            1
        };
        for c in 0..copies {
            let mut at = depart
                + f.delay
                + if f.jitter > 0 {
                    self.rng.below(f.jitter)
                } else {
                    0
                };
            if self.rng.ppm(f.reorder) {
                self.report.reordered += 1;
                at += 20_000 + self.rng.below(100_000);
            }
            at += c;
            let p = Packet {
                to,
                frame: frame.clone(),
            };
            let slot = match self.free.pop() {
                Some(s) => {
                    self.frames[s] = Some(p);
                    s
                }
                None => {
                    self.frames.push(Some(p));
                    self.frames.len() - 1
                }
            };
            self.seq += 1;
            self.link.push(Reverse((at, self.seq, slot)));
        }
    }

    /// Check endpoint `i`'s new completions.
    fn check_completions(&mut self, i: usize) {
        let cqes = std::mem::take(&mut self.ep[i].d.send_cq);
        for c in cqes {
            self.check_send(i, c);
        }
        let cqes = std::mem::take(&mut self.ep[i].d.recv_cq);
        for c in cqes {
            self.check_recv(i, c);
        }
    }

    fn digest(&mut self, v: u64) {
        self.report.digest = (self.report.digest ^ v).wrapping_mul(0x100_0000_01B3);
    }

    fn check_send(&mut self, i: usize, c: Cqe) {
        self.digest((c.wr_id << 8) | u64::from(c.status));
        self.report.requests += 1;
        let Some(p) = self.book[i].posted.pop_front() else {
            self.fault(format!(
                "endpoint {i}: completion of wr {} never posted",
                c.wr_id
            ));
            return;
        };
        if p.wqe.wr_id != c.wr_id {
            let m = format!(
                "endpoint {i}: completion of wr {} where wr {} was next",
                c.wr_id, p.wqe.wr_id
            );
            self.fault(m);
            return;
        }
        self.book[i].completed += 1;
        if c.status != wc::SUCCESS {
            let m = format!(
                "endpoint {i}: wr {} ({:?}, {} bytes) completed with status {}",
                c.wr_id, p.wqe.op, p.wqe.len, c.status
            );
            self.fault(m);
            return;
        }
        let w = p.wqe;
        let peer = 1 - i;
        if w.op.is_none() {
            let ran = self.ep[i].d.local_runs.pop_front();
            if ran != Some(w.wr_id) {
                self.fault(format!(
                    "endpoint {i}: local operation wr {} completed, but the one run next was {ran:?} (not run, or run twice)",
                    w.wr_id
                ));
            }
        }
        match w.op {
            Some(MsgOp::Write | MsgOp::WriteImm) if self.cfg.svc == Service::Rc => {
                // Placed by the time the WRITE completes.
                if self.bytes(i, w.laddr, w.len) != self.bytes(peer, w.raddr, w.len) {
                    self.fault(format!(
                        "endpoint {i}: wr {}: WRITE of {} bytes not at its target",
                        w.wr_id, w.len
                    ));
                }
                self.check_guard(
                    peer,
                    w.raddr + u64::from(w.len),
                    w.raddr + SLOT,
                    "a WRITE target",
                );
            }
            Some(MsgOp::Read) => {
                if self.bytes(peer, w.raddr, w.len) != self.bytes(i, w.laddr, w.len) {
                    self.fault(format!(
                        "endpoint {i}: wr {}: READ of {} bytes returned other data",
                        w.wr_id, w.len
                    ));
                }
                self.check_guard(i, w.laddr + u64::from(w.len), w.laddr + SLOT, "a READ sink");
            }
            Some(MsgOp::CmpSwap | MsgOp::FetchAdd) => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.ep[i].d.mem[w.laddr as usize..w.laddr as usize + 8]);
                let got = u64::from_ne_bytes(b);
                if got != p.orig {
                    self.fault(format!("endpoint {i}: wr {}: {:?} returned {got:#x}, expected {:#x} (executed twice, or lost)", w.wr_id, w.op, p.orig));
                }
                self.check_guard(i, w.laddr + 8, w.laddr + SLOT, "an atomic sink");
            }
            _ => {}
        }
    }

    /// `len` bytes at `addr` of endpoint `i`'s memory.
    fn bytes(&self, i: usize, addr: u64, len: u32) -> &[u8] {
        &self.ep[i].d.mem[addr as usize..(addr + u64::from(len)) as usize]
    }

    fn check_guard(&mut self, i: usize, from: u64, to: u64, what: &str) {
        let mem = &self.ep[i].d.mem;
        if let Some(k) = (from..to).find(|&k| mem[k as usize] != guard_byte(k)) {
            self.fault(format!("endpoint {i}: byte {k:#x} after {what} changed"));
        }
    }

    /// A receive completion at endpoint `i`: a message from its peer.
    fn check_recv(&mut self, i: usize, c: Cqe) {
        self.digest((c.wr_id << 8) | u64::from(c.status) | (1 << 63));
        self.report.receives += 1;
        let peer = 1 - i;
        if c.status != wc::SUCCESS {
            self.fault(format!(
                "endpoint {i}: receive {} completed with status {}",
                c.wr_id, c.status
            ));
            return;
        }
        let addr = RECV + (c.wr_id % RQ_SLOTS as u64) * SLOT;
        let data =
            self.ep[i].d.mem[addr as usize..(addr + u64::from(c.byte_len)) as usize].to_vec();
        let matches = |e: &Expected, src: &[u8]| -> bool {
            match e.src {
                Some((off, len)) => {
                    !c.write_imm
                        && len == c.byte_len
                        && e.imm == c.imm
                        && src[off as usize..(off + u64::from(len)) as usize] == data[..]
                }
                None => c.write_imm && e.imm == c.imm,
            }
        };
        let src = self.ep[peer].d.mem[SRC as usize..(SRC + SRC_LEN) as usize].to_vec();
        let book = &mut self.book[peer];
        let found = match self.cfg.svc {
            // In order, none missing.
            Service::Rc => book
                .expect
                .pop_front()
                .filter(|e| matches(e, &src))
                .is_some(),
            // In order; lost messages are skipped.
            Service::Uc => {
                let at = book.expect.iter().position(|e| matches(e, &src));
                at.map(|k| book.expect.drain(..=k)).is_some()
            }
            // Any order; a duplicated datagram may arrive twice.
            Service::Ud => {
                let at = book.expect.iter().position(|e| matches(e, &src));
                if let Some(k) = at {
                    // Keep a window of recent datagrams for duplicates.
                    if k > 4096 {
                        book.expect.drain(..k - 4096);
                    }
                }
                at.is_some()
            }
        };
        if !found {
            self.fault(format!("endpoint {i}: receive {} ({} bytes, imm {:?}, write_imm {}) matches no message sent", c.wr_id, c.byte_len, c.imm, c.write_imm));
        }
        if !c.write_imm {
            // UC: an aborted message may have left bytes up to MAX_LEN.
            let from = match self.cfg.svc {
                Service::Uc => MAX_LEN,
                _ => u64::from(c.byte_len),
            };
            self.check_guard(i, addr + from, addr + SLOT, "a receive buffer");
        }
    }

    /// Every guard byte of `i`'s WRITE targets (nothing written outside
    /// the WRITEs' ranges).
    fn check_all_guards(&mut self, i: usize) {
        for s in 0..SQ_SLOTS as u64 {
            let at = TARGET + s * SLOT;
            self.check_guard(i, at + MAX_LEN, at + SLOT, "a WRITE target slot");
        }
        self.check_guard(i, ATOMIC + 8, ATOMIC + 64, "the atomic word");
    }

    /// Run until the packet budget is spent and everything posted is done.
    pub fn run(mut self) -> Report {
        let mut last_progress = 0u64;
        let mut progress_mark = 0u64;
        loop {
            if self.report.packets >= self.cfg.packets {
                self.posting = false;
            }
            // Completions are checked before anything is posted again (a
            // new WR reuses the buffers of the one that completed).
            for i in 0..2 {
                self.check_completions(i);
            }
            self.top_up();
            for i in 0..2 {
                self.pump(i);
                self.check_completions(i);
            }
            let done = self.book.iter().map(|b| b.completed).sum::<u64>();
            if done != progress_mark {
                progress_mark = done;
                last_progress = self.now;
            }
            let idle = !self.posting
                && self.book.iter().all(|b| b.posted.is_empty())
                && self.link.is_empty();
            if idle {
                break;
            }
            if self.ep.iter().any(|e| e.d.error) {
                self.fault("a QP entered ERR".into());
                break;
            }
            if self.now - last_progress > 10_000_000_000 || !self.report.faults.is_empty() {
                if self.report.faults.is_empty() {
                    self.fault("no completion for 10 s of simulated time: stuck".into());
                }
                break;
            }
            // The next event: a packet arriving or a timer.
            let next_pkt = self.link.peek().map(|Reverse((t, _, _))| *t);
            let next_timer = self.ep.iter().filter_map(|e| e.d.timer).min();
            // A transmitter that was too far behind has room again.
            let next_tx = self
                .tx_free
                .iter()
                .map(|t| t.saturating_sub(TX_BACKLOG))
                .filter(|t| *t > self.now)
                .min();
            let Some(t) = [next_pkt, next_timer, next_tx].into_iter().flatten().min() else {
                if self.book.iter().all(|b| b.posted.is_empty()) && !self.posting {
                    break;
                }
                if self.ep.iter().all(|e| e.d.rq.is_empty()) || self.cfg.starve_recvs {
                    // Waiting for receives to be posted again.
                    self.now += 100_000;
                    continue;
                }
                self.fault("nothing in flight, no timer, work outstanding: stuck".into());
                break;
            };
            self.now = self.now.max(t);
            for e in &mut self.ep {
                e.d.now = self.now;
            }
            if next_tx == Some(t) && next_pkt != Some(t) && next_timer != Some(t) {
                continue;
            }
            if next_pkt == Some(t) {
                let Some(Reverse((_, _, slot))) = self.link.pop() else {
                    break;
                };
                let Some(p) = self.frames[slot].take() else {
                    break;
                };
                self.free.push(slot);
                self.note(|| format!("{} gets {}", p.to, Self::describe(&p.frame)));
                self.ep[p.to].receive(&p.frame);
                let r = &self.ep[p.to].req;
                let st = (
                    r.una.get(),
                    r.retry_left,
                    r.head,
                    r.next_wqe,
                    r.wqe_pkt,
                    r.rd_inflight,
                    r.rewound_for_gap,
                );
                let rs = (
                    self.ep[p.to].resp.epsn.get(),
                    self.ep[p.to].resp.rd_pending(),
                );
                self.note(|| format!("   -> una {:#x} retry_left {} head {} next {}/{} rd {} gap {:?} | epsn {:#x} rd_pending {}", st.0, st.1, st.2, st.3, st.4, st.5, st.6, rs.0, rs.1));
                self.drain_faults(p.to);
            } else {
                for i in 0..2 {
                    if self.ep[i].d.timer.is_some_and(|d| d <= self.now) {
                        let r = &self.ep[i].req;
                        let (una, rl) = (r.una.get(), r.retry_left);
                        self.note(|| format!("{i} timer: una {una:#x} retry_left {rl}"));
                        self.ep[i].fire_timer();
                        self.drain_faults(i);
                    }
                }
            }
        }
        for i in 0..2 {
            self.check_completions(i);
            self.check_all_guards(i);
            let c = self.ep[i].d.counts;
            self.report.retransmits += c[crate::roce::Count::Retransmit as usize];
            self.report.timeouts += c[crate::roce::Count::AckTimeout as usize];
            self.report.rnr_naks += c[crate::roce::Count::RnrNakSent as usize];
            self.report.seq_naks += c[crate::roce::Count::SeqNakSent as usize];
            self.report.bad_icrc += c[BAD_ICRC];
            self.report.early_locals += self.ep[i].d.early_runs;
        }
        if self.cfg.svc == Service::Rc {
            for i in 0..2 {
                if !self.book[i].expect.is_empty() {
                    let n = self.book[i].expect.len();
                    self.fault(format!(
                        "endpoint {}: {n} messages sent but never received",
                        1 - i
                    ));
                }
            }
        }
        self.report.sim_ns = self.now;
        self.report
    }
}

fn mr(rkey: u32, base: u64, len: u64, read: bool, write: bool, atomic: bool) -> Mr {
    Mr {
        rkey,
        base,
        len,
        read,
        write,
        atomic,
        valid: true,
    }
}

/// Run one configuration.
pub fn run(cfg: Config) -> Report {
    World::new(cfg).run()
}
