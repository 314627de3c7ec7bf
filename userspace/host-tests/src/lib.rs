//! Host tests for the `core`-only parts of the kernel module, included by
//! `#[path]` exactly as the module includes them.

#[path = "../../../drivers/softrnic/core/limits.rs"]
#[allow(dead_code)]
pub(crate) mod limits;

#[path = "../../../drivers/softrnic/core/qp_state.rs"]
#[allow(dead_code)]
pub(crate) mod qp_state;

#[path = "../../../drivers/softrnic/core/crc.rs"]
#[allow(dead_code)]
pub(crate) mod crc;

#[path = "../../../drivers/softrnic/core/icrc.rs"]
#[allow(dead_code)]
pub(crate) mod icrc;

#[path = "../../../drivers/softrnic/core/psn.rs"]
#[allow(dead_code)]
pub(crate) mod psn;

#[path = "../../../drivers/softrnic/core/roce_wire.rs"]
#[allow(dead_code)]
pub(crate) mod roce_wire;

#[path = "../../../drivers/softrnic/core/roce_gso.rs"]
#[allow(dead_code)]
pub(crate) mod roce_gso;

#[path = "../../../drivers/softrnic/core/transport_rules.rs"]
#[allow(dead_code)]
pub(crate) mod transport_rules;

#[path = "../../../drivers/softrnic/core/iwarp/mod.rs"]
#[allow(dead_code)]
pub(crate) mod iwarp;

#[path = "../../../drivers/softrnic/core/roce/mod.rs"]
#[allow(dead_code)]
pub(crate) mod roce;

pub mod micro_bench;

#[cfg(test)]
pub(crate) mod sim;

#[cfg(test)]
mod abi_tests;
#[cfg(test)]
mod icrc_tests;
#[cfg(test)]
mod iwarp_fpdu_tests;
#[cfg(test)]
mod iwarp_inbound_tests;
#[cfg(test)]
mod iwarp_join_tests;
#[cfg(test)]
mod iwarp_mpa_tests;
#[cfg(test)]
mod iwarp_outbound_tests;
#[cfg(test)]
mod iwarp_rx_tests;
#[cfg(test)]
mod psn_tests;
#[cfg(test)]
mod qp_state_tests;
#[cfg(test)]
mod roce_gso_tests;
#[cfg(test)]
mod roce_wire_tests;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transport_rules_tests;
