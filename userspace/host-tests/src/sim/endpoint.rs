//! One simulated RoCE endpoint: a QP whose protocol machines are the
//! kernel module's own (`core/roce/`), with plain memory, a send queue, a
//! receive queue, two completion queues and one timer standing in for what
//! the kernel's executor owns.  Packets are real RoCEv2 packets (headers
//! built and parsed by `roce_wire.rs`, the ICRC of `icrc.rs` over an IPv4
//! and UDP header), so the wire formats are exercised with the machines.

use std::collections::VecDeque;

use crate::icrc;
use crate::psn::{self, Psn};
use crate::roce::requester::{
    Prepared, RequestPacket, Requester, RequesterIo, RequesterParams, Track, WqeFields, MIN_WINDOW,
    WINDOW,
};
use crate::roce::responder::{Access, RecvDone, Responder, ResponderIo, ResponderParams, Response};
use crate::roce::{wc, Count, Outcome, SendFail};
use crate::roce_wire::{
    self, Aeth, AtomicAckEth, Bth, Ext, Headers, Opcode, Packet, Payload, Syndrome, CREDITS_INVALID,
};
use crate::transport_rules::{MsgOp, Service};

/// The partition both endpoints are in (the default one).
const PKEY: u16 = crate::limits::DEFAULT_PKEY;

/// Packets one pump may build before they go on the link (the kernel's
/// outbox batch).
pub const BATCH: usize = 16;
/// The IPv4 and UDP headers in front of every simulated packet.
const IP_UDP: usize = 28;
/// The counter of packets dropped for a bad ICRC (after the machines' own).
pub const BAD_ICRC: usize = crate::roce::COUNTS;

/// A send work request as the simulated application posts it.
#[derive(Clone, Copy, Default, Debug)]
pub struct Wqe {
    pub wr_id: u64,
    /// `None`: a local operation (it changes no memory the simulation
    /// checks): a fast registration if `early`, else a local invalidate.
    pub op: Option<MsgOp>,
    pub early: bool,
    /// The local buffer (source, or sink of a READ/atomic).
    pub laddr: u64,
    pub len: u32,
    pub raddr: u64,
    pub rkey: u32,
    pub imm: u32,
    pub compare: u64,
    pub swap_add: u64,
    pub fence: bool,
    pub solicited: bool,
    /// UD: the destination QP.
    pub dest_qp: u32,
    pub qkey: u32,
}

/// A posted receive: a buffer of `len` bytes at `addr`.
#[derive(Clone, Copy, Debug)]
pub struct Recv {
    pub wr_id: u64,
    pub addr: u64,
    pub len: u32,
}

/// A completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    pub wr_id: u64,
    pub status: u8,
    pub byte_len: u32,
    pub imm: Option<u32>,
    pub write_imm: bool,
}

/// A memory region the peer may reach.
#[derive(Clone, Copy, Debug)]
pub struct Mr {
    pub rkey: u32,
    pub base: u64,
    pub len: u64,
    pub read: bool,
    pub write: bool,
    pub atomic: bool,
    pub valid: bool,
}

/// The QP's attributes.
#[derive(Clone, Copy, Debug)]
pub struct Attrs {
    pub svc: Service,
    pub mtu: u32,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd: u32,
    pub qkey: u32,
}

/// Everything of an endpoint but its machines (what their I/O reaches).
pub struct Data {
    pub qpn: u32,
    pub peer_qpn: u32,
    pub attrs: Attrs,
    pub mem: Vec<u8>,
    pub mrs: Vec<Mr>,
    pub sq: Vec<Wqe>,
    pub sq_prod: u32,
    pub sq_cons: u32,
    pub rq: VecDeque<Recv>,
    pub send_cq: Vec<Cqe>,
    pub recv_cq: Vec<Cqe>,
    /// The timer's deadline (simulated nanoseconds).
    pub timer: Option<u64>,
    pub now: u64,
    /// The QP entered ERR.
    pub error: bool,
    /// Packets built by the current pump.
    pub outbox: Vec<Vec<u8>>,
    /// Asked to pump again later (UC/UD: no memory).
    pub again: bool,
    /// Machine counters, by `Count as usize`, and `BAD_ICRC`.
    pub counts: [u64; crate::roce::COUNTS + 1],
    /// Request PSNs sent by the current pump (checked against the window).
    pub sent_psns: Vec<Psn>,
    /// Invariant violations seen by the I/O.
    pub faults: Vec<String>,
    /// The local operations run, in order (their wr_id), until completed.
    pub local_runs: VecDeque<u64>,
    /// Local operations run while a WQE before them was not yet complete.
    pub early_runs: u64,
}

pub struct Endpoint {
    pub d: Data,
    pub req: Requester<Wqe, Vec<Track<Wqe>>>,
    pub resp: Responder<Recv, Vec<Response>>,
}

impl Endpoint {
    pub fn new(qpn: u32, peer_qpn: u32, attrs: Attrs, mem: usize, sq_slots: usize) -> Endpoint {
        let mut req = Requester::new(vec![Track::default(); sq_slots]);
        req.restart(0x00ff_fff0, attrs.retry_cnt, attrs.rnr_retry);
        let mut resp = Responder::new(vec![Response::default(); 256]);
        resp.restart(0x00ff_fff0);
        Endpoint {
            d: Data {
                qpn,
                peer_qpn,
                attrs,
                mem: vec![0; mem],
                mrs: Vec::new(),
                sq: vec![Wqe::default(); sq_slots],
                sq_prod: 0,
                sq_cons: 0,
                rq: VecDeque::new(),
                send_cq: Vec::new(),
                recv_cq: Vec::new(),
                timer: None,
                now: 0,
                error: false,
                outbox: Vec::new(),
                again: false,
                counts: [0; crate::roce::COUNTS + 1],
                sent_psns: Vec::new(),
                faults: Vec::new(),
                local_runs: VecDeque::new(),
                early_runs: 0,
            },
            req,
            resp,
        }
    }

    pub fn req_params(&self) -> RequesterParams {
        let a = &self.d.attrs;
        RequesterParams {
            svc: a.svc,
            mtu: a.mtu,
            max_rd: a.max_rd,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            rts: !self.d.error,
            sqd: false,
        }
    }

    pub fn resp_params(&self) -> ResponderParams {
        let a = &self.d.attrs;
        ResponderParams {
            svc: a.svc,
            mtu: a.mtu,
            remote_read: true,
            remote_write: true,
            remote_atomic: true,
            max_rd: a.max_rd,
            min_rnr_timer: a.min_rnr_timer,
            qkey: a.qkey,
            max_msg: 1 << 31,
        }
    }

    /// Room for another send WQE.
    pub fn sq_room(&self) -> bool {
        self.d.sq_prod.wrapping_sub(self.d.sq_cons) < self.d.sq.len() as u32 - 1
    }

    pub fn post_send(&mut self, w: Wqe) {
        let n = self.d.sq.len();
        self.d.sq[self.d.sq_prod as usize & (n - 1)] = w;
        self.d.sq_prod = self.d.sq_prod.wrapping_add(1);
    }

    fn after(&mut self, o: Outcome) {
        if o.error {
            self.d.error = true;
        }
        if o.fatal {
            self.d
                .faults
                .push("the send queue was taken for corrupt".into());
        }
    }

    /// Build what the machines have to send: responses, then requests.
    /// The packets are in `d.outbox`; true if the batch filled up (more
    /// may be waiting).
    pub fn pump(&mut self) -> bool {
        self.d.outbox.clear();
        self.d.sent_psns.clear();
        self.d.again = false;
        let (rp, qp) = (self.resp_params(), self.req_params());
        self.resp.emit(&rp, &mut self.d);
        if !self.d.error {
            let o = self.req.emit(&qp, &mut self.d);
            self.after(o);
        }
        // The window: no request PSN at or past una + the window in use
        // (never wider than WINDOW).
        if self.d.attrs.svc == Service::Rc {
            if !(MIN_WINDOW..=WINDOW).contains(&self.req.cwnd) {
                let m = format!("window {} outside {MIN_WINDOW}..={WINDOW}", self.req.cwnd);
                self.d.faults.push(m);
            }
            for p in &self.d.sent_psns {
                if psn::diff(*p, self.req.una) >= self.req.cwnd as i32 {
                    let m = format!("PSN {:#x} sent with una {:#x}", p.get(), self.req.una.get());
                    self.d.faults.push(m);
                }
            }
        }
        self.check_limits();
        self.d.outbox.len() >= BATCH || self.d.again
    }

    /// Outstanding READ/atomic limits, both sides.
    pub fn check_limits(&mut self) {
        let max = self.d.attrs.max_rd;
        if self.req.rd_inflight > max {
            let m = format!(
                "{} READ/atomics in flight, limit {max}",
                self.req.rd_inflight
            );
            self.d.faults.push(m);
        }
        if self.resp.rd_pending() > max {
            let m = format!(
                "{} READ/atomics queued at the responder, limit {max}",
                self.resp.rd_pending()
            );
            self.d.faults.push(m);
        }
    }

    /// A packet from the link (IP and UDP headers in front).  It is read
    /// as the kernel reads a packet the network stack keeps in fragments
    /// (`read_in_pieces`), and that reading must agree with reading it whole.
    pub fn receive(&mut self, frame: &[u8]) {
        let mut pieces = [&[][..]; 3];
        let split = read_in_pieces(frame, &mut pieces);
        if !icrc::check(frame) {
            self.d.counts[BAD_ICRC] += 1;
            if split.is_ok() {
                self.d
                    .faults
                    .push("a packet with a bad ICRC passed when read in pieces".into());
            }
            return;
        }
        let Ok(whole) = roce_wire::parse(&frame[IP_UDP..]) else {
            self.d
                .faults
                .push("a packet that passed its ICRC did not parse".into());
            return;
        };
        let pkt = match split {
            Ok(p) if p == whole => p,
            _ => {
                self.d
                    .faults
                    .push("a packet read in pieces differs from the packet read whole".into());
                return;
            }
        };
        if pkt.hdr.bth.dest_qp != self.d.qpn {
            self.d.faults.push("a packet for another QP".into());
            return;
        }
        if self.d.error {
            return;
        }
        if crate::transport_rules::request_kind(pkt.hdr.bth.opcode).is_some() {
            let p = self.resp_params();
            let o = self.resp.on_request(&p, &mut self.d, &pkt);
            self.after(o);
        } else {
            let p = self.req_params();
            let o = self.req.on_response(&p, &mut self.d, &pkt);
            self.after(o);
        }
        self.check_limits();
    }

    /// The timer's deadline passed.
    pub fn fire_timer(&mut self) {
        self.d.timer = None;
        if self.d.error {
            return;
        }
        let o = self.req.on_timer(&mut self.d);
        self.after(o);
    }
}

impl Data {
    fn range(&self, addr: u64, len: u64) -> Option<std::ops::Range<usize>> {
        let end = addr.checked_add(len)?;
        (end <= self.mem.len() as u64).then_some(addr as usize..end as usize)
    }

    fn mr(&self, rkey: u32, va: u64, len: u64, access: Access) -> Option<std::ops::Range<usize>> {
        let m = self.mrs.iter().find(|m| m.rkey == rkey && m.valid)?;
        let ok = match access {
            Access::Read => m.read,
            Access::Write => m.write,
            Access::Atomic => m.atomic,
        };
        let end = va.checked_add(len)?;
        (ok && va >= m.base && end <= m.base + m.len).then(|| self.range(va, len))?
    }

    /// Frame a packet: IPv4 and UDP headers, the transport packet, ICRC.
    fn emit_packet(&mut self, hdr: &Headers, payload: &[u8]) -> Result<(), SendFail> {
        if self.outbox.len() >= BATCH {
            return Err(SendFail::Full);
        }
        let mut buf = vec![0u8; IP_UDP + roce_wire::MAX_HEADER_LEN + 64 + payload.len() + 8];
        let n = roce_wire::build_packet(&mut buf[IP_UDP..], hdr, payload)
            .map_err(|_| SendFail::BadMemory)?;
        buf.truncate(IP_UDP + n);
        let total = buf.len() as u16;
        buf[0] = 0x45;
        buf[2..4].copy_from_slice(&total.to_be_bytes());
        buf[8] = 64;
        buf[9] = 17;
        buf[12..16].copy_from_slice(&[10, 0, 0, 1]);
        buf[16..20].copy_from_slice(&[10, 0, 0, 2]);
        buf[20..22].copy_from_slice(&0xc000u16.to_be_bytes());
        buf[22..24].copy_from_slice(&4791u16.to_be_bytes());
        buf[24..26].copy_from_slice(&(total - 20).to_be_bytes());
        let body = buf.len() - roce_wire::ICRC_LEN;
        let t = icrc::trailer(&buf[..body]).ok_or(SendFail::BadMemory)?;
        buf[body..].copy_from_slice(&t);
        self.outbox.push(buf);
        Ok(())
    }

    fn bth(&self, opcode: Opcode, dest_qp: u32, psn: Psn) -> Bth {
        Bth {
            opcode,
            solicited: false,
            mig_req: false,
            pad_cnt: 0,
            pkey: PKEY,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: false,
            psn,
        }
    }
}

impl RequesterIo<Wqe> for Data {
    fn producer(&mut self) -> u32 {
        self.sq_prod
    }

    fn slots(&self) -> u32 {
        self.sq.len() as u32
    }

    fn prepare(&mut self, index: u32) -> Option<Prepared<Wqe>> {
        let w = self.sq[index as usize & (self.sq.len() - 1)];
        let error = if w.op.is_some() && self.range(w.laddr, u64::from(w.len)).is_none() {
            wc::LOC_PROT_ERR
        } else {
            0
        };
        Some(Prepared {
            wqe: w,
            op: w.op,
            len: w.len,
            fence: w.fence,
            solicited: w.solicited,
            error,
            early: w.op.is_none() && w.early,
        })
    }

    fn run_local(&mut self, wqe: &Wqe) -> u8 {
        // (A slot's index is its wr_id: both count the posts.)
        if wqe.wr_id as u32 != self.sq_cons {
            // One in ten fails away from the head (as a registration of an
            // MR a READ before it has yet to invalidate): it must run again
            // there.
            if wqe.wr_id % 10 == 0 {
                return wc::LOC_QP_OP_ERR;
            }
            if !wqe.early || wqe.fence {
                self.faults.push(format!(
                    "wr {}: a local invalidate (or a fenced operation) ran before the WQEs ahead of it completed (head {})",
                    wqe.wr_id, self.sq_cons
                ));
            }
            self.early_runs += 1;
        }
        self.local_runs.push_back(wqe.wr_id);
        wc::SUCCESS
    }

    fn send(&mut self, p: &RequestPacket<'_, Wqe>) -> Result<(), SendFail> {
        let w = &p.track.wqe;
        if p.opcode.layout().has(Ext::Ieth) {
            return Err(SendFail::BadMemory);
        }
        let f = WqeFields {
            dest_qp: if self.attrs.svc == Service::Ud {
                w.dest_qp
            } else {
                self.peer_qpn
            },
            src_qp: self.qpn,
            qkey: w.qkey,
            remote_addr: w.raddr,
            rkey: w.rkey,
            swap_add: w.swap_add,
            compare: w.compare,
            imm: w.imm,
            inv_rkey: 0,
        };
        let hdr = p.headers(PKEY, &f);
        let r = self
            .range(w.laddr + u64::from(p.offset), u64::from(p.payload))
            .ok_or(SendFail::BadMemory)?;
        let payload = self.mem[r].to_vec();
        self.emit_packet(&hdr, &payload)?;
        if self.attrs.svc == Service::Rc {
            self.sent_psns.push(p.psn);
        }
        Ok(())
    }

    fn complete(&mut self, index: u32, t: &Track<Wqe>, status: u8) {
        if index != self.sq_cons {
            self.faults.push(format!(
                "completed slot {index}, the head is {}",
                self.sq_cons
            ));
        }
        self.sq_cons = index.wrapping_add(1);
        self.send_cq.push(Cqe {
            wr_id: t.wqe.wr_id,
            status,
            byte_len: t.len,
            imm: None,
            write_imm: false,
        });
    }

    fn store(&mut self, _index: u32, t: &Track<Wqe>, offset: u32, data: Payload<'_>) -> bool {
        let end = u64::from(offset) + data.len() as u64;
        if end > u64::from(t.wqe.len.max(8)) {
            self.faults
                .push("a response stored past its WQE's buffer".into());
            return false;
        }
        match self.range(t.wqe.laddr + u64::from(offset), data.len() as u64) {
            Some(r) => {
                copy_pieces(&mut self.mem[r], data);
                true
            }
            None => false,
        }
    }

    fn arm_timer(&mut self, usecs: u64) {
        self.timer = Some(self.now + usecs * 1000);
    }

    fn stop_timer(&mut self) {
        self.timer = None;
    }

    fn retry_later(&mut self) {
        self.again = true;
    }

    fn count(&mut self, c: Count) {
        self.counts[c as usize] += 1;
    }
}

impl ResponderIo for Data {
    type Recv = Recv;

    fn take_recv(&mut self) -> Option<Recv> {
        self.rq.pop_front()
    }

    fn recv_store(&mut self, r: &Recv, at: u64, data: Payload<'_>) -> Result<(), bool> {
        if at + data.len() as u64 > u64::from(r.len) {
            return Err(true);
        }
        let range = self.range(r.addr + at, data.len() as u64).ok_or(false)?;
        copy_pieces(&mut self.mem[range], data);
        Ok(())
    }

    fn recv_done(&mut self, r: &Recv, d: RecvDone) {
        self.recv_cq.push(Cqe {
            wr_id: r.wr_id,
            status: d.status,
            byte_len: d.byte_len,
            imm: d.imm,
            write_imm: d.write_imm,
        });
    }

    fn datagram(&mut self, r: Recv, pkt: &Packet<'_>) {
        let status = match self.recv_store(&r, 0, pkt.payload) {
            Ok(()) => wc::SUCCESS,
            Err(true) => wc::LOC_LEN_ERR,
            Err(false) => wc::LOC_PROT_ERR,
        };
        self.recv_cq.push(Cqe {
            wr_id: r.wr_id,
            status,
            byte_len: pkt.payload.len() as u32,
            imm: pkt.hdr.imm_dt.map(|i| i.data),
            write_imm: false,
        });
    }

    fn remote_ok(&mut self, rkey: u32, va: u64, len: u64, access: Access) -> bool {
        self.mr(rkey, va, len, access).is_some()
    }

    fn remote_write(&mut self, rkey: u32, va: u64, data: Payload<'_>) -> bool {
        match self.mr(rkey, va, data.len() as u64, Access::Write) {
            Some(r) => {
                copy_pieces(&mut self.mem[r], data);
                true
            }
            None => false,
        }
    }

    fn remote_atomic(
        &mut self,
        rkey: u32,
        va: u64,
        cmp_swap: bool,
        compare: u64,
        swap_add: u64,
    ) -> Option<u64> {
        let r = self.mr(rkey, va, 8, Access::Atomic)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.mem[r.clone()]);
        let orig = u64::from_ne_bytes(b);
        let new = if cmp_swap {
            if orig == compare {
                swap_add
            } else {
                orig
            }
        } else {
            orig.wrapping_add(swap_add)
        };
        self.mem[r].copy_from_slice(&new.to_ne_bytes());
        Some(orig)
    }

    fn invalidate(&mut self, rkey: u32) -> bool {
        match self.mrs.iter_mut().find(|m| m.rkey == rkey && m.valid) {
            Some(m) => {
                m.valid = false;
                true
            }
            None => false,
        }
    }

    fn send_ack(
        &mut self,
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
        orig: Option<u64>,
    ) -> Result<(), SendFail> {
        let opcode = if orig.is_some() {
            Opcode::RcAtomicAck
        } else {
            Opcode::RcAck
        };
        let mut h = Headers::new(self.bth(opcode, self.peer_qpn, psn));
        h.aeth = Some(Aeth { syndrome, msn });
        h.atomic_ack_eth = orig.map(|orig| AtomicAckEth { orig });
        self.emit_packet(&h, &[])
    }

    fn send_read(
        &mut self,
        psn: Psn,
        opcode: Opcode,
        msn: u32,
        rkey: u32,
        va: u64,
        len: u32,
    ) -> Result<(), SendFail> {
        let mut h = Headers::new(self.bth(opcode, self.peer_qpn, psn));
        if opcode.layout().has(Ext::Aeth) {
            h.aeth = Some(Aeth {
                syndrome: Syndrome::Ack {
                    credits: CREDITS_INVALID,
                },
                msn,
            });
        }
        let payload = if len == 0 {
            Vec::new()
        } else {
            let r = self
                .mr(rkey, va, u64::from(len), Access::Read)
                .ok_or(SendFail::BadMemory)?;
            self.mem[r].to_vec()
        };
        self.emit_packet(&h, &payload)
    }

    fn count(&mut self, c: Count) {
        self.counts[c as usize] += 1;
    }
}

/// Copy a payload's pieces, in order, into `to` (exactly as long).
fn copy_pieces(to: &mut [u8], data: Payload<'_>) {
    for (at, p) in data.placed(0) {
        to[at as usize..][..p.len()].copy_from_slice(p);
    }
}

/// The packet in `frame` read as the kernel's receive path reads a packet
/// the network stack keeps in fragments: the headers from the first bytes
/// (the linear area), the rest as three pieces cut at points the frame's
/// length chooses, then `packet_in_pieces` as the kernel calls it.
/// `Err(true)`: a bad ICRC; `Err(false)`: malformed.
fn read_in_pieces<'a>(frame: &'a [u8], pieces: &'a mut [&'a [u8]; 3]) -> Result<Packet<'a>, bool> {
    let roce = frame.get(IP_UDP..).ok_or(false)?;
    let head = &roce[..roce.len().min(roce_wire::MAX_HEADER_LEN)];
    let (hdr, header_len, payload_len) =
        roce_wire::parse_headers(head, roce.len()).map_err(|_| false)?;
    let rest = &roce[header_len..];
    let a = rest.len() * (frame.len() % 3) / 4;
    let b = a + (rest.len() - a) / 2;
    *pieces = [&rest[..a], &rest[a..b], &rest[b..]];
    let headers = &frame[..IP_UDP + header_len];
    roce_wire::packet_in_pieces(
        headers,
        hdr,
        payload_len,
        pieces,
        Some(crate::crc::crc32_update),
    )
    .map_err(|e| e == roce_wire::PiecesError::BadIcrc)
}
