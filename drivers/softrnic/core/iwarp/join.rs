// SPDX-License-Identifier: GPL-2.0
//! QPs joined by modify_qp (a softrnic extension, softrnic to softrnic):
//! an iWARP QP given a destination GID and QP number and moved to RTS, as
//! IB and RoCE QPs are joined, gets its TCP connection from the RNIC
//! itself, the way RNICPI's LLP conversion hands an established stream to
//! the RNIC at Modify QP to RTS.  One end connects to the other's join
//! port and sends an MPA request whose private data names both QPs; the
//! other end answers once its QP, in RTS with the matching destination,
//! exists.  These are the rules both ends follow, without I/O.

/// The first bytes of a join request's MPA private data.
pub(crate) const MAGIC: [u8; 8] = *b"SRNJOIN1";
/// The private data of a join request: the magic, then the QP the request
/// is for and the QP it comes from (big-endian).
pub(crate) const PRIVATE_LEN: usize = 16;

/// The two QPs a join request names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct JoinRequest {
    /// The QP at the answering end.
    pub(crate) dest_qpn: u32,
    /// The QP at the connecting end.
    pub(crate) src_qpn: u32,
}

impl JoinRequest {
    pub(crate) fn encode(&self) -> [u8; PRIVATE_LEN] {
        let mut p = [0u8; PRIVATE_LEN];
        p[..8].copy_from_slice(&MAGIC);
        p[8..12].copy_from_slice(&self.dest_qpn.to_be_bytes());
        p[12..].copy_from_slice(&self.src_qpn.to_be_bytes());
        p
    }

    /// The request in an MPA request's private data; `None` for anything
    /// else (another length, another magic, a QP number over 24 bits).
    pub(crate) fn decode(p: &[u8]) -> Option<JoinRequest> {
        if p.len() != PRIVATE_LEN || p[..8] != MAGIC {
            return None;
        }
        let word = |at: usize| u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
        let r = JoinRequest {
            dest_qpn: word(8),
            src_qpn: word(12),
        };
        (r.dest_qpn <= 0xff_ffff && r.src_qpn <= 0xff_ffff).then_some(r)
    }
}

/// Whether this end opens the connection: the end whose (address, QP
/// number) is the lower, so that both ends, each comparing the same two
/// pairs, agree.  `None` when the pairs are equal: a QP joined to itself,
/// which one TCP connection cannot carry (each end needs its own stream).
pub(crate) fn initiates(
    local: &[u8; 16],
    local_qpn: u32,
    remote: &[u8; 16],
    remote_qpn: u32,
) -> Option<bool> {
    match (local, local_qpn).cmp(&(remote, remote_qpn)) {
        core::cmp::Ordering::Less => Some(true),
        core::cmp::Ordering::Greater => Some(false),
        core::cmp::Ordering::Equal => None,
    }
}

/// What a destination GID names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Peer {
    /// An iWARP port's own GID: its MAC in the first 6 bytes, the rest zero
    /// (siw's form and softrnic_iwarp's).
    Mac([u8; 6]),
    /// An IP address in GID form (IPv4-mapped or IPv6).
    Ip([u8; 16]),
}

pub(crate) fn peer_of(dgid: &[u8; 16]) -> Peer {
    if dgid[6..].iter().all(|&b| b == 0) && dgid[..6].iter().any(|&b| b != 0) {
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&dgid[..6]);
        Peer::Mac(mac)
    } else {
        Peer::Ip(*dgid)
    }
}

/// An IPv4 address as a GID (IPv4-mapped).
pub(crate) fn v4_gid(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}
