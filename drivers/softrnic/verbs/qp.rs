// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: a send ring and a receive ring (or an SRQ), the IBTA state
//! machine (rules in `core/qp_state.rs`), the attributes, and flushing: a QP
//! entering ERR completes every outstanding work request with WR_FLUSH_ERR.

use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::SpinLockIrq;

use super::ah::Av;
use super::cq::{Cq, Owed};
use super::srq::Srq;
use crate::abi::{self, Cqe, RecvWqe, SendWqe, Sge};
use crate::engine::Engine;
use crate::glue::access;
use crate::glue::events::{self, Event};
use crate::glue::objects::Held;
use crate::glue::ring::{Pod, Ring, UserCtx};
use crate::glue::table::Ref;
use crate::qp_state::{attr, QpState, QpType};

/// The capacities of a QP, as granted (reported back to the creator).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Caps {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
}

/// The modifiable attributes (ib_qp_attr), kept for query_qp and the engine.
#[derive(Clone, Copy, Default)]
pub(crate) struct QpAttrs {
    pub(crate) qkey: u32,
    pub(crate) pkey_index: u16,
    pub(crate) access: u32,
    pub(crate) path_mtu: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) sq_psn: u32,
    pub(crate) rq_psn: u32,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) dest_qpn: u32,
    pub(crate) sqd_notify: bool,
    pub(crate) path_mig_state: u32,
    pub(crate) av: Option<Av>,
    /// iWARP: the address vector a modify_qp gave (a join by modify_qp,
    /// `transport/iwarp/join.rs`).
    pub(crate) iw_path: Option<IwPath>,
}

/// An iWARP QP's address vector: the destination GID, and the index of
/// the port's own GID the join goes from.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IwPath {
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid_index: u8,
}

#[repr(C)]
pub(crate) struct Qp {
    pub(crate) ib: crate::glue::objects::IbQp,
    pub(crate) r: Ref,
    pub(crate) ty: QpType,
    pub(crate) user: bool,
    /// The wire transport (the device's), fixed at creation.
    pub(crate) transport: crate::transport::Transport,
    pub(crate) sig_all: bool,
    pub(crate) caps: Caps,
    /// Set once at creation; ib_core holds a use count on each for the QP's
    /// lifetime (destroying them first fails with EBUSY).
    pub(crate) send_cq: Held<Cq>,
    pub(crate) recv_cq: Held<Cq>,
    pub(crate) srq: Option<Held<Srq>>,
    pub(crate) inner: SpinLockIrq<QpInner>,
    /// The engine's work items (they pump the QP's packets: `bulk_work` at
    /// normal priority while the QP streams, see `Engine::bulk`) and timer
    /// (retransmission, RNR); set up by glue when it creates the QP.
    pub(crate) work: crate::glue::deferred::Work<false>,
    pub(crate) bulk_work: crate::glue::deferred::Work<true>,
    pub(crate) timer: crate::glue::deferred::Timer,
    /// A kernel RoCE QP's received packets, for `rx_work` to process in
    /// order (`Qp::rx_steer`).
    pub(crate) backlog: crate::glue::backlog::Backlog,
    pub(crate) rx_work: crate::glue::deferred::RxWork,
    /// The CPU the QP's packets are sent from (its home): first chosen by
    /// QP number, then, for a user QP, the CPU that receives while nothing
    /// is in flight (`Qp::kick`).
    pub(crate) cpu: core::sync::atomic::AtomicU32,
    /// iWARP: iw_cm's references (iw_add_ref): destroy waits until they
    /// are gone, as iw_cm may still move the QP to ERR until then.
    pub(crate) iw_refs: core::sync::atomic::AtomicU32,
    /// Bound to an rdma counter (`rdma statistic qp`, glue/counters.rs):
    /// what the QP counts goes to `stats` instead of the device's
    /// counters (ib_core adds the counters' sums to the port's figures).
    pub(crate) bound: core::sync::atomic::AtomicBool,
    pub(crate) stats: crate::engine::Counters,
}

pub(crate) struct QpInner {
    pub(crate) state: QpState,
    pub(crate) attrs: QpAttrs,
    pub(crate) sq: Ring,
    pub(crate) rq: Option<Ring>,
    /// The consumer counters, kernel-private: a user ring's header is user
    /// memory.  Producers are read from the ring headers (user-written for
    /// user QPs, kernel-private memory for kernel QPs).
    pub(crate) sq_cons: u32,
    pub(crate) rq_cons: u32,
    pub(crate) eng: Engine,
    /// iWARP: the connection the QP runs on, once MPA setup bound it.
    pub(crate) iw: Option<KBox<crate::transport::iwarp::stream::Stream>>,
    /// iWARP: a join by modify_qp under way (from RTS until the stream is
    /// bound, or the QP leaves RTS).
    pub(crate) join: Option<crate::transport::iwarp::join::JoinWait>,
}

/// The rings and caps `create` makes, before the QP object exists.
pub(crate) struct QpQueues {
    pub(crate) inner: QpInner,
    pub(crate) caps: Caps,
}

impl QpQueues {
    /// Check the requested capacities against the device limits and make
    /// the rings (EINVAL for anything over a limit).
    pub(crate) fn new(
        uctx: Option<UserCtx>,
        want: Caps,
        has_srq: bool,
        l: &crate::limits::DeviceLimits,
    ) -> Result<QpQueues> {
        if want.max_send_wr > l.max_qp_wr
            || want.max_send_sge > l.max_send_sge
            || want.max_inline > l.max_inline_data
            || (!has_srq && (want.max_recv_wr > l.max_qp_wr || want.max_recv_sge > l.max_recv_sge))
        {
            return Err(refuse!(
                EINVAL,
                "create_qp: {} send WRs, {} send SGEs, {} inline bytes, {} receive WRs, {} receive SGEs: over the device's {} WRs, {} / {} SGEs, {} inline bytes\n",
                want.max_send_wr, want.max_send_sge, want.max_inline, want.max_recv_wr, want.max_recv_sge,
                l.max_qp_wr, l.max_send_sge, l.max_recv_sge, l.max_inline_data
            ));
        }
        let sq_slots = abi::slots_for(want.max_send_wr).ok_or(EINVAL)?;
        let send_sge = core::cmp::max(want.max_send_sge, 1);
        let sq_slot = abi::send_slot_bytes(send_sge, want.max_inline);
        let sq = Ring::new(uctx, sq_slots, sq_slot)?;
        sq.set_kernel_flags(abi::QUEUE_ENGINE_IDLE);
        let mut caps = Caps {
            max_send_wr: sq_slots - 1,
            max_send_sge: send_sge,
            // Inline data may use the whole slot after the header.
            max_inline: core::cmp::min(sq_slot - size_of::<SendWqe>() as u32, l.max_inline_data),
            ..Caps::default()
        };
        let rq = if has_srq {
            None
        } else {
            let slots = abi::slots_for(want.max_recv_wr).ok_or(EINVAL)?;
            let sge = core::cmp::max(want.max_recv_sge, 1);
            caps.max_recv_wr = slots - 1;
            caps.max_recv_sge = sge;
            Some(Ring::new(uctx, slots, abi::recv_slot_bytes(sge))?)
        };
        Ok(QpQueues {
            inner: QpInner {
                state: QpState::Reset,
                attrs: QpAttrs::default(),
                sq,
                rq,
                sq_cons: 0,
                rq_cons: 0,
                eng: Engine::new(sq_slots)?,
                iw: None,
                join: None,
            },
            caps,
        })
    }
}

impl QpInner {
    pub(crate) fn sq_info(&self) -> abi::QueueInfo {
        self.sq.info()
    }

    pub(crate) fn rq_info(&self) -> abi::QueueInfo {
        self.rq.as_ref().map(Ring::info).unwrap_or_default()
    }
}

/// Initialiser for `Qp::inner`.
pub(crate) fn new_inner(inner: QpInner) -> impl PinInit<SpinLockIrq<QpInner>> {
    new_spinlock_irq!(inner, "softrnic_qp")
}

/// Things to do after the QP lock is dropped.
#[derive(Default)]
pub(crate) struct After {
    pub(crate) fatal: bool,
    pub(crate) sq_drained: bool,
    last_wqe: bool,
    /// A QP error event for the remote end's request (access, invalid).
    pub(crate) event: Option<Event>,
    /// The SRQ drained below its limit.
    pub(crate) srq_limit: bool,
    pub(crate) send_cq: Owed,
    pub(crate) recv_cq: Owed,
}

/// CQ notifications held back over a batch of received packets (the
/// receive work's, `Qp::rx_drain`), so that a kernel consumer's completion
/// handler runs once for the batch and its poll finds the batch's
/// completions together, not one each.
#[derive(Default)]
pub(crate) struct HeldNotify {
    send: Owed,
    recv: Owed,
}

/// The completion opcode that answers a send opcode.
fn wc_opcode(wr_opcode: u32) -> u8 {
    match wr_opcode {
        abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM => abi::WC_RDMA_WRITE,
        abi::WR_RDMA_READ | abi::WR_RDMA_READ_WITH_INV => abi::WC_RDMA_READ,
        abi::WR_ATOMIC_CMP_AND_SWP => abi::WC_COMP_SWAP,
        abi::WR_ATOMIC_FETCH_AND_ADD => abi::WC_FETCH_ADD,
        abi::WR_LOCAL_INV => abi::WC_LOCAL_INV,
        abi::WR_BIND_MW => abi::WC_BIND_MW,
        abi::WR_REG_MR => abi::WC_REG_MR,
        _ => abi::WC_SEND,
    }
}

impl Qp {
    pub(crate) fn send_cq(&self) -> &Cq {
        self.send_cq.get()
    }

    pub(crate) fn recv_cq(&self) -> &Cq {
        self.recv_cq.get()
    }

    /// An iWARP QP (its verbs differ: no address vector, created in INIT).
    pub(crate) fn is_iwarp(&self) -> bool {
        self.transport == crate::transport::Transport::Iwarp
    }

    /// Count `n` of `c` for this QP: in its own counters while it is bound
    /// to an rdma counter, else in the device's.  (A count that races with
    /// the binding may land on either side, never on both.)
    pub(crate) fn count_n(&self, c: crate::engine::Counter, n: u64) {
        if self.bound.load(core::sync::atomic::Ordering::Relaxed) {
            self.stats.add(c, n);
        } else {
            self.dev().counters().add(c, n);
        }
    }

    pub(crate) fn count(&self, c: crate::engine::Counter) {
        self.count_n(c, 1);
    }

    /// What `rdma resource show qp -d` shows of this QP beyond ib_core's
    /// own fields (restrack's driver details): how full its queues are, the
    /// CPU it sends from, and its transport's state.  `put` gets each name
    /// and value (under the QP lock: it must only store them).
    pub(crate) fn details(&self, put: &mut dyn FnMut(&'static CStr, u64)) {
        use crate::transport_rules::Service;
        let s = self.inner.lock();
        put(c"sq_slots", s.sq.slots().into());
        put(c"sq_queued", s.sq.producer().wrapping_sub(s.sq_cons).into());
        if let Some(rq) = &s.rq {
            put(c"rq_slots", rq.slots().into());
            put(c"rq_queued", rq.producer().wrapping_sub(s.rq_cons).into());
        }
        put(c"cpu", self.home().into());
        if self.is_iwarp() {
            if let Some(st) = s.iw.as_deref() {
                st.details(put);
            }
        } else if self.service() != Service::Ud {
            let r = &s.eng.req;
            put(c"una", r.una.get().into());
            put(c"next_psn", r.next_psn.get().into());
            put(c"window", r.cwnd.into());
            put(c"reads_out", r.rd_inflight.into());
            put(c"retry_left", r.retry_left.into());
            put(c"rnr_retry_left", r.rnr_left.into());
            put(c"ack_timer", u64::from(r.timer_on));
            put(c"expected_psn", s.eng.resp.epsn.get().into());
            put(c"responses_queued", s.eng.resp.rd_pending().into());
        }
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.ib.qp_num()
    }

    pub(crate) fn srq_ref(&self) -> Option<&Srq> {
        self.srq.as_ref().map(Held::get)
    }

    /// A send-queue completion for a WQE of `wr_opcode`.
    pub(crate) fn send_cqe(&self, wr_id: u64, wr_opcode: u32, status: u8) -> Cqe {
        self.cqe(wr_id, wc_opcode(wr_opcode), status)
    }

    fn flush_cqe(&self, wr_id: u64, opcode: u8) -> Cqe {
        self.cqe(wr_id, opcode, abi::WC_WR_FLUSH_ERR)
    }

    fn cqe(&self, wr_id: u64, opcode: u8, status: u8) -> Cqe {
        Cqe {
            wr_id,
            status,
            opcode,
            qp_num: self.qpn(),
            port_num: 1,
            kernel_qp: if self.user {
                0
            } else {
                self.ib.as_ptr() as u64
            },
            ..Cqe::default()
        }
    }

    /// Complete every outstanding WQE of both queues with WR_FLUSH_ERR.
    fn flush(&self, s: &mut QpInner, after: &mut After) {
        let QpInner {
            sq,
            rq,
            sq_cons,
            rq_cons,
            ..
        } = s;
        self.flush_ring::<SendWqe>(sq, sq_cons, self.send_cq(), &mut after.send_cq, |w| {
            (w.wr_id, wc_opcode(w.opcode))
        });
        if let Some(rq) = rq {
            self.flush_ring::<RecvWqe>(rq, rq_cons, self.recv_cq(), &mut after.recv_cq, |w| {
                (w.wr_id, abi::WC_RECV)
            });
        }
    }

    /// Complete the WQEs from `*cons` up to the ring's producer on `cq` with
    /// WR_FLUSH_ERR (`id` gives a WQE's wr_id and completion opcode), then
    /// mark them all consumed.  At most one ring's worth is read whatever a
    /// user producer claims; a full CQ ends the completions (it reports that
    /// itself).
    fn flush_ring<H: Pod>(
        &self,
        ring: &Ring,
        cons: &mut u32,
        cq: &Cq,
        owed: &mut Owed,
        id: impl Fn(&H) -> (u64, u8),
    ) {
        let prod = ring.producer();
        let n = core::cmp::min(prod.wrapping_sub(*cons), ring.slots());
        for i in 0..n {
            let Some(w) = ring.read::<H>(cons.wrapping_add(i), 0) else {
                break;
            };
            let (wr_id, opcode) = id(&w);
            let (r, o) = cq.push(&self.flush_cqe(wr_id, opcode), false);
            owed.merge(o);
            if r.is_err() {
                break;
            }
        }
        *cons = prod;
        ring.set_consumer(prod);
    }

    /// Discard every outstanding WQE (→ RESET).
    fn reset_queues(&self, s: &mut QpInner) {
        s.sq_cons = s.sq.producer();
        s.sq.set_consumer(s.sq_cons);
        if let Some(rq) = &s.rq {
            s.rq_cons = rq.producer();
            rq.set_consumer(s.rq_cons);
        }
        s.attrs = QpAttrs::default();
    }

    /// The engine stops looking at the send queue: set `QUEUE_ENGINE_IDLE`,
    /// from which the provider rings after a post; a new idle period is
    /// counted (`engine_idle`).
    pub(crate) fn engine_idle(&self, s: &QpInner) {
        if s.sq.set_kernel_flags(abi::QUEUE_ENGINE_IDLE) & abi::QUEUE_ENGINE_IDLE == 0 {
            self.dev()
                .counters()
                .bump(crate::engine::Counter::EngineIdle);
        }
    }

    /// A doorbell whose pump another context runs or the work item will
    /// (under the QP lock, so that pump is still to look at the producer):
    /// posts from now on need no doorbell.  Not in a state that does not
    /// send, whose posts must ring (see `enter`).
    pub(crate) fn doorbell_heard(&self, s: &QpInner) {
        if s.state.sends() {
            s.sq.clear_kernel_flags(abi::QUEUE_ENGINE_IDLE);
        }
    }

    /// Move to `next` (already validated), with the side effects the IBTA
    /// asks for; events are raised by `after`.
    pub(crate) fn enter(&self, s: &mut QpInner, next: QpState, after: &mut After) {
        let cur = s.state;
        s.state = next;
        if !next.sends() {
            // No pump sends in this state: the provider must ring after a
            // post (an ERR QP flushes it), see `Qp::settle`.
            self.engine_idle(s);
        }
        match next {
            QpState::Rtr if cur == QpState::Init => s.eng.resp.restart(s.attrs.rq_psn),
            QpState::Rts if cur == QpState::Rtr => {
                let (cons, a) = (s.sq_cons, s.attrs);
                s.eng.req.head = cons;
                s.eng.req.restart(a.sq_psn, a.retry_cnt, a.rnr_retry);
            }
            QpState::Err if cur != QpState::Err => {
                self.stop_timer();
                // Tell the provider first, then look at its producers: a
                // receive it posts meanwhile is either seen by this flush or
                // followed by a doorbell (abi.rs, QueueHeader::kernel_flags).
                s.sq.set_kernel_flags(abi::QUEUE_QP_ERROR);
                if let Some(rq) = &s.rq {
                    rq.set_kernel_flags(abi::QUEUE_QP_ERROR);
                }
                core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
                if let Some(wr_id) = s.eng.resp.take_partial_recv().map(|r| r.wr_id) {
                    let (_, o) = self
                        .recv_cq()
                        .push(&self.flush_cqe(wr_id, abi::WC_RECV), false);
                    after.recv_cq.merge(o);
                }
                // (iWARP: the receive a SEND was going into, off the ring.)
                if let Some((wr_id, status)) =
                    s.iw.as_deref_mut().and_then(|st| st.take_partial_recv())
                {
                    let (_, o) = self
                        .recv_cq()
                        .push(&self.cqe(wr_id, abi::WC_RECV, status), false);
                    after.recv_cq.merge(o);
                }
                self.flush(s, after);
                after.last_wqe = self.srq.is_some();
            }
            QpState::Reset => {
                self.stop_timer();
                s.eng.resp.restart(0);
                if !self.user {
                    // A reset QP's completions may go (IBTA); kernel CQs
                    // are cleaned here, user CQs by the provider.
                    self.send_cq().inner.lock().clean(self.qpn());
                    self.recv_cq().inner.lock().clean(self.qpn());
                }
                s.sq.clear_kernel_flags(abi::QUEUE_QP_ERROR);
                if let Some(rq) = &s.rq {
                    rq.clear_kernel_flags(abi::QUEUE_QP_ERROR);
                }
                self.reset_queues(s)
            }
            // The messages already begun finish; SQ_DRAINED once they have
            // (the requester machine's `check_drained`).
            QpState::Sqd if cur == QpState::Rts => {
                s.eng.req.begin_drain();
                let p =
                    crate::transport::roce::requester::params(self.service(), next, &s.attrs, 0);
                after.sq_drained |= s.eng.req.check_drained(&p) && s.attrs.sqd_notify;
            }
            _ => {}
        }
    }

    /// `after`, its CQ notifications held in `held` (`release` delivers
    /// them) unless it carries an event too: then what was held, and all
    /// of it, go now, in order.
    pub(crate) fn after_held(&self, after: After, held: &mut HeldNotify) {
        let events = after.fatal
            || after.event.is_some()
            || after.srq_limit
            || after.sq_drained
            || after.last_wqe;
        if events {
            self.release(held);
            self.after(after);
        } else {
            held.send.merge(after.send_cq);
            held.recv.merge(after.recv_cq);
        }
    }

    /// Deliver the CQ notifications held in `held`.
    pub(crate) fn release(&self, held: &mut HeldNotify) {
        let h = core::mem::take(held);
        self.send_cq().deliver(h.send);
        self.recv_cq().deliver(h.recv);
    }

    /// Raise what a state change or completions left owing, with no lock
    /// held.
    pub(crate) fn after(&self, after: After) {
        self.send_cq().deliver(after.send_cq);
        self.recv_cq().deliver(after.recv_cq);
        if after.fatal {
            events::qp_event(&self.ib, Event::QpFatal);
        }
        if let Some(ev) = after.event {
            events::qp_event(&self.ib, ev);
        }
        if let Some(srq) = self.srq_ref().filter(|_| after.srq_limit) {
            events::srq_event(&srq.ib, Event::SrqLimitReached);
        }
        if after.sq_drained {
            events::qp_event(&self.ib, Event::SqDrained);
        }
        if after.last_wqe {
            events::qp_event(&self.ib, Event::LastWqeReached);
        }
    }

    /// A doorbell or post on a QP in ERR: flush what was posted.
    pub(crate) fn flush_if_error(&self) {
        let mut after = After::default();
        {
            let mut s = self.inner.lock();
            if s.state == QpState::Err {
                self.flush(&mut s, &mut after);
            }
        }
        self.after(after);
    }

    /// Queue one send WQE of a kernel consumer (`sges` or `inline` data).
    pub(crate) fn post_send(
        &self,
        s: &mut QpInner,
        wqe: &SendWqe,
        sges: &[Sge],
        inline: &[u8],
    ) -> Result {
        match s.state {
            QpState::Reset | QpState::Init | QpState::Rtr => {
                return Err(refuse!(
                    EINVAL,
                    "post_send: QP {:#x} is in {:?}, not yet RTS\n",
                    self.qpn(),
                    s.state
                ))
            }
            _ => {}
        }
        if sges.len() > self.caps.max_send_sge as usize
            || inline.len() > self.caps.max_inline as usize
        {
            return Err(refuse!(
                EINVAL,
                "post_send: {} SGEs, {} inline bytes: QP {:#x} takes {} and {}\n",
                sges.len(),
                inline.len(),
                self.qpn(),
                self.caps.max_send_sge,
                self.caps.max_inline
            ));
        }
        let prod = s.sq.producer();
        if prod.wrapping_sub(s.sq_cons) >= self.caps.max_send_wr {
            return Err(ENOMEM);
        }
        s.sq.write_wqe(prod, wqe, sges, inline).ok_or(EINVAL)?;
        s.sq.set_producer(prod.wrapping_add(1));
        Ok(())
    }

    /// Queue one receive WQE of a kernel consumer.
    pub(crate) fn post_recv(&self, s: &mut QpInner, wr_id: u64, sges: &[Sge]) -> Result {
        if s.state == QpState::Reset || self.srq.is_some() {
            return Err(refuse!(
                EINVAL,
                "post_recv: QP {:#x} is in RESET or receives from an SRQ\n",
                self.qpn()
            ));
        }
        let Some(rq) = &s.rq else { return Err(EINVAL) };
        if sges.len() > self.caps.max_recv_sge as usize {
            return Err(refuse!(
                EINVAL,
                "post_recv: {} SGEs: QP {:#x} takes {}\n",
                sges.len(),
                self.qpn(),
                self.caps.max_recv_sge
            ));
        }
        let prod = rq.producer();
        if prod.wrapping_sub(s.rq_cons) >= self.caps.max_recv_wr {
            return Err(ENOMEM);
        }
        let w = RecvWqe {
            wr_id,
            num_sge: sges.len() as u32,
            _reserved: 0,
        };
        rq.write_wqe(prod, &w, sges, &[]).ok_or(EINVAL)?;
        rq.set_producer(prod.wrapping_add(1));
        Ok(())
    }
}

/// The attribute values of a modify (`struct ib_qp_attr`, read by glue).
#[derive(Clone, Copy, Default)]
pub(crate) struct AttrValues {
    pub(crate) port_num: u32,
    pub(crate) pkey_index: u16,
    pub(crate) qkey: u32,
    pub(crate) qp_access_flags: i32,
    pub(crate) path_mtu: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) sq_psn: u32,
    pub(crate) rq_psn: u32,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) dest_qp_num: u32,
    pub(crate) en_sqd_async_notify: u8,
    pub(crate) path_mig_state: u32,
}

/// Check and apply the attribute values of a modify (the mask was already
/// checked against the state machine).  EINVAL for an out-of-range value.
pub(crate) fn apply_attrs(
    a: &mut QpAttrs,
    raw: &AttrValues,
    mask: u32,
    av: Option<Av>,
    l: &crate::limits::DeviceLimits,
) -> Result {
    let mut n = *a;
    if mask & attr::PORT != 0 && raw.port_num != 1 {
        return Err(refuse!(
            EINVAL,
            "modify_qp: port {} (the only port is 1)\n",
            raw.port_num
        ));
    }
    if mask & attr::PKEY_INDEX != 0 {
        if raw.pkey_index != 0 {
            return Err(refuse!(
                EINVAL,
                "modify_qp: pkey_index {} (the table has 1 entry)\n",
                raw.pkey_index
            ));
        }
        n.pkey_index = raw.pkey_index;
    }
    if mask & attr::QKEY != 0 {
        n.qkey = raw.qkey;
    }
    if mask & attr::ACCESS_FLAGS != 0 {
        let allowed = access::REMOTE_WRITE
            | access::REMOTE_READ
            | access::REMOTE_ATOMIC
            | access::LOCAL_WRITE
            | access::MW_BIND
            // Flush rights are accepted (rdma-core sets them on every RC
            // QP it tests); FLUSH requests themselves are not implemented,
            // so an incoming one is dropped as an unknown opcode.
            | access::FLUSH_GLOBAL
            | access::FLUSH_PERSISTENT;
        if raw.qp_access_flags as u32 & !allowed != 0 {
            return Err(refuse!(
                EINVAL,
                "modify_qp: access flags {:#x} not supported\n",
                raw.qp_access_flags as u32 & !allowed
            ));
        }
        n.access = raw.qp_access_flags as u32;
    }
    if mask & attr::PATH_MTU != 0 {
        if !(crate::limits::IB_MTU_256..=crate::limits::IB_MTU_4096).contains(&raw.path_mtu) {
            return Err(refuse!(
                EINVAL,
                "modify_qp: path_mtu {} is no IB MTU (1 to 5)\n",
                raw.path_mtu
            ));
        }
        n.path_mtu = raw.path_mtu;
    }
    if mask & attr::TIMEOUT != 0 {
        if raw.timeout > 31 {
            return Err(refuse!(
                EINVAL,
                "modify_qp: timeout {} (at most 31)\n",
                raw.timeout
            ));
        }
        n.timeout = raw.timeout;
    }
    if mask & attr::RETRY_CNT != 0 {
        if raw.retry_cnt > 7 {
            return Err(refuse!(
                EINVAL,
                "modify_qp: retry_cnt {} (at most 7)\n",
                raw.retry_cnt
            ));
        }
        n.retry_cnt = raw.retry_cnt;
    }
    if mask & attr::RNR_RETRY != 0 {
        if raw.rnr_retry > 7 {
            return Err(refuse!(
                EINVAL,
                "modify_qp: rnr_retry {} (at most 7)\n",
                raw.rnr_retry
            ));
        }
        n.rnr_retry = raw.rnr_retry;
    }
    if mask & attr::MIN_RNR_TIMER != 0 {
        if raw.min_rnr_timer > 31 {
            return Err(refuse!(
                EINVAL,
                "modify_qp: min_rnr_timer {} (at most 31)\n",
                raw.min_rnr_timer
            ));
        }
        n.min_rnr_timer = raw.min_rnr_timer;
    }
    if mask & attr::SQ_PSN != 0 {
        n.sq_psn = raw.sq_psn & 0xff_ffff;
    }
    if mask & attr::RQ_PSN != 0 {
        n.rq_psn = raw.rq_psn & 0xff_ffff;
    }
    if mask & attr::MAX_QP_RD_ATOMIC != 0 {
        if u32::from(raw.max_rd_atomic) > l.max_qp_init_rd_atom {
            return Err(refuse!(
                EINVAL,
                "modify_qp: max_rd_atomic {} (the device's max_qp_init_rd_atom is {})\n",
                raw.max_rd_atomic,
                l.max_qp_init_rd_atom
            ));
        }
        n.max_rd_atomic = raw.max_rd_atomic;
    }
    if mask & attr::MAX_DEST_RD_ATOMIC != 0 {
        if u32::from(raw.max_dest_rd_atomic) > l.max_qp_rd_atom {
            return Err(refuse!(
                EINVAL,
                "modify_qp: max_dest_rd_atomic {} (the device's max_qp_rd_atom is {})\n",
                raw.max_dest_rd_atomic,
                l.max_qp_rd_atom
            ));
        }
        n.max_dest_rd_atomic = raw.max_dest_rd_atomic;
    }
    if mask & attr::DEST_QPN != 0 {
        if raw.dest_qp_num > super::MAX_QPN {
            return Err(refuse!(
                EINVAL,
                "modify_qp: dest_qp_num {:#x} is no QP number\n",
                raw.dest_qp_num
            ));
        }
        n.dest_qpn = raw.dest_qp_num;
    }
    if mask & attr::EN_SQD_ASYNC_NOTIFY != 0 {
        n.sqd_notify = raw.en_sqd_async_notify != 0;
    }
    if mask & attr::PATH_MIG_STATE != 0 {
        n.path_mig_state = raw.path_mig_state;
    }
    if mask & attr::AV != 0 {
        n.av = Some(av.ok_or_else(|| {
            refuse!(
                EINVAL,
                "modify_qp: an address vector without a usable GID\n"
            )
        })?);
    }
    if mask & (attr::ALT_PATH | attr::CAP) != 0 {
        return Err(refuse!(
            EOPNOTSUPP,
            "modify_qp: alternate paths and resizing a QP are not supported\n"
        ));
    }
    *a = n;
    Ok(())
}
