//! The softrnic user ABI crate: the shared file `abi.rs`, as a `no_std` crate.
#![no_std]

mod abi;
pub use abi::*;
