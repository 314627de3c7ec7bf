//! The RoCEv2 ICRC (drivers/softrnic/core/icrc.rs) against packets that the
//! kernel's rdma_rxe put on the wire (captured with dumpcap in the test VM:
//! RC SEND and ACK, UD SEND over IPv4, RC SEND and ACK over IPv6 link-local
//! GIDs), and the masking rules of IBTA Annex A17.3.3.

use crate::crc::{crc32, crc32_update, crc32c, crc32c_update, Crc};
use crate::icrc::{check, icrc, trailer, ICRC_LEN};

/// IP header through ICRC, as captured.
const RXE_PACKETS: [&str; 5] = [
    // IPv4, RC SEND_ONLY (opcode 0x04), 64-byte payload
    "4500006cb78c400040116e4e0a5200020a520001c12112b7005800000400ffff000000118001f54a\
     7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
     7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7712a0b2",
    // IPv4, RC ACKNOWLEDGE (0x11) with AETH
    "45000030b78e400040116e880a5200020a520001c12112b7001c00001100ffff0000001100cf852c\
     1f0000015049b6c0",
    // IPv4, UD SEND_ONLY (0x64) with DETH
    "45000074b85b400040116d770a5200020a520001f80612b7006000006400ffff00000012006a7db3\
     11111111000000127b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
     7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b636690af",
    // IPv6 link-local, RC SEND_ONLY, 100-byte payload
    "60000000007c1140fe80000000000000f882d0fffe14c19bfe800000000000001c386cfffe9aa95a\
     c16912b7007c00000400ffff000000138073863e7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
     7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
     7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b7b\
     d514a786",
    // IPv6 link-local, RC ACKNOWLEDGE
    "60000000001c1140fe800000000000001c386cfffe9aa95afe80000000000000f882d0fffe14c19b\
     c16912b7001c00001100ffff000000130073863e1f00000144f1a28f",
];

fn bytes(hex: &str) -> Vec<u8> {
    let hex: Vec<u8> = hex.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    hex.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn crc32_matches_the_ieee_check_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    // Incremental feeding gives the same value.
    let mut d = Crc::new(crc32_update);
    d.update(b"1234");
    d.update(b"56789");
    assert_eq!(d.finish(), 0xCBF4_3926);
}

#[test]
fn crc32c_matches_the_castagnoli_check_values() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    // RFC 3720 appendix B.4: 32 bytes of zeros, of ones, ascending.
    assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
    let up: Vec<u8> = (0u8..32).collect();
    assert_eq!(crc32c(&up), 0x46DD_794E);
    let mut d = Crc::new(crc32c_update);
    d.update(&up[..5]);
    d.update(&up[5..]);
    assert_eq!(d.finish(), 0x46DD_794E);
}

#[test]
fn icrc_of_rxe_packets_matches_their_trailer() {
    for hex in RXE_PACKETS {
        let p = bytes(hex);
        assert!(check(&p), "rxe packet {hex:.40}… fails the ICRC check");
        let body = &p[..p.len() - ICRC_LEN];
        assert_eq!(trailer(body).unwrap(), p[p.len() - ICRC_LEN..]);
    }
}

/// Offsets (from the IP header) of the bytes the ICRC must not cover.
fn masked(p: &[u8]) -> Vec<usize> {
    let (ip, mut v) = if p[0] >> 4 == 4 {
        (usize::from(p[0] & 0xF) * 4, vec![1, 8, 10, 11])
    } else {
        (40, vec![1, 2, 3, 7])
    };
    v.extend([ip + 6, ip + 7, ip + 8 + 4]);
    v
}

#[test]
fn routers_may_change_masked_fields_without_breaking_the_icrc() {
    for hex in RXE_PACKETS {
        let p = bytes(hex);
        for off in masked(&p) {
            let mut q = p.clone();
            q[off] ^= 0x5A;
            assert!(check(&q), "changing masked byte {off} broke the ICRC");
        }
        // IPv6 traffic class: the low four bits of byte 0.
        if p[0] >> 4 == 6 {
            let mut q = p.clone();
            q[0] ^= 0x0F;
            assert!(check(&q));
        }
    }
}

#[test]
fn every_other_byte_is_covered() {
    for hex in RXE_PACKETS {
        let p = bytes(hex);
        let skip = masked(&p);
        for off in 0..p.len() - ICRC_LEN {
            if skip.contains(&off) || (off == 0 && p[0] >> 4 == 6) {
                continue;
            }
            let mut q = p.clone();
            q[off] ^= 0x01;
            assert!(!check(&q), "byte {off} is not covered by the ICRC");
        }
    }
}

#[test]
fn malformed_input_is_rejected_not_panicked_on() {
    assert_eq!(icrc(&[]), None);
    assert_eq!(icrc(&[0x45; 10]), None); // shorter than an IPv4 header
    assert_eq!(icrc(&[0x44; 64]), None); // IHL 4 words < 5
    assert_eq!(icrc(&[0x75; 64]), None); // IP version 7
    assert_eq!(icrc(&[0x60; 50]), None); // IPv6 without room for UDP + BTH
    assert!(!check(&[1, 2, 3]));
    let p = bytes(RXE_PACKETS[1]);
    for n in 0..p.len() {
        let _ = check(&p[..n]);
    }
}

/// A bit-at-a-time CRC-32 step: another implementation of the recurrence
/// the kernel's `crc32_le` computes, standing in for it.
fn bitwise_update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = crc;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    c
}

#[test]
fn any_crc32_le_step_gives_the_same_icrc() {
    for (i, hex) in RXE_PACKETS.iter().enumerate() {
        let p = bytes(hex);
        assert!(crate::icrc::check_with(&p, bitwise_update), "packet {i}");
        let n = p.len() - ICRC_LEN;
        assert_eq!(
            crate::icrc::trailer_with(&p[..n], bitwise_update),
            trailer(&p[..n]),
            "packet {i}"
        );
    }
}

/// The receive path's reading of a packet held in fragments: the headers,
/// then the rest in pieces cut anywhere (the trailer too), gives the same
/// verdict as the whole packet, and any changed byte of a piece fails it.
#[test]
fn a_packet_read_in_pieces_gets_the_same_verdict() {
    use crate::icrc::check_parts;
    use crate::roce_wire::split_icrc;
    for hex in RXE_PACKETS {
        let p = bytes(hex);
        let headers = if p[0] >> 4 == 4 {
            20 + 8 + 12
        } else {
            40 + 8 + 12
        };
        let rest = &p[headers..];
        for a in 0..=rest.len() {
            for b in (a..=rest.len()).step_by(7) {
                let mut pieces = [&rest[..a], &rest[a..b], &rest[b..]];
                let (trailer, body) = split_icrc(&mut pieces).unwrap();
                assert_eq!(trailer[..], p[p.len() - ICRC_LEN..]);
                assert_eq!(pieces[..body].concat(), rest[..rest.len() - ICRC_LEN]);
                assert!(check_parts(
                    &p[..headers],
                    &pieces[..body],
                    trailer,
                    crc32_update
                ));
            }
        }
        for i in headers..p.len() - ICRC_LEN {
            let mut q = p.clone();
            q[i] ^= 0x40;
            let rest = &q[headers..];
            let mut pieces = [&rest[..rest.len() / 3], &rest[rest.len() / 3..]];
            let (trailer, body) = split_icrc(&mut pieces).unwrap();
            assert!(!check_parts(
                &q[..headers],
                &pieces[..body],
                trailer,
                crc32_update
            ));
        }
    }
}

/// A packet whose ICRC was zeroed (as `rx::loop_back`'s packets, which never
/// leave the host, carry it): refused when the ICRC is checked, read with
/// the same headers and payload when the caller says there is none.
#[test]
fn a_packet_without_its_icrc_is_read_only_unchecked() {
    use crate::roce_wire::{packet_in_pieces, parse_headers, PiecesError};
    let mut p = bytes(RXE_PACKETS[0]);
    let n = p.len();
    p[n - ICRC_LEN..].fill(0);
    let ip_udp = 20 + 8;
    let (hdr, header_len, payload_len) = parse_headers(&p[ip_udp..], n - ip_udp).unwrap();
    let at = ip_udp + header_len;
    let mut pieces = [&p[at..at + 10], &p[at + 10..]];
    assert_eq!(
        packet_in_pieces(&p[..at], hdr, payload_len, &mut pieces, Some(crc32_update)).err(),
        Some(PiecesError::BadIcrc)
    );
    let mut pieces = [&p[at..at + 10], &p[at + 10..]];
    let pkt = packet_in_pieces(&p[..at], hdr, payload_len, &mut pieces, None).unwrap();
    assert_eq!(pkt.hdr, hdr);
    assert_eq!(pkt.payload.len(), 64);
    let mut got = Vec::new();
    pkt.payload
        .placed(0)
        .for_each(|(_, piece)| got.extend_from_slice(piece));
    assert_eq!(got, vec![0x7b; 64]);
}
