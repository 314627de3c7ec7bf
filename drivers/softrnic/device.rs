// SPDX-License-Identifier: GPL-2.0
//! A softrnic RDMA device: one ib_device with one port over one netdev, for
//! one transport (RoCEv2 or iWARP).  Creation (`rdma link add`), the device
//! registry, netdev events and module-exit teardown.

use kernel::prelude::*;

use crate::glue::{self, IbDevice, NetDevice};
use crate::limits;

/// The wire transport of a device; chosen by the link type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Transport {
    Roce,
    Iwarp,
}

impl Transport {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Transport::Roce => "roce",
            Transport::Iwarp => "iwarp",
        }
    }

    pub(crate) fn limits(self) -> &'static limits::DeviceLimits {
        match self {
            Transport::Roce => &limits::ROCE_LIMITS,
            Transport::Iwarp => &limits::IWARP_LIMITS,
        }
    }

    pub(crate) fn header_bytes(self) -> u32 {
        match self {
            Transport::Roce => limits::ROCE_MAX_HEADER_BYTES,
            Transport::Iwarp => limits::IWARP_MAX_HEADER_BYTES,
        }
    }

    /// The ABI value the provider sees (abi::TRANSPORT_*).
    pub(crate) fn abi(self) -> u32 {
        match self {
            Transport::Roce => crate::abi::TRANSPORT_ROCE,
            Transport::Iwarp => crate::abi::TRANSPORT_IWARP,
        }
    }
}

/// The driver part of a softrnic device, allocated by ib_core right after the
/// `ib_device` it extends (see `glue::SoftRnicIbDev`).  Immutable once created.
pub(crate) struct SoftRnic {
    pub(crate) transport: Transport,
    /// RoCE: the UDP port 4791 sockets of the netdev's namespace.
    _sockets: Option<glue::net::NetNsSockets>,
    /// iWARP: the port QPs joined by modify_qp connect to
    /// (`transport/iwarp/join.rs`); stopped by dealloc_driver.
    pub(crate) join: Option<kernel::sync::Arc<crate::transport::iwarp::join::JoinPort>>,
}

/// A registry entry: one live softrnic device.
struct Entry {
    dev: IbDevice,
    netdev_id: usize,
    /// Set once ib_register_device succeeded.
    registered: bool,
    /// Set once an unregistration was queued (a netdev went away).
    unregistering: bool,
}

kernel::sync::global_lock! {
    // SAFETY: initialised in `init` before any other use, and used once.
    unsafe(uninit) static DEVICES: Mutex<KVec<Entry>> = KVec::new();
}

/// Module init: ready the registry, then hook into rdma link and netdev events.
pub(crate) fn init() -> Result {
    // SAFETY: called once, from module init, before anything can use DEVICES.
    unsafe { DEVICES.init() };
    glue::register_link_types_and_notifier()
}

/// Module exit: stop new devices and events, then unregister every device and
/// wait for each unregistration to finish (ib_core frees the memory).
pub(crate) fn exit() {
    // After this no newlink is running (rdma_link_unregister waits for it) and
    // no netdev event arrives, so every registry entry is a registered device.
    glue::unregister_link_types_and_notifier();
    loop {
        // Take a reference under the lock: the device may be going away
        // concurrently (a queued unregistration), but its memory stays valid.
        let Some(dev) = DEVICES.lock().first().map(|e| e.dev.get()) else {
            break;
        };
        dev.unregister();
        // dealloc_driver has removed the entry; if not, stop rather than spin.
        if DEVICES.lock().first().is_some_and(|e| dev.is(&e.dev)) {
            pr_err!("a device would not unregister; leaving it\n");
            return;
        }
    }
    // A static is never dropped: free the registry's buffer by hand, or it
    // outlives the module (kmemleak finds it).
    drop(core::mem::replace(&mut *DEVICES.lock(), KVec::new()));
}

/// `rdma link add NAME type softrnic_{roce,iwarp} netdev NDEV`.
pub(crate) fn newlink(transport: Transport, name: &CStr, ndev: &NetDevice) -> Result {
    // (Refusals say why, rate-limited: `refuse!`.)
    let link = name.to_str().unwrap_or("?");
    if !ndev.is_ethernet() {
        return Err(refuse!(
            EINVAL,
            "{} is not an Ethernet device (a loopback or tunnel carries no RoCE or iWARP link; a veth pair does); cannot add {}\n",
            ndev.name(),
            link
        ));
    }
    let netdev_id = ndev.id();
    let sockets = match transport {
        Transport::Roce => Some(glue::net::NetNsSockets::attach(ndev).map_err(|e| {
            if e == EADDRINUSE {
                refuse!(
                    e,
                    "UDP port 4791 is taken in the namespace of {} (rdma_rxe or another RoCE driver has a device there); cannot add {}\n",
                    ndev.name(),
                    link
                )
            } else {
                e
            }
        })?),
        Transport::Iwarp => None,
    };
    let join = match transport {
        Transport::Roce => None,
        Transport::Iwarp => Some(crate::transport::iwarp::join::JoinPort::new()?),
    };
    let dev = IbDevice::alloc(
        SoftRnic {
            transport,
            _sockets: sockets,
            join,
        },
        ndev,
    )?;
    // Check for a duplicate and claim the (netdev, transport) slot under one
    // lock hold: two `rdma link add` may run at once.
    let claimed = {
        let mut devices = DEVICES.lock();
        if devices.iter().any(|e| {
            // Entries are alive under the lock (see `forget`).
            e.netdev_id == netdev_id && e.dev.driver().transport == transport && !e.unregistering
        }) {
            Err(EEXIST)
        } else {
            let entry = Entry {
                dev: dev.clone_ptr(),
                netdev_id,
                registered: false,
                unregistering: false,
            };
            devices.push(entry, GFP_KERNEL).map_err(Error::from)
        }
    };
    if let Err(e) = claimed {
        if e == EEXIST {
            refuse!(
                e,
                "{} already has a softrnic_{} device; cannot add {}\n",
                ndev.name(),
                transport.name(),
                link
            );
        }
        dev.dealloc_unregistered();
        return Err(e);
    }

    if let Err(e) = dev.register(name) {
        // dealloc_driver (called by ib_dealloc_device) removes the entry.
        dev.dealloc_unregistered();
        return Err(e);
    }

    // From here the device may be unregistered (and freed) at any time by
    // ib_core; only touch it through the registry, under its lock.
    let mut devices = DEVICES.lock();
    if let Some(e) = devices.iter_mut().find(|e| e.dev.is(&dev)) {
        e.registered = true;
        // The netdev may have started unregistering while we registered,
        // before the entry was marked: its event was skipped, act on it now.
        if !ndev.is_registered() && !e.unregistering {
            e.unregistering = true;
            e.dev.unregister_queued();
        }
    }
    Ok(())
}

/// ib_core's dealloc_driver: the device is going away; forget it.
pub(crate) fn forget(dev: &IbDevice) {
    let mut devices = DEVICES.lock();
    if let Some(i) = devices.iter().position(|e| e.dev.is(dev)) {
        // `i` comes from `position`, so the removal cannot fail.
        let _ = devices.remove(i);
    }
}

/// What a netdev event means for the devices over that netdev.
/// An IPv4 address of `ndev` came or went: the GIDs of the iWARP ports on
/// it follow (`glue::ops::query_gid`); ib_core's RoCE GID table follows by
/// itself.
pub(crate) fn netdev_addr_event(ndev: &NetDevice) {
    let id = ndev.id();
    let devices = DEVICES.lock();
    for e in devices.iter().filter(|e| {
        e.netdev_id == id
            && e.registered
            && !e.unregistering
            && e.dev.driver().transport == Transport::Iwarp
    }) {
        e.dev.gid_change_event();
    }
}

pub(crate) fn netdev_event(event: glue::NetdevEvent, ndev: &NetDevice) {
    let id = ndev.id();
    let mut devices = DEVICES.lock();
    for e in devices
        .iter_mut()
        .filter(|e| e.netdev_id == id && e.registered && !e.unregistering)
    {
        match event {
            glue::NetdevEvent::Unregister => {
                e.unregistering = true;
                // The port's netdev is gone for good: tell consumers before
                // the device itself goes (IBTA: catastrophic device error).
                glue::device_fatal(&e.dev);
                e.dev.unregister_queued();
            }
            glue::NetdevEvent::StateChange => {
                // The registry lock keeps the device alive here (dealloc_driver
                // takes it before the memory can go).
                let up = ndev.link_up();
                if e.dev.port_state_changed(up) {
                    if !up {
                        e.dev.counters().bump(crate::engine::Counter::LinkDowned);
                    }
                    e.dev.port_event(up);
                }
            }
            glue::NetdevEvent::Other => {}
        }
    }
}
