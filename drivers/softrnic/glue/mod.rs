// SPDX-License-Identifier: GPL-2.0
//! The glue layer: the only place that touches raw kernel pointers.  It wraps
//! `ib_device` and `net_device` in small safe types and holds the `extern "C"`
//! entry points the C side calls (rdma link newlink, netdev events, sysfs and
//! every `ib_device_ops` member in `ops.rs`).

pub(crate) mod access;
mod attrs;
pub(crate) mod backlog;
pub(crate) mod bindings;
mod counters;
pub(crate) mod deferred;
pub(crate) mod events;
pub(crate) mod iw_ops;
pub(crate) mod memory;
pub(crate) mod net;
pub(crate) mod objects;
mod ops;
pub(crate) mod pageref;
mod restrack;
pub(crate) mod ring;
pub(crate) mod table;
pub(crate) mod tcp;
pub(crate) mod txbuf;
pub(crate) mod umem;
mod verbs_ops;

pub(crate) use verbs_ops::device_fatal;

use core::ptr::{addr_of_mut, NonNull};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use kernel::ffi;
use kernel::prelude::*;

use crate::device::{self, SoftRnic, Transport};

/// Turn a kernel errno return into a `Result`.
fn check(ret: ffi::c_int) -> Result {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(())
    }
}

/// The reverse of `check`: what an op returns to ib_core.
fn errno(r: Result) -> ffi::c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The device of a verbs object (for code outside the glue layer).
///
/// # Safety
/// `ib` is one of our devices, alive for as long as the result is used.
pub(crate) unsafe fn dev_of(ib: *mut bindings::ib_device) -> IbDevice {
    // SAFETY: per the caller's contract.
    unsafe { IbDevice::from_ib(ib) }
}

/// The device an op is called on.
///
/// # Safety
/// `ib` is one of our devices (ib_core calls our ops only on those).
unsafe fn dev(ib: *mut bindings::ib_device) -> IbDevice {
    // SAFETY: per the caller's contract.
    unsafe { IbDevice::from_ib(ib) }
}

pub(crate) fn register_link_types_and_notifier() -> Result {
    // SAFETY: plain registration call; the C objects it registers are statics.
    check(unsafe { bindings::softrnic_shim_register() })
}

pub(crate) fn unregister_link_types_and_notifier() {
    // SAFETY: only called after a successful `register_link_types_and_notifier`
    // (module exit runs only when init succeeded).
    unsafe { bindings::softrnic_shim_unregister() }
}

/// A softrnic device as ib_core allocates it: the `ib_device` first (so the
/// two pointers are interchangeable), then the driver part.
#[repr(C)]
pub(crate) struct SoftRnicIbDev {
    ib: bindings::ib_device,
    driver: SoftRnic,
    /// Last port state reported (see `IbDevice::port_state_changed`).
    port_up: AtomicBool,
    /// Object counts and key tables of the verbs layer.
    verbs: crate::verbs::DeviceVerbs,
    /// Packet counters of the engine.
    counters: crate::engine::Counters,
}

/// A pointer to a live softrnic `ib_device`.
///
/// # Invariants
/// The pointee was allocated by `IbDevice::alloc` and is alive: callers keep it
/// so either by holding the device registry lock (dealloc_driver takes it
/// before the memory can go) or by holding a `struct device` reference.
pub(crate) struct IbDevice(NonNull<SoftRnicIbDev>);

// SAFETY: ib_devices are used from any thread; all mutation goes through
// ib_core calls that do their own locking, or atomics.
unsafe impl Send for IbDevice {}
// SAFETY: as above: its shared methods read immutable parts or call ib_core.
unsafe impl Sync for IbDevice {}

/// The device's completion vectors: one per possible CPU.  A vector steers
/// nothing: a CQ's completion handler runs where its completion was made.
pub(crate) fn comp_vectors() -> u32 {
    deferred::cpu_count()
}

impl IbDevice {
    /// Allocate an ib_device with our driver part, set its attributes and ops
    /// and bind port 1 to `ndev`.  Not yet registered.
    pub(crate) fn alloc(driver: SoftRnic, ndev: &NetDevice) -> Result<IbDevice> {
        let transport = driver.transport;
        let port_up = ndev.link_up();
        // SAFETY: _ib_alloc_device returns zeroed memory of the requested size
        // (at least sizeof(ib_device)) with the ib_device initialised, or NULL.
        let raw = unsafe { bindings::softrnic_alloc_ib_device(size_of::<SoftRnicIbDev>()) };
        let ptr = NonNull::new(raw.cast::<SoftRnicIbDev>()).ok_or(ENOMEM)?;
        let p = ptr.as_ptr();
        let guid = crate::limits::guid_from_mac(ndev.mac());
        let ops = ops::device_ops();
        // SAFETY: `p` is a fresh, exclusively owned allocation large enough for
        // SoftRnicIbDev; the driver part is written before anyone can read it.
        unsafe {
            addr_of_mut!((*p).driver).write(driver);
            addr_of_mut!((*p).port_up).write(AtomicBool::new(port_up));
            addr_of_mut!((*p).counters).write(crate::engine::Counters::default());
            crate::verbs::DeviceVerbs::init(addr_of_mut!((*p).verbs));
            let ib = addr_of_mut!((*p).ib);
            (*ib).node_type = match transport {
                Transport::Roce => bindings::RDMA_NODE_IB_CA as u8,
                Transport::Iwarp => bindings::RDMA_NODE_RNIC as u8,
            };
            (*ib).phys_port_cnt = 1;
            // User QPs post in mapped rings; an empty POST_SEND through the
            // write() ABI is the doorbell, which ib_uverbs offers only to
            // drivers that ask for it.
            (*ib).uverbs_cmd_mask |=
                1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND;
            // One completion vector per CPU, as rxe and siw have: ib_cq_pool
            // (nvmet, svcrdma, isert) makes one CQ per vector and spreads
            // its consumers' queues over them; with one vector they all
            // shared a single CQ and its one work item.
            (*ib).num_comp_vectors = comp_vectors() as i32;
            (*ib).node_guid = u64::from_ne_bytes(guid);
            write_node_desc(&mut (*ib).node_desc, transport, ndev);
            bindings::ib_set_device_ops(ib, &ops);
        }
        let dev = IbDevice(ptr);
        // SAFETY: the ib_device is allocated and `ndev` is a live netdev held
        // by the caller (rdma netlink holds it across newlink).
        let ret = unsafe { bindings::ib_device_set_netdev(dev.ib(), ndev.0.as_ptr(), 1) };
        if let Err(e) = check(ret) {
            dev.dealloc_unregistered();
            return Err(e);
        }
        Ok(dev)
    }

    pub(crate) fn ib(&self) -> *mut bindings::ib_device {
        self.0.as_ptr().cast()
    }

    /// # Safety
    /// `ib` must be an ib_device allocated by `IbDevice::alloc` and still alive.
    unsafe fn from_ib(ib: *mut bindings::ib_device) -> IbDevice {
        // SAFETY: the caller guarantees a non-null softrnic ib_device.
        IbDevice(unsafe { NonNull::new_unchecked(ib.cast()) })
    }

    /// Another handle to the same device (same liveness rules).
    pub(crate) fn clone_ptr(&self) -> IbDevice {
        IbDevice(self.0)
    }

    pub(crate) fn is(&self, other: &IbDevice) -> bool {
        self.0 == other.0
    }

    pub(crate) fn driver(&self) -> &SoftRnic {
        // SAFETY: the type invariant keeps the pointee alive; the driver part
        // is immutable after `alloc`.
        unsafe { &(*self.0.as_ptr()).driver }
    }

    pub(crate) fn verbs(&self) -> &crate::verbs::DeviceVerbs {
        // SAFETY: as in `driver`; initialised in `alloc`, and its tables and
        // counters synchronise themselves.
        unsafe { &(*self.0.as_ptr()).verbs }
    }

    pub(crate) fn counters(&self) -> &crate::engine::Counters {
        // SAFETY: as in `driver`; initialised in `alloc`, atomics.
        unsafe { &(*self.0.as_ptr()).counters }
    }

    /// Drop the driver part (dealloc_driver, once).
    ///
    /// # Safety
    /// The device is being freed; nothing uses the driver part any more.
    pub(crate) unsafe fn drop_driver(&self) {
        // SAFETY: per the contract; written once in `alloc`.
        unsafe { core::ptr::drop_in_place(addr_of_mut!((*self.0.as_ptr()).driver)) }
    }

    pub(crate) fn limits(&self) -> &'static crate::limits::DeviceLimits {
        self.driver().transport.limits()
    }

    /// Record the port state; true when it differs from the last one recorded.
    pub(crate) fn port_state_changed(&self, up: bool) -> bool {
        // SAFETY: as in `driver`.
        let flag = unsafe { &(*self.0.as_ptr()).port_up };
        flag.swap(up, Ordering::AcqRel) != up
    }

    /// Register with ib_core under `name`.
    pub(crate) fn register(&self, name: &CStr) -> Result {
        // SAFETY: the device is allocated and not registered; `name` is a
        // valid C string; a NULL dma_device selects ib_core's virtual DMA.
        check(unsafe {
            bindings::ib_register_device(self.ib(), name.as_ptr().cast(), core::ptr::null_mut())
        })
    }

    /// Free a device that never completed registration.
    pub(crate) fn dealloc_unregistered(self) {
        // SAFETY: the device is allocated and not registered; ib_dealloc_device
        // calls our dealloc_driver and frees the memory.
        unsafe { bindings::ib_dealloc_device(self.ib()) }
    }

    /// Take a `struct device` reference: the memory stays valid until the
    /// returned handle is dropped, whatever ib_core does meanwhile.
    pub(crate) fn get(&self) -> HeldIbDevice {
        // SAFETY: the type invariant says the device is alive now.
        unsafe { bindings::softrnic_ib_device_get(self.ib()) };
        HeldIbDevice(IbDevice(self.0))
    }

    /// Queue an asynchronous unregistration (safe under locks such as RTNL).
    pub(crate) fn unregister_queued(&self) {
        // SAFETY: the device is registered (callers check) and alive.
        unsafe { bindings::ib_unregister_device_queued(self.ib()) }
    }

    /// Tell ib_core consumers that the port went up or down.
    pub(crate) fn port_event(&self, up: bool) {
        let ev = if up {
            bindings::ib_event_type_IB_EVENT_PORT_ACTIVE
        } else {
            bindings::ib_event_type_IB_EVENT_PORT_ERR
        };
        // SAFETY: the device is registered and alive.
        unsafe { bindings::softrnic_dispatch_port_event(self.ib(), 1, ev) }
    }

    /// The port's GIDs changed (an iWARP port's follow the netdev's IPv4
    /// addresses): ib_core reads them again (`query_gid`).
    pub(crate) fn gid_change_event(&self) {
        // SAFETY: the device is registered and alive.
        unsafe {
            bindings::softrnic_dispatch_port_event(
                self.ib(),
                1,
                bindings::ib_event_type_IB_EVENT_GID_CHANGE,
            )
        }
    }

    /// The netdev bound to the port, referenced for the guard's lifetime.
    /// Any context, the receive softirq included (see the shim).
    pub(crate) fn port_netdev(&self) -> Option<HeldNetDevice> {
        // SAFETY: the device is alive; the call returns a held netdev or NULL.
        let nd = unsafe { bindings::softrnic_port_netdev(self.ib()) };
        NonNull::new(nd).map(|p| HeldNetDevice(NetDevice(p)))
    }
}

/// An `IbDevice` with a `struct device` reference held.
pub(crate) struct HeldIbDevice(IbDevice);

impl HeldIbDevice {
    pub(crate) fn dev(&self) -> &IbDevice {
        &self.0
    }

    pub(crate) fn is(&self, other: &IbDevice) -> bool {
        self.0.is(other)
    }

    /// Unregister synchronously: when this returns the device is gone from
    /// ib_core and dealloc_driver has run.
    pub(crate) fn unregister(&self) {
        // SAFETY: we hold a reference, so the memory is valid; ib_core fences
        // concurrent unregistrations and tolerates an already-unregistered device.
        unsafe { bindings::ib_unregister_device(self.0.ib()) }
    }
}

impl Drop for HeldIbDevice {
    fn drop(&mut self) {
        // SAFETY: releases the reference taken in `IbDevice::get`.
        unsafe { bindings::softrnic_ib_device_put(self.0.ib()) }
    }
}

fn write_node_desc(desc: &mut [ffi::c_char; 64], transport: Transport, ndev: &NetDevice) {
    let mut w = 0;
    let mut put = |s: &[u8]| {
        for &b in s {
            if w + 1 < desc.len() {
                desc[w] = b as ffi::c_char;
                w += 1;
            }
        }
    };
    put(b"softrnic ");
    put(transport.name().as_bytes());
    put(b" on ");
    put(ndev.name_bytes());
    desc[w] = 0;
}

/// A net_device the kernel handed us for the duration of a call.
pub(crate) struct NetDevice(NonNull<bindings::net_device>);

impl NetDevice {
    /// # Safety
    /// `p` must be a live net_device for as long as the value is used.
    unsafe fn from_raw(p: *mut bindings::net_device) -> Option<NetDevice> {
        NonNull::new(p).map(NetDevice)
    }

    /// The netdev's identity, for comparisons only.
    pub(crate) fn id(&self) -> usize {
        self.0.as_ptr() as usize
    }

    pub(crate) fn is_ethernet(&self) -> bool {
        // SAFETY: live netdev (type invariant of the constructor's caller).
        unsafe { bindings::softrnic_netdev_is_ethernet(self.0.as_ptr()) }
    }

    pub(crate) fn is_registered(&self) -> bool {
        // SAFETY: as above.
        unsafe { bindings::softrnic_netdev_registered(self.0.as_ptr()) }
    }

    pub(crate) fn link_up(&self) -> bool {
        // SAFETY: as above.
        unsafe { bindings::softrnic_netdev_link_up(self.0.as_ptr()) }
    }

    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: as above.
        unsafe { bindings::softrnic_netdev_mtu(self.0.as_ptr()) }
    }

    pub(crate) fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: as above; `mac` has room for ETH_ALEN bytes.
        unsafe { bindings::softrnic_netdev_mac(self.0.as_ptr(), mac.as_mut_ptr()) };
        mac
    }

    /// The netdev's primary IPv4 address.
    pub(crate) fn ipv4(&self) -> Option<[u8; 4]> {
        let mut a = [0u8; 4];
        // SAFETY: as above; `a` has room for an IPv4 address.
        unsafe { bindings::softrnic_netdev_ipv4(self.0.as_ptr(), a.as_mut_ptr()) }.then_some(a)
    }

    /// The netdev's `nth` IPv4 address (each primary before its
    /// secondaries).
    pub(crate) fn ipv4_nth(&self, nth: u32) -> Option<[u8; 4]> {
        let mut a = [0u8; 4];
        // SAFETY: as above; `a` has room for an IPv4 address.
        unsafe { bindings::softrnic_netdev_ipv4_nth(self.0.as_ptr(), nth, a.as_mut_ptr()) }
            .then_some(a)
    }

    /// The IPv4 address this netdev's ARP table gives `mac`.
    pub(crate) fn neigh_ipv4(&self, mac: &[u8; 6]) -> Option<[u8; 4]> {
        let mut a = [0u8; 4];
        // SAFETY: as above; `mac` and `a` are the sizes the shim reads and
        // writes.
        unsafe { bindings::softrnic_neigh_ipv4(self.0.as_ptr(), mac.as_ptr(), a.as_mut_ptr()) }
            .then_some(a)
    }

    pub(crate) fn name_bytes(&self) -> &[u8] {
        // SAFETY: as above; netdev_name returns a NUL-terminated string inside
        // the netdev.
        unsafe { CStr::from_ptr(bindings::softrnic_netdev_name(self.0.as_ptr()).cast()) }.to_bytes()
    }

    pub(crate) fn name(&self) -> &str {
        core::str::from_utf8(self.name_bytes()).unwrap_or("?")
    }
}

/// A net_device with a reference held (from softrnic_port_netdev).
pub(crate) struct HeldNetDevice(NetDevice);

impl core::ops::Deref for HeldNetDevice {
    type Target = NetDevice;
    fn deref(&self) -> &NetDevice {
        &self.0
    }
}

impl Drop for HeldNetDevice {
    fn drop(&mut self) {
        // SAFETY: drops the reference softrnic_port_netdev took.
        unsafe { bindings::softrnic_dev_put(self.0 .0.as_ptr()) }
    }
}

/// A rate limit for log lines, one per place that logs (`refuse!`), as
/// the kernel's printk_ratelimited keeps one per call site: a caller that
/// loops on one refused verb must not flood the log, nor hide the reason
/// for another.  At most `BURST` lines in `WINDOW_MS`; lock-free (racing
/// callers may let a line or two more through).
pub(crate) struct RateLimit {
    start_ms: AtomicU64,
    count: AtomicU32,
}

impl RateLimit {
    const BURST: u32 = 10;
    const WINDOW_MS: u64 = 5000;

    pub(crate) const fn new() -> RateLimit {
        RateLimit {
            start_ms: AtomicU64::new(0),
            count: AtomicU32::new(0),
        }
    }

    /// Whether a line may be logged now.
    pub(crate) fn allow(&self) -> bool {
        // SAFETY: plain call.
        let now = unsafe { bindings::softrnic_now_ms() };
        let start = self.start_ms.load(Ordering::Relaxed);
        if now.wrapping_sub(start) >= Self::WINDOW_MS
            && self
                .start_ms
                .compare_exchange(start, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.count.store(0, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed) < Self::BURST
    }
}

/// The kernel's page size.
pub(crate) fn page_size() -> u64 {
    // SAFETY: returns a constant.
    unsafe { bindings::softrnic_page_size() as u64 }
}

/// Sleep for about `ms` milliseconds (process context).
pub(crate) fn sleep_ms(ms: u32) {
    // SAFETY: plain call; callers are in process context.
    unsafe { bindings::msleep(ms) }
}

/// A random byte (for the key byte of lkeys and rkeys).
pub(crate) fn random_key_byte() -> u8 {
    // SAFETY: plain call into the kernel's CSPRNG.
    unsafe { bindings::softrnic_random_key_byte() }
}

/// Netdev notifier events, as far as softrnic cares.
pub(crate) enum NetdevEvent {
    Unregister,
    StateChange,
    Other,
}

/// C entry: `rdma link add` for one of our link types.
#[no_mangle]
extern "C" fn softrnic_newlink(
    transport: bindings::softrnic_transport,
    ibdev_name: *const ffi::c_char,
    ndev: *mut bindings::net_device,
) -> ffi::c_int {
    let transport = if transport == bindings::softrnic_transport_SOFTRNIC_IWARP {
        Transport::Iwarp
    } else {
        Transport::Roce
    };
    // SAFETY: rdma netlink passes a held netdev, valid for this call.
    let Some(ndev) = (unsafe { NetDevice::from_raw(ndev) }) else {
        return EINVAL.to_errno();
    };
    if ibdev_name.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: rdma netlink passes a NUL-terminated name, valid for this call.
    let name = unsafe { CStr::from_ptr(ibdev_name.cast()) };
    match device::newlink(transport, name, &ndev) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// C entry: a netdev notifier event (RTNL held).
#[no_mangle]
extern "C" fn softrnic_netdev_event(event: ffi::c_ulong, ndev: *mut bindings::net_device) {
    let event = match event as u32 {
        bindings::netdev_cmd_NETDEV_UNREGISTER => NetdevEvent::Unregister,
        bindings::netdev_cmd_NETDEV_UP
        | bindings::netdev_cmd_NETDEV_DOWN
        | bindings::netdev_cmd_NETDEV_CHANGE => NetdevEvent::StateChange,
        _ => NetdevEvent::Other,
    };
    if let NetdevEvent::Other = event {
        return;
    }
    // SAFETY: the notifier passes a live netdev, valid for this call.
    if let Some(ndev) = unsafe { NetDevice::from_raw(ndev) } {
        device::netdev_event(event, &ndev);
    }
}

/// C entry: an IPv4 address of `ndev` came or went (RTNL held).
#[no_mangle]
extern "C" fn softrnic_netdev_addr_event(ndev: *mut bindings::net_device) {
    // SAFETY: the notifier passes a live netdev, valid for this call.
    if let Some(ndev) = unsafe { NetDevice::from_raw(ndev) } {
        device::netdev_addr_event(&ndev);
    }
}

/// C entry: the sysfs `softrnic_transport` attribute of our devices.
#[no_mangle]
extern "C" fn softrnic_transport_name(ib: *mut bindings::ib_device) -> *const ffi::c_char {
    // SAFETY: sysfs attributes exist only while the device is registered,
    // and only our devices carry this attribute group.
    let dev = unsafe { IbDevice::from_ib(ib) };
    match dev.driver().transport {
        Transport::Roce => c"roce".as_ptr().cast(),
        Transport::Iwarp => c"iwarp".as_ptr().cast(),
    }
}
