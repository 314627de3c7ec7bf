//! The user ABI (`userspace/abi/src/abi.rs`): layouts the kernel and the
//! provider both rely on, and the ring arithmetic.

use core::mem::{offset_of, size_of};
use softrnic_abi as abi;

#[test]
fn ring_header_keeps_counters_on_their_own_cache_lines() {
    assert_eq!(size_of::<abi::QueueHeader>(), abi::QUEUE_HEADER_BYTES);
    assert_eq!(offset_of!(abi::QueueHeader, producer), 0);
    assert_eq!(offset_of!(abi::QueueHeader, consumer), 64);
    assert_eq!(offset_of!(abi::QueueHeader, arm_seq), 128);
    assert_eq!(offset_of!(abi::QueueHeader, arm_flags), 132);
    assert_eq!(offset_of!(abi::QueueHeader, kernel_flags), 136);
}

#[test]
fn wqe_and_cqe_layouts() {
    assert_eq!(size_of::<abi::Sge>(), 16);
    assert_eq!(offset_of!(abi::Sge, lkey), 12);
    assert_eq!(size_of::<abi::SendWqe>(), 104);
    assert_eq!(offset_of!(abi::SendWqe, opcode), 8);
    assert_eq!(offset_of!(abi::SendWqe, remote_addr), 32);
    assert_eq!(offset_of!(abi::SendWqe, compare_add), 56);
    assert_eq!(offset_of!(abi::SendWqe, bind_addr), 88);
    assert_eq!(size_of::<abi::RecvWqe>(), 16);
    assert_eq!(size_of::<abi::Cqe>(), abi::CQE_BYTES as usize);
    assert_eq!(offset_of!(abi::Cqe, status), 8);
    assert_eq!(offset_of!(abi::Cqe, byte_len), 20);
    assert_eq!(offset_of!(abi::Cqe, qp_num), 28);
    assert_eq!(offset_of!(abi::Cqe, smac), 42);
    assert_eq!(offset_of!(abi::Cqe, kernel_qp), 48);
}

#[test]
fn create_responses_layouts() {
    assert_eq!(size_of::<abi::QueueInfo>(), 24);
    assert_eq!(offset_of!(abi::QueueInfo, slots), 16);
    assert_eq!(offset_of!(abi::CreateQpResp, rq), 24);
    assert_eq!(offset_of!(abi::CreateQpResp, qpn), 48);
    assert_eq!(offset_of!(abi::CreateSrqResp, srqn), 24);
    assert_eq!(size_of::<abi::ModifySrqCmd>(), 8);
    assert_eq!(size_of::<abi::CreateAhResp>(), 8);
}

#[test]
fn opcodes_match_the_uverbs_numbering() {
    // enum ibv_wr_opcode / ib_uverbs_wr_opcode
    assert_eq!(abi::WR_RDMA_WRITE, 0);
    assert_eq!(abi::WR_SEND, 2);
    assert_eq!(abi::WR_RDMA_READ, 4);
    assert_eq!(abi::WR_BIND_MW, 8);
    assert_eq!(abi::WR_SEND_WITH_INV, 9);
    // enum ibv_wc_opcode / ibv_wc_status
    assert_eq!(abi::WC_RECV, 128);
    assert_eq!(abi::WC_RECV_RDMA_WITH_IMM, 129);
    assert_eq!(abi::WC_WR_FLUSH_ERR, 5);
    assert_eq!(abi::WC_MW_BIND_ERR, 6);
}

#[test]
fn slots_keep_one_spare_and_are_powers_of_two() {
    assert_eq!(abi::slots_for(0), Some(1));
    assert_eq!(abi::slots_for(1), Some(2));
    assert_eq!(abi::slots_for(3), Some(4));
    assert_eq!(abi::slots_for(4), Some(8));
    assert_eq!(abi::slots_for(16383), Some(16384));
    assert_eq!(abi::slots_for(u32::MAX), None);
    assert_eq!(abi::slots_for(1 << 31), None);
}

#[test]
fn slot_sizes() {
    assert_eq!(abi::slot_bytes_for(1), 64);
    assert_eq!(abi::slot_bytes_for(65), 128);
    // One Sge: 104 + 16 = 120 → 128.
    assert_eq!(abi::send_slot_bytes(1, 0), 128);
    // Inline data larger than the Sges decides.
    assert_eq!(abi::send_slot_bytes(1, 256), 512);
    assert_eq!(abi::recv_slot_bytes(1), 64);
    assert_eq!(abi::recv_slot_bytes(4), 128);
}

#[test]
fn free_running_indices_wrap_inside_the_ring() {
    let (slots, bytes) = (8u32, 64u32);
    assert_eq!(abi::slot_offset(0, slots, bytes), abi::QUEUE_HEADER_BYTES);
    assert_eq!(abi::slot_offset(8, slots, bytes), abi::QUEUE_HEADER_BYTES);
    assert_eq!(
        abi::slot_offset(u32::MAX, slots, bytes),
        abi::QUEUE_HEADER_BYTES + 7 * 64
    );
    // Any index stays inside the mapped length.
    let len = abi::ring_bytes(slots, bytes);
    assert_eq!(len % 4096, 0);
    for i in [0, 1, 7, 8, 1000, u32::MAX - 1, u32::MAX] {
        assert!(abi::slot_offset(i, slots, bytes) + bytes as usize <= len);
    }
    assert_eq!(abi::ring_bytes(1 << 14, 1024), 256 + (1 << 24) + 3840);
}
