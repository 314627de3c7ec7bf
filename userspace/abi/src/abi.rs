// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//! The user ABI of softrnic: every structure and constant shared by the kernel
//! module (`drivers/softrnic`, through `#[path]`) and the userspace provider.
//! Defined once, `#[repr(C)]`, with compile-time size checks.  Only `core`.
//!
//! # Queues
//! Every work queue (send queue, receive queue, shared receive queue) and
//! every completion queue is one ring in memory the kernel allocates and the
//! provider maps with `mmap(offset = QueueInfo::mmap_key)`:
//!
//! ```text
//! [ QueueHeader (QUEUE_HEADER_BYTES) ][ slot 0 ][ slot 1 ] ... [ slot n-1 ]
//! ```
//! `slots` is a power of two and `slot_bytes` a power of two of at least 64.
//! `producer` and `consumer` are free-running u32 counters; slot `i` lives at
//! `i & (slots - 1)`; the ring is empty when they are equal and full when they
//! differ by `slots`.  Each counter has exactly one writer:
//! - work queues: the provider produces WQEs (writes the slot, then stores
//!   `producer` with release); the kernel consumes (loads `producer` with
//!   acquire, copies the slot out before using it, then stores `consumer` with
//!   release).
//! - completion queues: the kernel produces CQEs the same way; the provider
//!   consumes.
//!
//! The kernel never trusts a value it reads from a ring: indices are masked,
//! counts are clamped, and a WQE is copied out and validated before use.

/// `ib_device_ops.uverbs_abi_ver`; the provider accepts exactly this range.
pub const UVERBS_ABI_VERSION: u32 = 1;

/// Value of `AllocUcontextResp::transport` and of the sysfs attribute
/// `softrnic_transport` ("roce" / "iwarp").
pub const TRANSPORT_ROCE: u32 = 0;
pub const TRANSPORT_IWARP: u32 = 1;

/// Response to ALLOC_UCONTEXT (ibv_open_device).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocUcontextResp {
    pub abi_version: u32,
    pub transport: u32,
    pub max_inline_data: u32,
    pub reserved: u32,
}

// ---------------------------------------------------------------------------
// Rings

/// Bytes before slot 0 of every ring.
pub const QUEUE_HEADER_BYTES: usize = 256;
/// Smallest slot; every slot size is a power of two.
pub const MIN_SLOT_BYTES: usize = 64;

/// The header of a mapped ring.  The two counters sit on their own cache
/// lines so producer and consumer do not share one.
#[repr(C)]
#[derive(Debug, Default)]
pub struct QueueHeader {
    /// Written by the producer only.
    pub producer: u32,
    pub _pad0: [u32; 15],
    /// Written by the consumer only.
    pub consumer: u32,
    pub _pad1: [u32; 15],
    /// Completion queues: incremented by the provider for every arm request
    /// (ibv_req_notify_cq); the kernel raises one completion event per new
    /// value once a matching CQE is written.
    pub arm_seq: u32,
    /// Completion queues: `ARM_SOLICITED` when the latest arm asks only for
    /// solicited completions; written by the provider before `arm_seq`.
    pub arm_flags: u32,
    /// Work queues: `QUEUE_ENGINE_IDLE` while the kernel engine is not polling
    /// this queue (the provider then rings the doorbell); `QUEUE_QP_ERROR`
    /// while the QP is in ERR (the provider rings the doorbell after posting
    /// a receive too, so the kernel flushes it).  Completion queues:
    /// `QUEUE_OVERFLOWED` once a CQE was lost (the CQ is then in error).
    /// Written by the kernel only; the provider reads it after a full fence
    /// that follows its producer store (the kernel sets it, fences, then
    /// reads the producer), so one of the two always sees the other.
    pub kernel_flags: u32,
    pub _pad2: [u32; 13],
    pub _reserved: [u32; 16],
}

pub const ARM_SOLICITED: u32 = 1;
pub const QUEUE_ENGINE_IDLE: u32 = 1;
pub const QUEUE_OVERFLOWED: u32 = 2;
pub const QUEUE_QP_ERROR: u32 = 4;

/// Where a ring lives and how it is laid out (part of create responses).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueInfo {
    /// The `offset` argument of mmap on the uverbs file.
    pub mmap_key: u64,
    /// Bytes to map (header plus slots, a multiple of the page size).
    pub mmap_len: u64,
    /// Number of slots (a power of two; 0: no ring).
    pub slots: u32,
    /// Bytes per slot (a power of two, at least MIN_SLOT_BYTES).
    pub slot_bytes: u32,
}

/// Slot `index` (a free-running counter) starts this many bytes into the ring.
pub const fn slot_offset(index: u32, slots: u32, slot_bytes: u32) -> usize {
    QUEUE_HEADER_BYTES + (index & (slots.wrapping_sub(1))) as usize * slot_bytes as usize
}

/// Bytes of a ring with `slots` slots of `slot_bytes`, rounded up to pages.
pub const fn ring_bytes(slots: u32, slot_bytes: u32) -> usize {
    let raw = QUEUE_HEADER_BYTES + slots as usize * slot_bytes as usize;
    (raw + 4095) & !4095
}

/// Slots for a queue asked to hold `depth` entries: a power of two that keeps
/// one slot spare so `depth` outstanding entries always fit.
pub const fn slots_for(depth: u32) -> Option<u32> {
    match depth.checked_add(1) {
        Some(n) => n.checked_next_power_of_two(),
        None => None,
    }
}

/// The smallest power-of-two slot of at least MIN_SLOT_BYTES holding `bytes`.
pub const fn slot_bytes_for(bytes: usize) -> u32 {
    let b = if bytes < MIN_SLOT_BYTES {
        MIN_SLOT_BYTES
    } else {
        bytes
    };
    b.next_power_of_two() as u32
}

// ---------------------------------------------------------------------------
// Work requests

/// A scatter/gather element (ibv_sge).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// Send WQE opcodes: the uverbs ABI numbering (enum ib_uverbs_wr_opcode,
/// equal to enum ibv_wr_opcode).
pub const WR_RDMA_WRITE: u32 = 0;
pub const WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const WR_SEND: u32 = 2;
pub const WR_SEND_WITH_IMM: u32 = 3;
pub const WR_RDMA_READ: u32 = 4;
pub const WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
pub const WR_LOCAL_INV: u32 = 7;
pub const WR_BIND_MW: u32 = 8;
pub const WR_SEND_WITH_INV: u32 = 9;
/// Kernel only (ib_wr_opcode IB_WR_RDMA_READ_WITH_INV): an RDMA READ that
/// invalidates its sink's key, which post_send puts in `ex`, once its data
/// has landed (RNICPI's RDMA Read with local invalidate; rdma_rw uses it
/// on iWARP devices).
pub const WR_RDMA_READ_WITH_INV: u32 = 11;
/// Kernel only (ib_wr_opcode IB_WR_REG_MR): fast-register an MR.
pub const WR_REG_MR: u32 = 0x20;

/// Send flags (enum ibv_send_flags).
pub const SEND_FENCE: u32 = 1;
pub const SEND_SIGNALED: u32 = 2;
pub const SEND_SOLICITED: u32 = 4;
pub const SEND_INLINE: u32 = 8;

/// Header of a send-queue slot; `num_sge` Sges (or, with SEND_INLINE,
/// `inline_len` bytes of data) follow it in the slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWqe {
    pub wr_id: u64,
    pub opcode: u32,
    pub send_flags: u32,
    /// Sges that follow (0 with SEND_INLINE).
    pub num_sge: u32,
    /// Inline bytes that follow (only with SEND_INLINE).
    pub inline_len: u32,
    /// Immediate data (network byte order, as the user gave it) or the rkey
    /// to invalidate (SEND_WITH_INV, LOCAL_INV).
    pub ex: u32,
    /// UD: the address handle number (CreateAhResp::ah_num).
    pub ah_num: u32,
    /// RDMA and atomics: remote address and rkey.
    pub remote_addr: u64,
    pub rkey: u32,
    /// UD: destination QP number and Q_Key.
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub _reserved0: u32,
    /// Atomics: compare (CMP_AND_SWP) or add (FETCH_AND_ADD) operand, and swap.
    pub compare_add: u64,
    pub swap: u64,
    /// BIND_MW: the window (its current rkey), its new rkey, the MR (lkey)
    /// and the range and access flags to bind.
    pub bind_mw_rkey: u32,
    pub bind_new_rkey: u32,
    pub bind_mr_lkey: u32,
    pub bind_access: u32,
    pub bind_addr: u64,
    pub bind_length: u64,
}

/// Header of a receive-queue (or SRQ) slot; `num_sge` Sges follow it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    pub wr_id: u64,
    pub num_sge: u32,
    pub _reserved: u32,
}

/// Bytes of a send slot for `max_sge` Sges or `max_inline` inline bytes.
pub const fn send_slot_bytes(max_sge: u32, max_inline: u32) -> u32 {
    let sges = max_sge as usize * core::mem::size_of::<Sge>();
    let payload = if sges > max_inline as usize {
        sges
    } else {
        max_inline as usize
    };
    slot_bytes_for(core::mem::size_of::<SendWqe>() + payload)
}

/// Bytes of a receive slot for `max_sge` Sges.
pub const fn recv_slot_bytes(max_sge: u32) -> u32 {
    slot_bytes_for(core::mem::size_of::<RecvWqe>() + max_sge as usize * core::mem::size_of::<Sge>())
}

// ---------------------------------------------------------------------------
// Completions

/// Completion status (enum ibv_wc_status / ib_wc_status).
pub const WC_SUCCESS: u8 = 0;
pub const WC_LOC_LEN_ERR: u8 = 1;
pub const WC_LOC_QP_OP_ERR: u8 = 2;
pub const WC_LOC_PROT_ERR: u8 = 4;
pub const WC_WR_FLUSH_ERR: u8 = 5;
pub const WC_MW_BIND_ERR: u8 = 6;
pub const WC_REM_INV_REQ_ERR: u8 = 9;
pub const WC_REM_ACCESS_ERR: u8 = 10;
pub const WC_REM_OP_ERR: u8 = 11;
pub const WC_RETRY_EXC_ERR: u8 = 12;
pub const WC_RNR_RETRY_EXC_ERR: u8 = 13;
pub const WC_FATAL_ERR: u8 = 19;
pub const WC_GENERAL_ERR: u8 = 21;

/// Completion opcodes (enum ibv_wc_opcode / ib_uverbs_wc_opcode).
pub const WC_SEND: u8 = 0;
pub const WC_RDMA_WRITE: u8 = 1;
pub const WC_RDMA_READ: u8 = 2;
pub const WC_COMP_SWAP: u8 = 3;
pub const WC_FETCH_ADD: u8 = 4;
pub const WC_BIND_MW: u8 = 5;
pub const WC_LOCAL_INV: u8 = 6;
/// Kernel CQs only (mapped to IB_WC_REG_MR when polled).
pub const WC_REG_MR: u8 = 0x20;
pub const WC_RECV: u8 = 128;
pub const WC_RECV_RDMA_WITH_IMM: u8 = 129;

/// Completion flags (enum ibv_wc_flags).
pub const WC_GRH: u32 = 1;
pub const WC_WITH_IMM: u32 = 2;
pub const WC_WITH_INV: u32 = 8;

/// A completion-queue slot (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub wr_id: u64,
    pub status: u8,
    pub opcode: u8,
    pub sl: u8,
    pub dlid_path_bits: u8,
    pub wc_flags: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data (network byte order) or the invalidated rkey.
    pub ex: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub pkey_index: u16,
    pub slid: u16,
    /// RoCE: the network header type of a received UD packet (ib_wc).
    pub network_hdr_type: u8,
    pub port_num: u8,
    pub smac: [u8; 6],
    /// Kernel CQs only: the `struct ib_qp *` of the completion (ib_wc.qp);
    /// always zero in user rings.
    pub kernel_qp: u64,
    pub _reserved: u64,
}

pub const CQE_BYTES: u32 = 64;

// ---------------------------------------------------------------------------
// Create / modify commands and responses (driver udata)

/// Response to CREATE_CQ and RESIZE_CQ: the CQE ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateCqResp {
    pub cq: QueueInfo,
}

/// Response to CREATE_QP: the send ring and the receive ring (slots 0 when
/// the QP uses an SRQ) and the QP number.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateQpResp {
    pub sq: QueueInfo,
    pub rq: QueueInfo,
    pub qpn: u32,
    pub reserved: u32,
}

/// Response to CREATE_SRQ: the receive ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateSrqResp {
    pub rq: QueueInfo,
    pub srqn: u32,
    pub reserved: u32,
}

/// Command of MODIFY_SRQ: when the SRQ is resized (IBV_SRQ_MAX_WR), the kernel
/// writes the new ring's QueueInfo to the user buffer at `queue_info_addr`
/// (MODIFY_SRQ has no response udata).  0 means "not resizing".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModifySrqCmd {
    pub queue_info_addr: u64,
}

/// Response to CREATE_AH: the number a UD send WQE names (SendWqe::ah_num).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateAhResp {
    pub ah_num: u32,
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<AllocUcontextResp>() == 16);
const _: () = assert!(core::mem::align_of::<AllocUcontextResp>() == 4);
const _: () = assert!(core::mem::size_of::<QueueHeader>() == QUEUE_HEADER_BYTES);
const _: () = assert!(core::mem::size_of::<QueueInfo>() == 24);
const _: () = assert!(core::mem::size_of::<Sge>() == 16);
const _: () = assert!(core::mem::size_of::<SendWqe>() == 104);
const _: () = assert!(core::mem::size_of::<RecvWqe>() == 16);
const _: () = assert!(core::mem::size_of::<Cqe>() == CQE_BYTES as usize);
const _: () = assert!(core::mem::size_of::<CreateCqResp>() == 24);
const _: () = assert!(core::mem::size_of::<CreateQpResp>() == 56);
const _: () = assert!(core::mem::size_of::<CreateSrqResp>() == 32);
const _: () = assert!(core::mem::size_of::<ModifySrqCmd>() == 8);
const _: () = assert!(core::mem::size_of::<CreateAhResp>() == 8);
