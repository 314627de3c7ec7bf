// SPDX-License-Identifier: GPL-2.0
//! iWARP connection-management entry points (`iw_*` members of
//! `ib_device_ops`).  iw_cm calls them without checking for NULL, and rdma_cm
//! reaches them as soon as an iWARP device serves kernel verbs, so they must
//! exist.  Until the iWARP transport exists (MPA over TCP) they refuse
//! cleanly: a listen succeeds but never sees a request (rdma_cm listens on
//! every device for a wildcard address and fails the whole listen if one
//! device refuses), connecting fails, and `iw_get_qp` finds no QP, which
//! makes iw_cm fail connect and accept before it touches one (so the
//! reference ops are never reached).

use kernel::ffi;
use kernel::prelude::*;

use super::bindings as b;

/// # Safety
/// Called only by iw_cm (see the module documentation).
pub(super) unsafe extern "C" fn iw_create_listen(
    _id: *mut b::iw_cm_id,
    _backlog: ffi::c_int,
) -> ffi::c_int {
    0
}

/// # Safety
/// Called only by iw_cm.
pub(super) unsafe extern "C" fn iw_destroy_listen(_id: *mut b::iw_cm_id) -> ffi::c_int {
    0
}

/// # Safety
/// Called only by iw_cm.
pub(super) unsafe extern "C" fn iw_connect(
    _id: *mut b::iw_cm_id,
    _p: *mut b::iw_cm_conn_param,
) -> ffi::c_int {
    EOPNOTSUPP.to_errno()
}

/// # Safety
/// Called only by iw_cm.
pub(super) unsafe extern "C" fn iw_accept(
    _id: *mut b::iw_cm_id,
    _p: *mut b::iw_cm_conn_param,
) -> ffi::c_int {
    EOPNOTSUPP.to_errno()
}

/// # Safety
/// Called only by iw_cm.
pub(super) unsafe extern "C" fn iw_reject(
    _id: *mut b::iw_cm_id,
    _pdata: *const ffi::c_void,
    _len: u8,
) -> ffi::c_int {
    EOPNOTSUPP.to_errno()
}

/// # Safety
/// Called only by iw_cm.
pub(super) unsafe extern "C" fn iw_get_qp(
    _ib: *mut b::ib_device,
    _qpn: ffi::c_int,
) -> *mut b::ib_qp {
    core::ptr::null_mut()
}

/// # Safety
/// Called only by iw_cm, on a QP `iw_get_qp` returned (never: it returns none).
pub(super) unsafe extern "C" fn iw_add_ref(_qp: *mut b::ib_qp) {}

/// # Safety
/// As for `iw_add_ref`.
pub(super) unsafe extern "C" fn iw_rem_ref(_qp: *mut b::ib_qp) {}
