// SPDX-License-Identifier: GPL-2.0
//! Kernel TCP sockets for iWARP (the C side is `tcp_shim.c`).  A `Tcp` is
//! one socket in the namespace of a device's netdev (holding a reference on
//! the namespace), owned: dropping it, in any context, hands it to the
//! shim's reaper, which stops its callbacks and work, closes it and then
//! lets its handler go.  Its callbacks go to a `TcpHandler` the socket keeps
//! alive until then.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use kernel::ffi;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

use super::bindings as b;
use super::pageref::Frag;
use super::NetDevice;

/// Pieces handed to a socket in one call at most (`Tcp::send_frags`).
pub(crate) const SEND_PAGES: usize = b::SOFTRNIC_SEND_PAGES as usize;

/// A socket address (IPv4 or IPv6), as the kernel stores it.
#[derive(Clone, Copy)]
pub(crate) struct SockAddr(pub(crate) b::__kernel_sockaddr_storage);

// SAFETY: a plain address value (its pointer member only aligns the union).
unsafe impl Send for SockAddr {}
// SAFETY: as above.
unsafe impl Sync for SockAddr {}

impl Default for SockAddr {
    fn default() -> Self {
        // SAFETY: an all-zero sockaddr_storage is valid (family AF_UNSPEC).
        SockAddr(unsafe { core::mem::zeroed() })
    }
}

impl SockAddr {
    /// `port` at the address `gid` names (IPv4 when it is IPv4-mapped).
    pub(crate) fn from_gid(gid: &[u8; 16], port: u16) -> SockAddr {
        let mut a = SockAddr::default();
        // SAFETY: `gid` is 16 bytes; `a` is a sockaddr_storage to fill.
        unsafe { b::softrnic_sockaddr_from_gid(gid.as_ptr(), port, &mut a.0) };
        a
    }

    /// The address as a GID (IPv4-mapped for IPv4; zero when unset).
    pub(crate) fn gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        // SAFETY: `g` has room for the 16 bytes the shim writes.
        unsafe { b::softrnic_sockaddr_gid(&self.0, g.as_mut_ptr()) };
        g
    }

    /// An address of this host in `ndev`'s namespace: a connection to it
    /// never leaves the host.
    pub(crate) fn is_local(&self, ndev: &NetDevice) -> bool {
        // SAFETY: a held netdev; `self` is a readable sockaddr_storage.
        unsafe { b::softrnic_addr_local(ndev.0.as_ptr(), &self.0) }
    }
}

/// What a socket callback reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TcpEvent {
    /// Bytes (or, on a listening socket, a connection) are waiting.
    Readable,
    /// The send buffer has room again.
    Writable,
    /// The connection's state changed (closed, reset, failed).
    State,
}

/// The owner of a socket's callbacks.  The socket keeps one reference to
/// it until its last callback; each callback lends that reference, so a
/// handler can take its own (`Arc::from`).
pub(crate) trait TcpHandler: Send + Sync + Sized + 'static {
    /// A callback of the socket (softirq or process context; the socket's
    /// callback lock is held: `s` must not be released from here).
    fn event(self: ArcBorrow<'_, Self>, s: TcpRef<'_>, ev: TcpEvent);
    /// The socket's deferred work ([`TcpRef::defer`],
    /// [`TcpRef::defer_after`]), in process context.
    fn work(self: ArcBorrow<'_, Self>, s: TcpRef<'_>);
    /// Bytes read from the stream ([`TcpRef::read`]): how many are taken
    /// (the rest stay in the socket).
    fn bytes(self: ArcBorrow<'_, Self>, data: &[u8]) -> usize;
}

/// The context the C side carries: one reference to the handler (from
/// `Arc::into_raw`) and the entry points of its type.
struct Ctx {
    obj: *const ffi::c_void,
    ops: &'static CtxOps,
}

/// A handler type's entry points, each called with `Ctx::obj`.
struct CtxOps {
    event: unsafe fn(*const ffi::c_void, TcpRef<'_>, TcpEvent),
    work: unsafe fn(*const ffi::c_void, TcpRef<'_>),
    bytes: unsafe fn(*const ffi::c_void, &[u8]) -> usize,
    release: unsafe fn(*const ffi::c_void),
}

struct OpsOf<H>(core::marker::PhantomData<H>);

impl<H: TcpHandler> OpsOf<H> {
    const OPS: CtxOps = CtxOps {
        event: Self::event,
        work: Self::work,
        bytes: Self::bytes,
        release: Self::release,
    };

    /// # Safety
    /// `obj` came from `Arc::<H>::into_raw` and that reference is held.
    unsafe fn lent<'a>(obj: *const ffi::c_void) -> ArcBorrow<'a, H> {
        // SAFETY: per the contract.
        unsafe { ArcBorrow::from_raw(obj.cast::<H>()) }
    }

    /// # Safety
    /// As for [`Self::lent`].
    unsafe fn event(obj: *const ffi::c_void, s: TcpRef<'_>, ev: TcpEvent) {
        // SAFETY: per the contract.
        H::event(unsafe { Self::lent(obj) }, s, ev)
    }

    /// # Safety
    /// As for [`Self::lent`].
    unsafe fn work(obj: *const ffi::c_void, s: TcpRef<'_>) {
        // SAFETY: per the contract.
        H::work(unsafe { Self::lent(obj) }, s)
    }

    /// # Safety
    /// As for [`Self::lent`].
    unsafe fn bytes(obj: *const ffi::c_void, data: &[u8]) -> usize {
        // SAFETY: per the contract.
        H::bytes(unsafe { Self::lent(obj) }, data)
    }

    /// # Safety
    /// As for [`Self::lent`]; the reference is given back, once.
    unsafe fn release(obj: *const ffi::c_void) {
        // SAFETY: per the contract.
        drop(unsafe { Arc::<H>::from_raw(obj.cast::<H>()) })
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: `obj` holds the reference `ctx_new` took, given back once
        // (a Ctx is dropped once).
        unsafe { (self.ops.release)(self.obj) }
    }
}

/// An open socket we own.
pub(crate) struct Tcp {
    raw: NonNull<b::softrnic_tcp>,
    /// Closed with a reset rather than a FIN.
    abort: AtomicBool,
}

// SAFETY: the shim's socket calls may come from any thread; the handler is
// Send + Sync.
unsafe impl Send for Tcp {}
// SAFETY: as above; the shared methods are the kernel's own thread-safe calls.
unsafe impl Sync for Tcp {}

/// A socket lent to a callback.
#[derive(Clone, Copy)]
pub(crate) struct TcpRef<'a> {
    raw: NonNull<b::softrnic_tcp>,
    _p: core::marker::PhantomData<&'a Tcp>,
}

fn ctx_new<H: TcpHandler>(h: Arc<H>) -> Result<NonNull<Ctx>> {
    let c = Ctx {
        obj: Arc::into_raw(h).cast(),
        ops: &OpsOf::<H>::OPS,
    };
    // (On failure the Ctx is dropped: the reference goes back.)
    let b = KBox::new(c, GFP_KERNEL)?;
    // SAFETY: KBox::into_raw never returns null.
    Ok(unsafe { NonNull::new_unchecked(KBox::into_raw(b)) })
}

/// # Safety
/// `ctx` came from `ctx_new` and nothing uses it any more.
unsafe fn ctx_free(ctx: NonNull<Ctx>) {
    // SAFETY: per the contract.
    drop(unsafe { KBox::from_raw(ctx.as_ptr()) });
}

fn errno(ret: ffi::c_int) -> Result<ffi::c_int> {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(ret)
    }
}

impl Tcp {
    /// Wrap what the shim opened with `ctx` (freeing `ctx` on failure).
    fn opened(ret: ffi::c_int, raw: *mut b::softrnic_tcp, ctx: NonNull<Ctx>) -> Result<Tcp> {
        match (errno(ret), NonNull::new(raw)) {
            (Ok(_), Some(raw)) => Ok(Tcp {
                raw,
                abort: AtomicBool::new(false),
            }),
            (r, _) => {
                // SAFETY: the shim did not take `ctx`.
                unsafe { ctx_free(ctx) };
                Err(r.err().unwrap_or(ENOMEM))
            }
        }
    }

    /// Listen on `addr` in `ndev`'s namespace.
    pub(crate) fn listen<H: TcpHandler>(
        ndev: &NetDevice,
        addr: &SockAddr,
        v6only: bool,
        backlog: i32,
        h: Arc<H>,
    ) -> Result<Tcp> {
        let ctx = ctx_new(h)?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: a live netdev, a valid address; `ctx` stays valid until
        // the socket is released (Drop).
        let ret = unsafe {
            b::softrnic_tcp_listen(
                ndev.0.as_ptr(),
                &addr.0,
                v6only,
                backlog,
                ctx.as_ptr().cast(),
                &mut raw,
            )
        };
        Tcp::opened(ret, raw, ctx)
    }

    /// Connect from `laddr` to `raddr` (blocks; process context).
    pub(crate) fn connect<H: TcpHandler>(
        ndev: &NetDevice,
        laddr: &SockAddr,
        raddr: &SockAddr,
        h: Arc<H>,
    ) -> Result<Tcp> {
        let ctx = ctx_new(h)?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: as in `listen`.
        let ret = unsafe {
            b::softrnic_tcp_connect(
                ndev.0.as_ptr(),
                &laddr.0,
                &raddr.0,
                ctx.as_ptr().cast(),
                &mut raw,
            )
        };
        Tcp::opened(ret, raw, ctx)
    }

    /// The next waiting connection of a listening socket, handled by `h`
    /// (process context).
    pub(crate) fn accept<H: TcpHandler>(&self, h: Arc<H>) -> Result<Option<Tcp>> {
        let ctx = ctx_new(h)?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: our socket; `ctx` as in `listen`.
        let ret =
            unsafe { b::softrnic_tcp_accept(self.raw.as_ptr(), ctx.as_ptr().cast(), &mut raw) };
        match Tcp::opened(ret, raw, ctx) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e == EAGAIN => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `t` is this socket.
    pub(crate) fn is(&self, t: &TcpRef<'_>) -> bool {
        self.raw == t.raw
    }

    pub(crate) fn as_ref(&self) -> TcpRef<'_> {
        TcpRef {
            raw: self.raw,
            _p: core::marker::PhantomData,
        }
    }

    /// Close now, waiting for running callbacks and work (process context;
    /// never from this socket's own callbacks or work): for a listening
    /// socket, whose port must be free when its listen is gone.
    pub(crate) fn close_now(self) {
        let raw = self.raw;
        core::mem::forget(self);
        // SAFETY: our socket, used no more (`self` is gone); the caller's
        // context is one the shim may wait in.
        unsafe { b::softrnic_tcp_release_now(raw.as_ptr()) };
    }

    /// Close with a reset (queued data dropped) when dropped.
    pub(crate) fn set_abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    /// Both ends' addresses.
    pub(crate) fn addrs(&self) -> Result<(SockAddr, SockAddr)> {
        let (mut l, mut r) = (SockAddr::default(), SockAddr::default());
        // SAFETY: our socket; two writable addresses.
        errno(unsafe { b::softrnic_tcp_addrs(self.raw.as_ptr(), &mut l.0, &mut r.0) })?;
        Ok((l, r))
    }

    /// Read from process context (see [`TcpRef::read`]).
    pub(crate) fn read(&self) {
        // SAFETY: our socket, not locked by us.
        unsafe { b::softrnic_tcp_read(self.raw.as_ptr(), false) };
    }
}

impl Drop for Tcp {
    fn drop(&mut self) {
        // SAFETY: our socket, used no more; the reaper gives its context
        // back through `softrnic_tcp_ctx_free` once no callback can run.
        unsafe { b::softrnic_tcp_release(self.raw.as_ptr(), self.abort.load(Ordering::Relaxed)) };
    }
}

impl TcpRef<'_> {
    /// Hand what the socket holds to the handler's `bytes` until it takes
    /// less than offered (from a callback: the socket is held).
    pub(crate) fn read(&self) {
        // SAFETY: a live socket, held by the callback we are in.
        unsafe { b::softrnic_tcp_read(self.raw.as_ptr(), true) };
    }

    /// Send what fits now: the count taken (0 when the buffer is full).
    pub(crate) fn send(&self, bytes: &[u8], more: bool) -> Result<usize> {
        // SAFETY: a live socket; `bytes` is readable.
        let r = unsafe {
            b::softrnic_tcp_send(self.raw.as_ptr(), bytes.as_ptr().cast(), bytes.len(), more)
        };
        match errno(r) {
            Ok(n) => Ok(n as usize),
            Err(e) if e == EAGAIN => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The connection's segment size.
    pub(crate) fn mss(&self) -> u32 {
        // SAFETY: a live socket.
        unsafe { b::softrnic_tcp_mss(self.raw.as_ptr()) }
    }

    /// No longer established (closed by the peer, reset, or failed).
    pub(crate) fn closed(&self) -> bool {
        // SAFETY: a live socket.
        unsafe { b::softrnic_tcp_closed(self.raw.as_ptr()) }
    }

    /// Still connecting (an active open whose handshake has not finished).
    pub(crate) fn connecting(&self) -> bool {
        // SAFETY: a live socket.
        unsafe { b::softrnic_tcp_connecting(self.raw.as_ptr()) }
    }

    /// The connection's pending error (a positive errno), or 0.
    pub(crate) fn error(&self) -> i32 {
        // SAFETY: a live socket.
        unsafe { b::softrnic_tcp_error(self.raw.as_ptr()) }
    }

    /// Run the handler's `work` in process context.
    pub(crate) fn defer(&self) {
        // SAFETY: a live socket.
        unsafe { b::softrnic_tcp_defer(self.raw.as_ptr(), 0) }
    }

    /// Run the handler's `work` in process context `msecs` from now (or
    /// sooner, if it is queued already).
    pub(crate) fn defer_after(&self, msecs: u32) {
        // SAFETY: a live socket.
        unsafe { b::softrnic_tcp_defer(self.raw.as_ptr(), msecs) }
    }
}

impl Tcp {
    pub(crate) fn send(&self, bytes: &[u8], more: bool) -> Result<usize> {
        self.as_ref().send(bytes, more)
    }

    /// Send the bytes of `frags`, in order, by reference: the count taken
    /// (0 when the socket is full).  The socket keeps its own reference on
    /// each page it took bytes of, and sends those bytes as they are when
    /// it sends: they must not change.  (At most `SEND_PAGES` pieces per
    /// call; a piece past its page is refused.)
    pub(crate) fn send_frags(&self, frags: &[Frag]) -> Result<usize> {
        let mut pages = [core::ptr::null_mut::<b::page>(); SEND_PAGES];
        let (mut offs, mut lens) = ([0u32; SEND_PAGES], [0u32; SEND_PAGES]);
        let n = core::cmp::min(frags.len(), SEND_PAGES);
        for (i, f) in frags.iter().take(n).enumerate() {
            (pages[i], offs[i], lens[i]) = (f.page.as_ptr(), f.off, f.len);
        }
        // SAFETY: a live socket; `pages` holds `n` pages that `frags`
        // references for the call; the shim checks each piece lies in its
        // page and takes its own references on those it keeps.
        let r = unsafe {
            b::softrnic_tcp_send_frags(
                self.raw.as_ptr(),
                pages.as_mut_ptr(),
                offs.as_ptr(),
                lens.as_ptr(),
                n as u32,
            )
        };
        match errno(r) {
            Ok(n) => Ok(n as usize),
            Err(e) if e == EAGAIN => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Send `buf` from `*off` until all is taken or the socket is full,
    /// advancing `*off`; an error when the connection is broken.
    pub(crate) fn send_from(&self, buf: &[u8], off: &mut usize) -> Result {
        while let Some(rest) = buf.get(*off..).filter(|r| !r.is_empty()) {
            match self.send(rest, false)? {
                0 => break,
                n => *off += n,
            }
        }
        Ok(())
    }

    pub(crate) fn mss(&self) -> u32 {
        self.as_ref().mss()
    }

    pub(crate) fn defer(&self) {
        self.as_ref().defer()
    }

    pub(crate) fn defer_after(&self, msecs: u32) {
        self.as_ref().defer_after(msecs)
    }
}

/// # Safety
/// Called by the shim with a `ctx` from `ctx_new` whose socket is live.
unsafe fn handler<'a>(ctx: *mut ffi::c_void) -> &'a Ctx {
    // SAFETY: per the contract.
    unsafe { &*ctx.cast::<Ctx>() }
}

fn lend<'a>(t: *mut b::softrnic_tcp) -> Option<TcpRef<'a>> {
    NonNull::new(t).map(|raw| TcpRef {
        raw,
        _p: core::marker::PhantomData,
    })
}

/// C entry: a released socket's context, no longer used.
#[no_mangle]
unsafe extern "C" fn softrnic_tcp_ctx_free(ctx: *mut ffi::c_void) {
    if let Some(c) = NonNull::new(ctx.cast::<Ctx>()) {
        // SAFETY: the shim passes each socket's context once, after its last
        // callback.
        unsafe { ctx_free(c) };
    }
}

/// Module exit: wait until every socket let go is closed.
pub(crate) fn exit() {
    // SAFETY: plain call.
    unsafe { b::softrnic_tcp_exit() };
}

/// C entry: a socket callback.
#[no_mangle]
unsafe extern "C" fn softrnic_tcp_event(
    ctx: *mut ffi::c_void,
    t: *mut b::softrnic_tcp,
    ev: ffi::c_int,
) {
    let ev = match ev as u32 {
        b::softrnic_tcp_event_SOFTRNIC_TCP_READABLE => TcpEvent::Readable,
        b::softrnic_tcp_event_SOFTRNIC_TCP_WRITABLE => TcpEvent::Writable,
        _ => TcpEvent::State,
    };
    if let Some(s) = lend(t) {
        // SAFETY: the shim calls with the socket's context while it lives.
        unsafe {
            let c = handler(ctx);
            (c.ops.event)(c.obj, s, ev)
        }
    }
}

/// C entry: the socket's deferred work.
#[no_mangle]
unsafe extern "C" fn softrnic_tcp_work(ctx: *mut ffi::c_void, t: *mut b::softrnic_tcp) {
    if let Some(s) = lend(t) {
        // SAFETY: as above.
        unsafe {
            let c = handler(ctx);
            (c.ops.work)(c.obj, s)
        }
    }
}

/// C entry: bytes read from the socket.
#[no_mangle]
unsafe extern "C" fn softrnic_tcp_bytes(
    ctx: *mut ffi::c_void,
    data: *const u8,
    len: usize,
) -> usize {
    if data.is_null() || len == 0 {
        return 0;
    }
    // SAFETY: the shim hands `len` readable bytes of an skb it holds for
    // the call.
    let bytes = unsafe { core::slice::from_raw_parts(data, len) };
    // SAFETY: as above.
    let taken = unsafe {
        let c = handler(ctx);
        (c.ops.bytes)(c.obj, bytes)
    };
    taken.min(len)
}
