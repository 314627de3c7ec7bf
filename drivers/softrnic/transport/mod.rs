// SPDX-License-Identifier: GPL-2.0
//! The wire transports below the WQE executor (`engine/`), one per link
//! type: RoCEv2 over UDP (`roce/`) and iWARP over TCP (`iwarp/`).  A QP's
//! transport is its device's, fixed at creation; the executor's entry
//! points (new work, the work item, the timer) dispatch on it here and
//! nowhere else.

pub(crate) mod iwarp;
pub(crate) mod roce;

pub(crate) use crate::device::Transport;
use crate::verbs::qp::Qp;

impl Qp {
    /// New work was posted (or the state changed): have it sent (`here`:
    /// from a context that may transmit; else only from the work item).
    pub(crate) fn doorbell(&self, here: bool) {
        match self.transport {
            Transport::Roce if here => self.kick(),
            Transport::Roce => self.schedule(),
            Transport::Iwarp => self.iwarp_doorbell(here),
        }
    }

    /// Build and send what the QP has to send (see `Qp::kick`).
    pub(crate) fn pump(&self, work: bool) {
        match self.transport {
            Transport::Roce => self.roce_pump(work),
            Transport::Iwarp => self.iwarp_pump(),
        }
    }

    /// The QP's timer fired.
    pub(crate) fn timeout(&self) {
        match self.transport {
            Transport::Roce => self.roce_timeout(),
            Transport::Iwarp => self.iwarp_timeout(),
        }
    }
}
