// SPDX-License-Identifier: GPL-2.0
//! Packet assembly: a RoCEv2 packet is built under the QP lock (transport
//! headers, payload copied straight from memory, pad), in an sk_buff or,
//! when it is long and the netdev takes GSO packets, in a page fragment,
//! and queued in an `Outbox`; once the lock is dropped each is routed (one
//! lookup for the packets of a batch that go to the same place), given its
//! UDP and IP headers and then its ICRC, and sent.  A run of packets in
//! fragments to the same QP leaves as one GSO packet: one pass through the
//! IP stack and the netdev for up to `BATCH` packets, which the stack (or
//! the device) cuts into datagrams, or a softrnic receiver over a veth
//! takes whole (`rx.rs`; `core/roce_gso.rs` has the rules).  Route lookups
//! may enable bottom halves, which must not happen with the QP lock (IRQs
//! off) held.

use crate::glue::net::{Frag, FragSkb, GsoMode, IpRoute, RouteCache, Skb};
use crate::glue::table::Found;
use crate::glue::{IbDevice, NetDevice};
use crate::icrc;
use crate::psn::Psn;
use crate::roce_gso;
use crate::roce_wire::{self, Bth, Headers, Opcode, ICRC_LEN};
use crate::verbs::qp::Qp;

use crate::engine::Counter;
use crate::roce::SendFail;

/// The P_Key every packet carries (the default partition, full member).
pub(crate) const PKEY: u16 = 0xffff;

/// A BTH for `opcode` to `dest_qp` at `psn` (flags clear: the caller sets
/// SE and AckReq where they apply).
pub(crate) fn bth(opcode: Opcode, dest_qp: u32, psn: Psn) -> Bth {
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

/// Packets built in one go under the QP lock.
pub(crate) const BATCH: usize = 16;

/// Packets whose payload is at least this long are built in page
/// fragments (`Frag`) when the netdev takes GSO packets, so that runs of
/// them leave as one (`Outbox::send`); shorter ones (ACKs, small
/// messages) are built in an skb of their own, which a run of them (a page
/// at most) is copied out of into one fragment.
const FRAG_MIN_PAYLOAD: usize = 256;
/// The most transport bytes one GSO packet carries: its IP total length
/// (IPv4) or payload length (IPv6) is 16 bits.
const GSO_MAX_BYTES: usize = 65535 - 60 - 8;

/// A packet's transport bytes (BTH to ICRC): in an skb of its own, or in
/// a page fragment that leaves with the next ones to the same place as one
/// GSO packet.
enum Body {
    Skb(Skb),
    Frag(Frag),
}

impl Body {
    fn len(&self) -> usize {
        match self {
            Body::Skb(skb) => skb.body_len(),
            Body::Frag(f) => f.len(),
        }
    }

    fn is_frag(&self) -> bool {
        matches!(self, Body::Frag(_))
    }
}

/// Packets waiting to be sent.
pub(crate) struct Outbox {
    /// Each with its route and destination QP.
    pkts: [Option<(Body, IpRoute, u32)>; BATCH],
    n: usize,
    /// Packets this outbox takes (at most `BATCH`).
    room: usize,
    /// Runs of packets leave as GSO packets, and long packets go into page
    /// fragments (`FRAG_MIN_PAYLOAD`).
    gso: bool,
}

impl Outbox {
    /// An outbox for `room` packets (at most `BATCH`); `gso`: its packets
    /// may leave several to a GSO packet (RC and UC: a connected QP's
    /// packets to one place, in order), as far as the netdev allows.
    pub(crate) fn new(room: usize, gso: bool, ndev: &NetDevice) -> Outbox {
        Outbox {
            pkts: [const { None }; BATCH],
            n: 0,
            room: core::cmp::min(room, BATCH),
            gso: gso && ndev.gso_mode() != GsoMode::Off,
        }
    }

    /// One skb per packet, whatever the netdev takes.
    pub(crate) fn no_gso(&mut self) {
        self.gso = false;
    }

    pub(crate) fn is_full(&self) -> bool {
        self.n >= self.room
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Build a packet with `hdr` (PadCnt is set here) and `payload_len`
    /// bytes that `fill` writes (false: the memory could not be read, the
    /// packet is not built).  `Err(())` when the outbox is full or memory
    /// for the packet is short (counted; the protocol recovers).
    pub(crate) fn build(
        &mut self,
        dev: &IbDevice,
        ndev: &NetDevice,
        route: &IpRoute,
        hdr: &Headers,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<(), SendFail> {
        if self.is_full() {
            return Err(SendFail::Full);
        }
        let pad = roce_wire::pad_count(payload_len);
        let mut h = *hdr;
        h.bth.pad_cnt = pad;
        let total = h.wire_len() + payload_len + usize::from(pad) + ICRC_LEN;
        // (An skb of its own when no fragment can be had.)
        let frag = (self.gso && payload_len >= FRAG_MIN_PAYLOAD)
            .then(|| Frag::alloc(total))
            .flatten();
        let mut body = match frag {
            Some(f) => Some(Body::Frag(f)),
            None => Skb::alloc(ndev, total, route.ipv4).map(Body::Skb),
        }
        .ok_or_else(|| {
            dev.counters().bump(Counter::SendErr);
            SendFail::NoMemory
        })?;
        let buf = match &mut body {
            Body::Skb(skb) => skb.body_mut(),
            Body::Frag(f) => f.body_mut(),
        };
        let hlen = roce_wire::build(buf, &h).map_err(|_| SendFail::NoMemory)?;
        let (_, rest) = buf.split_at_mut(hlen);
        let (payload, tail) = rest.split_at_mut(payload_len);
        if !fill(payload) {
            return Err(SendFail::BadMemory);
        }
        tail.fill(0);
        self.pkts[self.n] = Some((body, *route, h.bth.dest_qp));
        self.n += 1;
        Ok(())
    }

    /// Route, finish and send everything, in order (no lock held), and
    /// leave the outbox empty.  A run of packets to the same QP, all of
    /// one length but the last (no longer), leaves as one GSO packet: long
    /// ones from their fragments, short ones copied into one.
    pub(crate) fn send(&mut self, dev: &IbDevice, ndev: &NetDevice) {
        let mut cache = RouteCache::new();
        let n = core::mem::take(&mut self.n);
        // A looped-back QP whose receive work is owed a wakeup
        // (`rx::loop_back`): woken once this batch is handed over.
        let mut wake: Option<Found<Qp>> = None;
        let mut i = 0;
        while i < n {
            let Some((body, route, dest_qp)) = self.pkts[i].take() else {
                i += 1;
                continue;
            };
            i += 1;
            if let Some(qp) = super::rx::loop_target(dev, &route.saddr, &route.daddr, dest_qp) {
                let finished = match body {
                    Body::Skb(mut skb) => {
                        let sent = skb.finish_local(ndev, &route);
                        Some((skb, sent))
                    }
                    Body::Frag(f) => {
                        frag_skb(dev, ndev, f, route.ipv4).map(|fs| fs.finish_local(ndev, &route))
                    }
                };
                if let Some((skb, sent)) = finished {
                    loop_back(dev, skb, sent, qp, &mut wake);
                }
                continue;
            }
            // The run this packet heads: the next ones built as it was, to
            // the same place, of its length but the last.
            let (size, frag) = (body.len(), body.is_frag());
            let mut run: [Option<Body>; BATCH] = [const { None }; BATCH];
            run[0] = Some(body);
            let (mut count, mut bytes) = (1, size);
            // (A run copied into one fragment: a page at most.)
            let most = if frag {
                GSO_MAX_BYTES
            } else {
                kernel::page::PAGE_SIZE
            };
            while self.gso && i < n && count < BATCH {
                let joins = matches!(&self.pkts[i],
                    Some((b, r, d))
                        if b.is_frag() == frag && *r == route && *d == dest_qp
                            && b.len() <= size && bytes + b.len() <= most);
                let Some((b, _, _)) = self.pkts[i].take_if(|_| joins) else {
                    break;
                };
                i += 1;
                bytes += b.len();
                let last = b.len() < size;
                run[count] = Some(b);
                count += 1;
                if last {
                    break;
                }
            }
            let run = &mut run[..count];
            if frag {
                let frags = run.iter_mut().filter_map(|b| match b.take() {
                    Some(Body::Frag(f)) => Some(f),
                    _ => None,
                });
                send_run(dev, ndev, frags, size, &route, &mut cache);
            } else if let Some(f) = (count > 1).then(|| coalesce(run, bytes)).flatten() {
                send_run(dev, ndev, core::iter::once(f), size, &route, &mut cache);
            } else {
                // One packet (or no memory to copy a run into): each in
                // its own skb.
                for b in run.iter_mut().filter_map(Option::take) {
                    if let Body::Skb(skb) = b {
                        send_one(dev, ndev, skb, &route, &mut cache);
                    }
                }
            }
        }
        if let Some(qp) = wake {
            qp.rx_wake();
        }
    }
}

/// A run of short packets, each in an skb of its own, copied one after
/// the other into one fragment (`bytes` long), which takes them all as one
/// GSO packet; the skbs are freed.  None (the run left as it is) when
/// memory is short.
fn coalesce(run: &mut [Option<Body>], bytes: usize) -> Option<Frag> {
    let mut f = Frag::alloc(bytes)?;
    let buf = f.body_mut();
    let mut at = 0;
    for b in run.iter_mut().filter_map(Option::take) {
        if let Body::Skb(mut skb) = b {
            let body = skb.body_mut();
            buf.get_mut(at..at + body.len())?.copy_from_slice(body);
            at += body.len();
        }
    }
    Some(f)
}

/// Count a packet sent (`bytes` from its IP header) or refused.
fn count_sent(dev: &IbDevice, sent: kernel::error::Result<usize>) {
    let c = dev.counters();
    match sent {
        Ok(bytes) => {
            c.bump(Counter::TxPackets);
            c.add(Counter::SentBytes, bytes as u64);
        }
        Err(_) => c.bump(Counter::SendErr),
    }
}

/// A packet that stays in this host, for `qp` (`rx::loop_back`), its
/// headers put in front (`sent`: or not; no route to look up, no ICRC);
/// `wake` collects the QP whose receive work is owed a wakeup.
fn loop_back(
    dev: &IbDevice,
    skb: Skb,
    sent: kernel::error::Result<usize>,
    qp: Found<Qp>,
    wake: &mut Option<Found<Qp>>,
) {
    if sent.is_ok() && super::rx::loop_back(dev, skb, &qp) {
        if let Some(prev) = wake.take().filter(|w| w.qpn() != qp.qpn()) {
            prev.rx_wake();
        }
        *wake = Some(qp);
    }
    count_sent(dev, sent);
}

/// A packet in an skb of its own, over the network.
fn send_one(
    dev: &IbDevice,
    ndev: &NetDevice,
    mut skb: Skb,
    route: &IpRoute,
    cache: &mut RouteCache,
) {
    let mut bytes = 0;
    // No route: as if lost on the wire (RC retransmits).
    let sent = skb
        .finish(ndev, route, cache, |pkt| {
            bytes = pkt.len();
            let n = pkt.len() - ICRC_LEN;
            let (body, trailer) = pkt.split_at_mut(n);
            if let Some(t) = icrc::trailer_with(body, crate::glue::net::crc32_le) {
                trailer.copy_from_slice(&t);
            }
        })
        .and_then(|()| skb.xmit())
        .map(|()| bytes);
    count_sent(dev, sent);
}

/// A packet carrying the one in `f`.
fn frag_skb(dev: &IbDevice, ndev: &NetDevice, f: Frag, ipv4: bool) -> Option<FragSkb> {
    let skb = FragSkb::alloc(ndev, ipv4).and_then(|mut skb| skb.add_frag(f).ok().map(|()| skb));
    if skb.is_none() {
        dev.counters().bump(Counter::SendErr);
    }
    skb
}

/// Packets to one place in fragments, each fragment holding one packet or
/// several back to back, all of `size` bytes but the last: one packet, a
/// GSO packet when they are several.  Each packet's ICRC covers the IP
/// and UDP headers it will have once cut (`roce_gso::segment_header`).
fn send_run(
    dev: &IbDevice,
    ndev: &NetDevice,
    frags: impl Iterator<Item = Frag>,
    size: usize,
    route: &IpRoute,
    cache: &mut RouteCache,
) {
    let c = dev.counters();
    let in_frag = |len: usize| roce_gso::segments(len, size).map_or(0, |s| s.count() as u32);
    let Some(mut skb) = FragSkb::alloc(ndev, route.ipv4) else {
        c.add(
            Counter::SendErr,
            frags.map(|f| u64::from(in_frag(f.len()))).sum(),
        );
        return;
    };
    let mut segs = 0u32;
    for f in frags {
        let n = in_frag(f.len());
        if skb.add_frag(f).is_err() {
            // (No room: lost, as on the wire.)
            c.add(Counter::SendErr, u64::from(n));
            continue;
        }
        segs += n;
    }
    let (hdr, hl) = match skb.finish(ndev, route, cache, segs) {
        Ok(h) => h,
        Err(_) => {
            c.add(Counter::SendErr, u64::from(segs));
            return;
        }
    };
    let (mut k, mut bytes) = (0, 0);
    for i in 0.. {
        let Some(buf) = skb.frag_mut(i) else {
            break;
        };
        for (off, len) in roce_gso::segments(buf.len(), size).into_iter().flatten() {
            let index = k;
            k += 1;
            bytes += hl + len;
            let mut own = [0u8; roce_gso::IP_UDP_MAX];
            let Some(sl) = roce_gso::segment_header(&hdr[..hl], index, len, &mut own) else {
                continue;
            };
            let Some((body, trailer)) = buf
                .get_mut(off..off + len)
                .and_then(|p| p.split_at_mut_checked(len.checked_sub(ICRC_LEN)?))
            else {
                continue;
            };
            if let Some(t) = icrc::trailer_apart(&own[..sl], body, crate::glue::net::crc32_le) {
                trailer.copy_from_slice(&t);
            }
        }
    }
    if segs > 1 {
        skb.set_gso(size, segs, ndev.gso_mode() == GsoMode::Whole);
    }
    match skb.xmit() {
        Ok(()) => {
            c.add(Counter::TxPackets, u64::from(segs));
            c.add(Counter::SentBytes, bytes as u64);
            if segs > 1 {
                c.bump(Counter::TxGso);
            }
        }
        Err(_) => c.add(Counter::SendErr, u64::from(segs)),
    }
}
