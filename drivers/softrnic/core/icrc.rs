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
    let (mut crc, at) = masked_headers(packet, update)?;
    crc.update(packet.get(at..)?);
    Some(crc.finish())
}

/// The CRC over the pseudo-LRH and the masked IP, UDP and BTH headers at
/// the start of `packet`, and the offset of the first byte after the BTH.
fn masked_headers(packet: &[u8], update: Update) -> Option<(Crc, usize)> {
    let mut ip = [0u8; 60];
    let first = *packet.first()?;
    let ip_len = match first >> 4 {
        4 => {
            let ihl = usize::from(first & 0x0F) * 4;
            if !(20..=60).contains(&ihl) {
                return None;
            }
            let h = packet.get(..ihl)?;
            ip[..ihl].copy_from_slice(h);
            ip[1] = 0xFF; // type of service (DSCP, ECN)
            ip[8] = 0xFF; // time to live
            ip[10] = 0xFF; // header checksum
            ip[11] = 0xFF;
            ihl
        }
        6 => {
            let h = packet.get(..40)?;
            ip[..40].copy_from_slice(h);
            ip[0] |= 0x0F; // traffic class (low half of byte 0) ...
            ip[1] = 0xFF; // ... and flow label
            ip[2] = 0xFF;
            ip[3] = 0xFF;
            ip[7] = 0xFF; // hop limit
            40
        }
        _ => return None,
    };
    let rest = packet.get(ip_len..)?;
    let (udp, rest) = (rest.get(..UDP_LEN)?, rest.get(UDP_LEN..)?);
    let bth = rest.get(..BTH_LEN)?;
    let mut udp_m = [0u8; UDP_LEN];
    udp_m.copy_from_slice(udp);
    udp_m[6] = 0xFF; // checksum
    udp_m[7] = 0xFF;
    let mut bth_m = [0u8; BTH_LEN];
    bth_m.copy_from_slice(bth);
    bth_m[4] = 0xFF; // FECN, BECN, resv6a
    let mut crc = Crc::new(update);
    crc.update(&[0xFF; 8]); // the pseudo-LRH
    crc.update(&ip[..ip_len]);
    crc.update(&udp_m);
    crc.update(&bth_m);
    Some((crc, ip_len + UDP_LEN + BTH_LEN))
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
    let Some((mut crc, at)) = masked_headers(headers, update) else {
        return false;
    };
    crc.update(headers.get(at..).unwrap_or(&[]));
    for piece in body {
        crc.update(piece);
    }
    crc.finish().to_le_bytes() == trailer
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
