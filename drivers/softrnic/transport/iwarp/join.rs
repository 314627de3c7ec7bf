// SPDX-License-Identifier: GPL-2.0
//! QPs joined by modify_qp on softrnic_iwarp (the rules: `core/iwarp/join.rs`).
//! A QP moved to RTS with a destination GID and QP number gets its stream
//! from the device: the end with the lower (address, QP number) connects
//! to the other device's join port (`JOIN_PORT`, at its IPv4 address) and
//! runs MPA with a join request as private data; the other end's port
//! keeps the request until that QP, in RTS with the matching destination,
//! takes it (`cm.rs`: `connect_join`, `Cep::join_answer`).  softrnic to
//! softrnic only: siw has no join port.

use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};
use kernel::time::{Instant, Monotonic};

use super::cm::{self, Listener};
use crate::engine::Counter;
use crate::glue::tcp::SockAddr;
use crate::glue::IbDevice;
use crate::iwarp::join::{self, JoinRequest, Peer};
use crate::qp_state::QpState;
use crate::verbs::qp::{After, IwPath, Qp, QpAttrs};

/// The TCP port a softrnic_iwarp device takes join requests on (RoCEv2's
/// number: UDP 4791 is RoCE's, TCP 4791 nobody's).
pub(crate) const JOIN_PORT: u16 = 4791;

/// How long the two ends of a join wait for each other, in milliseconds
/// (`join_timeout` seconds): the peer's modify_qp to RTS may come any time
/// after ours (IB QPs wait for each other indefinitely), so a join is not
/// held to `mpa_timeout`.  A join request naming no QP of the device gets
/// `mpa_timeout` (`Cep::join_request`).
pub(crate) fn join_timeout_ms() -> u32 {
    crate::module_parameters::join_timeout
        .value()
        .clamp(1, 3600)
        * 1000
}

/// A device's join port: listening from the first join on, at each
/// address a join went from (the address of the QP's source GID), until
/// the device goes.
#[pin_data]
pub(crate) struct JoinPort {
    #[pin]
    listeners: Mutex<KVec<([u8; 16], Arc<Listener>)>>,
}

impl JoinPort {
    pub(crate) fn new() -> Result<Arc<JoinPort>> {
        Arc::pin_init(
            pin_init!(JoinPort {
                listeners <- new_mutex!(KVec::new(), "softrnic_join_port"),
            }),
            GFP_KERNEL,
        )
    }

    /// Listen at `addr` (a GID) too, unless the port already does
    /// (process context).  At most one listener per GID of the port: past
    /// that, the oldest goes (its address is likely gone).
    fn ensure(&self, dev: &IbDevice, addr: &[u8; 16]) -> Result {
        let mut l = self.listeners.lock();
        if l.iter().any(|(at, _)| at == addr) {
            return Ok(());
        }
        let new = cm::listen_join(dev, &SockAddr::from_gid(addr, JOIN_PORT))?;
        if l.len() >= crate::limits::IWARP_GID_TABLE_LEN as usize {
            l.remove(0)?.1.stop();
        }
        l.push((*addr, new), GFP_KERNEL)?;
        Ok(())
    }

    /// A QP now waits for its join request: the requests waiting look
    /// again.
    fn offer(&self) {
        for (_, l) in self.listeners.lock().iter() {
            l.offer();
        }
    }

    /// The device goes: stop listening, and reset the requests waiting.
    pub(crate) fn stop(&self) {
        let all = core::mem::take(&mut *self.listeners.lock());
        for (_, l) in all.iter() {
            l.stop();
        }
    }
}

/// A join, planned before the QP enters RTS.
pub(crate) struct Plan {
    local: [u8; 16],
    remote: [u8; 16],
    initiator: bool,
    req: JoinRequest,
}

/// The join a modify_qp starts (`to_rts`: it moves the QP to RTS, with
/// `dest` and `dgid` if it gives them), planned before the QP's lock is
/// taken: for an iWARP QP with a destination GID, not in RTS, connected or
/// joining already.  `None`: no join.
pub(crate) fn plan(
    dev: &IbDevice,
    qp: &Qp,
    to_rts: bool,
    dest: Option<u32>,
    path: Option<IwPath>,
) -> Result<Option<Plan>> {
    if !qp.is_iwarp() || !to_rts {
        return Ok(None);
    }
    let (path, dest, idle) = {
        let s = qp.inner.lock();
        let idle = s.state != QpState::Rts && s.iw.is_none() && s.join.is_none();
        (
            path.or(s.attrs.iw_path),
            dest.unwrap_or(s.attrs.dest_qpn),
            idle,
        )
    };
    match path {
        Some(p) if idle => prepare(dev, qp.qpn(), dest, &p).map(Some),
        _ => Ok(None),
    }
}

/// Plan the join of QP `qpn` to QP `dest_qpn` along `path` (process
/// context, no QP lock held): the two addresses, which end connects, and
/// the device's join port listening at ours.  Ours is the address of the
/// source GID (`query_gid`: index 1 on), or the netdev's primary IPv4
/// address for the MAC's GID (index 0).  EADDRNOTAVAIL when there is no
/// such address; EHOSTUNREACH for a MAC GID the ARP table does not know;
/// EAFNOSUPPORT for an IPv6 peer (not yet); EINVAL for a QP joined to
/// itself.
fn prepare(dev: &IbDevice, qpn: u32, dest_qpn: u32, path: &IwPath) -> Result<Plan> {
    let ndev = dev.port_netdev().ok_or(ENODEV)?;
    let ours = match path.sgid_index {
        0 => ndev.ipv4(),
        n => ndev.ipv4_nth(u32::from(n) - 1),
    };
    let local = join::v4_gid(ours.ok_or(EADDRNOTAVAIL)?);
    let remote = match join::peer_of(&path.dgid) {
        // This port's own GID: the peer QP is on this device.
        Peer::Mac(mac) if mac == ndev.mac() => local,
        Peer::Mac(mac) => join::v4_gid(ndev.neigh_ipv4(&mac).ok_or(EHOSTUNREACH)?),
        Peer::Ip(g) if crate::verbs::ah::is_v4_mapped(&g) => g,
        Peer::Ip(_) => return Err(EAFNOSUPPORT),
    };
    let initiator = join::initiates(&local, qpn, &remote, dest_qpn).ok_or(EINVAL)?;
    dev.driver()
        .join
        .as_ref()
        .ok_or(EOPNOTSUPP)?
        .ensure(dev, &local)?;
    Ok(Plan {
        local,
        remote,
        initiator,
        req: JoinRequest {
            dest_qpn,
            src_qpn: qpn,
        },
    })
}

/// The QP entered RTS with `plan` recorded (`Qp::join_waiting`): connect,
/// or let waiting requests look at it.  When no connection can be tried
/// (no socket), the QP, which would wait in RTS for ever, goes to ERR.
pub(crate) fn start(dev: &IbDevice, qp: &Qp, plan: &Plan) -> Result {
    start_join(dev, qp, plan).inspect_err(|_| {
        let mut after = After::default();
        let join = {
            let mut s = qp.inner.lock();
            qp.enter(&mut s, QpState::Err, &mut after);
            s.join.take()
        };
        qp.after(after);
        if let Some(j) = join {
            j.end();
        }
    })
}

fn start_join(dev: &IbDevice, qp: &Qp, plan: &Plan) -> Result {
    if plan.initiator {
        let (ird, ord) = ird_ord(&qp.inner.lock().attrs);
        let cep = cm::connect_join(
            dev,
            plan.req,
            ird,
            ord,
            SockAddr::from_gid(&plan.local, 0),
            SockAddr::from_gid(&plan.remote, JOIN_PORT),
        )?;
        // Kept to cancel it should the QP leave RTS or go first.
        let late = {
            let mut s = qp.inner.lock();
            match s.join.as_mut() {
                Some(j) => {
                    j.cep = Some(cep);
                    None
                }
                // Bound already (`cancel_join` leaves it), or the join
                // ended meanwhile.
                None => Some(cep),
            }
        };
        if let Some(c) = late {
            c.cancel_join();
        }
    } else {
        // The waiting end's deadline (`Qp::join_timer`); the connecting
        // end's is its connection's.
        let dying = qp.inner.lock().eng.dying;
        qp.arm_timer(dying, u64::from(join_timeout_ms()) * 1000);
        if let Some(port) = dev.driver().join.as_ref() {
            port.offer();
        }
    }
    Ok(())
}

/// A QP's join under way (`QpInner::join`).
pub(crate) struct JoinWait {
    /// The peer's address (a GID), which its connection must come from.
    remote: [u8; 16],
    initiator: bool,
    /// The connecting end's connection, until it is bound.
    cep: Option<Arc<cm::Cep>>,
    /// When the waiting end gives up.
    deadline: Instant<Monotonic>,
}

impl JoinWait {
    pub(crate) fn new(plan: &Plan) -> JoinWait {
        JoinWait {
            remote: plan.remote,
            initiator: plan.initiator,
            cep: None,
            deadline: cm::deadline_in(join_timeout_ms()),
        }
    }

    /// The waiting end's deadline has passed.
    fn overdue(&self) -> bool {
        !self.initiator && cm::ms_until(self.deadline) <= 0
    }

    /// The QP left RTS or goes (taken off it; no QP lock held): a
    /// connection not yet bound goes too.
    pub(crate) fn end(self) {
        if let Some(c) = self.cep {
            c.cancel_join();
        }
    }
}

/// The IRD and ORD a join offers: the QP's max_dest_rd_atomic and
/// max_rd_atomic (at least 1 each, as the IB defaults).
fn ird_ord(a: &QpAttrs) -> (u32, u32) {
    (
        u32::from(a.max_dest_rd_atomic.max(1)),
        u32::from(a.max_rd_atomic.max(1)),
    )
}

impl Qp {
    /// The QP's timer fired (`Qp::iwarp_timeout`): a QP that has waited
    /// `join_timeout` for its peer's connection gives up, as the connecting
    /// end does at its connection's deadline: ERR, its work requests flush.
    pub(crate) fn join_timer(&self) {
        let mut after = After::default();
        let ended = {
            let mut s = self.inner.lock();
            if s.iw.is_some() || !s.join.as_ref().is_some_and(JoinWait::overdue) {
                return;
            }
            self.enter(&mut s, QpState::Err, &mut after);
            s.join.take()
        };
        self.after(after);
        self.dev().counters().bump(Counter::IwMpaTimeouts);
        if let Some(j) = ended {
            j.end();
        }
    }

    /// Whether this QP waits for QP `src_qpn`'s join request from
    /// `remote`: in RTS, joining without connecting, destination
    /// `src_qpn`, no stream yet.  Its IRD and ORD if so.
    pub(crate) fn join_waiting(&self, src_qpn: u32, remote: &[u8; 16]) -> Option<(u32, u32)> {
        let s = self.inner.lock();
        let waits = self.is_iwarp()
            && s.state == QpState::Rts
            && s.iw.is_none()
            && s.attrs.dest_qpn == src_qpn
            && s.join
                .as_ref()
                .is_some_and(|j| !j.initiator && j.remote == *remote);
        waits.then(|| ird_ord(&s.attrs))
    }
}
