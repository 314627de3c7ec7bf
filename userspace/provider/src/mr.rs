//! Memory regions and memory windows: kernel objects (no driver data);
//! binding a type-1 window is a BIND_MW WQE on the QP's send ring.

use core::ffi::{c_int, c_void};
use core::mem::{size_of, zeroed};
use core::ptr::null_mut;

use softrnic_abi as abi;

use crate::ffi::*;
use crate::qp::post_send;
use crate::{alloc_obj, fail, free_obj, set_errno};

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut ibv_mr {
    let Some(vmr) = alloc_obj::<verbs_mr>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_reg_mr, ib_uverbs_reg_mr_resp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: vmr is a fresh allocation; the buffers are sized.
    let ret = unsafe {
        ibv_cmd_reg_mr(
            pd,
            addr,
            length,
            hca_va,
            access,
            vmr,
            &mut cmd,
            size_of::<ibv_reg_mr>(),
            &mut resp,
            size_of::<ib_uverbs_reg_mr_resp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows vmr.
        unsafe { free_obj(vmr) };
        return fail(ret);
    }
    vmr.cast()
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn rereg_mr(
    vmr: *mut verbs_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_rereg_mr, ib_uverbs_rereg_mr_resp) =
        unsafe { (zeroed(), zeroed()) };
    // SAFETY: vmr is one of our MRs; the buffers are sized.  A new
    // translation is addressed by its virtual address, as reg_mr does.
    unsafe {
        ibv_cmd_rereg_mr(
            vmr,
            flags as u32,
            addr,
            length,
            addr as usize as u64,
            access,
            pd,
            &mut cmd,
            size_of::<ibv_rereg_mr>(),
            &mut resp,
            size_of::<ib_uverbs_rereg_mr_resp>(),
        )
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn dereg_mr(vmr: *mut verbs_mr) -> c_int {
    // SAFETY: vmr is one of our MRs.
    let ret = unsafe { ibv_cmd_dereg_mr(vmr) };
    if ret == 0 {
        // SAFETY: deregistered; libibverbs no longer uses it.
        unsafe { free_obj(vmr) };
    }
    ret
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, type_: ibv_mw_type) -> *mut ibv_mw {
    let Some(mw) = alloc_obj::<ibv_mw>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_alloc_mw, ib_uverbs_alloc_mw_resp) =
        unsafe { (zeroed(), zeroed()) };
    // SAFETY: mw is a fresh allocation; the buffers are sized.
    let ret = unsafe {
        ibv_cmd_alloc_mw(
            pd,
            type_,
            mw,
            &mut cmd,
            size_of::<ibv_alloc_mw>(),
            &mut resp,
            size_of::<ib_uverbs_alloc_mw_resp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows mw.
        unsafe { free_obj(mw) };
        return fail(ret);
    }
    mw
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: mw is one of our MWs.
    let ret = unsafe { ibv_cmd_dealloc_mw(mw) };
    if ret == 0 {
        // SAFETY: deallocated; libibverbs no longer uses it.
        unsafe { free_obj(mw) };
    }
    ret
}

/// ibv_inc_rkey: the next rkey of a window, its low 8 bits (the key
/// portion the consumer owns) incremented.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// Binds a type-1 window: a BIND_MW WQE carrying the window's current and
/// next rkey.  As libibverbs documents, mw->rkey is the new rkey once the
/// bind is posted (the user undoes it if the completion fails).
///
/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn bind_mw(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    mw_bind: *mut ibv_mw_bind,
) -> c_int {
    // SAFETY: libibverbs passes valid objects.
    let (b, rkey) = unsafe { (&*mw_bind, (*mw).rkey) };
    if b.bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0 {
        set_errno(libc::EINVAL);
        return libc::EINVAL;
    }
    let new_rkey = inc_rkey(rkey);
    // SAFETY: an all-zero work request is valid.
    let mut wr: ibv_send_wr = unsafe { zeroed() };
    wr.wr_id = b.wr_id;
    wr.opcode = abi::WR_BIND_MW;
    wr.send_flags = b.send_flags;
    wr.__bindgen_anon_2.bind_mw = ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
        mw,
        rkey: new_rkey,
        bind_info: b.bind_info,
    };
    let mut bad = null_mut();
    // SAFETY: qp is one of our QPs; wr is a one-element list.
    let ret = unsafe { post_send(qp, &mut wr, &mut bad) };
    if ret != 0 {
        set_errno(ret);
        return ret;
    }
    // SAFETY: mw is live.
    unsafe { (*mw).rkey = new_rkey };
    0
}
