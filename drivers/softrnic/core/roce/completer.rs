// SPDX-License-Identifier: GPL-2.0
//! The completer of an RC requester: ACKs, NAKs, read responses and atomic
//! ACKs retire send WQEs in order; sequence-error NAKs and the local ACK
//! timeout rewind the requester (go-back-N) within `retry_cnt`; RNR NAKs
//! pause it for the responder's RNR timer within `rnr_retry` (7: forever),
//! and a sequence NAK that only echoes an RNR NAK changes nothing; the
//! other NAKs fail the WQE and move the QP to ERR.

use core::ops::DerefMut;

use super::requester::{Requester, RequesterIo, RequesterParams, Track, MIN_WINDOW, WINDOW};
use super::{wc, Count, Failure, Outcome};
use crate::psn::{self, Psn};
use crate::roce_wire::{self, NakCode, Opcode, Packet, Syndrome};
use crate::transport_rules::{self as rules, MsgOp, Service};

impl<W: Copy + Default, S: DerefMut<Target = [Track<W>]>> Requester<W, S> {
    /// The PSN of the next request packet the requester will send.
    pub(crate) fn send_point(&self) -> Psn {
        if self.next_wqe != self.fetched {
            let t = self.get(self.next_wqe);
            Psn::new(t.first_psn).offset(self.wqe_pkt as i32)
        } else {
            self.next_psn
        }
    }

    /// Something sent is not acknowledged yet.
    pub(crate) fn outstanding(&self) -> bool {
        self.head != self.fetched && psn::diff(self.send_point(), self.una) > 0
            || self.rd_inflight > 0
    }

    /// Rewind the requester to resend from `p`.
    fn go_back(&mut self, io: &mut impl RequesterIo<W>, p: Psn) {
        let mut i = self.head;
        while i != self.fetched {
            let t = self.get(i);
            if t.npkts != 0
                && psn::diff(p, Psn::new(t.first_psn)) >= 0
                && psn::diff(p, t.last_psn()) <= 0
            {
                let pkt = if t.op == Some(MsgOp::Read) {
                    t.got
                } else {
                    psn::diff(p, Psn::new(t.first_psn)) as u32
                };
                self.next_wqe = i;
                self.wqe_pkt = pkt;
                io.count(Count::Retransmit);
                return;
            }
            i = i.wrapping_add(1);
        }
    }

    /// Rewind to `p` because responses before a later one were lost, once:
    /// until progress is made, the later responses still arriving mean
    /// nothing new.  (Should the resent request or its answer be lost too,
    /// the ACK timeout rewinds again.)
    fn go_back_for_gap(&mut self, io: &mut impl RequesterIo<W>, p: Psn) {
        if self.rewound_for_gap != Some(p.get()) {
            self.rewound_for_gap = Some(p.get());
            self.go_back(io, p);
        }
    }

    /// Retire the WQEs every PSN up to `p` (inclusive) completes: SENDs and
    /// WRITEs whose last packet is acknowledged.  A READ or atomic still
    /// waiting for its response when a later PSN is acknowledged lost its
    /// response: resend it.
    fn ack_through(&mut self, prm: &RequesterParams, io: &mut impl RequesterIo<W>, p: Psn) {
        let mut progress = false;
        while self.head != self.fetched {
            let t = self.get(self.head);
            if t.error != 0 || t.npkts == 0 || !t.sent {
                break;
            }
            if psn::diff(t.last_psn(), p) > 0 {
                break;
            }
            if t.is_read_or_atomic() {
                // Implicitly NAKed: its responses were lost.
                let resend = Psn::new(t.first_psn).offset(t.got as i32);
                self.go_back_for_gap(io, resend);
                break;
            }
            // (Rewound onto it, but the first transmission arrived:
            // retire_head moves the requester on.)
            self.retire_head(io, &t, wc::SUCCESS);
            progress = true;
        }
        // The oldest PSN still owed: never past the next response of a
        // READ or atomic at the head, or its resent responses would be
        // taken for duplicates.
        let mut next = p.next();
        if self.head != self.fetched {
            let t = self.get(self.head);
            if t.sent && t.is_read_or_atomic() {
                let owed = Psn::new(t.first_psn).offset(t.got as i32);
                if psn::diff(next, owed) > 0 {
                    next = owed;
                }
            }
        }
        if psn::diff(next, self.una) > 0 {
            self.move_una(next);
            progress = true;
            // Rewound into the message at the head, whose first
            // transmission is now acknowledged in part: resend from una.
            if self.next_wqe == self.head && self.head != self.fetched {
                let t = self.get(self.head);
                let at = psn::diff(self.una, Psn::new(t.first_psn));
                if !t.is_read_or_atomic() && at > self.wqe_pkt as i32 {
                    self.wqe_pkt = at as u32;
                }
            }
        }
        if progress {
            self.fresh_budgets(prm);
            self.rewound_for_gap = None;
            self.restart_timer(prm, io);
        }
    }

    /// Progress: the retry and RNR budgets count afresh.  Both bound the
    /// tries of one request, not of the QP's life: retry_cnt the timeouts
    /// and sequence NAKs, rnr_retry the RNR NAKs, in a row without progress
    /// (a long-lived QP that meets RNR now and then must not run out).
    fn fresh_budgets(&mut self, p: &RequesterParams) {
        self.retry_left = p.retry_cnt;
        self.rnr_left = p.rnr_retry;
        self.rewound_for_rnr = None;
        self.last_seq_nak = None;
    }

    /// The PSN of the next response owed to a READ or atomic at the head
    /// that was sent: until it arrives, nothing after it is complete.
    fn owed_response(&self) -> Option<Psn> {
        if self.head == self.fetched {
            return None;
        }
        let t = self.get(self.head);
        (t.sent && t.is_read_or_atomic()).then(|| Psn::new(t.first_psn).offset(t.got as i32))
    }

    /// A retry without progress (timeout or sequence NAK) spends one of
    /// `retry_cnt`; none left fails the head WQE (false).
    fn spend_retry(&mut self, io: &mut impl RequesterIo<W>, out: &mut Outcome) -> bool {
        if self.retry_left == 0 {
            io.count(Count::RetryExceeded);
            self.fail_head(io, wc::RETRY_EXC_ERR, out);
            return false;
        }
        io.count(Count::CompleterRetry);
        self.retry_left -= 1;
        true
    }

    /// After progress: run the timer only while something is outstanding.
    fn restart_timer(&mut self, p: &RequesterParams, io: &mut impl RequesterIo<W>) {
        self.timer_on = false;
        if self.outstanding() {
            self.ensure_timer(p, io);
        } else {
            io.stop_timer();
        }
    }

    /// Fail the WQE at the head with `status`; the QP goes to ERR.
    fn fail_head(&mut self, io: &mut impl RequesterIo<W>, status: u8, out: &mut Outcome) {
        if self.head != self.fetched {
            let t = self.get(self.head);
            out.failed = Some(Failure {
                status,
                op: t.op,
                first_psn: t.first_psn,
                npkts: t.npkts,
                got: t.got,
                una: self.una.get(),
                sent_to: self.sent_to.get(),
                window: self.cwnd,
            });
            self.retire_head(io, &t, status);
        }
        out.error = true;
    }

    /// A response packet for this RC QP (in RTS or SQD).
    pub(crate) fn on_response(
        &mut self,
        prm: &RequesterParams,
        io: &mut impl RequesterIo<W>,
        pkt: &Packet<'_>,
    ) -> Outcome {
        let mut out = Outcome::default();
        if prm.svc != Service::Rc || !(prm.rts || prm.sqd) {
            io.count(Count::BadState);
            return out;
        }
        self.response(prm, io, pkt, &mut out);
        out.drained = !out.error && self.check_drained(prm);
        out
    }

    fn response(
        &mut self,
        prm: &RequesterParams,
        io: &mut impl RequesterIo<W>,
        pkt: &Packet<'_>,
        out: &mut Outcome,
    ) {
        let p = pkt.hdr.bth.psn;
        // Only PSNs sent and not yet acknowledged (or the one just before,
        // a duplicate ACK) mean anything.
        if psn::diff(p, self.una) < 0 || psn::diff(p, self.sent_to) >= 0 {
            io.count(Count::DuplicateResponse);
            return;
        }
        let op = pkt.hdr.bth.opcode;
        match op {
            Opcode::RcAck => {
                let Some(aeth) = pkt.hdr.aeth else {
                    io.count(Count::Malformed);
                    return;
                };
                match aeth.syndrome {
                    Syndrome::Ack { .. } => self.ack_through(prm, io, p),
                    Syndrome::RnrNak { timer } => {
                        self.ack_through(prm, io, p.offset(-1));
                        io.count(Count::RnrNakReceived);
                        if self.rnr_left == 0 {
                            io.count(Count::RnrRetryExceeded);
                            self.fail_head(io, wc::RNR_RETRY_EXC_ERR, out);
                            return;
                        }
                        if prm.rnr_retry != rules::RNR_RETRY_INFINITE {
                            self.rnr_left -= 1;
                        }
                        self.go_back(io, p);
                        self.rewound_for_rnr = Some(p.get());
                        self.rnr_wait = true;
                        self.timer_on = true;
                        io.arm_timer(u64::from(roce_wire::rnr_timer_us(timer)));
                    }
                    Syndrome::Nak(NakCode::PsnSequenceError) => {
                        io.count(Count::SeqNakReceived);
                        let before = self.una;
                        let rnr = self.rewound_for_rnr.map(Psn::new);
                        self.ack_through(prm, io, p.offset(-1));
                        let progress = self.una.get() != before.get();
                        // The responder expecting a later PSN than at the
                        // last NAK moved on, even while una waits for a
                        // READ's response: not a retry of the same thing.
                        let moved = self
                            .last_seq_nak
                            .is_none_or(|l| psn::diff(p, Psn::new(l)) > 0);
                        self.last_seq_nak = Some(p.get());
                        match rules::seq_nak(p, progress, rnr) {
                            rules::SeqNak::Ignore => {}
                            rules::SeqNak::Rewind { charge } => {
                                if charge && !moved && !self.spend_retry(io, out) {
                                    return;
                                }
                                // A READ or atomic before the NAKed PSN was
                                // executed but its response lost: ask again
                                // from it (the responder answers a duplicate
                                // READ by reading again, an atomic from its
                                // saved result).
                                let to = match self.owed_response() {
                                    Some(o) if psn::diff(o, p) < 0 => o,
                                    _ => p,
                                };
                                self.go_back(io, to);
                            }
                        }
                    }
                    Syndrome::Nak(code) => {
                        self.ack_through(prm, io, p.offset(-1));
                        let status = match code {
                            NakCode::RemoteAccessError => wc::REM_ACCESS_ERR,
                            NakCode::RemoteOperationalError => wc::REM_OP_ERR,
                            _ => wc::REM_INV_REQ_ERR,
                        };
                        self.fail_head(io, status, out);
                    }
                }
            }
            Opcode::RcAtomicAck
            | Opcode::RcRdmaReadResponseFirst
            | Opcode::RcRdmaReadResponseMiddle
            | Opcode::RcRdmaReadResponseLast
            | Opcode::RcRdmaReadResponseOnly => {
                // Responses come in order: everything before is done.
                self.ack_through(prm, io, p.offset(-1));
                if self.head == self.fetched {
                    return;
                }
                let t = self.get(self.head);
                let expect = Psn::new(t.first_psn).offset(t.got as i32);
                if !t.sent || !t.is_read_or_atomic() || p.get() != expect.get() {
                    if t.sent && t.is_read_or_atomic() && psn::diff(p, expect) > 0 {
                        // Responses lost before this one.
                        self.go_back_for_gap(io, expect);
                    }
                    return;
                }
                if op == Opcode::RcAtomicAck {
                    self.atomic_answer(prm, io, pkt, &t, out);
                } else {
                    self.read_answer(prm, io, pkt, &t, out);
                }
            }
            _ => io.count(Count::BadState),
        }
    }

    fn atomic_answer(
        &mut self,
        prm: &RequesterParams,
        io: &mut impl RequesterIo<W>,
        pkt: &Packet<'_>,
        t: &Track<W>,
        out: &mut Outcome,
    ) {
        if !matches!(t.op, Some(MsgOp::CmpSwap | MsgOp::FetchAdd)) {
            self.fail_head(io, wc::BAD_RESP_ERR, out);
            return;
        }
        let Some(a) = pkt.hdr.atomic_ack_eth else {
            io.count(Count::Malformed);
            return;
        };
        let orig = a.orig.to_ne_bytes();
        if !io.store(self.head, t, 0, roce_wire::Payload::Linear(&orig)) {
            self.fail_head(io, wc::LOC_PROT_ERR, out);
            return;
        }
        self.finish_rd(prm, io, t);
    }

    fn read_answer(
        &mut self,
        prm: &RequesterParams,
        io: &mut impl RequesterIo<W>,
        pkt: &Packet<'_>,
        t: &Track<W>,
        out: &mut Outcome,
    ) {
        if t.op != Some(MsgOp::Read) {
            self.fail_head(io, wc::BAD_RESP_ERR, out);
            return;
        }
        let off = t.got.saturating_mul(prm.mtu);
        let last = t.got + 1 >= t.npkts;
        let want = if last {
            t.len.saturating_sub(off)
        } else {
            prm.mtu
        };
        if pkt.payload.len() as u32 != want {
            self.fail_head(io, wc::BAD_RESP_ERR, out);
            return;
        }
        if !io.store(self.head, t, off, pkt.payload) {
            self.fail_head(io, wc::LOC_PROT_ERR, out);
            return;
        }
        let mut t2 = *t;
        t2.got += 1;
        self.set(self.head, t2);
        self.una = pkt.hdr.bth.psn.next();
        self.fresh_budgets(prm);
        self.rewound_for_gap = None;
        if last {
            self.finish_rd(prm, io, &t2);
        } else {
            self.restart_timer(prm, io);
        }
    }

    /// The oldest unacknowledged PSN is now `next`: the window widens by
    /// the PSNs that acknowledges (as TCP's slow start: it doubles each
    /// round trip back to `WINDOW`).
    fn move_una(&mut self, next: Psn) {
        let acked = psn::diff(next, self.una);
        if acked > 0 {
            self.cwnd = self.cwnd.saturating_add(acked as u32).min(WINDOW);
        }
        self.una = next;
    }

    /// A READ or atomic got its whole answer.
    fn finish_rd(&mut self, prm: &RequesterParams, io: &mut impl RequesterIo<W>, t: &Track<W>) {
        self.rd_inflight = self.rd_inflight.saturating_sub(1);
        self.move_una(t.last_psn().next());
        // (Rewound onto this WQE meanwhile: retire_head moves on.)
        self.retire_head(io, t, wc::SUCCESS);
        self.fresh_budgets(prm);
        self.restart_timer(prm, io);
    }

    /// The retransmission or RNR timer fired (the QP in RTS or SQD): the
    /// RNR wait is over, or no ACK came in time.  The caller sends again
    /// afterwards (`emit`).
    pub(crate) fn on_timer(&mut self, io: &mut impl RequesterIo<W>) -> Outcome {
        let mut out = Outcome::default();
        self.timer_on = false;
        if self.rnr_wait {
            self.rnr_wait = false;
        } else if self.outstanding() {
            io.count(Count::AckTimeout);
            // The responder is slow or the link lossy: resend less.
            self.cwnd = (self.cwnd / 2).max(MIN_WINDOW);
            if self.spend_retry(io, &mut out) {
                let una = self.una;
                self.go_back(io, una);
            }
        }
        out
    }
}
