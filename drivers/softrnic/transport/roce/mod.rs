// SPDX-License-Identifier: GPL-2.0
//! The kernel half of RoCEv2: UDP receive dispatch (`rx.rs`), packets in
//! skbs (`packet.rs`), and the I/O of the sans-IO machines of `core/roce/`
//! (`requester.rs`, `completer.rs`, `responder.rs`).  The pump builds and
//! sends a QP's packets: responses first, then requests.
//!
//! Concurrency: all of a QP's engine state sits under the QP lock.  Packets
//! are built under it and sent after it is dropped; one context at a time
//! (the "pump": a doorbell, the QP's work item, a received packet or a
//! timer) builds and sends, so a QP's packets leave in order.

pub(crate) mod completer;
pub(crate) mod packet;
pub(crate) mod requester;
pub(crate) mod responder;
pub(crate) mod rx;

use packet::{Outbox, BATCH};

use crate::glue::net::IpRoute;
use crate::glue::NetDevice;
use crate::qp_state::QpType;
use crate::transport::Pumper;
use crate::transport_rules::{self as rules, Service};
use crate::verbs::ah::Av;
use crate::verbs::qp::{After, Qp, QpInner};

/// Packets a pump may build (batches of up to `BATCH`) before it hands
/// over to the work item: much in the work item, a little where a packet
/// was received, the first packets of a message where a doorbell rang (an
/// 8-byte ping-pong's whole message, a 4 KiB one's at 1024 MTU).
const WORK_BATCHES: u32 = 64;
/// A work item at high priority (the QP not streaming, `Engine::bulk`)
/// builds this many before the rest goes to the normal-priority one.
const FIRST_WORK_BATCHES: u32 = 8;
const PACKET_BATCHES: u32 = 4;
const DOORBELL_PACKETS: usize = 4;

impl Qp {
    pub(crate) fn service(&self) -> Service {
        match self.ty {
            QpType::Rc => Service::Rc,
            QpType::Uc => Service::Uc,
            _ => Service::Ud,
        }
    }

    /// The path MTU in bytes (UD: the port's).
    pub(crate) fn mtu(&self, s: &QpInner, ndev: &NetDevice) -> u32 {
        let code = if self.service() == Service::Ud {
            crate::limits::ib_mtu_for(ndev.mtu(), crate::limits::ROCE_MAX_HEADER_BYTES)
                .unwrap_or(crate::limits::IB_MTU_256)
        } else {
            s.attrs.path_mtu
        };
        rules::mtu_bytes(code).unwrap_or(256)
    }

    /// The UDP source port of this QP's packets: fixed per QP so a flow
    /// stays on one path, different between QPs for ECMP entropy.
    pub(crate) fn sport(&self) -> u16 {
        let h = self.qpn().wrapping_mul(0x9E37_79B1);
        0xC000 | ((h >> 18) as u16 & 0x3fff)
    }

    /// The route of this QP's packets to address vector `av`.
    pub(crate) fn ip_route(&self, av: &Av) -> IpRoute {
        IpRoute {
            saddr: av.sgid,
            daddr: av.dgid,
            ipv4: av.ipv4,
            sport: self.sport(),
            tclass: av.traffic_class,
            ttl: if av.hop_limit == 0 { 64 } else { av.hop_limit },
            flow_label: av.flow_label,
        }
    }

    /// The route of a connected QP's packets.
    pub(crate) fn route(&self, s: &QpInner) -> Option<IpRoute> {
        s.attrs.av.as_ref().map(|av| self.ip_route(av))
    }

    /// The pump has nothing left to send.  While a request awaits its ACK
    /// or an RNR wait runs, that ACK or the QP's timer pumps again and finds
    /// whatever is posted meanwhile: the provider need not ring.  (The ACK
    /// is what counts: with timeout 0, infinite, no timer runs.)  Otherwise
    /// it must: set `QUEUE_ENGINE_IDLE`, then look at the producer once
    /// more (the provider stores its producer, then reads the flag; a full
    /// fence on both sides means one of the two sees the other).  Returns
    /// whether WQEs came after `seen`, the producer this pump started from:
    /// then it goes on.
    fn settle(&self, s: &QpInner, seen: u32) -> bool {
        let sends = s.state.sends();
        if sends && (s.eng.req.timer_on || s.eng.req.outstanding()) {
            return false;
        }
        self.engine_idle(s);
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        sends && s.sq.producer() != seen
    }

    /// Build and send this QP's packets: responses first, then requests.
    /// Runs on the QP's home CPU (see `kick`; a UD QP anywhere), so they
    /// leave in order; one context at a time.  (A work item queued before
    /// the home moved still runs where it was queued: the workqueue keeps a
    /// running item on its CPU, so requeueing it cannot move it.)  `by`
    /// sets how much it sends before it hands the rest to the work item.
    pub(crate) fn roce_pump(&self, by: Pumper) {
        let dev = self.dev();
        let Some(ndev) = dev.port_netdev() else {
            return;
        };
        let (mut budget, room) = match by {
            Pumper::Work => (WORK_BATCHES, BATCH),
            Pumper::Packet => (PACKET_BATCHES, BATCH),
            Pumper::Doorbell => (1, DOORBELL_PACKETS),
        };
        let mut first = true;
        // Rounds that sent packets spend the budget.  Once it is spent, one
        // more round may look before the work item takes over: a doorbell's
        // packet often comes back as an ACK inside its own send (a local
        // link's softirq runs there), which sets `again` with nothing left
        // to send; that round finds nothing and the pump ends here instead
        // of waking the work item for nothing.  A round that sends past the
        // budget, or a full one at it, hands over; `rounds` bounds the
        // empty rounds that other contexts' `again` can cause.
        let mut spent = 0;
        // One outbox for every round: `send` empties it.
        let mut out = Outbox::new(room, self.service() != Service::Ud, &ndev);
        for rounds in 1.. {
            let mut after = After::default();
            let seen = {
                let mut s = self.inner.lock();
                if first {
                    if self.join_pump(&mut s, by) {
                        return;
                    }
                    s.eng.pumping = true;
                    first = false;
                    // Packets for a QP on this device skip the network
                    // stack (`rx::loop_back`): one skb each serves them best.
                    if self.loops_back(&s) {
                        out.no_gso();
                    }
                    if by == Pumper::Work && !s.eng.bulk {
                        budget = FIRST_WORK_BATCHES;
                    }
                }
                s.eng.again = false;
                // This pump looks at the send queue before it ends: posts
                // meanwhile need no doorbell.
                if s.state.sends() {
                    s.sq.clear_kernel_flags(crate::abi::QUEUE_ENGINE_IDLE);
                }
                let seen = s.sq.producer();
                self.emit_responses(&mut s, &dev, &ndev, &mut out);
                self.emit_requests(&mut s, &dev, &ndev, &mut out, &mut after);
                seen
            };
            let full = out.is_full();
            spent += u32::from(!out.is_empty());
            self.after(after);
            out.send(&dev, &ndev);
            let mut s = self.inner.lock();
            if s.eng.dying {
                s.eng.pumping = false;
                return;
            }
            if !(full || s.eng.again || self.settle(&s, seen)) {
                s.eng.pumping = false;
                s.eng.bulk = false;
                return;
            }
            if spent > budget || (spent == budget && full) || rounds > 2 * budget {
                s.eng.pumping = false;
                // A work item that used its whole budget: the QP streams.
                s.eng.bulk |= by == Pumper::Work;
                self.queue_pump(&s.eng);
                return;
            }
        }
    }
}
