// SPDX-License-Identifier: GPL-2.0
//! The kernel half of the RoCEv2 requester: the machine
//! (`core/roce/requester.rs`) decides what goes out and when; this gives it
//! the send queue (`engine/sq.rs`) and builds the request packets it plans
//! (BTH and extension headers from the WQE, payload straight from memory).

use super::packet::{Outbox, PKEY};
use crate::abi::SendWqe;
use crate::engine::sq::{SendQueue, Track};
use crate::glue::{IbDevice, NetDevice};
use crate::qp_state::QpState;
use crate::roce::requester::{Prepared, RequestPacket, RequesterIo, RequesterParams, WqeFields};
use crate::roce::{Count, SendFail};
use crate::roce_wire::Payload;
use crate::transport_rules::{MsgOp, Service};
use crate::verbs::qp::{After, Qp, QpAttrs, QpInner};

/// The requester's parameters from the QP's state and attributes.
pub(crate) fn params(svc: Service, state: QpState, a: &QpAttrs, mtu: u32) -> RequesterParams {
    RequesterParams {
        svc,
        mtu,
        max_rd: core::cmp::max(u32::from(a.max_rd_atomic), 1),
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        rts: state == QpState::Rts,
        sqd: state == QpState::Sqd,
    }
}

/// The requester's I/O: the send queue, and the outbox packets go to.
pub(crate) struct ReqIo<'a> {
    pub(crate) q: SendQueue<'a>,
    pub(crate) attrs: &'a QpAttrs,
    /// Where packets go (`None`: this step sends nothing).
    pub(crate) out: Option<(&'a NetDevice, &'a mut Outbox)>,
    pub(crate) dying: bool,
}

impl<'a> ReqIo<'a> {
    /// The I/O over the parts of `s` the requester machine does not own.
    pub(crate) fn new(
        qp: &'a Qp,
        dev: &'a IbDevice,
        s: &'a mut QpInner,
        after: &'a mut After,
        out: Option<(&'a NetDevice, &'a mut Outbox)>,
    ) -> (ReqIo<'a>, &'a mut crate::engine::Requester) {
        let QpInner {
            sq,
            sq_cons,
            attrs,
            eng,
            ..
        } = s;
        let io = ReqIo {
            q: SendQueue {
                qp,
                dev,
                sq,
                sq_cons,
                after,
            },
            attrs,
            out,
            dying: eng.dying,
        };
        (io, &mut eng.req)
    }
}

impl RequesterIo<SendWqe> for ReqIo<'_> {
    fn producer(&mut self) -> u32 {
        self.q.producer()
    }

    fn slots(&self) -> u32 {
        self.q.slots()
    }

    fn prepare(&mut self, index: u32) -> Option<Prepared<SendWqe>> {
        self.q.prepare(index)
    }

    fn run_local(&mut self, wqe: &SendWqe) -> u8 {
        self.q.run_local(wqe)
    }

    fn send(&mut self, p: &RequestPacket<'_, SendWqe>) -> Result<(), SendFail> {
        let Some((ndev, out)) = self.out.as_mut() else {
            return Err(SendFail::Full);
        };
        build_request(&self.q, self.attrs, ndev, out, p)
    }

    fn complete(&mut self, index: u32, t: &Track, status: u8) {
        self.q.complete(index, t, status)
    }

    fn store(&mut self, index: u32, t: &Track, offset: u32, data: Payload<'_>) -> bool {
        data.placed(u64::from(offset))
            .all(|(at, piece)| self.q.store(index, t, at as u32, piece))
    }

    fn arm_timer(&mut self, usecs: u64) {
        self.q.qp.arm_timer(self.dying, usecs);
    }

    fn stop_timer(&mut self) {
        self.q.qp.stop_timer();
    }

    fn retry_later(&mut self) {
        self.q.qp.queue_work(self.dying);
    }

    fn count(&mut self, c: Count) {
        self.q.qp.count(crate::engine::Counter::from(c));
    }
}

impl Qp {
    /// Run the requester: request packets from the send queue into `out`.
    pub(crate) fn emit_requests(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        ndev: &NetDevice,
        out: &mut Outbox,
        after: &mut After,
    ) {
        if !matches!(s.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let p = params(self.service(), s.state, &s.attrs, self.mtu(s, ndev));
        let (mut io, req) = ReqIo::new(self, dev, s, after, Some((ndev, out)));
        let o = req.emit(&p, &mut io);
        self.outcome(s, o, after);
    }
}

/// Build the request packet `p` plans.
fn build_request(
    q: &SendQueue<'_>,
    attrs: &QpAttrs,
    ndev: &NetDevice,
    out: &mut Outbox,
    p: &RequestPacket<'_, SendWqe>,
) -> Result<(), SendFail> {
    let (qp, dev) = (q.qp, q.dev);
    let w = &p.track.wqe;
    let mut f = WqeFields {
        src_qp: qp.qpn(),
        remote_addr: w.remote_addr,
        rkey: w.rkey,
        imm: u32::from_be(w.ex),
        inv_rkey: w.ex,
        ..WqeFields::default()
    };
    (f.swap_add, f.compare) = if p.op == MsgOp::CmpSwap {
        (w.swap, w.compare_add)
    } else {
        (w.compare_add, 0)
    };
    let route = if qp.service() == Service::Ud {
        let av = dev.verbs().ah_av(w.ah_num).ok_or(SendFail::BadMemory)?;
        f.dest_qp = w.remote_qpn;
        // A Q_Key with its high bit set means the QP's own.
        f.qkey = if w.remote_qkey & 0x8000_0000 != 0 {
            attrs.qkey
        } else {
            w.remote_qkey
        };
        qp.ip_route(&av)
    } else {
        f.dest_qp = attrs.dest_qpn;
        qp.ip_route(attrs.av.as_ref().ok_or(SendFail::NoRoute)?)
    };
    let hdr = p.headers(PKEY, &f);
    out.build(dev, ndev, &route, &hdr, p.payload as usize, |buf| {
        q.load(p.index, w, p.offset, buf)
    })
}
