// SPDX-License-Identifier: GPL-2.0
//! RoCEv2 packets carried as one GSO packet: one IP and UDP header in
//! front of several RoCE transport packets (BTH to ICRC) of `size` bytes
//! each, the last possibly shorter, which the network stack (or a NIC)
//! cuts into one datagram per packet.  The cut follows the kernel's UDP
//! segmentation (`__udp_gso_segment`, `inet_gso_segment`): each datagram
//! gets the same addresses, ports and flags, its own lengths and, over
//! IPv4, the header's identification plus its index.  The ICRC covers the
//! IP and UDP headers of the datagram as it will be, so a sender computes
//! each packet's ICRC over `segment_header`, and a receiver that takes the
//! GSO packet whole rebuilds the same headers to check it.
//!
//! Sans-IO: `core` only, no allocation.

/// The most bytes of IP and UDP header a segment has: IPv4 with options
/// (60) and UDP (8).
pub(crate) const IP_UDP_MAX: usize = 68;
const UDP_LEN: usize = 8;

/// The packets of a GSO packet of `total` transport bytes cut at `size`:
/// (offset, length) each, in order.  None when `size` is 0.
pub(crate) fn segments(total: usize, size: usize) -> Option<impl Iterator<Item = (usize, usize)>> {
    (size > 0).then(|| {
        (0..total.div_ceil(size)).map(move |k| {
            let off = k * size;
            (off, core::cmp::min(size, total - off))
        })
    })
}

/// The IP and UDP headers of segment `k`, `len` transport bytes long, of
/// the GSO packet whose headers are `gso` (IP header then UDP header),
/// written to the start of `out`: how many bytes, or None when `gso` is
/// not an IPv4 or IPv6 header followed by UDP, or the lengths or `out` do
/// not fit.  The IPv4
/// header checksum is recomputed; the UDP checksum is left as it is (the
/// ICRC masks it, and the stack's segmentation fills it).
pub(crate) fn segment_header(gso: &[u8], k: usize, len: usize, out: &mut [u8]) -> Option<usize> {
    let first = *gso.first()?;
    let ip_len = match first >> 4 {
        4 => usize::from(first & 0x0f) * 4,
        6 => 40,
        _ => return None,
    };
    if ip_len < 20 || ip_len + UDP_LEN > IP_UDP_MAX {
        return None;
    }
    let hl = ip_len + UDP_LEN;
    let out = out.get_mut(..hl)?;
    out.copy_from_slice(gso.get(..hl)?);
    let udp_len = u16::try_from(UDP_LEN + len).ok()?;
    if first >> 4 == 4 {
        if out[9] != 17 {
            return None;
        }
        let tot = u16::try_from(ip_len + UDP_LEN + len).ok()?;
        out[2..4].copy_from_slice(&tot.to_be_bytes());
        let id = u16::from_be_bytes([out[4], out[5]]).wrapping_add(k as u16);
        out[4..6].copy_from_slice(&id.to_be_bytes());
        out[10..12].fill(0);
        let sum = ipv4_checksum(&out[..ip_len]);
        out[10..12].copy_from_slice(&sum.to_be_bytes());
    } else {
        if out[6] != 17 {
            return None;
        }
        out[4..6].copy_from_slice(&udp_len.to_be_bytes());
    }
    out[ip_len + 4..ip_len + 6].copy_from_slice(&udp_len.to_be_bytes());
    Some(hl)
}

/// The IPv4 header checksum of `hdr` (its checksum field zero).
fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum = 0u32;
    for w in hdr.chunks(2) {
        let hi = u32::from(w[0]) << 8;
        sum += hi | w.get(1).map_or(0, |&b| u32::from(b));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
