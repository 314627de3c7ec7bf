// SPDX-License-Identifier: GPL-2.0
//! The kernel half of iWARP (MPA/DDP/RDMAP over kernel TCP) goes here.
//! Until it exists an iWARP QP runs only its local operations (bind,
//! invalidate, fast-register) at the head of the send queue, in RTS, through
//! the WQE executor (`engine/sq.rs`); it stops at the first operation that
//! needs the wire.  A failed one completes in error and moves the QP to
//! ERR, which flushes the rest.

pub(crate) mod cm;
pub(crate) mod join;
pub(crate) mod stream;

use crate::abi::SendWqe;
use crate::engine::sq::{SendQueue, Track};
use crate::qp_state::QpState;
use crate::verbs::local_ops;
use crate::verbs::qp::{After, Qp, QpInner};

impl Qp {
    /// New work (`here`: a user's doorbell, a system call the thread pays
    /// for anyway: send from it, as siw does, rather than wake the work
    /// item).  `ahead`: the posting thread's to send but for
    /// `Qp::posts_ahead` (see `Qp::defer_doorbell`).
    pub(crate) fn iwarp_doorbell(&self, here: bool, ahead: bool) {
        // Connected: the stream's sender takes it.
        let s = self.inner.lock();
        if s.iw.is_some() {
            if here {
                drop(s);
                self.iwarp_pump(crate::transport::Pumper::Doorbell);
            } else {
                self.defer_doorbell(&s, ahead);
            }
            return;
        }
        drop(s);
        let dev = self.dev();
        let mut after = After::default();
        {
            let mut s = self.inner.lock();
            // One look at the producer: a user QP's is user memory, and the
            // loop must end whatever user space writes meanwhile.
            let pending = s.sq.producer().wrapping_sub(s.sq_cons);
            if pending > s.sq.slots() && s.state == QpState::Rts {
                // More WQEs than slots: the ring is corrupt (a local work
                // queue catastrophic error).
                self.enter(&mut s, QpState::Err, &mut after);
                after.fatal = true;
            }
            for _ in 0..pending {
                if s.state != QpState::Rts {
                    break;
                }
                let Some(w) = s.sq.read::<SendWqe>(s.sq_cons, 0) else {
                    break;
                };
                if !local_ops::is_local(w.opcode) {
                    break;
                }
                let QpInner { sq, sq_cons, .. } = &mut *s;
                let index = *sq_cons;
                let mut q = SendQueue {
                    qp: self,
                    dev: &dev,
                    sq,
                    sq_cons,
                    after: &mut after,
                };
                let status = q.run_local(&w);
                let t = Track {
                    wqe: w,
                    ..Track::default()
                };
                q.complete(index, &t, status);
                if status != crate::abi::WC_SUCCESS {
                    self.enter(&mut s, QpState::Err, &mut after);
                }
            }
        }
        self.after(after);
    }
}
