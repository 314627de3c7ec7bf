// SPDX-License-Identifier: GPL-2.0
//! Raw bindings to the kernel's RDMA core and network device headers,
//! generated at build time by bindgen from `shim.h` (see `Kbuild`).  Only the
//! glue layer uses them.

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn,
    improper_ctypes,
    clippy::all,
    // Generated code: the lints the kernel turns on beyond clippy::all.
    clippy::undocumented_unsafe_blocks,
    clippy::cast_lossless,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    unreachable_pub,
    missing_docs,
    rustdoc::all
)]

use kernel::ffi;

// The kernel maps these to `isize`/`usize` by hand (see `rust/bindgen_parameters`).
pub(crate) type __kernel_size_t = usize;
pub(crate) type __kernel_ssize_t = isize;
pub(crate) type __kernel_ptrdiff_t = isize;

include!("bindings_generated.rs");
