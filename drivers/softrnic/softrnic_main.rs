// SPDX-License-Identifier: GPL-2.0
//! softrnic: a software RDMA NIC for Linux.  One module, two transports
//! (RoCEv2 and iWARP) over any Ethernet netdev, registered with the kernel
//! RDMA core as the kernel verbs provider (RNICPI's P-RNICPI kVP).
//!
//! Layers: `glue` (bindings, C shim, ib_device_ops entry points) → `device`,
//! `attrs` (verbs objects) → engines (later).  Sans-IO rules live in `core/`,
//! shared with host tests; the user ABI lives in `userspace/abi/src/abi.rs`.

use kernel::prelude::*;

#[path = "../../userspace/abi/src/abi.rs"]
#[allow(dead_code, unreachable_pub)]
mod abi;
mod attrs;
mod device;
mod glue;
#[path = "core/limits.rs"]
#[allow(dead_code)]
mod limits;
#[path = "core/qp_state.rs"]
#[allow(dead_code)]
mod qp_state;
// RoCEv2 wire rules (issue 4): compiled and linted with the module now,
// used by the engine when it lands.
#[path = "core/icrc.rs"]
#[allow(dead_code)]
mod icrc;
#[path = "core/psn.rs"]
#[allow(dead_code)]
mod psn;
#[path = "core/roce_wire.rs"]
#[allow(dead_code)]
mod roce_wire;
mod verbs;

module! {
    type: SoftRnicModule,
    name: "softrnic",
    authors: ["softrnic developers"],
    description: "softrnic: software RDMA NIC (RoCEv2 and iWARP) over any netdev",
    license: "GPL",
}

struct SoftRnicModule;

impl kernel::Module for SoftRnicModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        device::init()?;
        pr_info!("loaded: link types softrnic_roce, softrnic_iwarp\n");
        Ok(SoftRnicModule)
    }
}

impl Drop for SoftRnicModule {
    fn drop(&mut self) {
        device::exit();
        verbs::report_live();
        pr_info!("unloaded\n");
    }
}
