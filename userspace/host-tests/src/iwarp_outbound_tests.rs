//! The outbound machine (drivers/softrnic/core/iwarp/outbound.rs): send
//! WQEs become RDMAP messages in FPDU segments, answers go first, the ORD
//! and fences hold READs back, a full socket resumes exactly where it
//! stopped, and completions come in send-queue order.

use std::collections::VecDeque;

use crate::iwarp::fpdu::*;
use crate::iwarp::outbound::*;
use crate::roce::wc;
use crate::transport_rules::MsgOp;

#[derive(Default)]
struct Io {
    sq: Vec<OutWqe>,
    emitted: Vec<(Segment, Source)>,
    /// Emits the socket takes before it is full (None: no limit).
    room: Option<usize>,
    completed: Vec<(u32, u8)>,
    /// The message length each completion reported.
    completed_len: Vec<u32>,
    answers: VecDeque<Answer>,
    answered: u32,
    locals: Vec<u32>,
}

impl OutboundIo for Io {
    fn producer(&mut self) -> u32 {
        self.sq.len() as u32
    }
    fn slots(&self) -> u32 {
        64
    }
    fn prepare(&mut self, index: u32) -> Option<OutWqe> {
        self.sq.get(index as usize).copied()
    }
    fn run_local(&mut self, index: u32) -> u8 {
        self.locals.push(index);
        wc::SUCCESS
    }
    fn position(&self) -> u64 {
        // (Segments stand for bytes: the order is what counts.)
        self.emitted.len() as u64
    }
    fn emit(&mut self, seg: &Segment, src: Source) -> Result<(), EmitFail> {
        if let Some(r) = self.room.as_mut() {
            if *r == 0 {
                return Err(EmitFail::Full);
            }
            *r -= 1;
        }
        self.emitted.push((*seg, src));
        Ok(())
    }
    fn complete(&mut self, index: u32, status: u8, len: u32) {
        self.completed.push((index, status));
        self.completed_len.push(len);
    }
    fn next_answer(&mut self) -> Option<Answer> {
        self.answers.front().copied()
    }
    fn answered(&mut self) {
        self.answers.pop_front();
        self.answered += 1;
    }
}

const P: OutboundParams = OutboundParams {
    max_fpdu: 1024,
    ord: 2,
    extensions: false,
    sending: true,
    confirm: false,
};

fn wqe(op: MsgOp, len: u32) -> OutWqe {
    OutWqe {
        op: Some(op),
        len,
        remote_stag: 0x100,
        remote_to: 0x1000,
        sink_stag: 0x200,
        sink_to: 0x2000,
        ..OutWqe::default()
    }
}

/// Build what may go out and let the socket take all of it, again while
/// that moves anything (as the kernel's pump does).
fn emit(m: &mut Outbound<Vec<Slot>>, p: &OutboundParams, io: &mut Io) -> Outcome {
    loop {
        let seen = (io.emitted.len(), io.completed.len());
        let o = m.emit(p, io);
        m.taken(io.position(), p.confirm, io);
        if o != Outcome::default() || seen == (io.emitted.len(), io.completed.len()) {
            return o;
        }
    }
}

fn machine() -> Outbound<Vec<Slot>> {
    Outbound::new(vec![Slot::default(); 64])
}

fn msn_mo(s: &Segment) -> (u32, u32) {
    match s.hdr.place {
        Placement::Untagged { msn, mo, .. } => (msn, mo),
        Placement::Tagged { .. } => panic!("tagged"),
    }
}

#[test]
fn sends_are_segmented_and_complete_once_out() {
    let mut io = Io {
        sq: vec![wqe(MsgOp::Send, 3000), wqe(MsgOp::Send, 0)],
        ..Io::default()
    };
    let mut m = machine();
    assert_eq!(emit(&mut m, &P, &mut io), Outcome::default());
    let segs: Vec<(u32, u32, u32, bool)> = io
        .emitted
        .iter()
        .map(|(s, _)| {
            let (msn, mo) = msn_mo(s);
            (msn, mo, s.len, s.hdr.last)
        })
        .collect();
    assert_eq!(
        segs,
        [
            (1, 0, 1000, false),
            (1, 1000, 1000, false),
            (1, 2000, 1000, true),
            (2, 0, 0, true)
        ]
    );
    assert_eq!(io.completed, [(0, wc::SUCCESS), (1, wc::SUCCESS)]);
    assert_eq!(io.completed_len, [3000, 0], "the length prepare gave");
    assert_eq!(io.emitted[0].1, Source::Wqe(0));
}

#[test]
fn a_full_socket_resumes_where_it_stopped() {
    for room in 0..6 {
        let mut io = Io {
            sq: vec![wqe(MsgOp::Write, 4000), wqe(MsgOp::Send, 10)],
            room: Some(room),
            ..Io::default()
        };
        let mut m = machine();
        let mut rounds = 0;
        while io.completed.len() < 2 {
            emit(&mut m, &P, &mut io);
            io.room = Some(room.max(1));
            rounds += 1;
            assert!(rounds < 20);
        }
        // Every byte once, in order: WRITE segments then the SEND.
        let offs: Vec<(u32, u32)> = io.emitted.iter().map(|(s, _)| (s.offset, s.len)).collect();
        assert_eq!(
            offs,
            [(0, 1004), (1004, 1004), (2008, 1004), (3012, 988), (0, 10)]
        );
        assert_eq!(
            io.emitted[1].0.hdr.place,
            Placement::Tagged {
                stag: 0x100,
                to: 0x1000 + 1004
            }
        );
        assert_eq!(msn_mo(&io.emitted[4].0), (1, 0));
    }
}

#[test]
fn reads_wait_for_their_answer_and_hold_completions_in_order() {
    let mut io = Io {
        sq: vec![
            wqe(MsgOp::Read, 5000),
            wqe(MsgOp::Send, 8),
            wqe(MsgOp::Read, 10),
            wqe(MsgOp::Read, 10),
        ],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &P, &mut io);
    // Both READ requests the ORD allows, with the SEND between them.
    let ops: Vec<Opcode> = io.emitted.iter().map(|(s, _)| s.hdr.opcode).collect();
    assert_eq!(
        ops,
        [Opcode::ReadRequest, Opcode::Send, Opcode::ReadRequest]
    );
    let (s, src) = io.emitted[0];
    assert_eq!(src, Source::None);
    assert_eq!(
        s.hdr.rdmap,
        RdmapHeader::ReadRequest(ReadRequest {
            sink_stag: 0x200,
            sink_to: 0x2000,
            len: 5000,
            src_stag: 0x100,
            src_to: 0x1000,
        })
    );
    assert_eq!(msn_mo(&io.emitted[2].0), (2, 0));
    // Nothing completes before the first READ's answer, not even the SEND.
    assert!(io.completed.is_empty());
    assert_eq!(m.reads_out(), 2);
    assert_eq!(m.read_awaited().unwrap().0, 0);
    assert!(m.read_answered());
    assert!(io.completed.is_empty(), "completions come from emit");
    // The ORD frees a slot: the third READ goes.
    emit(&mut m, &P, &mut io);
    assert_eq!(io.completed, [(0, wc::SUCCESS), (1, wc::SUCCESS)]);
    assert_eq!(io.emitted.len(), 4);
    assert!(m.read_answered() && m.read_answered());
    emit(&mut m, &P, &mut io);
    assert_eq!(io.completed.len(), 4);
    assert!(!m.read_answered(), "no READ is awaited");
}

#[test]
fn a_fence_waits_for_reads_and_answers_go_first() {
    let mut fenced = wqe(MsgOp::Send, 4);
    fenced.fence = true;
    let mut io = Io {
        sq: vec![wqe(MsgOp::Read, 4), fenced],
        ..Io::default()
    };
    io.answers.push_back(Answer::Read(ReadRequest {
        sink_stag: 7,
        sink_to: 0x7000,
        len: 1500,
        src_stag: 0x300,
        src_to: 0x3000,
    }));
    let mut m = machine();
    emit(&mut m, &P, &mut io);
    let ops: Vec<Opcode> = io.emitted.iter().map(|(s, _)| s.hdr.opcode).collect();
    assert_eq!(
        ops,
        [
            Opcode::ReadResponse,
            Opcode::ReadResponse,
            Opcode::ReadRequest
        ]
    );
    assert_eq!(io.answered, 1);
    assert_eq!(
        io.emitted[1].1,
        Source::Local {
            stag: 0x300,
            to: 0x3000
        }
    );
    assert_eq!(
        io.emitted[1].0.hdr.place,
        Placement::Tagged {
            stag: 7,
            to: 0x7000 + 1004
        }
    );
    m.read_answered();
    emit(&mut m, &P, &mut io);
    assert_eq!(io.emitted.last().unwrap().0.hdr.opcode, Opcode::Send);
    assert_eq!(io.completed, [(0, wc::SUCCESS), (1, wc::SUCCESS)]);
}

#[test]
fn rfc_7306_only_with_extensions() {
    let mut imm = wqe(MsgOp::WriteImm, 100);
    imm.imm = 0xCAFE_F00D;
    imm.solicited = true;
    // Without: refused at the head, and the QP goes to ERR.
    let mut io = Io {
        sq: vec![wqe(MsgOp::Send, 1), imm],
        ..Io::default()
    };
    let mut m = machine();
    let o = emit(&mut m, &P, &mut io);
    assert!(o.error);
    assert_eq!(io.completed, [(0, wc::SUCCESS), (1, wc::LOC_QP_OP_ERR)]);
    // With: the WRITE, then the immediate data on queue 0.
    let ext = OutboundParams {
        extensions: true,
        ..P
    };
    let mut io = Io {
        sq: vec![imm, wqe(MsgOp::FetchAdd, 8)],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &ext, &mut io);
    let (s, _) = io.emitted[1];
    assert_eq!(s.hdr.opcode, Opcode::ImmediateSolicited);
    assert_eq!(
        s.hdr.rdmap,
        RdmapHeader::Immediate([0xCA, 0xFE, 0xF0, 0x0D, 0, 0, 0, 0])
    );
    assert_eq!(msn_mo(&s), (1, 0));
    let (a, _) = io.emitted[2];
    assert!(
        matches!(a.hdr.rdmap, RdmapHeader::AtomicRequest(r) if r.op == AtomicOp::FetchAdd && r.add_swap == 0)
    );
    assert_eq!(io.completed, [(0, wc::SUCCESS)]);
    // SEND with immediate has no iWARP message at all.
    let mut io = Io {
        sq: vec![wqe(MsgOp::SendImm, 4)],
        ..Io::default()
    };
    assert!(emit(&mut machine(), &ext, &mut io).error);
}

#[test]
fn local_operations_wait_for_the_head_and_a_corrupt_ring_is_fatal() {
    let local = OutWqe::default();
    let mut io = Io {
        sq: vec![wqe(MsgOp::Read, 4), local],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &P, &mut io);
    assert!(io.locals.is_empty());
    m.read_answered();
    emit(&mut m, &P, &mut io);
    assert_eq!(io.locals, [1]);
    assert_eq!(io.completed.len(), 2);
    // A producer more than the ring's size ahead.
    let mut io = Io {
        sq: vec![wqe(MsgOp::Send, 1); 65],
        ..Io::default()
    };
    assert!(emit(&mut machine(), &P, &mut io).fatal);
}

/// A fast registration (or MW bind) runs as soon as it is reached, and the
/// READ behind it goes out without waiting for the READ before it; both
/// complete in order.  A local invalidate, and a registration that fails
/// away from the head, wait for the head.
#[test]
fn a_fast_registration_runs_when_reached_and_completes_in_order() {
    let reg = OutWqe {
        early: true,
        ..OutWqe::default()
    };
    let mut io = Io {
        sq: vec![wqe(MsgOp::Read, 4), reg, wqe(MsgOp::Read, 4)],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &P, &mut io);
    assert_eq!(io.locals, [1], "the registration ran at once");
    assert_eq!(io.emitted.len(), 2, "both READ requests are out");
    assert!(io.completed.is_empty(), "nothing completes before the head");
    m.read_answered();
    emit(&mut m, &P, &mut io);
    assert_eq!(io.completed, [(0, wc::SUCCESS), (1, wc::SUCCESS)]);
    m.read_answered();
    emit(&mut m, &P, &mut io);
    assert_eq!(io.completed.len(), 3);
    assert_eq!(io.locals, [1], "run once");

    // Fenced, or an invalidate: at the head only.
    let fenced = OutWqe {
        early: true,
        fence: true,
        ..OutWqe::default()
    };
    for local in [OutWqe::default(), fenced] {
        let mut io = Io {
            sq: vec![wqe(MsgOp::Read, 4), local, wqe(MsgOp::Send, 4)],
            ..Io::default()
        };
        let mut m = machine();
        emit(&mut m, &P, &mut io);
        assert!(io.locals.is_empty());
        assert_eq!(io.emitted.len(), 1, "the SEND waits behind it");
        m.read_answered();
        emit(&mut m, &P, &mut io);
        assert_eq!(io.locals, [1]);
        assert_eq!(io.completed.len(), 3);
    }
}

/// A stream bound after local operations ran at the head of the queue
/// (a bind posted before the connection was up) starts after them: each
/// WQE runs once (a bind run twice fails: the window's key moved on).
#[test]
fn a_machine_started_later_takes_the_queue_from_there() {
    let mut io = Io {
        sq: vec![
            OutWqe::default(),
            OutWqe::default(),
            wqe(MsgOp::Send, 10),
            OutWqe::default(),
            wqe(MsgOp::Write, 10),
        ],
        ..Io::default()
    };
    let mut m = machine();
    m.start_at(2);
    emit(&mut m, &P, &mut io);
    assert_eq!(io.locals, [3]);
    assert_eq!(
        io.completed,
        [(2, wc::SUCCESS), (3, wc::SUCCESS), (4, wc::SUCCESS)]
    );
    assert_eq!(io.emitted.len(), 2);
    assert_eq!(io.emitted[0].1, Source::Wqe(2));
}

/// A READ the peer refused (its TERMINATE) is done with REM_ACCESS_ERR, and
/// what was done before it can be taken off in order, without an emit.
#[test]
fn a_refused_read_completes_with_remote_access_error() {
    let mut io = Io {
        sq: vec![wqe(MsgOp::Read, 100), wqe(MsgOp::Send, 10)],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &P, &mut io);
    assert!(io.completed.is_empty());
    assert!(m.take_done().is_none());
    assert!(m.read_refused());
    assert_eq!(m.reads_out(), 0);
    assert_eq!(
        m.take_done().map(|d| (d.index, d.status)),
        Some((0, wc::REM_ACCESS_ERR))
    );
    // The SEND after it went out, and is done too.
    assert_eq!(
        m.take_done().map(|d| (d.index, d.status)),
        Some((1, wc::SUCCESS))
    );
    assert!(m.take_done().is_none());
    assert!(!m.read_refused());
}

/// A SEND or WRITE is complete once the socket has taken its last byte,
/// not when its FPDUs are built: an application that sees the completion
/// may look for the data at the other end.  A READ answered shows that
/// what went before it was taken.
#[test]
fn sends_and_writes_complete_once_the_socket_took_them() {
    let mut io = Io {
        sq: vec![
            wqe(MsgOp::Write, 3000),
            wqe(MsgOp::Send, 10),
            wqe(MsgOp::Read, 10),
            wqe(MsgOp::Write, 10),
        ],
        ..Io::default()
    };
    let mut m = machine();
    assert_eq!(m.emit(&P, &mut io), Outcome::default());
    // WRITE: 3 FPDUs; SEND: 1; READ request: 1; WRITE: 1.
    assert_eq!(io.emitted.len(), 6);
    assert!(io.completed.is_empty());
    m.taken(2, false, &mut io);
    assert!(io.completed.is_empty());
    m.taken(3, false, &mut io);
    assert_eq!(io.completed, [(0, wc::SUCCESS)]);
    // The READ's answer: the SEND before it went out; the WRITE after it
    // waits for the socket.
    assert!(m.read_answered());
    m.taken(3, false, &mut io);
    assert_eq!(
        io.completed,
        [(0, wc::SUCCESS), (1, wc::SUCCESS), (2, wc::SUCCESS)]
    );
    m.taken(6, false, &mut io);
    assert_eq!(io.completed.len(), 4);
}

/// A QP joined by modify_qp (`confirm`): a WRITE the socket took is not
/// complete; a zero-length READ of the machine's own follows it, and its
/// answer completes it (RFC 5040 orders that answer after the WRITE's
/// placement).  A READ the application posted after a WRITE confirms it
/// as well, with no READ of the machine's own.
#[test]
fn joined_writes_complete_once_a_read_after_them_is_answered() {
    let c = OutboundParams { confirm: true, ..P };
    let mut io = Io {
        sq: vec![wqe(MsgOp::Write, 10), wqe(MsgOp::Write, 10)],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &c, &mut io);
    // The two WRITEs, then one zero-length READ request.
    assert_eq!(io.emitted.len(), 3);
    let (last, _) = io.emitted[2];
    assert_eq!(last.hdr.opcode, Opcode::ReadRequest);
    match last.hdr.rdmap {
        RdmapHeader::ReadRequest(r) => assert_eq!(r.len, 0),
        other => panic!("not a READ request: {other:?}"),
    }
    assert!(
        io.completed.is_empty(),
        "completed before placement was confirmed"
    );
    assert_eq!(m.reads_out(), 1);
    let (_, w) = m.read_awaited().unwrap();
    assert_eq!((w.len, w.sink_stag), (0, 0));
    assert!(m.read_answered());
    emit(&mut m, &c, &mut io);
    assert_eq!(io.completed, [(0, wc::SUCCESS), (1, wc::SUCCESS)]);
    assert_eq!(io.emitted.len(), 3, "nothing more to confirm");

    // A local operation after the WRITE waits for the head, so for the
    // WRITE's confirmation: the READ goes out before it (they waited for
    // each other: the simulation's first local operations stalled here).
    let mut io = Io {
        sq: vec![wqe(MsgOp::Write, 10), OutWqe::default()],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &c, &mut io);
    assert_eq!(io.emitted.len(), 2, "the WRITE and its confirming READ");
    assert!(io.locals.is_empty());
    assert!(m.read_answered());
    emit(&mut m, &c, &mut io);
    assert_eq!(io.locals, [1]);
    assert_eq!(io.completed, [(0, wc::SUCCESS), (1, wc::SUCCESS)]);

    // A READ after the WRITE answers for it.
    let mut io = Io {
        sq: vec![wqe(MsgOp::Write, 10), wqe(MsgOp::Read, 10)],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &c, &mut io);
    assert_eq!(io.emitted.len(), 2);
    assert!(io.completed.is_empty());
    assert!(m.read_answered());
    emit(&mut m, &c, &mut io);
    assert_eq!(io.completed, [(0, wc::SUCCESS), (1, wc::SUCCESS)]);

    // Not joined: the WRITE completes once the socket took it.
    let mut io = Io {
        sq: vec![wqe(MsgOp::Write, 10)],
        ..Io::default()
    };
    let mut m = machine();
    emit(&mut m, &P, &mut io);
    assert_eq!(io.emitted.len(), 1);
    assert_eq!(io.completed, [(0, wc::SUCCESS)]);
}
