//! Host tests for the `core`-only parts of the kernel module, included by
//! `#[path]` exactly as the module includes them.

#[path = "../../../drivers/softrnic/core/limits.rs"]
#[allow(dead_code)]
pub(crate) mod limits;

#[path = "../../../drivers/softrnic/core/qp_state.rs"]
#[allow(dead_code)]
pub(crate) mod qp_state;

#[cfg(test)]
mod abi_tests;
#[cfg(test)]
mod qp_state_tests;
#[cfg(test)]
mod tests;
