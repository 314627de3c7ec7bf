// SPDX-License-Identifier: GPL-2.0
//! Restrack's driver details: `rdma resource show qp -d` asks
//! `fill_res_qp_entry` while ib_core builds its netlink answer.

use kernel::ffi;
use kernel::prelude::*;

use super::bindings as b;

/// Names a QP gives at most (`Qp::details`).
const MAX_DETAILS: usize = 24;

/// # Safety
/// Called only by ib_core's restrack, as an `ib_device_ops` member, with
/// the netlink message it is building and a QP of ours it holds a
/// reference on.
pub(super) unsafe extern "C" fn fill_res_qp_entry(
    msg: *mut b::sk_buff,
    ibqp: *mut b::ib_qp,
) -> ffi::c_int {
    // SAFETY: a live QP of ours (restrack holds its entry).
    let q = unsafe { super::verbs_ops::qp_ref(ibqp) };
    let mut items = [(c"", 0u64); MAX_DETAILS];
    let mut n = 0;
    q.details(&mut |name, v| {
        if let Some(slot) = items.get_mut(n) {
            *slot = (name, v);
            n += 1;
        }
    });
    // SAFETY: `msg` is the message being built.
    let nest = unsafe { b::softrnic_nl_driver_nest(msg) };
    if nest.is_null() {
        return EMSGSIZE.to_errno();
    }
    let ok = items[..n].iter().all(|(name, v)| {
        // SAFETY: `msg` is the message being built; `name` is a static,
        // NUL-terminated string.
        unsafe { b::rdma_nl_put_driver_u64(msg, name.as_char_ptr(), *v) == 0 }
    });
    // SAFETY: the nest opened above, in the same message.
    unsafe { b::softrnic_nl_nest_end(msg, nest, ok) };
    if ok {
        0
    } else {
        EMSGSIZE.to_errno()
    }
}
