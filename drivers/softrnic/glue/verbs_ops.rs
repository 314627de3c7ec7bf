// SPDX-License-Identifier: GPL-2.0
//! `ib_device_ops` members for the verbs objects: each one turns ib_core's
//! raw pointers into our objects (the Rust part follows the ib_* struct ib_core
//! allocated), reads and writes udata, and calls the rules in `verbs/`.
//!
//! Every function here is called only by ib_core with the pointers its
//! `ib_device_ops` contract promises (our device, objects it allocated with
//! our sizes, valid attribute structs, NULL or valid udata).

use core::ptr::{addr_of_mut, null_mut, NonNull};

use kernel::ffi;
use kernel::prelude::*;

use super::bindings as b;
use super::events::{self, Event};
use super::ring::UserCtx;
use super::table::Ref;
use super::umem::Umem;
use super::{check, dev, errno, IbDevice};
use crate::abi::{self, Cqe, SendWqe, Sge};
use crate::glue::memory::{KernelPages, KernelVa, PinnedPages};
use crate::glue::objects::Held;
use crate::qp_state::{self, attr, QpState, QpType};
use crate::transport::iwarp::join as iw_join;
use crate::verbs::ah::{self, Ah, Av};
use crate::verbs::cq::{self, Cq, CqState};
use crate::verbs::mcast;
use crate::verbs::mr::{self, Mr, MrKind, MrState, Mw};
use crate::verbs::qp::{self, After, Caps, Qp, QpQueues};
use crate::verbs::srq::{self, Srq, SrqState};
use crate::verbs::{self, Kind};

/// The user context of a verb called through uverbs (None for kernel callers).
fn user_ctx(udata: *mut b::ib_udata) -> Option<UserCtx> {
    if udata.is_null() {
        return None;
    }
    // SAFETY: a non-NULL udata from ib_core is embedded in a uverbs bundle.
    NonNull::new(unsafe { b::softrnic_udata_ucontext(udata) }).map(UserCtx)
}

/// Copy a response to user space (as much as the caller's buffer holds).
pub(super) fn respond<T: Copy>(udata: *mut b::ib_udata, resp: &T) -> Result {
    if udata.is_null() {
        return Ok(());
    }
    // SAFETY: valid udata (non-NULL, from ib_core).
    let len = core::cmp::min(unsafe { b::softrnic_udata_outlen(udata) }, size_of::<T>());
    if len == 0 {
        return Ok(());
    }
    // SAFETY: `resp` is `len` readable bytes; the shim checks the user buffer.
    check(unsafe { b::softrnic_copy_to_udata(udata, core::ptr::from_ref(resp).cast(), len) })
}

/// Read a driver command from udata; a shorter input is zero-extended.
fn command<T: Copy + Default>(udata: *mut b::ib_udata) -> Result<T> {
    let mut cmd = T::default();
    if udata.is_null() {
        return Ok(cmd);
    }
    // SAFETY: valid udata.
    let len = core::cmp::min(unsafe { b::softrnic_udata_inlen(udata) }, size_of::<T>());
    if len > 0 {
        // SAFETY: `cmd` has room for `len` bytes; the shim checks the source.
        check(unsafe {
            b::softrnic_copy_from_udata(core::ptr::from_mut(&mut cmd).cast(), udata, len)
        })?;
    }
    Ok(cmd)
}

fn err_ptr<T>(e: Error) -> *mut T {
    e.to_ptr()
}

// ---------------------------------------------------------------------------
// User context and PD

pub(super) fn charge_ucontext(ib: *mut b::ib_device) -> Result {
    // SAFETY: ib_core passes our device.
    let d = unsafe { dev(ib) };
    d.verbs().charge(Kind::Ucontext, d.limits())
}

pub(super) fn uncharge_ucontext(ib: *mut b::ib_device) {
    // SAFETY: ib_core passes our device.
    unsafe { dev(ib) }.verbs().uncharge(Kind::Ucontext)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn alloc_pd(
    pd: *mut b::ib_pd,
    _udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: ib_core passes a PD whose device is ours.
    let d = unsafe { dev((*pd).device) };
    errno(d.verbs().charge(Kind::Pd, d.limits()))
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn dealloc_pd(
    pd: *mut b::ib_pd,
    _udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: as in alloc_pd.
    unsafe { dev((*pd).device) }.verbs().uncharge(Kind::Pd);
    0
}

// ---------------------------------------------------------------------------
// CQ

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn create_cq(
    ibcq: *mut b::ib_cq,
    attr: *const b::ib_cq_init_attr,
    attrs: *mut b::uverbs_attr_bundle,
) -> ffi::c_int {
    // SAFETY: ib_core passes a CQ of our size, whose device is ours, and a
    // valid attribute struct; `attrs` is NULL or a valid bundle.
    let (d, a, udata) = unsafe { (dev((*ibcq).device), &*attr, b::softrnic_bundle_udata(attrs)) };
    if a.flags != 0 {
        return refuse!(
            EOPNOTSUPP,
            "create_cq: flags {:#x} not supported\n",
            a.flags
        )
        .to_errno();
    }
    let vectors = super::comp_vectors();
    if a.comp_vector >= vectors {
        return refuse!(
            EINVAL,
            "create_cq: completion vector {} (the device has {})\n",
            a.comp_vector,
            vectors
        )
        .to_errno();
    }
    let result = (|| -> Result {
        let state = CqState::new(user_ctx(udata), a.cqe, d.limits().max_cqe)?;
        respond(udata, &abi::CreateCqResp { cq: state.info() })?;
        d.verbs().charge(Kind::Cq, d.limits())?;
        let p = ibcq.cast::<Cq>();
        // SAFETY: `p` is our CQ (ib_core allocated size_of::<Cq>() bytes,
        // zeroed, and never moves it); `inner` is initialised exactly once
        // here and dropped in destroy_cq.
        unsafe {
            (*(*p).ib.as_ptr()).cqe = state.depth() as i32;
            pin_init::raw_init(addr_of_mut!((*p).inner), cq::new_inner(state));
        }
        Ok(())
    })();
    errno(result)
}

/// # Safety
/// See the module documentation; `ibcq` was created by `create_cq`.
unsafe fn cq_ref<'a>(ibcq: *mut b::ib_cq) -> &'a Cq {
    // SAFETY: per the contract.
    unsafe { &*ibcq.cast::<Cq>() }
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn destroy_cq(
    ibcq: *mut b::ib_cq,
    _udata: *mut b::ib_udata,
) -> ffi::c_int {
    let p = ibcq.cast::<Cq>();
    // SAFETY: a CQ create_cq initialised; ib_core destroys it once, with no
    // QP using it (its use count is zero), so nothing else touches `inner`.
    unsafe {
        let d = dev((*(*p).ib.as_ptr()).device);
        core::ptr::drop_in_place(addr_of_mut!((*p).inner));
        d.verbs().uncharge(Kind::Cq);
    }
    0
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn resize_user_cq(
    ibcq: *mut b::ib_cq,
    cqe: ffi::c_uint,
    udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: a live CQ of ours.
    let (c, d) = unsafe { (cq_ref(ibcq), dev((*ibcq).device)) };
    let result = (|| -> Result {
        let next = CqState::new(user_ctx(udata), cqe, d.limits().max_cqe)?;
        let info = next.info();
        let depth = next.depth();
        let swapped = {
            let mut st = c.inner.lock();
            let r = st.resize(next);
            if r.is_ok() {
                // SAFETY: a live CQ; ib_uverbs runs resizes of one CQ
                // concurrently (read lock only), so `cqe` is written under
                // our CQ lock, with the swap.
                unsafe { (*ibcq).cqe = depth as i32 };
            }
            r
        };
        // Rings are dropped here, outside the lock (removing a user ring's
        // mmap entry may sleep).
        match swapped {
            Ok(old) => drop(old),
            Err((e, unused)) => {
                drop(unused);
                return Err(e);
            }
        }
        // The resize is committed: if this copy fails, user space keeps its
        // old (still mapped, no longer written) ring.
        respond(udata, &abi::CreateCqResp { cq: info })
    })();
    errno(result)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn modify_cq(
    ibcq: *mut b::ib_cq,
    count: u16,
    period: u16,
) -> ffi::c_int {
    // SAFETY: a live CQ of ours.
    unsafe { cq_ref(ibcq) }
        .inner
        .lock()
        .set_moderation(count, period);
    0
}

fn wc_opcode_to_ib(op: u8) -> b::ib_wc_opcode {
    match op {
        abi::WC_REG_MR => b::ib_wc_opcode_IB_WC_REG_MR,
        // The other codes are the uverbs values ib_wc_opcode is defined by.
        other => b::ib_wc_opcode::from(other),
    }
}

fn wc_flags_to_ib(c: &Cqe) -> ffi::c_int {
    let mut f = 0;
    if c.wc_flags & abi::WC_GRH != 0 {
        f |= b::ib_wc_flags_IB_WC_GRH;
    }
    if c.wc_flags & abi::WC_WITH_IMM != 0 {
        f |= b::ib_wc_flags_IB_WC_WITH_IMM;
    }
    if c.wc_flags & abi::WC_WITH_INV != 0 {
        f |= b::ib_wc_flags_IB_WC_WITH_INVALIDATE;
    }
    if c.opcode & abi::WC_RECV != 0 && c.src_qp != 0 {
        f |= b::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE | b::ib_wc_flags_IB_WC_WITH_SMAC;
    }
    f as ffi::c_int
}

/// # Safety
/// See the module documentation; `wc` has room for `n` entries.
pub(super) unsafe extern "C" fn poll_cq(
    ibcq: *mut b::ib_cq,
    n: ffi::c_int,
    wc: *mut b::ib_wc,
) -> ffi::c_int {
    // SAFETY: a live CQ of ours.
    let c = unsafe { cq_ref(ibcq) };
    let mut s = c.inner.lock();
    let mut done = 0;
    while done < n {
        let Some(cqe) = s.pop() else { break };
        // SAFETY: `wc` has room for `n` entries (contract), done < n.
        let w = unsafe { &mut *wc.add(done as usize) };
        *w = b::ib_wc::default();
        w.__bindgen_anon_1.wr_id = cqe.wr_id;
        w.status = b::ib_wc_status::from(cqe.status);
        w.opcode = wc_opcode_to_ib(cqe.opcode);
        w.vendor_err = cqe.vendor_err;
        w.byte_len = cqe.byte_len;
        w.qp = cqe.kernel_qp as *mut b::ib_qp;
        w.ex.imm_data = cqe.ex;
        w.src_qp = cqe.src_qp;
        w.slid = u32::from(cqe.slid);
        w.wc_flags = wc_flags_to_ib(&cqe);
        w.pkey_index = cqe.pkey_index;
        w.sl = cqe.sl;
        w.dlid_path_bits = cqe.dlid_path_bits;
        w.port_num = u32::from(cqe.port_num);
        w.smac = cqe.smac;
        w.network_hdr_type = cqe.network_hdr_type;
        done += 1;
    }
    done
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn peek_cq(ibcq: *mut b::ib_cq, n: ffi::c_int) -> ffi::c_int {
    // SAFETY: a live CQ of ours.
    let c = unsafe { cq_ref(ibcq) };
    c.inner.lock().peek(n.max(0) as u32) as ffi::c_int
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn req_notify_cq(
    ibcq: *mut b::ib_cq,
    flags: b::ib_cq_notify_flags,
) -> ffi::c_int {
    // SAFETY: a live CQ of ours.
    let c = unsafe { cq_ref(ibcq) };
    c.inner.lock().arm(flags)
}

// ---------------------------------------------------------------------------
// Address vectors

/// The RoCEv2 address vector of an ah_attr (ib_core has resolved the source
/// GID attribute and the destination MAC).  EINVAL without a GRH, for a
/// non-RoCEv2 GID, or when source and destination address families differ.
fn av_from(a: &b::rdma_ah_attr) -> Result<Av> {
    if a.type_ != b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
        || u32::from(a.ah_flags) & b::ib_ah_flags_IB_AH_GRH == 0
        || a.grh.sgid_attr.is_null()
    {
        return Err(EINVAL);
    }
    // SAFETY: ib_core holds a reference on the sgid attribute for the call.
    let sgid_attr = unsafe { &*a.grh.sgid_attr };
    if sgid_attr.gid_type != b::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP {
        return Err(EINVAL);
    }
    // SAFETY: `raw` is the byte view of the GID unions.
    let (sgid, dgid) = unsafe { (sgid_attr.gid.raw, a.grh.dgid.raw) };
    let ipv4 = ah::is_v4_mapped(&sgid);
    if ipv4 != ah::is_v4_mapped(&dgid) {
        return Err(EINVAL);
    }
    // SAFETY: `roce` is the union member for RDMA_AH_ATTR_TYPE_ROCE.
    let dmac = unsafe { a.__bindgen_anon_1.roce.dmac };
    Ok(Av {
        dgid,
        sgid,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        sl: a.sl,
        flow_label: a.grh.flow_label,
        dmac,
        ipv4,
    })
}

fn av_to(av: &Av, a: &mut b::rdma_ah_attr) {
    *a = b::rdma_ah_attr::default();
    a.type_ = b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    a.ah_flags = b::ib_ah_flags_IB_AH_GRH as u8;
    a.port_num = 1;
    a.sl = av.sl;
    a.grh.dgid.raw = av.dgid;
    a.grh.sgid_index = av.sgid_index;
    a.grh.hop_limit = av.hop_limit;
    a.grh.traffic_class = av.traffic_class;
    a.grh.flow_label = av.flow_label;
    a.__bindgen_anon_1.roce.dmac = av.dmac;
}

// ---------------------------------------------------------------------------
// AH

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn create_ah(
    ibah: *mut b::ib_ah,
    init: *mut b::rdma_ah_init_attr,
    udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: an AH of our size on our device; a valid init attr.
    let (d, init) = unsafe { (dev((*ibah).device), &*init) };
    if d.driver().transport == crate::device::Transport::Iwarp {
        return refuse!(
            EOPNOTSUPP,
            "create_ah: an iWARP device has no address handles (no UD)\n"
        )
        .to_errno();
    }
    if init.ah_attr.is_null() {
        return EINVAL.to_errno();
    }
    let atomic = init.flags & b::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE == 0;
    let result = (|| -> Result {
        // SAFETY: non-NULL attr from ib_core.
        let av = av_from(unsafe { &*init.ah_attr })?;
        d.verbs().charge(Kind::Ah, d.limits())?;
        let p = ibah.cast::<Ah>();
        let num = match d.verbs().ahs.reserve(1, d.limits().max_ah, atomic) {
            Ok(n) => n,
            Err(e) => {
                d.verbs().uncharge(Kind::Ah);
                return Err(e);
            }
        };
        // SAFETY: our AH memory, not yet published: nobody else reads it.
        unsafe {
            addr_of_mut!((*p).av).write(av);
            (*p).num = num;
        }
        if let Err(e) = respond(
            udata,
            &abi::CreateAhResp {
                ah_num: num,
                reserved: 0,
            },
        ) {
            d.verbs().ahs.erase(num);
            d.verbs().uncharge(Kind::Ah);
            return Err(e);
        }
        // SAFETY: fully built; valid until destroy_ah erases it.
        unsafe { d.verbs().ahs.publish_plain(num, p) };
        Ok(())
    })();
    errno(result)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn destroy_ah(ibah: *mut b::ib_ah, _flags: u32) -> ffi::c_int {
    let p = ibah.cast::<Ah>();
    // SAFETY: an AH create_ah made; the table reads copy under the table
    // lock, so erasing it under that lock ends every use.
    unsafe {
        let d = dev((*(*p).ib.as_ptr()).device);
        d.verbs().ahs.erase((*p).num);
        d.verbs().uncharge(Kind::Ah);
    }
    0
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn query_ah(
    ibah: *mut b::ib_ah,
    out: *mut b::rdma_ah_attr,
) -> ffi::c_int {
    let p = ibah.cast::<Ah>();
    // SAFETY: a live AH of ours; `out` is writable.
    let (d, num) = unsafe { (dev((*(*p).ib.as_ptr()).device), (*p).num) };
    // SAFETY: AV_OFFSET is the offset of the Av field.
    match unsafe { d.verbs().ahs.read::<Av>(num, ah::AV_OFFSET) } {
        Some(av) => {
            // SAFETY: writable attr from ib_core.
            av_to(&av, unsafe { &mut *out });
            0
        }
        None => EINVAL.to_errno(),
    }
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn modify_ah(
    ibah: *mut b::ib_ah,
    a: *mut b::rdma_ah_attr,
) -> ffi::c_int {
    let p = ibah.cast::<Ah>();
    // SAFETY: a live AH of ours; a valid attr.
    let (d, num, a) = unsafe { (dev((*(*p).ib.as_ptr()).device), (*p).num, &*a) };
    match av_from(a) {
        // SAFETY: AV_OFFSET is the offset of the Av field.
        Ok(av) => errno(unsafe { d.verbs().ahs.write(num, ah::AV_OFFSET, &av) }),
        Err(e) => e.to_errno(),
    }
}

// ---------------------------------------------------------------------------
// SRQ

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn create_srq(
    ibsrq: *mut b::ib_srq,
    init: *mut b::ib_srq_init_attr,
    udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: an SRQ of our size on our device; a valid init attr.
    let (d, init) = unsafe { (dev((*ibsrq).device), &mut *init) };
    if init.srq_type != b::ib_srq_type_IB_SRQT_BASIC {
        return refuse!(
            EOPNOTSUPP,
            "create_srq: only basic SRQs (no XRC or tag matching)\n"
        )
        .to_errno();
    }
    let result = (|| -> Result {
        let state = SrqState::new(
            user_ctx(udata),
            init.attr.max_wr,
            init.attr.max_sge,
            d.limits(),
        )?;
        init.attr.max_wr = state.max_wr();
        init.attr.max_sge = state.max_sge;
        respond(
            udata,
            &abi::CreateSrqResp {
                rq: state.info(),
                srqn: 0,
                reserved: 0,
            },
        )?;
        d.verbs().charge(Kind::Srq, d.limits())?;
        let p = ibsrq.cast::<Srq>();
        // SAFETY: our SRQ memory (zeroed, pinned); `inner` initialised once
        // here and dropped in destroy_srq.
        unsafe {
            pin_init::raw_init(addr_of_mut!((*p).inner), srq::new_inner(state));
        }
        Ok(())
    })();
    errno(result)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn modify_srq(
    ibsrq: *mut b::ib_srq,
    a: *mut b::ib_srq_attr,
    mask: b::ib_srq_attr_mask,
    udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: a live SRQ of ours; a valid attr.
    let (d, s, a) = unsafe { (dev((*ibsrq).device), &*ibsrq.cast::<Srq>(), &*a) };
    let known = b::ib_srq_attr_mask_IB_SRQ_MAX_WR | b::ib_srq_attr_mask_IB_SRQ_LIMIT;
    if mask & !known != 0 {
        return EINVAL.to_errno();
    }
    let limit = (mask & b::ib_srq_attr_mask_IB_SRQ_LIMIT != 0).then_some(a.srq_limit);
    let result = (|| -> Result {
        if mask & b::ib_srq_attr_mask_IB_SRQ_MAX_WR == 0 {
            if let Some(limit) = limit {
                s.inner.lock().set_limit(limit)?;
            }
            return Ok(());
        }
        let uctx = user_ctx(udata);
        let cmd: abi::ModifySrqCmd = command(udata)?;
        if uctx.is_some() && cmd.queue_info_addr == 0 {
            return Err(EINVAL);
        }
        let max_sge = s.inner.lock().max_sge;
        let next = SrqState::new(uctx, a.max_wr, max_sge, d.limits())?;
        // Check the new limit against the new depth before changing
        // anything: a failed modify leaves the SRQ as it was.
        if limit.is_some_and(|l| l > next.max_wr()) {
            return Err(EINVAL);
        }
        let info = next.info();
        let swapped = {
            let mut st = s.inner.lock();
            let r = st.resize(next);
            if let (Ok(_), Some(l)) = (&r, limit) {
                // Cannot fail: checked against the new depth above.
                let _ = st.set_limit(l);
            }
            r
        };
        // Rings are dropped outside the lock (removing an mmap entry sleeps).
        match swapped {
            Ok(old) => drop(old),
            Err((e, unused)) => {
                drop(unused);
                return Err(e);
            }
        }
        if uctx.is_some() {
            // The resize is committed; if this copy fails user space keeps
            // posting to its old ring, which is no longer read.
            // SAFETY: `info` is plain data; the shim checks the user address.
            check(unsafe {
                b::softrnic_copy_to_user(
                    cmd.queue_info_addr,
                    core::ptr::from_ref(&info).cast(),
                    size_of::<abi::QueueInfo>(),
                )
            })?;
        }
        Ok(())
    })();
    errno(result)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn query_srq(
    ibsrq: *mut b::ib_srq,
    a: *mut b::ib_srq_attr,
) -> ffi::c_int {
    // SAFETY: a live SRQ of ours; a writable attr.
    let (s, a) = unsafe { (&*ibsrq.cast::<Srq>(), &mut *a) };
    let st = s.inner.lock();
    a.max_wr = st.max_wr();
    a.max_sge = st.max_sge;
    a.srq_limit = st.limit;
    0
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn destroy_srq(
    ibsrq: *mut b::ib_srq,
    _udata: *mut b::ib_udata,
) -> ffi::c_int {
    let p = ibsrq.cast::<Srq>();
    // SAFETY: an SRQ create_srq initialised, destroyed once with no QP left
    // on it (ib_core checks the use count).
    unsafe {
        let d = dev((*(*p).ib.as_ptr()).device);
        core::ptr::drop_in_place(addr_of_mut!((*p).inner));
        d.verbs().uncharge(Kind::Srq);
    }
    0
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut b::ib_srq,
    wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> ffi::c_int {
    // SAFETY: a live SRQ of ours.
    let s = unsafe { &*ibsrq.cast::<Srq>() };
    let mut st = s.inner.lock();
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a valid WR chain from a kernel consumer.
        let w = unsafe { &*cur };
        // SAFETY: wr_id and wr_cqe share the union; we keep the bits.
        let wr_id = unsafe { w.__bindgen_anon_1.wr_id };
        // SAFETY: as above; `recv_sges` checks the count.
        let r = unsafe { recv_sges(w) }.and_then(|sges| st.post(wr_id, sges));
        if let Err(e) = r {
            // SAFETY: `bad` is writable (contract).
            unsafe { *bad = cur };
            return e.to_errno();
        }
        cur = w.next;
    }
    0
}

/// The Sges of a receive WR (ib_sge and abi::Sge share one layout).
///
/// # Safety
/// `w.sg_list` holds `w.num_sge` entries.
unsafe fn recv_sges(w: &b::ib_recv_wr) -> Result<&[Sge]> {
    if w.num_sge < 0 || w.num_sge as u32 > 1024 || (w.num_sge > 0 && w.sg_list.is_null()) {
        return Err(EINVAL);
    }
    if w.num_sge == 0 {
        return Ok(&[]);
    }
    // SAFETY: per the contract; ib_sge is {u64 addr, u32 length, u32 lkey},
    // the layout of abi::Sge (checked below at compile time).
    Ok(unsafe { core::slice::from_raw_parts(w.sg_list.cast::<Sge>(), w.num_sge as usize) })
}

const _: () = assert!(size_of::<b::ib_sge>() == size_of::<Sge>());
const _: () = assert!(b::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV == abi::WR_RDMA_READ_WITH_INV);

// ---------------------------------------------------------------------------
// QP

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn create_qp(
    ibqp: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: a QP of our size on our device; a valid init attr.
    let (d, init) = unsafe { (dev((*ibqp).device), &mut *init) };
    let transport = d.driver().transport;
    let iwarp = transport == crate::device::Transport::Iwarp;
    let Some(ty) = QpType::from_raw(init.qp_type) else {
        return refuse!(
            EOPNOTSUPP,
            "create_qp: QP type {} not supported (RC, UC, UD, GSI)\n",
            init.qp_type
        )
        .to_errno();
    };
    if iwarp && ty != QpType::Rc {
        return refuse!(EOPNOTSUPP, "create_qp: an iWARP device has RC QPs only\n").to_errno();
    }
    if ty == QpType::Gsi && !udata.is_null() {
        return refuse!(EOPNOTSUPP, "create_qp: the GSI QP is the kernel's\n").to_errno();
    }
    if init.create_flags != 0 || !init.xrcd.is_null() || !init.rwq_ind_tbl.is_null() {
        return refuse!(
            EOPNOTSUPP,
            "create_qp: create flags {:#x}, XRC and RSS not supported\n",
            init.create_flags
        )
        .to_errno();
    }
    if init.send_cq.is_null() {
        return EINVAL.to_errno();
    }
    let recv_cq = if init.recv_cq.is_null() {
        init.send_cq
    } else {
        init.recv_cq
    };
    let has_srq = !init.srq.is_null();
    let want = Caps {
        max_send_wr: init.cap.max_send_wr,
        max_recv_wr: init.cap.max_recv_wr,
        max_send_sge: init.cap.max_send_sge,
        max_recv_sge: init.cap.max_recv_sge,
        max_inline: init.cap.max_inline_data,
    };
    let result = (|| -> Result {
        let mut queues = QpQueues::new(user_ctx(udata), want, has_srq, d.limits())?;
        if iwarp {
            // An iWARP QP is born idle (RNICPI/RDMAC verbs), which the IB
            // state set calls INIT: iw_cm and rdma_cm start from there.
            queues.inner.state = QpState::Init;
        }
        d.verbs().charge(Kind::Qp, d.limits())?;
        // The QP number first: the QP is published under it only once built.
        let qpn = if ty == QpType::Gsi {
            d.verbs()
                .qps
                .reserve_at(verbs::GSI_QPN)
                .map(|()| verbs::GSI_QPN)
        } else {
            d.verbs()
                .qps
                .reserve(verbs::FIRST_QPN, verbs::MAX_QPN, false)
        };
        let qpn = match qpn {
            Ok(n) => n,
            Err(e) => {
                d.verbs().uncharge(Kind::Qp);
                // A second GSI QP on the port.
                return Err(if e == EBUSY { EINVAL } else { e });
            }
        };
        let p = ibqp.cast::<Qp>();
        // SAFETY: our QP memory (zeroed by ib_core, never moved), not yet
        // published; drained in destroy_qp (or below on failure).
        if let Err(e) = unsafe { Ref::init(addr_of_mut!((*p).r)) } {
            d.verbs().qps.erase(qpn);
            d.verbs().uncharge(Kind::Qp);
            return Err(e);
        }
        let (sq_info, rq_info) = (queues.inner.sq_info(), queues.inner.rq_info());
        let caps = queues.caps;
        // SAFETY: as above: each Rust field is written once; `inner` is
        // dropped in destroy_qp (or below on failure).
        unsafe {
            addr_of_mut!((*p).ty).write(ty);
            addr_of_mut!((*p).user).write(!udata.is_null());
            addr_of_mut!((*p).transport).write(transport);
            addr_of_mut!((*p).sig_all).write(init.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR);
            addr_of_mut!((*p).caps).write(caps);
            // ib_core holds a use count on the CQs and the SRQ while the QP
            // exists.
            addr_of_mut!((*p).send_cq)
                .write(Held::new(NonNull::new_unchecked(init.send_cq.cast())));
            addr_of_mut!((*p).recv_cq).write(Held::new(NonNull::new_unchecked(recv_cq.cast())));
            addr_of_mut!((*p).srq).write(NonNull::new(init.srq.cast()).map(|s| Held::new(s)));
            (*(*p).ib.as_ptr()).qp_num = qpn;
            pin_init::raw_init(addr_of_mut!((*p).inner), qp::new_inner(queues.inner));
            addr_of_mut!((*p).cpu).write(core::sync::atomic::AtomicU32::new(Qp::pick_cpu(qpn)));
            addr_of_mut!((*p).iw_refs).write(core::sync::atomic::AtomicU32::new(0));
            addr_of_mut!((*p).bound).write(core::sync::atomic::AtomicBool::new(false));
            addr_of_mut!((*p).stats).write(crate::engine::Counters::default());
            Qp::init_deferred(p);
        }
        init.cap.max_send_wr = caps.max_send_wr;
        init.cap.max_recv_wr = caps.max_recv_wr;
        init.cap.max_send_sge = caps.max_send_sge;
        init.cap.max_recv_sge = caps.max_recv_sge;
        init.cap.max_inline_data = caps.max_inline;
        if let Err(e) = respond(
            udata,
            &abi::CreateQpResp {
                sq: sq_info,
                rq: rq_info,
                qpn,
                reserved: 0,
            },
        ) {
            d.verbs().qps.erase(qpn);
            // SAFETY: initialised above and never published.
            unsafe {
                (*p).r.drain();
                core::ptr::drop_in_place(addr_of_mut!((*p).inner));
            }
            d.verbs().uncharge(Kind::Qp);
            return Err(e);
        }
        // Born with QUEUE_ENGINE_IDLE set: its first idle period.
        d.counters().bump(crate::engine::Counter::EngineIdle);
        // SAFETY: fully built, not yet published: ours alone.
        if unsafe { &*p }.steered() {
            d.verbs()
                .steered_qps
                .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY: fully built; valid until destroy_qp erases it and drains
        // its references.
        unsafe { d.verbs().qps.publish(qpn, p) };
        Ok(())
    })();
    errno(result)
}

/// # Safety
/// See the module documentation; `ibqp` was created by `create_qp`.
pub(super) unsafe fn qp_ref<'a>(ibqp: *mut b::ib_qp) -> &'a Qp {
    // SAFETY: per the contract.
    unsafe { &*ibqp.cast::<Qp>() }
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn modify_qp(
    ibqp: *mut b::ib_qp,
    a: *mut b::ib_qp_attr,
    mask: ffi::c_int,
    _udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: a live QP of ours; a valid attr.
    let (q, a, d) = unsafe { (qp_ref(ibqp), &*a, dev((*ibqp).device)) };
    let mask = mask as u32;
    let av = if mask & attr::AV != 0 && !q.is_iwarp() {
        match av_from(&a.ah_attr) {
            Ok(av) => Some(av),
            Err(e) => return e.to_errno(),
        }
    } else {
        None
    };
    // iWARP: a destination GID names the peer of a join by modify_qp.
    let iw_path = if mask & attr::AV != 0 && q.is_iwarp() {
        if u32::from(a.ah_attr.ah_flags) & b::ib_ah_flags_IB_AH_GRH == 0 {
            return EINVAL.to_errno();
        }
        Some(qp::IwPath {
            // SAFETY: `raw` is the byte view of the GID union.
            dgid: unsafe { a.ah_attr.grh.dgid.raw },
            sgid_index: a.ah_attr.grh.sgid_index,
        })
    } else {
        None
    };
    // RoCE: a path MTU the netdev cannot carry is refused, as a hardware
    // RNIC never puts a frame on a link that cannot carry it (otherwise
    // every full-sized packet is dropped, and an RC QP ends in
    // RETRY_EXC_ERR after its whole retry budget).  Not clamped: the peer
    // checks that every packet but a message's last is exactly the path
    // MTU, so both ends must agree on it; rdma_cm takes it from the port's
    // active MTU, which follows the netdev.
    if mask & attr::PATH_MTU != 0 && !q.is_iwarp() {
        if let Some(ndev) = d.port_netdev() {
            let fits = crate::limits::ib_mtu_for(ndev.mtu(), crate::limits::ROCE_MAX_HEADER_BYTES);
            if fits.is_none_or(|most| a.path_mtu > most) {
                let bytes = crate::transport_rules::mtu_bytes(a.path_mtu).unwrap_or(0);
                return refuse!(
                    EINVAL,
                    "modify_qp: QP {:#x}: path MTU {} bytes does not fit {}'s MTU of {} bytes (at most {} with RoCE's headers)\n",
                    q.qpn(),
                    bytes,
                    ndev.name(),
                    ndev.mtu(),
                    fits.and_then(crate::transport_rules::mtu_bytes).unwrap_or(0)
                )
                .to_errno();
            }
        }
    }
    // (Planned before the QP's lock: the join port may start listening.)
    let to_rts = mask & attr::STATE != 0 && a.qp_state == QpState::Rts as u32;
    let dest = (mask & attr::DEST_QPN != 0).then_some(a.dest_qp_num);
    let join = match iw_join::plan(&d, q, to_rts, dest, iw_path) {
        Ok(p) => p,
        Err(e) => return e.to_errno(),
    };
    let mut joining = false;
    let mut join_ended = None;
    let mut after = After::default();
    // iWARP: the connection a move to SQD, ERR or RESET ends (after the
    // lock; `true`: abortively).
    let mut ending = None;
    let result = (|| -> Result {
        let mut s = q.inner.lock();
        let cur = if mask & attr::CUR_STATE != 0 {
            QpState::from_raw(a.cur_qp_state).ok_or(EINVAL)?
        } else {
            s.state
        };
        let next = if mask & attr::STATE != 0 {
            QpState::from_raw(a.qp_state).ok_or(EINVAL)?
        } else {
            cur
        };
        let ok = if q.is_iwarp() {
            // rdma_disconnect moves an iWARP QP to SQD from whatever state it
            // is in; outside RTS there is nothing to drain: succeed quietly.
            if next == QpState::Sqd && cur != QpState::Rts && mask == attr::STATE {
                return Ok(());
            }
            qp_state::modify_is_ok_iwarp(cur, next, mask)
        } else {
            qp_state::modify_is_ok(cur, next, q.ty, mask)
        };
        if !ok {
            return Err(refuse!(
                EINVAL,
                "modify_qp: QP {:#x} from {:?} to {:?} with attribute mask {:#x}: the verbs allow no such change\n",
                q.qpn(),
                cur,
                next,
                mask
            ));
        }
        let values = qp::AttrValues {
            port_num: a.port_num,
            pkey_index: a.pkey_index,
            qkey: a.qkey,
            qp_access_flags: a.qp_access_flags,
            path_mtu: a.path_mtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            min_rnr_timer: a.min_rnr_timer,
            sq_psn: a.sq_psn,
            rq_psn: a.rq_psn,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            dest_qp_num: a.dest_qp_num,
            en_sqd_async_notify: a.en_sqd_async_notify,
            path_mig_state: a.path_mig_state,
        };
        qp::apply_attrs(
            &mut s.attrs,
            &values,
            mask & !(attr::AV * u32::from(q.is_iwarp())),
            av,
            d.limits(),
        )?;
        if iw_path.is_some() {
            s.attrs.iw_path = iw_path;
        }
        if mask & attr::STATE != 0 {
            if let Some(plan) = join
                .as_ref()
                .filter(|_| next == QpState::Rts && cur != next)
            {
                if s.iw.is_none() && s.join.is_none() {
                    s.join = Some(iw_join::JoinWait::new(plan));
                    joining = true;
                }
            } else if next != QpState::Rts {
                join_ended = s.join.take();
            }
            q.enter(&mut s, next, &mut after);
            if matches!(next, QpState::Sqd | QpState::Err | QpState::Reset) {
                let reset = next == QpState::Reset;
                ending = s.iw.as_ref().map(|st| (st.cep.clone(), reset));
            }
        }
        Ok(())
    })();
    q.after(after);
    if let Some((cep, reset)) = ending {
        cep.disconnect(None, reset);
    }
    if let Some(j) = join_ended {
        j.end();
    }
    let result = match (result, join.filter(|_| joining)) {
        (Ok(()), Some(plan)) => iw_join::start(&d, q, &plan),
        (r, _) => r,
    };
    if result.is_ok() && mask & attr::STATE != 0 {
        // Work posted before RTS runs now.
        q.doorbell(true);
    }
    errno(result)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn query_qp(
    ibqp: *mut b::ib_qp,
    a: *mut b::ib_qp_attr,
    _mask: ffi::c_int,
    init: *mut b::ib_qp_init_attr,
) -> ffi::c_int {
    // SAFETY: a live QP of ours; writable attr and init attr.
    let (q, a, init) = unsafe { (qp_ref(ibqp), &mut *a, &mut *init) };
    let s = q.inner.lock();
    let t = s.attrs;
    *a = b::ib_qp_attr::default();
    a.qp_state = s.state as u32;
    a.cur_qp_state = s.state as u32;
    a.path_mtu = if t.path_mtu == 0 {
        crate::limits::IB_MTU_256
    } else {
        t.path_mtu
    };
    a.path_mig_state = t.path_mig_state;
    a.qkey = t.qkey;
    // The PSNs as they stand now, not as last set (as a hardware RNIC's
    // context reports them): the next PSN expected, and the next to send.
    a.rq_psn = match s.state {
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe => s.eng.resp.epsn.get(),
        _ => t.rq_psn,
    };
    a.sq_psn = match s.state {
        QpState::Rts | QpState::Sqd | QpState::Sqe => s.eng.req.next_psn.get(),
        _ => t.sq_psn,
    };
    a.dest_qp_num = t.dest_qpn;
    a.qp_access_flags = t.access as ffi::c_int;
    a.pkey_index = t.pkey_index;
    a.en_sqd_async_notify = u8::from(t.sqd_notify);
    a.sq_draining = 0;
    a.max_rd_atomic = t.max_rd_atomic;
    a.max_dest_rd_atomic = t.max_dest_rd_atomic;
    a.min_rnr_timer = t.min_rnr_timer;
    a.port_num = 1;
    a.timeout = t.timeout;
    a.retry_cnt = t.retry_cnt;
    a.rnr_retry = t.rnr_retry;
    if let Some(av) = &t.av {
        av_to(av, &mut a.ah_attr);
    } else if let Some(p) = t.iw_path {
        // iWARP: the destination a join by modify_qp was given (a consumer
        // moving the QP back to RTS with what it queried joins it again).
        a.ah_attr = b::rdma_ah_attr::default();
        a.ah_attr.ah_flags = b::ib_ah_flags_IB_AH_GRH as u8;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.dgid.raw = p.dgid;
        a.ah_attr.grh.sgid_index = p.sgid_index;
    }
    let c = &q.caps;
    a.cap = b::ib_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline,
        ..Default::default()
    };
    init.cap = a.cap;
    // SAFETY: a live QP; ib_core set these at creation.
    let ib = unsafe { &*q.ib.as_ptr() };
    init.qp_type = ib.qp_type;
    init.send_cq = ib.send_cq;
    init.recv_cq = ib.recv_cq;
    init.srq = ib.srq;
    init.sq_sig_type = if q.sig_all {
        b::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        b::ib_sig_type_IB_SIGNAL_REQ_WR
    };
    0
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn destroy_qp(
    ibqp: *mut b::ib_qp,
    _udata: *mut b::ib_udata,
) -> ffi::c_int {
    let p = ibqp.cast::<Qp>();
    // SAFETY: a QP create_qp initialised, destroyed once: unpublish it, wait
    // for every lookup to let go, then drop its rings.
    unsafe {
        let d = dev((*(*p).ib.as_ptr()).device);
        d.verbs().qps.erase((*(*p).ib.as_ptr()).qp_num);
        (*p).r.drain();
        // No packet can reach it now; stop its timer and work item.
        (*p).engine_stop();
        if (*p).steered() {
            d.verbs()
                .steered_qps
                .fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
        }
        // Kernel consumers may destroy a QP still attached to groups.
        let qpn = (*(*p).ib.as_ptr()).qp_num;
        loop {
            // (The lock guard must end before mcast_leave takes it again.)
            let group = d.verbs().mcast.lock().any_group_of(qpn);
            let Some(g) = group else { break };
            if mcast_leave(&d, &g, qpn).is_err() {
                break;
            }
        }
        // An iWARP connection still up ends with it (what its stream
        // built still goes out).
        let (stream, join) = {
            let mut s = (*p).inner.lock();
            (s.iw.take(), s.join.take())
        };
        if let Some(st) = stream {
            st.cep.disconnect(st.unsent(), false);
        }
        // A join whose connection is not up yet: it goes.
        if let Some(j) = join {
            j.end();
        }
        // iw_cm lets its references go when it has handled the CLOSE
        // (or destroyed its id): until then it may still modify the QP.
        while (*p).iw_refs.load(core::sync::atomic::Ordering::Acquire) != 0 {
            crate::glue::sleep_ms(1);
        }
        core::ptr::drop_in_place(addr_of_mut!((*p).inner));
        d.verbs().uncharge(Kind::Qp);
    }
    0
}

/// # Safety
/// See the module documentation; `gid` is a valid GID.
pub(super) unsafe extern "C" fn attach_mcast(
    ibqp: *mut b::ib_qp,
    gid: *mut b::ib_gid,
    _lid: u16,
) -> ffi::c_int {
    // SAFETY: a live UD QP of ours (ib_core checks the type); a valid GID.
    let (q, d, mgid) = unsafe { (qp_ref(ibqp), dev((*ibqp).device), (*gid).raw) };
    errno((|| -> Result {
        if q.is_iwarp() || !mcast::is_multicast(&mgid) {
            return Err(EINVAL);
        }
        let first = d.verbs().mcast.lock().attach(&mgid, q.qpn(), d.limits())?;
        if first {
            let joined = d
                .port_netdev()
                .ok_or(ENODEV)
                .and_then(|nd| crate::glue::net::mcast_join(&nd, &mgid, true));
            if let Err(e) = joined {
                let _ = d.verbs().mcast.lock().detach(&mgid, q.qpn());
                return Err(e);
            }
        }
        Ok(())
    })())
}

/// # Safety
/// See the module documentation; `gid` is a valid GID.
pub(super) unsafe extern "C" fn detach_mcast(
    ibqp: *mut b::ib_qp,
    gid: *mut b::ib_gid,
    _lid: u16,
) -> ffi::c_int {
    // SAFETY: as in attach_mcast.
    let (q, d, mgid) = unsafe { (qp_ref(ibqp), dev((*ibqp).device), (*gid).raw) };
    errno(mcast_leave(&d, &mgid, q.qpn()))
}

fn mcast_leave(d: &IbDevice, mgid: &[u8; 16], qpn: u32) -> Result {
    let last = d.verbs().mcast.lock().detach(mgid, qpn)?;
    if last {
        if let Some(nd) = d.port_netdev() {
            // The group is gone from the device whatever IP says.
            let _ = crate::glue::net::mcast_join(&nd, mgid, false);
        }
    }
    Ok(())
}

/// Build the ABI WQE of a kernel send WR.
///
/// # Safety
/// `w` is the `wr` member of the ib_*_wr its opcode implies (ib_core's
/// contract for post_send).
unsafe fn send_wqe(q: &Qp, w: &b::ib_send_wr) -> Result<SendWqe> {
    let opcode = w.opcode;
    let mut wqe = SendWqe {
        // SAFETY: wr_id and wr_cqe share the union; we keep the bits.
        wr_id: unsafe { w.__bindgen_anon_1.wr_id },
        send_flags: w.send_flags as u32
            & (abi::SEND_FENCE | abi::SEND_SIGNALED | abi::SEND_SOLICITED | abi::SEND_INLINE),
        // SAFETY: imm_data and invalidate_rkey share the union.
        ex: unsafe { w.ex.invalidate_rkey },
        ..SendWqe::default()
    };
    if q.sig_all {
        wqe.send_flags |= abi::SEND_SIGNALED;
    }
    let ud = matches!(q.ty, QpType::Ud | QpType::Gsi);
    match opcode {
        b::ib_wr_opcode_IB_WR_SEND | b::ib_wr_opcode_IB_WR_SEND_WITH_IMM => {
            wqe.opcode = opcode;
            if ud {
                // SAFETY: UD/GSI send WRs are ib_ud_wr.
                let u = unsafe { &*core::ptr::from_ref(w).cast::<b::ib_ud_wr>() };
                if u.ah.is_null() {
                    return Err(EINVAL);
                }
                // SAFETY: the AH is one of ours, alive for the call.
                wqe.ah_num = unsafe { (*u.ah.cast::<Ah>()).num };
                wqe.remote_qpn = u.remote_qpn;
                wqe.remote_qkey = u.remote_qkey;
            }
        }
        _ if ud => return Err(EINVAL),
        b::ib_wr_opcode_IB_WR_SEND_WITH_INV | b::ib_wr_opcode_IB_WR_LOCAL_INV => {
            wqe.opcode = opcode
        }
        b::ib_wr_opcode_IB_WR_RDMA_WRITE
        | b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
        | b::ib_wr_opcode_IB_WR_RDMA_READ
        | b::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV => {
            // SAFETY: RDMA WRs are ib_rdma_wr.
            let r = unsafe { &*core::ptr::from_ref(w).cast::<b::ib_rdma_wr>() };
            // (The ABI numbers these as ib_wr_opcode does.  READ_WITH_INV
            // has one sink SGE, as RNICPI asks; post_send puts its key in
            // `ex`, the key invalidated.)
            if opcode == b::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV && w.num_sge > 1 {
                return Err(EINVAL);
            }
            wqe.opcode = opcode;
            wqe.remote_addr = r.remote_addr;
            wqe.rkey = r.rkey;
        }
        b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP | b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
            if !q.is_iwarp() =>
        {
            // SAFETY: atomic WRs are ib_atomic_wr.
            let a = unsafe { &*core::ptr::from_ref(w).cast::<b::ib_atomic_wr>() };
            wqe.opcode = opcode;
            wqe.remote_addr = a.remote_addr;
            wqe.rkey = a.rkey;
            wqe.compare_add = a.compare_add;
            wqe.swap = a.swap;
        }
        b::ib_wr_opcode_IB_WR_REG_MR => {
            // SAFETY: REG_MR WRs are ib_reg_wr.
            let r = unsafe { &*core::ptr::from_ref(w).cast::<b::ib_reg_wr>() };
            if r.mr.is_null() {
                return Err(EINVAL);
            }
            wqe.opcode = abi::WR_REG_MR;
            wqe.bind_new_rkey = r.key;
            wqe.bind_access = r.access as u32;
            // SAFETY: the MR is one of ours, alive for the call.
            let mr = unsafe { &*r.mr };
            wqe.bind_mr_lkey = mr.lkey;
            wqe.bind_addr = mr.iova;
            wqe.bind_length = mr.length;
        }
        _ => return Err(EINVAL),
    }
    Ok(wqe)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn post_send(
    ibqp: *mut b::ib_qp,
    wr: *const b::ib_send_wr,
    bad: *mut *const b::ib_send_wr,
) -> ffi::c_int {
    // SAFETY: a live QP of ours.
    let q = unsafe { qp_ref(ibqp) };
    if q.user {
        // User QPs post in their mapped ring; an empty POST_SEND is the
        // provider's doorbell.
        if !wr.is_null() {
            // SAFETY: `bad` is writable.
            unsafe { *bad = wr };
            return EINVAL.to_errno();
        }
        q.dev().counters().bump(crate::engine::Counter::Doorbells);
        q.flush_if_error();
        q.doorbell(true);
        return 0;
    }
    let mut inline = [0u8; 256];
    let mut s = q.inner.lock();
    let mut cur = wr;
    let mut ret = 0;
    while !cur.is_null() {
        // SAFETY: a valid WR chain from a kernel consumer.
        let w = unsafe { &*cur };
        let r = (|| -> Result {
            // SAFETY: the WR's type follows its opcode (ib_core contract).
            let mut wqe = unsafe { send_wqe(q, w) }?;
            let rw = b::ib_recv_wr {
                num_sge: w.num_sge,
                sg_list: w.sg_list,
                ..Default::default()
            };
            // SAFETY: sg_list holds num_sge entries (kernel consumer).
            let sges = unsafe { recv_sges(&rw) }?;
            if wqe.send_flags & abi::SEND_INLINE != 0 {
                let mut n = 0usize;
                for sge in sges {
                    let len = sge.length as usize;
                    let dst = inline.get_mut(n..n + len).ok_or(EINVAL)?;
                    // SAFETY: kernel consumers pass kernel virtual addresses
                    // (ib_core's virtual DMA) of `len` readable bytes.
                    let src =
                        unsafe { core::slice::from_raw_parts(sge.addr as usize as *const u8, len) };
                    dst.copy_from_slice(src);
                    n += len;
                }
                wqe.inline_len = n as u32;
                q.post_send(&mut s, &wqe, &[], &inline[..n])
            } else {
                wqe.num_sge = sges.len() as u32;
                if wqe.opcode == abi::WR_RDMA_READ_WITH_INV {
                    // The key invalidated is the sink's, its one SGE's
                    // (RNICPI's ltag; siw's too): rdma_rw bumps the MR's
                    // key after it filled `ex` from the old one.
                    if let Some(sge) = sges.first() {
                        wqe.ex = sge.lkey;
                    }
                }
                q.post_send(&mut s, &wqe, sges, &[])
            }
        })();
        if let Err(e) = r {
            // SAFETY: `bad` is writable.
            unsafe { *bad = cur };
            ret = e.to_errno();
            break;
        }
        cur = w.next;
    }
    drop(s);
    q.flush_if_error();
    // Kernel consumers may post from any context: the work item sends
    // (a QP whose packets stay in this host pumps here if it may).
    q.doorbell(false);
    ret
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn post_recv(
    ibqp: *mut b::ib_qp,
    wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> ffi::c_int {
    // SAFETY: a live QP of ours.
    let q = unsafe { qp_ref(ibqp) };
    let mut ret = 0;
    {
        let mut s = q.inner.lock();
        let mut cur = wr;
        while !cur.is_null() {
            // SAFETY: a valid WR chain from a kernel consumer.
            let w = unsafe { &*cur };
            let r = if q.user {
                Err(EINVAL)
            } else {
                // SAFETY: wr_id and wr_cqe share the union; we keep the bits.
                let wr_id = unsafe { w.__bindgen_anon_1.wr_id };
                // SAFETY: sg_list holds num_sge entries (kernel consumer).
                unsafe { recv_sges(w) }.and_then(|sges| q.post_recv(&mut s, wr_id, sges))
            };
            if let Err(e) = r {
                // SAFETY: `bad` is writable.
                unsafe { *bad = cur };
                ret = e.to_errno();
                break;
            }
            cur = w.next;
        }
    }
    q.flush_if_error();
    ret
}

// ---------------------------------------------------------------------------
// MR and MW

/// Allocate an MR object with `state`, publish it under a fresh key.
fn new_mr(d: &IbDevice, pd: *mut b::ib_pd, mut state: MrState) -> Result<*mut b::ib_mr> {
    d.verbs().charge(Kind::Mr, d.limits())?;
    let index = match d.verbs().mrs.reserve(1, verbs::MW_INDEX_BASE - 1, false) {
        Ok(i) => i,
        Err(e) => {
            d.verbs().uncharge(Kind::Mr);
            return Err(e);
        }
    };
    let boxed = match KBox::<Mr>::new_uninit(GFP_KERNEL) {
        Ok(b) => b,
        Err(e) => {
            d.verbs().mrs.erase(index);
            d.verbs().uncharge(Kind::Mr);
            return Err(e.into());
        }
    };
    let p = KBox::into_raw(boxed).cast::<Mr>();
    let key = mr::make_key(index);
    state.key = key;
    let (iova, length) = (state.iova, state.length);
    // SAFETY: `p` is a fresh allocation for an Mr: zero it (a valid ib_mr)
    // and give it its handle.
    let r = unsafe {
        core::ptr::write_bytes(p, 0, 1);
        Ref::init(addr_of_mut!((*p).r))
    };
    if let Err(e) = r {
        // SAFETY: nothing but zeroes was written: free the allocation.
        drop(unsafe { KBox::from_raw(p.cast::<core::mem::MaybeUninit<Mr>>()) });
        d.verbs().mrs.erase(index);
        d.verbs().uncharge(Kind::Mr);
        return Err(e);
    }
    // SAFETY: initialise every other field before it is published.  ib_core
    // sets the same `pd` after we return; setting it first keeps lookups
    // consistent.
    unsafe {
        (*p).index = index;
        (*(*p).ib.as_ptr()).pd = pd;
        (*(*p).ib.as_ptr()).lkey = key;
        (*(*p).ib.as_ptr()).rkey = key;
        (*(*p).ib.as_ptr()).iova = iova;
        (*(*p).ib.as_ptr()).length = length;
        (*(*p).ib.as_ptr()).page_size = b::softrnic_page_size() as u32;
        pin_init::raw_init(addr_of_mut!((*p).inner), mr::new_mr_inner(state));
        // Valid until dereg_mr erases it and drains its references.
        d.verbs().mrs.publish(index, p);
    }
    // SAFETY: `ib` is the first field of Mr.
    Ok(unsafe { (*p).ib.as_ptr() })
}

/// # Safety
/// `p` came from `new_mr` and is no longer published.
unsafe fn free_mr(p: *mut Mr) {
    // SAFETY: per the contract: drop the Rust parts, then the allocation.
    unsafe {
        core::ptr::drop_in_place(addr_of_mut!((*p).inner));
        drop(KBox::from_raw(p.cast::<core::mem::MaybeUninit<Mr>>()));
    }
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn get_dma_mr(pd: *mut b::ib_pd, access: ffi::c_int) -> *mut b::ib_mr {
    // SAFETY: a PD on our device.
    let d = unsafe { dev((*pd).device) };
    let access = access as u32;
    let r = mr::check_access(access).and_then(|()| {
        new_mr(
            &d,
            pd,
            MrState {
                // SAFETY: ib_core calls get_dma_mr for kernel consumers only
                // (uverbs has no such command): the addresses of their work
                // requests are kernel virtual addresses they own.
                kind: MrKind::Dma(unsafe { KernelVa::new() }),
                access,
                iova: 0,
                length: u64::MAX,
                key: 0,
                valid: true,
            },
        )
    });
    r.unwrap_or_else(err_ptr)
}

fn check_range(start: u64, length: u64, max: u64) -> Result {
    if length == 0 || length > max || start.checked_add(length).is_none() {
        return Err(EINVAL);
    }
    Ok(())
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn reg_user_mr(
    pd: *mut b::ib_pd,
    start: u64,
    length: u64,
    virt: u64,
    access: ffi::c_int,
    dmah: *mut b::ib_dmah,
    _udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    // SAFETY: a PD on our device.
    let d = unsafe { dev((*pd).device) };
    let access = access as u32;
    let r = (|| -> Result<*mut b::ib_mr> {
        if !dmah.is_null() {
            return Err(EOPNOTSUPP);
        }
        mr::check_access(access)?;
        check_range(start, length, d.limits().max_mr_size)?;
        check_range(virt, length, u64::MAX)?;
        let umem = PinnedPages::new(Umem::get(d.ib(), start, length, access)?)?;
        new_mr(
            &d,
            pd,
            MrState {
                kind: MrKind::User(umem),
                access,
                iova: virt,
                length,
                key: 0,
                valid: true,
            },
        )
    })();
    r.unwrap_or_else(err_ptr)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn rereg_user_mr(
    ibmr: *mut b::ib_mr,
    flags: ffi::c_int,
    start: u64,
    length: u64,
    virt: u64,
    access: ffi::c_int,
    _pd: *mut b::ib_pd,
    _udata: *mut b::ib_udata,
) -> *mut b::ib_mr {
    // SAFETY: an MR of ours (new_mr), alive for the call.
    let (m, d) = unsafe { (&*ibmr.cast::<Mr>(), dev((*ibmr).device)) };
    let flags = flags as u32;
    let known = b::ib_mr_rereg_flags_IB_MR_REREG_TRANS
        | b::ib_mr_rereg_flags_IB_MR_REREG_PD
        | b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS;
    let r = (|| -> Result {
        if flags & !known != 0 || flags == 0 {
            return Err(EINVAL);
        }
        let old_access = m.inner.lock().access;
        let access = if flags & b::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
            access as u32
        } else {
            old_access
        };
        mr::check_access(access)?;
        if flags & b::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0 {
            // Only user MRs have a translation to replace (the kind never
            // changes, so checking before pinning is enough).
            if !matches!(m.inner.lock().kind, MrKind::User(_)) {
                return Err(EINVAL);
            }
            check_range(start, length, d.limits().max_mr_size)?;
            check_range(virt, length, u64::MAX)?;
            let umem = PinnedPages::new(Umem::get(d.ib(), start, length, access)?)?;
            let old = {
                let mut s = m.inner.lock();
                s.iova = virt;
                s.length = length;
                s.access = access;
                core::mem::replace(&mut s.kind, MrKind::User(umem))
            };
            // Unpin the old pages outside the lock (may sleep).
            drop(old);
        } else {
            // A new access on the old pages: they must have been pinned
            // writable if the new access writes.
            let mut s = m.inner.lock();
            let writes = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
            if access & writes != 0 && old_access & writes == 0 {
                return Err(EINVAL);
            }
            s.access = access;
        }
        Ok(())
    })();
    match r {
        Ok(()) => null_mut(),
        Err(e) => err_ptr(e),
    }
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn dereg_mr(
    ibmr: *mut b::ib_mr,
    _udata: *mut b::ib_udata,
) -> ffi::c_int {
    let p = ibmr.cast::<Mr>();
    // SAFETY: an MR of ours, deregistered once: unpublish, drain, free.
    unsafe {
        let d = dev((*(*p).ib.as_ptr()).device);
        d.verbs().mrs.erase((*p).index);
        (*p).r.drain();
        free_mr(p);
        d.verbs().uncharge(Kind::Mr);
    }
    0
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn alloc_mr(
    pd: *mut b::ib_pd,
    ty: b::ib_mr_type,
    max_num_sg: u32,
) -> *mut b::ib_mr {
    // SAFETY: a PD on our device.
    let d = unsafe { dev((*pd).device) };
    let r = (|| -> Result<*mut b::ib_mr> {
        if ty != b::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return Err(EOPNOTSUPP);
        }
        if max_num_sg == 0 || max_num_sg > d.limits().max_fast_reg_page_list_len {
            return Err(EINVAL);
        }
        let pages = KernelPages::new(max_num_sg)?;
        new_mr(
            &d,
            pd,
            MrState {
                kind: MrKind::FastReg(pages),
                access: 0,
                iova: 0,
                length: 0,
                key: 0,
                // Valid only once a REG_MR work request registers it.
                valid: false,
            },
        )
    })();
    r.unwrap_or_else(err_ptr)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn map_mr_sg(
    ibmr: *mut b::ib_mr,
    sg: *mut b::scatterlist,
    nents: ffi::c_int,
    offset: *mut ffi::c_uint,
) -> ffi::c_int {
    // SAFETY: an MR of ours.
    let m = unsafe { &*ibmr.cast::<Mr>() };
    if let Ok(p) = m.inner.lock().fast_reg_pages() {
        p.clear();
    }
    // SAFETY: valid arguments from ib_map_mr_sg; the callback appends pages.
    let n = unsafe { b::softrnic_map_mr_sg(ibmr, sg, nents, offset) };
    // SAFETY: ib_sg_to_pages set the MR's page size and iova.
    let (size, iova) = unsafe { ((*ibmr).page_size, (*ibmr).iova) };
    if let Ok(p) = m.inner.lock().fast_reg_pages() {
        p.set_layout(size, iova);
    }
    n
}

/// C callback of ib_sg_to_pages: one page of a fast-registration MR.
#[no_mangle]
extern "C" fn softrnic_mr_set_page(ibmr: *mut b::ib_mr, addr: u64) -> ffi::c_int {
    // SAFETY: called by ib_sg_to_pages within map_mr_sg on our MR.
    let m = unsafe { &*ibmr.cast::<Mr>() };
    let mut s = m.inner.lock();
    // SAFETY: ib_sg_to_pages hands us the kernel virtual addresses of the
    // consumer's pages, which it keeps while it uses the registration.
    errno(s.fast_reg_pages().and_then(|p| unsafe { p.push(addr) }))
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn alloc_mw(
    ibmw: *mut b::ib_mw,
    _udata: *mut b::ib_udata,
) -> ffi::c_int {
    // SAFETY: an MW of our size on our device.
    let d = unsafe { dev((*ibmw).device) };
    let result = (|| -> Result {
        d.verbs().charge(Kind::Mw, d.limits())?;
        let index = match d
            .verbs()
            .mws
            .reserve(verbs::MW_INDEX_BASE, verbs::KEY_INDEX_MAX, false)
        {
            Ok(i) => i,
            Err(e) => {
                d.verbs().uncharge(Kind::Mw);
                return Err(e);
            }
        };
        let rkey = mr::make_key(index);
        let p = ibmw.cast::<Mw>();
        // SAFETY: our MW memory (zeroed, pinned, ib_core set `pd` and
        // `type`), not yet published; drained in dealloc_mw.
        if let Err(e) = unsafe { Ref::init(addr_of_mut!((*p).r)) } {
            d.verbs().mws.erase(index);
            d.verbs().uncharge(Kind::Mw);
            return Err(e);
        }
        // SAFETY: as above; the Rust fields are initialised once, then the
        // MW is published, valid until dealloc_mw erases it and drains its
        // references.
        unsafe {
            (*p).index = index;
            (*(*p).ib.as_ptr()).rkey = rkey;
            pin_init::raw_init(addr_of_mut!((*p).inner), mr::new_mw_inner(rkey));
            d.verbs().mws.publish(index, p);
        }
        Ok(())
    })();
    errno(result)
}

/// # Safety
/// See the module documentation.
pub(super) unsafe extern "C" fn dealloc_mw(ibmw: *mut b::ib_mw) -> ffi::c_int {
    let p = ibmw.cast::<Mw>();
    // SAFETY: an MW of ours, deallocated once: unpublish, drain, drop.
    unsafe {
        let d = dev((*(*p).ib.as_ptr()).device);
        d.verbs().mws.erase((*p).index);
        (*p).r.drain();
        core::ptr::drop_in_place(addr_of_mut!((*p).inner));
        d.verbs().uncharge(Kind::Mw);
    }
    0
}

/// Raise DEVICE_FATAL: the netdev under a device is going away.
pub(crate) fn device_fatal(d: &IbDevice) {
    events::device_event(d.ib(), Event::DeviceFatal);
}
