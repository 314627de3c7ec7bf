//! Shared receive queues: a receive ring like a QP's, resizable through
//! MODIFY_SRQ (the kernel reports the new ring through a user buffer).

use core::ffi::c_int;
use core::mem::{offset_of, size_of, zeroed};
use core::ptr::{self, addr_of, addr_of_mut};

use softrnic_abi as abi;

use crate::ffi::*;
use crate::recv::RecvQueue;
use crate::ring::{Locked, Ring};
use crate::{alloc_obj, cmd_fd, fail, free_obj};

#[repr(C)]
pub struct Srq {
    /// libibverbs's part; first, so its pointers are pointers to the Srq.
    vsrq: verbs_srq,
    q: Locked<RecvQueue>,
}

const _: () = assert!(offset_of!(Srq, vsrq) == 0);

/// CREATE_SRQ response with softrnic's driver data appended.
#[repr(C)]
struct CreateSrqResp {
    ibv: ib_uverbs_create_srq_resp,
    drv: abi::CreateSrqResp,
}

/// MODIFY_SRQ command with softrnic's driver data appended.
#[repr(C)]
struct ModifySrqCmd {
    ibv: ibv_modify_srq,
    drv: abi::ModifySrqCmd,
}

const _: () = assert!(offset_of!(CreateSrqResp, drv) == size_of::<ib_uverbs_create_srq_resp>());
const _: () = assert!(offset_of!(ModifySrqCmd, drv) == size_of::<ibv_modify_srq>());

/// # Safety
/// `srq` is an SRQ this provider created and has not destroyed.
unsafe fn state<'a>(srq: *mut ibv_srq) -> &'a Locked<RecvQueue> {
    // SAFETY: ibv_srq is at offset 0 of Srq; only `q` is borrowed.
    unsafe { &*addr_of!((*srq.cast::<Srq>()).q) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    let Some(srq) = alloc_obj::<Srq>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_create_srq, CreateSrqResp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: srq is a fresh zeroed allocation; the buffers are sized.
    let ret = unsafe {
        ibv_cmd_create_srq(
            pd,
            addr_of_mut!((*srq).vsrq.srq),
            attr,
            &mut cmd,
            size_of::<ibv_create_srq>(),
            &mut resp.ibv,
            size_of::<CreateSrqResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows srq.
        unsafe { free_obj(srq) };
        return fail(ret);
    }
    // SAFETY: pd's context is live.
    match unsafe {
        Ring::map(
            cmd_fd((*pd).context),
            &resp.drv.rq,
            size_of::<abi::RecvWqe>(),
        )
    } {
        Ok(ring) => {
            // SAFETY: srq is ours; attr->attr now holds the kernel's caps.
            unsafe {
                Locked::init(
                    addr_of_mut!((*srq).q),
                    RecvQueue::new(ring, (*attr).attr.max_sge),
                );
                addr_of_mut!((*srq).vsrq.srq)
            }
        }
        Err(e) => {
            // SAFETY: the SRQ exists in the kernel and nobody else knows it.
            unsafe {
                ibv_cmd_destroy_srq(addr_of_mut!((*srq).vsrq.srq));
                free_obj(srq);
            }
            fail(e)
        }
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    attr_mask: c_int,
) -> c_int {
    // SAFETY: a zeroed command is a valid input.
    let mut cmd: ModifySrqCmd = unsafe { zeroed() };
    if attr_mask & IBV_SRQ_MAX_WR as c_int == 0 {
        // SAFETY: srq is one of ours; cmd is sized (queue_info_addr 0).
        return unsafe {
            ibv_cmd_modify_srq(
                srq,
                attr,
                attr_mask,
                &mut cmd.ibv,
                size_of::<ModifySrqCmd>(),
            )
        };
    }
    // Resizing: hold off posters until the new ring is mapped.
    // SAFETY: srq is one of ours.
    let mut q = unsafe { state(srq) }.lock();
    let mut info = abi::QueueInfo::default();
    cmd.drv.queue_info_addr = ptr::addr_of_mut!(info) as usize as u64;
    // SAFETY: srq is live; cmd is sized; the kernel writes `info`.
    let ret = unsafe {
        ibv_cmd_modify_srq(
            srq,
            attr,
            attr_mask,
            &mut cmd.ibv,
            size_of::<ModifySrqCmd>(),
        )
    };
    // Volatile: written by the kernel behind the compiler's back.
    // SAFETY: info is a live local.
    let info = unsafe { ptr::read_volatile(&info) };
    // The kernel reports a ring only once it has switched to it, even if the
    // command then failed: follow it whenever it did.
    if info.slots == 0 {
        return if ret != 0 { ret } else { libc::EPROTO };
    }
    // SAFETY: srq's context is live.
    match unsafe { Ring::map(cmd_fd((*srq).context), &info, size_of::<abi::RecvWqe>()) } {
        Ok(ring) => {
            let max_sge = q.max_sge;
            *q = RecvQueue::new(ring, max_sge); // unmaps the old ring
            ret
        }
        Err(e) => {
            q.ring = Ring::NONE; // the old ring is stale: posts now fail
            e
        }
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    // SAFETY: a zeroed command is a valid input.
    let mut cmd: ibv_query_srq = unsafe { zeroed() };
    // SAFETY: arguments from libibverbs unchanged; cmd is sized.
    unsafe { ibv_cmd_query_srq(srq, attr, &mut cmd, size_of::<ibv_query_srq>()) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn destroy_srq(ibsrq: *mut ibv_srq) -> c_int {
    // SAFETY: ibsrq is one of our SRQs.
    let ret = unsafe { ibv_cmd_destroy_srq(ibsrq) };
    if ret != 0 {
        return ret;
    }
    let srq = ibsrq.cast::<Srq>();
    // SAFETY: destroyed in the kernel; nobody posts to it any more.
    unsafe {
        Locked::destroy(addr_of_mut!((*srq).q));
        free_obj(srq);
    }
    0
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    if bad_wr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: srq is one of ours; wr and bad_wr as libibverbs promises.
    unsafe { state(srq).lock().post(wr, bad_wr) }
}
