//! A deterministic simulation of two iWARP endpoints joined by a TCP
//! stream, driving the kernel module's own machines (`core/iwarp/`:
//! `outbound` builds FPDUs, `rx` and `inbound` take them).  TCP neither
//! loses nor reorders, so the world's faults are the ones a stream has:
//! bytes delivered in pieces of any size at any time, a send buffer that
//! fills (the outbound machine must resume where it stopped), a socket
//! that takes what was built in pieces of any size, and, when
//! asked, flipped bits (which the CRC-32C must catch before a corrupted
//! message completes).  One seeded generator drives everything.
//!
//! Both ends post SENDs, WRITEs, READs and (with RFC 7306) WRITEs with
//! immediate data and fetch-adds at once.  Checked as the run goes:
//! - every WQE completes exactly once, in posting order, successfully; a
//!   SEND or WRITE only once the socket has taken all its bytes;
//! - SEND data and immediate data reach the peer's receives in order,
//!   intact; WRITE data lands at its target (a shadow copy of each end's
//!   target region, updated in posting order, must equal the region once
//!   the writer's WQEs are done); READ data and atomic results in the
//!   requester's memory equal the shadow at the time the READ was posted
//!   (the stream keeps the order); atomics run exactly once;
//! - the ORD and the IRD hold; a flipped bit ends the stream (a TERMINATE
//!   cause) or stalls it, and never completes a message wrongly.

use std::collections::VecDeque;

use super::Rng;
use crate::crc::{crc32c_update, Update};
use crate::iwarp::fpdu::*;
use crate::iwarp::inbound::*;
use crate::iwarp::outbound::*;
use crate::iwarp::rx::{Fault, Receiver};
use crate::roce::wc;
use crate::transport_rules::MsgOp;

/// Each end's memory: the region the peer writes and reads, the sinks of
/// its own READs, atomic results, and the sources of what it sends.
const MEM: usize = 1 << 20;
const TARGET_STAG: u32 = 0x100;
const TARGET: (usize, usize) = (0, 64 << 10);
const SINK_STAG: u32 = 0x200;
const SINK: usize = 64 << 10;
const SINK_SLOT: usize = 4096;
const ATOMIC_AT: usize = 320 << 10;
const SRC: usize = 384 << 10;
const SRC_SLOT: usize = 8192;
/// Send queue ring and receives kept posted.
const RING: u32 = 64;
const RECV_CAP: usize = 4096;

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub seed: u64,
    /// WQEs each end posts.
    pub messages: u64,
    pub max_fpdu: usize,
    pub crc: bool,
    pub extensions: bool,
    pub ord: u32,
    /// Bits flipped on the wire, per million bytes.
    pub flip_ppm: u32,
    /// WRITEs complete once placed at the peer (QPs joined by modify_qp).
    pub confirm: bool,
}

#[derive(Debug, Default)]
pub struct Report {
    pub fpdus: u64,
    pub bytes: u64,
    pub completions: u64,
    pub flips: u64,
    /// The TERMINATE causes that ended streams.
    pub terminated: Vec<Cause>,
    pub stalled: bool,
    pub faults: Vec<String>,
}

/// What a WQE's completion must show.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    Nothing,
    /// READ: the sink bytes.
    Read(usize, Vec<u8>),
    /// Fetch-add: the original value at the result slot.
    Atomic(usize, u64),
}

struct Side {
    mem: Vec<u8>,
    sq: Vec<(OutWqe, usize, Expect)>,
    out: Outbound<Vec<Slot>>,
    inb: InboundState,
    rx: Receiver,
    answers: VecDeque<Answer>,
    posted: VecDeque<Vec<u8>>,
    current: Option<Vec<u8>>,
    /// FPDUs built that the socket has not taken yet.
    tx: VecDeque<u8>,
    /// Bytes the socket has taken (the stream position after them).
    taken: u64,
    /// Bytes of this side's stream the peer has received and processed
    /// (its WRITEs placed).
    peer_placed: u64,
    /// Per WQE: the stream position after its last FPDU.
    ends: Vec<u64>,
    /// Bytes on their way to the peer.
    wire: VecDeque<u8>,
    completed: u32,
    /// What the peer is to receive from us, in order.
    sends: VecDeque<(Vec<u8>, Option<[u8; IMMEDIATE_LEN]>)>,
    /// Our picture of the peer's target region.
    shadow: Vec<u8>,
    dead: bool,
    max_reads_in: u32,
    /// READs posted and not completed: WQE, target bytes.
    reads_pending: Vec<(usize, usize, usize)>,
    /// Per WQE: how often it ran as a local operation.
    local_runs: Vec<u8>,
}

impl Side {
    /// Side `seed` (0 or 1): its memory's initial pattern, and its
    /// picture of the peer's target region (the same pattern, the peer's
    /// seed).
    fn new(seed: u8) -> Side {
        let pattern = |len: usize, seed: u8| -> Vec<u8> {
            (0..len)
                .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                .collect()
        };
        let mem = pattern(MEM, seed);
        let shadow = pattern(TARGET.1, seed ^ 1);
        Side {
            mem,
            sq: Vec::new(),
            out: Outbound::new(vec![Slot::default(); RING as usize]),
            inb: InboundState::new(8),
            rx: Receiver::new(false, crc32c_update),
            answers: VecDeque::new(),
            posted: VecDeque::new(),
            current: None,
            tx: VecDeque::new(),
            taken: 0,
            peer_placed: 0,
            ends: Vec::new(),
            wire: VecDeque::new(),
            completed: 0,
            sends: VecDeque::new(),
            shadow,
            dead: false,
            max_reads_in: 0,
            reads_pending: Vec::new(),
            local_runs: Vec::new(),
        }
    }
}

impl Side {
    /// The outbound machine, and its I/O over the rest of the side (`room`:
    /// bytes built ahead of the socket at most).
    fn outbound(&mut self, crc: bool, room: usize) -> (&mut Outbound<Vec<Slot>>, OutIo<'_>) {
        let io = OutIo {
            mem: &self.mem,
            sq: &self.sq,
            tx: &mut self.tx,
            base: self.taken,
            ends: &mut self.ends,
            answers: &mut self.answers,
            done: Vec::new(),
            local_runs: &mut self.local_runs,
            crc,
            room,
            fpdus: 0,
            answered: 0,
        };
        (&mut self.out, io)
    }
}

/// The outbound machine's I/O over one side.
struct OutIo<'a> {
    mem: &'a [u8],
    sq: &'a [(OutWqe, usize, Expect)],
    tx: &'a mut VecDeque<u8>,
    /// The stream position of `tx`'s first byte.
    base: u64,
    ends: &'a mut Vec<u64>,
    answers: &'a mut VecDeque<Answer>,
    done: Vec<(u32, u8)>,
    local_runs: &'a mut Vec<u8>,
    crc: bool,
    room: usize,
    fpdus: u64,
    answered: u32,
}

impl OutboundIo for OutIo<'_> {
    fn producer(&mut self) -> u32 {
        self.sq.len() as u32
    }
    fn slots(&self) -> u32 {
        RING
    }
    fn prepare(&mut self, index: u32) -> Option<OutWqe> {
        self.sq.get(index as usize).map(|e| e.0)
    }
    fn run_local(&mut self, index: u32) -> u8 {
        let i = index as usize;
        if self.local_runs.len() <= i {
            self.local_runs.resize(i + 1, 0);
        }
        self.local_runs[i] += 1;
        wc::SUCCESS
    }
    fn position(&self) -> u64 {
        self.base + self.tx.len() as u64
    }
    fn emit(&mut self, seg: &Segment, src: Source) -> Result<(), EmitFail> {
        if self.tx.len() >= self.room {
            return Err(EmitFail::Full);
        }
        let mut buf = [0u8; MAX_HEADER];
        let n =
            build_header(&mut buf, &seg.hdr, seg.len as usize).map_err(|_| EmitFail::BadMemory)?;
        let at = match src {
            Source::Wqe(i) => self.sq[i as usize].1 + seg.offset as usize,
            Source::Local { to, .. } => to as usize + seg.offset as usize,
            Source::None => 0,
        };
        let payload = self
            .mem
            .get(at..at + seg.len as usize)
            .ok_or(EmitFail::BadMemory)?;
        let step: Update = crc32c_update;
        let t = Trailer::new(&buf[..n], &[payload], self.crc.then_some(step));
        self.tx.extend(&buf[..n]);
        self.tx.extend(payload);
        self.tx.extend(t.as_bytes());
        self.fpdus += 1;
        if let Source::Wqe(i) = src {
            let i = i as usize;
            if self.ends.len() <= i {
                self.ends.resize(i + 1, 0);
            }
            self.ends[i] = self.base + self.tx.len() as u64;
        }
        Ok(())
    }
    fn complete(&mut self, index: u32, status: u8, _len: u32) {
        self.done.push((index, status));
    }
    fn next_answer(&mut self) -> Option<Answer> {
        self.answers.front().copied()
    }
    fn answered(&mut self) {
        self.answers.pop_front();
        self.answered += 1;
    }
}

/// The inbound rules' I/O over one side (the receiving one).
struct InIo<'a> {
    mem: &'a mut [u8],
    sq: &'a [(OutWqe, usize, Expect)],
    out: &'a mut Outbound<Vec<Slot>>,
    answers: &'a mut VecDeque<Answer>,
    posted: &'a mut VecDeque<Vec<u8>>,
    current: &'a mut Option<Vec<u8>>,
    received: Vec<(Received, Vec<u8>)>,
}

impl InboundIo for InIo<'_> {
    fn check_tagged(
        &mut self,
        stag: u32,
        to: u64,
        len: usize,
        what: TaggedUse,
    ) -> Result<(), Cause> {
        let (base, size) = match (stag, what) {
            (TARGET_STAG, TaggedUse::Write) => TARGET,
            (SINK_STAG, TaggedUse::ReadResponse) => (SINK, RING as usize * SINK_SLOT),
            (TARGET_STAG | SINK_STAG, _) => return Err(cause::ACCESS_RIGHTS),
            _ => return Err(cause::INVALID_STAG),
        };
        if (to as usize) < base || to as usize + len > base + size {
            return Err(cause::BASE_BOUNDS);
        }
        Ok(())
    }
    fn place_tagged(&mut self, _stag: u32, to: u64, data: &[u8]) -> Result<(), Cause> {
        let at = to as usize;
        self.mem[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn take_receive(&mut self) -> Result<u32, Cause> {
        let b = self.posted.pop_front().ok_or(cause::DDP_NO_BUFFER)?;
        let cap = b.len() as u32;
        *self.current = Some(b);
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
        let (_, w) = self.out.read_awaited()?;
        (w.op == Some(MsgOp::Read)).then_some(ReadAwaited {
            sink_stag: w.sink_stag,
            sink_to: w.sink_to,
            len: w.len,
        })
    }
    fn read_done(&mut self) -> Result<(), Cause> {
        self.out.read_answered();
        Ok(())
    }
    fn read_request(&mut self, r: &ReadRequest) -> Result<(), Cause> {
        // A zero-length READ touches no memory: its STag is not checked
        // (RFC 6581's RTR; the kernel's responder does the same).
        if r.len != 0
            && (r.src_stag != TARGET_STAG || r.src_to as usize + r.len as usize > TARGET.1)
        {
            return Err(cause::BASE_BOUNDS);
        }
        self.answers.push_back(Answer::Read(*r));
        Ok(())
    }
    fn atomic_request(&mut self, a: &AtomicRequest) -> Result<(), Cause> {
        let at = a.to as usize;
        if a.stag != TARGET_STAG || at % 8 != 0 || at + 8 > TARGET.1 {
            return Err(cause::BASE_BOUNDS);
        }
        let cell: &mut [u8; 8] = (&mut self.mem[at..at + 8]).try_into().unwrap();
        let orig = u64::from_le_bytes(*cell);
        let new = a.apply(orig);
        *cell = new.to_le_bytes();
        self.answers.push_back(Answer::Atomic(AtomicResponse {
            req_id: a.req_id,
            orig,
        }));
        Ok(())
    }
    fn atomic_response(&mut self, a: &AtomicResponse) -> Result<(), Cause> {
        let (i, w) = self.out.read_awaited().ok_or(cause::UNEXPECTED_OPCODE)?;
        if w.op != Some(MsgOp::FetchAdd) {
            return Err(cause::UNEXPECTED_OPCODE);
        }
        let at = self.sq[i as usize].1;
        self.mem[at..at + 8].copy_from_slice(&a.orig.to_le_bytes());
        self.out.read_answered();
        Ok(())
    }
    fn terminated(&mut self, _t: &Terminate) {}
}

pub fn run(cfg: Config) -> Report {
    let mut rng = Rng::new(cfg.seed);
    let mut sides = [Side::new(0), Side::new(1)];
    for s in sides.iter_mut() {
        s.rx = Receiver::new(cfg.crc, crc32c_update);
    }
    let params = OutboundParams {
        max_fpdu: cfg.max_fpdu,
        ord: cfg.ord,
        extensions: cfg.extensions,
        sending: true,
        confirm: cfg.confirm,
    };
    let mut rep = Report::default();
    let mut idle = 0;
    loop {
        let mut progress = false;
        for i in 0..2 {
            post(&cfg, &mut rng, &mut sides, i);
            let s = &mut sides[i];
            if s.dead {
                continue;
            }
            let room = 1 + rng.below(64 << 10) as usize;
            let (out, mut io) = s.outbound(cfg.crc, room);
            let o = out.emit(&params, &mut io);
            let (answered, fpdus, mut done) = (io.answered, io.fpdus, io.done);
            // The socket takes a piece of what is built (all of it, half
            // the time); what it holds whole is done.
            let n = match rng.below(2) {
                0 => s.tx.len(),
                _ => rng.below(s.tx.len() as u64 + 1) as usize,
            };
            s.wire.extend(s.tx.drain(..n));
            s.taken += n as u64;
            let taken = s.taken;
            let (out, mut io) = s.outbound(cfg.crc, 0);
            out.taken(taken, cfg.confirm, &mut io);
            done.append(&mut io.done);
            // Each answer out frees a request slot of the IRD.
            for _ in 0..answered {
                s.inb.answered();
            }
            rep.fpdus += fpdus;
            progress |= fpdus > 0 || n > 0 || !done.is_empty();
            if o.error || o.fatal {
                rep.faults.push(format!("side {i}: outbound {o:?}"));
            }
            for (idx, status) in done {
                let placed = cfg.confirm.then_some(s.peer_placed);
                check_completion(&mut rep, s, i, idx, status, placed);
            }
        }
        // Deliver a piece of each stream (flipping bits as told).
        for from in 0..2 {
            let to = 1 - from;
            let n = (1 + rng.below(3000) as usize).min(sides[from].wire.len());
            if n == 0 || sides[to].dead {
                continue;
            }
            let mut piece: Vec<u8> = sides[from].wire.drain(..n).collect();
            for b in piece.iter_mut() {
                if cfg.flip_ppm > 0 && rng.ppm(cfg.flip_ppm) {
                    *b ^= 1 << rng.below(8);
                    rep.flips += 1;
                }
            }
            rep.bytes += n as u64;
            progress = true;
            if let Err(f) = deliver(&mut rep, &mut sides, from, &piece) {
                rep.terminated.push(f.cause);
                sides[to].dead = true;
                sides[from].dead = true;
            }
        }
        // (A SEND completes once handed to TCP: the run ends when the
        // streams are empty too.)
        let done = sides.iter().all(|s| {
            s.completed as u64 == cfg.messages
                && s.tx.is_empty()
                && s.wire.is_empty()
                && s.answers.is_empty()
        });
        if done || sides.iter().any(|s| s.dead) {
            break;
        }
        idle = if progress { 0 } else { idle + 1 };
        if idle > 1000 {
            rep.stalled = true;
            break;
        }
    }
    if rep.terminated.is_empty() && !rep.stalled {
        for (i, s) in sides.iter().enumerate() {
            let peer = &sides[1 - i];
            if peer.shadow != s.mem[TARGET.0..TARGET.1] {
                rep.faults.push(format!(
                    "side {i}: target region differs from the writer's shadow"
                ));
            }
            if !peer.sends.is_empty() {
                rep.faults.push(format!(
                    "side {i}: {} messages never received",
                    peer.sends.len()
                ));
            }
            if s.inb.reads_in() != 0 || s.max_reads_in > 8 {
                rep.faults.push(format!(
                    "side {i}: {} requests unanswered (most {})",
                    s.inb.reads_in(),
                    s.max_reads_in
                ));
            }
        }
    }
    rep
}

/// Post new work on side `i` while its ring has room.
fn post(cfg: &Config, rng: &mut Rng, sides: &mut [Side; 2], i: usize) {
    let s = &mut sides[i];
    while s.posted.len() < 2 * RING as usize {
        s.posted.push_back(vec![0; RECV_CAP]);
    }
    while (s.sq.len() as u64) < cfg.messages && (s.sq.len() as u32 - s.completed) < RING {
        let n = s.sq.len();
        let src = SRC + (n % RING as usize) * SRC_SLOT;
        let pick = rng.below(if cfg.extensions { 5 } else { 3 });
        let mut w = OutWqe {
            remote_stag: TARGET_STAG,
            ..OutWqe::default()
        };
        let mut expect = Expect::Nothing;
        // Now and then a local operation: a fast registration (runs when
        // reached) or an invalidate (at the head), fenced or not.
        if rng.below(32) == 0 {
            w.early = rng.below(2) == 0;
            w.fence = rng.below(16) == 0;
            s.sq.push((w, src, expect));
            continue;
        }
        match pick {
            0 => {
                w.op = Some(MsgOp::Send);
                w.len = rng.below(RECV_CAP as u64 + 1) as u32;
                w.solicited = rng.below(2) == 0;
            }
            1 | 3 => {
                w.op = Some(if pick == 1 {
                    MsgOp::Write
                } else {
                    MsgOp::WriteImm
                });
                w.len = rng.below(SRC_SLOT as u64 + 1) as u32;
                w.remote_to = rng.below((TARGET.1 - w.len as usize + 1) as u64);
                w.imm = rng.next() as u32;
            }
            2 => {
                w.op = Some(MsgOp::Read);
                w.len = rng.below(SINK_SLOT as u64 + 1) as u32;
                w.remote_to = rng.below((TARGET.1 - w.len as usize + 1) as u64);
                w.sink_stag = SINK_STAG;
                // A sink slot per ring slot: no two WQEs not yet
                // completed share one.
                w.sink_to = (SINK + (n % RING as usize) * SINK_SLOT) as u64;
                let at = w.remote_to as usize;
                expect = Expect::Read(
                    w.sink_to as usize,
                    s.shadow[at..at + w.len as usize].to_vec(),
                );
            }
            _ => {
                w.op = Some(MsgOp::FetchAdd);
                w.len = 8;
                w.remote_to = rng.below(TARGET.1 as u64 / 8) * 8;
                w.compare_add = rng.next();
                let at = w.remote_to as usize;
                let cell: &mut [u8; 8] = (&mut s.shadow[at..at + 8]).try_into().unwrap();
                let orig = u64::from_le_bytes(*cell);
                *cell = orig.wrapping_add(w.compare_add).to_le_bytes();
                expect = Expect::Atomic(ATOMIC_AT + (n % RING as usize) * 8, orig);
            }
        }
        w.fence = rng.below(16) == 0;
        // A READ's data is fetched when its answer goes out, so a later
        // WRITE or atomic to the same bytes may land first (RFC 5040
        // section 5.5): a correct consumer fences it, and so does this one.
        let done = s.completed as usize;
        s.reads_pending.retain(|&(idx, _, _)| idx >= done);
        if matches!(w.op, Some(MsgOp::Write | MsgOp::WriteImm | MsgOp::FetchAdd)) {
            let (at, end) = (w.remote_to as usize, w.remote_to as usize + w.len as usize);
            if s.reads_pending
                .iter()
                .any(|&(_, a, l)| at < a + l && a < end)
            {
                w.fence = true;
            }
        }
        if w.op == Some(MsgOp::Read) {
            s.reads_pending
                .push((n, w.remote_to as usize, w.len as usize));
        }
        // The source bytes, fresh for this WQE.
        let len = w.len as usize;
        for b in &mut s.mem[src..src + len.min(SRC_SLOT)] {
            *b = rng.next() as u8;
        }
        let local = if let Expect::Atomic(at, _) = expect {
            at
        } else {
            src
        };
        match w.op {
            Some(MsgOp::Send) => s.sends.push_back((s.mem[src..src + len].to_vec(), None)),
            Some(MsgOp::Write | MsgOp::WriteImm) => {
                let at = w.remote_to as usize;
                s.shadow[at..at + len].copy_from_slice(&s.mem[src..src + len]);
                if w.op == Some(MsgOp::WriteImm) {
                    s.sends.push_back((Vec::new(), Some(imm_bytes(w.imm))));
                }
            }
            _ => {}
        }
        s.sq.push((w, local, expect));
    }
}

/// Feed `piece` of side `from`'s stream to the other side.
fn deliver(
    rep: &mut Report,
    sides: &mut [Side; 2],
    from: usize,
    piece: &[u8],
) -> Result<(), Fault> {
    let (a, b) = sides.split_at_mut(1);
    let (sender, receiver) = if from == 0 {
        (&mut a[0], &mut b[0])
    } else {
        (&mut b[0], &mut a[0])
    };
    let mut io = InIo {
        mem: &mut receiver.mem,
        sq: &receiver.sq,
        out: &mut receiver.out,
        answers: &mut receiver.answers,
        posted: &mut receiver.posted,
        current: &mut receiver.current,
        received: Vec::new(),
    };
    let mut sink = Inbound {
        io: &mut io,
        state: &mut receiver.inb,
    };
    let res = receiver.rx.feed(piece, &mut sink);
    if res.is_ok() {
        sender.peer_placed += piece.len() as u64;
    }
    let received = std::mem::take(&mut io.received);
    receiver.max_reads_in = receiver.max_reads_in.max(receiver.inb.reads_in());
    for (r, data) in received {
        match sender.sends.pop_front() {
            Some((want, imm)) if want == data && imm == r.immediate => {}
            Some((want, imm)) => rep.faults.push(format!(
                "side {}: received {} bytes (immediate {:?}), {} (immediate {:?}) were sent",
                1 - from,
                data.len(),
                r.immediate,
                want.len(),
                imm
            )),
            None => rep
                .faults
                .push(format!("side {}: a message nobody sent", 1 - from)),
        }
    }
    res
}

/// `placed`: with confirmed WRITEs, the bytes of this side's stream the
/// peer has processed: a WRITE must be among them when it completes.
fn check_completion(
    rep: &mut Report,
    s: &mut Side,
    i: usize,
    idx: u32,
    status: u8,
    placed: Option<u64>,
) {
    rep.completions += 1;
    if idx != s.completed {
        rep.faults.push(format!(
            "side {i}: completed WQE {idx}, expected {}",
            s.completed
        ));
    }
    if status != wc::SUCCESS {
        rep.faults.push(format!(
            "side {i}: WQE {idx} completed with status {status}"
        ));
    }
    let sent = matches!(
        s.sq.get(idx as usize).and_then(|w| w.0.op),
        Some(MsgOp::Send | MsgOp::Write | MsgOp::WriteImm)
    );
    let end = s.ends.get(idx as usize).copied().unwrap_or(u64::MAX);
    if sent && end > s.taken {
        rep.faults.push(format!(
            "side {i}: WQE {idx} completed at stream position {}, before the socket took its end ({end})",
            s.taken
        ));
    }
    let write = matches!(
        s.sq.get(idx as usize).and_then(|w| w.0.op),
        Some(MsgOp::Write | MsgOp::WriteImm)
    );
    if let Some(placed) = placed.filter(|&p| write && end > p) {
        rep.faults.push(format!(
            "side {i}: WRITE {idx} completed before the peer placed it (it has {placed} bytes, the WRITE ends at {end})"
        ));
    }
    s.completed = idx + 1;
    if s.sq[idx as usize].0.op.is_none() {
        let runs = s.local_runs.get(idx as usize).copied().unwrap_or(0);
        if runs != 1 {
            rep.faults
                .push(format!("side {i}: local operation {idx} ran {runs} times"));
        }
    }
    match &s.sq[idx as usize].2 {
        Expect::Nothing => {}
        Expect::Read(at, want) => {
            if s.mem[*at..*at + want.len()] != want[..] {
                rep.faults
                    .push(format!("side {i}: READ {idx} data differs"));
            }
        }
        Expect::Atomic(at, orig) => {
            let got = u64::from_le_bytes(s.mem[*at..*at + 8].try_into().unwrap());
            if got != *orig {
                rep.faults.push(format!(
                    "side {i}: fetch-add {idx} returned {got:#x}, expected {orig:#x}"
                ));
            }
        }
    }
}
