use crate::limits::*;
use softrnic_abi as abi;

#[test]
fn ib_mtu_fits_the_netdev_mtu() {
    // 1500-byte Ethernet: 1024 fits once 80 bytes of RoCEv2 headers are added, 2048 does not.
    assert_eq!(ib_mtu_for(1500, ROCE_MAX_HEADER_BYTES), Some(3));
    // Jumbo frames reach the IB maximum, 4096, and stop there.
    assert_eq!(ib_mtu_for(9000, ROCE_MAX_HEADER_BYTES), Some(IB_MTU_4096));
    assert_eq!(
        ib_mtu_for(4096 + ROCE_MAX_HEADER_BYTES, ROCE_MAX_HEADER_BYTES),
        Some(5)
    );
    assert_eq!(
        ib_mtu_for(4095 + ROCE_MAX_HEADER_BYTES, ROCE_MAX_HEADER_BYTES),
        Some(4)
    );
    // Too small for 256 bytes of payload, or smaller than the headers.
    assert_eq!(
        ib_mtu_for(255 + ROCE_MAX_HEADER_BYTES, ROCE_MAX_HEADER_BYTES),
        None
    );
    assert_eq!(ib_mtu_for(40, ROCE_MAX_HEADER_BYTES), None);
    assert_eq!(
        ib_mtu_for(256 + ROCE_MAX_HEADER_BYTES, ROCE_MAX_HEADER_BYTES),
        Some(IB_MTU_256)
    );
}

#[test]
fn node_guid_is_modified_eui64() {
    let g = guid_from_mac([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
    assert_eq!(g, [0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55]);
    // The universal/local bit is inverted, not cleared.
    assert_eq!(guid_from_mac([0x00, 0, 0, 0, 0, 1])[0], 0x02);
}

#[test]
fn pkey_table_has_one_default_entry() {
    assert_eq!(pkey_at(0), Some(0xffff));
    assert_eq!(pkey_at(1), None);
    assert_eq!(pkey_at(u16::MAX), None);
}

#[test]
fn iwarp_limits_drop_what_iwarp_lacks() {
    assert_eq!(IWARP_LIMITS.max_ah, 0);
    assert_eq!(IWARP_LIMITS.max_mcast_grp, 0);
    assert_eq!(IWARP_LIMITS.max_qp, ROCE_LIMITS.max_qp);
    // Limits must be internally consistent.
    for l in [&ROCE_LIMITS, &IWARP_LIMITS] {
        assert!(l.max_qp_init_rd_atom <= l.max_qp_rd_atom);
        assert!(l.max_srq_wr <= l.max_qp_wr);
        assert!(l.max_cqe >= l.max_qp_wr);
        assert!(u64::from(MAX_MSG_SIZE) <= l.max_mr_size);
    }
}

#[test]
fn abi_layout_is_stable() {
    assert_eq!(core::mem::size_of::<abi::AllocUcontextResp>(), 16);
    assert_eq!(core::mem::offset_of!(abi::AllocUcontextResp, transport), 4);
    assert_eq!(
        core::mem::offset_of!(abi::AllocUcontextResp, max_inline_data),
        8
    );
    assert_ne!(abi::TRANSPORT_ROCE, abi::TRANSPORT_IWARP);
}
