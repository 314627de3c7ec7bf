// SPDX-License-Identifier: GPL-2.0
//! The requester: send-queue WQEs become request packets.  Each WQE is
//! read once from the ring into a kernel-private `Track` (its length, PSN
//! range and progress), so retransmission never depends on what user space
//! writes into the ring later.  RC keeps WQEs until the completer retires
//! them; UC and UD complete a WQE once its last packet is sent.

use kernel::alloc::KVVec;
use kernel::prelude::*;

use super::mem::{self, Data};
use super::packet::{bth, Built, Outbox};
use crate::abi::{self, SendWqe, Sge};
use crate::glue::net::IpRoute;
use crate::glue::{IbDevice, NetDevice};
use crate::psn::{self, Psn};
use crate::qp_state::{QpState, QpType};
use crate::roce_wire::{AtomicEth, Deth, Headers, Ieth, ImmDt, Reth};
use crate::transport_rules::{self as rules, MsgOp, Service};
use crate::verbs::ah::Av;
use crate::verbs::local_ops::{self, OnQp};
use crate::verbs::qp::{After, Qp, QpInner};

/// RC packets in flight beyond the oldest unacknowledged one.
const WINDOW: u32 = 256;
/// An RC request asks for an ACK at least this often inside long messages.
const ACK_EVERY: u32 = 32;
/// Maximum SGEs a send WQE may carry (device limit).
pub(crate) const MAX_SGE: usize = 32;

/// What the requester knows of one send WQE.
#[derive(Clone, Copy, Default)]
pub(crate) struct Track {
    pub(crate) wqe: SendWqe,
    pub(crate) len: u32,
    pub(crate) first_psn: u32,
    /// PSNs the WQE takes (0 for local operations).
    pub(crate) npkts: u32,
    /// READ: response packets received; atomics: 1 once answered.
    pub(crate) got: u32,
    /// Sent at least once (READ/atomic: counted in `rd_inflight`).
    pub(crate) sent: bool,
    /// A completion status to report when the WQE reaches the head.
    pub(crate) error: u8,
}

impl Track {
    pub(crate) fn op(&self) -> Option<MsgOp> {
        msg_op(self.wqe.opcode)
    }

    pub(crate) fn is_read_or_atomic(&self) -> bool {
        matches!(
            self.op(),
            Some(MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd)
        )
    }

    pub(crate) fn last_psn(&self) -> Psn {
        Psn::new(self.first_psn).offset(self.npkts.saturating_sub(1) as i32)
    }
}

pub(crate) fn msg_op(opcode: u32) -> Option<MsgOp> {
    Some(match opcode {
        abi::WR_SEND => MsgOp::Send,
        abi::WR_SEND_WITH_IMM => MsgOp::SendImm,
        abi::WR_SEND_WITH_INV => MsgOp::SendInv,
        abi::WR_RDMA_WRITE => MsgOp::Write,
        abi::WR_RDMA_WRITE_WITH_IMM => MsgOp::WriteImm,
        abi::WR_RDMA_READ => MsgOp::Read,
        abi::WR_ATOMIC_CMP_AND_SWP => MsgOp::CmpSwap,
        abi::WR_ATOMIC_FETCH_AND_ADD => MsgOp::FetchAdd,
        _ => return None,
    })
}

pub(crate) struct Requester {
    /// One per send-queue slot (kvmalloc: a deep queue needs megabytes).
    pub(crate) track: KVVec<Track>,
    /// The WQE being sent and the packet of it that goes next.
    pub(crate) next_wqe: u32,
    pub(crate) wqe_pkt: u32,
    /// WQEs up to here have a valid `Track`.
    pub(crate) fetched: u32,
    /// The PSN the next new WQE starts at.
    pub(crate) next_psn: Psn,
    /// The oldest PSN not yet acknowledged.
    pub(crate) una: Psn,
    /// READ and atomic WQEs sent and not completed.
    pub(crate) rd_inflight: u32,
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
    /// In SQD: the WQE the drain stops before (those before it had begun),
    /// and whether SQ_DRAINED was raised.
    pub(crate) drain_point: u32,
    pub(crate) drained: bool,
}

impl Requester {
    pub(crate) fn new(slots: u32) -> Result<Requester> {
        let mut track = KVVec::with_capacity(slots as usize, GFP_KERNEL)?;
        for _ in 0..slots {
            track.push(Track::default(), GFP_KERNEL)?;
        }
        Ok(Requester {
            track,
            next_wqe: 0,
            wqe_pkt: 0,
            fetched: 0,
            next_psn: Psn::new(0),
            una: Psn::new(0),
            rd_inflight: 0,
            retry_left: 0,
            rnr_left: 0,
            rnr_wait: false,
            timer_on: false,
            rewound_for_gap: None,
            rewound_for_rnr: None,
            drain_point: 0,
            drained: false,
        })
    }

    /// Start over at `sq_cons` (entering RTS).
    pub(crate) fn restart(&mut self, sq_cons: u32, sq_psn: u32, retry: u8, rnr: u8) {
        self.next_wqe = sq_cons;
        self.wqe_pkt = 0;
        self.fetched = sq_cons;
        self.next_psn = Psn::new(sq_psn);
        self.una = Psn::new(sq_psn);
        self.rd_inflight = 0;
        self.retry_left = retry;
        self.rnr_left = rnr;
        self.rnr_wait = false;
        self.timer_on = false;
        self.rewound_for_gap = None;
        self.rewound_for_rnr = None;
    }

    pub(crate) fn slot(&self, index: u32) -> usize {
        (index as usize) & (self.track.len() - 1)
    }

    pub(crate) fn get(&self, index: u32) -> Track {
        self.track[self.slot(index)]
    }

    pub(crate) fn set(&mut self, index: u32, t: Track) {
        let i = self.slot(index);
        self.track[i] = t;
    }
}

impl Qp {
    pub(crate) fn service(&self) -> Service {
        match self.ty {
            QpType::Rc => Service::Rc,
            QpType::Uc => Service::Uc,
            _ => Service::Ud,
        }
    }

    /// The path MTU in bytes (UD: the port's).
    pub(crate) fn mtu(&self, s: &QpInner, ndev: &NetDevice) -> u32 {
        let code = if self.service() == Service::Ud {
            crate::limits::ib_mtu_for(ndev.mtu(), crate::limits::ROCE_MAX_HEADER_BYTES)
                .unwrap_or(crate::limits::IB_MTU_256)
        } else {
            s.attrs.path_mtu
        };
        rules::mtu_bytes(code).unwrap_or(256)
    }

    /// The UDP source port of this QP's packets: fixed per QP so a flow
    /// stays on one path, different between QPs for ECMP entropy.
    pub(crate) fn sport(&self) -> u16 {
        let h = self.qpn().wrapping_mul(0x9E37_79B1);
        0xC000 | ((h >> 18) as u16 & 0x3fff)
    }

    /// The route of this QP's packets to address vector `av`.
    pub(crate) fn ip_route(&self, av: &Av) -> IpRoute {
        IpRoute {
            saddr: av.sgid,
            daddr: av.dgid,
            ipv4: av.ipv4,
            sport: self.sport(),
            tclass: av.traffic_class,
            ttl: if av.hop_limit == 0 { 64 } else { av.hop_limit },
            flow_label: av.flow_label,
        }
    }

    /// The route of a connected QP's packets.
    pub(crate) fn route(&self, s: &QpInner) -> Option<IpRoute> {
        s.attrs.av.as_ref().map(|av| self.ip_route(av))
    }

    /// Read a WQE's SGEs from its slot.
    pub(crate) fn wqe_sges<'a>(
        s: &QpInner,
        index: u32,
        w: &SendWqe,
        buf: &'a mut [Sge; MAX_SGE],
    ) -> Option<&'a [Sge]> {
        let n = w.num_sge as usize;
        if n > MAX_SGE {
            return None;
        }
        for (i, sge) in buf.iter_mut().enumerate().take(n) {
            *sge =
                s.sq.read::<Sge>(index, size_of::<SendWqe>() + i * size_of::<Sge>())?;
        }
        Some(&buf[..n])
    }

    /// Check a new WQE and work out its length and PSN count; `Err` is the
    /// completion status it fails with.
    fn prepare(&self, s: &QpInner, index: u32, w: &SendWqe, mtu: u32) -> Result<Track, u8> {
        let mut t = Track {
            wqe: *w,
            ..Track::default()
        };
        if local_ops::is_local(w.opcode) {
            return Ok(t);
        }
        let op = msg_op(w.opcode).ok_or(abi::WC_LOC_QP_OP_ERR)?;
        if rules::request_opcode(self.service(), op, 0, 1).is_none() {
            return Err(abi::WC_LOC_QP_OP_ERR);
        }
        let len = if w.send_flags & abi::SEND_INLINE != 0 {
            if w.inline_len > self.caps.max_inline {
                return Err(abi::WC_LOC_LEN_ERR);
            }
            u64::from(w.inline_len)
        } else {
            if w.num_sge > self.caps.max_send_sge {
                return Err(abi::WC_LOC_LEN_ERR);
            }
            let mut buf = [Sge::default(); MAX_SGE];
            let sges = Self::wqe_sges(s, index, w, &mut buf).ok_or(abi::WC_LOC_LEN_ERR)?;
            // READ and atomic results are written into the SGEs.
            let write = matches!(op, MsgOp::Read | MsgOp::CmpSwap | MsgOp::FetchAdd);
            mem::sgl_check(self.dev().verbs(), self.ib.pd as usize, sges, write)
                .ok_or(abi::WC_LOC_PROT_ERR)?
        };
        if len > u64::from(crate::limits::MAX_MSG_SIZE) {
            return Err(abi::WC_LOC_LEN_ERR);
        }
        let len = len as u32;
        let npkts = match op {
            MsgOp::CmpSwap | MsgOp::FetchAdd => {
                if len < 8 || w.remote_addr % 8 != 0 {
                    return Err(abi::WC_LOC_LEN_ERR);
                }
                1
            }
            _ => rules::packets(len, mtu),
        };
        if self.service() == Service::Ud && len > mtu {
            return Err(abi::WC_LOC_LEN_ERR);
        }
        t.len = len;
        t.npkts = npkts;
        Ok(t)
    }

    /// Build request packets from the send queue into `out` while the
    /// window, the outbox and the ordering rules allow.
    pub(crate) fn emit_requests(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        ndev: &NetDevice,
        out: &mut Outbox,
        after: &mut After,
    ) {
        // SQD: only the messages begun before it go on (IBTA 10.3.1.5).
        let sending = |s: &QpInner| {
            s.state == QpState::Rts
                || (s.state == QpState::Sqd
                    && (s.eng.req.next_wqe.wrapping_sub(s.eng.req.drain_point) as i32) < 0)
        };
        if !sending(s) || self.iwarp {
            return;
        }
        let mtu = self.mtu(s, ndev);
        let svc = self.service();
        let max_rd = core::cmp::max(u32::from(s.attrs.max_rd_atomic), 1);
        let mut sent_rc = false;
        loop {
            if !sending(s) || s.eng.req.rnr_wait {
                break;
            }
            let prod = s.sq.producer();
            let pending = prod.wrapping_sub(s.sq_cons);
            if pending > s.sq.slots() {
                // More WQEs than slots: the ring is corrupt (a local work
                // queue catastrophic error).
                self.enter(s, QpState::Err, after);
                after.fatal = true;
                break;
            }
            let r = &mut s.eng.req;
            if r.next_wqe.wrapping_sub(s.sq_cons) >= pending {
                break;
            }
            let index = r.next_wqe;
            if index == r.fetched {
                let Some(w) = s.sq.read::<SendWqe>(index, 0) else {
                    break;
                };
                let t = match self.prepare(s, index, &w, mtu) {
                    Ok(mut t) => {
                        t.first_psn = s.eng.req.next_psn.get();
                        s.eng.req.next_psn = s.eng.req.next_psn.offset(t.npkts as i32);
                        t
                    }
                    Err(status) => Track {
                        wqe: w,
                        error: status,
                        ..Track::default()
                    },
                };
                let r = &mut s.eng.req;
                r.set(index, t);
                r.fetched = r.fetched.wrapping_add(1);
            }
            let t = s.eng.req.get(index);
            if t.error != 0 || local_ops::is_local(t.wqe.opcode) {
                // Local operations and failed WQEs complete in order: wait
                // for everything before them to complete.
                if index != s.sq_cons {
                    break;
                }
                let status = if t.error != 0 {
                    t.error
                } else {
                    let on = OnQp {
                        pd: self.ib.pd as usize,
                        qpn: self.qpn(),
                    };
                    match local_ops::execute(dev.verbs(), &on, &t.wqe) {
                        Ok(()) => abi::WC_SUCCESS,
                        Err(st) => st,
                    }
                };
                let r = &mut s.eng.req;
                r.next_wqe = r.next_wqe.wrapping_add(1);
                r.wqe_pkt = 0;
                self.retire_head(s, &t, status, after);
                if status != abi::WC_SUCCESS {
                    self.enter(s, QpState::Err, after);
                }
                continue;
            }
            let r = &s.eng.req;
            if t.wqe.send_flags & abi::SEND_FENCE != 0 && !t.sent && r.rd_inflight > 0 {
                break;
            }
            if t.is_read_or_atomic() && !t.sent && r.rd_inflight >= max_rd {
                break;
            }
            let pkt = r.wqe_pkt;
            let psn = Psn::new(t.first_psn).offset(pkt as i32);
            if svc == Service::Rc && psn::diff(psn, r.una) >= WINDOW as i32 {
                break;
            }
            match self.build_request(s, dev, ndev, out, index, &t, pkt, mtu) {
                Ok(()) => {}
                Err(Built::Full) => break,
                Err(Built::NoMemory | Built::NoRoute) => {
                    // No memory for the packet: RC retransmits on its timer;
                    // UC and UD try again from the work item.  Either way
                    // this batch ends here.
                    if svc == Service::Rc {
                        self.ensure_timer(s);
                    } else {
                        self.queue_work(&s.eng);
                    }
                    break;
                }
                Err(Built::BadMemory) => {
                    // The memory went away after the WQE was checked: fail
                    // it when it reaches the head.
                    let mut t2 = t;
                    t2.error = abi::WC_LOC_PROT_ERR;
                    s.eng.req.set(index, t2);
                    continue;
                }
            }
            let r = &mut s.eng.req;
            let mut t2 = t;
            if !t.sent {
                t2.sent = true;
                if t.is_read_or_atomic() {
                    r.rd_inflight += 1;
                }
            }
            r.set(index, t2);
            let done = t.is_read_or_atomic() || pkt + 1 >= t.npkts;
            if done {
                r.next_wqe = r.next_wqe.wrapping_add(1);
                r.wqe_pkt = 0;
            } else {
                r.wqe_pkt += 1;
            }
            if svc == Service::Rc {
                sent_rc = true;
            } else if done {
                self.retire_head(s, &t2, abi::WC_SUCCESS, after);
            }
        }
        if sent_rc {
            self.rearm_timer(s);
        }
        self.check_drained(s, after);
    }

    /// Request packets just went out: the local ACK timeout counts from
    /// the last of them.  Counted from the first, a go-back-N resend of a
    /// whole window that takes longer to transmit than the timeout (a slow
    /// or loaded host, a debug kernel) would time out before any ACK could
    /// come back, again and again, and end in RETRY_EXC_ERR with the link
    /// fine.  (A timer pushed back like this still fires: the window bounds
    /// how long a requester sends without an ACK.)
    fn rearm_timer(&self, s: &mut QpInner) {
        if let Some(us) = rules::ack_timeout_us(s.attrs.timeout) {
            s.eng.req.timer_on = true;
            self.arm_timer(&s.eng, us);
        }
    }

    /// Start the retransmission timer if it is not running.
    pub(crate) fn ensure_timer(&self, s: &mut QpInner) {
        if !s.eng.req.timer_on {
            self.rearm_timer(s);
        }
    }

    /// Complete the WQE at the head of the send queue with `status`.
    pub(crate) fn retire_head(&self, s: &mut QpInner, t: &Track, status: u8, after: &mut After) {
        s.sq_cons = s.sq_cons.wrapping_add(1);
        s.sq.set_consumer(s.sq_cons);
        if status != abi::WC_SUCCESS || t.wqe.send_flags & abi::SEND_SIGNALED != 0 {
            let mut cqe = self.send_cqe(t.wqe.wr_id, t.wqe.opcode, status);
            cqe.byte_len = t.len;
            let (_, owed) = self.send_cq().push(&cqe, false);
            after.send_cq.merge(owed);
        }
    }

    /// Build packet `pkt` of WQE `index` (described by `t`).
    #[allow(clippy::too_many_arguments)]
    fn build_request(
        &self,
        s: &QpInner,
        dev: &IbDevice,
        ndev: &NetDevice,
        out: &mut Outbox,
        index: u32,
        t: &Track,
        pkt: u32,
        mtu: u32,
    ) -> Result<(), Built> {
        let svc = self.service();
        let w = &t.wqe;
        let op = t.op().ok_or(Built::BadMemory)?;
        let opcode = rules::request_opcode(svc, op, pkt, t.npkts).ok_or(Built::BadMemory)?;
        let layout = opcode.layout();
        let offset = pkt * mtu;
        let last = pkt + 1 >= t.npkts;
        let psn = Psn::new(t.first_psn).offset(pkt as i32);
        let (route, dest_qp) = if svc == Service::Ud {
            let av = dev.verbs().ah_av(w.ah_num).ok_or(Built::BadMemory)?;
            (self.ip_route(&av), w.remote_qpn)
        } else {
            (self.route(s).ok_or(Built::NoRoute)?, s.attrs.dest_qpn)
        };
        let carries_data = layout.payload;
        let payload_len = if carries_data {
            core::cmp::min(mtu, t.len - core::cmp::min(offset, t.len))
        } else {
            0
        };
        let mut hdr = Headers::new(bth(opcode, dest_qp, psn));
        hdr.bth.solicited = last && w.send_flags & abi::SEND_SOLICITED != 0 && carries_data;
        hdr.bth.ack_req = svc == Service::Rc && (last || (pkt + 1) % ACK_EVERY == 0);
        use crate::roce_wire::Ext;
        if layout.has(Ext::Deth) {
            let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
                s.attrs.qkey
            } else {
                w.remote_qkey
            };
            hdr.deth = Some(Deth {
                qkey,
                src_qp: self.qpn(),
            });
        }
        if layout.has(Ext::Reth) {
            // A READ retransmitted from the middle asks for the rest.
            hdr.reth = Some(Reth {
                va: w.remote_addr.wrapping_add(u64::from(offset)),
                rkey: w.rkey,
                dma_len: t.len - core::cmp::min(offset, t.len),
            });
        }
        if layout.has(Ext::AtomicEth) {
            let (swap_add, compare) = if op == MsgOp::CmpSwap {
                (w.swap, w.compare_add)
            } else {
                (w.compare_add, 0)
            };
            hdr.atomic_eth = Some(AtomicEth {
                va: w.remote_addr,
                rkey: w.rkey,
                swap_add,
                compare,
            });
        }
        if layout.has(Ext::ImmDt) {
            hdr.imm_dt = Some(ImmDt {
                data: u32::from_be(w.ex),
            });
        }
        if layout.has(Ext::Ieth) {
            hdr.ieth = Some(Ieth { rkey: w.ex });
        }
        let inline = w.send_flags & abi::SEND_INLINE != 0;
        let pd = self.ib.pd as usize;
        out.build(dev, ndev, &route, &hdr, payload_len as usize, |buf| {
            if buf.is_empty() {
                return true;
            }
            if inline {
                s.sq.read_bytes(index, size_of::<SendWqe>() + offset as usize, buf)
                    .is_some()
            } else {
                let mut sb = [Sge::default(); MAX_SGE];
                let Some(sges) = Self::wqe_sges(s, index, w, &mut sb) else {
                    return false;
                };
                mem::sgl_copy(dev.verbs(), pd, sges, u64::from(offset), Data::Load(buf)).is_ok()
            }
        })
    }
}
