// SPDX-License-Identifier: GPL-2.0
//! Asynchronous events and completion notifications, raised on ib_core objects.
//! ib_core installed the handlers (uverbs event files or a kernel consumer's
//! callbacks); these wrappers only fill a `struct ib_event` and call them.

use super::bindings as b;

/// The IBTA asynchronous events softrnic raises.  QP request / access
/// errors, communication established and SRQ limit come from the transports
/// (they need traffic); the verbs layer raises the rest (QP fatal: a user
/// ring found corrupt).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    QpFatal,
    QpRequestErr,
    QpAccessErr,
    CommEstablished,
    SqDrained,
    LastWqeReached,
    SrqLimitReached,
    CqErr,
    DeviceFatal,
}

impl Event {
    fn raw(self) -> b::ib_event_type {
        match self {
            Event::QpFatal => b::ib_event_type_IB_EVENT_QP_FATAL,
            Event::QpRequestErr => b::ib_event_type_IB_EVENT_QP_REQ_ERR,
            Event::QpAccessErr => b::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            Event::CommEstablished => b::ib_event_type_IB_EVENT_COMM_EST,
            Event::SqDrained => b::ib_event_type_IB_EVENT_SQ_DRAINED,
            Event::LastWqeReached => b::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            Event::SrqLimitReached => b::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            Event::CqErr => b::ib_event_type_IB_EVENT_CQ_ERR,
            Event::DeviceFatal => b::ib_event_type_IB_EVENT_DEVICE_FATAL,
        }
    }
}

pub(crate) fn qp_event(qp: &super::objects::IbQp, ev: Event) {
    // SAFETY: `qp` is a live QP; the shim only reads it and calls the
    // consumer's handler (which ib_core set up for this QP).
    unsafe { b::softrnic_qp_event(qp.as_ptr(), ev.raw()) }
}

pub(crate) fn cq_event(cq: &super::objects::IbCq, ev: Event) {
    // SAFETY: as in `qp_event`.
    unsafe { b::softrnic_cq_event(cq.as_ptr(), ev.raw()) }
}

#[allow(dead_code)] // SRQ limit: raised when the transports consume receives.
pub(crate) fn srq_event(srq: &super::objects::IbSrq, ev: Event) {
    // SAFETY: as in `qp_event`.
    unsafe { b::softrnic_srq_event(srq.as_ptr(), ev.raw()) }
}

/// A completion event for an armed CQ (ib_uverbs queues it on the CQ's
/// completion channel; kernel consumers get their comp_handler called).
pub(crate) fn cq_notify(cq: &super::objects::IbCq) {
    // SAFETY: as in `qp_event`.
    unsafe { b::softrnic_cq_notify(cq.as_ptr()) }
}

pub(crate) fn device_event(ib: *mut b::ib_device, ev: Event) {
    // SAFETY: callers pass a registered device of ours.
    unsafe { b::softrnic_dispatch_port_event(ib, 1, ev.raw()) }
}
