// SPDX-License-Identifier: GPL-2.0
//! The WQE executor, for any transport: the send side (`sq.rs`: WQEs read
//! and checked, local operations, send completions), the receive side
//! (`rq.rs`: receive WQEs, placement by key and address, receive
//! completions) and memory access (`mem.rs`).  Below it, one wire transport
//! per link type (`transport/`) runs the protocol machines of `core/`.
//! Here too: the QP's engine state, its work item and timer, and the
//! device's counters.

pub(crate) mod mem;
pub(crate) mod rq;
pub(crate) mod sq;

use core::sync::atomic::{AtomicU64, Ordering};

use kernel::alloc::KVVec;
use kernel::prelude::*;

use crate::glue::deferred;
use crate::glue::IbDevice;
use crate::transport::Pumper;
use crate::transport_rules::Service;
use crate::verbs::qp::{After, Qp};

/// Per-device counters (`rdma statistic show link DEV/1`).  The first
/// fifteen carry rdma_rxe's names, for the same meaning (so a user's
/// scripts and monitoring read either driver alike); the rest are
/// softrnic's own.
#[derive(Clone, Copy)]
pub(crate) enum Counter {
    /// RoCE packets sent (`sent_pkts`) and received (`rcvd_pkts`).
    TxPackets = 0,
    RxPackets,
    /// Responder: requests it had already executed.
    DuplicateRequest,
    /// Responder: requests past the expected PSN (a sequence NAK each gap).
    OutOfSeqRequest,
    /// Requester: RNR NAKs received; responder: RNR NAKs sent.
    RcvdRnrErr,
    SendRnrErr,
    /// Requester: sequence NAKs received.
    RcvdSeqErr,
    /// Requester: WQEs failed with RETRY_EXC_ERR, RNR_RETRY_EXC_ERR.
    RetryExceededErr,
    RetryRnrExceededErr,
    /// Requester: retries spent (ACK timeouts, charged sequence NAKs).
    CompleterRetryErr,
    /// Packets the network stack refused to send.
    SendErr,
    /// The port went down (its netdev lost its carrier or went down).
    LinkDowned,
    /// SENDs completed successfully (any transport; `rdma_sends`), and
    /// receives completed successfully (`rdma_recvs`).
    RdmaSends,
    RdmaRecvs,
    /// Bytes of the transport's packets sent and received: RoCE from the
    /// BTH through the ICRC, iWARP the MPA FPDUs.
    SentBytes,
    RcvdBytes,
    /// Dropped before parsing (pieces that could not be read in place and
    /// could not be linearised, headers that could not be pulled).
    RxDropped,
    RxMalformed,
    RxBadIcrc,
    RxUnknownQp,
    /// For a QP in a state (or of a type) that takes no such packet.
    RxBadState,
    /// Requester: responses and ACKs outside its window.
    RxDuplicateResponse,
    /// Requester: rewinds to resend (after a timeout, a NAK, an RNR wait).
    Retransmits,
    AckTimeouts,
    /// iWARP: FPDUs received whole and sent.
    IwRxFpdus,
    IwTxFpdus,
    /// iWARP: FPDUs whose MPA CRC was wrong.
    IwCrcErrors,
    IwTerminatesSent,
    IwTerminatesReceived,
    /// iWARP: connection setups refused (a reject sent or received, or a
    /// bad MPA frame).
    IwMpaRejects,
    /// iWARP: connection setups ended because the peer's MPA request or
    /// reply did not arrive in time (`mpa_timeout`).
    IwMpaTimeouts,
    /// Doorbells: empty POST_SENDs by which a user QP's provider woke the
    /// engine (it rings only while the engine is idle; posts to a busy
    /// engine are stores to the mapped ring alone).
    Doorbells,
    /// Idle periods: times a QP's engine set `QUEUE_ENGINE_IDLE` (at
    /// creation, when its pump found nothing left to do, or in a state
    /// that does not send), each of which lets its provider ring once
    /// (the doorbell clears the flag before it returns).  So `doorbells`
    /// never exceeds it for single-threaded posters.
    EngineIdle,
    /// Doorbells left to the QP's work item rather than sent from in the
    /// posting thread, because the QP's send CQ held completions its
    /// application had not polled yet (`Qp::posts_ahead`).
    DoorbellsDeferred,
    /// RoCE: packets whose payload was read in place from the page
    /// fragments the network stack kept it in (never linearised).
    RxPaged,
    /// RoCE: packets the device sent to its own address and took straight
    /// back (`rx::loop_back`; the network stack and its tools do not see
    /// them).  Also in `sent_pkts` and `rcvd_pkts`.
    LoopedPkts,
    /// iWARP: READ response payload bytes the socket sent from the memory
    /// region's own pages, by reference (not copied; `Stream`'s
    /// `by_reference`).
    IwTxRefBytes,
    /// RoCE: GSO packets sent, each carrying a run of several packets to
    /// one QP (`transport/roce/packet.rs`; the packets are in `sent_pkts`).
    TxGso,
    /// RoCE: GSO packets received whole, each cut here (`rx.rs`; the
    /// packets are in `rcvd_pkts`).
    RxGso,
}

pub(crate) const COUNTERS: usize = 39;
pub(crate) const COUNTER_NAMES: [&core::ffi::CStr; COUNTERS] = [
    c"sent_pkts",
    c"rcvd_pkts",
    c"duplicate_request",
    c"out_of_seq_request",
    c"rcvd_rnr_err",
    c"send_rnr_err",
    c"rcvd_seq_err",
    c"retry_exceeded_err",
    c"retry_rnr_exceeded_err",
    c"completer_retry_err",
    c"send_err",
    c"link_downed",
    c"rdma_sends",
    c"rdma_recvs",
    c"sent_bytes",
    c"rcvd_bytes",
    c"rx_dropped",
    c"rx_malformed",
    c"rx_bad_icrc",
    c"rx_unknown_qp",
    c"rx_bad_state",
    c"rx_duplicate_response",
    c"retransmits",
    c"ack_timeouts",
    c"iw_rx_fpdus",
    c"iw_tx_fpdus",
    c"iw_crc_errors",
    c"iw_terminates_sent",
    c"iw_terminates_received",
    c"iw_mpa_rejects",
    c"iw_mpa_timeouts",
    c"doorbells",
    c"engine_idle",
    c"doorbells_deferred",
    c"rx_paged",
    c"looped_pkts",
    c"iw_tx_ref_bytes",
    c"tx_gso",
    c"rx_gso",
];
const _: () = assert!(Counter::RxGso as usize + 1 == COUNTERS);

impl From<crate::roce::Count> for Counter {
    fn from(c: crate::roce::Count) -> Counter {
        use crate::roce::Count;
        match c {
            Count::BadState => Counter::RxBadState,
            Count::Malformed => Counter::RxMalformed,
            Count::Duplicate => Counter::DuplicateRequest,
            Count::SeqNakSent => Counter::OutOfSeqRequest,
            Count::RnrNakSent => Counter::SendRnrErr,
            Count::RnrNakReceived => Counter::RcvdRnrErr,
            Count::Retransmit => Counter::Retransmits,
            Count::AckTimeout => Counter::AckTimeouts,
            Count::DuplicateResponse => Counter::RxDuplicateResponse,
            Count::SeqNakReceived => Counter::RcvdSeqErr,
            Count::CompleterRetry => Counter::CompleterRetryErr,
            Count::RetryExceeded => Counter::RetryExceededErr,
            Count::RnrRetryExceeded => Counter::RetryRnrExceededErr,
        }
    }
}

pub(crate) struct Counters([AtomicU64; COUNTERS]);

// (`derive(Default)` stops at arrays of 32.)
impl Default for Counters {
    fn default() -> Self {
        Counters([const { AtomicU64::new(0) }; COUNTERS])
    }
}

impl Counters {
    pub(crate) fn bump(&self, c: Counter) {
        self.add(c, 1);
    }

    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, i: usize) -> u64 {
        self.0.get(i).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Counter `i`'s value, leaving it at zero.
    pub(crate) fn take(&self, i: usize) -> u64 {
        self.0.get(i).map_or(0, |c| c.swap(0, Ordering::Relaxed))
    }
}

/// The engine state of a QP (under the QP lock).
pub(crate) struct Engine {
    pub(crate) req: Requester,
    pub(crate) resp: crate::transport::roce::responder::Responder,
    /// A context is building and sending this QP's packets.
    pub(crate) pumping: bool,
    /// More to do than the pumping context had seen.
    pub(crate) again: bool,
    /// A work item used its whole budget and had more to send (the high-
    /// priority item's is short): until the QP goes idle its pumps are
    /// queued at normal priority (`bulk_work`), so a long stream shares its
    /// CPU with the threads there instead of starving them.
    pub(crate) bulk: bool,
    /// The QP is being destroyed: no more work items or timers.
    pub(crate) dying: bool,
}

/// The requester machine as the kernel keeps it: a `Track` per send-queue
/// slot (kvmalloc: a deep queue needs megabytes).
pub(crate) type Requester =
    crate::roce::requester::Requester<crate::abi::SendWqe, KVVec<sq::Track>>;

fn new_requester(slots: u32) -> Result<Requester> {
    let mut track = KVVec::with_capacity(slots as usize, GFP_KERNEL)?;
    for _ in 0..slots {
        track.push(sq::Track::default(), GFP_KERNEL)?;
    }
    Ok(Requester::new(track))
}

// The machines' completion codes are the ABI's.
const _: () = {
    use crate::abi;
    use crate::roce::wc;
    assert!(wc::SUCCESS == abi::WC_SUCCESS && wc::LOC_LEN_ERR == abi::WC_LOC_LEN_ERR);
    assert!(wc::LOC_QP_OP_ERR == abi::WC_LOC_QP_OP_ERR && wc::LOC_PROT_ERR == abi::WC_LOC_PROT_ERR);
    assert!(wc::WR_FLUSH_ERR == abi::WC_WR_FLUSH_ERR);
    assert!(wc::REM_INV_REQ_ERR == abi::WC_REM_INV_REQ_ERR);
    assert!(wc::REM_ACCESS_ERR == abi::WC_REM_ACCESS_ERR && wc::REM_OP_ERR == abi::WC_REM_OP_ERR);
    assert!(wc::RETRY_EXC_ERR == abi::WC_RETRY_EXC_ERR);
    assert!(wc::RNR_RETRY_EXC_ERR == abi::WC_RNR_RETRY_EXC_ERR);
};

impl Engine {
    pub(crate) fn new(sq_slots: u32) -> Result<Engine> {
        Ok(Engine {
            req: new_requester(sq_slots)?,
            resp: crate::transport::roce::responder::new_responder()?,
            pumping: false,
            again: false,
            bulk: false,
            dying: false,
        })
    }
}

impl Qp {
    pub(crate) fn dev(&self) -> IbDevice {
        self.ib.device()
    }

    /// New work for the engine (a doorbell, a received packet): pump right
    /// here if this is the QP's home CPU, else in the work item there.  Not
    /// from hard-IRQ context or with IRQs off (transmission needs BHs).
    ///
    /// A received packet that finds an RC QP with nothing in flight moves
    /// its home here instead (every request it sent was acknowledged and
    /// every READ or atomic it was asked for was answered, so none of its
    /// packets still waits in the old CPU's queues to be overtaken) and is
    /// answered from the receiving context: a ping-pong never waits for the
    /// work item.  A doorbell does not move the home: the posting thread
    /// usually polls on its CPU, and a sender with several QPs then had all
    /// their work items on that CPU beside it, its poll loop starved
    /// (ib_write_bw -q 4 -D 4 at 64 KiB: no completion in the measured
    /// window; 11 MiB/s with the home left, rxe 12 in the same VM).  Even
    /// moved only for posts its own pump sends whole, 4 QPs lost half
    /// their rate at 64 B and at 64 KiB (2026-11-27).
    ///
    /// A kick that finds the QP's pump running at its home leaves the rest
    /// to that pump, as one at the home does.
    ///
    /// A kernel QP's home stays: its packets are received on any CPU (its
    /// receive work item, see `Qp::rx_steer`), and a home that followed
    /// them gave NVMe over Fabrics a little less (2026-11-28).  One whose
    /// peer is on this device pumps wherever it is kicked (`loops_back`).
    ///
    /// A UD QP pumps here on any CPU: its messages carry no order a CPU
    /// change could break, and its address handles are the poster's to
    /// destroy as soon as the post returns (mckey destroys the AH and the
    /// QP right after posting; from the work item those sends were lost).
    pub(crate) fn kick(&self, by: Pumper) {
        let done = deferred::on_this_cpu(|cpu| {
            if self.service() != Service::Ud && cpu != self.home() {
                let mut s = self.inner.lock();
                if self.join_pump(&mut s, by) {
                    return true;
                }
                if self.loops_back(&s) {
                    drop(s);
                    self.pump(by);
                    return true;
                }
                // UC: no ACK says when its packets have left.
                let quiet = self.service() == Service::Rc
                    && self.user
                    && by != Pumper::Doorbell
                    && !s.eng.req.outstanding()
                    && s.eng.resp.rd_pending() == 0;
                if !quiet {
                    return false;
                }
                self.cpu.store(cpu, Ordering::Relaxed);
            }
            self.pump(by);
            true
        });
        if !done {
            let s = self.inner.lock();
            if by == Pumper::Doorbell {
                self.doorbell_heard(&s);
            }
            self.queue_pump(&s.eng);
        }
    }

    /// If a pump is running (it has yet to take the lock to end), have it
    /// look once more instead of pumping here: true.  A doorbell's posts
    /// from now on need no doorbell.
    pub(crate) fn join_pump(&self, s: &mut crate::verbs::qp::QpInner, by: Pumper) -> bool {
        if !s.eng.pumping {
            return false;
        }
        s.eng.again = true;
        if by == Pumper::Doorbell {
            self.doorbell_heard(s);
        }
        true
    }

    /// A kernel RC or UC QP whose peer is one on this device: its packets
    /// go straight into the peer's receive backlog, in the order they were
    /// built, whichever CPU sends them (`rx::loop_back`), so it pumps
    /// wherever it is kicked (a work item on its home CPU cost a
    /// cross-CPU wakeup for most I/Os of NVMe over Fabrics in loopback).
    pub(crate) fn loops_back(&self, s: &crate::verbs::qp::QpInner) -> bool {
        self.steered()
            && s.attrs.av.is_some_and(|av| {
                let dev = self.dev();
                crate::transport::roce::rx::loop_target(&dev, &av.sgid, &av.dgid, s.attrs.dest_qpn)
                    .is_some()
            })
    }

    /// The CPU this QP's packets are sent from.
    pub(crate) fn home(&self) -> u32 {
        self.cpu.load(Ordering::Relaxed)
    }

    /// Do what a protocol machine's step left to the QP.
    pub(crate) fn outcome(
        &self,
        s: &mut crate::verbs::qp::QpInner,
        o: crate::roce::Outcome,
        after: &mut After,
    ) {
        use crate::glue::events::Event;
        if let Some(e) = o.remote {
            after.event = Some(match e {
                crate::roce::RemoteError::Access => Event::QpAccessErr,
                crate::roce::RemoteError::Request => Event::QpRequestErr,
            });
        }
        after.fatal |= o.fatal;
        after.sq_drained |= o.drained && s.attrs.sqd_notify;
        if let Some(f) = o.failed {
            self.log_failure(&f);
        }
        if o.error && s.state != crate::qp_state::QpState::Err {
            self.enter(s, crate::qp_state::QpState::Err, after);
        }
    }

    /// Say in the kernel log why the requester failed a WQE (rate-limited):
    /// the QP goes to ERR, and its consumer sees only a status.
    fn log_failure(&self, f: &crate::roce::Failure) {
        static LIMIT: crate::glue::RateLimit = crate::glue::RateLimit::new();
        if !LIMIT.allow() {
            return;
        }
        let why = match f.status {
            crate::roce::wc::RETRY_EXC_ERR => "no answer within retry_cnt timeouts",
            crate::roce::wc::RNR_RETRY_EXC_ERR => "receiver not ready past rnr_retry",
            crate::roce::wc::REM_ACCESS_ERR => "the responder refused access",
            crate::roce::wc::REM_INV_REQ_ERR => "the responder found the request invalid",
            crate::roce::wc::REM_OP_ERR => "the responder could not complete it",
            crate::roce::wc::BAD_RESP_ERR => "a response that does not fit the request",
            _ => "a local error",
        };
        kernel::pr_info!(
            "QP {:#x}: send WQE failed, status {} ({}): {:?} at PSN {:#x}, {} packets, {} responses in; unacknowledged from {:#x}, sent to {:#x}, window {}\n",
            self.ib.qp_num(),
            f.status,
            why,
            f.op,
            f.first_psn,
            f.npkts,
            f.got,
            f.una,
            f.sent_to,
            f.window
        );
    }

    /// Have a work item pump (takes the QP lock).
    pub(crate) fn schedule(&self) {
        let s = self.inner.lock();
        self.queue_pump(&s.eng);
    }

    /// Have the work item pump (not while the QP is being destroyed); the
    /// caller holds the QP lock.
    pub(crate) fn queue_work(&self, dying: bool) {
        if !dying {
            self.work.queue(self.home());
        }
    }

    /// Have a work item pump: the high-priority one, or the bulk one while
    /// the QP streams (`Engine::bulk`).
    pub(crate) fn queue_pump(&self, eng: &Engine) {
        if eng.bulk {
            self.queue_bulk_pump(eng);
        } else if !eng.dying {
            self.work.queue(self.home());
        }
    }

    /// Have the normal-priority work item pump, whether or not the QP
    /// streams (`Qp::defer_doorbell`).
    pub(crate) fn queue_bulk_pump(&self, eng: &Engine) {
        if !eng.dying {
            self.bulk_work.queue(self.home());
        }
    }

    pub(crate) fn arm_timer(&self, dying: bool, usecs: u64) {
        if !dying {
            self.timer.arm(usecs);
        }
    }

    pub(crate) fn stop_timer(&self) {
        self.timer.stop();
    }

    /// The CPU a new QP sends from: spread by QP number.
    pub(crate) fn pick_cpu(qpn: u32) -> u32 {
        qpn % deferred::cpu_count()
    }

    /// Stop the work item and timer for good (destroy, process context,
    /// after the QP left the QP table).
    pub(crate) fn engine_stop(&self) {
        // Send what is queued first: the ACK of the last message, whose
        // completion the application may already have seen (and then
        // destroyed the QP), is otherwise lost and the peer retries into
        // the void.
        self.schedule();
        self.work.flush();
        self.bulk_work.flush();
        self.inner.lock().eng.dying = true;
        self.timer.shutdown();
        self.work.shutdown();
        self.bulk_work.shutdown();
        // (No packet reaches the QP now, and no work item takes them.)
        self.rx_work.shutdown();
        self.backlog.purge();
    }
}
