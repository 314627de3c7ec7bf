// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//! The user ABI of softrnic: every structure and constant shared by the kernel
//! module (`drivers/softrnic`, through `#[path]`) and the userspace provider.
//! Defined once, `#[repr(C)]`, with compile-time size checks.  Only `core`.

/// `ib_device_ops.uverbs_abi_ver`; the provider accepts exactly this range.
pub const UVERBS_ABI_VERSION: u32 = 1;

/// Value of `AllocUcontextResp::transport` and of the sysfs attribute
/// `softrnic_transport` ("roce" / "iwarp").
pub const TRANSPORT_ROCE: u32 = 0;
pub const TRANSPORT_IWARP: u32 = 1;

/// Response to ALLOC_UCONTEXT (ibv_open_device).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocUcontextResp {
    pub abi_version: u32,
    pub transport: u32,
    pub max_inline_data: u32,
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<AllocUcontextResp>() == 16);
const _: () = assert!(core::mem::align_of::<AllocUcontextResp>() == 4);
