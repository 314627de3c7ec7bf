//! Address handles: created in the kernel (which resolves the RoCE
//! addresses); UD send WQEs name them by the number the kernel returns.

use core::ffi::c_int;
use core::mem::{offset_of, size_of, zeroed};
use core::ptr::addr_of_mut;

use softrnic_abi as abi;

use crate::ffi::*;
use crate::{alloc_obj, fail, free_obj};

#[repr(C)]
struct Ah {
    /// libibverbs's part; first, so its pointers are pointers to the Ah.
    ibv_ah: ibv_ah,
    ah_num: u32,
}

const _: () = assert!(offset_of!(Ah, ibv_ah) == 0);

/// CREATE_AH response with softrnic's driver data appended.
#[repr(C)]
struct CreateAhResp {
    ibv: ib_uverbs_create_ah_resp,
    drv: abi::CreateAhResp,
}

const _: () = assert!(offset_of!(CreateAhResp, drv) == size_of::<ib_uverbs_create_ah_resp>());

/// The number a UD WQE carries for `ah` (None for a NULL ah).
///
/// # Safety
/// `ah` is NULL or one of our AHs.
pub unsafe fn ah_num(ah: *mut ibv_ah) -> Option<u32> {
    // SAFETY: per the caller's promise.
    unsafe { ah.cast::<Ah>().as_ref() }.map(|a| a.ah_num)
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    let Some(ah) = alloc_obj::<Ah>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: a zeroed response is a valid input.
    let mut resp: CreateAhResp = unsafe { zeroed() };
    // SAFETY: ah is a fresh allocation; resp is sized.
    let ret = unsafe {
        ibv_cmd_create_ah(
            pd,
            addr_of_mut!((*ah).ibv_ah),
            attr,
            &mut resp.ibv,
            size_of::<CreateAhResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows ah.
        unsafe { free_obj(ah) };
        return fail(ret);
    }
    // SAFETY: ah is ours until returned.
    unsafe {
        (*ah).ah_num = resp.drv.ah_num;
        addr_of_mut!((*ah).ibv_ah)
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn destroy_ah(ah: *mut ibv_ah) -> c_int {
    // SAFETY: ah is one of our AHs.
    let ret = unsafe { ibv_cmd_destroy_ah(ah) };
    if ret == 0 {
        // SAFETY: destroyed; libibverbs no longer uses it.
        unsafe { free_obj(ah.cast::<Ah>()) };
    }
    ret
}

/// An AH as create_ah leaves it, without the kernel (unit tests).
#[cfg(test)]
pub fn test_ah(num: u32) -> *mut ibv_ah {
    let ah = alloc_obj::<Ah>().expect("calloc");
    // SAFETY: fresh allocation.
    unsafe {
        (*ah).ah_num = num;
        addr_of_mut!((*ah).ibv_ah)
    }
}
