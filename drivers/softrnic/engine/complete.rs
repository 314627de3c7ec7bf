// SPDX-License-Identifier: GPL-2.0
//! The completer of an RC requester: ACKs, NAKs, read responses and atomic
//! ACKs retire send WQEs in order; sequence-error NAKs and the local ACK
//! timeout rewind the requester (go-back-N) within `retry_cnt`; RNR NAKs
//! pause it for the responder's RNR timer within `rnr_retry` (7: forever),
//! and a sequence NAK that only echoes an RNR NAK changes nothing; the
//! other NAKs fail the WQE and move the QP to ERR.

use super::mem::{self, Data};
use super::send::Track;
use super::Counter;
use crate::abi::{self, Sge};
use crate::glue::IbDevice;
use crate::psn::{self, Psn};
use crate::qp_state::QpState;
use crate::roce_wire::{self, NakCode, Opcode, Packet, Syndrome};
use crate::transport_rules::{self as rules, MsgOp};
use crate::verbs::qp::{After, Qp, QpInner};

/// ib_wc_status values the ABI file does not name.
const WC_BAD_RESP_ERR: u8 = 7;

impl Qp {
    /// The PSN of the next request packet the requester will send.
    fn send_point(s: &QpInner) -> Psn {
        let r = &s.eng.req;
        if r.next_wqe != r.fetched {
            let t = r.get(r.next_wqe);
            Psn::new(t.first_psn).offset(r.wqe_pkt as i32)
        } else {
            r.next_psn
        }
    }

    /// Something sent is not acknowledged yet.
    fn outstanding(s: &QpInner) -> bool {
        s.sq_cons != s.eng.req.fetched && psn::diff(Self::send_point(s), s.eng.req.una) > 0
            || s.eng.req.rd_inflight > 0
    }

    /// In SQD: raise SQ_DRAINED once every message begun before it is
    /// done (completed or failed).
    pub(crate) fn check_drained(&self, s: &mut QpInner, after: &mut After) {
        let r = &s.eng.req;
        if s.state != QpState::Sqd || r.drained {
            return;
        }
        if r.drain_point.wrapping_sub(s.sq_cons) as i32 <= 0 {
            s.eng.req.drained = true;
            after.sq_drained = s.attrs.sqd_notify;
        }
    }

    /// Rewind the requester to resend from `p`.
    fn go_back(&self, s: &mut QpInner, p: Psn) {
        let mut i = s.sq_cons;
        while i != s.eng.req.fetched {
            let t = s.eng.req.get(i);
            if t.npkts != 0
                && psn::diff(p, Psn::new(t.first_psn)) >= 0
                && psn::diff(p, t.last_psn()) <= 0
            {
                let pkt = if t.op() == Some(MsgOp::Read) {
                    t.got
                } else {
                    psn::diff(p, Psn::new(t.first_psn)) as u32
                };
                let r = &mut s.eng.req;
                r.next_wqe = i;
                r.wqe_pkt = pkt;
                self.dev().counters().bump(Counter::Retransmits);
                return;
            }
            i = i.wrapping_add(1);
        }
    }

    /// Rewind to `p` because responses before a later one were lost, once:
    /// until progress is made, the later responses still arriving mean
    /// nothing new.  (Should the resent request or its answer be lost too,
    /// the ACK timeout rewinds again.)
    fn go_back_for_gap(&self, s: &mut QpInner, p: Psn) {
        if s.eng.req.rewound_for_gap != Some(p.get()) {
            s.eng.req.rewound_for_gap = Some(p.get());
            self.go_back(s, p);
        }
    }

    /// Retire the WQEs every PSN up to `p` (inclusive) completes: SENDs and
    /// WRITEs whose last packet is acknowledged.  A READ or atomic still
    /// waiting for its response when a later PSN is acknowledged lost its
    /// response: resend it.
    fn ack_through(&self, s: &mut QpInner, p: Psn, after: &mut After) {
        let mut progress = false;
        while s.sq_cons != s.eng.req.fetched {
            let t = s.eng.req.get(s.sq_cons);
            if t.error != 0 || t.npkts == 0 || !t.sent {
                break;
            }
            if psn::diff(t.last_psn(), p) > 0 {
                break;
            }
            if t.is_read_or_atomic() {
                // Implicitly NAKed: its responses were lost.
                let resend = Psn::new(t.first_psn).offset(t.got as i32);
                self.go_back_for_gap(s, resend);
                break;
            }
            if s.eng.req.next_wqe == s.sq_cons {
                // Rewound onto it, but the first transmission arrived.
                s.eng.req.next_wqe = s.eng.req.next_wqe.wrapping_add(1);
                s.eng.req.wqe_pkt = 0;
            }
            self.retire_head(s, &t, abi::WC_SUCCESS, after);
            progress = true;
        }
        // The oldest PSN still owed: never past the next response of a
        // READ or atomic at the head, or its resent responses would be
        // taken for duplicates.
        let mut next = p.next();
        if s.sq_cons != s.eng.req.fetched {
            let t = s.eng.req.get(s.sq_cons);
            if t.sent && t.is_read_or_atomic() {
                let owed = Psn::new(t.first_psn).offset(t.got as i32);
                if psn::diff(next, owed) > 0 {
                    next = owed;
                }
            }
        }
        if psn::diff(next, s.eng.req.una) > 0 {
            s.eng.req.una = next;
            progress = true;
        }
        if progress {
            Self::fresh_budgets(s);
            s.eng.req.rewound_for_gap = None;
            self.restart_timer(s);
        }
    }

    /// Progress: the retry and RNR budgets count afresh.  Both bound the
    /// tries of one request, not of the QP's life: retry_cnt the timeouts
    /// and sequence NAKs, rnr_retry the RNR NAKs, in a row without progress
    /// (a long-lived QP that meets RNR now and then must not run out).
    fn fresh_budgets(s: &mut QpInner) {
        s.eng.req.retry_left = s.attrs.retry_cnt;
        s.eng.req.rnr_left = s.attrs.rnr_retry;
        s.eng.req.rewound_for_rnr = None;
    }

    /// A retry without progress (timeout or sequence NAK) spends one of
    /// `retry_cnt`; none left fails the head WQE (false).
    fn spend_retry(&self, s: &mut QpInner, after: &mut After) -> bool {
        if s.eng.req.retry_left == 0 {
            self.fail_head(s, abi::WC_RETRY_EXC_ERR, after);
            return false;
        }
        s.eng.req.retry_left -= 1;
        true
    }

    /// After progress: run the timer only while something is outstanding.
    fn restart_timer(&self, s: &mut QpInner) {
        s.eng.req.timer_on = false;
        if Self::outstanding(s) {
            self.ensure_timer(s);
        } else {
            self.stop_timer();
        }
    }

    /// Fail the WQE at the head with `status` and move the QP to ERR.
    fn fail_head(&self, s: &mut QpInner, status: u8, after: &mut After) {
        if s.sq_cons != s.eng.req.fetched {
            let t = s.eng.req.get(s.sq_cons);
            self.retire_head(s, &t, status, after);
        }
        self.enter(s, QpState::Err, after);
    }

    /// A response packet for this QP (the QP lock held).  True when the
    /// requester may have more to send.
    pub(crate) fn on_response(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        mtu: u32,
        after: &mut After,
    ) -> bool {
        if self.service() != rules::Service::Rc || !matches!(s.state, QpState::Rts | QpState::Sqd) {
            dev.counters().bump(Counter::RxBadState);
            return false;
        }
        let p = pkt.hdr.bth.psn;
        // Only PSNs sent and not yet acknowledged (or the one just before,
        // a duplicate ACK) mean anything.
        if psn::diff(p, s.eng.req.una) < 0 || psn::diff(p, Self::send_point(s)) >= 0 {
            dev.counters().bump(Counter::RxDuplicate);
            return false;
        }
        let op = pkt.hdr.bth.opcode;
        match op {
            Opcode::RcAck => {
                let Some(aeth) = pkt.hdr.aeth else {
                    return false;
                };
                match aeth.syndrome {
                    Syndrome::Ack { .. } => self.ack_through(s, p, after),
                    Syndrome::RnrNak { timer } => {
                        self.ack_through(s, p.offset(-1), after);
                        dev.counters().bump(Counter::RnrNakReceived);
                        let r = &mut s.eng.req;
                        if r.rnr_left == 0 {
                            self.fail_head(s, abi::WC_RNR_RETRY_EXC_ERR, after);
                            return false;
                        }
                        if s.attrs.rnr_retry != rules::RNR_RETRY_INFINITE {
                            r.rnr_left -= 1;
                        }
                        self.go_back(s, p);
                        s.eng.req.rewound_for_rnr = Some(p.get());
                        s.eng.req.rnr_wait = true;
                        s.eng.req.timer_on = true;
                        self.arm_timer(&s.eng, u64::from(roce_wire::rnr_timer_us(timer)));
                    }
                    Syndrome::Nak(NakCode::PsnSequenceError) => {
                        let before = s.eng.req.una;
                        let rnr = s.eng.req.rewound_for_rnr.map(Psn::new);
                        self.ack_through(s, p.offset(-1), after);
                        let progress = s.eng.req.una.get() != before.get();
                        match rules::seq_nak(p, progress, rnr) {
                            rules::SeqNak::Ignore => {}
                            rules::SeqNak::Rewind { charge } => {
                                if charge && !self.spend_retry(s, after) {
                                    return false;
                                }
                                self.go_back(s, p);
                            }
                        }
                    }
                    Syndrome::Nak(code) => {
                        self.ack_through(s, p.offset(-1), after);
                        let status = match code {
                            NakCode::RemoteAccessError => abi::WC_REM_ACCESS_ERR,
                            NakCode::RemoteOperationalError => abi::WC_REM_OP_ERR,
                            _ => abi::WC_REM_INV_REQ_ERR,
                        };
                        self.fail_head(s, status, after);
                        return false;
                    }
                }
            }
            Opcode::RcAtomicAck
            | Opcode::RcRdmaReadResponseFirst
            | Opcode::RcRdmaReadResponseMiddle
            | Opcode::RcRdmaReadResponseLast
            | Opcode::RcRdmaReadResponseOnly => {
                // Responses come in order: everything before is done.
                self.ack_through(s, p.offset(-1), after);
                if s.sq_cons == s.eng.req.fetched {
                    return true;
                }
                let t = s.eng.req.get(s.sq_cons);
                let expect = Psn::new(t.first_psn).offset(t.got as i32);
                if !t.sent || !t.is_read_or_atomic() || p.get() != expect.get() {
                    if t.sent && t.is_read_or_atomic() && psn::diff(p, expect) > 0 {
                        // Responses lost before this one.
                        self.go_back_for_gap(s, expect);
                    }
                    return true;
                }
                if op == Opcode::RcAtomicAck {
                    self.atomic_answer(s, dev, pkt, &t, after);
                } else {
                    self.read_answer(s, dev, pkt, &t, mtu, after);
                }
            }
            _ => return false,
        }
        true
    }

    fn atomic_answer(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        t: &Track,
        after: &mut After,
    ) {
        if !matches!(t.op(), Some(MsgOp::CmpSwap | MsgOp::FetchAdd)) {
            self.fail_head(s, WC_BAD_RESP_ERR, after);
            return;
        }
        let Some(a) = pkt.hdr.atomic_ack_eth else {
            return;
        };
        let orig = a.orig.to_ne_bytes();
        if !self.store_result(s, dev, t, 0, &orig) {
            self.fail_head(s, abi::WC_LOC_PROT_ERR, after);
            return;
        }
        self.finish_rd(s, t, after);
    }

    fn read_answer(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        t: &Track,
        mtu: u32,
        after: &mut After,
    ) {
        if t.op() != Some(MsgOp::Read) {
            self.fail_head(s, WC_BAD_RESP_ERR, after);
            return;
        }
        let off = t.got.saturating_mul(mtu);
        let last = t.got + 1 >= t.npkts;
        let want = if last { t.len.saturating_sub(off) } else { mtu };
        if pkt.payload.len() as u32 != want {
            self.fail_head(s, WC_BAD_RESP_ERR, after);
            return;
        }
        if !self.store_result(s, dev, t, off, pkt.payload) {
            self.fail_head(s, abi::WC_LOC_PROT_ERR, after);
            return;
        }
        let mut t2 = *t;
        t2.got += 1;
        s.eng.req.set(s.sq_cons, t2);
        s.eng.req.una = pkt.hdr.bth.psn.next();
        Self::fresh_budgets(s);
        s.eng.req.rewound_for_gap = None;
        if last {
            self.finish_rd(s, &t2, after);
        } else {
            self.restart_timer(s);
        }
    }

    /// Write a READ's data or an atomic's result into the WQE's SGEs.
    fn store_result(&self, s: &QpInner, dev: &IbDevice, t: &Track, off: u32, data: &[u8]) -> bool {
        let mut buf = [Sge::default(); super::send::MAX_SGE];
        let Some(sges) = Self::wqe_sges(s, s.sq_cons, &t.wqe, &mut buf) else {
            return false;
        };
        mem::sgl_copy(
            dev.verbs(),
            self.ib.pd as usize,
            sges,
            u64::from(off),
            Data::Store(data),
        )
        .is_ok()
    }

    /// A READ or atomic got its whole answer.
    fn finish_rd(&self, s: &mut QpInner, t: &Track, after: &mut After) {
        s.eng.req.rd_inflight = s.eng.req.rd_inflight.saturating_sub(1);
        let last = t.last_psn();
        s.eng.req.una = last.next();
        if s.eng.req.next_wqe == s.sq_cons {
            // Rewound onto this WQE meanwhile: it is done, move on.
            s.eng.req.next_wqe = s.eng.req.next_wqe.wrapping_add(1);
            s.eng.req.wqe_pkt = 0;
        }
        self.retire_head(s, t, abi::WC_SUCCESS, after);
        Self::fresh_budgets(s);
        self.restart_timer(s);
    }

    /// The QP's timer fired: the RNR wait is over, or no ACK came in time.
    pub(crate) fn timeout(&self) {
        let mut after = After::default();
        {
            let mut s = self.inner.lock();
            if s.eng.dying || !matches!(s.state, QpState::Rts | QpState::Sqd) {
                s.eng.req.timer_on = false;
                return;
            }
            s.eng.req.timer_on = false;
            if s.eng.req.rnr_wait {
                s.eng.req.rnr_wait = false;
            } else if Self::outstanding(&s) {
                self.dev().counters().bump(Counter::AckTimeouts);
                if self.spend_retry(&mut s, &mut after) {
                    let una = s.eng.req.una;
                    self.go_back(&mut s, una);
                }
            }
            self.queue_work(&s.eng);
        }
        self.after(after);
    }
}
