//! libsoftrnic-rdmav34.so: the libibverbs provider for softrnic devices (the
//! uVP of RNICPI's NP-RNICPI).  libibverbs loads it through
//! /etc/libibverbs.d/softrnic.driver; it claims only devices that carry the
//! `softrnic_transport` sysfs attribute, opens contexts with the shared ABI
//! (`softrnic-abi`) and implements the verbs: objects through ib_uverbs with
//! softrnic's driver udata, the data path on the rings the kernel maps
//! (ring.rs) with no syscall but an occasional doorbell.
//!
//! This file: registration, the context and the ops table.  One file per
//! object kind: pd, mr (and memory windows), cq, qp, srq, ah; recv.rs for
//! receive rings (QP and SRQ).

#![allow(clippy::missing_safety_doc)]

mod ah;
mod cq;
mod ffi;
mod mr;
mod pd;
mod qp;
mod recv;
mod ring;
mod srq;

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of, zeroed};
use core::ptr::{self, null_mut};

use ffi::*;
use softrnic_abi as abi;

/// A softrnic device as libibverbs sees it.
#[repr(C)]
struct Device {
    vdev: verbs_device,
    transport: u32,
}

/// An open context; `ibv_ctx` is where libibverbs's part lives.
#[repr(C)]
struct Context {
    ibv_ctx: verbs_context,
    transport: u32,
    max_inline_data: u32,
}

/// The ALLOC_UCONTEXT command and response, with softrnic's driver data
/// appended (ib_uverbs hands the tail to the kernel driver as udata).
#[repr(C)]
struct GetContextCmd {
    ibv: ibv_get_context,
}

#[repr(C)]
struct GetContextResp {
    ibv: ib_uverbs_get_context_resp,
    drv: abi::AllocUcontextResp,
}

/// Which transport a sysfs device runs, if it is a softrnic device at all.
fn softrnic_transport(sysfs: &verbs_sysfs_dev) -> Option<u32> {
    let path = cstr_bytes(&sysfs.ibdev_path);
    let path = core::str::from_utf8(path).ok()?;
    let attr = std::fs::read_to_string(format!("{path}/softrnic_transport")).ok()?;
    match attr.trim() {
        "roce" => Some(abi::TRANSPORT_ROCE),
        "iwarp" => Some(abi::TRANSPORT_IWARP),
        _ => None,
    }
}

fn cstr_bytes(buf: &[core::ffi::c_char]) -> &[u8] {
    // SAFETY: c_char and u8 have the same size and alignment.
    let bytes = unsafe { core::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), buf.len()) };
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises (valid device, context and buffers).
unsafe extern "C" fn match_device(sysfs: *mut verbs_sysfs_dev) -> bool {
    // SAFETY: libibverbs passes a valid sysfs device description.
    !sysfs.is_null() && softrnic_transport(unsafe { &*sysfs }).is_some()
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises (valid device, context and buffers).
unsafe extern "C" fn alloc_device(sysfs: *mut verbs_sysfs_dev) -> *mut verbs_device {
    // SAFETY: as in match_device.
    let Some(transport) = (unsafe { sysfs.as_ref() }).and_then(softrnic_transport) else {
        return null_mut();
    };
    // SAFETY: calloc returns zeroed memory or NULL; a zeroed verbs_device is
    // what libibverbs expects from a provider before it fills it in.
    let dev = unsafe { libc::calloc(1, size_of::<Device>()) }.cast::<Device>();
    if dev.is_null() {
        return null_mut();
    }
    // SAFETY: dev is a fresh allocation of the right size.
    unsafe {
        (*dev).transport = transport;
        ptr::addr_of_mut!((*dev).vdev)
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises (valid device, context and buffers).
unsafe extern "C" fn uninit_device(vdev: *mut verbs_device) {
    // SAFETY: vdev came from alloc_device (first field of Device).
    unsafe { libc::free(vdev.cast::<c_void>()) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises (valid device, context and buffers).
unsafe extern "C" fn alloc_context(
    ibdev: *mut ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut verbs_context {
    // SAFETY: the offset argument is the C idiom `&((T *)NULL)->member`: a
    // pointer whose value is the member offset, never dereferenced.
    let raw = unsafe {
        _verbs_init_and_alloc_context(
            ibdev,
            cmd_fd,
            size_of::<Context>(),
            offset_of!(Context, ibv_ctx) as *mut verbs_context,
            RDMA_DRIVER_UNKNOWN,
        )
    };
    let ctx = raw.cast::<Context>();
    if ctx.is_null() {
        return null_mut();
    }
    // SAFETY: zeroed command/response structures are valid inputs.
    let mut cmd: GetContextCmd = unsafe { zeroed() };
    // SAFETY: as above.
    let mut resp: GetContextResp = unsafe { zeroed() };
    // SAFETY: ctx is the context libibverbs just allocated; cmd/resp are
    // sized buffers whose tails carry softrnic's udata.
    let ret = unsafe {
        ibv_cmd_get_context(
            ptr::addr_of_mut!((*ctx).ibv_ctx),
            &mut cmd.ibv,
            size_of::<GetContextCmd>(),
            &mut resp.ibv,
            size_of::<GetContextResp>(),
        )
    };
    if ret != 0 || resp.drv.abi_version != abi::UVERBS_ABI_VERSION {
        // SAFETY: undo _verbs_init_and_alloc_context.
        unsafe {
            verbs_uninit_context(ptr::addr_of_mut!((*ctx).ibv_ctx));
            libc::free(ctx.cast());
        }
        // A kernel speaking another softrnic ABI: EPROTO.
        set_errno(if ret != 0 { ret } else { libc::EPROTO });
        return null_mut();
    }
    // SAFETY: ctx is valid and exclusively ours until returned.
    unsafe {
        (*ctx).transport = resp.drv.transport;
        (*ctx).max_inline_data = resp.drv.max_inline_data;
        verbs_set_ops(ptr::addr_of_mut!((*ctx).ibv_ctx), &CONTEXT_OPS.0);
        ptr::addr_of_mut!((*ctx).ibv_ctx)
    }
}

fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local and always writable.
    unsafe { *libc::__errno_location() = e };
}

fn errno() -> c_int {
    // SAFETY: errno is thread-local and always readable.
    unsafe { *libc::__errno_location() }
}

/// Sets errno and returns NULL: how the object-creating ops fail.
fn fail<T>(e: c_int) -> *mut T {
    set_errno(e);
    null_mut()
}

/// A zeroed allocation for a provider object (libibverbs's structs expect
/// zeroed memory before the command helpers fill them), None when out of
/// memory.  Provider objects are plain C-layout data; fields with Rust
/// state are initialised in place before use.
fn alloc_obj<T>() -> Option<*mut T> {
    const { assert!(core::mem::align_of::<T>() <= 16) };
    // SAFETY: calloc has no preconditions; malloc alignment (16) covers
    // every provider object.
    let p = unsafe { libc::calloc(1, size_of::<T>()) }.cast::<T>();
    (!p.is_null()).then_some(p)
}

/// Frees an object from `alloc_obj` (its Rust fields already dropped).
///
/// # Safety
/// `p` came from `alloc_obj` and is no longer used.
unsafe fn free_obj<T>(p: *mut T) {
    // SAFETY: per the caller's promise.
    unsafe { libc::free(p.cast()) }
}

/// The uverbs command file of a context: rings are mmapped from it.
///
/// # Safety
/// `ctx` is a live context.
unsafe fn cmd_fd(ctx: *mut ibv_context) -> c_int {
    // SAFETY: per the caller's promise.
    unsafe { (*ctx).cmd_fd }
}

/// The transport (abi::TRANSPORT_*) of a context.
///
/// # Safety
/// `ctx` is a live context opened by this provider.
unsafe fn transport(ctx: *mut ibv_context) -> u32 {
    // SAFETY: ctx is the `context` member of the verbs_context inside one of
    // our Contexts (container_of twice).
    unsafe {
        let vctx = ctx.byte_sub(offset_of!(verbs_context, context));
        (*vctx
            .byte_sub(offset_of!(Context, ibv_ctx))
            .cast::<Context>())
        .transport
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises (valid device, context and buffers).
unsafe extern "C" fn free_context(ibctx: *mut ibv_context) {
    // SAFETY: ibctx is the `context` member of the verbs_context inside one
    // of our Contexts (container_of twice).
    unsafe {
        let vctx = ibctx
            .byte_sub(offset_of!(verbs_context, context))
            .cast::<verbs_context>();
        verbs_uninit_context(vctx);
        libc::free(vctx.byte_sub(offset_of!(Context, ibv_ctx)).cast());
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises (valid device, context and buffers).
unsafe extern "C" fn query_device_ex(
    ctx: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: zeroed response buffer.
    let mut resp: ib_uverbs_ex_query_device_resp = unsafe { zeroed() };
    let mut resp_size = size_of::<ib_uverbs_ex_query_device_resp>();
    // SAFETY: arguments come from libibverbs unchanged; resp is sized.
    unsafe { ibv_cmd_query_device_any(ctx, input, attr, attr_size, &mut resp, &mut resp_size) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises (valid device, context and buffers).
unsafe extern "C" fn query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: zeroed command buffer.
    let mut cmd: ibv_query_port = unsafe { zeroed() };
    // SAFETY: arguments come from libibverbs unchanged; cmd is sized.
    unsafe { ibv_cmd_query_port(ctx, port, attr, &mut cmd, size_of::<ibv_query_port>()) }
}

/// libibverbs reads these tables from any thread; they are never written.
#[repr(transparent)]
struct Shared<T>(T);
// SAFETY: immutable after construction; the raw pointers inside point to
// static data.
unsafe impl<T> Sync for Shared<T> {}

static CONTEXT_OPS: Shared<verbs_context_ops> = Shared(verbs_context_ops {
    free_context: Some(free_context),
    query_device_ex: Some(query_device_ex),
    query_port: Some(query_port),
    alloc_pd: Some(pd::alloc_pd),
    dealloc_pd: Some(pd::dealloc_pd),
    alloc_parent_domain: Some(pd::alloc_parent_domain),
    reg_mr: Some(mr::reg_mr),
    rereg_mr: Some(mr::rereg_mr),
    dereg_mr: Some(mr::dereg_mr),
    alloc_mw: Some(mr::alloc_mw),
    dealloc_mw: Some(mr::dealloc_mw),
    bind_mw: Some(mr::bind_mw),
    create_cq: Some(cq::create_cq),
    create_cq_ex: Some(cq::create_cq_ex),
    destroy_cq: Some(cq::destroy_cq),
    resize_cq: Some(cq::resize_cq),
    poll_cq: Some(cq::poll_cq),
    req_notify_cq: Some(cq::req_notify_cq),
    cq_event: Some(cq::cq_event),
    create_qp: Some(qp::create_qp),
    create_qp_ex: Some(qp::create_qp_ex),
    query_qp: Some(qp::query_qp),
    modify_qp: Some(qp::modify_qp),
    destroy_qp: Some(qp::destroy_qp),
    post_send: Some(qp::post_send),
    post_recv: Some(qp::post_recv),
    create_srq: Some(srq::create_srq),
    modify_srq: Some(srq::modify_srq),
    query_srq: Some(srq::query_srq),
    destroy_srq: Some(srq::destroy_srq),
    post_srq_recv: Some(srq::post_srq_recv),
    create_ah: Some(ah::create_ah),
    destroy_ah: Some(ah::destroy_ah),
    // The kernel answers for multicast (EOPNOTSUPP when it has none).
    attach_mcast: Some(ibv_cmd_attach_mcast),
    detach_mcast: Some(ibv_cmd_detach_mcast),
    // SAFETY: every other op stays NULL: libibverbs then answers EOPNOTSUPP.
    ..unsafe { zeroed() }
});

/// An empty match table (just the end marker): libibverbs requires a table;
/// `match_device` does the matching, by sysfs attribute.
static MATCH_TABLE: Shared<[verbs_match_ent; 1]> = Shared([
    // SAFETY: an all-zero entry is the table's end marker.
    unsafe { zeroed() },
]);

static DEVICE_OPS: Shared<verbs_device_ops> = Shared(verbs_device_ops {
    name: c"softrnic".as_ptr(),
    match_min_abi_version: abi::UVERBS_ABI_VERSION,
    match_max_abi_version: abi::UVERBS_ABI_VERSION,
    match_table: &MATCH_TABLE.0 as *const _ as *const verbs_match_ent,
    static_providers: null_mut(),
    match_device: Some(match_device),
    alloc_context: Some(alloc_context),
    import_context: None,
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
});

extern "C" fn register_provider() {
    // SAFETY: DEVICE_OPS is a complete, static provider description.
    unsafe { verbs_register_driver_34(&DEVICE_OPS.0) }
}

/// libibverbs dlopen()s the provider; registration happens in a constructor,
/// as with every rdma-core provider.
#[used]
#[link_section = ".init_array"]
static REGISTER: extern "C" fn() = register_provider;
