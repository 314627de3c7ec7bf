// SPDX-License-Identifier: GPL-2.0
//! Packet assembly: a RoCEv2 packet is built in an sk_buff under the QP lock
//! (transport headers, payload copied straight from memory, pad) and queued
//! in an `Outbox`; once the lock is dropped each is routed (one lookup for
//! the packets of a batch that go to the same place), given its UDP and IP
//! headers and then its ICRC, and sent.  Route lookups may enable bottom
//! halves, which must not happen with the QP lock (IRQs off) held.

use crate::glue::net::{IpRoute, RouteCache, Skb};
use crate::glue::table::Found;
use crate::glue::{IbDevice, NetDevice};
use crate::icrc;
use crate::psn::Psn;
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

/// Packets waiting to be sent.
pub(crate) struct Outbox {
    /// Each with its route and destination QP.
    pkts: [Option<(Skb, IpRoute, u32)>; BATCH],
    n: usize,
    /// Packets this outbox takes (at most `BATCH`).
    room: usize,
}

impl Outbox {
    /// An outbox for `room` packets (at most `BATCH`).
    pub(crate) fn new(room: usize) -> Outbox {
        Outbox {
            pkts: [const { None }; BATCH],
            n: 0,
            room: core::cmp::min(room, BATCH),
        }
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
        let hlen = hdr.wire_len();
        let total = hlen + payload_len + usize::from(pad) + ICRC_LEN;
        let Some(mut skb) = Skb::alloc(ndev, total, route.ipv4) else {
            dev.counters().bump(Counter::SendErr);
            return Err(SendFail::NoMemory);
        };
        let mut h = *hdr;
        h.bth.pad_cnt = pad;
        let buf = skb.body_mut();
        if roce_wire::build(buf, &h).is_err() {
            return Err(SendFail::NoMemory);
        }
        let (_, rest) = buf.split_at_mut(hlen);
        let (payload, tail) = rest.split_at_mut(payload_len);
        if !fill(payload) {
            return Err(SendFail::BadMemory);
        }
        tail.fill(0);
        self.pkts[self.n] = Some((skb, *route, h.bth.dest_qp));
        self.n += 1;
        Ok(())
    }

    /// Route, finish and send everything, in order (no lock held), and
    /// leave the outbox empty.
    pub(crate) fn send(&mut self, dev: &IbDevice, ndev: &NetDevice) {
        let c = dev.counters();
        let mut cache = RouteCache::new();
        let n = core::mem::take(&mut self.n);
        // A looped-back QP whose receive work is owed a wakeup
        // (`rx::loop_back`): woken once this batch is handed over.
        let mut wake: Option<Found<Qp>> = None;
        for p in self.pkts.iter_mut().take(n) {
            let Some((mut skb, route, dest_qp)) = p.take() else {
                continue;
            };
            let sent = match super::rx::loop_target(dev, &route.saddr, &route.daddr, dest_qp) {
                // It stays in this host: no route to look up, no ICRC.
                Some(qp) => skb.finish_local(ndev, &route).inspect(|_| {
                    if super::rx::loop_back(dev, skb, &qp) {
                        if let Some(prev) = wake.take().filter(|w| w.qpn() != qp.qpn()) {
                            prev.rx_wake();
                        }
                        wake = Some(qp);
                    }
                }),
                None => {
                    let mut bytes = 0;
                    // No route: as if lost on the wire (RC retransmits).
                    skb.finish(ndev, &route, &mut cache, |pkt| {
                        bytes = pkt.len();
                        let n = pkt.len() - ICRC_LEN;
                        let (body, trailer) = pkt.split_at_mut(n);
                        if let Some(t) = icrc::trailer_with(body, crate::glue::net::crc32_le) {
                            trailer.copy_from_slice(&t);
                        }
                    })
                    .and_then(|()| skb.xmit())
                    .map(|()| bytes)
                }
            };
            match sent {
                Ok(bytes) => {
                    c.bump(Counter::TxPackets);
                    c.add(Counter::SentBytes, bytes as u64);
                }
                Err(_) => c.bump(Counter::SendErr),
            }
        }
        if let Some(qp) = wake {
            qp.rx_wake();
        }
    }
}
