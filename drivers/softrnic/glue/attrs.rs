// SPDX-License-Identifier: GPL-2.0
//! Device, port and port-immutable attributes of a softrnic device, from the
//! limits in `core/limits.rs` and the live state of the netdev.

use crate::device::Transport;
use crate::glue::bindings as b;
use crate::glue::NetDevice;
use crate::limits;

pub(crate) fn fill_device_attr(t: Transport, node_guid: u64, a: &mut b::ib_device_attr) {
    let l = t.limits();
    *a = b::ib_device_attr::default();
    a.sys_image_guid = node_guid;
    a.max_mr_size = l.max_mr_size;
    a.page_size_cap = 0xffff_f000; // any power of two from 4 KiB up
    a.vendor_id = 0xffffff; // no IEEE OUI: a software device
    a.max_qp = l.max_qp;
    a.max_qp_wr = l.max_qp_wr;
    a.device_cap_flags = (b::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN
        | b::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE
        | b::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID
        | b::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS
        | b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW) as u64;
    a.kernel_cap_flags = u64::from(b::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
    a.max_send_sge = l.max_send_sge;
    a.max_recv_sge = l.max_recv_sge;
    a.max_sge_rd = l.max_sge_rd;
    a.max_cq = l.max_cq;
    a.max_cqe = l.max_cqe;
    a.max_mr = l.max_mr;
    a.max_pd = l.max_pd;
    a.max_qp_rd_atom = l.max_qp_rd_atom;
    a.max_qp_init_rd_atom = l.max_qp_init_rd_atom;
    a.max_res_rd_atom = l.max_res_rd_atom;
    // iWARP: RFC 7306's atomics, on a connection to a softrnic peer (one
    // to siw completes them in error, as it does WRITE with immediate).
    a.atomic_cap = b::ib_atomic_cap_IB_ATOMIC_HCA;
    a.masked_atomic_cap = b::ib_atomic_cap_IB_ATOMIC_NONE;
    a.max_mw = l.max_mw;
    a.max_mcast_grp = l.max_mcast_grp;
    a.max_mcast_qp_attach = l.max_mcast_qp_attach;
    a.max_total_mcast_qp_attach = l.max_total_mcast_qp_attach;
    a.max_ah = l.max_ah;
    a.max_srq = l.max_srq;
    a.max_srq_wr = l.max_srq_wr;
    a.max_srq_sge = l.max_srq_sge;
    a.max_fast_reg_page_list_len = l.max_fast_reg_page_list_len;
    a.max_pkeys = l.max_pkeys;
    a.local_ca_ack_delay = l.local_ca_ack_delay;
}

pub(crate) fn fill_port_attr(t: Transport, nd: Option<&NetDevice>, a: &mut b::ib_port_attr) {
    let up = nd.is_some_and(|n| n.link_up());
    let mtu = nd.map_or(0, |n| n.mtu());
    a.state = if up {
        b::ib_port_state_IB_PORT_ACTIVE
    } else {
        b::ib_port_state_IB_PORT_DOWN
    };
    a.phys_state = if up {
        b::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8
    } else {
        b::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8
    };
    a.max_mtu = limits::IB_MTU_4096;
    a.active_mtu = limits::ib_mtu_for(mtu, t.header_bytes()).unwrap_or(limits::IB_MTU_256);
    a.phys_mtu = mtu;
    a.gid_tbl_len = match t {
        Transport::Roce => limits::ROCE_GID_TABLE_LEN as i32,
        Transport::Iwarp => limits::IWARP_GID_TABLE_LEN as i32,
    };
    a.port_cap_flags = b::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
    a.max_msg_sz = limits::MAX_MSG_SIZE;
    a.pkey_tbl_len = 1;
    a.max_vl_num = 1;
    a.active_width = b::ib_port_width_IB_WIDTH_1X as u8;
    a.active_speed = b::ib_port_speed_IB_SPEED_SDR as u16;
}

pub(crate) fn fill_port_immutable(t: Transport, imm: &mut b::ib_port_immutable) {
    imm.pkey_tbl_len = 1;
    match t {
        Transport::Roce => {
            imm.gid_tbl_len = limits::ROCE_GID_TABLE_LEN as i32;
            imm.core_cap_flags = b::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
            imm.max_mad_size = b::IB_MGMT_MAD_SIZE;
        }
        Transport::Iwarp => {
            imm.gid_tbl_len = limits::IWARP_GID_TABLE_LEN as i32;
            imm.core_cap_flags = b::RDMA_CORE_PORT_IWARP;
            imm.max_mad_size = 0;
        }
    }
}
