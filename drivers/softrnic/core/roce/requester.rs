// SPDX-License-Identifier: GPL-2.0
//! The requester: send-queue WQEs become request packets.  Each WQE is
//! read once into a `Track` (its length, PSN range and progress), so
//! retransmission never depends on what user space writes into the ring
//! later.  RC keeps WQEs until the completer (`completer.rs`) retires them;
//! UC and UD complete a WQE once its last packet is sent.  Local operations
//! and WQEs that failed their checks complete in order, at the head; a
//! local invalidate also runs there (an earlier message still in flight
//! may use the key, and may be resent), a fast registration or MW bind as
//! soon as the requester reaches it (its key is new: nothing before it can
//! use it), so a chain of REG_MR and SEND does not wait a round trip.

use core::ops::DerefMut;

use super::{wc, Count, Outcome, SendFail};
use crate::psn::{self, Psn};
use crate::roce_wire::{AtomicEth, Bth, Deth, Ext, Headers, Ieth, ImmDt, Payload, Reth};
use crate::transport_rules::{self as rules, MsgOp, Service};

/// RC packets in flight beyond the oldest unacknowledged one, at most (as
/// rxe; 256 let four QPs of 64 KiB writes bury rxe's responder under TCG).
pub(crate) const WINDOW: u32 = 128;
/// An RC request asks for an ACK at least this often inside long messages.
pub(crate) const ACK_EVERY: u32 = 32;
/// The window after ACK timeouts, at least: any `ACK_EVERY` packets in a
/// row include one that asks for an ACK, so a window this wide always
/// gets one back.
pub(crate) const MIN_WINDOW: u32 = ACK_EVERY;

/// What the requester knows of one send WQE; `W` is the caller's copy of
/// the WQE (what it needs to build packets and completions).
#[derive(Clone, Copy, Default)]
pub(crate) struct Track<W> {
    pub(crate) wqe: W,
    /// The message operation; `None` for a local operation.
    pub(crate) op: Option<MsgOp>,
    pub(crate) len: u32,
    pub(crate) fence: bool,
    pub(crate) solicited: bool,
    pub(crate) first_psn: u32,
    /// PSNs the WQE takes (0 for local operations and failed WQEs).
    pub(crate) npkts: u32,
    /// READ: response packets received; atomics: 1 once answered.
    pub(crate) got: u32,
    /// Sent at least once (READ/atomic: counted in `rd_inflight`).
    pub(crate) sent: bool,
    /// A completion status to report when the WQE reaches the head.
    pub(crate) error: u8,
    /// A local operation that may run before the head (see the module).
    pub(crate) early: bool,
}

impl<W> Track<W> {
    pub(crate) fn is_read_or_atomic(&self) -> bool {
        matches!(
            self.op,
            Some(MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd)
        )
    }

    /// A local operation run ahead of the head (successfully), awaiting
    /// its turn to complete.
    pub(crate) fn ran_early(&self) -> bool {
        self.op.is_none() && self.sent && self.error == 0
    }

    pub(crate) fn last_psn(&self) -> Psn {
        Psn::new(self.first_psn).offset(self.npkts.saturating_sub(1) as i32)
    }
}

/// A WQE as the caller read and checked it (SGEs against the memory keys,
/// inline length, operation against the service).
pub(crate) struct Prepared<W> {
    pub(crate) wqe: W,
    /// `None`: a local operation (bind, invalidate, fast-register).
    pub(crate) op: Option<MsgOp>,
    pub(crate) len: u32,
    pub(crate) fence: bool,
    pub(crate) solicited: bool,
    /// Non-zero: the WQE failed its checks with this completion status.
    pub(crate) error: u8,
    /// A local operation that names a key no earlier WQE can use (fast
    /// registration, MW bind): it may run before the head.
    pub(crate) early: bool,
}

/// One request packet to build.
pub(crate) struct RequestPacket<'a, W> {
    /// The slot of the WQE the packet belongs to.
    pub(crate) index: u32,
    pub(crate) track: &'a Track<W>,
    pub(crate) op: MsgOp,
    pub(crate) opcode: crate::roce_wire::Opcode,
    pub(crate) psn: Psn,
    /// The payload's offset in the message and its length.
    pub(crate) offset: u32,
    pub(crate) payload: u32,
    pub(crate) ack_req: bool,
    pub(crate) solicited: bool,
}

/// What a request's headers carry from its WQE and QP, beyond the
/// machine's plan: the caller's WQE layout stays the caller's.
#[derive(Clone, Copy, Default)]
pub(crate) struct WqeFields {
    pub(crate) dest_qp: u32,
    /// UD: the sending QP and the Q_Key to present.
    pub(crate) src_qp: u32,
    pub(crate) qkey: u32,
    /// WRITE, READ and atomics: the target of the whole message.
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    /// An atomic's AtomicETH operands (fetch-add: `compare` unused).
    pub(crate) swap_add: u64,
    pub(crate) compare: u64,
    /// Immediate data (host order) and the rkey a SEND invalidates.
    pub(crate) imm: u32,
    pub(crate) inv_rkey: u32,
}

impl<W> RequestPacket<'_, W> {
    /// This packet's headers: its opcode's extension headers, filled from
    /// `f`; `pkey` goes into the BTH.
    pub(crate) fn headers(&self, pkey: u16, f: &WqeFields) -> Headers {
        let layout = self.opcode.layout();
        let mut h = Headers::new(Bth {
            opcode: self.opcode,
            solicited: self.solicited,
            mig_req: false,
            pad_cnt: 0,
            pkey,
            fecn: false,
            becn: false,
            dest_qp: f.dest_qp,
            ack_req: self.ack_req,
            psn: self.psn,
        });
        if layout.has(Ext::Deth) {
            h.deth = Some(Deth {
                qkey: f.qkey,
                src_qp: f.src_qp,
            });
        }
        if layout.has(Ext::Reth) {
            // A READ retransmitted from the middle asks for the rest.
            let len = self.track.len;
            h.reth = Some(Reth {
                va: f.remote_addr.wrapping_add(u64::from(self.offset)),
                rkey: f.rkey,
                dma_len: len - core::cmp::min(self.offset, len),
            });
        }
        if layout.has(Ext::AtomicEth) {
            h.atomic_eth = Some(AtomicEth {
                va: f.remote_addr,
                rkey: f.rkey,
                swap_add: f.swap_add,
                compare: f.compare,
            });
        }
        if layout.has(Ext::ImmDt) {
            h.imm_dt = Some(ImmDt { data: f.imm });
        }
        if layout.has(Ext::Ieth) {
            h.ieth = Some(Ieth { rkey: f.inv_rkey });
        }
        h
    }
}

/// The I/O a requester (and its completer) asks of the caller.
pub(crate) trait RequesterIo<W> {
    /// The send queue's producer index (read once per step: user space
    /// may move it at any time).
    fn producer(&mut self) -> u32;
    /// The send queue's slot count (a power of two).
    fn slots(&self) -> u32;
    /// Read and check the WQE in slot `index`; `None` if it cannot be read.
    fn prepare(&mut self, index: u32) -> Option<Prepared<W>>;
    /// Run a local operation; its completion status.
    fn run_local(&mut self, wqe: &W) -> u8;
    /// Build and queue one request packet.
    fn send(&mut self, p: &RequestPacket<'_, W>) -> Result<(), SendFail>;
    /// The WQE in slot `index` (the head) is done: report `status` (a
    /// successful unsignaled WQE gets no completion) and consume the slot.
    fn complete(&mut self, index: u32, t: &Track<W>, status: u8);
    /// Store `data` at byte `offset` of the WQE's local buffer (a READ's
    /// data, an atomic's original value); false if the memory refuses.
    fn store(&mut self, index: u32, t: &Track<W>, offset: u32, data: Payload<'_>) -> bool;
    fn arm_timer(&mut self, usecs: u64);
    fn stop_timer(&mut self);
    /// Come back later to send more (UC/UD: no memory for a packet).
    fn retry_later(&mut self);
    fn count(&mut self, c: Count);
}

/// What the requester works with, from the QP's attributes.
#[derive(Clone, Copy)]
pub(crate) struct RequesterParams {
    pub(crate) svc: Service,
    /// The path MTU in bytes.
    pub(crate) mtu: u32,
    /// READ and atomic requests in flight at once (max_rd_atomic, >= 1).
    pub(crate) max_rd: u32,
    /// The local ACK timeout code (IBTA 9.7.6.1.3; 0: none).
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    /// The QP is in RTS (false: SQD, or not sending at all, see `draining`).
    pub(crate) rts: bool,
    /// The QP is in SQD.
    pub(crate) sqd: bool,
}

/// The requester's state; `S` stores one `Track` per send-queue slot.
pub(crate) struct Requester<W, S> {
    pub(crate) track: S,
    /// The oldest WQE not yet completed (the send queue's consumer).
    pub(crate) head: u32,
    /// The WQE being sent and the packet of it that goes next.
    pub(crate) next_wqe: u32,
    pub(crate) wqe_pkt: u32,
    /// WQEs up to here have a valid `Track`.
    pub(crate) fetched: u32,
    /// The PSN the next new WQE starts at.
    pub(crate) next_psn: Psn,
    /// The oldest PSN not yet acknowledged.
    pub(crate) una: Psn,
    /// The PSN after the newest packet sent so far (after a READ, its
    /// whole response range).  A rewind resends from an older PSN, but an
    /// ACK of anything before this one is an ACK of a first transmission:
    /// taken for a packet not yet sent, it would be dropped, and with it
    /// every ACK a responder that has everything sends for the resent
    /// duplicates (the newest PSN it has), until retry_cnt ran out.
    pub(crate) sent_to: Psn,
    /// READ and atomic WQEs sent and not completed.
    pub(crate) rd_inflight: u32,
    /// The window in use (`MIN_WINDOW..=WINDOW`): halved by each ACK
    /// timeout, widened by the PSNs each ACK acknowledges.  A software
    /// responder that falls behind (rxe under TCG, 4 QPs of 64 KiB writes)
    /// stops answering within the timeout; a go-back-N resend of the full
    /// window per QP then buried it in duplicates (rxe ACKs every duplicate
    /// SEND or WRITE packet), no ACK made progress for retry_cnt timeouts,
    /// and the requester failed with RETRY_EXC_ERR on a working link.
    pub(crate) cwnd: u32,
    pub(crate) retry_left: u8,
    pub(crate) rnr_left: u8,
    /// Waiting out an RNR NAK's timer before retransmitting.
    pub(crate) rnr_wait: bool,
    /// The retransmission timer is running.
    pub(crate) timer_on: bool,
    /// The PSN the requester last went back to because responses before
    /// the one that arrived were lost, until the next progress: the other
    /// responses still in flight behind the lost one must not each rewind
    /// it again (a storm of duplicate requests that restart the responder
    /// over and over).
    pub(crate) rewound_for_gap: Option<u32>,
    /// The PSN the requester last went back to for an RNR NAK, until the
    /// next progress: a sequence NAK of it is that RNR NAK's echo.
    pub(crate) rewound_for_rnr: Option<u32>,
    /// The PSN of the last sequence NAK, until the next progress: a NAK of
    /// a later PSN shows the responder moved on (it is not charged).
    pub(crate) last_seq_nak: Option<u32>,
    /// In SQD: the WQE the drain stops before (those before it had begun),
    /// and whether SQ_DRAINED was raised.
    pub(crate) drain_point: u32,
    pub(crate) drained: bool,
    _wqe: core::marker::PhantomData<W>,
}

impl<W: Copy + Default, S: DerefMut<Target = [Track<W>]>> Requester<W, S> {
    /// A requester with `track` as its per-slot storage (a power of two
    /// long, the send queue's slot count).
    pub(crate) fn new(track: S) -> Self {
        Requester {
            track,
            head: 0,
            next_wqe: 0,
            wqe_pkt: 0,
            fetched: 0,
            next_psn: Psn::new(0),
            una: Psn::new(0),
            sent_to: Psn::new(0),
            rd_inflight: 0,
            cwnd: WINDOW,
            retry_left: 0,
            rnr_left: 0,
            rnr_wait: false,
            timer_on: false,
            rewound_for_gap: None,
            rewound_for_rnr: None,
            last_seq_nak: None,
            drain_point: 0,
            drained: false,
            _wqe: core::marker::PhantomData,
        }
    }

    /// Start over at the current head, at `sq_psn` (entering RTS).
    pub(crate) fn restart(&mut self, sq_psn: u32, retry: u8, rnr: u8) {
        self.next_wqe = self.head;
        self.wqe_pkt = 0;
        self.fetched = self.head;
        self.next_psn = Psn::new(sq_psn);
        self.una = Psn::new(sq_psn);
        self.sent_to = Psn::new(sq_psn);
        self.rd_inflight = 0;
        self.cwnd = WINDOW;
        self.retry_left = retry;
        self.rnr_left = rnr;
        self.rnr_wait = false;
        self.timer_on = false;
        self.rewound_for_gap = None;
        self.rewound_for_rnr = None;
        self.last_seq_nak = None;
    }

    /// Forget every WQE up to `index` (flushed or discarded by the QP).
    pub(crate) fn discard_to(&mut self, index: u32) {
        self.head = index;
        self.next_wqe = index;
        self.fetched = index;
        self.wqe_pkt = 0;
        self.rd_inflight = 0;
    }

    /// Entering SQD: the messages already begun finish, no new one starts.
    pub(crate) fn begin_drain(&mut self) {
        self.drain_point = if self.wqe_pkt > 0 {
            self.next_wqe.wrapping_add(1)
        } else {
            self.next_wqe
        };
        self.drained = false;
    }

    fn slot(&self, index: u32) -> usize {
        (index as usize) & self.track.len().wrapping_sub(1)
    }

    pub(crate) fn get(&self, index: u32) -> Track<W> {
        self.track[self.slot(index)]
    }

    pub(crate) fn set(&mut self, index: u32, t: Track<W>) {
        let i = self.slot(index);
        self.track[i] = t;
    }

    /// In SQD: true once every message begun before it is done (once).
    pub(crate) fn check_drained(&mut self, p: &RequesterParams) -> bool {
        if !p.sqd || self.drained {
            return false;
        }
        if self.drain_point.wrapping_sub(self.head) as i32 <= 0 {
            self.drained = true;
            return true;
        }
        false
    }

    /// New messages may go out (SQD: only those begun before it).
    fn sending(&self, p: &RequesterParams) -> bool {
        p.rts || (p.sqd && (self.next_wqe.wrapping_sub(self.drain_point) as i32) < 0)
    }

    /// The packet count of a message of `len` bytes.
    fn packets_of(op: MsgOp, len: u32, mtu: u32) -> u32 {
        match op {
            MsgOp::CmpSwap | MsgOp::FetchAdd => 1,
            _ => rules::packets(len, mtu),
        }
    }

    /// Read the WQE at `index` into its `Track`, checking what needs no
    /// memory: the operation against the service, the length against the
    /// MTU (UD) and the message size.
    fn fetch(&mut self, p: &RequesterParams, io: &mut impl RequesterIo<W>, index: u32) -> bool {
        let Some(w) = io.prepare(index) else {
            return false;
        };
        let mut t = Track {
            wqe: w.wqe,
            op: w.op,
            len: w.len,
            fence: w.fence,
            solicited: w.solicited,
            error: w.error,
            early: w.early,
            // (Where the next message starts even for a WQE that sends
            // nothing: `send_point` reads it while the requester waits at
            // a local operation, and the timer must keep running for the
            // messages before it.)
            first_psn: self.next_psn.get(),
            ..Track::default()
        };
        if let (Some(op), 0) = (t.op, t.error) {
            if rules::request_opcode(p.svc, op, 0, 1).is_none() {
                t.error = wc::LOC_QP_OP_ERR;
            } else if p.svc == Service::Ud && t.len > p.mtu {
                t.error = wc::LOC_LEN_ERR;
            } else {
                t.npkts = Self::packets_of(op, t.len, p.mtu);
                self.next_psn = self.next_psn.offset(t.npkts as i32);
            }
        }
        self.set(index, t);
        self.fetched = self.fetched.wrapping_add(1);
        true
    }

    /// Send request packets while the window, the caller's batch and the
    /// ordering rules allow.
    pub(crate) fn emit(&mut self, p: &RequesterParams, io: &mut impl RequesterIo<W>) -> Outcome {
        let mut out = Outcome::default();
        let mut sent_rc = false;
        // One look at the producer: a user ring's is user memory, and the
        // loop must end whatever user space writes meanwhile.
        let prod = io.producer();
        let pending = prod.wrapping_sub(self.head);
        if pending > io.slots() {
            if self.sending(p) {
                out.error = true;
                out.fatal = true;
            }
            return out;
        }
        loop {
            if !self.sending(p) || self.rnr_wait {
                break;
            }
            if self.next_wqe.wrapping_sub(self.head) >= prod.wrapping_sub(self.head) {
                break;
            }
            let index = self.next_wqe;
            if index == self.fetched && !self.fetch(p, io, index) {
                break;
            }
            let t = self.get(index);
            let Some(op) = t.op.filter(|_| t.error == 0) else {
                if t.ran_early() {
                    // Run already; reached again after a rewind.
                    self.next_message();
                    continue;
                }
                if index != self.head {
                    // RC only: UC and UD complete each WQE as it goes out,
                    // so a local operation is at the head when reached.
                    // One that fails (it changed nothing) waits for the
                    // head and runs again there: it may need what a WQE
                    // before it does on completion (a READ with invalidate
                    // frees the MR it registers anew).
                    if t.early
                        && t.error == 0
                        && !t.fence
                        && p.svc == Service::Rc
                        && io.run_local(&t.wqe) == wc::SUCCESS
                    {
                        let mut t2 = t;
                        t2.sent = true;
                        self.set(index, t2);
                        self.next_message();
                        continue;
                    }
                    // The others complete in order: wait for everything
                    // before them to complete.
                    break;
                }
                let status = if t.error != 0 {
                    t.error
                } else {
                    io.run_local(&t.wqe)
                };
                self.next_message();
                self.retire_head(io, &t, status);
                if status != wc::SUCCESS {
                    out.error = true;
                    break;
                }
                continue;
            };
            if t.fence && !t.sent && self.rd_inflight > 0 {
                break;
            }
            if t.is_read_or_atomic() && !t.sent && self.rd_inflight >= p.max_rd {
                break;
            }
            let pkt = self.wqe_pkt;
            let psn = Psn::new(t.first_psn).offset(pkt as i32);
            if p.svc == Service::Rc && psn::diff(psn, self.una) >= self.cwnd as i32 {
                break;
            }
            let Some(opcode) = rules::request_opcode(p.svc, op, pkt, t.npkts) else {
                break;
            };
            let last = pkt + 1 >= t.npkts;
            let offset = pkt.saturating_mul(p.mtu);
            let payload = if opcode.layout().payload {
                core::cmp::min(p.mtu, t.len - core::cmp::min(offset, t.len))
            } else {
                0
            };
            let req = RequestPacket {
                index,
                track: &t,
                op,
                opcode,
                psn,
                offset,
                payload,
                ack_req: p.svc == Service::Rc && (last || (pkt + 1) % ACK_EVERY == 0),
                solicited: last && t.solicited && opcode.layout().payload,
            };
            match io.send(&req) {
                Ok(()) => {}
                Err(SendFail::Full) => break,
                Err(SendFail::NoMemory | SendFail::NoRoute) => {
                    // RC retransmits on its timer; UC and UD try again
                    // later.  Either way this batch ends here.
                    if p.svc == Service::Rc {
                        self.ensure_timer(p, io);
                    } else {
                        io.retry_later();
                    }
                    break;
                }
                Err(SendFail::BadMemory) => {
                    // The memory went away after the WQE was checked: fail
                    // it when it reaches the head.
                    let mut t2 = t;
                    t2.error = wc::LOC_PROT_ERR;
                    self.set(index, t2);
                    continue;
                }
            }
            let mut t2 = t;
            if !t.sent {
                t2.sent = true;
                if t.is_read_or_atomic() {
                    self.rd_inflight += 1;
                }
            }
            self.set(index, t2);
            let done = t.is_read_or_atomic() || last;
            if done {
                self.next_message();
            } else {
                self.wqe_pkt += 1;
            }
            let sp = self.send_point();
            if psn::diff(sp, self.sent_to) > 0 {
                self.sent_to = sp;
            }
            if p.svc == Service::Rc {
                sent_rc = true;
            } else if done {
                self.retire_head(io, &t2, wc::SUCCESS);
            }
        }
        if sent_rc {
            self.rearm_timer(p, io);
        }
        out.drained = self.check_drained(p);
        out
    }

    /// Request packets just went out: the local ACK timeout counts from
    /// the last of them.  Counted from the first, a go-back-N resend of a
    /// whole window that takes longer to transmit than the timeout (a slow
    /// or loaded host, a debug kernel) would time out before any ACK could
    /// come back, again and again, and end in RETRY_EXC_ERR with the link
    /// fine.  (A timer pushed back like this still fires: the window bounds
    /// how long a requester sends without an ACK.)
    pub(crate) fn rearm_timer(&mut self, p: &RequesterParams, io: &mut impl RequesterIo<W>) {
        if let Some(us) = rules::ack_timeout_us(p.timeout) {
            self.timer_on = true;
            io.arm_timer(us);
        }
    }

    /// Start the retransmission timer if it is not running.
    pub(crate) fn ensure_timer(&mut self, p: &RequesterParams, io: &mut impl RequesterIo<W>) {
        if !self.timer_on {
            self.rearm_timer(p, io);
        }
    }

    /// Complete the WQE at the head with `status`, then the local
    /// operations behind it that ran early.  A requester rewound onto a
    /// WQE it retires moves on past it.
    pub(crate) fn retire_head(&mut self, io: &mut impl RequesterIo<W>, t: &Track<W>, status: u8) {
        let mut t = *t;
        let mut status = status;
        loop {
            if self.next_wqe == self.head {
                self.next_message();
            }
            let index = self.head;
            self.head = self.head.wrapping_add(1);
            io.complete(index, &t, status);
            if self.head == self.fetched {
                break;
            }
            t = self.get(self.head);
            if !t.ran_early() {
                break;
            }
            status = wc::SUCCESS;
        }
    }

    /// The requester moves on to the next WQE's first packet.
    fn next_message(&mut self) {
        self.next_wqe = self.next_wqe.wrapping_add(1);
        self.wqe_pkt = 0;
    }
}
