//! Protection domains (kernel objects, no driver data) and parent domains
//! over them.

use core::ffi::c_int;
use core::mem::{size_of, zeroed};

use crate::ffi::*;
use crate::{alloc_obj, fail, free_obj};

/// A PD as the provider allocates it: a protection domain (`parent` null)
/// or a parent domain over the protection domain `parent`
/// (ibv_alloc_parent_domain), which is that same kernel PD (its handle)
/// with the consumer's allocators and context.  softrnic calls no
/// allocator: its queues are the kernel's memory, mapped.
#[repr(C)]
struct Pd {
    pd: ibv_pd,
    parent: *mut ibv_pd,
}

/// Whether `pd` (one of ours) is a parent domain.
///
/// # Safety
/// `pd` is a live PD of this provider.
pub unsafe fn is_parent_domain(pd: *mut ibv_pd) -> bool {
    // SAFETY: every PD of ours is the first field of a `Pd`.
    unsafe { !(*pd.cast::<Pd>()).parent.is_null() }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    let Some(p) = alloc_obj::<Pd>() else {
        return fail(libc::ENOMEM);
    };
    // (The first field: the pointer libibverbs knows is the object's.)
    let pd = p.cast::<ibv_pd>();
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
        // SAFETY: nobody else knows it.
        unsafe { free_obj(p) };
        return fail(ret);
    }
    pd
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn alloc_parent_domain(
    ctx: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    if attr.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: a non-null attribute structure from the consumer.
    let a = unsafe { &*attr };
    let known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    // A protection domain of this context (not a parent domain itself);
    // no thread domains (ibv_alloc_td is not offered).
    // SAFETY: a non-null PD the consumer passes is a live PD of its
    // context's provider.
    if a.pd.is_null()
        || a.comp_mask & !known != 0
        || unsafe { (*a.pd).context != ctx || is_parent_domain(a.pd) }
    {
        return fail(libc::EINVAL);
    }
    if !a.td.is_null() {
        return fail(libc::EOPNOTSUPP);
    }
    let Some(p) = alloc_obj::<Pd>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: a fresh zeroed allocation; `a.pd` is live.
    unsafe {
        (*p).pd.context = ctx;
        (*p).pd.handle = (*a.pd).handle;
        (*p).parent = a.pd;
    }
    p.cast()
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: pd is one of our PDs.
    let ret = if unsafe { is_parent_domain(pd) } {
        // The kernel PD is its protection domain's.
        0
    } else {
        // SAFETY: as above.
        unsafe { ibv_cmd_dealloc_pd(pd) }
    };
    if ret == 0 {
        // SAFETY: deallocated; libibverbs no longer uses it.
        unsafe { free_obj(pd.cast::<Pd>()) };
    }
    ret
}
