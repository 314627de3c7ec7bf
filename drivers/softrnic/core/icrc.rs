// SPDX-License-Identifier: GPL-2.0
//! The RoCEv2 invariant CRC (IBTA vol. 1 Annex A17.3.3): a CRC-32 (the
//! IEEE 802.3 polynomial, reflected) over a pseudo-LRH of eight 0xFF bytes,
//! the IP header, the UDP header, the BTH and everything after it up to the
//! ICRC, with the fields routers may change masked to all ones: IPv4 type of
//! service, TTL and header checksum; IPv6 traffic class, flow label and hop
//! limit; the UDP checksum; the BTH byte holding FECN, BECN and resv6a.  The
//! four ICRC bytes follow the payload in little-endian order.
//!
//! Sans-IO: `core` only, no allocation; the CRC is incremental so a caller
//! can feed a packet in pieces (socket buffers, scatter lists).

/// CRC-32, reflected polynomial 0xEDB88320, one table lookup per byte.
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// One CRC-32 step over `bytes` from the running (not inverted) value
/// `crc`: the recurrence of the kernel's `crc32_le`, so an optimised
/// implementation can stand in for this one (see `icrc_with`).
pub(crate) type Update = fn(u32, &[u8]) -> u32;

/// The table-driven `Update`.
pub(crate) fn table_update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = crc;
    for &b in bytes {
        c = TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    c
}

/// A running CRC-32.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crc32(u32);

impl Crc32 {
    pub(crate) const fn new() -> Crc32 {
        Crc32(0xFFFF_FFFF)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0 = table_update(self.0, bytes);
    }

    pub(crate) const fn finish(self) -> u32 {
        !self.0
    }
}

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
    icrc_with(packet, table_update)
}

/// `icrc` with the CRC steps done by `update`.
pub(crate) fn icrc_with(packet: &[u8], update: Update) -> Option<u32> {
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
    let (bth, payload) = (rest.get(..BTH_LEN)?, rest.get(BTH_LEN..)?);
    let mut udp_m = [0u8; UDP_LEN];
    udp_m.copy_from_slice(udp);
    udp_m[6] = 0xFF; // checksum
    udp_m[7] = 0xFF;
    let mut bth_m = [0u8; BTH_LEN];
    bth_m.copy_from_slice(bth);
    bth_m[4] = 0xFF; // FECN, BECN, resv6a
    let mut crc = Crc32::new().0;
    crc = update(crc, &[0xFF; 8]); // the pseudo-LRH
    crc = update(crc, &ip[..ip_len]);
    crc = update(crc, &udp_m);
    crc = update(crc, &bth_m);
    crc = update(crc, payload);
    Some(Crc32(crc).finish())
}

/// The trailer bytes for `packet` (see `icrc`).
pub(crate) fn trailer(packet: &[u8]) -> Option<[u8; ICRC_LEN]> {
    trailer_with(packet, table_update)
}

/// `trailer` with the CRC steps done by `update`.
pub(crate) fn trailer_with(packet: &[u8], update: Update) -> Option<[u8; ICRC_LEN]> {
    icrc_with(packet, update).map(u32::to_le_bytes)
}

/// Whether `packet` (IP header through the ICRC trailer) carries a valid ICRC.
pub(crate) fn check(packet: &[u8]) -> bool {
    check_with(packet, table_update)
}

/// `check` with the CRC steps done by `update`.
pub(crate) fn check_with(packet: &[u8], update: Update) -> bool {
    let Some(split) = packet.len().checked_sub(ICRC_LEN) else {
        return false;
    };
    let (body, tail) = packet.split_at(split);
    trailer_with(body, update).is_some_and(|t| t == tail)
}
