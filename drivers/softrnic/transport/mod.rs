// SPDX-License-Identifier: GPL-2.0
//! The wire transports below the WQE executor (`engine/`), one per link
//! type: RoCEv2 over UDP (`roce/`) and iWARP over TCP (`iwarp/`).  A QP's
//! transport is its device's, fixed at creation; the executor's entry
//! points (new work, the work item, the timer) dispatch on it here and
//! nowhere else.

pub(crate) mod iwarp;
pub(crate) mod roce;

pub(crate) use crate::device::Transport;
use crate::verbs::qp::{Qp, QpInner};

/// Who pumps a QP, which sets how much it may send before handing the rest
/// to the work item.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pumper {
    /// The QP's work item: as much as the window allows.
    Work,
    /// A received packet (softirq): a little.
    Packet,
    /// The thread that rang the doorbell: the first packets only.  The
    /// posting thread pays for what it sends (and, over a local link, for
    /// the receiver's processing, which runs in its softirq): four batches
    /// of 16 made a post of 64 KiB cost 5 to 10 ms under TCG, its poll loop
    /// waiting meanwhile.
    Doorbell,
}

/// A user QP's send CQ holding this many completions its application has
/// not polled: see `Qp::posts_ahead`.  (perftest polls 16 at a time; a
/// latency test holds one or two.)
const POSTS_AHEAD_UNPOLLED: u32 = 16;

impl Qp {
    /// New work was posted (or the state changed): have it sent (`here`:
    /// from a context that may transmit; else from the work item).
    pub(crate) fn doorbell(&self, here: bool) {
        let ahead = here && self.posts_ahead();
        let here = here && !ahead;
        match self.transport {
            Transport::Roce if here => self.kick(Pumper::Doorbell),
            Transport::Roce => {
                // A running pump takes the new work (as a kick's does)
                // rather than a second run of the work item after it.
                let mut s = self.inner.lock();
                if self.join_pump(&mut s, self.doorbell_by()) {
                    return;
                }
                // Kernel consumers post from any context, with their own
                // locks held: the work item sends.  Pumping here instead,
                // for a QP whose packets stay in this host, cost NVMe over
                // Fabrics and iSER in loopback 12 to 13 % at depth 32 (the
                // posting thread builds every command's packets itself, a
                // serial chain) and little at depth 1 (2026-11-28).
                self.defer_doorbell(&s, ahead);
            }
            Transport::Iwarp => self.iwarp_doorbell(here, ahead),
        }
    }

    /// A doorbell the work item answers (the caller holds the QP lock):
    /// a user's posts from now on need no doorbell, the work item looking
    /// at the producer.  `ahead`: it was the posting thread's to send but
    /// for `posts_ahead`; it is counted, and its work item is the normal-
    /// priority one: the high-priority item preempts the posting thread
    /// on its own CPU (the home of half the QPs with two CPUs), which then
    /// waits for every message it posts there.  With 4096 QPs perftest's
    /// first pass outlasted its run, completing nothing in its window on
    /// RoCE (iWARP: in one run of two); at normal priority every run
    /// completed: RoCE 15 and 19 MiB/s, iWARP 14 and 12 (rxe 6.5 and 18),
    /// and RoCE's 1024 QPs 16 and 21 went to 23 and 28 (2026-11-29).
    pub(crate) fn defer_doorbell(&self, s: &QpInner, ahead: bool) {
        if self.user {
            self.doorbell_heard(s);
        }
        if ahead {
            self.dev()
                .counters()
                .bump(crate::engine::Counter::DoorbellsDeferred);
            self.queue_bulk_pump(&s.eng);
        } else {
            self.queue_pump(&s.eng);
        }
    }

    /// A user's doorbell while completions pile up in the QP's send CQ:
    /// its application posts ahead of its polling (one thread posting to
    /// many QPs in turn, as perftest does with 1024 of them), so it waits
    /// for no single message, and the post returns at once, the work item
    /// sending.  Sending from the posting thread made each post cost the
    /// message's whole transmission and, over a local link, the peer's
    /// receive (0.6 ms under TCG): perftest's pass over 4096 QPs outlasted
    /// its run, and 1024 QPs ran at a tenth of rxe's rate, whose posts only
    /// queue work.  A latency-bound application polls each completion
    /// before it posts again and keeps the posting thread's send.  (The
    /// CQ's lock is taken once per doorbell, a system call already.)
    fn posts_ahead(&self) -> bool {
        self.user && self.send_cq().unpolled() >= POSTS_AHEAD_UNPOLLED
    }

    /// Who a doorbell that does not pump counts as, for `join_pump`.
    fn doorbell_by(&self) -> Pumper {
        if self.user {
            Pumper::Doorbell
        } else {
            Pumper::Work
        }
    }

    /// Build and send what the QP has to send (see `Qp::kick`).
    pub(crate) fn pump(&self, by: Pumper) {
        match self.transport {
            Transport::Roce => self.roce_pump(by),
            Transport::Iwarp => self.iwarp_pump(by),
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
