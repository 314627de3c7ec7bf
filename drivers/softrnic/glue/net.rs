// SPDX-License-Identifier: GPL-2.0
//! Safe wrappers over the network side of the C shim (`net_shim.c`): the
//! per-namespace RoCEv2 sockets, sk_buffs being built for transmission or
//! handed to us on receive, page mappings for copies into pinned memory, and
//! the engine's work items and timers.

use core::ptr::NonNull;

use kernel::alloc::KVVec;
use kernel::prelude::*;

use super::bindings as b;
use super::{check, IbDevice, NetDevice};

/// The module-wide part: the engine's workqueue and the namespace hook.
pub(crate) fn register() -> Result {
    // SAFETY: plain registration, once, from module init.
    check(unsafe { b::softrnic_net_register() })
}

/// Undo `register`, after every device (and so every QP) is gone.
pub(crate) fn unregister() {
    // SAFETY: `register` succeeded (module exit runs only after init did).
    unsafe { b::softrnic_net_unregister() }
}

/// A RoCE device's hold on the UDP sockets of its netdev's namespace.
pub(crate) struct NetNsSockets {
    net: usize,
    cookie: u64,
}

impl NetNsSockets {
    /// Open (or share) port 4791 in `ndev`'s namespace.
    pub(crate) fn attach(ndev: &NetDevice) -> Result<NetNsSockets> {
        let mut net = core::ptr::null_mut();
        let mut cookie = 0u64;
        // SAFETY: a live netdev (the caller's); the out-pointers are valid.
        check(unsafe { b::softrnic_net_attach(ndev.0.as_ptr(), &mut net, &mut cookie) })?;
        Ok(NetNsSockets {
            net: net as usize,
            cookie,
        })
    }
}

impl Drop for NetNsSockets {
    fn drop(&mut self) {
        // SAFETY: the shim only compares the pointer against live entries.
        unsafe { b::softrnic_net_detach(self.net as *mut b::net, self.cookie) }
    }
}

/// Join or leave the IP multicast group of `gid` on `ndev` (process
/// context: takes RTNL).
pub(crate) fn mcast_join(ndev: &NetDevice, gid: &[u8; 16], join: bool) -> Result {
    // SAFETY: a live netdev; a 16-byte GID.
    check(unsafe { b::softrnic_mcast_join(ndev.0.as_ptr(), gid.as_ptr(), join) })
}

/// Where a packet goes at the IP level.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct IpRoute {
    pub(crate) saddr: [u8; 16],
    pub(crate) daddr: [u8; 16],
    pub(crate) ipv4: bool,
    pub(crate) sport: u16,
    pub(crate) tclass: u8,
    pub(crate) ttl: u8,
    pub(crate) flow_label: u32,
}

/// The most pieces a received packet is read in (`Skb::pieces`).
pub(crate) const RX_PIECES: usize = b::SOFTRNIC_RX_PIECES as usize;
/// The transport header bytes the shim pulls into a received packet's
/// linear area: the longest headers any opcode has.
const _: () = assert!(b::SOFTRNIC_ROCE_HEADERS_MAX as usize == crate::roce_wire::MAX_HEADER_LEN);

/// An sk_buff we own; one we build has a body (the transport packet) to
/// fill, borrowed from the skb.
pub(crate) struct Skb(NonNull<b::sk_buff>, Option<(NonNull<u8>, usize)>);

// SAFETY: an sk_buff we own can be freed or sent from any context.
unsafe impl Send for Skb {}

impl Skb {
    /// A packet with `len` bytes of RoCE transport packet (BTH to ICRC)
    /// to fill, and room for the headers in front.
    pub(crate) fn alloc(ndev: &NetDevice, len: usize, ipv4: bool) -> Option<Skb> {
        let len32 = u32::try_from(len).ok()?;
        let mut data = core::ptr::null_mut();
        // SAFETY: a live netdev; on success `data` points at `len` bytes of
        // the new skb's linear area, which lives as long as the skb (headers
        // are later pushed in front of it, never over it).
        let skb = unsafe { b::softrnic_skb_alloc(ndev.0.as_ptr(), len32, !ipv4, &mut data) };
        let skb = NonNull::new(skb)?;
        match NonNull::new(data) {
            Some(d) => Some(Skb(skb, Some((d, len)))),
            None => {
                drop(Skb(skb, None));
                None
            }
        }
    }

    /// The body of a packet from `alloc`: the transport packet to fill
    /// (empty for a received packet).
    pub(crate) fn body_mut(&mut self) -> &mut [u8] {
        match self.1 {
            // SAFETY: `len` bytes of our skb's linear area (`alloc`),
            // borrowed through `&mut self`.
            Some((d, len)) => unsafe { core::slice::from_raw_parts_mut(d.as_ptr(), len) },
            None => &mut [],
        }
    }

    /// The length of the body of a packet from `alloc` (0 for a received
    /// packet).
    pub(crate) fn body_len(&self) -> usize {
        self.1.map_or(0, |(_, len)| len)
    }

    /// Route it (through `cache`: the route of the previous packet to the
    /// same place, or a lookup kept there for the next) and put the UDP and
    /// IP headers in front; then write the ICRC with `icrc` over the packet
    /// from the IP header on.
    pub(crate) fn finish(
        &mut self,
        ndev: &NetDevice,
        r: &IpRoute,
        cache: &mut RouteCache,
        icrc: impl FnOnce(&mut [u8]),
    ) -> Result {
        icrc(self.push_headers(ndev, r, 1, cache.slot(r))?);
        Ok(())
    }

    /// Put the UDP and IP headers for `r` in front of a packet that stays
    /// in this host (`rx::loop_back`): no route, so none is looked up or
    /// held, and no ICRC.  Returns its length from the IP header.
    pub(crate) fn finish_local(&mut self, ndev: &NetDevice, r: &IpRoute) -> Result<usize> {
        self.push_headers(ndev, r, 1, core::ptr::null_mut())?;
        Ok(self.network().1)
    }

    /// The shim's header push for `finish` (`route`: its route cache's
    /// slot) and `finish_local` (null: no route), for a packet to be cut
    /// into `segs` datagrams; the packet's linear part from its IP header
    /// on.
    fn push_headers(
        &mut self,
        ndev: &NetDevice,
        r: &IpRoute,
        segs: u32,
        route: *mut *mut b::dst_entry,
    ) -> Result<&mut [u8]> {
        let mut len = 0u32;
        let mut err = 0;
        // SAFETY: an skb from `alloc` for this netdev, headers not yet pushed;
        // the addresses are 16-byte arrays; `route` is a route cache's slot
        // (`finish`) or null, which asks for no route (`finish_local`).
        let p = unsafe {
            b::softrnic_skb_push_headers(
                self.0.as_ptr(),
                ndev.0.as_ptr(),
                r.saddr.as_ptr(),
                r.daddr.as_ptr(),
                r.sport,
                r.tclass,
                r.ttl,
                r.flow_label,
                segs,
                route,
                &mut len,
                &mut err,
            )
        };
        if p.is_null() {
            return Err(Error::from_errno(if err < 0 { err } else { -22 }));
        }
        // The bytes from the network header to the end of the linear area
        // (all of them, for a packet from `alloc`).
        let linear = {
            let (mut lin, mut total) = (0u32, 0u32);
            // SAFETY: headers pushed: the network header is set.
            unsafe { b::softrnic_skb_network(self.0.as_ptr(), &mut lin, &mut total) };
            core::cmp::min(lin, len)
        };
        // SAFETY: the shim returns the network header; `linear` bytes from
        // there lie in the skb's linear area, borrowed through `&mut self`.
        Ok(unsafe { core::slice::from_raw_parts_mut(p, linear as usize) })
    }

    /// A received GSO packet's segment size: the length of each RoCE
    /// packet it carries (the last may be shorter); 0 for one packet.
    pub(crate) fn gso_size(&self) -> usize {
        // SAFETY: a live skb.
        unsafe { b::softrnic_skb_gso_size(self.0.as_ptr()) as usize }
    }

    /// Hand it to the IP layer (consumed whatever happens; dropped here if
    /// `finish` failed).
    pub(crate) fn xmit(self) -> Result {
        let p = self.0.as_ptr();
        core::mem::forget(self);
        // SAFETY: a finished skb we own; the IP layer takes it.
        check(unsafe { b::softrnic_skb_xmit(p) })
    }

    /// A received packet: the bytes from its IP header that lie in its
    /// linear area (at least the IP, UDP and transport headers, which the
    /// shim pulled there), and the packet's whole length from the IP header.
    pub(crate) fn network(&self) -> (&[u8], usize) {
        let (mut linear, mut len) = (0u32, 0u32);
        // SAFETY: a received skb with its network header set.
        let p = unsafe { b::softrnic_skb_network(self.0.as_ptr(), &mut linear, &mut len) };
        // SAFETY: the shim returns `linear` readable bytes inside the skb,
        // borrowed through `&self`.
        let head = unsafe { core::slice::from_raw_parts(p, linear as usize) };
        (head, len as usize)
    }

    /// Bytes `off..off + len` of a received packet, counted from its IP
    /// header, as the pieces of memory that hold them (read in place, not
    /// copied), in order, written to `out`; how many, or `None` when they
    /// are not all in the packet or need more pieces than `out` has.
    pub(crate) fn pieces<'s>(
        &'s self,
        off: usize,
        len: usize,
        out: &mut [&'s [u8]; RX_PIECES],
    ) -> Option<usize> {
        let (off, len) = (u32::try_from(off).ok()?, u32::try_from(len).ok()?);
        let mut raw = [const {
            b::softrnic_piece {
                data: core::ptr::null(),
                len: 0,
            }
        }; RX_PIECES];
        // SAFETY: a received skb; `raw` has room for `RX_PIECES` pieces.
        let n = unsafe {
            b::softrnic_skb_pieces(
                self.0.as_ptr(),
                off,
                len,
                raw.as_mut_ptr(),
                RX_PIECES as i32,
            )
        };
        let n = usize::try_from(n).ok()?.min(RX_PIECES);
        for (o, r) in out.iter_mut().zip(&raw[..n]) {
            // SAFETY: the shim returns non-empty pieces of the skb's memory,
            // readable for `len` bytes while the skb lives; borrowed through
            // `&self`.
            *o = unsafe { core::slice::from_raw_parts(r.data, r.len as usize) };
        }
        Some(n)
    }

    /// The Ethernet source address of a received packet.
    pub(crate) fn smac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: a received skb; `mac` has room for 6 bytes.
        unsafe { b::softrnic_skb_smac(self.0.as_ptr(), mac.as_mut_ptr()) };
        mac
    }
}

/// A packet being built from page fragments (`Frag`): an skb with room
/// for its headers only, whose transport packets are its fragments,
/// several of which may go out as one GSO packet.  Its fragments are its
/// own until it is sent, so it may write into them (`frag_mut`).
pub(crate) struct FragSkb(Skb);

impl FragSkb {
    /// An empty one, for packets to `ndev` (`ipv4`: over IPv4).
    pub(crate) fn alloc(ndev: &NetDevice, ipv4: bool) -> Option<FragSkb> {
        // SAFETY: a live netdev.
        let skb = unsafe { b::softrnic_skb_alloc_head(ndev.0.as_ptr(), !ipv4) };
        NonNull::new(skb).map(|p| FragSkb(Skb(p, None)))
    }

    /// Append `f` as the packet's next fragment (before `finish`); gives
    /// it back when the packet has no room for another.
    pub(crate) fn add_frag(&mut self, f: Frag) -> core::result::Result<(), Frag> {
        let Ok(len) = u32::try_from(f.1) else {
            return Err(f);
        };
        // SAFETY: our skb, being built; `f` is a buffer from
        // `softrnic_frag_alloc` of `len` bytes, whose reference the skb
        // takes on success.
        if unsafe { b::softrnic_skb_add_frag(self.0 .0.as_ptr(), f.0.as_ptr(), len) } {
            core::mem::forget(f);
            Ok(())
        } else {
            Err(f)
        }
    }

    /// Route it (as `Skb::finish`) and put the UDP and IP headers in
    /// front, for a packet to be cut into `segs` datagrams.  Returns a copy
    /// of those headers (IP, then UDP) and their length, from which each
    /// datagram's own are made (`roce_gso::segment_header`).
    pub(crate) fn finish(
        &mut self,
        ndev: &NetDevice,
        r: &IpRoute,
        cache: &mut RouteCache,
        segs: u32,
    ) -> Result<([u8; crate::roce_gso::IP_UDP_MAX], usize)> {
        let pkt = self.0.push_headers(ndev, r, segs, cache.slot(r))?;
        let hl = if r.ipv4 { 20 + 8 } else { 40 + 8 };
        let mut h = [0u8; crate::roce_gso::IP_UDP_MAX];
        h[..hl].copy_from_slice(pkt.get(..hl).ok_or(EINVAL)?);
        Ok((h, hl))
    }

    /// Put the headers for `r` in front of a packet that stays in this host
    /// (`Skb::finish_local`), and hand it over as a plain packet.
    pub(crate) fn finish_local(self, ndev: &NetDevice, r: &IpRoute) -> (Skb, Result<usize>) {
        let mut skb = self.0;
        let sent = skb.finish_local(ndev, r);
        (skb, sent)
    }

    /// Fragment `i` (from `add_frag`), to write its ICRC into.
    pub(crate) fn frag_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let mut len = 0u32;
        // SAFETY: our skb, not yet sent; the shim checks `i`.
        let p =
            unsafe { b::softrnic_skb_frag(self.0 .0.as_ptr(), u32::try_from(i).ok()?, &mut len) };
        let p = NonNull::new(p)?;
        // SAFETY: fragment `i`, `len` bytes of a buffer only this skb holds
        // (`add_frag` took it, and the skb has not been sent or cloned),
        // borrowed through `&mut self`.
        Some(unsafe { core::slice::from_raw_parts_mut(p.as_ptr(), len as usize) })
    }

    /// Make it, finished, a GSO packet of `segs` transport packets of
    /// `size` bytes (the last possibly shorter; see the shim's
    /// `softrnic_skb_set_gso`); `whole`: one a softrnic receiver over a
    /// veth may take whole (`GsoMode::Whole`).
    pub(crate) fn set_gso(&mut self, size: usize, segs: u32, whole: bool) {
        let size = u32::try_from(size).unwrap_or(u32::MAX);
        // SAFETY: our skb, headers pushed, not yet sent.
        unsafe { b::softrnic_skb_set_gso(self.0 .0.as_ptr(), size, segs, whole) }
    }

    /// Hand it to the IP layer (as `Skb::xmit`).
    pub(crate) fn xmit(self) -> Result {
        self.0.xmit()
    }
}

/// One RoCE packet's transport bytes (BTH to ICRC) in a buffer of the
/// per-CPU page-fragment cache, to be sent as a fragment of a `FragSkb`:
/// several such packets to one place go out as one GSO packet.
pub(crate) struct Frag(NonNull<u8>, usize);

// SAFETY: a page-fragment buffer we own can be freed from any context.
unsafe impl Send for Frag {}

impl Frag {
    /// The longest buffer there is: an IB MTU 4096 packet's (the shim
    /// gives one longer than a page a compound page of its own).
    pub(crate) const MAX: usize = 8192;

    /// A buffer of `len` bytes, at most `MAX` (any context); `None` when
    /// memory is short.
    pub(crate) fn alloc(len: usize) -> Option<Frag> {
        if len > Self::MAX {
            return None;
        }
        // SAFETY: plain allocation.
        let p = unsafe { b::softrnic_frag_alloc(u32::try_from(len).ok()?) };
        NonNull::new(p).map(|p| Frag(p, len))
    }

    pub(crate) fn len(&self) -> usize {
        self.1
    }

    pub(crate) fn body_mut(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes of a buffer we own, borrowed through `&mut
        // self`.
        unsafe { core::slice::from_raw_parts_mut(self.0.as_ptr(), self.1) }
    }
}

impl Drop for Frag {
    fn drop(&mut self) {
        // SAFETY: a buffer from `softrnic_frag_alloc` no skb took.
        unsafe { b::softrnic_frag_free(self.0.as_ptr()) }
    }
}

/// How a netdev takes GSO packets of RoCE packets (the shim's
/// `softrnic_netdev_gso_mode`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum GsoMode {
    /// One skb per packet (the netdev's UDP segmentation is off).
    Off,
    /// Cut into datagrams by the stack or the device.
    Cut,
    /// Also marked for a softrnic receiver to take whole (a veth).
    Whole,
}

impl NetDevice {
    pub(crate) fn gso_mode(&self) -> GsoMode {
        // SAFETY: a live netdev.
        match unsafe { b::softrnic_netdev_gso_mode(self.0.as_ptr()) } {
            0 => GsoMode::Off,
            1 => GsoMode::Cut,
            _ => GsoMode::Whole,
        }
    }
}

/// The route the last packets went by, kept while packets to the same
/// place follow (an outbox's batch looks its route up once).
pub(crate) struct RouteCache {
    dst: *mut b::dst_entry,
    route: IpRoute,
}

impl RouteCache {
    pub(crate) fn new() -> RouteCache {
        RouteCache {
            dst: core::ptr::null_mut(),
            route: IpRoute::default(),
        }
    }

    /// The slot for the route to `r`: the route kept, if it is `r`'s; else
    /// empty, for the lookup to fill.
    fn slot(&mut self, r: &IpRoute) -> *mut *mut b::dst_entry {
        if self.route != *r {
            self.release();
            self.route = *r;
        }
        &mut self.dst
    }

    fn release(&mut self) {
        if !self.dst.is_null() {
            // SAFETY: a route push_headers left here with a reference of
            // its own, released once.
            unsafe { b::softrnic_dst_release(self.dst) };
            self.dst = core::ptr::null_mut();
        }
    }
}

impl Drop for RouteCache {
    fn drop(&mut self) {
        self.release();
    }
}

impl Skb {
    /// Give up ownership (a queue took the skb).
    pub(super) fn into_raw(self) -> NonNull<b::sk_buff> {
        let p = self.0;
        core::mem::forget(self);
        p
    }

    /// # Safety
    /// `p` is a received sk_buff the caller owns (from `into_raw`).
    pub(super) unsafe fn from_raw(p: NonNull<b::sk_buff>) -> Skb {
        Skb(p, None)
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: we own the skb.
        unsafe { b::softrnic_skb_free(self.0.as_ptr()) }
    }
}

/// C entry: a RoCEv2 packet arrived for one of our devices.
#[no_mangle]
extern "C" fn softrnic_roce_recv(ib: *mut b::ib_device, skb: *mut b::sk_buff) {
    let Some(skb) = NonNull::new(skb).map(|p| Skb(p, None)) else {
        return;
    };
    // SAFETY: the shim found `ib` as a softrnic device and holds a
    // registration reference across this call.
    let dev = unsafe { IbDevice::from_ib(ib) };
    crate::transport::roce::rx::receive(&dev, skb);
}

/// C entry: a packet for one of our devices was dropped before parsing.
#[no_mangle]
extern "C" fn softrnic_roce_drop(ib: *mut b::ib_device) {
    // SAFETY: as in `softrnic_roce_recv`.
    let dev = unsafe { IbDevice::from_ib(ib) };
    dev.counters().bump(crate::engine::Counter::RxDropped);
}

/// One step of the ICRC's CRC-32 by the kernel's optimised `crc32_le`
/// (the same recurrence as `crc::crc32_update`).
pub(crate) fn crc32_le(crc: u32, bytes: &[u8]) -> u32 {
    // SAFETY: reads `bytes.len()` bytes of a live slice.
    unsafe { b::softrnic_crc32_le(crc, bytes.as_ptr(), bytes.len()) }
}

/// One step of an FPDU's CRC-32C by the kernel's optimised `crc32c` (the
/// same recurrence as `crc::crc32c_update`).
pub(crate) fn crc32c(crc: u32, bytes: &[u8]) -> u32 {
    // SAFETY: reads `bytes.len()` bytes of a live slice.
    unsafe { b::softrnic_crc32c(crc, bytes.as_ptr(), bytes.len()) }
}

/// A page mapped for a short copy; unmapped when dropped (mappings nest
/// LIFO, so keep these in local scopes).
pub(crate) struct PageMap(NonNull<u8>);

impl PageMap {
    /// # Safety
    /// `page` is a `struct page *` that stays pinned while mapped.
    pub(crate) unsafe fn new(page: usize) -> Option<PageMap> {
        // SAFETY: per the contract.
        NonNull::new(unsafe { b::softrnic_kmap(page as *mut b::page) }.cast()).map(PageMap)
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.0.as_ptr()
    }
}

impl Drop for PageMap {
    fn drop(&mut self) {
        // SAFETY: mapped by `new`, unmapped once.
        unsafe { b::softrnic_kunmap(self.0.as_ptr().cast()) }
    }
}

/// The pinned pages of a user MR, as `struct page *` values, and the
/// offset of the region's start in the first page.
pub(crate) fn umem_pages(umem: &super::umem::Umem) -> Result<(KVVec<usize>, u32)> {
    // SAFETY: a live umem.
    let n = unsafe { b::softrnic_umem_page_count(umem.as_ptr()) };
    // kvmalloc: a large region has megabytes of page pointers.
    let mut pages = KVVec::<usize>::with_capacity(n, GFP_KERNEL)?;
    let mut offset = 0u32;
    // SAFETY: the vector has room for `n` pointers; the shim writes at most
    // `n` and returns how many.
    let got =
        unsafe { b::softrnic_umem_pages(umem.as_ptr(), pages.as_mut_ptr().cast(), n, &mut offset) };
    // SAFETY: the first `got` (≤ capacity) entries were written.
    unsafe { pages.inc_len(core::cmp::min(got, n)) };
    Ok((pages, offset))
}
