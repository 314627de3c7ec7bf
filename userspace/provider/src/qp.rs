//! Queue pairs (RC, UC, UD): created, modified and destroyed through
//! ib_uverbs; work requests are written straight into the mapped send and
//! receive rings, with a doorbell only when the kernel engine is idle.

use core::ffi::c_int;
use core::mem::{offset_of, size_of, zeroed};
use core::ptr::{self, addr_of, addr_of_mut, null_mut};
use core::sync::atomic::{fence, Ordering};

use softrnic_abi as abi;

use crate::ah::ah_num;
use crate::ffi::*;
use crate::recv::{write_sges, RecvQueue};
use crate::ring::{entries_after, Locked, Ring};
use crate::{alloc_obj, cmd_fd, fail, free_obj};

#[repr(C)]
pub struct Qp {
    /// libibverbs's part; first, so its pointers are pointers to the Qp.
    vqp: verbs_qp,
    sq: Locked<SendQueue>,
    rq: Locked<RecvQueue>,
}

const _: () = assert!(offset_of!(Qp, vqp) == 0);

// The WQE opcodes and send flags are libibverbs's numbering (abi.rs).
const _: () = {
    assert!(abi::WR_RDMA_WRITE == IBV_WR_RDMA_WRITE);
    assert!(abi::WR_RDMA_WRITE_WITH_IMM == IBV_WR_RDMA_WRITE_WITH_IMM);
    assert!(abi::WR_SEND == IBV_WR_SEND);
    assert!(abi::WR_SEND_WITH_IMM == IBV_WR_SEND_WITH_IMM);
    assert!(abi::WR_RDMA_READ == IBV_WR_RDMA_READ);
    assert!(abi::WR_ATOMIC_CMP_AND_SWP == IBV_WR_ATOMIC_CMP_AND_SWP);
    assert!(abi::WR_ATOMIC_FETCH_AND_ADD == IBV_WR_ATOMIC_FETCH_AND_ADD);
    assert!(abi::WR_LOCAL_INV == IBV_WR_LOCAL_INV);
    assert!(abi::WR_BIND_MW == IBV_WR_BIND_MW);
    assert!(abi::WR_SEND_WITH_INV == IBV_WR_SEND_WITH_INV);
    assert!(abi::SEND_FENCE == IBV_SEND_FENCE);
    assert!(abi::SEND_SIGNALED == IBV_SEND_SIGNALED);
    assert!(abi::SEND_SOLICITED == IBV_SEND_SOLICITED);
    assert!(abi::SEND_INLINE == IBV_SEND_INLINE);
};

/// Provider side of the send ring (kept under the send queue's lock).
struct SendQueue {
    ring: Ring,
    qp_type: ibv_qp_type,
    /// The kernel's caps, bounded by what a slot holds.
    max_sge: u32,
    max_inline: u32,
    /// sq_sig_all: every WQE is signaled.
    sig_all: bool,
}

/// CREATE_QP response with softrnic's driver data appended.
#[repr(C)]
struct CreateQpResp {
    ibv: ib_uverbs_create_qp_resp,
    drv: abi::CreateQpResp,
}

const _: () = assert!(offset_of!(CreateQpResp, drv) == size_of::<ib_uverbs_create_qp_resp>());

fn supported_type(t: ibv_qp_type) -> bool {
    matches!(t, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD)
}

/// The opcodes each transport service posts.
fn opcode_allowed(qp_type: ibv_qp_type, op: u32) -> bool {
    match qp_type {
        IBV_QPT_UD => matches!(op, abi::WR_SEND | abi::WR_SEND_WITH_IMM),
        IBV_QPT_UC => matches!(
            op,
            abi::WR_RDMA_WRITE
                | abi::WR_RDMA_WRITE_WITH_IMM
                | abi::WR_SEND
                | abi::WR_SEND_WITH_IMM
                | abi::WR_LOCAL_INV
                | abi::WR_BIND_MW
                | abi::WR_SEND_WITH_INV
        ),
        IBV_QPT_RC => op <= abi::WR_SEND_WITH_INV,
        _ => false,
    }
}

/// Opcodes whose payload goes out from the Sges (and may be inline).
fn carries_payload(op: u32) -> bool {
    matches!(
        op,
        abi::WR_SEND
            | abi::WR_SEND_WITH_IMM
            | abi::WR_SEND_WITH_INV
            | abi::WR_RDMA_WRITE
            | abi::WR_RDMA_WRITE_WITH_IMM
    )
}

impl SendQueue {
    /// Validates `w` and builds its WQE header (payload not included).
    ///
    /// # Safety
    /// `w` is a valid work request (its sg_list, ah, mw and mr pointers as
    /// libibverbs's API requires for its opcode).
    unsafe fn build(&self, w: &ibv_send_wr) -> Result<abi::SendWqe, c_int> {
        let op = w.opcode;
        if !opcode_allowed(self.qp_type, op) {
            return Err(libc::EINVAL);
        }
        let num_sge = u32::try_from(w.num_sge).map_err(|_| libc::EINVAL)?;
        let mut flags = w.send_flags
            & (abi::SEND_FENCE | abi::SEND_SIGNALED | abi::SEND_SOLICITED | abi::SEND_INLINE);
        if self.sig_all {
            flags |= abi::SEND_SIGNALED;
        }
        if !carries_payload(op) {
            // Nothing goes out from local memory: inline means nothing.
            flags &= !abi::SEND_INLINE;
        }
        // SAFETY: sg_list has num_sge entries (the caller's promise).
        let total = unsafe { payload_len(w.sg_list, num_sge) }.ok_or(libc::EINVAL)?;
        let mut wqe = abi::SendWqe {
            wr_id: w.wr_id,
            opcode: op,
            send_flags: flags,
            ..Default::default()
        };
        if flags & abi::SEND_INLINE != 0 {
            if total > self.max_inline {
                return Err(libc::EINVAL);
            }
            wqe.inline_len = total;
        } else {
            if num_sge > self.max_sge {
                return Err(libc::EINVAL);
            }
            wqe.num_sge = num_sge;
        }
        match op {
            abi::WR_SEND_WITH_IMM
            | abi::WR_RDMA_WRITE_WITH_IMM
            | abi::WR_SEND_WITH_INV
            | abi::WR_LOCAL_INV => {
                // SAFETY: imm_data and invalidate_rkey are both a u32.
                wqe.ex = unsafe { w.__bindgen_anon_1.imm_data };
            }
            _ => {}
        }
        match op {
            abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM | abi::WR_RDMA_READ => {
                // SAFETY: the rdma member is the one in use for these opcodes.
                let r = unsafe { w.wr.rdma };
                wqe.remote_addr = r.remote_addr;
                wqe.rkey = r.rkey;
            }
            abi::WR_ATOMIC_CMP_AND_SWP | abi::WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: the atomic member is the one in use.
                let a = unsafe { w.wr.atomic };
                // An 8-byte aligned target and an 8-byte local buffer.
                if a.remote_addr & 7 != 0 || total < 8 {
                    return Err(libc::EINVAL);
                }
                wqe.remote_addr = a.remote_addr;
                wqe.rkey = a.rkey;
                wqe.compare_add = a.compare_add;
                wqe.swap = a.swap;
            }
            abi::WR_BIND_MW => {
                // SAFETY: the bind_mw member is the one in use.
                let b = unsafe { w.__bindgen_anon_2.bind_mw };
                if num_sge != 0 || b.mw.is_null() {
                    return Err(libc::EINVAL);
                }
                // SAFETY: mw and (when given) mr are live objects.
                unsafe {
                    wqe.bind_mw_rkey = (*b.mw).rkey;
                    wqe.bind_mr_lkey = b.bind_info.mr.as_ref().map_or(0, |mr| mr.lkey);
                }
                wqe.bind_new_rkey = b.rkey;
                wqe.bind_access = b.bind_info.mw_access_flags;
                wqe.bind_addr = b.bind_info.addr;
                wqe.bind_length = b.bind_info.length;
            }
            _ => {}
        }
        if self.qp_type == IBV_QPT_UD {
            // SAFETY: the ud member is the one in use on a UD QP.
            let ud = unsafe { w.wr.ud };
            // SAFETY: a non-NULL ah is one of our AHs.
            wqe.ah_num = unsafe { ah_num(ud.ah) }.ok_or(libc::EINVAL)?;
            wqe.remote_qpn = ud.remote_qpn;
            wqe.remote_qkey = ud.remote_qkey;
        }
        Ok(wqe)
    }

    /// Writes the list at `wr` into the ring and publishes it.  Returns the
    /// errno for the first rejected request (stored in `*bad_wr`) and
    /// whether the kernel must be woken.
    ///
    /// # Safety
    /// `wr` is a valid list and `bad_wr` writable.
    unsafe fn post(
        &mut self,
        mut wr: *mut ibv_send_wr,
        bad_wr: *mut *mut ibv_send_wr,
    ) -> (c_int, bool) {
        if !self.ring.is_mapped() {
            // SAFETY: bad_wr is writable.
            unsafe { *bad_wr = wr };
            return (libc::EINVAL, false);
        }
        let ring = &self.ring;
        let start = ring.producer().load(Ordering::Relaxed);
        let mut prod = start;
        // Acquire: the kernel copied a slot out before moving past it.
        let mut cons = ring.consumer().load(Ordering::Acquire);
        let mut ret = 0;
        while !wr.is_null() {
            // SAFETY: wr is an element of the caller's list.
            let w = unsafe { &*wr };
            // SAFETY: w is valid (the caller's promise).
            let wqe = match unsafe { self.build(w) } {
                Ok(wqe) => wqe,
                Err(e) => {
                    ret = e;
                    break;
                }
            };
            if !ring.room_for(prod, &mut cons) {
                ret = libc::ENOMEM;
                break;
            }
            let slot = ring.slot(prod);
            // SAFETY: the slot is free and holds the header plus max_sge
            // Sges or max_inline bytes (both bounded by the slot in
            // finish_create); the sg_list entries were validated by build.
            unsafe {
                ptr::write_volatile(slot.cast::<abi::SendWqe>(), wqe);
                let payload = slot.add(size_of::<abi::SendWqe>());
                if wqe.send_flags & abi::SEND_INLINE != 0 {
                    copy_inline(payload, w.sg_list, w.num_sge as u32);
                } else {
                    write_sges(payload, w.sg_list, wqe.num_sge);
                }
            }
            prod = prod.wrapping_add(1);
            wr = w.next;
        }
        if ret != 0 {
            // SAFETY: bad_wr is writable.
            unsafe { *bad_wr = wr };
        }
        if prod == start {
            return (ret, false);
        }
        // Release: the WQEs before the producer value that covers them.
        ring.producer().store(prod, Ordering::Release);
        // The engine sets QUEUE_ENGINE_IDLE and then re-reads producer before
        // it sleeps; with a full fence on both sides, either it sees the new
        // WQEs or this load sees the flag and rings.
        fence(Ordering::SeqCst);
        let idle = ring.kernel_flags().load(Ordering::Relaxed) & abi::QUEUE_ENGINE_IDLE != 0;
        (ret, idle)
    }
}

/// Sum of the Sge lengths, None on overflow.
///
/// # Safety
/// `sg` has `n` entries (or `n` is 0).
unsafe fn payload_len(sg: *const ibv_sge, n: u32) -> Option<u32> {
    (0..n as usize).try_fold(0u32, |acc, i| {
        // SAFETY: per the caller's promise.
        acc.checked_add(unsafe { (*sg.add(i)).length })
    })
}

/// Copies the bytes the `n` Sges point at to `dst`, back to back.
///
/// # Safety
/// The Sges point at readable user memory and `dst` has room for their sum.
unsafe fn copy_inline(dst: *mut u8, sg: *const ibv_sge, n: u32) {
    let mut off = 0usize;
    for i in 0..n as usize {
        // SAFETY: per the caller's promise.
        let s = unsafe { &*sg.add(i) };
        if s.length == 0 {
            continue; // addr may be NULL then
        }
        // SAFETY: per the caller's promise.
        unsafe {
            ptr::copy_nonoverlapping(
                s.addr as usize as *const u8,
                dst.add(off),
                s.length as usize,
            )
        };
        off += s.length as usize;
    }
}

/// The send ring, and the receive ring unless the QP uses an SRQ.
///
/// # Safety
/// `fd` is the context's command file.
unsafe fn map_rings(
    fd: c_int,
    resp: &abi::CreateQpResp,
    has_srq: bool,
) -> Result<(Ring, Ring), c_int> {
    // SAFETY: per the caller's promise.
    let sq = unsafe { Ring::map(fd, &resp.sq, size_of::<abi::SendWqe>()) }?;
    let rq = if has_srq || resp.rq.slots == 0 {
        Ring::NONE
    } else {
        // SAFETY: as above.
        unsafe { Ring::map(fd, &resp.rq, size_of::<abi::RecvWqe>()) }?
    };
    Ok((sq, rq))
}

/// Maps the new QP's rings and finishes it, or undoes the create.
///
/// # Safety
/// `qp` was just created in the kernel through `ctx` (libibverbs has filled
/// its ibv_qp) and is otherwise unused; `cap` holds the kernel's caps.
unsafe fn finish_create(
    ctx: *mut ibv_context,
    qp: *mut Qp,
    cap: &ibv_qp_cap,
    sig_all: bool,
    resp: &abi::CreateQpResp,
) -> *mut ibv_qp {
    // SAFETY: qp is ours; libibverbs filled the ibv_qp.
    let ibqp = unsafe { addr_of_mut!((*qp).vqp.__bindgen_anon_1.qp) };
    // SAFETY: as above.
    let (qp_type, has_srq) = unsafe { ((*ibqp).qp_type, !(*ibqp).srq.is_null()) };
    // SAFETY: ctx is the live context.
    let fd = unsafe { cmd_fd(ctx) };
    // SAFETY: fd is the context's command file.
    let (sq, rq) = match unsafe { map_rings(fd, resp, has_srq) } {
        Ok(r) => r,
        Err(e) => {
            // SAFETY: the QP exists in the kernel and nobody else knows it.
            unsafe {
                ibv_cmd_destroy_qp(ibqp);
                free_obj(qp);
            }
            return fail(e);
        }
    };
    let payload = sq.slot_bytes().saturating_sub(size_of::<abi::SendWqe>());
    let fit_sges = entries_after::<abi::SendWqe, abi::Sge>(sq.slot_bytes());
    let send = SendQueue {
        qp_type,
        max_sge: cap
            .max_send_sge
            .min(u32::try_from(fit_sges).unwrap_or(u32::MAX)),
        max_inline: cap
            .max_inline_data
            .min(u32::try_from(payload).unwrap_or(u32::MAX)),
        sig_all,
        ring: sq,
    };
    // SAFETY: qp's sq/rq are uninitialised memory of the right type.
    unsafe {
        Locked::init(addr_of_mut!((*qp).sq), send);
        Locked::init(addr_of_mut!((*qp).rq), RecvQueue::new(rq, cap.max_recv_sge));
    }
    ibqp
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    // SAFETY: libibverbs passes valid pointers.
    let (ctx, a) = unsafe { ((*pd).context, &mut *attr) };
    if !supported_type(a.qp_type) {
        return fail(libc::EOPNOTSUPP);
    }
    let Some(qp) = alloc_obj::<Qp>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_create_qp, CreateQpResp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: qp is a fresh zeroed allocation (verbs_qp with comp_mask 0,
    // which ibv_qp_to_qp_ex reads); the buffers are sized.
    let ret = unsafe {
        ibv_cmd_create_qp(
            pd,
            addr_of_mut!((*qp).vqp.__bindgen_anon_1.qp),
            a,
            &mut cmd,
            size_of::<ibv_create_qp>(),
            &mut resp.ibv,
            size_of::<CreateQpResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows qp.
        unsafe { free_obj(qp) };
        return fail(ret);
    }
    // SAFETY: just created; attr->cap now holds the kernel's caps.
    unsafe { finish_create(ctx, qp, &a.cap, a.sq_sig_all != 0, &resp.drv) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: libibverbs passes a valid attribute structure.
    let a = unsafe { &mut *attr };
    // A PD is required; create flags only when none is set.  XRC, RSS,
    // TSO and the ibv_wr_* send API (SEND_OPS_FLAGS) are not supported.
    let no_flags = a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS == 0 || a.create_flags == 0;
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
        return fail(libc::EINVAL);
    }
    if a.comp_mask & !(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0
        || !no_flags
        || !supported_type(a.qp_type)
    {
        return fail(libc::EOPNOTSUPP);
    }
    let Some(qp) = alloc_obj::<Qp>() else {
        return fail(libc::ENOMEM);
    };
    // What the command helper accepts: the same attributes with just the PD.
    // SAFETY: ibv_qp_init_attr_ex is plain data.
    let mut local: ibv_qp_init_attr_ex = unsafe { ptr::read(a) };
    local.comp_mask = IBV_QP_INIT_ATTR_PD;
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_create_qp, CreateQpResp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: qp is a fresh zeroed allocation; the buffers are sized.
    let ret = unsafe {
        ibv_cmd_create_qp_ex(
            ctx,
            addr_of_mut!((*qp).vqp),
            &mut local,
            &mut cmd,
            size_of::<ibv_create_qp>(),
            &mut resp.ibv,
            size_of::<CreateQpResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows qp.
        unsafe { free_obj(qp) };
        return fail(ret);
    }
    // Report the caps the kernel granted, as ibv_create_qp does.
    a.cap = local.cap;
    // SAFETY: just created.
    unsafe { finish_create(ctx, qp, &local.cap, local.sq_sig_all != 0, &resp.drv) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: zeroed command buffer.
    let mut cmd: ibv_query_qp = unsafe { zeroed() };
    // SAFETY: arguments from libibverbs unchanged; cmd is sized.
    unsafe {
        ibv_cmd_query_qp(
            qp,
            attr,
            attr_mask,
            init_attr,
            &mut cmd,
            size_of::<ibv_query_qp>(),
        )
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    // SAFETY: zeroed command buffer.
    let mut cmd: ibv_modify_qp = unsafe { zeroed() };
    // SAFETY: arguments from libibverbs unchanged; cmd is sized.
    unsafe { ibv_cmd_modify_qp(qp, attr, attr_mask, &mut cmd, size_of::<ibv_modify_qp>()) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn destroy_qp(ibqp: *mut ibv_qp) -> c_int {
    // SAFETY: ibqp is one of our QPs.
    let ret = unsafe { ibv_cmd_destroy_qp(ibqp) };
    if ret != 0 {
        return ret;
    }
    let qp = ibqp.cast::<Qp>();
    // SAFETY: destroyed in the kernel; nobody posts to it any more.  Dropping
    // the queues unmaps the rings.
    unsafe {
        Locked::destroy(addr_of_mut!((*qp).sq));
        Locked::destroy(addr_of_mut!((*qp).rq));
        free_obj(qp);
    }
    0
}

/// # Safety
/// Called only by libibverbs (or bind_mw), with the pointers its provider
/// interface promises.
pub unsafe extern "C" fn post_send(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    if bad_wr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: ibqp is one of our QPs; only its send queue is borrowed.
    let sq = unsafe { &*addr_of!((*ibqp.cast::<Qp>()).sq) };
    // SAFETY: wr and bad_wr as libibverbs promises.
    let (ret, doorbell) = unsafe { sq.lock().post(wr, bad_wr) };
    if doorbell {
        // An empty POST_SEND is the doorbell.
        let mut bad = null_mut();
        // SAFETY: ibqp is live; no work requests.
        // The WQEs are published whatever the doorbell returns: it is only a
        // hint, so its errors are not the caller's.
        let _ = unsafe { ibv_cmd_post_send(ibqp, null_mut(), &mut bad) };
    }
    ret
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn post_recv(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    if bad_wr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: ibqp is one of our QPs.  Receives go to the SRQ when there is
    // one, and not before the QP left RESET (C10-97.2.1).  iWARP QPs are born
    // idle (the kernel reports INIT) while libibverbs records RESET.
    let reset = unsafe {
        (*ibqp).state == IBV_QPS_RESET && crate::transport((*ibqp).context) != abi::TRANSPORT_IWARP
    };
    // SAFETY: as above.
    if unsafe { !(*ibqp).srq.is_null() } || reset {
        // SAFETY: bad_wr is writable.
        unsafe { *bad_wr = wr };
        return libc::EINVAL;
    }
    // SAFETY: only the QP's receive queue is borrowed.
    let rq = unsafe { &*addr_of!((*ibqp.cast::<Qp>()).rq) };
    let (ret, in_error) = {
        let mut q = rq.lock();
        // SAFETY: wr and bad_wr as libibverbs promises.
        let ret = unsafe { q.post(wr, bad_wr) };
        (ret, q.qp_in_error())
    };
    if in_error {
        // Receives posted to a QP in ERR complete as flushed: the doorbell
        // makes the kernel flush them now.
        let mut bad = null_mut();
        // SAFETY: ibqp is live; no work requests.  Only a hint: errors ignored.
        let _ = unsafe { ibv_cmd_post_send(ibqp, null_mut(), &mut bad) };
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::test_ring;

    fn sq(qp_type: ibv_qp_type, slots: u32) -> SendQueue {
        SendQueue {
            ring: test_ring(slots, 256, size_of::<abi::SendWqe>()),
            qp_type,
            max_sge: 4,
            max_inline: 64,
            sig_all: false,
        }
    }

    fn wr(op: u32, sg: &mut [ibv_sge]) -> ibv_send_wr {
        // SAFETY: an all-zero work request is valid.
        let mut w: ibv_send_wr = unsafe { zeroed() };
        w.wr_id = 0x1000 + u64::from(op);
        w.opcode = op;
        w.sg_list = sg.as_mut_ptr();
        w.num_sge = sg.len() as c_int;
        w
    }

    fn wqe_at(q: &SendQueue, i: u32) -> abi::SendWqe {
        // SAFETY: slot i of the test ring.
        unsafe { ptr::read(q.ring.slot(i).cast::<abi::SendWqe>()) }
    }

    fn sge_at(q: &SendQueue, i: u32, n: usize) -> abi::Sge {
        // SAFETY: inside slot i of the test ring.
        unsafe {
            ptr::read(
                q.ring
                    .slot(i)
                    .add(size_of::<abi::SendWqe>())
                    .cast::<abi::Sge>()
                    .add(n),
            )
        }
    }

    fn sge(addr: u64, length: u32, lkey: u32) -> ibv_sge {
        ibv_sge { addr, length, lkey }
    }

    #[test]
    fn send_list_is_published_with_its_sges() {
        let mut q = sq(IBV_QPT_RC, 8);
        let mut sg1 = [sge(0x10, 100, 7), sge(0x20, 28, 8)];
        let mut sg2 = [sge(0x30, 8, 9)];
        let mut w2 = wr(abi::WR_ATOMIC_FETCH_AND_ADD, &mut sg2);
        w2.wr.atomic = ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: 0x4000,
            compare_add: 5,
            swap: 6,
            rkey: 0x77,
        };
        let mut w1 = wr(abi::WR_RDMA_WRITE_WITH_IMM, &mut sg1);
        w1.send_flags = IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM;
        w1.__bindgen_anon_1.imm_data = 0xdead_beef;
        w1.wr.rdma = ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: 0x9000,
            rkey: 0x55,
        };
        w1.next = &mut w2;
        let mut bad = null_mut();
        // SAFETY: a valid two-element list.
        let (ret, db) = unsafe { q.post(&mut w1, &mut bad) };
        assert_eq!((ret, db), (0, false));
        assert!(bad.is_null());
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 2);
        let a = wqe_at(&q, 0);
        assert_eq!(a.wr_id, w1.wr_id);
        assert_eq!(a.opcode, abi::WR_RDMA_WRITE_WITH_IMM);
        assert_eq!(a.send_flags, abi::SEND_SIGNALED);
        assert_eq!((a.num_sge, a.inline_len, a.ex), (2, 0, 0xdead_beef));
        assert_eq!((a.remote_addr, a.rkey), (0x9000, 0x55));
        assert_eq!(
            sge_at(&q, 0, 1),
            abi::Sge {
                addr: 0x20,
                length: 28,
                lkey: 8
            }
        );
        let b = wqe_at(&q, 1);
        assert_eq!(
            (b.remote_addr, b.rkey, b.compare_add, b.swap),
            (0x4000, 0x77, 5, 6)
        );
        assert_eq!(
            sge_at(&q, 1, 0),
            abi::Sge {
                addr: 0x30,
                length: 8,
                lkey: 9
            }
        );
    }

    #[test]
    fn full_ring_is_enomem_and_doorbell_follows_idle() {
        // 4 slots: 3 outstanding WQEs at most (the max_wr the kernel reports).
        let mut q = sq(IBV_QPT_RC, 4);
        // Counters about to wrap.
        let base = u32::MAX - 1;
        q.ring.producer().store(base, Ordering::Relaxed);
        q.ring.consumer().store(base, Ordering::Relaxed);
        q.ring
            .kernel_flags()
            .store(abi::QUEUE_ENGINE_IDLE, Ordering::Relaxed);
        let mut w = [wr(abi::WR_SEND, &mut []); 4];
        let p: *mut ibv_send_wr = w.as_mut_ptr();
        for i in 0..3 {
            // SAFETY: links inside the array.
            unsafe { (*p.add(i)).next = p.add(i + 1) };
        }
        let mut bad = null_mut();
        // SAFETY: a valid list.
        let (ret, db) = unsafe { q.post(p, &mut bad) };
        assert_eq!((ret, db), (libc::ENOMEM, true));
        assert_eq!(bad, p.wrapping_add(3));
        assert_eq!(
            q.ring.producer().load(Ordering::Relaxed),
            base.wrapping_add(3)
        );
        // The kernel consumes one and is busy: room again, no doorbell.
        q.ring
            .consumer()
            .store(base.wrapping_add(1), Ordering::Release);
        q.ring.kernel_flags().store(0, Ordering::Relaxed);
        // SAFETY: as above.
        let (ret, db) = unsafe { q.post(p.wrapping_add(3), &mut bad) };
        assert_eq!((ret, db), (0, false));
        assert_eq!(
            q.ring.producer().load(Ordering::Relaxed),
            base.wrapping_add(4)
        );
    }

    #[test]
    fn bad_requests_are_einval_and_not_published() {
        let mut q = sq(IBV_QPT_UC, 8);
        let mut sg = [sge(0, 1, 1); 5];
        let mut bad = null_mut();
        let cases = [
            wr(abi::WR_RDMA_READ, &mut []),    // not on UC
            wr(IBV_WR_TSO, &mut []),           // unknown here
            wr(abi::WR_SEND, &mut sg),         // 5 > max_sge 4
            wr(abi::WR_BIND_MW, &mut sg[..1]), // no Sges, and a window
        ];
        for mut w in cases {
            // SAFETY: a valid one-element list.
            let (ret, _) = unsafe { q.post(&mut w, &mut bad) };
            assert_eq!(ret, libc::EINVAL, "opcode {}", w.opcode);
            assert_eq!(bad, &mut w as *mut _);
        }
        let mut w = wr(abi::WR_SEND, &mut []);
        w.num_sge = -1;
        // SAFETY: as above.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, libc::EINVAL);
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 0);
        // Atomics: 8-byte aligned target.
        let mut r = sq(IBV_QPT_RC, 8);
        let mut sg8 = [sge(0, 8, 1)];
        let mut w = wr(abi::WR_ATOMIC_CMP_AND_SWP, &mut sg8);
        w.wr.atomic.remote_addr = 4;
        // SAFETY: as above.
        assert_eq!(unsafe { r.post(&mut w, &mut bad) }.0, libc::EINVAL);
    }

    #[test]
    fn inline_data_is_copied() {
        let mut q = sq(IBV_QPT_RC, 4);
        q.sig_all = true;
        let a = *b"hello ";
        let b = *b"world";
        let mut sg = [
            sge(a.as_ptr() as u64, 6, 0),
            sge(0, 0, 0),
            sge(b.as_ptr() as u64, 5, 0),
        ];
        let mut w = wr(abi::WR_SEND, &mut sg);
        w.send_flags = IBV_SEND_INLINE;
        let mut bad = null_mut();
        // SAFETY: a valid list; the Sges point at live arrays.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, 0);
        let wqe = wqe_at(&q, 0);
        assert_eq!((wqe.num_sge, wqe.inline_len), (0, 11));
        assert_eq!(wqe.send_flags, abi::SEND_INLINE | abi::SEND_SIGNALED);
        // SAFETY: inside slot 0.
        let data = unsafe {
            core::slice::from_raw_parts(q.ring.slot(0).add(size_of::<abi::SendWqe>()), 11)
        };
        assert_eq!(data, b"hello world");
        // Over max_inline.
        let big = [0u8; 65];
        let mut sg = [sge(big.as_ptr() as u64, 65, 0)];
        let mut w = wr(abi::WR_SEND, &mut sg);
        w.send_flags = IBV_SEND_INLINE;
        // SAFETY: as above.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, libc::EINVAL);
    }

    #[test]
    fn ud_and_bind_fields() {
        let mut q = sq(IBV_QPT_UD, 4);
        let ah = crate::ah::test_ah(42);
        let mut w = wr(abi::WR_SEND_WITH_IMM, &mut []);
        w.wr.ud = ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
            ah,
            remote_qpn: 0x123,
            remote_qkey: 0x1111_1111,
        };
        let mut bad = null_mut();
        // SAFETY: a valid list with a live AH.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, 0);
        let wqe = wqe_at(&q, 0);
        assert_eq!(
            (wqe.ah_num, wqe.remote_qpn, wqe.remote_qkey),
            (42, 0x123, 0x1111_1111)
        );
        w.wr.ud.ah = null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, libc::EINVAL);
        // SAFETY: allocated by test_ah.
        unsafe { free_obj(ah) };

        let mut q = sq(IBV_QPT_RC, 4);
        // SAFETY: plain data.
        let mut mw: ibv_mw = unsafe { zeroed() };
        mw.rkey = 0x1ff;
        // SAFETY: plain data.
        let mut mr: ibv_mr = unsafe { zeroed() };
        mr.lkey = 0x33;
        let mut w = wr(abi::WR_BIND_MW, &mut []);
        w.__bindgen_anon_2.bind_mw = ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
            mw: &mut mw,
            rkey: 0x100,
            bind_info: ibv_mw_bind_info {
                mr: &mut mr,
                addr: 0x5000,
                length: 0x600,
                mw_access_flags: IBV_ACCESS_REMOTE_READ,
            },
        };
        // SAFETY: a valid list with live mw/mr.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, 0);
        let wqe = wqe_at(&q, 0);
        assert_eq!(
            (wqe.bind_mw_rkey, wqe.bind_new_rkey, wqe.bind_mr_lkey),
            (0x1ff, 0x100, 0x33)
        );
        assert_eq!(
            (wqe.bind_access, wqe.bind_addr, wqe.bind_length),
            (IBV_ACCESS_REMOTE_READ, 0x5000, 0x600)
        );
    }
}
