//! QPs joined by modify_qp on iWARP (drivers/softrnic/core/iwarp/join.rs):
//! the join request's private data, which end connects, and what a
//! destination GID names.

use crate::iwarp::join::{self, initiates, peer_of, JoinRequest, Peer, PRIVATE_LEN};

#[test]
fn request_round_trips() {
    let r = JoinRequest {
        dest_qpn: 0x12_3456,
        src_qpn: 17,
    };
    let p = r.encode();
    assert_eq!(p.len(), PRIVATE_LEN);
    assert_eq!(&p[..8], b"SRNJOIN1");
    assert_eq!(&p[8..12], &[0x00, 0x12, 0x34, 0x56]);
    assert_eq!(JoinRequest::decode(&p), Some(r));
}

#[test]
fn anything_else_is_not_a_request() {
    let p = JoinRequest {
        dest_qpn: 16,
        src_qpn: 17,
    }
    .encode();
    // Another length, another magic, a QP number over 24 bits.
    assert_eq!(JoinRequest::decode(&p[..15]), None);
    let mut longer = p.to_vec();
    longer.push(0);
    assert_eq!(JoinRequest::decode(&longer), None);
    assert_eq!(JoinRequest::decode(&[]), None);
    let mut bad = p;
    bad[0] ^= 1;
    assert_eq!(JoinRequest::decode(&bad), None);
    let mut big = p;
    big[8] = 1;
    assert_eq!(JoinRequest::decode(&big), None);
    let mut big = p;
    big[12] = 1;
    assert_eq!(JoinRequest::decode(&big), None);
}

#[test]
fn exactly_one_end_connects() {
    let a = join::v4_gid([10, 0, 0, 1]);
    let b = join::v4_gid([10, 0, 0, 2]);
    // Two devices: the lower address connects, whatever the QP numbers.
    assert_eq!(initiates(&a, 900, &b, 16), Some(true));
    assert_eq!(initiates(&b, 16, &a, 900), Some(false));
    // One device (loopback): the lower QP number connects.
    assert_eq!(initiates(&a, 16, &a, 17), Some(true));
    assert_eq!(initiates(&a, 17, &a, 16), Some(false));
    // A QP joined to itself: neither.
    assert_eq!(initiates(&a, 16, &a, 16), None);
    // Every pair of distinct ends: the two ends disagree.
    let ends = [(a, 16), (a, 17), (b, 16), (b, 0xff_ffff)];
    for x in ends {
        for y in ends {
            let (l, r) = (
                initiates(&x.0, x.1, &y.0, y.1),
                initiates(&y.0, y.1, &x.0, x.1),
            );
            if x == y {
                assert_eq!((l, r), (None, None));
            } else {
                assert_eq!(l.map(|v| !v), r);
            }
        }
    }
}

#[test]
fn gids_name_macs_or_addresses() {
    let mut mac_gid = [0u8; 16];
    mac_gid[..6].copy_from_slice(&[0x52, 0x54, 0, 0x12, 0x34, 0x56]);
    assert_eq!(
        peer_of(&mac_gid),
        Peer::Mac([0x52, 0x54, 0, 0x12, 0x34, 0x56])
    );
    let v4 = join::v4_gid([192, 168, 1, 2]);
    assert_eq!(v4[..12], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
    assert_eq!(peer_of(&v4), Peer::Ip(v4));
    let mut v6 = [0u8; 16];
    v6[0] = 0xfe;
    v6[1] = 0x80;
    v6[15] = 1;
    assert_eq!(peer_of(&v6), Peer::Ip(v6));
    // The zero GID names no MAC.
    assert_eq!(peer_of(&[0u8; 16]), Peer::Ip([0u8; 16]));
}
