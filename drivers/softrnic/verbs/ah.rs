// SPDX-License-Identifier: GPL-2.0
//! Address handles: a RoCEv2 address vector (GRH fields, destination MAC,
//! IPv4 or IPv6 encapsulation), numbered so UD work requests can name them.

/// A resolved RoCEv2 address vector.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Av {
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid: [u8; 16],
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
    pub(crate) flow_label: u32,
    pub(crate) dmac: [u8; 6],
    /// RoCEv2 over IPv4 (the GIDs are IPv4-mapped) rather than IPv6.
    pub(crate) ipv4: bool,
}

/// An IPv4-mapped IPv6 address (::ffff:a.b.c.d).
pub(crate) fn is_v4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&x| x == 0) && gid[10] == 0xff && gid[11] == 0xff
}

#[repr(C)]
pub(crate) struct Ah {
    pub(crate) ib: crate::glue::objects::IbAh,
    /// The number UD WQEs name (0 for kernel-only AHs… all AHs get one).
    pub(crate) num: u32,
    pub(crate) av: Av,
}

/// Offset of `Ah::av`, for copying it out of the AH table under its lock.
pub(crate) const AV_OFFSET: usize = core::mem::offset_of!(Ah, av);
