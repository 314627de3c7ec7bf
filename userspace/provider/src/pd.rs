//! Protection domains: kernel objects only (no driver data).

use core::ffi::c_int;
use core::mem::{size_of, zeroed};

use crate::ffi::*;
use crate::{alloc_obj, fail, free_obj};

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    let Some(pd) = alloc_obj::<ibv_pd>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_alloc_pd, ib_uverbs_alloc_pd_resp) =
        unsafe { (zeroed(), zeroed()) };
    // SAFETY: pd is a fresh allocation; the buffers are sized.
    let ret = unsafe {
        ibv_cmd_alloc_pd(
            ctx,
            pd,
            &mut cmd,
            size_of::<ibv_alloc_pd>(),
            &mut resp,
            size_of::<ib_uverbs_alloc_pd_resp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows pd.
        unsafe { free_obj(pd) };
        return fail(ret);
    }
    pd
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: pd is one of our PDs.
    let ret = unsafe { ibv_cmd_dealloc_pd(pd) };
    if ret == 0 {
        // SAFETY: deallocated; libibverbs no longer uses it.
        unsafe { free_obj(pd) };
    }
    ret
}
