// SPDX-License-Identifier: GPL-2.0
//! iWARP connection-management entry points (`iw_*` members of
//! `ib_device_ops`), and `CmId`, a held `iw_cm_id` through which the
//! connection manager (`transport/iwarp/cm.rs`) raises events.  The entry
//! points only forward.
//!
//! The provider data of a cm_id is one reference on our object for it: a
//! listener (set by `iw_create_listen`, taken back by `iw_destroy_listen`)
//! or a passive connection endpoint (set by iw_cm from our CONNECT_REQUEST
//! event; taken back by `iw_accept` or `iw_reject`, or when iw_cm refused
//! the event).

use core::ptr::NonNull;

use kernel::ffi;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::bindings as b;
use super::tcp::SockAddr;
use crate::transport::iwarp::cm::{self, Cep, Listener};

/// An iw_cm_id we hold a reference on (`add_ref`), let go on drop.
pub(crate) struct CmId(NonNull<b::iw_cm_id>);

// SAFETY: iw_cm's reference counting and event handler may be used from any
// context (the handler allocates atomically and queues work).
unsafe impl Send for CmId {}
// SAFETY: as above; we only read fields iw_cm set before handing us the id.
unsafe impl Sync for CmId {}

/// The kinds of event a provider raises.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CmEventKind {
    ConnectRequest,
    ConnectReply,
    Established,
    Disconnect,
    Close,
}

/// One event for iw_cm (it copies the private data before returning).
pub(crate) struct CmEvent<'a> {
    pub(crate) kind: CmEventKind,
    pub(crate) status: i32,
    pub(crate) local: SockAddr,
    pub(crate) remote: SockAddr,
    pub(crate) private: &'a [u8],
    pub(crate) ird: u8,
    pub(crate) ord: u8,
}

impl CmId {
    /// # Safety
    /// `p` is a live iw_cm_id handed to us by iw_cm.
    unsafe fn hold(p: *mut b::iw_cm_id) -> Option<CmId> {
        let id = NonNull::new(p)?;
        // SAFETY: per the contract; iw_cm sets add_ref before calling us.
        unsafe {
            if let Some(f) = (*p).add_ref {
                f(p);
            }
        }
        Some(CmId(id))
    }

    /// Another reference.
    pub(crate) fn clone_held(&self) -> CmId {
        let p = self.0.as_ptr();
        // SAFETY: we hold a reference, so the id is live.
        unsafe {
            if let Some(f) = (*p).add_ref {
                f(p);
            }
        }
        CmId(self.0)
    }

    /// The (mapped) local and remote addresses.
    pub(crate) fn addrs(&self) -> (SockAddr, SockAddr) {
        // SAFETY: a live id; iw_cm set the addresses before calling us.
        unsafe {
            let p = self.0.as_ptr();
            (SockAddr((*p).m_local_addr), SockAddr((*p).m_remote_addr))
        }
    }

    /// An IPv6 listen that must not take IPv4 connections.
    pub(crate) fn afonly(&self) -> bool {
        // SAFETY: as above.
        unsafe { (*self.0.as_ptr()).afonly() }
    }

    /// Raise `ev` (any context): the status iw_cm returned.
    pub(crate) fn event(&self, ev: &CmEvent<'_>) -> i32 {
        self.raise(ev, core::ptr::null_mut())
    }

    /// Raise a CONNECT_REQUEST for `cep` (any context): iw_cm keeps the
    /// reference as the new id's provider data, or, refusing the event,
    /// gives it back.
    pub(crate) fn request(&self, ev: &CmEvent<'_>, cep: Arc<Cep>) -> Result<(), Arc<Cep>> {
        let raw = Arc::into_raw(cep);
        if self.raise(ev, raw.cast_mut().cast()) == 0 {
            return Ok(());
        }
        // SAFETY: from `into_raw` above; iw_cm did not keep it.
        Err(unsafe { Arc::from_raw(raw) })
    }

    /// Raise `ev` with `provider` as its provider data.
    fn raise(&self, ev: &CmEvent<'_>, provider: *mut ffi::c_void) -> i32 {
        // SAFETY: an all-zero iw_cm_event is valid.
        let mut e: b::iw_cm_event = unsafe { core::mem::zeroed() };
        e.event = match ev.kind {
            CmEventKind::ConnectRequest => b::iw_cm_event_type_IW_CM_EVENT_CONNECT_REQUEST,
            CmEventKind::ConnectReply => b::iw_cm_event_type_IW_CM_EVENT_CONNECT_REPLY,
            CmEventKind::Established => b::iw_cm_event_type_IW_CM_EVENT_ESTABLISHED,
            CmEventKind::Disconnect => b::iw_cm_event_type_IW_CM_EVENT_DISCONNECT,
            CmEventKind::Close => b::iw_cm_event_type_IW_CM_EVENT_CLOSE,
        };
        e.status = ev.status;
        e.local_addr = ev.local.0;
        e.remote_addr = ev.remote.0;
        let n = ev.private.len().min(usize::from(u8::MAX));
        if n > 0 {
            e.private_data = ev.private.as_ptr().cast_mut().cast();
        }
        e.private_data_len = n as u8;
        e.provider_data = provider;
        e.ird = ev.ird;
        e.ord = ev.ord;
        let p = self.0.as_ptr();
        // SAFETY: a live id; iw_cm's handler copies what it keeps.
        unsafe {
            match (*p).event_handler {
                Some(f) => f(p, &mut e),
                None => EINVAL.to_errno(),
            }
        }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        let p = self.0.as_ptr();
        // SAFETY: gives back the reference `hold` took.
        unsafe {
            if let Some(f) = (*p).rem_ref {
                f(p);
            }
        }
    }
}

/// The connection parameters of an accept or connect.
pub(crate) struct ConnParam<'a> {
    pub(crate) private: &'a [u8],
    pub(crate) ord: u32,
    pub(crate) ird: u32,
    pub(crate) qpn: u32,
}

/// # Safety
/// `p` is a valid iw_cm_conn_param, alive for `'a`.
unsafe fn conn_param<'a>(p: *const b::iw_cm_conn_param) -> ConnParam<'a> {
    // SAFETY: per the contract; the private data has its length.
    unsafe {
        let len = usize::from((*p).private_data_len);
        let private = if (*p).private_data.is_null() || len == 0 {
            &[][..]
        } else {
            core::slice::from_raw_parts((*p).private_data.cast::<u8>(), len)
        };
        ConnParam {
            private,
            ord: (*p).ord,
            ird: (*p).ird,
            qpn: (*p).qpn,
        }
    }
}

/// # Safety
/// Called only by iw_cm.
pub(super) unsafe extern "C" fn iw_create_listen(
    id: *mut b::iw_cm_id,
    backlog: ffi::c_int,
) -> ffi::c_int {
    // SAFETY: a live id on one of our devices.
    let (dev, held) = unsafe { (super::dev_of((*id).device), CmId::hold(id)) };
    let Some(held) = held else {
        return EINVAL.to_errno();
    };
    match cm::listen(&dev, held, backlog) {
        // SAFETY: the id is ours to annotate until iw_destroy_listen.
        Ok(l) => unsafe {
            (*id).provider_data = Arc::into_raw(l).cast_mut().cast();
            0
        },
        Err(e) => e.to_errno(),
    }
}

/// # Safety
/// Called only by iw_cm, on an id `iw_create_listen` succeeded on.
pub(super) unsafe extern "C" fn iw_destroy_listen(id: *mut b::iw_cm_id) -> ffi::c_int {
    // SAFETY: the reference iw_create_listen stored, given back once.
    let l = unsafe { take_provider::<Listener>(id) };
    if let Some(l) = l {
        l.stop();
    }
    0
}

/// # Safety
/// Called only by iw_cm.
pub(super) unsafe extern "C" fn iw_connect(
    id: *mut b::iw_cm_id,
    p: *mut b::iw_cm_conn_param,
) -> ffi::c_int {
    // SAFETY: a live id on one of our devices and valid parameters.
    let (dev, held, param) =
        unsafe { (super::dev_of((*id).device), CmId::hold(id), conn_param(p)) };
    let Some(held) = held else {
        return EINVAL.to_errno();
    };
    // The endpoint lives on in its socket and then in the QP: no
    // provider data (no later op of the active side would give it back).
    match cm::connect(&dev, held, &param) {
        Ok(_) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Take back the reference stored in an id's provider data (null after).
///
/// # Safety
/// `id` is a live id whose provider data, if set, is one reference on a
/// `T` from `Arc::into_raw`.
unsafe fn take_provider<T>(id: *mut b::iw_cm_id) -> Option<Arc<T>> {
    // SAFETY: per the contract.
    unsafe {
        let p = core::mem::replace(&mut (*id).provider_data, core::ptr::null_mut());
        (!p.is_null()).then(|| Arc::from_raw(p.cast::<T>()))
    }
}

/// # Safety
/// Called only by iw_cm, on the id of a CONNECT_REQUEST we raised.
pub(super) unsafe extern "C" fn iw_accept(
    id: *mut b::iw_cm_id,
    p: *mut b::iw_cm_conn_param,
) -> ffi::c_int {
    // SAFETY: a live id and valid parameters.
    let (cep, held, param) = unsafe { (take_provider::<Cep>(id), CmId::hold(id), conn_param(p)) };
    let (Some(cep), Some(held)) = (cep, held) else {
        return EINVAL.to_errno();
    };
    super::errno(cep.accept(held, &param))
}

/// # Safety
/// Called only by iw_cm, on the id of a CONNECT_REQUEST we raised.
pub(super) unsafe extern "C" fn iw_reject(
    id: *mut b::iw_cm_id,
    pdata: *const ffi::c_void,
    len: u8,
) -> ffi::c_int {
    // SAFETY: a live id; `pdata` has `len` bytes.
    let (cep, private) = unsafe {
        let private = if pdata.is_null() {
            &[][..]
        } else {
            core::slice::from_raw_parts(pdata.cast::<u8>(), usize::from(len))
        };
        (take_provider::<Cep>(id), private)
    };
    match cep {
        Some(c) => {
            c.reject(private);
            0
        }
        None => EINVAL.to_errno(),
    }
}

/// # Safety
/// Called only by iw_cm.
pub(super) unsafe extern "C" fn iw_get_qp(ib: *mut b::ib_device, qpn: ffi::c_int) -> *mut b::ib_qp {
    // SAFETY: one of our live devices.
    let dev = unsafe { super::dev_of(ib) };
    // The pointer outlives the lookup: iw_cm uses it while the consumer
    // keeps the QP (it destroys the QP only after the connection's id).
    match dev.verbs().qps.get(qpn as u32) {
        Some(q) => q.ib.as_ptr(),
        None => core::ptr::null_mut(),
    }
}

/// # Safety
/// Called only by iw_cm, on a QP `iw_get_qp` returned (alive until its
/// references are given back: destroy waits for them).
pub(super) unsafe extern "C" fn iw_add_ref(qp: *mut b::ib_qp) {
    // SAFETY: per the contract; our QPs embed their ib_qp first.
    let q = unsafe { &*qp.cast::<crate::verbs::qp::Qp>() };
    q.iw_refs.fetch_add(1, core::sync::atomic::Ordering::AcqRel);
}

/// # Safety
/// As for `iw_add_ref`, on a reference it took.
pub(super) unsafe extern "C" fn iw_rem_ref(qp: *mut b::ib_qp) {
    // SAFETY: as above; the reference keeps the QP alive.
    let q = unsafe { &*qp.cast::<crate::verbs::qp::Qp>() };
    q.iw_refs.fetch_sub(1, core::sync::atomic::Ordering::AcqRel);
}
