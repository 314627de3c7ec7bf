// SPDX-License-Identifier: GPL-2.0
//! Device limits and attribute rules of softrnic: plain `core` Rust, shared by
//! the kernel module (`#[path]`) and the host test crate.  The verbs layer
//! enforces exactly the limits reported here.

/// Limits reported by query_device, per device.
pub(crate) struct DeviceLimits {
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_mr_size: u64,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_mw: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_ah: u32,
    pub max_fast_reg_page_list_len: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_pkeys: u16,
    /// log2(4.096 us units) of the CA's ACK delay.
    pub local_ca_ack_delay: u8,
    pub max_inline_data: u32,
}

/// Limits of a RoCEv2 device.
pub(crate) const ROCE_LIMITS: DeviceLimits = DeviceLimits {
    max_qp: 1 << 16,
    max_qp_wr: 1 << 14,
    max_send_sge: 32,
    max_recv_sge: 32,
    max_sge_rd: 32,
    max_cq: 1 << 16,
    max_cqe: (1 << 16) - 1,
    max_mr: 1 << 18,
    max_mr_size: 1 << 40,
    max_pd: 1 << 16,
    max_qp_rd_atom: 128,
    max_qp_init_rd_atom: 128,
    max_res_rd_atom: 128 << 16,
    max_mw: 1 << 16,
    max_srq: 1 << 14,
    max_srq_wr: 1 << 14,
    max_srq_sge: 32,
    max_ah: 1 << 16,
    max_fast_reg_page_list_len: 512,
    max_mcast_grp: 8192,
    max_mcast_qp_attach: 56,
    max_total_mcast_qp_attach: 8192 * 56,
    max_pkeys: 1,
    local_ca_ack_delay: 15,
    max_inline_data: 256,
};

/// Limits of an iWARP device: no address handles, multicast or atomics.
pub(crate) const IWARP_LIMITS: DeviceLimits = DeviceLimits {
    max_ah: 0,
    max_mcast_grp: 0,
    max_mcast_qp_attach: 0,
    max_total_mcast_qp_attach: 0,
    ..ROCE_LIMITS
};

/// Entries in a RoCE port's GID table (ib_core fills it from the netdev's
/// addresses: one RoCEv2 GID per IPv4/IPv6 address).
pub(crate) const ROCE_GID_TABLE_LEN: u32 = 128;
/// Entries in an iWARP port's GID table: the MAC's (index 0, as siw's),
/// then one IPv4-mapped GID per IPv4 address of the netdev.
pub(crate) const IWARP_GID_TABLE_LEN: u32 = 16;
/// Largest message a QP accepts, in bytes (2 GiB, the IBTA maximum).
pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;
/// Worst-case RoCEv2 header bytes on top of the payload in one frame:
/// IPv6 (40) + UDP (8) + BTH (12) + the largest extension set (16) + ICRC (4).
pub(crate) const ROCE_MAX_HEADER_BYTES: u32 = 80;
/// iWARP headers per segment: IPv6 (40) + TCP with options (32) + MPA (2 + 4
/// CRC + 2 pad) + DDP/RDMAP tagged header (14).
pub(crate) const IWARP_MAX_HEADER_BYTES: u32 = 96;

/// The IB path MTU enumeration (enum ib_mtu: 1 = 256 … 5 = 4096).
pub(crate) const IB_MTU_256: u32 = 1;
pub(crate) const IB_MTU_4096: u32 = 5;

/// The largest IB MTU whose frames fit a netdev MTU once `header` bytes of
/// headers are added; `None` when not even 256 bytes fit.
pub(crate) fn ib_mtu_for(netdev_mtu: u32, header: u32) -> Option<u32> {
    let payload = netdev_mtu.checked_sub(header)?;
    let mut ib_mtu = None;
    let mut size = 256u32;
    let mut code = IB_MTU_256;
    while code <= IB_MTU_4096 && size <= payload {
        ib_mtu = Some(code);
        size *= 2;
        code += 1;
    }
    ib_mtu
}

/// The modified EUI-64 node GUID derived from a MAC address, as a big-endian
/// byte array (what `__be64` holds in memory).
pub(crate) fn guid_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// P_Key table: one entry, the default full-membership key.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;

/// The P_Key at `index`, or `None` when out of range.
pub(crate) fn pkey_at(index: u16) -> Option<u16> {
    (index == 0).then_some(DEFAULT_PKEY)
}
