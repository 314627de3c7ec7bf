// SPDX-License-Identifier: GPL-2.0
//! The kernel half of the RoCEv2 completer: responses (ACKs, NAKs, read
//! responses, atomic ACKs) and the QP's timer go to the requester machine
//! (`core/roce/completer.rs`), which retires WQEs, rewinds and arms timers
//! through the requester's I/O (`requester.rs`).

use super::requester::{params, ReqIo};
use crate::glue::IbDevice;
use crate::qp_state::QpState;
use crate::roce_wire::Packet;
use crate::verbs::qp::{After, Qp, QpInner};

impl Qp {
    /// A response packet for this QP (the QP lock held).
    pub(crate) fn on_response(
        &self,
        s: &mut QpInner,
        dev: &IbDevice,
        pkt: &Packet<'_>,
        mtu: u32,
        after: &mut After,
    ) {
        let p = params(self.service(), s.state, &s.attrs, mtu);
        let (mut io, req) = ReqIo::new(self, dev, s, after, None);
        let o = req.on_response(&p, &mut io, pkt);
        self.outcome(s, o, after);
    }

    /// The QP's timer fired: the RNR wait is over, or no ACK came in time.
    pub(crate) fn roce_timeout(&self) {
        let mut after = After::default();
        {
            let mut s = self.inner.lock();
            s.eng.req.timer_on = false;
            if s.eng.dying || !matches!(s.state, QpState::Rts | QpState::Sqd) {
                return;
            }
            let dev = self.dev();
            let (mut io, req) = ReqIo::new(self, &dev, &mut s, &mut after, None);
            let o = req.on_timer(&mut io);
            self.queue_pump(&s.eng);
            self.outcome(&mut s, o, &mut after);
        }
        self.after(after);
    }
}
