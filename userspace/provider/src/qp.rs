//! Queue pairs (RC, UC, UD): created, modified and destroyed through
//! ib_uverbs; work requests are written straight into the mapped send and
//! receive rings, with a doorbell only when the kernel engine is idle.
//! Send WQEs come from ibv_post_send or from the extended send API
//! (ibv_qp_ex, ibv_wr_*), both built by the same SendQueue code.

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of, zeroed};
use core::ptr::{self, addr_of, addr_of_mut, null_mut};
use core::sync::atomic::{fence, Ordering};

use softrnic_abi as abi;

use crate::ah::ah_num;
use crate::ffi::*;
use crate::recv::{write_sges, RecvQueue};
use crate::ring::{entries_after, Locked, Ring};
use crate::{alloc_obj, cmd_fd, fail, free_obj};

#[repr(C)]
pub struct Qp {
    /// libibverbs's part; first, so its pointers are pointers to the Qp.
    vqp: verbs_qp,
    sq: Locked<SendQueue>,
    rq: Locked<RecvQueue>,
}

const _: () = assert!(offset_of!(Qp, vqp) == 0);

// The WQE opcodes and send flags are libibverbs's numbering (abi.rs).
const _: () = {
    assert!(abi::WR_RDMA_WRITE == IBV_WR_RDMA_WRITE);
    assert!(abi::WR_RDMA_WRITE_WITH_IMM == IBV_WR_RDMA_WRITE_WITH_IMM);
    assert!(abi::WR_SEND == IBV_WR_SEND);
    assert!(abi::WR_SEND_WITH_IMM == IBV_WR_SEND_WITH_IMM);
    assert!(abi::WR_RDMA_READ == IBV_WR_RDMA_READ);
    assert!(abi::WR_ATOMIC_CMP_AND_SWP == IBV_WR_ATOMIC_CMP_AND_SWP);
    assert!(abi::WR_ATOMIC_FETCH_AND_ADD == IBV_WR_ATOMIC_FETCH_AND_ADD);
    assert!(abi::WR_LOCAL_INV == IBV_WR_LOCAL_INV);
    assert!(abi::WR_BIND_MW == IBV_WR_BIND_MW);
    assert!(abi::WR_SEND_WITH_INV == IBV_WR_SEND_WITH_INV);
    assert!(abi::SEND_FENCE == IBV_SEND_FENCE);
    assert!(abi::SEND_SIGNALED == IBV_SEND_SIGNALED);
    assert!(abi::SEND_SOLICITED == IBV_SEND_SOLICITED);
    assert!(abi::SEND_INLINE == IBV_SEND_INLINE);
};

/// Provider side of the send ring (kept under the send queue's lock).
struct SendQueue {
    ring: Ring,
    qp_type: ibv_qp_type,
    /// The kernel's caps, bounded by what a slot holds.
    max_sge: u32,
    max_inline: u32,
    /// sq_sig_all: every WQE is signaled.
    sig_all: bool,
    /// The WQEs being written: ibv_post_send's list, or an ibv_wr_* batch
    /// from wr_start to wr_complete / wr_abort.
    batch: Batch,
}

/// A send WQE being built: its header (written to its slot once the WQE is
/// complete and checked) and what the opcode's checks need to know.
#[derive(Clone, Copy, Debug, Default)]
struct Draft {
    wqe: abi::SendWqe,
    /// Payload bytes: the Sges' lengths summed, or the inline bytes.
    total: u32,
    /// UD: the destination (AH, QPN, Q_Key) is set.
    has_dest: bool,
}

/// WQEs written into the free slots past the producer, published together
/// by one producer store (`SendQueue::commit`).
#[derive(Debug, Default)]
struct Batch {
    /// The producer when the batch began.
    start: u32,
    /// The slot of the next WQE.
    prod: u32,
    /// The kernel's consumer, as last read.
    cons: u32,
    /// The WQE in slot `prod - 1` whose header is not written yet (the one
    /// the setters fill).
    cur: Option<Draft>,
    /// The first error; every later step of the batch is ignored.
    err: c_int,
}

/// CREATE_QP response with softrnic's driver data appended.
#[repr(C)]
struct CreateQpResp {
    ibv: ib_uverbs_create_qp_resp,
    drv: abi::CreateQpResp,
}

const _: () = assert!(offset_of!(CreateQpResp, drv) == size_of::<ib_uverbs_create_qp_resp>());

fn supported_type(t: ibv_qp_type) -> bool {
    matches!(t, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD)
}

/// The opcodes each transport service posts.
fn opcode_allowed(qp_type: ibv_qp_type, op: u32) -> bool {
    match qp_type {
        IBV_QPT_UD => matches!(op, abi::WR_SEND | abi::WR_SEND_WITH_IMM),
        IBV_QPT_UC => matches!(
            op,
            abi::WR_RDMA_WRITE
                | abi::WR_RDMA_WRITE_WITH_IMM
                | abi::WR_SEND
                | abi::WR_SEND_WITH_IMM
                | abi::WR_LOCAL_INV
                | abi::WR_BIND_MW
                | abi::WR_SEND_WITH_INV
        ),
        IBV_QPT_RC => op <= abi::WR_SEND_WITH_INV,
        _ => false,
    }
}

// IBV_QP_EX_WITH_<op> (send_ops_flags) is bit <op> for the ten opcodes.
const _: () = {
    assert!(IBV_QP_EX_WITH_RDMA_WRITE == 1 << abi::WR_RDMA_WRITE);
    assert!(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM == 1 << abi::WR_RDMA_WRITE_WITH_IMM);
    assert!(IBV_QP_EX_WITH_SEND == 1 << abi::WR_SEND);
    assert!(IBV_QP_EX_WITH_SEND_WITH_IMM == 1 << abi::WR_SEND_WITH_IMM);
    assert!(IBV_QP_EX_WITH_RDMA_READ == 1 << abi::WR_RDMA_READ);
    assert!(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP == 1 << abi::WR_ATOMIC_CMP_AND_SWP);
    assert!(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD == 1 << abi::WR_ATOMIC_FETCH_AND_ADD);
    assert!(IBV_QP_EX_WITH_LOCAL_INV == 1 << abi::WR_LOCAL_INV);
    assert!(IBV_QP_EX_WITH_BIND_MW == 1 << abi::WR_BIND_MW);
    assert!(IBV_QP_EX_WITH_SEND_WITH_INV == 1 << abi::WR_SEND_WITH_INV);
};

/// The send_ops_flags (ibv_wr_* opcodes) a QP of `qp_type` may ask for:
/// exactly the opcodes ibv_post_send takes on it.
fn send_ops_supported(qp_type: ibv_qp_type) -> u64 {
    (abi::WR_RDMA_WRITE..=abi::WR_SEND_WITH_INV)
        .filter(|&op| opcode_allowed(qp_type, op))
        .fold(0, |m, op| m | (1 << op))
}

/// Opcodes whose payload goes out from the Sges (and may be inline).
fn carries_payload(op: u32) -> bool {
    matches!(
        op,
        abi::WR_SEND
            | abi::WR_SEND_WITH_IMM
            | abi::WR_SEND_WITH_INV
            | abi::WR_RDMA_WRITE
            | abi::WR_RDMA_WRITE_WITH_IMM
    )
}

/// Opcodes that carry `SendWqe::ex` (immediate data or an rkey to invalidate).
fn carries_ex(op: u32) -> bool {
    matches!(
        op,
        abi::WR_SEND_WITH_IMM
            | abi::WR_RDMA_WRITE_WITH_IMM
            | abi::WR_SEND_WITH_INV
            | abi::WR_LOCAL_INV
    )
}

impl Draft {
    /// RDMA READ / WRITE: the remote buffer.
    fn rdma(&mut self, rkey: u32, remote_addr: u64) {
        self.wqe.remote_addr = remote_addr;
        self.wqe.rkey = rkey;
    }

    /// Atomics: the remote target and the operands (`swap` unused by
    /// FETCH_AND_ADD).
    fn atomic(&mut self, rkey: u32, remote_addr: u64, compare_add: u64, swap: u64) {
        self.rdma(rkey, remote_addr);
        self.wqe.compare_add = compare_add;
        self.wqe.swap = swap;
    }

    /// BIND_MW: the window (by its current rkey), its new rkey and what to
    /// bind it to.
    ///
    /// # Safety
    /// `mw` is NULL or a live window; `info.mr` is NULL or a live MR.
    unsafe fn bind(
        &mut self,
        mw: *const ibv_mw,
        new_rkey: u32,
        info: &ibv_mw_bind_info,
    ) -> Result<(), c_int> {
        // SAFETY: per the caller's promise.
        let (mw, mr) = unsafe { (mw.as_ref(), info.mr.as_ref()) };
        let mw = mw.ok_or(libc::EINVAL)?;
        self.wqe.bind_mw_rkey = mw.rkey;
        self.wqe.bind_mr_lkey = mr.map_or(0, |mr| mr.lkey);
        self.wqe.bind_new_rkey = new_rkey;
        self.wqe.bind_access = info.mw_access_flags;
        self.wqe.bind_addr = info.addr;
        self.wqe.bind_length = info.length;
        Ok(())
    }

    /// Takes the opcode's fields out of an ibv_send_wr (post_send).
    ///
    /// # Safety
    /// `w` is a valid work request for its opcode (the union members and
    /// the mw / mr pointers its opcode uses).
    unsafe fn set_from_wr(&mut self, w: &ibv_send_wr) -> Result<(), c_int> {
        let op = w.opcode;
        if carries_ex(op) {
            // SAFETY: imm_data and invalidate_rkey are both a u32.
            self.wqe.ex = unsafe { w.__bindgen_anon_1.imm_data };
        }
        match op {
            abi::WR_RDMA_WRITE | abi::WR_RDMA_WRITE_WITH_IMM | abi::WR_RDMA_READ => {
                // SAFETY: the rdma member is the one in use for these opcodes.
                let r = unsafe { w.wr.rdma };
                self.rdma(r.rkey, r.remote_addr);
            }
            abi::WR_ATOMIC_CMP_AND_SWP | abi::WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: the atomic member is the one in use.
                let a = unsafe { w.wr.atomic };
                self.atomic(a.rkey, a.remote_addr, a.compare_add, a.swap);
            }
            abi::WR_BIND_MW => {
                // SAFETY: the bind_mw member is the one in use; its mw and
                // mr are live (the caller's promise).
                unsafe {
                    let b = &w.__bindgen_anon_2.bind_mw;
                    self.bind(b.mw, b.rkey, &b.bind_info)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl SendQueue {
    /// Starts a batch at the producer.  Nothing is published until
    /// `commit`.
    fn begin(&mut self) {
        self.batch = Batch::default();
        if !self.ring.is_mapped() {
            self.batch.err = libc::EINVAL;
            return;
        }
        let start = self.ring.producer().load(Ordering::Relaxed);
        self.batch.start = start;
        self.batch.prod = start;
        // Acquire: the kernel copied a slot out before moving past it.
        self.batch.cons = self.ring.consumer().load(Ordering::Acquire);
    }

    /// A new WQE header: the opcode checked against the QP type, the send
    /// flags as the kernel takes them.
    fn header(&self, op: u32, wr_id: u64, send_flags: u32) -> Result<Draft, c_int> {
        if !opcode_allowed(self.qp_type, op) {
            return Err(libc::EINVAL);
        }
        let mut flags = send_flags
            & (abi::SEND_FENCE | abi::SEND_SIGNALED | abi::SEND_SOLICITED | abi::SEND_INLINE);
        if self.sig_all {
            flags |= abi::SEND_SIGNALED;
        }
        if !carries_payload(op) {
            // Nothing goes out from local memory: inline means nothing.
            flags &= !abi::SEND_INLINE;
        }
        Ok(Draft {
            wqe: abi::SendWqe {
                wr_id,
                opcode: op,
                send_flags: flags,
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// Starts a WQE in the next free slot (finishing the one before), its
    /// opcode's fields set by `fill`; records the first error (ENOMEM when
    /// the ring is full).
    fn add(
        &mut self,
        op: u32,
        wr_id: u64,
        send_flags: u32,
        fill: impl FnOnce(&mut Draft) -> Result<(), c_int>,
    ) {
        self.seal();
        if self.batch.err != 0 {
            return;
        }
        let mut d = match self.header(op, wr_id, send_flags) {
            Ok(d) => d,
            Err(e) => {
                self.batch.err = e;
                return;
            }
        };
        let b = &mut self.batch;
        if let Err(e) = fill(&mut d) {
            b.err = e;
        } else if !self.ring.room_for(b.prod, &mut b.cons) {
            b.err = libc::ENOMEM;
        } else {
            b.cur = Some(d);
            b.prod = b.prod.wrapping_add(1);
        }
    }

    /// Runs a setter on the current WQE with a pointer to its slot's payload
    /// area; records the first error (EINVAL when there is no current WQE).
    fn set(&mut self, f: impl FnOnce(&Self, &mut Draft, *mut u8) -> Result<(), c_int>) {
        if self.batch.err != 0 {
            return;
        }
        let Some(mut d) = self.batch.cur.take() else {
            self.batch.err = libc::EINVAL;
            return;
        };
        // SAFETY: a current WQE owns slot prod - 1 of the mapped ring; the
        // payload area follows the header inside the slot (the slot holds
        // the header plus max_sge Sges or max_inline bytes: finish_create).
        let payload = unsafe {
            self.ring
                .slot(self.batch.prod.wrapping_sub(1))
                .add(size_of::<abi::SendWqe>())
        };
        match f(self, &mut d, payload) {
            Ok(()) => self.batch.cur = Some(d),
            Err(e) => self.batch.err = e,
        }
    }

    /// The payload: `n` Sges, written into the slot.
    ///
    /// # Safety
    /// `sg` has `n` entries (or `n` is 0).
    unsafe fn set_sges(&mut self, sg: *const ibv_sge, n: usize) {
        self.set(|q, d, payload| {
            let n = u32::try_from(n)
                .ok()
                .filter(|&n| n <= q.max_sge)
                .ok_or(libc::EINVAL)?;
            // SAFETY: sg has n entries (the caller's promise).
            d.total = unsafe { payload_len(sg, n) }.ok_or(libc::EINVAL)?;
            // SAFETY: the payload area holds max_sge Sges (set's promise).
            unsafe { write_sges(payload, sg, n) };
            d.wqe.num_sge = n;
            d.wqe.inline_len = 0;
            d.wqe.send_flags &= !abi::SEND_INLINE;
            Ok(())
        });
    }

    /// The payload: the bytes of `parts` (address, length), copied into
    /// the slot back to back.
    ///
    /// # Safety
    /// Each part is readable for its length (its address may be anything
    /// when the length is 0).
    unsafe fn set_inline<I>(&mut self, parts: I)
    where
        I: Iterator<Item = (*const u8, usize)> + Clone,
    {
        self.set(|q, d, payload| {
            if !carries_payload(d.wqe.opcode) {
                return Err(libc::EINVAL);
            }
            let total = parts
                .clone()
                .try_fold(0usize, |acc, (_, len)| acc.checked_add(len))
                .and_then(|t| u32::try_from(t).ok())
                .filter(|&t| t <= q.max_inline)
                .ok_or(libc::EINVAL)?;
            // SAFETY: the parts are readable (the caller's promise) and the
            // payload area holds max_inline bytes (set's promise).
            unsafe { copy_inline(payload, parts) };
            d.total = total;
            d.wqe.inline_len = total;
            d.wqe.num_sge = 0;
            d.wqe.send_flags |= abi::SEND_INLINE;
            Ok(())
        });
    }

    /// UD: the destination, the AH named by its number.
    ///
    /// # Safety
    /// `ah` is NULL or one of our AHs.
    unsafe fn set_ud(&mut self, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) {
        self.set(|q, d, _| {
            if q.qp_type != IBV_QPT_UD {
                return Err(libc::EINVAL);
            }
            // SAFETY: per the caller's promise.
            d.wqe.ah_num = unsafe { ah_num(ah) }.ok_or(libc::EINVAL)?;
            d.wqe.remote_qpn = remote_qpn;
            d.wqe.remote_qkey = remote_qkey;
            d.has_dest = true;
            Ok(())
        });
    }

    /// What an opcode needs of a finished WQE.
    fn check(&self, d: &Draft) -> Result<(), c_int> {
        let w = &d.wqe;
        let ok = match w.opcode {
            // An 8-byte aligned target and an 8-byte local buffer.
            abi::WR_ATOMIC_CMP_AND_SWP | abi::WR_ATOMIC_FETCH_AND_ADD => {
                w.remote_addr & 7 == 0 && d.total >= 8
            }
            abi::WR_BIND_MW => w.num_sge == 0,
            _ => true,
        };
        if !ok || (self.qp_type == IBV_QPT_UD && !d.has_dest) {
            return Err(libc::EINVAL);
        }
        Ok(())
    }

    /// Finishes the current WQE: checks it and writes its header to its slot.
    fn seal(&mut self) {
        let Some(d) = self.batch.cur.take() else {
            return;
        };
        if self.batch.err != 0 {
            return;
        }
        match self.check(&d) {
            // SAFETY: the WQE owns slot prod - 1 of the mapped ring (add),
            // which holds a header.
            Ok(()) => unsafe {
                let slot = self.ring.slot(self.batch.prod.wrapping_sub(1));
                ptr::write_volatile(slot.cast::<abi::SendWqe>(), d.wqe);
            },
            Err(e) => self.batch.err = e,
        }
    }

    /// Publishes the batch's WQEs (those before `batch.prod`) with one
    /// producer store.  Returns whether the kernel must be woken.
    fn commit(&mut self) -> bool {
        let b = &mut self.batch;
        b.cur = None;
        if b.prod == b.start {
            return false;
        }
        b.start = b.prod;
        let ring = &self.ring;
        // Release: the WQEs before the producer value that covers them.
        ring.producer().store(b.prod, Ordering::Release);
        // The engine sets QUEUE_ENGINE_IDLE and then re-reads producer before
        // it sleeps; with a full fence on both sides, either it sees the new
        // WQEs or this load sees the flag and rings.
        fence(Ordering::SeqCst);
        ring.kernel_flags().load(Ordering::Relaxed) & abi::QUEUE_ENGINE_IDLE != 0
    }

    /// ibv_wr_complete: publishes the whole batch, or nothing and the first
    /// error.  Returns the errno and whether the kernel must be woken.
    fn complete(&mut self) -> (c_int, bool) {
        self.seal();
        match self.batch.err {
            0 => (0, self.commit()),
            e => {
                self.abort();
                (e, false)
            }
        }
    }

    /// ibv_wr_abort: drops the batch; the producer never moved.
    fn abort(&mut self) {
        self.batch = Batch::default();
    }

    /// Writes one ibv_send_wr as the batch's next WQE.
    ///
    /// # Safety
    /// `w` is a valid work request (its sg_list, ah, mw and mr pointers as
    /// libibverbs's API requires for its opcode).
    unsafe fn add_wr(&mut self, w: &ibv_send_wr) {
        self.add(w.opcode, w.wr_id, w.send_flags, |d| {
            // SAFETY: w is valid (the caller's promise).
            unsafe { d.set_from_wr(w) }
        });
        let Ok(num_sge) = usize::try_from(w.num_sge) else {
            self.set(|_, _, _| Err(libc::EINVAL));
            return;
        };
        let inline = self
            .batch
            .cur
            .is_some_and(|d| d.wqe.send_flags & abi::SEND_INLINE != 0);
        // SAFETY: sg_list has num_sge entries, pointing at readable memory
        // when inline; on a UD QP the ud member is the one in use and its ah
        // is one of ours (the caller's promise).
        unsafe {
            if inline {
                self.set_inline((0..num_sge).map(|i| {
                    let s = &*w.sg_list.add(i);
                    (s.addr as usize as *const u8, s.length as usize)
                }));
            } else {
                self.set_sges(w.sg_list, num_sge);
            }
            if self.qp_type == IBV_QPT_UD {
                let ud = w.wr.ud;
                self.set_ud(ud.ah, ud.remote_qpn, ud.remote_qkey);
            }
        }
        self.seal();
    }

    /// Writes the list at `wr` into the ring and publishes it.  Returns the
    /// errno for the first rejected request (stored in `*bad_wr`; those
    /// before it are published) and whether the kernel must be woken.
    ///
    /// # Safety
    /// `wr` is a valid list and `bad_wr` writable.
    unsafe fn post(
        &mut self,
        mut wr: *mut ibv_send_wr,
        bad_wr: *mut *mut ibv_send_wr,
    ) -> (c_int, bool) {
        self.begin();
        while !wr.is_null() && self.batch.err == 0 {
            let before = self.batch.prod;
            // SAFETY: wr is an element of the caller's list.
            let w = unsafe { &*wr };
            // SAFETY: w is valid (the caller's promise).
            unsafe { self.add_wr(w) };
            if self.batch.err != 0 {
                // Its slot goes back: it is not published.
                self.batch.prod = before;
            } else {
                wr = w.next;
            }
        }
        let ret = self.batch.err;
        if ret != 0 {
            // SAFETY: bad_wr is writable.
            unsafe { *bad_wr = wr };
        }
        (ret, self.commit())
    }
}

/// Sum of the Sge lengths, None on overflow.
///
/// # Safety
/// `sg` has `n` entries (or `n` is 0).
unsafe fn payload_len(sg: *const ibv_sge, n: u32) -> Option<u32> {
    (0..n as usize).try_fold(0u32, |acc, i| {
        // SAFETY: per the caller's promise.
        acc.checked_add(unsafe { (*sg.add(i)).length })
    })
}

/// Copies the bytes of `parts` (address, length) to `dst`, back to back.
///
/// # Safety
/// Each part is readable for its length (any address when the length is 0)
/// and `dst` has room for their sum.
unsafe fn copy_inline(dst: *mut u8, parts: impl Iterator<Item = (*const u8, usize)>) {
    let mut off = 0usize;
    for (src, len) in parts {
        if len == 0 {
            continue; // src may be NULL then
        }
        // SAFETY: per the caller's promise.
        unsafe { ptr::copy_nonoverlapping(src, dst.add(off), len) };
        off += len;
    }
}

/// The send ring, and the receive ring unless the QP uses an SRQ.
///
/// # Safety
/// `fd` is the context's command file.
unsafe fn map_rings(
    fd: c_int,
    resp: &abi::CreateQpResp,
    has_srq: bool,
) -> Result<(Ring, Ring), c_int> {
    // SAFETY: per the caller's promise.
    let sq = unsafe { Ring::map(fd, &resp.sq, size_of::<abi::SendWqe>()) }?;
    let rq = if has_srq || resp.rq.slots == 0 {
        Ring::NONE
    } else {
        // SAFETY: as above.
        unsafe { Ring::map(fd, &resp.rq, size_of::<abi::RecvWqe>()) }?
    };
    Ok((sq, rq))
}

/// Maps the new QP's rings and finishes it, or undoes the create.
///
/// # Safety
/// `qp` was just created in the kernel through `ctx` (libibverbs has filled
/// its ibv_qp) and is otherwise unused; `cap` holds the kernel's caps.
unsafe fn finish_create(
    ctx: *mut ibv_context,
    qp: *mut Qp,
    cap: &ibv_qp_cap,
    sig_all: bool,
    resp: &abi::CreateQpResp,
) -> *mut ibv_qp {
    // SAFETY: qp is ours; libibverbs filled the ibv_qp.
    let ibqp = unsafe { addr_of_mut!((*qp).vqp.__bindgen_anon_1.qp) };
    // SAFETY: as above.
    let (qp_type, has_srq) = unsafe { ((*ibqp).qp_type, !(*ibqp).srq.is_null()) };
    // SAFETY: ctx is the live context.
    let fd = unsafe { cmd_fd(ctx) };
    // SAFETY: fd is the context's command file.
    let (sq, rq) = match unsafe { map_rings(fd, resp, has_srq) } {
        Ok(r) => r,
        Err(e) => {
            // SAFETY: the QP exists in the kernel and nobody else knows it.
            unsafe {
                ibv_cmd_destroy_qp(ibqp);
                free_obj(qp);
            }
            return fail(e);
        }
    };
    let payload = sq.slot_bytes().saturating_sub(size_of::<abi::SendWqe>());
    let fit_sges = entries_after::<abi::SendWqe, abi::Sge>(sq.slot_bytes());
    let send = SendQueue {
        qp_type,
        max_sge: cap
            .max_send_sge
            .min(u32::try_from(fit_sges).unwrap_or(u32::MAX)),
        max_inline: cap
            .max_inline_data
            .min(u32::try_from(payload).unwrap_or(u32::MAX)),
        sig_all,
        ring: sq,
        batch: Batch::default(),
    };
    // SAFETY: qp's sq/rq are uninitialised memory of the right type.
    unsafe {
        Locked::init(addr_of_mut!((*qp).sq), send);
        Locked::init(addr_of_mut!((*qp).rq), RecvQueue::new(rq, cap.max_recv_sge));
    }
    ibqp
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    // SAFETY: libibverbs passes valid pointers.
    let (ctx, a) = unsafe { ((*pd).context, &mut *attr) };
    if !supported_type(a.qp_type) {
        return fail(libc::EOPNOTSUPP);
    }
    let Some(qp) = alloc_obj::<Qp>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_create_qp, CreateQpResp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: qp is a fresh zeroed allocation (verbs_qp with comp_mask 0,
    // which ibv_qp_to_qp_ex reads); the buffers are sized.
    let ret = unsafe {
        ibv_cmd_create_qp(
            pd,
            addr_of_mut!((*qp).vqp.__bindgen_anon_1.qp),
            a,
            &mut cmd,
            size_of::<ibv_create_qp>(),
            &mut resp.ibv,
            size_of::<CreateQpResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows qp.
        unsafe { free_obj(qp) };
        return fail(ret);
    }
    // SAFETY: just created; attr->cap now holds the kernel's caps.
    unsafe { finish_create(ctx, qp, &a.cap, a.sq_sig_all != 0, &resp.drv) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: libibverbs passes a valid attribute structure.
    let a = unsafe { &mut *attr };
    // A PD is required; create flags only when none is set.  XRC, RSS and
    // TSO are not supported; the ibv_wr_* send API (SEND_OPS_FLAGS) is, for
    // the opcodes ibv_post_send takes on the QP type.
    let no_flags = a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS == 0 || a.create_flags == 0;
    let send_ops = (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(a.send_ops_flags);
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
        return fail(libc::EINVAL);
    }
    let known =
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if a.comp_mask & !known != 0
        || !no_flags
        || !supported_type(a.qp_type)
        || send_ops.is_some_and(|ops| ops & !send_ops_supported(a.qp_type) != 0)
    {
        return fail(libc::EOPNOTSUPP);
    }
    let Some(qp) = alloc_obj::<Qp>() else {
        return fail(libc::ENOMEM);
    };
    // What the command helper accepts: the same attributes with just the PD.
    // SAFETY: ibv_qp_init_attr_ex is plain data.
    let mut local: ibv_qp_init_attr_ex = unsafe { ptr::read(a) };
    local.comp_mask = IBV_QP_INIT_ATTR_PD;
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_create_qp, CreateQpResp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: qp is a fresh zeroed allocation; the buffers are sized.
    let ret = unsafe {
        ibv_cmd_create_qp_ex(
            ctx,
            addr_of_mut!((*qp).vqp),
            &mut local,
            &mut cmd,
            size_of::<ibv_create_qp>(),
            &mut resp.ibv,
            size_of::<CreateQpResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows qp.
        unsafe { free_obj(qp) };
        return fail(ret);
    }
    // Report the caps the kernel granted, as ibv_create_qp does.
    a.cap = local.cap;
    // SAFETY: just created.
    let ibqp = unsafe { finish_create(ctx, qp, &local.cap, local.sq_sig_all != 0, &resp.drv) };
    if let (false, Some(ops)) = (ibqp.is_null(), send_ops) {
        // SAFETY: finish_create succeeded: qp is live and still ours alone.
        unsafe { enable_send_ops(qp, ops) };
    }
    ibqp
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: zeroed command buffer.
    let mut cmd: ibv_query_qp = unsafe { zeroed() };
    // SAFETY: arguments from libibverbs unchanged; cmd is sized.
    unsafe {
        ibv_cmd_query_qp(
            qp,
            attr,
            attr_mask,
            init_attr,
            &mut cmd,
            size_of::<ibv_query_qp>(),
        )
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    // SAFETY: zeroed command buffer.
    let mut cmd: ibv_modify_qp = unsafe { zeroed() };
    // SAFETY: arguments from libibverbs unchanged; cmd is sized.
    let ret =
        unsafe { ibv_cmd_modify_qp(qp, attr, attr_mask, &mut cmd, size_of::<ibv_modify_qp>()) };
    // SAFETY: a valid attr and a live QP whose CQs are ours.
    unsafe {
        if ret == 0 && attr_mask & IBV_QP_STATE as c_int != 0 && (*attr).qp_state == IBV_QPS_RESET {
            // Completions of the old incarnation go (IBTA 10.3.1: a reset
            // QP's completions may be removed), as other providers do.
            let n = (*qp).qp_num;
            crate::cq::clean_qp((*qp).send_cq, n);
            if (*qp).recv_cq != (*qp).send_cq {
                crate::cq::clean_qp((*qp).recv_cq, n);
            }
        }
    }
    ret
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn destroy_qp(ibqp: *mut ibv_qp) -> c_int {
    // SAFETY: ibqp is one of our QPs.
    let ret = unsafe { ibv_cmd_destroy_qp(ibqp) };
    if ret != 0 {
        return ret;
    }
    let qp = ibqp.cast::<Qp>();
    // SAFETY: destroyed in the kernel; nobody posts to it any more.  Dropping
    // the queues unmaps the rings.
    unsafe {
        Locked::destroy(addr_of_mut!((*qp).sq));
        Locked::destroy(addr_of_mut!((*qp).rq));
        free_obj(qp);
    }
    0
}

/// # Safety
/// Called only by libibverbs (or bind_mw), with the pointers its provider
/// interface promises.
pub unsafe extern "C" fn post_send(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    if bad_wr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: ibqp is one of our live QPs.
    if unsafe { !send_state_ok(ibqp) } {
        // SAFETY: bad_wr is writable.
        unsafe { *bad_wr = wr };
        return libc::EINVAL;
    }
    // SAFETY: ibqp is one of our QPs; only its send queue is borrowed.
    let sq = unsafe { &*addr_of!((*ibqp.cast::<Qp>()).sq) };
    // SAFETY: wr and bad_wr as libibverbs promises.
    let (ret, wake) = unsafe { sq.lock().post(wr, bad_wr) };
    if wake {
        // SAFETY: ibqp is live.
        unsafe { doorbell(ibqp) };
    }
    ret
}

/// Whether the send queue takes work in the QP's state as libibverbs last
/// set it: not before RTS (C10-27).  iWARP QPs are born idle (the kernel's
/// INIT) while libibverbs records RESET, and take work there.
///
/// # Safety
/// `ibqp` is one of our live QPs.
unsafe fn send_state_ok(ibqp: *mut ibv_qp) -> bool {
    // SAFETY: per the caller's promise.
    let (state, ctx) = unsafe { ((*ibqp).state, (*ibqp).context) };
    // SAFETY: a live context.
    !matches!(state, IBV_QPS_RESET | IBV_QPS_INIT | IBV_QPS_RTR)
        || unsafe { crate::transport(ctx) } == abi::TRANSPORT_IWARP
}

/// Wakes the kernel engine: an empty POST_SEND.  The WQEs are published
/// whatever it returns: it is only a hint, so its errors are not the
/// caller's.
///
/// # Safety
/// `ibqp` is one of our live QPs.
unsafe fn doorbell(ibqp: *mut ibv_qp) {
    let mut bad = null_mut();
    // SAFETY: per the caller's promise; no work requests.
    let _ = unsafe { ibv_cmd_post_send(ibqp, null_mut(), &mut bad) };
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn post_recv(
    ibqp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    if bad_wr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: ibqp is one of our QPs.  Receives go to the SRQ when there is
    // one, and not before the QP left RESET (C10-97.2.1).  iWARP QPs are born
    // idle (the kernel reports INIT) while libibverbs records RESET.
    let reset = unsafe {
        (*ibqp).state == IBV_QPS_RESET && crate::transport((*ibqp).context) != abi::TRANSPORT_IWARP
    };
    // SAFETY: as above.
    if unsafe { !(*ibqp).srq.is_null() } || reset {
        // SAFETY: bad_wr is writable.
        unsafe { *bad_wr = wr };
        return libc::EINVAL;
    }
    // SAFETY: only the QP's receive queue is borrowed.
    let rq = unsafe { &*addr_of!((*ibqp.cast::<Qp>()).rq) };
    let (ret, in_error) = {
        let mut q = rq.lock();
        // SAFETY: wr and bad_wr as libibverbs promises.
        let ret = unsafe { q.post(wr, bad_wr) };
        (ret, q.qp_in_error())
    };
    if in_error {
        // Receives posted to a QP in ERR complete as flushed: the doorbell
        // makes the kernel flush them now.
        // SAFETY: ibqp is live.
        unsafe { doorbell(ibqp) };
    }
    ret
}

// ---------------------------------------------------------------------------
// The extended send API (ibv_qp_ex, ibv_wr_*): wr_start takes the send
// queue's lock and wr_complete / wr_abort release it; each opcode call
// starts a WQE in the next free slot, the setters fill it, and wr_complete
// publishes them all with one producer store.  The WQEs are built by the
// same SendQueue code as ibv_post_send's.

/// Fills the QP's ibv_qp_ex for the opcodes in `ops` (already checked
/// against the QP type) and makes ibv_qp_to_qp_ex find it.
///
/// # Safety
/// `qp` is live and not yet used by anyone else.
unsafe fn enable_send_ops(qp: *mut Qp, ops: u64) {
    // SAFETY: per the caller's promise; verbs_qp's union holds the ibv_qp_ex
    // (whose first member is the ibv_qp libibverbs filled).
    let ex = unsafe {
        (*qp).vqp.comp_mask |= VERBS_QP_EX;
        &mut (*qp).vqp.__bindgen_anon_1.qp_ex
    };
    let ud = ex.qp_base.qp_type == IBV_QPT_UD;
    let with = |flag: ibv_qp_create_send_ops_flags| ops & u64::from(flag) != 0;
    ex.wr_rdma_write = with(IBV_QP_EX_WITH_RDMA_WRITE).then_some(wr_rdma_write);
    ex.wr_rdma_write_imm = with(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM).then_some(wr_rdma_write_imm);
    ex.wr_send = with(IBV_QP_EX_WITH_SEND).then_some(wr_send);
    ex.wr_send_imm = with(IBV_QP_EX_WITH_SEND_WITH_IMM).then_some(wr_send_imm);
    ex.wr_rdma_read = with(IBV_QP_EX_WITH_RDMA_READ).then_some(wr_rdma_read);
    ex.wr_atomic_cmp_swp = with(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP).then_some(wr_atomic_cmp_swp);
    ex.wr_atomic_fetch_add =
        with(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD).then_some(wr_atomic_fetch_add);
    ex.wr_local_inv = with(IBV_QP_EX_WITH_LOCAL_INV).then_some(wr_local_inv);
    ex.wr_bind_mw = with(IBV_QP_EX_WITH_BIND_MW).then_some(wr_bind_mw);
    ex.wr_send_inv = with(IBV_QP_EX_WITH_SEND_WITH_INV).then_some(wr_send_inv);
    ex.wr_set_ud_addr = ud.then_some(wr_set_ud_addr);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
}

/// The send queue of an extended QP.
///
/// # Safety
/// `q` is the ibv_qp_ex of one of our live QPs.
unsafe fn ex_queue<'a>(q: *mut ibv_qp_ex) -> &'a Locked<SendQueue> {
    // SAFETY: the ibv_qp_ex is at offset 0 of the verbs_qp, itself at
    // offset 0 of the Qp; only the send queue is borrowed.
    unsafe { &*addr_of!((*q.cast::<Qp>()).sq) }
}

/// The send queue of an extended QP inside a batch.
///
/// # Safety
/// As ex_queue, and this thread holds the queue's lock (between wr_start
/// and wr_complete / wr_abort) while it uses the reference.
unsafe fn batch_queue<'a>(q: *mut ibv_qp_ex) -> &'a mut SendQueue {
    // SAFETY: per the caller's promise.
    unsafe { ex_queue(q).locked_data() }
}

/// Starts the next WQE with the ibv_qp_ex's wr_id and wr_flags; `fill`
/// sets the opcode's fields.
///
/// # Safety
/// As batch_queue.
unsafe fn wr_op_checked(
    q: *mut ibv_qp_ex,
    op: u32,
    fill: impl FnOnce(&mut Draft) -> Result<(), c_int>,
) {
    // SAFETY: q is live; the user sets these two between calls.
    let (wr_id, flags) = unsafe { ((*q).wr_id, (*q).wr_flags) };
    // SAFETY: per the caller's promise.
    unsafe { batch_queue(q) }.add(op, wr_id, flags, fill);
}

/// wr_op_checked for opcodes whose fields cannot be wrong.
///
/// # Safety
/// As batch_queue.
unsafe fn wr_op(q: *mut ibv_qp_ex, op: u32, fields: impl FnOnce(&mut Draft)) {
    // SAFETY: per the caller's promise.
    unsafe {
        wr_op_checked(q, op, |d| {
            fields(d);
            Ok(())
        })
    }
}

/// ibv_wr_start: takes the send queue's lock and starts a batch.
///
/// # Safety
/// `q` is one of our extended QPs, and this thread is not in a batch on it
/// (libibverbs's ibv_wr_* contract).
unsafe extern "C" fn wr_start(q: *mut ibv_qp_ex) {
    // SAFETY: q is one of our extended QPs (libibverbs's API).
    let sq = unsafe { ex_queue(q) };
    // SAFETY: released by wr_complete or wr_abort; the data is then this
    // thread's until then.
    unsafe {
        sq.raw_lock();
        sq.locked_data().begin();
    }
}

/// ibv_wr_complete: publishes the batch (or nothing, and its first error)
/// and releases the lock.
///
/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start.
unsafe extern "C" fn wr_complete(q: *mut ibv_qp_ex) -> c_int {
    // SAFETY: q is one of our extended QPs, locked since wr_start.
    let sq = unsafe { ex_queue(q) };
    // SAFETY: q's ibv_qp (at offset 0) is live.
    if unsafe { !send_state_ok(q.cast()) } {
        // SAFETY: locked since wr_start; released here.
        unsafe {
            sq.locked_data().abort();
            sq.raw_unlock();
        }
        return libc::EINVAL;
    }
    // SAFETY: as above; the lock is released once the batch is published.
    let (ret, wake) = unsafe {
        let r = sq.locked_data().complete();
        sq.raw_unlock();
        r
    };
    if wake {
        // SAFETY: q's ibv_qp (at offset 0) is live.
        unsafe { doorbell(q.cast()) };
    }
    ret
}

/// ibv_wr_abort: drops the batch and releases the lock.
///
/// # Safety
/// As wr_complete.
unsafe extern "C" fn wr_abort(q: *mut ibv_qp_ex) {
    // SAFETY: q is one of our extended QPs, locked since wr_start.
    unsafe {
        let sq = ex_queue(q);
        sq.locked_data().abort();
        sq.raw_unlock();
    }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_send(q: *mut ibv_qp_ex) {
    // SAFETY: called between wr_start and wr_complete / wr_abort (the API).
    unsafe { wr_op(q, abi::WR_SEND, |_| {}) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_send_imm(q: *mut ibv_qp_ex, imm_data: __be32) {
    // SAFETY: as in wr_send.
    unsafe { wr_op(q, abi::WR_SEND_WITH_IMM, |d| d.wqe.ex = imm_data) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_send_inv(q: *mut ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: as in wr_send.
    unsafe { wr_op(q, abi::WR_SEND_WITH_INV, |d| d.wqe.ex = invalidate_rkey) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_local_inv(q: *mut ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: as in wr_send.
    unsafe { wr_op(q, abi::WR_LOCAL_INV, |d| d.wqe.ex = invalidate_rkey) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_rdma_write(q: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: as in wr_send.
    unsafe { wr_op(q, abi::WR_RDMA_WRITE, |d| d.rdma(rkey, remote_addr)) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_rdma_write_imm(
    q: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm_data: __be32,
) {
    // SAFETY: as in wr_send.
    unsafe {
        wr_op(q, abi::WR_RDMA_WRITE_WITH_IMM, |d| {
            d.rdma(rkey, remote_addr);
            d.wqe.ex = imm_data;
        })
    }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_rdma_read(q: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: as in wr_send.
    unsafe { wr_op(q, abi::WR_RDMA_READ, |d| d.rdma(rkey, remote_addr)) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_atomic_cmp_swp(
    q: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    // SAFETY: as in wr_send.
    unsafe {
        wr_op(q, abi::WR_ATOMIC_CMP_AND_SWP, |d| {
            d.atomic(rkey, remote_addr, compare, swap)
        })
    }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_atomic_fetch_add(q: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64) {
    // SAFETY: as in wr_send.
    unsafe {
        wr_op(q, abi::WR_ATOMIC_FETCH_AND_ADD, |d| {
            d.atomic(rkey, remote_addr, add, 0)
        })
    }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_bind_mw(
    q: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    bind_info: *const ibv_mw_bind_info,
) {
    let fill = |d: &mut Draft| {
        // SAFETY: mw, bind_info and its mr are NULL or live (the API).
        let info = unsafe { bind_info.as_ref() }.ok_or(libc::EINVAL)?;
        // SAFETY: as above.
        unsafe { d.bind(mw, rkey, info) }
    };
    // SAFETY: as in wr_send.
    unsafe { wr_op_checked(q, abi::WR_BIND_MW, fill) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_set_sge(q: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    let sge = ibv_sge { addr, length, lkey };
    // SAFETY: inside a batch (the API); one Sge.
    unsafe { batch_queue(q).set_sges(&sge, 1) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_set_sge_list(q: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    // SAFETY: inside a batch; sg_list has num_sge entries (the API).
    unsafe { batch_queue(q).set_sges(sg_list, num_sge) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_set_inline_data(q: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    // SAFETY: inside a batch; addr is readable for length bytes (the API).
    unsafe { batch_queue(q).set_inline(core::iter::once((addr.cast_const().cast::<u8>(), length))) }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_set_inline_data_list(
    q: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    // SAFETY: inside a batch; buf_list has num_buf readable buffers (the API).
    unsafe {
        batch_queue(q).set_inline((0..num_buf).map(|i| {
            let b = &*buf_list.add(i);
            (b.addr.cast_const().cast::<u8>(), b.length)
        }))
    }
}

/// # Safety
/// `q` is one of our extended QPs, in a batch since this thread's wr_start;
/// the pointers are as libibverbs's ibv_wr_* contract requires.
unsafe extern "C" fn wr_set_ud_addr(
    q: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: inside a batch; ah is NULL or one of our AHs (the API).
    unsafe { batch_queue(q).set_ud(ah, remote_qpn, remote_qkey) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::test_ring;

    fn sq(qp_type: ibv_qp_type, slots: u32) -> SendQueue {
        SendQueue {
            ring: test_ring(slots, 256, size_of::<abi::SendWqe>()),
            qp_type,
            max_sge: 4,
            max_inline: 64,
            sig_all: false,
            batch: Batch::default(),
        }
    }

    fn wr(op: u32, sg: &mut [ibv_sge]) -> ibv_send_wr {
        // SAFETY: an all-zero work request is valid.
        let mut w: ibv_send_wr = unsafe { zeroed() };
        w.wr_id = 0x1000 + u64::from(op);
        w.opcode = op;
        w.sg_list = sg.as_mut_ptr();
        w.num_sge = sg.len() as c_int;
        w
    }

    fn wqe_at(q: &SendQueue, i: u32) -> abi::SendWqe {
        // SAFETY: slot i of the test ring.
        unsafe { ptr::read(q.ring.slot(i).cast::<abi::SendWqe>()) }
    }

    fn sge_at(q: &SendQueue, i: u32, n: usize) -> abi::Sge {
        // SAFETY: inside slot i of the test ring.
        unsafe {
            ptr::read(
                q.ring
                    .slot(i)
                    .add(size_of::<abi::SendWqe>())
                    .cast::<abi::Sge>()
                    .add(n),
            )
        }
    }

    fn sge(addr: u64, length: u32, lkey: u32) -> ibv_sge {
        ibv_sge { addr, length, lkey }
    }

    #[test]
    fn send_list_is_published_with_its_sges() {
        let mut q = sq(IBV_QPT_RC, 8);
        let mut sg1 = [sge(0x10, 100, 7), sge(0x20, 28, 8)];
        let mut sg2 = [sge(0x30, 8, 9)];
        let mut w2 = wr(abi::WR_ATOMIC_FETCH_AND_ADD, &mut sg2);
        w2.wr.atomic = ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: 0x4000,
            compare_add: 5,
            swap: 6,
            rkey: 0x77,
        };
        let mut w1 = wr(abi::WR_RDMA_WRITE_WITH_IMM, &mut sg1);
        w1.send_flags = IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM;
        w1.__bindgen_anon_1.imm_data = 0xdead_beef;
        w1.wr.rdma = ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: 0x9000,
            rkey: 0x55,
        };
        w1.next = &mut w2;
        let mut bad = null_mut();
        // SAFETY: a valid two-element list.
        let (ret, db) = unsafe { q.post(&mut w1, &mut bad) };
        assert_eq!((ret, db), (0, false));
        assert!(bad.is_null());
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 2);
        let a = wqe_at(&q, 0);
        assert_eq!(a.wr_id, w1.wr_id);
        assert_eq!(a.opcode, abi::WR_RDMA_WRITE_WITH_IMM);
        assert_eq!(a.send_flags, abi::SEND_SIGNALED);
        assert_eq!((a.num_sge, a.inline_len, a.ex), (2, 0, 0xdead_beef));
        assert_eq!((a.remote_addr, a.rkey), (0x9000, 0x55));
        assert_eq!(
            sge_at(&q, 0, 1),
            abi::Sge {
                addr: 0x20,
                length: 28,
                lkey: 8
            }
        );
        let b = wqe_at(&q, 1);
        assert_eq!(
            (b.remote_addr, b.rkey, b.compare_add, b.swap),
            (0x4000, 0x77, 5, 6)
        );
        assert_eq!(
            sge_at(&q, 1, 0),
            abi::Sge {
                addr: 0x30,
                length: 8,
                lkey: 9
            }
        );
    }

    #[test]
    fn full_ring_is_enomem_and_doorbell_follows_idle() {
        // 4 slots: 3 outstanding WQEs at most (the max_wr the kernel reports).
        let mut q = sq(IBV_QPT_RC, 4);
        // Counters about to wrap.
        let base = u32::MAX - 1;
        q.ring.producer().store(base, Ordering::Relaxed);
        q.ring.consumer().store(base, Ordering::Relaxed);
        q.ring
            .kernel_flags()
            .store(abi::QUEUE_ENGINE_IDLE, Ordering::Relaxed);
        let mut w = [wr(abi::WR_SEND, &mut []); 4];
        let p: *mut ibv_send_wr = w.as_mut_ptr();
        for i in 0..3 {
            // SAFETY: links inside the array.
            unsafe { (*p.add(i)).next = p.add(i + 1) };
        }
        let mut bad = null_mut();
        // SAFETY: a valid list.
        let (ret, db) = unsafe { q.post(p, &mut bad) };
        assert_eq!((ret, db), (libc::ENOMEM, true));
        assert_eq!(bad, p.wrapping_add(3));
        assert_eq!(
            q.ring.producer().load(Ordering::Relaxed),
            base.wrapping_add(3)
        );
        // The kernel consumes one and is busy: room again, no doorbell.
        q.ring
            .consumer()
            .store(base.wrapping_add(1), Ordering::Release);
        q.ring.kernel_flags().store(0, Ordering::Relaxed);
        // SAFETY: as above.
        let (ret, db) = unsafe { q.post(p.wrapping_add(3), &mut bad) };
        assert_eq!((ret, db), (0, false));
        assert_eq!(
            q.ring.producer().load(Ordering::Relaxed),
            base.wrapping_add(4)
        );
    }

    #[test]
    fn bad_requests_are_einval_and_not_published() {
        let mut q = sq(IBV_QPT_UC, 8);
        let mut sg = [sge(0, 1, 1); 5];
        let mut bad = null_mut();
        let cases = [
            wr(abi::WR_RDMA_READ, &mut []),    // not on UC
            wr(IBV_WR_TSO, &mut []),           // unknown here
            wr(abi::WR_SEND, &mut sg),         // 5 > max_sge 4
            wr(abi::WR_BIND_MW, &mut sg[..1]), // no Sges, and a window
        ];
        for mut w in cases {
            // SAFETY: a valid one-element list.
            let (ret, _) = unsafe { q.post(&mut w, &mut bad) };
            assert_eq!(ret, libc::EINVAL, "opcode {}", w.opcode);
            assert_eq!(bad, &mut w as *mut _);
        }
        let mut w = wr(abi::WR_SEND, &mut []);
        w.num_sge = -1;
        // SAFETY: as above.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, libc::EINVAL);
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 0);
        // Atomics: 8-byte aligned target.
        let mut r = sq(IBV_QPT_RC, 8);
        let mut sg8 = [sge(0, 8, 1)];
        let mut w = wr(abi::WR_ATOMIC_CMP_AND_SWP, &mut sg8);
        w.wr.atomic.remote_addr = 4;
        // SAFETY: as above.
        assert_eq!(unsafe { r.post(&mut w, &mut bad) }.0, libc::EINVAL);
    }

    #[test]
    fn inline_data_is_copied() {
        let mut q = sq(IBV_QPT_RC, 4);
        q.sig_all = true;
        let a = *b"hello ";
        let b = *b"world";
        let mut sg = [
            sge(a.as_ptr() as u64, 6, 0),
            sge(0, 0, 0),
            sge(b.as_ptr() as u64, 5, 0),
        ];
        let mut w = wr(abi::WR_SEND, &mut sg);
        w.send_flags = IBV_SEND_INLINE;
        let mut bad = null_mut();
        // SAFETY: a valid list; the Sges point at live arrays.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, 0);
        let wqe = wqe_at(&q, 0);
        assert_eq!((wqe.num_sge, wqe.inline_len), (0, 11));
        assert_eq!(wqe.send_flags, abi::SEND_INLINE | abi::SEND_SIGNALED);
        // SAFETY: inside slot 0.
        let data = unsafe {
            core::slice::from_raw_parts(q.ring.slot(0).add(size_of::<abi::SendWqe>()), 11)
        };
        assert_eq!(data, b"hello world");
        // Over max_inline.
        let big = [0u8; 65];
        let mut sg = [sge(big.as_ptr() as u64, 65, 0)];
        let mut w = wr(abi::WR_SEND, &mut sg);
        w.send_flags = IBV_SEND_INLINE;
        // SAFETY: as above.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, libc::EINVAL);
    }

    #[test]
    fn ud_and_bind_fields() {
        let mut q = sq(IBV_QPT_UD, 4);
        let ah = crate::ah::test_ah(42);
        let mut w = wr(abi::WR_SEND_WITH_IMM, &mut []);
        w.wr.ud = ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
            ah,
            remote_qpn: 0x123,
            remote_qkey: 0x1111_1111,
        };
        let mut bad = null_mut();
        // SAFETY: a valid list with a live AH.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, 0);
        let wqe = wqe_at(&q, 0);
        assert_eq!(
            (wqe.ah_num, wqe.remote_qpn, wqe.remote_qkey),
            (42, 0x123, 0x1111_1111)
        );
        w.wr.ud.ah = null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, libc::EINVAL);
        // SAFETY: allocated by test_ah.
        unsafe { free_obj(ah) };

        let mut q = sq(IBV_QPT_RC, 4);
        // SAFETY: plain data.
        let mut mw: ibv_mw = unsafe { zeroed() };
        mw.rkey = 0x1ff;
        // SAFETY: plain data.
        let mut mr: ibv_mr = unsafe { zeroed() };
        mr.lkey = 0x33;
        let mut w = wr(abi::WR_BIND_MW, &mut []);
        w.__bindgen_anon_2.bind_mw = ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
            mw: &mut mw,
            rkey: 0x100,
            bind_info: ibv_mw_bind_info {
                mr: &mut mr,
                addr: 0x5000,
                length: 0x600,
                mw_access_flags: IBV_ACCESS_REMOTE_READ,
            },
        };
        // SAFETY: a valid list with live mw/mr.
        assert_eq!(unsafe { q.post(&mut w, &mut bad) }.0, 0);
        let wqe = wqe_at(&q, 0);
        assert_eq!(
            (wqe.bind_mw_rkey, wqe.bind_new_rkey, wqe.bind_mr_lkey),
            (0x1ff, 0x100, 0x33)
        );
        assert_eq!(
            (wqe.bind_access, wqe.bind_addr, wqe.bind_length),
            (IBV_ACCESS_REMOTE_READ, 0x5000, 0x600)
        );
    }

    // The extended send API, called through the ibv_qp_ex the way the
    // ibv_wr_* inlines of verbs.h call it.

    /// Calls the QP's ibv_qp_ex function `$f`, as ibv_wr_$f does.
    macro_rules! wr {
        ($x:expr, $f:ident $(, $a:expr)*) => {
            // SAFETY: $x is a live test QP and the calls follow the API
            // (opcodes and setters between wr_start and wr_complete/abort).
            unsafe { ((*$x).$f.expect(stringify!($f)))($x $(, $a)*) }
        };
    }

    /// A QP as create_qp_ex leaves it with SEND_OPS_FLAGS `ops`, on a test
    /// send ring of `slots` slots (max_sge 4, max_inline 64).
    fn test_qp(qp_type: ibv_qp_type, slots: u32, ops: u64) -> *mut ibv_qp_ex {
        let qp = alloc_obj::<Qp>().expect("calloc");
        // SAFETY: a fresh zeroed allocation, set up as finish_create does.
        unsafe {
            (*qp).vqp.__bindgen_anon_1.qp.qp_type = qp_type;
            (*qp).vqp.__bindgen_anon_1.qp.state = IBV_QPS_RTS;
            Locked::init(addr_of_mut!((*qp).sq), sq(qp_type, slots));
            Locked::init(addr_of_mut!((*qp).rq), RecvQueue::new(Ring::NONE, 0));
            enable_send_ops(qp, ops);
            addr_of_mut!((*qp).vqp.__bindgen_anon_1.qp_ex)
        }
    }

    fn drop_qp(x: *mut ibv_qp_ex) {
        let qp = x.cast::<Qp>();
        // SAFETY: made by test_qp, no longer used.
        unsafe {
            Locked::destroy(addr_of_mut!((*qp).sq));
            Locked::destroy(addr_of_mut!((*qp).rq));
            free_obj(qp);
        }
    }

    /// The QP's send queue, locked (outside a batch).
    fn locked(x: *mut ibv_qp_ex) -> crate::ring::Guard<'static, SendQueue> {
        // SAFETY: a live test QP.
        unsafe { ex_queue(x) }.lock()
    }

    /// The producer as the kernel sees it, read inside a batch (this thread
    /// holds the lock since wr_start).
    fn producer_in_batch(x: *mut ibv_qp_ex) -> u32 {
        // SAFETY: as above.
        unsafe { batch_queue(x) }
            .ring
            .producer()
            .load(Ordering::Acquire)
    }

    fn set_wr(x: *mut ibv_qp_ex, wr_id: u64, flags: u32) {
        // SAFETY: the user's two fields of a live test QP.
        unsafe {
            (*x).wr_id = wr_id;
            (*x).wr_flags = flags;
        }
    }

    /// The whole of slot `i` (header, payload and whatever follows).
    fn slot_bytes(q: &SendQueue, i: u32) -> Vec<u8> {
        // SAFETY: slot i of the test ring (256 bytes).
        unsafe { core::slice::from_raw_parts(q.ring.slot(i), 256) }.to_vec()
    }

    fn inline_at(q: &SendQueue, i: u32, len: usize) -> Vec<u8> {
        // SAFETY: inside slot i of the test ring.
        unsafe { core::slice::from_raw_parts(q.ring.slot(i).add(size_of::<abi::SendWqe>()), len) }
            .to_vec()
    }

    const ALL_RC: u64 = (1 << 10) - 1;

    #[test]
    fn send_ops_flags_per_qp_type() {
        let ud = u64::from(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
        assert_eq!(send_ops_supported(IBV_QPT_UD), ud);
        assert_eq!(send_ops_supported(IBV_QPT_RC), ALL_RC);
        let uc = ALL_RC
            & !u64::from(
                IBV_QP_EX_WITH_RDMA_READ
                    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
                    | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
            );
        assert_eq!(send_ops_supported(IBV_QPT_UC), uc);
        assert_eq!(send_ops_supported(IBV_QPT_XRC_SEND), 0);
        for t in [IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD] {
            let s = send_ops_supported(t);
            for f in [
                IBV_QP_EX_WITH_TSO,
                IBV_QP_EX_WITH_FLUSH,
                IBV_QP_EX_WITH_ATOMIC_WRITE,
            ] {
                assert_eq!(s & u64::from(f), 0);
            }
        }

        // Only the opcodes asked for; libibverbs finds the ibv_qp_ex.
        let x = test_qp(IBV_QPT_UD, 4, u64::from(IBV_QP_EX_WITH_SEND));
        // SAFETY: a live test QP; ibv_qp_to_qp_ex only reads it.
        unsafe {
            assert_eq!(ibv_qp_to_qp_ex(addr_of_mut!((*x).qp_base)), x);
            assert!((*x).wr_send.is_some() && (*x).wr_set_ud_addr.is_some());
            assert!((*x).wr_send_imm.is_none() && (*x).wr_rdma_write.is_none());
            assert!((*x).wr_send_tso.is_none() && (*x).wr_set_xrc_srqn.is_none());
            assert!((*x).wr_start.is_some() && (*x).wr_set_inline_data_list.is_some());
        }
        drop_qp(x);
        let x = test_qp(IBV_QPT_RC, 4, ALL_RC);
        // SAFETY: as above.
        unsafe {
            assert!((*x).wr_atomic_fetch_add.is_some() && (*x).wr_bind_mw.is_some());
            assert!((*x).wr_set_ud_addr.is_none());
        }
        drop_qp(x);
        // A QP without SEND_OPS_FLAGS has no ibv_qp_ex.
        let qp = alloc_obj::<Qp>().expect("calloc");
        // SAFETY: a zeroed Qp, as create_qp leaves its verbs_qp.
        unsafe {
            assert!(ibv_qp_to_qp_ex(addr_of_mut!((*qp).vqp.__bindgen_anon_1.qp)).is_null());
            free_obj(qp);
        }
    }

    #[test]
    fn wr_batch_is_published_at_complete() {
        let x = test_qp(IBV_QPT_RC, 8, ALL_RC);
        let sg = [sge(0x10, 100, 7), sge(0x20, 28, 8)];
        let (a, b) = (*b"abc", *b"defgh");
        let bufs = [
            ibv_data_buf {
                addr: a.as_ptr() as *mut c_void,
                length: 3,
            },
            ibv_data_buf {
                addr: null_mut(),
                length: 0,
            },
            ibv_data_buf {
                addr: b.as_ptr() as *mut c_void,
                length: 5,
            },
        ];
        wr!(x, wr_start);
        set_wr(x, 1, IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM);
        wr!(x, wr_rdma_write_imm, 0x55, 0x9000, 0xdead_beef);
        wr!(x, wr_set_sge_list, 2, sg.as_ptr());
        set_wr(x, 2, IBV_SEND_FENCE);
        wr!(x, wr_atomic_fetch_add, 0x77, 0x4000, 5);
        wr!(x, wr_set_sge, 9, 0x30, 8);
        set_wr(x, 3, IBV_SEND_SOLICITED);
        wr!(x, wr_send_imm, 0x1234);
        wr!(x, wr_set_inline_data_list, 3, bufs.as_ptr());
        set_wr(x, 4, 0);
        wr!(x, wr_local_inv, 0xabc);
        // Nothing is visible before wr_complete.
        assert_eq!(producer_in_batch(x), 0);
        assert_eq!(wr!(x, wr_complete), 0);

        let q = locked(x);
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 4);
        let w = wqe_at(&q, 0);
        assert_eq!((w.wr_id, w.opcode), (1, abi::WR_RDMA_WRITE_WITH_IMM));
        assert_eq!(w.send_flags, abi::SEND_SIGNALED);
        assert_eq!((w.num_sge, w.inline_len, w.ex), (2, 0, 0xdead_beef));
        assert_eq!((w.remote_addr, w.rkey), (0x9000, 0x55));
        assert_eq!(
            sge_at(&q, 0, 1),
            abi::Sge {
                addr: 0x20,
                length: 28,
                lkey: 8
            }
        );
        let w = wqe_at(&q, 1);
        assert_eq!(
            (w.wr_id, w.opcode, w.send_flags),
            (2, abi::WR_ATOMIC_FETCH_AND_ADD, abi::SEND_FENCE)
        );
        assert_eq!(
            (w.remote_addr, w.rkey, w.compare_add, w.num_sge),
            (0x4000, 0x77, 5, 1)
        );
        assert_eq!(
            sge_at(&q, 1, 0),
            abi::Sge {
                addr: 0x30,
                length: 8,
                lkey: 9
            }
        );
        let w = wqe_at(&q, 2);
        assert_eq!(
            (w.wr_id, w.opcode, w.ex),
            (3, abi::WR_SEND_WITH_IMM, 0x1234)
        );
        assert_eq!(w.send_flags, abi::SEND_SOLICITED | abi::SEND_INLINE);
        assert_eq!((w.num_sge, w.inline_len), (0, 8));
        assert_eq!(inline_at(&q, 2, 8), b"abcdefgh");
        let w = wqe_at(&q, 3);
        assert_eq!(
            (w.wr_id, w.opcode, w.ex, w.num_sge),
            (4, abi::WR_LOCAL_INV, 0xabc, 0)
        );
        drop(q);
        drop_qp(x);
    }

    #[test]
    fn post_send_and_wr_api_write_the_same_wqes() {
        let x = test_qp(IBV_QPT_RC, 16, ALL_RC);
        let mut p = sq(IBV_QPT_RC, 16);
        p.sig_all = true;
        locked(x).sig_all = true;
        let text = *b"inline payload";
        let mut sg_w = [sge(0x10, 100, 7), sge(0x20, 28, 8)];
        let mut sg_a = [sge(0x30, 8, 9)];
        let mut sg_i = [
            sge(text.as_ptr() as u64, 6, 0),
            sge(text.as_ptr() as u64 + 6, 8, 0),
        ];
        let mut sg_r = [sge(0x40, 64, 3)];
        // SAFETY: plain data.
        let mut mw: ibv_mw = unsafe { zeroed() };
        mw.rkey = 0x1ff;
        // SAFETY: plain data.
        let mut mr: ibv_mr = unsafe { zeroed() };
        mr.lkey = 0x33;
        let info = ibv_mw_bind_info {
            mr: &mut mr,
            addr: 0x5000,
            length: 0x600,
            mw_access_flags: IBV_ACCESS_REMOTE_WRITE,
        };

        let mut w = [
            wr(abi::WR_RDMA_WRITE_WITH_IMM, &mut sg_w),
            wr(abi::WR_ATOMIC_CMP_AND_SWP, &mut sg_a),
            wr(abi::WR_SEND, &mut sg_i),
            wr(abi::WR_SEND_WITH_INV, &mut []),
            wr(abi::WR_RDMA_READ, &mut sg_r),
            wr(abi::WR_BIND_MW, &mut []),
            wr(abi::WR_ATOMIC_FETCH_AND_ADD, &mut sg_a),
            wr(abi::WR_LOCAL_INV, &mut []),
        ];
        w[0].send_flags = IBV_SEND_SOLICITED;
        w[0].__bindgen_anon_1.imm_data = 0xdead_beef;
        w[0].wr.rdma = ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: 0x9000,
            rkey: 0x55,
        };
        w[1].wr.atomic = ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: 0x4000,
            compare_add: 5,
            swap: 6,
            rkey: 0x77,
        };
        w[2].send_flags = IBV_SEND_INLINE | IBV_SEND_FENCE;
        w[3].__bindgen_anon_1.invalidate_rkey = 0x4444;
        w[4].wr.rdma = ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: 0x8000,
            rkey: 0x66,
        };
        w[5].__bindgen_anon_2.bind_mw = ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
            mw: &mut mw,
            rkey: 0x100,
            bind_info: info,
        };
        w[6].wr.atomic = ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: 0x4008,
            compare_add: 9,
            swap: 0,
            rkey: 0x78,
        };
        w[7].__bindgen_anon_1.invalidate_rkey = 0x5555;
        let head: *mut ibv_send_wr = w.as_mut_ptr();
        for i in 0..w.len() - 1 {
            // SAFETY: links inside the array.
            unsafe { (*head.add(i)).next = head.add(i + 1) };
        }
        let mut bad = null_mut();
        // SAFETY: a valid list with live buffers, mw and mr.
        assert_eq!(unsafe { p.post(head, &mut bad) }, (0, false));

        let id = |i: usize| w[i].wr_id;
        wr!(x, wr_start);
        set_wr(x, id(0), IBV_SEND_SOLICITED);
        wr!(x, wr_rdma_write_imm, 0x55, 0x9000, 0xdead_beef);
        wr!(x, wr_set_sge_list, 2, sg_w.as_ptr());
        set_wr(x, id(1), 0);
        wr!(x, wr_atomic_cmp_swp, 0x77, 0x4000, 5, 6);
        wr!(x, wr_set_sge, 9, 0x30, 8);
        set_wr(x, id(2), IBV_SEND_INLINE | IBV_SEND_FENCE);
        wr!(x, wr_send);
        let bufs = [
            ibv_data_buf {
                addr: text.as_ptr() as *mut c_void,
                length: 6,
            },
            ibv_data_buf {
                // SAFETY: inside `text`.
                addr: unsafe { text.as_ptr().add(6) } as *mut c_void,
                length: 8,
            },
        ];
        wr!(x, wr_set_inline_data_list, 2, bufs.as_ptr());
        set_wr(x, id(3), 0);
        wr!(x, wr_send_inv, 0x4444);
        set_wr(x, id(4), 0);
        wr!(x, wr_rdma_read, 0x66, 0x8000);
        wr!(x, wr_set_sge, 3, 0x40, 64);
        set_wr(x, id(5), 0);
        wr!(x, wr_bind_mw, &mut mw, 0x100, &info);
        set_wr(x, id(6), 0);
        wr!(x, wr_atomic_fetch_add, 0x78, 0x4008, 9);
        wr!(x, wr_set_sge, 9, 0x30, 8);
        set_wr(x, id(7), 0);
        wr!(x, wr_local_inv, 0x5555);
        assert_eq!(wr!(x, wr_complete), 0);

        let q = locked(x);
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 8);
        assert_eq!(p.ring.producer().load(Ordering::Relaxed), 8);
        for i in 0..8 {
            assert_eq!(wqe_at(&q, i), wqe_at(&p, i), "WQE {i}");
            assert_eq!(slot_bytes(&q, i), slot_bytes(&p, i), "slot {i}");
        }
        assert_eq!(inline_at(&q, 2, 14), b"inline payload");
        drop(q);
        drop_qp(x);
    }

    #[test]
    fn wr_abort_publishes_nothing() {
        let x = test_qp(IBV_QPT_UC, 4, send_ops_supported(IBV_QPT_UC));
        wr!(x, wr_start);
        set_wr(x, 7, 0);
        wr!(x, wr_send);
        wr!(x, wr_set_sge, 1, 0x10, 4);
        wr!(x, wr_rdma_write, 2, 0x2000);
        wr!(x, wr_abort);
        // The lock is free again and the producer never moved.
        assert_eq!(locked(x).ring.producer().load(Ordering::Relaxed), 0);
        // The next batch starts at the same slot.
        wr!(x, wr_start);
        set_wr(x, 8, 0);
        wr!(x, wr_send_imm, 3);
        assert_eq!(wr!(x, wr_complete), 0);
        let q = locked(x);
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 1);
        let w = wqe_at(&q, 0);
        assert_eq!(
            (w.wr_id, w.opcode, w.ex, w.num_sge),
            (8, abi::WR_SEND_WITH_IMM, 3, 0)
        );
        drop(q);
        // An empty batch publishes nothing and succeeds.
        wr!(x, wr_start);
        assert_eq!(wr!(x, wr_complete), 0);
        assert_eq!(locked(x).ring.producer().load(Ordering::Relaxed), 1);
        drop_qp(x);
    }

    #[test]
    fn wr_full_ring_is_enomem_and_nothing_published() {
        // 4 slots: 3 outstanding WQEs at most.
        let x = test_qp(IBV_QPT_RC, 4, ALL_RC);
        {
            let q = locked(x);
            q.ring.producer().store(u32::MAX, Ordering::Relaxed);
            q.ring.consumer().store(u32::MAX, Ordering::Relaxed);
        }
        wr!(x, wr_start);
        for i in 0..4 {
            set_wr(x, i, 0);
            wr!(x, wr_send);
            wr!(x, wr_set_sge, 1, 0x10, 4);
        }
        // Ignored after the error.
        wr!(x, wr_set_inline_data, null_mut(), 0);
        assert_eq!(wr!(x, wr_complete), libc::ENOMEM);
        assert_eq!(locked(x).ring.producer().load(Ordering::Relaxed), u32::MAX);
        // Three fit, across the counter's wrap.
        wr!(x, wr_start);
        for i in 0..3 {
            set_wr(x, 10 + i, 0);
            wr!(x, wr_send);
        }
        assert_eq!(wr!(x, wr_complete), 0);
        let q = locked(x);
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 2);
        let ids = [u32::MAX, 0, 1].map(|i| wqe_at(&q, i).wr_id);
        assert_eq!(ids, [10, 11, 12]);
        drop(q);
        drop_qp(x);
    }

    #[test]
    fn wr_complete_doorbell_follows_idle() {
        let mut q = sq(IBV_QPT_RC, 4);
        q.ring
            .kernel_flags()
            .store(abi::QUEUE_ENGINE_IDLE, Ordering::Relaxed);
        q.begin();
        q.add(abi::WR_SEND, 1, 0, |_| Ok(()));
        assert_eq!(q.complete(), (0, true));
        q.begin();
        assert_eq!(q.complete(), (0, false));
        q.ring.kernel_flags().store(0, Ordering::Relaxed);
        q.begin();
        q.add(abi::WR_SEND, 2, 0, |_| Ok(()));
        assert_eq!(q.complete(), (0, false));
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 2);
        // The kernel consumed both; the engine went idle.
        q.ring.consumer().store(2, Ordering::Release);
        q.ring
            .kernel_flags()
            .store(abi::QUEUE_ENGINE_IDLE, Ordering::Relaxed);
        q.begin();
        q.add(abi::WR_SEND, 3, 0, |_| Ok(()));
        q.add(abi::WR_RDMA_READ, 4, 0, |_| Ok(()));
        assert_eq!(q.complete(), (0, true));
        q.begin();
        q.add(abi::WR_SEND, 5, 0, |_| Ok(()));
        // An error: nothing published, no doorbell.
        q.add(IBV_WR_TSO, 6, 0, |_| Ok(()));
        assert_eq!(q.complete(), (libc::EINVAL, false));
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 4);
    }

    #[test]
    fn wr_inline_data() {
        let x = test_qp(IBV_QPT_RC, 8, ALL_RC);
        let data = *b"0123456789";
        wr!(x, wr_start);
        // The inline flag follows the setter, not wr_flags.
        set_wr(x, 1, IBV_SEND_INLINE);
        wr!(x, wr_rdma_write, 5, 0x1000);
        wr!(x, wr_set_inline_data, data.as_ptr() as *mut c_void, 10);
        set_wr(x, 2, IBV_SEND_INLINE);
        wr!(x, wr_send);
        wr!(x, wr_set_sge, 4, 0x10, 16);
        set_wr(x, 3, 0);
        wr!(x, wr_send);
        wr!(x, wr_set_inline_data, data.as_ptr() as *mut c_void, 0);
        assert_eq!(wr!(x, wr_complete), 0);
        {
            let q = locked(x);
            let w = wqe_at(&q, 0);
            assert_eq!(
                (w.send_flags, w.inline_len, w.num_sge),
                (abi::SEND_INLINE, 10, 0)
            );
            assert_eq!((w.remote_addr, w.rkey), (0x1000, 5));
            assert_eq!(inline_at(&q, 0, 10), b"0123456789");
            let w = wqe_at(&q, 1);
            assert_eq!((w.send_flags, w.inline_len, w.num_sge), (0, 0, 1));
            let w = wqe_at(&q, 2);
            assert_eq!(
                (w.send_flags, w.inline_len, w.num_sge),
                (abi::SEND_INLINE, 0, 0)
            );
        }
        // Over max_inline (64), as one buffer or as a list.
        let big = [7u8; 65];
        wr!(x, wr_start);
        wr!(x, wr_send);
        wr!(x, wr_set_inline_data, big.as_ptr() as *mut c_void, 65);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        let bufs = [
            ibv_data_buf {
                addr: big.as_ptr() as *mut c_void,
                length: 40,
            },
            ibv_data_buf {
                addr: big.as_ptr() as *mut c_void,
                length: 25,
            },
        ];
        wr!(x, wr_start);
        wr!(x, wr_send);
        wr!(x, wr_set_inline_data_list, 2, bufs.as_ptr());
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        // Exactly max_inline fits.
        wr!(x, wr_start);
        wr!(x, wr_send);
        wr!(x, wr_set_inline_data_list, 1, bufs.as_ptr());
        wr!(x, wr_set_inline_data, big.as_ptr() as *mut c_void, 64);
        assert_eq!(wr!(x, wr_complete), 0);
        // Inline data on an opcode with no payload to send.
        wr!(x, wr_start);
        wr!(x, wr_atomic_fetch_add, 1, 0x1000, 1);
        wr!(x, wr_set_inline_data, big.as_ptr() as *mut c_void, 8);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        // A setter with no WQE to set.
        wr!(x, wr_start);
        wr!(x, wr_set_inline_data, big.as_ptr() as *mut c_void, 1);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        let q = locked(x);
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 4);
        assert_eq!(wqe_at(&q, 3).inline_len, 64);
        drop(q);
        drop_qp(x);
    }

    #[test]
    fn wr_ud_address() {
        let x = test_qp(IBV_QPT_UD, 8, send_ops_supported(IBV_QPT_UD));
        let ah = crate::ah::test_ah(42);
        wr!(x, wr_start);
        set_wr(x, 1, 0);
        wr!(x, wr_send_imm, 0x99);
        wr!(x, wr_set_ud_addr, ah, 0x123, 0x1111_1111);
        wr!(x, wr_set_sge, 5, 0x10, 32);
        assert_eq!(wr!(x, wr_complete), 0);
        // The same request through ibv_post_send.
        let mut p = sq(IBV_QPT_UD, 8);
        let mut sg = [sge(0x10, 32, 5)];
        let mut w = wr(abi::WR_SEND_WITH_IMM, &mut sg);
        w.wr_id = 1;
        w.__bindgen_anon_1.imm_data = 0x99;
        w.wr.ud = ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
            ah,
            remote_qpn: 0x123,
            remote_qkey: 0x1111_1111,
        };
        let mut bad = null_mut();
        // SAFETY: a valid list with a live AH.
        assert_eq!(unsafe { p.post(&mut w, &mut bad) }.0, 0);
        {
            let q = locked(x);
            let w = wqe_at(&q, 0);
            assert_eq!(
                (w.ah_num, w.remote_qpn, w.remote_qkey),
                (42, 0x123, 0x1111_1111)
            );
            assert_eq!(slot_bytes(&q, 0), slot_bytes(&p, 0));
        }
        // No destination, or a NULL AH: EINVAL and nothing published.
        wr!(x, wr_start);
        wr!(x, wr_send);
        wr!(x, wr_set_ud_addr, ah, 1, 1);
        wr!(x, wr_send);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        wr!(x, wr_start);
        wr!(x, wr_send);
        wr!(x, wr_set_ud_addr, null_mut(), 1, 1);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        assert_eq!(locked(x).ring.producer().load(Ordering::Relaxed), 1);
        // An opcode UD does not take (only reachable through the SendQueue).
        {
            let mut q = locked(x);
            q.begin();
            q.add(abi::WR_RDMA_WRITE, 1, 0, |_| Ok(()));
            assert_eq!(q.complete(), (libc::EINVAL, false));
        }
        // SAFETY: allocated by test_ah.
        unsafe { free_obj(ah) };
        drop_qp(x);
    }

    #[test]
    fn wr_sge_list() {
        let x = test_qp(IBV_QPT_RC, 8, ALL_RC);
        let sg = [
            sge(0x100, 1, 1),
            sge(0x200, 2, 2),
            sge(0x300, 3, 3),
            sge(0x400, 4, 4),
            sge(0x500, 5, 5),
        ];
        wr!(x, wr_start);
        set_wr(x, 1, 0);
        wr!(x, wr_send);
        wr!(x, wr_set_sge_list, 4, sg.as_ptr());
        // A later setter replaces the payload.
        set_wr(x, 2, 0);
        wr!(x, wr_rdma_write, 9, 0x7000);
        wr!(x, wr_set_sge, 1, 0x10, 4);
        wr!(x, wr_set_sge_list, 2, sg[2..].as_ptr());
        set_wr(x, 3, 0);
        wr!(x, wr_send);
        wr!(x, wr_set_sge_list, 0, ptr::null());
        assert_eq!(wr!(x, wr_complete), 0);
        {
            let q = locked(x);
            assert_eq!(wqe_at(&q, 0).num_sge, 4);
            for (n, s) in sg[..4].iter().enumerate() {
                assert_eq!(
                    sge_at(&q, 0, n),
                    abi::Sge {
                        addr: s.addr,
                        length: s.length,
                        lkey: s.lkey
                    }
                );
            }
            assert_eq!(wqe_at(&q, 1).num_sge, 2);
            assert_eq!(sge_at(&q, 1, 0).addr, 0x300);
            assert_eq!(sge_at(&q, 1, 1).addr, 0x400);
            assert_eq!(wqe_at(&q, 2).num_sge, 0);
        }
        // Over max_sge (4).
        wr!(x, wr_start);
        wr!(x, wr_send);
        wr!(x, wr_set_sge_list, 5, sg.as_ptr());
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        // Atomics want an 8-byte buffer and an aligned target; BIND_MW no Sges.
        wr!(x, wr_start);
        wr!(x, wr_atomic_cmp_swp, 1, 0x1000, 1, 2);
        wr!(x, wr_set_sge, 1, 0x10, 4);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        wr!(x, wr_start);
        wr!(x, wr_atomic_cmp_swp, 1, 0x1004, 1, 2);
        wr!(x, wr_set_sge, 1, 0x10, 8);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        // SAFETY: plain data.
        let mut mw: ibv_mw = unsafe { zeroed() };
        // SAFETY: plain data.
        let info: ibv_mw_bind_info = unsafe { zeroed() };
        wr!(x, wr_start);
        wr!(x, wr_bind_mw, &mut mw, 1, &info);
        wr!(x, wr_set_sge, 1, 0x10, 8);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        wr!(x, wr_start);
        wr!(x, wr_bind_mw, null_mut(), 1, &info);
        assert_eq!(wr!(x, wr_complete), libc::EINVAL);
        assert_eq!(locked(x).ring.producer().load(Ordering::Relaxed), 3);
        drop_qp(x);
    }
}
