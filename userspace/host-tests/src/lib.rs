//! Host tests for the `core`-only parts of the kernel module, included by
//! `#[path]` exactly as the module includes them.

#[path = "../../../drivers/softrnic/core/limits.rs"]
#[allow(dead_code)]
pub(crate) mod limits;

#[cfg(test)]
mod tests;
