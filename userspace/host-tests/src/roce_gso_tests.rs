//! RoCEv2 packets in one GSO packet (drivers/softrnic/core/roce_gso.rs):
//! the ICRC a sender writes for each packet over the headers
//! `segment_header` gives it must be the ICRC of the datagram the kernel's
//! UDP segmentation cuts from the GSO packet (`inet_gso_segment` and
//! `__udp_gso_segment`: each datagram gets the IP header with its own
//! total length or payload length, the IPv4 ID plus its index and a fresh
//! header checksum, and a UDP header with its own length and a real
//! checksum), and a receiver that takes the GSO packet whole must rebuild
//! the same headers to check it.

use crate::crc::crc32_update;
use crate::icrc::{check, trailer_apart, ICRC_LEN};
use crate::psn::Psn;
use crate::roce_gso::{segment_header, segments, IP_UDP_MAX};
use crate::roce_wire::{build_packet, Bth, Headers, Opcode};

fn bth(opcode: Opcode, psn: u32) -> Bth {
    Bth {
        opcode,
        solicited: false,
        mig_req: false,
        pad_cnt: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp: 0x11,
        ack_req: psn % 3 == 0,
        psn: Psn::new(psn),
    }
}

/// The IP and UDP headers softrnic pushes in front of a GSO packet of
/// `total` transport bytes (`net_shim.c`'s push_headers): IPv4 with DF, ID
/// `id`, checksum zero (the IP layer fills it), or IPv6; UDP checksum
/// zero (the pseudo-header sum goes in later, masked by the ICRC anyway).
fn gso_headers(ipv4: bool, total: usize, id: u16) -> Vec<u8> {
    let mut h = Vec::new();
    let udp_len = (8 + total) as u16;
    if ipv4 {
        let tot = (20 + 8 + total) as u16;
        h.extend_from_slice(&[0x45, 0x02]);
        h.extend_from_slice(&tot.to_be_bytes());
        h.extend_from_slice(&id.to_be_bytes());
        h.extend_from_slice(&[0x40, 0x00, 64, 17, 0, 0]);
        h.extend_from_slice(&[10, 78, 0, 1, 10, 78, 0, 2]);
    } else {
        h.extend_from_slice(&[0x60, 0x01, 0x23, 0x45]);
        h.extend_from_slice(&udp_len.to_be_bytes());
        h.extend_from_slice(&[17, 64]);
        h.extend_from_slice(&[0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(&[0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    }
    h.extend_from_slice(&[0xc1, 0x23, 0x12, 0xb7]);
    h.extend_from_slice(&udp_len.to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h
}

/// A run of an RDMA WRITE's packets as softrnic sends them in one GSO
/// packet: `full` MIDDLE packets of `mtu` bytes, then a LAST one of
/// `last` bytes (no longer), each with a zero ICRC.
fn write_run(mtu: usize, full: usize, last: usize) -> Vec<Vec<u8>> {
    let mut run = Vec::new();
    for i in 0..=full {
        let (op, len) = if i < full {
            (Opcode::RcRdmaWriteMiddle, mtu)
        } else {
            (Opcode::RcRdmaWriteLast, last)
        };
        let payload: Vec<u8> = (0..len).map(|b| (b * 7 + i) as u8).collect();
        let mut buf = vec![0u8; len + 64];
        let n = build_packet(&mut buf, &Headers::new(bth(op, 100 + i as u32)), &payload).unwrap();
        buf.truncate(n);
        run.push(buf);
    }
    run
}

/// The datagrams the kernel cuts from a GSO packet with headers `gso`
/// (IP then UDP) carrying `run` back to back: written here from the
/// kernel's rules, independently of `segment_header`.
fn kernel_cut(gso: &[u8], run: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let ipv4 = gso[0] >> 4 == 4;
    let ip_len = if ipv4 { 20 } else { 40 };
    run.iter()
        .enumerate()
        .map(|(k, seg)| {
            let mut d = gso.to_vec();
            let udp_len = (8 + seg.len()) as u16;
            if ipv4 {
                d[2..4].copy_from_slice(&((ip_len + 8 + seg.len()) as u16).to_be_bytes());
                let id = u16::from_be_bytes([d[4], d[5]]).wrapping_add(k as u16);
                d[4..6].copy_from_slice(&id.to_be_bytes());
                // ip_send_check: any checksum will do for the ICRC (masked),
                // but make it the real one.
                d[10..12].fill(0);
                let mut sum: u32 = d[..20]
                    .chunks(2)
                    .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                    .sum();
                while sum > 0xffff {
                    sum = (sum & 0xffff) + (sum >> 16);
                }
                d[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            } else {
                d[4..6].copy_from_slice(&udp_len.to_be_bytes());
            }
            d[ip_len + 4..ip_len + 6].copy_from_slice(&udp_len.to_be_bytes());
            // The UDP checksum the segmentation computes (masked).
            d[ip_len + 6..ip_len + 8].copy_from_slice(&[0x5a, 0xa5 ^ k as u8]);
            d.extend_from_slice(seg);
            d
        })
        .collect()
}

/// The sender's side (`packet.rs`, `send_run`): each packet's ICRC over
/// the headers `segment_header` gives it.
fn write_icrcs(gso: &[u8], run: &mut [Vec<u8>]) {
    for (k, seg) in run.iter_mut().enumerate() {
        let mut own = [0u8; IP_UDP_MAX];
        let n = seg.len();
        let hl = segment_header(gso, k, n, &mut own).unwrap();
        let t = trailer_apart(&own[..hl], &seg[..n - ICRC_LEN], crc32_update).unwrap();
        seg[n - ICRC_LEN..].copy_from_slice(&t);
    }
}

#[test]
fn every_datagram_cut_from_a_gso_packet_carries_a_valid_icrc() {
    for ipv4 in [true, false] {
        for (mtu, full, last) in [
            (1024, 15, 1024),
            (1024, 3, 100),
            (4096, 2, 4096),
            (256, 1, 1),
        ] {
            // IDs near the 16-bit wrap: the cut's IDs wrap too.
            for id in [0u16, 0x1234, 0xfffe] {
                let mut run = write_run(mtu, full, last);
                let total: usize = run.iter().map(Vec::len).sum();
                let gso = gso_headers(ipv4, total, id);
                write_icrcs(&gso, &mut run);
                for (k, d) in kernel_cut(&gso, &run).iter().enumerate() {
                    assert!(check(d), "ipv4 {ipv4} mtu {mtu} id {id:#x}: datagram {k}");
                }
            }
        }
    }
}

#[test]
fn the_receiver_rebuilds_each_datagrams_headers() {
    for ipv4 in [true, false] {
        let run = write_run(1024, 5, 300);
        let sizes: Vec<usize> = run.iter().map(Vec::len).collect();
        let total: usize = sizes.iter().sum();
        let gso = gso_headers(ipv4, total, 0xfff0);
        let mut run = run;
        write_icrcs(&gso, &mut run);
        let cut = kernel_cut(&gso, &run);
        // The receiver's cut: offsets and lengths from the GSO size alone.
        let got: Vec<(usize, usize)> = segments(total, sizes[0]).unwrap().collect();
        let mut off = 0;
        for (k, (d, &(at, len))) in cut.iter().zip(&got).enumerate() {
            assert_eq!((at, len), (off, sizes[k]));
            off += len;
            let mut own = [0u8; IP_UDP_MAX];
            let hl = segment_header(&gso, k, len, &mut own).unwrap();
            // The same headers the kernel's cut gave it, but the UDP
            // checksum (which the ICRC masks).
            let ip_len = hl - 8;
            assert_eq!(
                own[..ip_len + 6],
                d[..ip_len + 6],
                "ipv4 {ipv4} datagram {k}"
            );
        }
        assert_eq!(got.len(), run.len());
    }
}

#[test]
fn a_packet_in_the_wrong_place_fails_its_icrc() {
    // Two packets swapped inside the GSO packet keep their bytes, but not
    // the IPv4 ID or length their ICRC was computed for.
    let mut run = write_run(1024, 3, 1024);
    let total: usize = run.iter().map(Vec::len).sum();
    let gso = gso_headers(true, total, 7);
    write_icrcs(&gso, &mut run);
    run.swap(1, 2);
    let cut = kernel_cut(&gso, &run);
    assert!(check(&cut[0]) && check(&cut[3]));
    assert!(!check(&cut[1]) && !check(&cut[2]));
}

#[test]
fn trailer_apart_is_the_icrc_of_the_whole_packet() {
    let mut run = write_run(1024, 0, 77);
    let seg = &mut run[0];
    let gso = gso_headers(true, seg.len(), 42);
    let n = seg.len();
    let t = trailer_apart(&gso, &seg[..n - ICRC_LEN], crc32_update).unwrap();
    let mut whole = gso.clone();
    seg[n - ICRC_LEN..].copy_from_slice(&t);
    whole.extend_from_slice(seg);
    assert!(check(&whole));
    // Headers that are not IP and UDP, or a body shorter than a BTH.
    assert!(trailer_apart(&gso[..27], &seg[..n - ICRC_LEN], crc32_update).is_none());
    assert!(trailer_apart(&gso, &seg[..11], crc32_update).is_none());
}

#[test]
fn segment_geometry_and_bad_headers() {
    assert!(segments(100, 0).is_none());
    assert_eq!(segments(0, 10).unwrap().count(), 0);
    let v: Vec<_> = segments(25, 10).unwrap().collect();
    assert_eq!(v, [(0, 10), (10, 10), (20, 5)]);
    let v: Vec<_> = segments(20, 10).unwrap().collect();
    assert_eq!(v, [(0, 10), (10, 10)]);
    let mut out = [0u8; IP_UDP_MAX];
    let good = gso_headers(true, 100, 1);
    assert_eq!(segment_header(&good, 0, 100, &mut out), Some(28));
    // Not IPv4 or IPv6; not UDP; truncated; a length past 16 bits; no room.
    let mut bad = good.clone();
    bad[0] = 0x55;
    assert_eq!(segment_header(&bad, 0, 100, &mut out), None);
    let mut bad = good.clone();
    bad[9] = 6;
    assert_eq!(segment_header(&bad, 0, 100, &mut out), None);
    assert_eq!(segment_header(&good[..20], 0, 100, &mut out), None);
    assert_eq!(segment_header(&good, 0, 70000, &mut out), None);
    assert_eq!(segment_header(&good, 0, 100, &mut [0u8; 27]), None);
    let mut bad6 = gso_headers(false, 100, 0);
    bad6[6] = 6;
    assert_eq!(segment_header(&bad6, 0, 100, &mut out), None);
}
