// SPDX-License-Identifier: GPL-2.0
//! Receive dispatch: a RoCEv2 packet from the UDP socket is checked (IP and
//! UDP framing, ICRC, transport headers, P_Key, destination QP and its
//! type) and handed to the QP's responder or completer.  Every packet that
//! fails a check is counted and dropped.

use super::responder::RxMeta;
use core::sync::atomic::Ordering;

use crate::engine::Counter;
use crate::glue::backlog::{Added, BhOff};
use crate::glue::net::{Skb, RX_PIECES};
use crate::glue::table::Found;
use crate::glue::{IbDevice, NetDevice};
use crate::roce_gso;
use crate::roce_wire::{self, Bth, Packet, PiecesError, Transport};
use crate::transport_rules::{self as rules, Service};
use crate::verbs::mcast::{MAX_MEMBERS, MULTICAST_QPN};
use crate::verbs::qp::{After, HeldNotify, Qp};

const UDP_LEN: usize = 8;
/// The largest payload of any packet (IB MTU 4096).
const MAX_PAYLOAD: usize = 4096;

/// The length of the IP header at the start of `data`, and whether it is
/// IPv4; `None` if it is neither a plausible IPv4 nor IPv6 header.
fn ip_header_len(data: &[u8]) -> Option<(usize, bool)> {
    let first = *data.first()?;
    match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0f) * 4;
            (ihl >= 20 && data.len() >= ihl).then_some((ihl, true))
        }
        // UDP right after the IPv6 header (no extension headers).
        6 => (data.len() >= 40 && data[6] == 17).then_some((40, false)),
        _ => None,
    }
}

/// Packets a kernel QP's backlog holds at most (beyond them they are
/// dropped and counted; the requester resends): 16 READ responses of 128
/// KiB at IB MTU 1024.
const BACKLOG_MAX: u32 = 2048;
/// Packets one run of the work item takes from the backlog before it
/// queues itself again (a work item must not run for ever).
const DRAIN_BUDGET: u32 = 256;
/// Packets the work item processes, at most, before it pumps the responses
/// and requests they called for (see `rx_drain`).
const DRAIN_PUMP_EVERY: u32 = 16;

pub(crate) fn receive(dev: &IbDevice, skb: Skb) {
    dev.counters().bump(Counter::RxPackets);
    let mut found = None;
    if let Some(skb) = steer(dev, skb, &mut found) {
        receive_here(dev, skb, found.as_deref(), false, None);
    }
}

/// The QP that takes a packet this device sends from `saddr` to `daddr`,
/// the same address (both ends on one device, as NVMe over Fabrics in
/// loopback), for QP `dest_qp` straight into its receive backlog
/// (`loop_back`): a kernel RC or UC QP.
/// A NIC turns a packet for its own port round inside it too; through the
/// network stack (the loopback interface, then UDP) a packet cost about as
/// much again as building and placing it.  None for any other QP, whose
/// packets take the network stack: one that receives in place would run
/// its receive, and so its own pump, inside this send.
pub(crate) fn loop_target(
    dev: &IbDevice,
    saddr: &[u8; 16],
    daddr: &[u8; 16],
    dest_qp: u32,
) -> Option<Found<Qp>> {
    if saddr != daddr {
        return None;
    }
    dev.verbs().qps.get(dest_qp).filter(|qp| qp.steered())
}

/// Hand a finished packet to `qp`, its `loop_target`.  It never leaves the
/// host, so it carries no ICRC and its receiver checks none.  True: it went
/// into an empty backlog, and the caller must wake `qp`'s receive work
/// (`Qp::rx_wake`) once it has handed over the rest of its batch.  Woken
/// for each packet, the work drained them one at a time as they came: a
/// wakeup and two context switches a packet.
#[must_use]
pub(crate) fn loop_back(dev: &IbDevice, skb: Skb, qp: &Qp) -> bool {
    dev.counters().bump(Counter::RxPackets);
    dev.counters().bump(Counter::LoopedPkts);
    qp.rx_add(skb, true)
}

/// The packet, if it is to be processed here (see `Qp::rx_steer`), and in
/// `found` the QP it was looked up for, if it was (`deliver` then needs no
/// second look-up); the checks are `receive_here`'s.
fn steer(dev: &IbDevice, skb: Skb, found: &mut Option<Found<Qp>>) -> Option<Skb> {
    if dev.verbs().steered_qps.load(Ordering::Relaxed) == 0 {
        return Some(skb);
    }
    // (A packet `receive_here` refuses goes there, to be counted.)
    let Some(qp) = dest_qpn(&skb).and_then(|n| dev.verbs().qps.get(n)) else {
        return Some(skb);
    };
    let skb = qp.rx_steer(skb, false)?;
    *found = Some(qp);
    Some(skb)
}

/// The destination QP in a packet's (or a GSO packet's first) BTH.
fn dest_qpn(skb: &Skb) -> Option<u32> {
    let (data, _) = skb.network();
    let (ip_len, _) = ip_header_len(data)?;
    let mut bth = [0u8; Bth::LEN];
    copy_from(skb, ip_len + UDP_LEN, &mut bth).then_some(())?;
    // (Bytes 5 to 7 of the BTH.)
    Some(u32::from_be_bytes([0, bth[5], bth[6], bth[7]]))
}

/// Copy bytes `off..` of a received packet (from its IP header) into
/// `out`; false when the packet has not that many.
fn copy_from(skb: &Skb, off: usize, out: &mut [u8]) -> bool {
    let mut pieces = [&[][..]; RX_PIECES];
    let Some(n) = skb.pieces(off, out.len(), &mut pieces) else {
        return false;
    };
    let mut at = 0;
    for p in &pieces[..n] {
        let Some(to) = out.get_mut(at..at + p.len()) else {
            return false;
        };
        to.copy_from_slice(p);
        at += p.len();
    }
    at == out.len()
}

impl Qp {
    /// A kernel RC or UC QP's packets are processed by its receive work
    /// item, which the scheduler runs on a free CPU, in arrival order (its
    /// backlog), as a NIC hands a QP's packets to another CPU's interrupt.
    /// Over a local link a packet is received on the CPU that sent it, so
    /// in place both ends' copies of every byte ran on the sender's CPU:
    /// NVMe over Fabrics 128 KiB writes in loopback built the target's
    /// READ responses and placed them on one CPU, the other 90 % idle
    /// (rxe likewise hands every packet to a work item).  User QPs receive
    /// in place (a received packet moves an idle one's home instead, see
    /// `Qp::kick`): their pollers spin and a ping-pong's latency counts.
    /// Returns the packet if it is to be processed here.  `looped`: from
    /// `loop_back`.
    fn rx_steer(&self, skb: Skb, looped: bool) -> Option<Skb> {
        if !self.steered() {
            return Some(skb);
        }
        if self.rx_add(skb, looped) {
            self.rx_wake();
        }
        None
    }

    /// Queue a packet in a steered QP's backlog (or count it dropped when
    /// the backlog is full).  True when the backlog was empty: the caller
    /// must then `rx_wake` it.  While it holds packets a drain is owed
    /// already (one runs until it finds the backlog empty), and queueing
    /// the work for every packet cost as much as handing the packet over.
    fn rx_add(&self, skb: Skb, looped: bool) -> bool {
        match self.backlog.add(skb, BACKLOG_MAX, looped) {
            Added::First => true,
            Added::Behind => false,
            Added::Full => {
                self.count(Counter::RxDropped);
                false
            }
        }
    }

    /// Have the receive work drain the backlog.
    pub(crate) fn rx_wake(&self) {
        self.rx_work.queue();
    }

    /// A kernel RC or UC QP (`rx_steer`).
    pub(crate) fn steered(&self) -> bool {
        !self.user
            && self.transport == crate::device::Transport::Roce
            && matches!(self.service(), Service::Rc | Service::Uc)
    }

    /// The receive work item: process what the backlog holds, oldest
    /// first, each with bottom halves off, as in the receive softirq.  The
    /// pump the packets call for runs once for several of them (up to
    /// `DRAIN_PUMP_EVERY`, and when the backlog is empty): it sends their
    /// responses together, and consecutive ACKs collapse into one
    /// (NVMe over Fabrics at depth 32 pumped once for every ACK request).
    /// The CQ notifications wait as long, so the consumer's handler runs
    /// once for the completions of the group, not once for each with a
    /// poll that takes that one alone (iSER 4 KiB writes at depth 32: 7 %
    /// more I/Os, session 48).
    pub(crate) fn rx_drain(&self) {
        let dev = self.dev();
        let mut d = Drained::default();
        let mut owed = 0;
        let mut n = 0;
        for _ in 0..DRAIN_BUDGET {
            let _bh = BhOff::new();
            let Some((skb, looped)) = self.backlog.take() else {
                break;
            };
            d.pump = false;
            receive_here(&dev, skb, Some(self), looped, Some(&mut d));
            owed = if d.pump || owed > 0 { owed + 1 } else { 0 };
            if owed >= DRAIN_PUMP_EVERY {
                owed = 0;
                self.kick(crate::transport::Pumper::Packet);
            }
            n += 1;
            if n % DRAIN_PUMP_EVERY == 0 {
                self.release(&mut d.held);
            }
        }
        {
            let _bh = BhOff::new();
            if owed > 0 {
                self.kick(crate::transport::Pumper::Packet);
            }
            self.release(&mut d.held);
        }
        if !self.backlog.is_empty() {
            self.rx_wake();
        }
    }
}

/// What the receive work carries from one packet to the next.
#[derive(Default)]
struct Drained {
    /// The packet's QP is to pump.
    pump: bool,
    held: HeldNotify,
}

/// Check a packet and hand it to its QP (or QPs); `known`, the QP it was
/// addressed to, if the caller has it already; `looped`, it comes from
/// `loop_back` (no ICRC to check); `drained`: the receive work's, which
/// pumps `known` when its `pump` is set here (otherwise it is kicked here)
/// and delivers the CQ notifications it holds.  A GSO packet is cut here
/// (`receive_gso`).
fn receive_here(
    dev: &IbDevice,
    skb: Skb,
    known: Option<&Qp>,
    looped: bool,
    drained: Option<&mut Drained>,
) {
    let size = skb.gso_size();
    if size != 0 {
        receive_gso(dev, &skb, size, known, looped, drained);
        return;
    }
    let c = dev.counters();
    // The headers are in `data` (the linear area: encap_recv pulled them
    // there); the payload is read where the network stack put it, in
    // pieces, never linearised.
    let (data, len) = skb.network();
    let Some((ip_len, ipv4)) = ip_header_len(data) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    let at = ip_len + UDP_LEN;
    let Some(roce_len) = len.checked_sub(at) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    c.add(Counter::RcvdBytes, roce_len as u64);
    // A packet in page fragments that never passed encap_recv (one
    // `loop_back` took) has its transport headers there: copied out.
    let th = core::cmp::min(roce_len, roce_wire::MAX_HEADER_LEN);
    let mut copy = [0u8; roce_gso::IP_UDP_MAX + roce_wire::MAX_HEADER_LEN];
    let head = if data.len() >= at + th {
        data
    } else {
        let (Some(to), Some(ip_udp)) = (copy.get_mut(..at + th), data.get(..at)) else {
            c.bump(Counter::RxMalformed);
            return;
        };
        to[..at].copy_from_slice(ip_udp);
        if !copy_from(&skb, at, &mut to[at..]) {
            c.bump(Counter::RxMalformed);
            return;
        }
        &copy[..at + th]
    };
    let Ok((hdr, header_len, payload_len)) = roce_wire::parse_headers(&head[at..], roce_len) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    let mut pieces = [&[][..]; RX_PIECES];
    let (Some(n), Some(headers)) = (
        skb.pieces(at + header_len, roce_len - header_len, &mut pieces),
        head.get(..at + header_len),
    ) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    let parts = Parts {
        headers,
        ip_len,
        ipv4,
        hdr,
        payload_len,
        smac: skb.smac(),
        paged: len > data.len(),
    };
    accept(dev, &parts, &mut pieces[..n], looped, known, drained);
}

/// A GSO packet of RoCE packets, taken whole (a softrnic sender over a
/// veth: `packet.rs`): each packet in it is cut out as the stack would
/// have cut it into a datagram (`roce_gso`: its own IP and UDP lengths and
/// IPv4 ID, which its ICRC covers), then checked and handed over as a
/// packet from the network is.  Their QP, looked up once, pumps and raises
/// its CQ notifications once, after the last of them, as the receive work
/// does for a group (`rx_drain`): the ACK any of them asks for then covers
/// them all.
fn receive_gso(
    dev: &IbDevice,
    skb: &Skb,
    size: usize,
    known: Option<&Qp>,
    looped: bool,
    drained: Option<&mut Drained>,
) {
    let c = dev.counters();
    c.bump(Counter::RxGso);
    let (data, len) = skb.network();
    let Some((ip_len, ipv4)) = ip_header_len(data) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    let at = ip_len + UDP_LEN;
    let (Some(total), Some(gso_head)) = (len.checked_sub(at), data.get(..at)) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    let Some(segments) = roce_gso::segments(total, size) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    // Outside the receive work, the QP of the first packet takes the pump
    // and the notifications of all (a packet for another QP, which a
    // softrnic sender never puts in, is delivered on its own).
    let looked;
    let batch: Option<&Qp> = match (known, &drained) {
        (_, Some(_)) => None,
        (Some(k), None) => Some(k),
        (None, None) => {
            looked = dest_qpn(skb).and_then(|n| dev.verbs().qps.get(n));
            looked.as_deref()
        }
    };
    let mut own = Drained::default();
    let (known, mut drained) = match (batch, drained) {
        (Some(q), None) => (Some(q), Some(&mut own)),
        (_, d) => (known, d),
    };
    let smac = skb.smac();
    for (k, (off, seg_len)) in segments.enumerate() {
        if k > 0 {
            c.bump(Counter::RxPackets);
        }
        c.add(Counter::RcvdBytes, seg_len as u64);
        // This packet's IP and UDP headers, then its transport headers,
        // copied out of its piece of the GSO packet.
        let mut head = [0u8; roce_gso::IP_UDP_MAX + roce_wire::MAX_HEADER_LEN];
        let Some(hl) = roce_gso::segment_header(gso_head, k, seg_len, &mut head) else {
            c.bump(Counter::RxMalformed);
            continue;
        };
        let th = core::cmp::min(seg_len, roce_wire::MAX_HEADER_LEN);
        if !copy_from(skb, at + off, &mut head[hl..hl + th]) {
            c.bump(Counter::RxMalformed);
            continue;
        }
        let Ok((hdr, header_len, payload_len)) =
            roce_wire::parse_headers(&head[hl..hl + th], seg_len)
        else {
            c.bump(Counter::RxMalformed);
            continue;
        };
        let mut pieces = [&[][..]; RX_PIECES];
        let Some(n) = skb.pieces(at + off + header_len, seg_len - header_len, &mut pieces) else {
            c.bump(Counter::RxMalformed);
            continue;
        };
        let parts = Parts {
            headers: &head[..hl + header_len],
            ip_len,
            ipv4,
            hdr,
            payload_len,
            smac,
            paged: true,
        };
        accept(
            dev,
            &parts,
            &mut pieces[..n],
            looped,
            known,
            drained.as_deref_mut(),
        );
    }
    if let Some(q) = batch {
        if own.pump {
            q.kick(crate::transport::Pumper::Packet);
        }
        q.release(&mut own.held);
    }
}

/// A received packet's headers and what they say.
struct Parts<'a> {
    /// From the IP header through the transport headers.
    headers: &'a [u8],
    ip_len: usize,
    ipv4: bool,
    hdr: roce_wire::Headers,
    payload_len: usize,
    smac: [u8; 6],
    /// Its payload was read in page fragments.
    paged: bool,
}

/// Check a packet whose headers are parsed (`p`) and whose payload, pad
/// and ICRC are `pieces`, and hand it to its QP (or QPs): see
/// `receive_here`.
fn accept(
    dev: &IbDevice,
    p: &Parts<'_>,
    pieces: &mut [&[u8]],
    looped: bool,
    known: Option<&Qp>,
    drained: Option<&mut Drained>,
) {
    let c = dev.counters();
    // Nothing carries more than the largest IB MTU.
    if p.payload_len > MAX_PAYLOAD {
        c.bump(Counter::RxMalformed);
        return;
    }
    // The ICRC before anything is placed; the copy that follows reads the
    // payload while it is hot.
    let crc32_le: crate::crc::Update = crate::glue::net::crc32_le;
    let icrc = (!looped).then_some(crc32_le);
    let pkt = match roce_wire::packet_in_pieces(p.headers, p.hdr, p.payload_len, pieces, icrc) {
        Ok(pkt) => pkt,
        Err(PiecesError::Malformed) => {
            c.bump(Counter::RxMalformed);
            return;
        }
        Err(PiecesError::BadIcrc) => {
            c.bump(Counter::RxBadIcrc);
            return;
        }
    };
    if p.paged {
        c.bump(Counter::RxPaged);
    }
    // The default partition only (full or limited member).
    if pkt.hdr.bth.pkey & 0x7fff != 0x7fff {
        c.bump(Counter::RxMalformed);
        return;
    }
    let Some(ndev) = dev.port_netdev() else {
        return;
    };
    let ip = &p.headers[..p.ip_len];
    let meta = RxMeta {
        ip_header: ip,
        ipv4: p.ipv4,
        smac: p.smac,
        src: src_gid(ip, p.ipv4),
    };
    let dest = pkt.hdr.bth.dest_qp;
    if dest == MULTICAST_QPN && pkt.hdr.bth.opcode.transport() == Transport::Ud {
        // Every QP attached to the destination group gets a copy.
        let mgid = dest_gid(ip, p.ipv4);
        let mut members = [0u32; MAX_MEMBERS];
        let n = dev.verbs().mcast.lock().members(&mgid, &mut members);
        if n == 0 {
            c.bump(Counter::RxUnknownQp);
        }
        for &qpn in &members[..n] {
            deliver(dev, &ndev, qpn, &pkt, &meta, None, None);
        }
    } else {
        deliver(dev, &ndev, dest, &pkt, &meta, known, drained);
    }
}

/// The destination address of the IP header as a GID (IPv4-mapped).
fn dest_gid(ip: &[u8], ipv4: bool) -> [u8; 16] {
    ip_gid(ip, ipv4, 16, 24)
}

/// The source address of the IP header as a GID.
fn src_gid(ip: &[u8], ipv4: bool) -> [u8; 16] {
    ip_gid(ip, ipv4, 12, 8)
}

/// The IPv4 address at `v4` or the IPv6 address at `v6` as a GID.
fn ip_gid(ip: &[u8], ipv4: bool, v4: usize, v6: usize) -> [u8; 16] {
    let mut gid = [0u8; 16];
    if ipv4 {
        gid[10] = 0xff;
        gid[11] = 0xff;
        if let Some(a) = ip.get(v4..v4 + 4) {
            gid[12..].copy_from_slice(a);
        }
    } else if let Some(a) = ip.get(v6..v6 + 16) {
        gid.copy_from_slice(a);
    }
    gid
}

/// Hand a packet to QP `qpn`'s responder or completer (`known`, if it is
/// that QP, is not looked up again; `drained`, see `receive_here`).
fn deliver(
    dev: &IbDevice,
    ndev: &NetDevice,
    qpn: u32,
    pkt: &Packet<'_>,
    meta: &RxMeta<'_>,
    known: Option<&Qp>,
    drained: Option<&mut Drained>,
) {
    let c = dev.counters();
    let found;
    let (qp, drained) = match known {
        Some(qp) if qp.qpn() == qpn => (qp, drained),
        _ => {
            let Some(f) = dev.verbs().qps.get(qpn) else {
                c.bump(Counter::RxUnknownQp);
                return;
            };
            found = f;
            (&*found, None)
        }
    };
    let svc = qp.service();
    let fits = matches!(
        (svc, pkt.hdr.bth.opcode.transport()),
        (Service::Rc, Transport::Rc) | (Service::Uc, Transport::Uc) | (Service::Ud, Transport::Ud)
    );
    if !fits {
        qp.count(Counter::RxBadState);
        return;
    }
    let mut after = After::default();
    let pump = {
        let mut s = qp.inner.lock();
        // A connected QP takes packets from its peer's address only.
        if svc != Service::Ud && s.attrs.av.map(|av| av.dgid) != Some(meta.src) {
            qp.count(Counter::RxBadState);
            return;
        }
        let mtu = qp.mtu(&s, ndev);
        if rules::request_kind(pkt.hdr.bth.opcode).is_some() {
            qp.on_request(&mut s, dev, pkt, meta, mtu, &mut after);
            // A request changes nothing the requester waits for: pump only
            // for the responses it queued (most packets of a long WRITE or
            // SEND ask for none, and a pump costs two more lock rounds).
            s.eng.resp.has_responses()
        } else {
            // A response may open the window, complete or call for a resend.
            qp.on_response(&mut s, dev, pkt, mtu, &mut after);
            true
        }
    };
    match drained {
        Some(d) => {
            qp.after_held(after, &mut d.held);
            d.pump |= pump;
        }
        None => {
            qp.after(after);
            if pump {
                qp.kick(crate::transport::Pumper::Packet);
            }
        }
    }
}
