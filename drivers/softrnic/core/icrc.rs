// SPDX-License-Identifier: GPL-2.0
//! The RoCEv2 invariant CRC (IBTA vol. 1 Annex A17.3.3): a CRC-32 (the
//! IEEE 802.3 polynomial, reflected) over a pseudo-LRH of eight 0xFF bytes,
//! the IP header, the UDP header, the BTH and everything after it up to the
//! ICRC, with the fields routers may change masked to all ones: IPv4 type of
//! service, TTL and header checksum; IPv6 traffic class, flow label and hop
//! limit; the UDP checksum; the BTH byte holding FECN, BECN and resv6a.  The
//! four ICRC bytes follow the payload in little-endian order.
//!
//! Sans-IO: `core` only, no allocation (the CRC itself is in `crc.rs`).

use crate::crc::{crc32_update, Crc, Update};

/// Bytes of the UDP header and of the BTH.
const UDP_LEN: usize = 8;
const BTH_LEN: usize = 12;
/// Bytes of the ICRC trailer.
pub(crate) const ICRC_LEN: usize = 4;

/// The ICRC of `packet`: an IPv4 or IPv6 header, UDP, BTH and the rest of
/// the IB transport packet, without the ICRC trailer.  `None` when the
/// bytes cannot be a RoCEv2 packet (unknown IP version, IPv4 header length
/// out of range, shorter than IP + UDP + BTH).
pub(crate) fn icrc(packet: &[u8]) -> Option<u32> {
    icrc_with(packet, crc32_update)
}

/// `icrc` with the CRC steps done by `update`.
pub(crate) fn icrc_with(packet: &[u8], update: Update) -> Option<u32> {
    let m = Masked::of(packet)?;
    let mut crc = Crc::new(update);
    crc.update(m.bytes());
    crc.update(packet.get(m.after_bth..)?);
    Some(crc.finish())
}

/// Bytes of the pseudo-LRH, and the most an IP header has.
const PSEUDO_LRH_LEN: usize = 8;
const IP_MAX: usize = 60;
/// Room after the masked BTH for the extension headers a caller holds with
/// it (`check_parts`): the longest a packet has (RETH and immediate, 20;
/// AtomicETH, 28) fits.
const EXTENSION_ROOM: usize = 32;

/// The pseudo-LRH and the masked IP, UDP and BTH headers of a packet, one
/// after the other: the ICRC's first bytes in one buffer, so that the CRC
/// takes them in one step (each step into the kernel's CRC costs more than
/// a few dozen bytes do).
struct Masked {
    buf: [u8; PSEUDO_LRH_LEN + IP_MAX + UDP_LEN + BTH_LEN + EXTENSION_ROOM],
    len: usize,
    /// The offset in the packet of the first byte after the BTH.
    after_bth: usize,
}

impl Masked {
    /// The masked headers at the start of `packet`; `None` when they cannot
    /// be a RoCEv2 packet's.
    fn of(packet: &[u8]) -> Option<Masked> {
        let mut m = Masked {
            buf: [0; PSEUDO_LRH_LEN + IP_MAX + UDP_LEN + BTH_LEN + EXTENSION_ROOM],
            len: 0,
            after_bth: 0,
        };
        m.buf[..PSEUDO_LRH_LEN].fill(0xFF);
        let first = *packet.first()?;
        let ip_len = match first >> 4 {
            4 => usize::from(first & 0x0F) * 4,
            6 => 40,
            _ => return None,
        };
        if !(20..=IP_MAX).contains(&ip_len) {
            return None;
        }
        let after_bth = ip_len + UDP_LEN + BTH_LEN;
        let at = PSEUDO_LRH_LEN;
        m.buf[at..at + after_bth].copy_from_slice(packet.get(..after_bth)?);
        let ip = &mut m.buf[at..at + ip_len];
        if first >> 4 == 4 {
            ip[1] = 0xFF; // type of service (DSCP, ECN)
            ip[8] = 0xFF; // time to live
            ip[10] = 0xFF; // header checksum
            ip[11] = 0xFF;
        } else {
            ip[0] |= 0x0F; // traffic class (low half of byte 0) ...
            ip[1] = 0xFF; // ... and flow label
            ip[2] = 0xFF;
            ip[3] = 0xFF;
            ip[7] = 0xFF; // hop limit
        }
        let udp = at + ip_len;
        m.buf[udp + 6] = 0xFF; // UDP checksum
        m.buf[udp + 7] = 0xFF;
        m.buf[udp + UDP_LEN + 4] = 0xFF; // BTH: FECN, BECN, resv6a
        m.len = at + after_bth;
        m.after_bth = after_bth;
        Some(m)
    }

    /// Append `more` when it fits (false: it does not; nothing changed).
    fn append(&mut self, more: &[u8]) -> bool {
        let Some(room) = self.buf.get_mut(self.len..self.len + more.len()) else {
            return false;
        };
        room.copy_from_slice(more);
        self.len += more.len();
        true
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Whether a packet held in parts carries a valid ICRC: `headers` from the
/// IP header on (at least the IP, UDP and BTH headers), `body` the bytes
/// after them up to the trailer, in order, and `trailer` the ICRC as it is
/// on the wire.  For a packet the network stack keeps in fragments: no
/// byte is copied to check it.
pub(crate) fn check_parts(
    headers: &[u8],
    body: &[&[u8]],
    trailer: [u8; ICRC_LEN],
    update: Update,
) -> bool {
    let Some(mut m) = Masked::of(headers) else {
        return false;
    };
    let mut crc = Crc::new(update);
    // The extension headers go with the masked ones, in the same step.
    let rest = headers.get(m.after_bth..).unwrap_or(&[]);
    let appended = m.append(rest);
    crc.update(m.bytes());
    if !appended {
        crc.update(rest);
    }
    for piece in body {
        crc.update(piece);
    }
    crc.finish().to_le_bytes() == trailer
}

/// The trailer bytes of a packet whose IP and UDP headers are `ip_udp`
/// and whose transport bytes from the BTH up to the trailer are
/// `transport`, held apart (a GSO packet's segment and the headers it will
/// have: `roce_gso::segment_header`).  `None` as for `icrc`.
pub(crate) fn trailer_apart(
    ip_udp: &[u8],
    transport: &[u8],
    update: Update,
) -> Option<[u8; ICRC_LEN]> {
    let mut head = [0u8; IP_MAX + UDP_LEN + BTH_LEN];
    let n = ip_udp.len();
    head.get_mut(..n)?.copy_from_slice(ip_udp);
    head.get_mut(n..n + BTH_LEN)?
        .copy_from_slice(transport.get(..BTH_LEN)?);
    let m = Masked::of(&head[..n + BTH_LEN])?;
    if m.after_bth != n + BTH_LEN {
        return None;
    }
    let mut crc = Crc::new(update);
    crc.update(m.bytes());
    crc.update(&transport[BTH_LEN..]);
    Some(crc.finish().to_le_bytes())
}

/// The trailer bytes for `packet` (see `icrc`).
pub(crate) fn trailer(packet: &[u8]) -> Option<[u8; ICRC_LEN]> {
    trailer_with(packet, crc32_update)
}

/// `trailer` with the CRC steps done by `update`.
pub(crate) fn trailer_with(packet: &[u8], update: Update) -> Option<[u8; ICRC_LEN]> {
    icrc_with(packet, update).map(u32::to_le_bytes)
}

/// Whether `packet` (IP header through the ICRC trailer) carries a valid ICRC.
pub(crate) fn check(packet: &[u8]) -> bool {
    check_with(packet, crc32_update)
}

/// `check` with the CRC steps done by `update`.
pub(crate) fn check_with(packet: &[u8], update: Update) -> bool {
    let Some(split) = packet.len().checked_sub(ICRC_LEN) else {
        return false;
    };
    let (body, tail) = packet.split_at(split);
    trailer_with(body, update).is_some_and(|t| t == tail)
}
