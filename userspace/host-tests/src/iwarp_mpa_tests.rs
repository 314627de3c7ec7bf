//! MPA connection setup (drivers/softrnic/core/iwarp/mpa.rs): the frames
//! byte for byte as Linux siw sends them by default (revision 2, the
//! enhanced bit, IRD/ORD words, no CRC, no markers), the negotiation rules
//! of RFC 5044 and RFC 6581, and hostile frames.

use crate::iwarp::mpa::*;

const POLICY: Policy = Policy {
    crc: CrcPolicy::On,
    rev: 2,
    p2p: false,
    max_ird: 16,
    max_ord: 16,
    ext: false,
};

/// A request as siw's default initiator builds it: flags 0x10, revision
/// 2, IRD and ORD words without flags, then the consumer's private data.
fn siw_request(ird: u16, ord: u16, private: &[u8]) -> Vec<u8> {
    let mut f = b"MPA ID Req Frame".to_vec();
    f.push(0x10);
    f.push(2);
    f.extend_from_slice(&(4 + private.len() as u16).to_be_bytes());
    f.extend_from_slice(&ird.to_be_bytes());
    f.extend_from_slice(&ord.to_be_bytes());
    f.extend_from_slice(private);
    f
}

#[test]
fn a_siw_request_is_accepted_and_answered_in_kind() {
    let bytes = siw_request(128, 128, b"rdma_cm private");
    let req = parse(Kind::Request, &bytes).unwrap();
    assert_eq!(req.rev, 2);
    assert!(!req.crc && !req.markers);
    assert_eq!(req.private, b"rdma_cm private");
    let w = req.ird_ord.unwrap();
    assert_eq!((w.ird, w.ord, w.p2p), (128, 128, false));
    // Without CRC by policy: the reply echoes C=0.
    let off = Policy {
        crc: CrcPolicy::Off,
        ..POLICY
    };
    let d = accept(&off, &req, 4, 4).unwrap();
    let (n, words) = d;
    assert!(!n.crc);
    // Our IRD covers its ORD as far as the device can; our ORD stays
    // within its IRD and our consumer's 4.
    assert_eq!((n.ird, n.ord), (16, 4));
    assert_eq!(n.rtr, None);
    let rep = reply(&req, Some(&d), b"ok");
    let mut buf = [0u8; 64];
    let len = rep.build(&mut buf).unwrap();
    let mut want = b"MPA ID Rep Frame".to_vec();
    want.extend_from_slice(&[0x10, 2, 0, 6, 0, 16, 0, 4]);
    want.extend_from_slice(b"ok");
    assert_eq!(&buf[..len], &want[..]);
    assert_eq!(words.unwrap().ird, 16);
    // With CRC on by policy the reply sets C, which binds both sides.
    let (n, _) = accept(&POLICY, &req, 4, 4).unwrap();
    assert!(n.crc);
    let rep = reply(&req, Some(&(n, words)), b"");
    let len = rep.build(&mut buf).unwrap();
    assert_eq!(buf[16], 0x50);
    assert_eq!(len, 24);
}

#[test]
fn frames_round_trip_with_every_flag() {
    let words = IrdOrd {
        ird: 0x3FFF,
        ord: 7,
        p2p: true,
        rtr: Rtr {
            send: true,
            write: false,
            read: true,
        },
    };
    for kind in [Kind::Request, Kind::Reply] {
        for rev in [1, 2] {
            let f = Frame {
                kind,
                markers: true,
                crc: true,
                reject: kind == Kind::Reply,
                rev,
                ird_ord: (rev == 2).then_some(words),
                ext: true,
                private: &[9; 100],
            };
            let mut buf = [0u8; 200];
            let len = f.build(&mut buf).unwrap();
            assert_eq!(len, f.wire_len());
            assert_eq!(parse(kind, &buf[..len]).unwrap(), f);
        }
    }
    // The IRD/ORD bits where RFC 6581 puts them.
    let f = Frame {
        kind: Kind::Request,
        markers: false,
        crc: false,
        reject: false,
        rev: 2,
        ird_ord: Some(words),
        ext: false,
        private: &[],
    };
    let mut buf = [0u8; 32];
    f.build(&mut buf).unwrap();
    assert_eq!(&buf[20..24], &[0xFF, 0xFF, 0x40, 0x07]);
}

#[test]
fn hostile_frames_are_refused_not_misread() {
    let good = siw_request(1, 1, b"");
    // Garbage before the key, a reply where a request belongs.
    let mut garbage = b"GET / HTTP/1.1\r\n".to_vec();
    garbage.extend_from_slice(&good);
    assert_eq!(parse(Kind::Request, &garbage), Err(FrameError::BadKey));
    assert_eq!(parse(Kind::Reply, &good), Err(FrameError::BadKey));
    // Revisions other than 1 and 2.
    for rev in [0, 3, 0xFF] {
        let mut f = good.clone();
        f[17] = rev;
        assert_eq!(parse(Kind::Request, &f), Err(FrameError::BadRevision(rev)));
    }
    // Private data beyond RFC 5044's 512 bytes, claimed or sent.
    let mut f = siw_request(1, 1, &[0; 509]);
    assert_eq!(
        parse(Kind::Request, &f),
        Err(FrameError::PrivateTooLong(513))
    );
    f[18..20].copy_from_slice(&0xFFFFu16.to_be_bytes());
    assert_eq!(
        parse(Kind::Request, &f),
        Err(FrameError::PrivateTooLong(0xFFFF))
    );
    // Shorter than it says, and the enhanced bit with no room for words.
    assert_eq!(
        parse(Kind::Request, &good[..good.len() - 1]),
        Err(FrameError::Truncated)
    );
    let mut f = good[..20].to_vec();
    f[18..20].copy_from_slice(&[0, 0]);
    assert_eq!(parse(Kind::Request, &f), Err(FrameError::NoIrdOrd));
    // Too much private data to build.
    let big = [0u8; 600];
    let r = request(&POLICY, 1, 1, &big);
    assert_eq!(
        r.build(&mut [0u8; 700]),
        Err(FrameError::PrivateTooLong(604))
    );
    // Every prefix of every byte value in the header: never a panic.
    for i in 0..good.len() {
        for v in [0u8, 0x10, 0x7F, 0xFF] {
            let mut f = good.clone();
            f[i] = v;
            for end in 0..=f.len() {
                let _ = parse(Kind::Request, &f[..end]);
            }
        }
    }
}

#[test]
fn the_reader_takes_the_frame_and_nothing_after_it() {
    let mut stream = siw_request(2, 2, b"pd");
    let frame_len = stream.len();
    stream.extend_from_slice(&[0x00, 0x12, 0x41, 0x43]); // an FPDU's start
                                                         // Byte by byte.
    let mut r = FrameReader::new(Kind::Request);
    let mut at = 0;
    loop {
        let (used, need) = r.feed(&stream[at..at + 1]).unwrap();
        at += used;
        if need == Need::Done {
            break;
        }
        assert!(matches!(need, Need::More(_)));
    }
    assert_eq!(at, frame_len);
    assert_eq!(r.frame().unwrap().private, b"pd");
    // All at once: it takes only the frame.
    let mut r = FrameReader::new(Kind::Request);
    assert_eq!(r.feed(&stream).unwrap(), (frame_len, Need::Done));
    assert_eq!(r.wanted(), 0);
    // Garbage fails at its first byte, an oversized frame at its length.
    let mut r = FrameReader::new(Kind::Request);
    assert_eq!(r.feed(b"X"), Err(FrameError::BadKey));
    let mut r = FrameReader::new(Kind::Request);
    let mut big = siw_request(1, 1, b"");
    big[18..20].copy_from_slice(&600u16.to_be_bytes());
    assert_eq!(r.feed(&big), Err(FrameError::PrivateTooLong(600)));
    // Fed again regardless: still refused, never past its buffer.
    assert_eq!(r.feed(&[0; 1000]), Err(FrameError::PrivateTooLong(600)));
}

#[test]
fn negotiation_follows_rfc_5044_and_rfc_6581() {
    let mut buf = [0u8; 600];
    // Markers are refused either way.
    let mut f = siw_request(1, 1, b"");
    f[16] |= 0x80;
    let req = parse(Kind::Request, &f).unwrap();
    assert_eq!(accept(&POLICY, &req, 1, 1), Err(SetupError::Markers));
    let rej = reply(&req, None, b"no markers");
    let len = rej.build(&mut buf).unwrap();
    let back = parse(Kind::Reply, &buf[..len]).unwrap();
    assert!(back.reject && !back.markers);
    let r = request(&POLICY, 1, 1, b"");
    assert_eq!(
        connected(&POLICY, 1, 1, &r, &back),
        Err(SetupError::Rejected)
    );

    // CRC: required by the initiator, refused by a reply without it.
    let req_pol = Policy {
        crc: CrcPolicy::Required,
        ..POLICY
    };
    let r = request(&req_pol, 4, 4, b"");
    assert!(r.crc);
    let plain = Frame {
        kind: Kind::Reply,
        markers: false,
        crc: false,
        reject: false,
        rev: 2,
        ird_ord: Some(IrdOrd::default()),
        ext: false,
        private: &[],
    };
    assert_eq!(
        connected(&req_pol, 4, 4, &r, &plain),
        Err(SetupError::CrcRequired)
    );
    // A revision-2 request wants its words back.
    let rev1 = Frame {
        rev: 1,
        ird_ord: None,
        ..plain
    };
    assert!(matches!(
        connected(&POLICY, 4, 4, &r, &rev1),
        Err(SetupError::Frame(FrameError::NoIrdOrd))
    ));

    // Peer-to-peer: the initiator offers the zero-length WRITE (it costs
    // neither side anything), the responder picks it, and the initiator
    // takes it.
    let p2p = Policy {
        p2p: true,
        ..POLICY
    };
    let r = request(&p2p, 8, 0, b"");
    let w = r.ird_ord.unwrap();
    assert!(w.p2p && w.rtr.write && !w.rtr.read && !w.rtr.send);
    assert_eq!(w.ord, 0, "a WRITE RTR needs no ORD");
    let d = accept(&POLICY, &r, 2, 2).unwrap();
    let rtr = d.0.rtr.unwrap();
    assert!(rtr.write && !rtr.read && !rtr.send);
    let rep = reply(&r, Some(&d), b"");
    let n = connected(&p2p, 8, 0, &r, &rep).unwrap();
    assert_eq!(n.rtr, Some(rtr));
    // Only SEND offered (another initiator): SEND.
    let mut only_send = r;
    only_send.ird_ord = Some(IrdOrd {
        rtr: Rtr {
            send: true,
            ..Rtr::default()
        },
        ..w
    });
    assert!(
        accept(&POLICY, &only_send, 2, 2)
            .unwrap()
            .0
            .rtr
            .unwrap()
            .send
    );
    // Only READ offered: READ, if our IRD can take it.
    let mut only_read = r;
    only_read.ird_ord = Some(IrdOrd {
        rtr: Rtr {
            read: true,
            ..Rtr::default()
        },
        ..w
    });
    assert!(
        accept(&POLICY, &only_read, 2, 2)
            .unwrap()
            .0
            .rtr
            .unwrap()
            .read
    );
    // Nothing offered: no RTR both can use.
    only_read.ird_ord = Some(IrdOrd {
        rtr: Rtr::default(),
        ..w
    });
    assert_eq!(accept(&POLICY, &only_read, 2, 2), Err(SetupError::NoRtr));
    assert_eq!(SetupError::NoRtr.llp_code(), 0x07);
    // A reply that picks two RTRs, or one not offered.
    let mut two = rep;
    two.ird_ord = Some(IrdOrd {
        p2p: true,
        rtr: Rtr {
            write: true,
            read: true,
            send: false,
        },
        ..IrdOrd::default()
    });
    assert_eq!(connected(&p2p, 8, 0, &r, &two), Err(SetupError::NoRtr));

    // Limits: our ORD never exceeds the peer's IRD; our IRD covers the
    // peer's ORD up to the device's maximum.
    let r = request(&POLICY, 3, 9, b"");
    let (n, words) = accept(&POLICY, &r, 1, 12).unwrap();
    assert_eq!((n.ird, n.ord), (9, 3));
    let rep = reply(&r, Some(&(n, words)), b"");
    let m = connected(&POLICY, 3, 9, &r, &rep).unwrap();
    assert_eq!((m.ird, m.ord), (3, 9));
    // Revision 1 both ways: no words, the consumers' limits.
    let v1 = Policy { rev: 1, ..POLICY };
    let r = request(&v1, 5, 6, b"x");
    assert_eq!(r.ird_ord, None);
    let len = r.build(&mut buf).unwrap();
    assert_eq!(len, 21);
    let d = accept(&POLICY, &r, 2, 3).unwrap();
    assert_eq!(d.1, None);
    let rep = reply(&r, Some(&d), b"");
    assert_eq!(rep.rev, 1);
    let m = connected(&v1, 5, 6, &r, &rep).unwrap();
    assert_eq!((m.ird, m.ord, m.rtr), (5, 6, None));
}

/// RFC 7306 between two softrnic ends: offered in the request (0x02),
/// accepted in the reply (0x01); never with siw, whose reply echoes the
/// request's reserved bits, nor to siw, whose request has none.
#[test]
fn extensions_are_negotiated_only_between_softrnic_ends() {
    let ours = Policy {
        ext: true,
        ..POLICY
    };
    let mut buf = [0u8; 64];

    // softrnic to softrnic.
    let req = request(&ours, 4, 4, b"pd");
    let len = req.build(&mut buf).unwrap();
    assert_eq!(buf[16], 0x40 | 0x10 | 0x02);
    let req_back = parse(Kind::Request, &buf[..len]).unwrap();
    assert!(req_back.ext);
    let d = accept(&ours, &req_back, 4, 4).unwrap();
    assert!(d.0.ext);
    let rep = reply(&req_back, Some(&d), b"");
    let mut rbuf = [0u8; 64];
    let rlen = rep.build(&mut rbuf).unwrap();
    assert_eq!(rbuf[16] & 0x03, 0x01, "the reply accepts with its own bit");
    let rep_back = parse(Kind::Reply, &rbuf[..rlen]).unwrap();
    assert!(connected(&ours, 4, 4, &req, &rep_back).unwrap().ext);

    // softrnic to siw: siw's reply is our request's header with the reply
    // key, bits and words kept (siw_cm.c builds it in place): the offer
    // bit comes back, which is no acceptance.
    let mut echoed = buf[..len].to_vec();
    echoed[..16].copy_from_slice(b"MPA ID Rep Frame");
    let rep = parse(Kind::Reply, &echoed).unwrap();
    assert!(!rep.ext);
    assert!(!connected(&ours, 4, 4, &req, &rep).unwrap().ext);

    // siw to softrnic: no offer, no acceptance; the reply is the one siw
    // has always had from us (no reserved bit set).
    let siw = siw_request(4, 4, b"");
    let req = parse(Kind::Request, &siw).unwrap();
    let d = accept(&ours, &req, 4, 4).unwrap();
    assert!(!d.0.ext);
    let rlen = reply(&req, Some(&d), b"").build(&mut rbuf).unwrap();
    assert_eq!(rbuf[16], 0x50);
    assert!(!parse(Kind::Reply, &rbuf[..rlen]).unwrap().ext);

    // An offer to a responder without the extensions: declined.
    let req = request(&ours, 4, 4, b"");
    let d = accept(&POLICY, &req, 4, 4).unwrap();
    assert!(!d.0.ext);
    let rep = reply(&req, Some(&d), b"");
    assert!(!connected(&ours, 4, 4, &req, &rep).unwrap().ext);
    // A refusal never accepts.
    assert!(!reply(&req, None, b"").ext);
}
