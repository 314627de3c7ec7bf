// SPDX-License-Identifier: GPL-2.0
//! softrnic: a software RDMA NIC for Linux.  One module, two transports
//! (RoCEv2 and iWARP) over any Ethernet netdev, registered with the kernel
//! RDMA core as the kernel verbs provider (RNICPI's P-RNICPI kVP).
//!
//! Layers, from the top: `verbs/` (the verbs objects) and `device.rs`;
//! `engine/` (the WQE executor, for any transport); `transport/` (RoCEv2
//! over UDP, iWARP over TCP: the kernel halves of the protocol machines);
//! `glue/` at the bottom (bindings, the C shim, safe wrappers, and the
//! ib_device_ops entry points, which forward up).  The sans-IO protocol
//! machines and wire rules live in `core/`, shared with the host tests and
//! their simulation; the user ABI lives in `userspace/abi/src/abi.rs`.

use kernel::prelude::*;

/// Refuse a verb: say why in the kernel log (rate-limited: at most 10
/// lines in 5 s from each place that refuses) and evaluate to `err`.  For the refusals a user can act
/// on (an argument out of range, a missing capability), not for flow
/// control (a full queue).
macro_rules! refuse {
    ($err:expr, $($fmt:tt)*) => {{
        // (One limit per place: a flood of one refusal hides no other.)
        static LIMIT: $crate::glue::RateLimit = $crate::glue::RateLimit::new();
        if LIMIT.allow() {
            kernel::pr_info!($($fmt)*);
        }
        $err
    }};
}

#[path = "../../userspace/abi/src/abi.rs"]
#[allow(dead_code, unreachable_pub)]
mod abi;

mod device;
mod engine;
mod glue;
#[path = "core/limits.rs"]
#[allow(dead_code)]
mod limits;
#[path = "core/qp_state.rs"]
#[allow(dead_code)]
mod qp_state;
// The RoCEv2 wire rules (sans-IO, host-tested too); not every item is used
// by the engine.
#[path = "core/crc.rs"]
#[allow(dead_code)]
mod crc;
#[path = "core/icrc.rs"]
#[allow(dead_code)]
mod icrc;
#[path = "core/psn.rs"]
#[allow(dead_code)]
mod psn;
#[path = "core/roce_gso.rs"]
#[allow(dead_code)]
mod roce_gso;
#[path = "core/roce_wire.rs"]
#[allow(dead_code)]
mod roce_wire;
// iWARP's wire formats and connection setup rules (sans-IO).
#[path = "core/iwarp/mod.rs"]
#[allow(dead_code)]
mod iwarp;
// The RoCEv2 protocol machines (sans-IO, run by the host simulation too).
#[path = "core/roce/mod.rs"]
#[allow(dead_code)]
mod roce;
mod transport;
#[path = "core/transport_rules.rs"]
#[allow(dead_code)]
mod transport_rules;
mod verbs;

module! {
    type: SoftRnicModule,
    name: "softrnic",
    authors: ["softrnic developers"],
    description: "softrnic: software RDMA NIC (RoCEv2 and iWARP) over any netdev",
    license: "GPL",
    params: {
        mpa_crc: u32 {
            default: 1,
            description: "iWARP MPA CRC-32C: 0 off (used only if the peer asks), 1 asked for (RFC 5044's default), 2 required",
        },
        mpa_timeout: u32 {
            default: 10,
            description: "iWARP: seconds a connection waits for the peer's MPA request or reply (1 to 300)",
        },
        join_timeout: u32 {
            default: 60,
            description: "iWARP: seconds a QP joined by modify_qp (a softrnic extension) waits for the peer's QP to join too (1 to 3600)",
        },
        mpa_rtr: u32 {
            default: 0,
            description: "iWARP: 1 asks for RFC 6581 peer-to-peer mode when connecting (a zero-length WRITE as the RTR); 0 does not. A peer that asks always gets it",
        },
    },
}

/// modinfo's `version`, from the repository (drivers/softrnic/Kbuild sets
/// `SOFTRNIC_VERSION`); the `module!` macro has no field for it.
#[link_section = ".modinfo"]
#[used]
static MODINFO_VERSION: [u8; version::LEN] = version::entry();

mod version {
    const KEY: &[u8] = b"version=";
    const VALUE: &[u8] = env!("SOFTRNIC_VERSION").as_bytes();
    pub(crate) const LEN: usize = KEY.len() + VALUE.len() + 1;

    /// `version=VALUE\0`, as modpost and modinfo read `.modinfo`.
    pub(crate) const fn entry() -> [u8; LEN] {
        let mut e = [0u8; LEN];
        let mut i = 0;
        while i < KEY.len() {
            e[i] = KEY[i];
            i += 1;
        }
        let mut j = 0;
        while j < VALUE.len() {
            e[KEY.len() + j] = VALUE[j];
            j += 1;
        }
        e
    }
}

struct SoftRnicModule;

impl kernel::Module for SoftRnicModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        glue::net::register()?;
        if let Err(e) = device::init() {
            glue::net::unregister();
            return Err(e);
        }
        pr_info!("loaded: link types softrnic_roce, softrnic_iwarp\n");
        Ok(SoftRnicModule)
    }
}

impl Drop for SoftRnicModule {
    fn drop(&mut self) {
        device::exit();
        glue::tcp::exit();
        glue::net::unregister();
        verbs::report_live();
        pr_info!("unloaded\n");
    }
}
