// SPDX-License-Identifier: GPL-2.0
//! iWARP connection management over kernel TCP: listeners, and connection
//! endpoints that run MPA connection setup (RFC 5044, RFC 6581 IRD/ORD;
//! the frames and rules are `core/iwarp/mpa.rs`) and then carry the QP's
//! stream, raising iw_cm's events on the way (glue/iw_ops.rs).
//!
//! Passive side: the listener accepts a TCP connection (its work item),
//! the endpoint reads the MPA request (socket callback) and raises
//! CONNECT_REQUEST; `accept` binds the QP, moves it to RTS, sends the reply
//! and raises ESTABLISHED, `reject` sends a reply with R set and closes.
//! Active side: `connect` starts the TCP connection and returns (as a
//! hardware RNIC does: rdma_connect does not wait for the network); once it
//! is up the endpoint's work item sends the request, and the reply (socket
//! callback) binds the QP and raises CONNECT_REPLY.  A connection that
//! fails (refused, unreachable) raises CONNECT_REPLY with its error.  A
//! connection that ends (the peer closed or reset it, or the consumer
//! moved the QP to SQD or ERR, or destroyed it) raises DISCONNECT and
//! CLOSE as iw_cm expects and lets the socket go.

use kernel::new_mutex;
use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow, Mutex, SpinLockIrq};
use kernel::time::{Delta, Instant, Monotonic};

use super::join::join_timeout_ms;
use crate::engine::Counter;
use crate::glue::iw_ops::{CmEvent, CmEventKind, CmId, ConnParam};
use crate::glue::tcp::{SockAddr, Tcp, TcpEvent, TcpHandler, TcpRef};
use crate::glue::txbuf::TxBuf;
use crate::glue::{HeldIbDevice, IbDevice};
use crate::iwarp::join::JoinRequest;
use crate::iwarp::mpa::{self, CrcPolicy, FrameReader, Kind, Need, Negotiated, Policy};
use crate::qp_state::QpState;
use crate::verbs::qp::After;

/// How softrnic sets up a connection to `remote`: revision 2 with the
/// IRD/ORD words (siw's default too), CRC as the `mpa_crc` module parameter
/// says (by default asked for, as RFC 5044 wants; a responder that asks
/// gets it from a peer that did not, as the rules allow), peer-to-peer mode
/// (RFC 6581) asked for as the `mpa_rtr` parameter says and granted to a
/// peer that asks, RFC 7306 offered and taken (only a softrnic peer has
/// it).
///
/// A connection to an address of this host (an NVMe-oF or NFS target and
/// its host on one device) never meets a wire: TCP runs it over the
/// loopback device, which does not even checksum.  There "asked for"
/// becomes "used if the peer asks", as RoCE's own loopback drops its ICRC;
/// the CRC was a second pass over every byte on each side.  `mpa_crc=2`
/// still requires it.
fn policy(dev: &IbDevice, remote: &SockAddr) -> Policy {
    let l = dev.limits();
    let local = || dev.port_netdev().is_some_and(|nd| remote.is_local(&nd));
    let crc = match crate::module_parameters::mpa_crc.value() {
        0 => CrcPolicy::Off,
        1 if local() => CrcPolicy::Off,
        1 => CrcPolicy::On,
        _ => CrcPolicy::Required,
    };
    Policy {
        crc,
        rev: 2,
        p2p: crate::module_parameters::mpa_rtr.value() != 0,
        max_ird: l.max_qp_rd_atom.min(u32::from(mpa::MAX_IRD_ORD)) as u16,
        max_ord: l.max_qp_init_rd_atom.min(u32::from(mpa::MAX_IRD_ORD)) as u16,
        ext: true,
    }
}

/// How long a connection waits for the peer's MPA request (passive) or
/// reply (active), in milliseconds: then it is reset, and an active one
/// reports ETIMEDOUT (siw waits 10 s for each).
fn mpa_timeout_ms() -> u32 {
    crate::module_parameters::mpa_timeout.value().clamp(1, 300) * 1000
}

/// The moment `ms` milliseconds from now.
pub(crate) fn deadline_in(ms: u32) -> Instant<Monotonic> {
    Instant::now() + Delta::from_millis(i64::from(ms))
}

/// Milliseconds from now until `d` (not positive once it has passed).
pub(crate) fn ms_until(d: Instant<Monotonic>) -> i64 {
    (d - Instant::now()).as_millis()
}

/// Start the MPA setup's deadline: the socket's work item runs at it.
/// The work item also runs for other reasons (a connect's progress, two
/// of which may queue it twice), so the deadline is kept to tell.
fn arm_deadline(s: &mut CepInner, tcp: &Tcp) {
    let ms = mpa_timeout_ms();
    s.deadline = Some(deadline_in(ms));
    tcp.defer_after(ms);
}

/// The most private data softrnic sends in an MPA frame (siw's and the
/// iw_cm limit: a peer such as siw drops a connection with more).
pub(crate) const MAX_PRIVATE_SENT: usize = 256 - mpa::IRD_ORD_LEN;

fn clamp16(v: u32) -> u16 {
    v.min(u32::from(mpa::MAX_IRD_ORD)) as u16
}

/// A listening endpoint: its socket, and the connections it accepted
/// whose request has not been handed to iw_cm yet (or, on a device's join
/// port, not yet answered).
#[pin_data]
pub(crate) struct Listener {
    dev: HeldIbDevice,
    /// iw_cm's listening id; `None` on a device's join port (see
    /// `core/iwarp/join.rs`), whose requests go to QPs, not to iw_cm.
    id: Option<CmId>,
    #[pin]
    sock: Mutex<Option<Tcp>>,
    #[pin]
    pending: SpinLockIrq<Pending>,
}

struct Pending {
    stopped: bool,
    ceps: KVec<Arc<Cep>>,
}

/// Listen where `id` says (its mapped local address).
pub(crate) fn listen(dev: &IbDevice, id: CmId, backlog: i32) -> Result<Arc<Listener>> {
    let (local, _) = id.addrs();
    let v6only = id.afonly();
    listen_at(dev, Some(id), &local, v6only, backlog)
}

/// Listen on the device's join port at `local` (`transport/iwarp/join.rs`).
pub(crate) fn listen_join(dev: &IbDevice, local: &SockAddr) -> Result<Arc<Listener>> {
    listen_at(dev, None, local, false, JOIN_BACKLOG)
}

/// The connections a join port keeps waiting for their QP at once.
const JOIN_BACKLOG: i32 = 64;

fn listen_at(
    dev: &IbDevice,
    id: Option<CmId>,
    local: &SockAddr,
    v6only: bool,
    backlog: i32,
) -> Result<Arc<Listener>> {
    let ndev = dev.port_netdev().ok_or(ENODEV)?;
    let l = Arc::pin_init(
        pin_init!(Listener {
            dev: dev.get(),
            id,
            sock <- new_mutex!(None, "softrnic_iw_listen"),
            pending <- new_spinlock_irq!(Pending { stopped: false, ceps: KVec::new() }, "softrnic_iw_pending"),
        }),
        GFP_KERNEL,
    )?;
    let tcp = Tcp::listen(&ndev, local, v6only, backlog.max(1), l.clone())?;
    *l.sock.lock() = Some(tcp);
    Ok(l)
}

impl Listener {
    /// Stop listening: close the socket and every connection not yet
    /// handed to iw_cm.
    pub(crate) fn stop(&self) {
        let ceps = {
            let mut p = self.pending.lock();
            p.stopped = true;
            core::mem::take(&mut p.ceps)
        };
        // The port is free when this returns (rdma_cm may listen on it
        // again at once: perftest does).
        let sock = self.sock.lock().take();
        if let Some(t) = sock {
            t.close_now();
        }
        for c in ceps.iter() {
            c.abort();
        }
    }

    fn forget(&self, cep: &Cep) {
        let mut p = self.pending.lock();
        p.ceps.retain(|c| !core::ptr::eq(&**c, cep));
    }

    /// A join port: a QP may now wait for one of the requests waiting
    /// here; each looks again (`Cep::join_answer`).
    pub(crate) fn offer(&self) {
        let mut socks = KVec::new();
        {
            let p = self.pending.lock();
            for c in p.ceps.iter() {
                if let Some(t) = c.inner.lock().tcp.clone() {
                    if socks.push(t, GFP_ATOMIC).is_err() {
                        break;
                    }
                }
            }
        }
        for t in socks.iter() {
            t.defer();
        }
    }

    /// Accept every waiting connection (process context).
    fn accept_all(self: &Arc<Self>) {
        let sock = self.sock.lock();
        let Some(ls) = sock.as_ref() else { return };
        loop {
            let Ok(cep) = Cep::new(self.dev.dev(), Role::Passive(self.clone())) else {
                return;
            };
            let tcp = match ls.accept(cep.clone()) {
                Ok(Some(t)) => t,
                Ok(None) | Err(_) => return,
            };
            let Ok(tcp) = Arc::new(tcp, GFP_KERNEL) else {
                continue;
            };
            {
                let mut p = self.pending.lock();
                if p.stopped || p.ceps.push(cep.clone(), GFP_ATOMIC).is_err() {
                    continue;
                }
            }
            let (local, remote) = tcp.addrs().unwrap_or_default();
            {
                let mut s = cep.inner.lock();
                if s.phase == Phase::Closed {
                    // The peer is gone already (a reset): the socket goes.
                    continue;
                }
                s.tcp = Some(tcp.clone());
                (s.local, s.remote) = (local, remote);
                arm_deadline(&mut s, &tcp);
            }
            // Bytes that came before the endpoint had its socket and
            // addresses (`bytes` left them in the socket).
            tcp.read();
        }
    }
}

impl TcpHandler for Listener {
    fn event(self: ArcBorrow<'_, Self>, s: TcpRef<'_>, ev: TcpEvent) {
        if ev == TcpEvent::Readable {
            s.defer();
        }
    }

    fn work(self: ArcBorrow<'_, Self>, _s: TcpRef<'_>) {
        if self.pending.lock().stopped {
            return;
        }
        // Our own reference, for the endpoints.
        Arc::from(self).accept_all();
    }

    fn bytes(self: ArcBorrow<'_, Self>, _data: &[u8]) -> usize {
        0
    }
}

enum Role {
    /// Accepted by this listener.
    Passive(Arc<Listener>),
    Active,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Active: the TCP handshake is under way.
    Connecting,
    /// Passive: reading the MPA request.
    AwaitRequest,
    /// Passive: the request went to iw_cm; waiting for accept or reject.
    AwaitAccept,
    /// Active: the request went out; reading the reply.
    AwaitReply,
    /// The QP runs on the stream.
    Connected,
    /// Closed gracefully by the consumer: what the stream built is still
    /// going into the socket (`tail`), then FIN.
    Draining,
    Closed,
}

/// A connection endpoint.
#[pin_data]
pub(crate) struct Cep {
    dev: HeldIbDevice,
    #[pin]
    inner: SpinLockIrq<CepInner>,
}

struct CepInner {
    phase: Phase,
    listener: Option<Arc<Listener>>,
    tcp: Option<Arc<Tcp>>,
    reader: KBox<FrameReader>,
    /// The connection's id (held from connect or accept until CLOSE).
    id: Option<CmId>,
    /// The QP bound (by number: a lookup each time, never holding it).
    qpn: Option<u32>,
    /// A join by modify_qp (no iw_cm id): what it asks, and for the
    /// connecting end where it connects (again, while the peer's join port
    /// refuses: its QP may not have reached RTS yet).
    join: Option<Join>,
    /// Active: what the request asked, to read the reply against.
    ird: u16,
    ord: u16,
    request: KVec<u8>,
    /// Draining: the bytes the socket has yet to take.
    tail: KVec<u8>,
    /// When the MPA request or reply, or the end of draining, is overdue
    /// (`arm_deadline`).
    deadline: Option<Instant<Monotonic>>,
    /// The connection's addresses (read once it is up: reading them
    /// takes the socket's lock, which callbacks may hold).
    local: SockAddr,
    remote: SockAddr,
}

impl CepInner {
    /// Milliseconds left before the deadline (none: 0, overdue).
    fn ms_left(&self) -> i64 {
        self.deadline.map_or(0, ms_until)
    }
}

/// A join's endpoint state (see `CepInner::join`).
struct Join {
    req: JoinRequest,
    /// The connecting end: its addresses, and when it connects again.
    active: Option<(SockAddr, SockAddr)>,
    retry_at: Option<Instant<Monotonic>>,
}

/// How long a join's connecting end waits before it tries a refused
/// connection again.
const JOIN_RETRY_MS: u32 = 50;

/// What to do once the endpoint's lock is dropped.
#[derive(Default)]
struct Todo {
    events: KVec<(CmEventKind, i32)>,
    private: KVec<u8>,
    ird: u8,
    ord: u8,
    /// Raise CONNECT_REQUEST to the listener's id.
    request: bool,
    /// Let the connection's id go (after the events).
    release_id: Option<CmId>,
    /// Let the socket go.
    close: Option<Arc<Tcp>>,
    /// Leave the listener's list of pending connections.
    forget: Option<Arc<Listener>>,
    /// Detach the stream from this QP, and move the QP to ERR unless
    /// `keep_state` (the consumer reset it).
    qp_error: Option<u32>,
    keep_state: bool,
    local: SockAddr,
    remote: SockAddr,
}

impl Cep {
    fn new(dev: &IbDevice, role: Role) -> Result<Arc<Cep>> {
        let (phase, listener) = match role {
            Role::Passive(l) => (Phase::AwaitRequest, Some(l)),
            Role::Active => (Phase::Connecting, None),
        };
        let kind = if listener.is_some() {
            Kind::Request
        } else {
            Kind::Reply
        };
        let reader = KBox::new(FrameReader::new(kind), GFP_KERNEL)?;
        let dev = dev.get();
        Arc::pin_init(
            pin_init!(Cep {
                dev,
                inner <- new_spinlock_irq!(CepInner {
                    phase,
                    listener,
                    tcp: None,
                    reader,
                    id: None,
                    qpn: None,
                    join: None,
                    ird: 0,
                    ord: 0,
                    request: KVec::new(),
                    tail: KVec::new(),
                    deadline: None,
                    local: SockAddr::default(),
                    remote: SockAddr::default(),
                }, "softrnic_cep"),
            }),
            GFP_KERNEL,
        )
    }

    fn dev(&self) -> &IbDevice {
        self.dev.dev()
    }

    /// Close now with a reset (listener stop, bad request).
    fn abort(&self) {
        let mut todo = Todo::default();
        {
            let mut s = self.inner.lock();
            self.end(&mut s, &mut todo, -(ECONNABORTED.to_errno()), true);
        }
        self.finish(todo);
    }

    /// End the connection in any phase: the events iw_cm expects for it,
    /// then the socket and the id go.
    fn end(&self, s: &mut CepInner, todo: &mut Todo, status: i32, abort: bool) {
        match s.phase {
            Phase::Connecting | Phase::AwaitReply if s.join.is_some() => {
                // A join that failed: its QP, in RTS, would wait for ever.
                todo.qp_error = s.qpn;
            }
            Phase::Connecting | Phase::AwaitReply => {
                // (No reply is never a success, whatever ended the wait.)
                let status = if status == 0 {
                    ECONNRESET.to_errno()
                } else {
                    status
                };
                let _ = todo
                    .events
                    .push((CmEventKind::ConnectReply, -status.abs()), GFP_ATOMIC);
            }
            Phase::Connected => {
                let _ = todo.events.push((CmEventKind::Disconnect, 0), GFP_ATOMIC);
                let _ = todo
                    .events
                    .push((CmEventKind::Close, -status.abs()), GFP_ATOMIC);
                todo.qp_error = s.qpn;
            }
            _ => {}
        }
        s.phase = Phase::Closed;
        if let Some(t) = s.tcp.take() {
            if abort {
                t.set_abort();
            }
            todo.close = Some(t);
        }
        todo.release_id = s.id.take();
        todo.forget = s.listener.take();
        (todo.local, todo.remote) = (s.local, s.remote);
        Self::raise_now(todo);
    }

    /// Raise `todo`'s events on the connection's id now, with the
    /// endpoint's lock held: two paths that decide events at once (a reply
    /// and a reset, say) must raise them in the order they decided them,
    /// or iw_cm sees a CLOSE before the CONNECT_REPLY or ESTABLISHED it
    /// follows, which it does not survive (BUG() in iwcm.c).  iw_cm's
    /// handler only queues work: fine in atomic context.
    fn raise_now(todo: &mut Todo) {
        if let Some(id) = &todo.release_id {
            for &(kind, status) in todo.events.iter() {
                id.event(&CmEvent {
                    kind,
                    status,
                    local: todo.local,
                    remote: todo.remote,
                    private: &todo.private,
                    ird: todo.ird,
                    ord: todo.ord,
                });
            }
        }
        todo.events.clear();
    }

    /// Do the rest of what `todo` says, with no endpoint lock held.
    fn finish(&self, todo: Todo) {
        if let Some(l) = &todo.forget {
            l.forget(self);
        }
        if let Some(qpn) = todo.qp_error {
            if let Some(qp) = self.dev().verbs().qps.get(qpn) {
                let mut after = After::default();
                let stream = {
                    let mut q = qp.inner.lock();
                    // What the stream built goes out after it (below):
                    // its SENDs and WRITEs are done, not flushed.
                    qp.iwarp_hand_on(&mut q, &mut after);
                    if !todo.keep_state && q.state != QpState::Err && q.state != QpState::Reset {
                        qp.enter(&mut q, QpState::Err, &mut after);
                    }
                    q.iw.take()
                };
                if let Some(tx) = stream.as_ref().and_then(|st| st.unsent()) {
                    self.drain_more(tx);
                }
                // (The stream's last references to us and the socket go
                // with no lock held.)
                drop(stream);
                qp.after(after);
            }
        }
        // (The events went out under the endpoint's lock: `raise_now`.)
        drop(todo.release_id);
        drop(todo.close);
    }

    /// iw_accept: bind the QP, answer the request, raise ESTABLISHED.  A
    /// refused accept resets the connection: iw_cm has given the endpoint
    /// back (no reject follows, and no event may), and the initiator must
    /// not wait out its deadline.
    pub(crate) fn accept(self: Arc<Self>, id: CmId, p: &ConnParam<'_>) -> Result {
        let mut buf = KVec::new();
        // (Looked up, and let go, with no lock held.)
        let qp = self.dev().verbs().qps.get(p.qpn);
        let tcp = {
            let mut s = self.inner.lock();
            match self.accept_locked(&mut s, qp.as_deref(), id, p, &mut buf) {
                Ok(tcp) => tcp,
                Err(e) => {
                    let mut todo = Todo::default();
                    self.end(&mut s, &mut todo, e.to_errno(), true);
                    drop(s);
                    self.finish(todo);
                    return Err(e);
                }
            }
        };
        // A fresh connection's buffer takes a frame of at most 532 bytes:
        // anything short means it broke.  (The accept itself succeeded:
        // iw_cm has the ESTABLISHED; the CLOSE follows it.)
        if tcp.send(&buf, false).ok() != Some(buf.len()) {
            self.abort();
        }
        Ok(())
    }

    /// `accept` under the endpoint's lock: the reply into `buf`, the QP
    /// bound, ESTABLISHED raised; the socket to send the reply on.
    fn accept_locked(
        self: &Arc<Self>,
        s: &mut CepInner,
        qp: Option<&crate::verbs::qp::Qp>,
        id: CmId,
        p: &ConnParam<'_>,
        buf: &mut KVec<u8>,
    ) -> Result<Arc<Tcp>> {
        if s.phase != Phase::AwaitAccept {
            return Err(ECONNRESET);
        }
        if p.private.len() > MAX_PRIVATE_SENT {
            return Err(EINVAL);
        }
        let qp = qp.ok_or(EINVAL)?;
        let (tcp, neg) = answer_locked(self.clone(), s, qp, p.qpn, p.ird, p.ord, p.private, buf)?;
        s.id = Some(id.clone_held());
        // ESTABLISHED before anything can end the connection and raise
        // CLOSE (see `raise_now`); the stream sends nothing before the
        // reply has reached the initiator and it answered (`hold`).
        id.event(&CmEvent {
            kind: CmEventKind::Established,
            status: 0,
            local: s.local,
            remote: s.remote,
            private: &[],
            ird: neg.ird.min(255) as u8,
            ord: neg.ord.min(255) as u8,
        });
        Ok(tcp)
    }

    /// iw_reject: answer with R set and the consumer's private data, then
    /// close.
    pub(crate) fn reject(self: Arc<Self>, private: &[u8]) {
        let private = &private[..private.len().min(MAX_PRIVATE_SENT)];
        let mut buf = KVec::new();
        let tcp = {
            let s = self.inner.lock();
            if s.phase == Phase::AwaitAccept {
                if let Ok(req) = s.reader.frame() {
                    let rep = mpa::reply(&req, None, private);
                    if buf.resize(rep.wire_len(), 0, GFP_ATOMIC).is_err()
                        || rep.build(&mut buf).is_err()
                    {
                        buf.clear();
                    }
                }
            }
            s.tcp.clone()
        };
        if let Some(t) = tcp.filter(|_| !buf.is_empty()) {
            self.dev().counters().bump(Counter::IwMpaRejects);
            let _ = t.send(&buf, false);
        }
        let mut todo = Todo::default();
        {
            let mut s = self.inner.lock();
            self.end(&mut s, &mut todo, 0, false);
        }
        self.finish(todo);
    }

    /// The QP's stream failed (a TERMINATE, a broken socket, an FPDU that
    /// breaks the rules): end the connection.
    pub(crate) fn failed(&self, abort: bool) {
        let mut todo = Todo::default();
        {
            let mut s = self.inner.lock();
            if s.phase != Phase::Connected {
                return;
            }
            self.end(&mut s, &mut todo, ECONNRESET.to_errno(), abort);
        }
        self.finish(todo);
    }

    /// The connection's QP was moved to SQD, ERR or RESET (`reset`: it
    /// stays there), or destroyed: end the connection.  Closed as siw
    /// closes it, and gracefully in every case: what the stream built was
    /// completed to the consumer, so it goes out (`unsent`, from a stream
    /// already taken off the QP, then what `finish` finds on it), then the
    /// FIN; a peer that does not take it by the deadline is reset.  (A
    /// reset would drop what TCP still holds too: perftest's server sends
    /// its last message and destroys its id at once.)
    pub(crate) fn disconnect(&self, unsent: Option<&TxBuf>, reset: bool) {
        let mut todo = Todo::default();
        let mut drain = None;
        {
            let mut s = self.inner.lock();
            if s.phase != Phase::Connected {
                return;
            }
            // The consumer asked: CLOSE only (iw_cm raised the disconnect);
            // the QP, its stream gone, goes to ERR (unless it was reset).
            todo.qp_error = s.qpn;
            todo.keep_state = reset;
            (todo.local, todo.remote) = (s.local, s.remote);
            let _ = todo.events.push((CmEventKind::Close, 0), GFP_ATOMIC);
            if let Some(t) = s.tcp.clone() {
                s.phase = Phase::Draining;
                if unsent.is_some_and(|u| u.copy_into(&mut s.tail).is_err()) {
                    t.set_abort();
                }
                arm_deadline(&mut s, &t);
                drain = Some(t);
            } else {
                s.phase = Phase::Closed;
            }
            todo.release_id = s.id.take();
            Self::raise_now(&mut todo);
        }
        self.finish(todo);
        // (After `finish` has handed the stream's bytes over.)
        if let Some(t) = drain {
            t.defer();
        }
    }

    /// Bytes for a draining connection's socket (after those it has).
    pub(crate) fn drain_more(&self, bytes: &TxBuf) {
        if bytes.is_empty() {
            return;
        }
        let mut s = self.inner.lock();
        if s.phase == Phase::Draining && bytes.copy_into(&mut s.tail).is_err() {
            // (Cannot keep them: the peer must not take a stream cut
            // short for a whole one.)
            if let Some(t) = &s.tcp {
                t.set_abort();
            }
            s.tail.clear();
        }
    }

    /// Draining (the connection's work item): send what fits; FIN once
    /// all is out, a reset if the deadline passed first.
    fn drain(&self, t: TcpRef<'_>) {
        let (tcp, mut buf) = {
            let mut s = self.inner.lock();
            let Some(tcp) = s.tcp.clone() else { return };
            (tcp, core::mem::take(&mut s.tail))
        };
        let mut off = 0;
        let mut failed = tcp.send_from(&buf, &mut off).is_err();
        let mut todo = Todo::default();
        {
            let mut s = self.inner.lock();
            if s.phase != Phase::Draining {
                return;
            }
            // (A pump that lost the stream meanwhile appended to `tail`.)
            let later = core::mem::take(&mut s.tail);
            let left = buf.len() - off;
            buf.copy_within(off.., 0);
            buf.truncate(left);
            if buf.extend_from_slice(&later, GFP_ATOMIC).is_err() {
                failed = true;
            }
            s.tail = buf;
            let overdue = s.ms_left() <= 0;
            if s.tail.is_empty() || failed || overdue {
                let abort = !s.tail.is_empty();
                s.tail.clear();
                s.phase = Phase::Closed;
                if let Some(t) = s.tcp.take() {
                    if abort {
                        t.set_abort();
                    }
                    todo.close = Some(t);
                }
            } else if let Some(d) = s.deadline {
                // Write space brings us back; the deadline at the latest.
                let left = ms_until(d).max(1);
                t.defer_after(u32::try_from(left).unwrap_or(u32::MAX));
            }
        }
        self.finish(todo);
    }

    /// A whole MPA request arrived (passive).
    fn on_request(&self, s: &mut CepInner, todo: &mut Todo) {
        let req = match s.reader.frame() {
            Ok(r) => r,
            Err(_) => {
                self.end(s, todo, ECONNABORTED.to_errno(), true);
                return;
            }
        };
        if req.markers {
            // softrnic does not do markers: the connection is reset (from
            // a socket callback, a reply cannot be sent).
            self.end(s, todo, ECONNREFUSED.to_errno(), true);
            return;
        }
        let _ = todo.private.extend_from_slice(req.private, GFP_ATOMIC);
        if let Some(w) = req.ird_ord {
            todo.ird = w.ird.min(255) as u8;
            todo.ord = w.ord.min(255) as u8;
        } else {
            todo.ird = 1;
            todo.ord = 1;
        }
        s.phase = Phase::AwaitAccept;
        todo.request = true;
    }

    /// A whole MPA reply arrived (active).
    fn on_reply(self: ArcBorrow<'_, Self>, s: &mut CepInner, todo: &mut Todo) {
        let pol = policy(self.dev(), &s.remote);
        let outcome = {
            let Ok(req) = mpa::parse(Kind::Request, &s.request) else {
                self.end(s, todo, ECONNABORTED.to_errno(), true);
                return;
            };
            let rep = match s.reader.frame() {
                Ok(r) => r,
                Err(_) => {
                    self.end(s, todo, ECONNABORTED.to_errno(), true);
                    return;
                }
            };
            let _ = todo.private.extend_from_slice(rep.private, GFP_ATOMIC);
            mpa::connected(&pol, s.ird, s.ord, &req, &rep)
        };
        match outcome {
            Ok(neg) => {
                let qp = s.qpn.and_then(|n| self.dev().verbs().qps.get(n));
                let tcp = s.tcp.clone();
                let joined = s.join.is_some();
                match qp
                    .zip(tcp)
                    .map(|(q, t)| bind_qp(&q, self.into(), neg, t, false, joined))
                {
                    Some(Ok(())) => {
                        s.phase = Phase::Connected;
                        todo.ird = neg.ird.min(255) as u8;
                        todo.ord = neg.ord.min(255) as u8;
                        let _ = todo.events.push((CmEventKind::ConnectReply, 0), GFP_ATOMIC);
                        todo.release_id = s.id.as_ref().map(CmId::clone_held);
                        (todo.local, todo.remote) = (s.local, s.remote);
                        Self::raise_now(todo);
                    }
                    _ => self.end(s, todo, ECONNABORTED.to_errno(), true),
                }
            }
            Err(mpa::SetupError::Rejected) => {
                self.dev().counters().bump(Counter::IwMpaRejects);
                self.end(s, todo, ECONNREFUSED.to_errno(), false);
            }
            Err(_) => self.end(s, todo, ECONNABORTED.to_errno(), true),
        }
    }
}

impl Cep {
    /// A join's QP left RTS, or went, before its connection was up: the
    /// connection goes, and leaves the QP alone.
    pub(crate) fn cancel_join(&self) {
        let mut todo = Todo::default();
        {
            let mut s = self.inner.lock();
            if s.phase == Phase::Connected {
                // (Bound: the QP's own teardown ends it.)
                return;
            }
            s.qpn = None;
            self.end(&mut s, &mut todo, ECONNABORTED.to_errno(), true);
        }
        self.finish(todo);
    }

    /// A join port's connection brought an MPA request with `private`: a
    /// join request waits for its QP (`join_answer`, from the work item);
    /// anything else is refused.
    fn join_request(&self, private: &[u8]) {
        let mut todo = Todo::default();
        let req = JoinRequest::decode(private);
        // A QP of ours, which may not be in RTS yet: wait for it as long
        // as a join waits (looked up with no endpoint lock held).
        let known = req.is_some_and(|r| self.dev().verbs().qps.get(r.dest_qpn).is_some());
        let tcp = {
            let mut s = self.inner.lock();
            if s.phase != Phase::AwaitAccept {
                return;
            }
            match req {
                Some(req) => {
                    s.join = Some(Join {
                        req,
                        active: None,
                        retry_at: None,
                    });
                    if known {
                        // (Longer than the connecting end's, which then
                        // gives up first and counts it: the two deadlines
                        // start a connect and a request apart.)
                        let ms = join_timeout_ms().saturating_add(mpa_timeout_ms());
                        s.deadline = Some(deadline_in(ms));
                    }
                    s.tcp.clone()
                }
                None => {
                    self.dev().counters().bump(Counter::IwMpaRejects);
                    self.end(&mut s, &mut todo, ECONNREFUSED.to_errno(), true);
                    None
                }
            }
        };
        self.finish(todo);
        if let Some(t) = tcp {
            t.defer();
        }
    }

    /// A join request waiting (work item): answer it once its QP waits for
    /// exactly this connection (`Qp::join_waiting`); reset it at its
    /// deadline (`join_request`).
    fn join_answer(self: ArcBorrow<'_, Self>, t: TcpRef<'_>) {
        let Some((req, remote)) = ({
            let s = self.inner.lock();
            s.join.as_ref().map(|j| (j.req, s.remote))
        }) else {
            return;
        };
        // (Looked up, and let go, with no endpoint lock held.)
        let qp = self.dev().verbs().qps.get(req.dest_qpn);
        let mut todo = Todo::default();
        let mut reply = KVec::new();
        let mut send_on = None;
        {
            let mut s = self.inner.lock();
            if s.phase != Phase::AwaitAccept {
                return;
            }
            let wanted = qp
                .as_deref()
                .and_then(|q| q.join_waiting(req.src_qpn, &remote.gid()).map(|w| (q, w)));
            match wanted {
                Some((q, (ird, ord))) => {
                    let me = Arc::from(self);
                    match answer_locked(me, &mut s, q, req.dest_qpn, ird, ord, &[], &mut reply) {
                        Ok((tcp, _)) => {
                            send_on = Some(tcp);
                            todo.forget = s.listener.take();
                        }
                        Err(e) => self.end(&mut s, &mut todo, e.to_errno(), true),
                    }
                }
                None => {
                    let left = s.ms_left();
                    if left > 0 {
                        // `Listener::offer` brings us back sooner.
                        t.defer_after(u32::try_from(left).unwrap_or(u32::MAX));
                        return;
                    }
                    self.dev().counters().bump(Counter::IwMpaTimeouts);
                    self.end(&mut s, &mut todo, ETIMEDOUT.to_errno(), true);
                }
            }
        }
        self.finish(todo);
        if let Some(tcp) = send_on {
            if tcp.send(&reply, false).ok() != Some(reply.len()) {
                self.abort();
            }
        }
    }

    /// A join's connecting end found the connection refused or reset
    /// before its reply (work item): connect again after `JOIN_RETRY_MS`
    /// (the peer's QP may not be in RTS yet, its device not yet
    /// listening), until the join's deadline.  False when it is over.
    fn join_retry(self: ArcBorrow<'_, Self>, t: TcpRef<'_>) -> bool {
        let (local, remote) = {
            let mut s = self.inner.lock();
            let overdue = s.ms_left() <= 0;
            let Some(j) = s.join.as_mut() else {
                return false;
            };
            let Some(addrs) = j.active else { return false };
            if overdue {
                return false;
            }
            let now = Instant::now();
            match j.retry_at {
                Some(at) if (at - now).as_millis() > 0 => {
                    t.defer_after(JOIN_RETRY_MS);
                    return true;
                }
                Some(_) => j.retry_at = None,
                None => {
                    j.retry_at = Some(now + Delta::from_millis(i64::from(JOIN_RETRY_MS)));
                    t.defer_after(JOIN_RETRY_MS);
                    return true;
                }
            }
            addrs
        };
        let Some(ndev) = self.dev().port_netdev() else {
            return false;
        };
        let Ok(tcp) = Tcp::connect(&ndev, &local, &remote, Arc::from(self)) else {
            // Not even a socket: the deadline ends it (the old socket's
            // work item comes back at it).
            return false;
        };
        let Ok(tcp) = Arc::new(tcp, GFP_KERNEL) else {
            return false;
        };
        {
            let mut s = self.inner.lock();
            if s.phase != Phase::Connecting {
                return true;
            }
            // (The old socket goes to the reaper, its callbacks with it.)
            s.tcp = Some(tcp.clone());
        }
        // Its work item follows the handshake, and the deadline (`work`).
        tcp.defer();
        true
    }
}

/// Answer the MPA request `s` holds (under the endpoint's lock, in
/// AwaitAccept): the reply, with `private`, into `buf`; QP `qp` (number
/// `qpn`) bound; the endpoint connected.  The socket to send the reply on,
/// and what was negotiated.  (The QP runs before the reply leaves: the
/// initiator may send as soon as it has it.)
#[allow(clippy::too_many_arguments)]
fn answer_locked(
    cep: Arc<Cep>,
    s: &mut CepInner,
    qp: &crate::verbs::qp::Qp,
    qpn: u32,
    ird: u32,
    ord: u32,
    private: &[u8],
    buf: &mut KVec<u8>,
) -> Result<(Arc<Tcp>, Negotiated)> {
    let pol = policy(cep.dev(), &s.remote);
    let tcp = s.tcp.clone().ok_or(ECONNRESET)?;
    let req = s.reader.frame().map_err(|_| EINVAL)?;
    let decision = mpa::accept(&pol, &req, clamp16(ird), clamp16(ord)).map_err(|_| EINVAL)?;
    let rep = mpa::reply(&req, Some(&decision), private);
    buf.resize(rep.wire_len(), 0, GFP_ATOMIC)?;
    rep.build(buf).map_err(|_| EINVAL)?;
    let joined = s.join.is_some();
    bind_qp(qp, cep, decision.0, tcp.clone(), true, joined)?;
    s.qpn = Some(qpn);
    s.phase = Phase::Connected;
    Ok((tcp, decision.0))
}

/// Bind a QP to the connection and move it to RTS (iWARP: the provider
/// does, as siw does, once MPA setup succeeded).
/// A QP `joined` by modify_qp gets IB's completion of WRITEs (placed at
/// the peer: `OutboundParams::confirm`).
fn bind_qp(
    qp: &crate::verbs::qp::Qp,
    cep: Arc<Cep>,
    neg: Negotiated,
    tcp: Arc<Tcp>,
    responder: bool,
    joined: bool,
) -> Result {
    use crate::transport::iwarp::stream::{Stream, INITIATOR_HOLD_USECS, RESPONDER_HOLD_USECS};
    // Whether the stream holds its first FPDU (see `Stream::hold`), and
    // for how long: a responder until the initiator's first (in
    // peer-to-peer mode strictly: that first is the RTR); an initiator a
    // moment (its RTR too, in peer-to-peer mode: a siw responder listens
    // for it only once its reply is out, and one that comes sooner is
    // never read), but not at all toward a softrnic responder (known by
    // RFC 7306: it hands its socket to the QP before its reply goes out).
    let (hold, timer) = match (responder, neg.rtr.is_some(), neg.ext) {
        (true, true, _) => (true, None),
        (true, false, _) => (true, Some(RESPONDER_HOLD_USECS)),
        (false, _, false) => (true, Some(INITIATOR_HOLD_USECS)),
        (false, _, true) => (false, None),
    };
    let slots = qp.inner.lock().sq.slots();
    let mut stream = Stream::new(cep, tcp, &neg, slots, hold, responder, joined)?;
    let mut after = After::default();
    {
        let mut q = qp.inner.lock();
        if !matches!(q.state, QpState::Init | QpState::Rtr | QpState::Rts) || q.iw.is_some() {
            return Err(EINVAL);
        }
        // (Local operations posted before the connection ran already.)
        stream.start_at(q.sq_cons);
        q.iw = Some(stream);
        q.join = None;
        if q.state != QpState::Rts {
            qp.enter(&mut q, QpState::Rts, &mut after);
        }
        if let Some(usecs) = timer {
            let dying = q.eng.dying;
            qp.arm_timer(dying, usecs);
        }
    }
    qp.after(after);
    // Work posted before the connection was up.
    qp.schedule();
    Ok(())
}

impl TcpHandler for Cep {
    fn event(self: ArcBorrow<'_, Self>, s: TcpRef<'_>, ev: TcpEvent) {
        match ev {
            TcpEvent::Readable => s.read(),
            TcpEvent::Writable => {
                let (qpn, draining) = {
                    let s = self.inner.lock();
                    (s.qpn, s.phase == Phase::Draining)
                };
                if draining {
                    s.defer();
                    return;
                }
                if let Some(qp) = qpn.and_then(|n| self.dev().verbs().qps.get(n)) {
                    qp.iwarp_writable();
                }
            }
            TcpEvent::State => {
                if self.inner.lock().phase == Phase::Connecting {
                    // Up or failed: the work item sends the request (a
                    // send may sleep) or reports the failure.
                    s.defer();
                    return;
                }
                if s.closed() {
                    // TCP reports a FIN (tcp_fin) before it wakes the reader
                    // for the bytes that came with it, e.g. a retransmission
                    // filling the hole before an early FIN: consume them
                    // first, or the last message before a graceful close is
                    // flushed instead of delivered.
                    s.read();
                    let err = s.error();
                    let mut todo = Todo::default();
                    {
                        let mut i = self.inner.lock();
                        // (A join's socket it gave up for another, still
                        // reporting: not the connection's end.)
                        let other = i.tcp.as_ref().is_some_and(|t| !t.is(&s));
                        if i.phase == Phase::Closed || other {
                            return;
                        }
                        // A peer's FIN is a graceful close: CLOSE with status
                        // 0 (a synchronous rdma_disconnect returns it); a
                        // reset or a failure carries its error.
                        self.end(&mut i, &mut todo, err, false);
                    }
                    self.finish(todo);
                }
            }
        }
    }

    /// An active open's progress (see `connect`); then the MPA setup's
    /// deadline (armed once the request is out, or the socket accepted): a
    /// peer whose request or reply has not arrived by now is let go.
    fn work(self: ArcBorrow<'_, Self>, t: TcpRef<'_>) {
        let mut todo = Todo::default();
        {
            let mut s = self.inner.lock();
            if s.phase == Phase::Connecting {
                // (No socket yet: `connect` has not stored it, and defers
                // again once it has.)
                let Some(tcp) = s.tcp.clone() else { return };
                if !tcp.is(&t) {
                    // A join's socket it gave up (`join_retry`).
                    return;
                }
                if t.connecting() {
                    if s.join.is_some() {
                        // A join's connect counts against its deadline.
                        let left = s.ms_left();
                        if left <= 0 {
                            self.dev().counters().bump(Counter::IwMpaTimeouts);
                            self.end(&mut s, &mut todo, ETIMEDOUT.to_errno(), true);
                            drop(s);
                            self.finish(todo);
                        } else {
                            t.defer_after(u32::try_from(left).unwrap_or(u32::MAX));
                        }
                    }
                    return;
                }
                if t.closed() && s.join.as_ref().is_some_and(|j| j.active.is_some()) {
                    drop(s);
                    if Self::join_retry(self, t) {
                        return;
                    }
                    s = self.inner.lock();
                    if s.phase != Phase::Connecting {
                        return;
                    }
                }
                if t.closed() {
                    let err = match t.error() {
                        0 => ECONNREFUSED.to_errno(),
                        e => -e,
                    };
                    self.end(&mut s, &mut todo, err, true);
                    drop(s);
                    self.finish(todo);
                    return;
                }
                // Up: the request goes out.
                let mut req = KVec::new();
                if req.extend_from_slice(&s.request, GFP_ATOMIC).is_err() {
                    self.end(&mut s, &mut todo, ENOMEM.to_errno(), true);
                    drop(s);
                    self.finish(todo);
                    return;
                }
                s.phase = Phase::AwaitReply;
                if let Ok((local, remote)) = tcp.addrs() {
                    (s.local, s.remote) = (local, remote);
                }
                if s.join.is_some() {
                    // The join's deadline (`open`) runs on.
                    let left = s.ms_left();
                    tcp.defer_after(u32::try_from(left.max(0)).unwrap_or(u32::MAX));
                } else {
                    arm_deadline(&mut s, &tcp);
                }
                drop(s);
                if !matches!(tcp.send(&req, false), Ok(n) if n == req.len()) {
                    self.abort();
                }
                return;
            }
            if s.phase == Phase::Draining {
                drop(s);
                self.drain(t);
                return;
            }
            if s.phase == Phase::AwaitAccept && s.join.is_some() {
                drop(s);
                Self::join_answer(self, t);
                return;
            }
            if !matches!(s.phase, Phase::AwaitRequest | Phase::AwaitReply) {
                return;
            }
            // Not yet due (the connect's second wake-up, say): wait on.
            let Some(deadline) = s.deadline else { return };
            let left = ms_until(deadline);
            if left > 0 {
                t.defer_after(u32::try_from(left).unwrap_or(u32::MAX));
                return;
            }
            self.dev().counters().bump(Counter::IwMpaTimeouts);
            self.end(&mut s, &mut todo, ETIMEDOUT.to_errno(), true);
        }
        self.finish(todo);
    }

    fn bytes(self: ArcBorrow<'_, Self>, data: &[u8]) -> usize {
        let mut todo = Todo::default();
        let mut listener = None;
        let used = {
            let mut s = self.inner.lock();
            if s.tcp.is_none() && s.phase == Phase::AwaitRequest {
                // Accepted, but not yet adopted (`accept_all`): a request
                // read now would go to iw_cm without its addresses.
                return 0;
            }
            if s.phase == Phase::Connected {
                // The QP's stream takes them (its lock, not ours).
                let qpn = s.qpn;
                drop(s);
                return match qpn.and_then(|n| self.dev().verbs().qps.get(n)) {
                    Some(qp) => qp.iwarp_rx(data),
                    None => data.len(),
                };
            }
            match s.phase {
                Phase::AwaitRequest | Phase::AwaitReply => match s.reader.feed(data) {
                    Ok((n, Need::Done)) => {
                        if s.phase == Phase::AwaitRequest {
                            self.on_request(&mut s, &mut todo);
                            if todo.request {
                                listener = s.listener.clone();
                            }
                        } else {
                            Self::on_reply(self, &mut s, &mut todo);
                        }
                        n
                    }
                    Ok((n, Need::More(_))) => n,
                    Err(_) => {
                        // Not an MPA frame (bad key, revision, length).
                        self.dev().counters().bump(Counter::IwMpaRejects);
                        self.end(&mut s, &mut todo, ECONNABORTED.to_errno(), true);
                        data.len()
                    }
                },
                // Closed: nothing more is read.
                _ => data.len(),
            }
        };
        if let Some(l) = listener {
            let Some(id) = &l.id else {
                // A join port's request: it waits, listed, for its QP.
                self.join_request(&todo.private);
                self.finish(todo);
                return used;
            };
            l.forget(&self);
            let (local, remote) = {
                let s = self.inner.lock();
                (s.local, s.remote)
            };
            let ev = CmEvent {
                kind: CmEventKind::ConnectRequest,
                status: 0,
                local,
                remote,
                private: &todo.private,
                ird: todo.ird,
                ord: todo.ord,
            };
            // iw_cm keeps a reference for the new id, or gives it back.
            if let Err(me) = id.request(&ev, Arc::from(self)) {
                me.abort();
            }
            todo.request = false;
        }
        self.finish(todo);
        used
    }
}

/// iw_connect: start the TCP connection; the MPA request follows once it
/// is up (`Cep::work`).
pub(crate) fn connect(dev: &IbDevice, id: CmId, p: &ConnParam<'_>) -> Result<Arc<Cep>> {
    if p.private.len() > MAX_PRIVATE_SENT {
        return Err(EINVAL);
    }
    if dev.verbs().qps.get(p.qpn).is_none() {
        return Err(EINVAL);
    }
    let (local, remote) = id.addrs();
    open(
        dev,
        Some(id),
        None,
        p.qpn,
        p.ird,
        p.ord,
        p.private,
        local,
        remote,
    )
}

/// A join's connecting end (`transport/iwarp/join.rs`): connect from
/// `local` to the peer's join port at `remote` and ask for QP
/// `req.dest_qpn` there; QP `req.src_qpn` here (in RTS) gets the stream
/// once the reply comes, or goes to ERR if none comes by the deadline.
pub(crate) fn connect_join(
    dev: &IbDevice,
    req: JoinRequest,
    ird: u32,
    ord: u32,
    local: SockAddr,
    remote: SockAddr,
) -> Result<Arc<Cep>> {
    let join = Join {
        req,
        active: Some((local, remote)),
        retry_at: None,
    };
    let private = req.encode();
    open(
        dev,
        None,
        Some(join),
        req.src_qpn,
        ird,
        ord,
        &private,
        local,
        remote,
    )
}

/// An active endpoint for QP `qpn`, its MPA request (with `private`) kept
/// for when the non-blocking connect from `local` to `remote` is up: for
/// iw_cm's `id`, or for `join` (whose deadline, covering the retries too,
/// starts now: see `Cep::join_retry`).
#[allow(clippy::too_many_arguments)]
fn open(
    dev: &IbDevice,
    id: Option<CmId>,
    join: Option<Join>,
    qpn: u32,
    ird: u32,
    ord: u32,
    private: &[u8],
    local: SockAddr,
    remote: SockAddr,
) -> Result<Arc<Cep>> {
    let ndev = dev.port_netdev().ok_or(ENODEV)?;
    let cep = Cep::new(dev, Role::Active)?;
    let (ird, ord) = (clamp16(ird), clamp16(ord));
    let req = mpa::request(&policy(dev, &remote), ird, ord, private);
    let mut buf = KVec::new();
    buf.resize(req.wire_len(), 0, GFP_KERNEL)?;
    req.build(&mut buf).map_err(|_| EINVAL)?;
    let joining = join.is_some();
    {
        let mut s = cep.inner.lock();
        s.id = id;
        s.join = join;
        s.qpn = Some(qpn);
        s.ird = ird;
        s.ord = ord;
        s.request.extend_from_slice(&buf, GFP_ATOMIC)?;
    }
    let tcp = Arc::new(
        Tcp::connect(&ndev, &local, &remote, cep.clone())?,
        GFP_KERNEL,
    )?;
    {
        let mut s = cep.inner.lock();
        s.tcp = Some(tcp.clone());
        (s.local, s.remote) = (local, remote);
        if joining {
            s.deadline = Some(deadline_in(join_timeout_ms()));
        }
    }
    // The handshake may be over already (its callback found no socket).
    tcp.defer();
    Ok(cep)
}
