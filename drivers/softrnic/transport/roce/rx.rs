// SPDX-License-Identifier: GPL-2.0
//! Receive dispatch: a RoCEv2 packet from the UDP socket is checked (IP and
//! UDP framing, ICRC, transport headers, P_Key, destination QP and its
//! type) and handed to the QP's responder or completer.  Every packet that
//! fails a check is counted and dropped.

use super::responder::RxMeta;
use crate::engine::Counter;
use crate::glue::net::{Skb, RX_PIECES};
use crate::glue::{IbDevice, NetDevice};
use crate::roce_wire::{self, Packet, PiecesError, Transport};
use crate::transport_rules::{self as rules, Service};
use crate::verbs::mcast::{MAX_MEMBERS, MULTICAST_QPN};
use crate::verbs::qp::After;

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

pub(crate) fn receive(dev: &IbDevice, skb: Skb) {
    let c = dev.counters();
    c.bump(Counter::RxPackets);
    // The headers are in `data` (the linear area); the payload is read
    // where the network stack put it, in pieces, never linearised.
    let (data, len) = skb.network();
    let Some((ip_len, ipv4)) = ip_header_len(data) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    let at = ip_len + UDP_LEN;
    let (Some(roce_len), Some(roce_head)) = (len.checked_sub(at), data.get(at..)) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    c.add(Counter::RcvdBytes, roce_len as u64);
    let Ok((hdr, header_len, payload_len)) = roce_wire::parse_headers(roce_head, roce_len) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    // Nothing carries more than the largest IB MTU.
    if payload_len > MAX_PAYLOAD {
        c.bump(Counter::RxMalformed);
        return;
    }
    let mut pieces = [&[][..]; RX_PIECES];
    let (Some(n), Some(headers)) = (
        skb.pieces(at + header_len, roce_len - header_len, &mut pieces),
        data.get(..at + header_len),
    ) else {
        c.bump(Counter::RxMalformed);
        return;
    };
    // The ICRC before anything is placed; the copy that follows reads the
    // payload while it is hot.
    let crc32_le = crate::glue::net::crc32_le;
    let pkt =
        match roce_wire::packet_in_pieces(headers, hdr, payload_len, &mut pieces[..n], crc32_le) {
            Ok(p) => p,
            Err(PiecesError::Malformed) => {
                c.bump(Counter::RxMalformed);
                return;
            }
            Err(PiecesError::BadIcrc) => {
                c.bump(Counter::RxBadIcrc);
                return;
            }
        };
    if len > data.len() {
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
    let meta = RxMeta {
        ip_header: &data[..ip_len],
        ipv4,
        smac: skb.smac(),
        src: src_gid(&data[..ip_len], ipv4),
    };
    let dest = pkt.hdr.bth.dest_qp;
    if dest == MULTICAST_QPN && pkt.hdr.bth.opcode.transport() == Transport::Ud {
        // Every QP attached to the destination group gets a copy.
        let mgid = dest_gid(&data[..ip_len], ipv4);
        let mut members = [0u32; MAX_MEMBERS];
        let n = dev.verbs().mcast.lock().members(&mgid, &mut members);
        if n == 0 {
            c.bump(Counter::RxUnknownQp);
        }
        for &qpn in &members[..n] {
            deliver(dev, &ndev, qpn, &pkt, &meta);
        }
    } else {
        deliver(dev, &ndev, dest, &pkt, &meta);
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

/// Hand a packet to QP `qpn`'s responder or completer.
fn deliver(dev: &IbDevice, ndev: &NetDevice, qpn: u32, pkt: &Packet<'_>, meta: &RxMeta<'_>) {
    let c = dev.counters();
    let Some(qp) = dev.verbs().qps.get(qpn) else {
        c.bump(Counter::RxUnknownQp);
        return;
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
    qp.after(after);
    if pump {
        qp.kick(crate::transport::Pumper::Packet);
    }
}
