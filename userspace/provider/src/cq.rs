//! Completion queues: the CQE ring the kernel produces into and the
//! provider consumes from, polled without a syscall (ibv_poll_cq and the
//! extended ibv_start_poll/ibv_next_poll/ibv_end_poll interface), and armed
//! by a store into the ring header.

use core::ffi::{c_int, c_uint};
use core::mem::{offset_of, size_of, zeroed};
use core::ptr::{self, addr_of, addr_of_mut};
use core::sync::atomic::{fence, AtomicPtr, Ordering};

use softrnic_abi as abi;

use crate::ffi::*;
use crate::ring::{Locked, Ring};
use crate::{alloc_obj, cmd_fd, fail, free_obj, set_errno};

#[repr(C)]
pub struct Cq {
    /// libibverbs's part (ibv_cq / ibv_cq_ex); first, so the pointers
    /// libibverbs hands back are pointers to the Cq.
    vcq: verbs_cq,
    q: Locked<CqState>,
    /// The header of `q`'s ring (null while it has none), for a poll that
    /// finds the CQ empty without taking the lock.  Every ring it has
    /// pointed to stays mapped until the CQ is destroyed (`retired`).
    head: AtomicPtr<u8>,
}

const _: () = assert!(offset_of!(Cq, vcq) == 0);

struct CqState {
    ring: Ring,
    /// Extended poll: the completion start_poll/next_poll made current,
    /// copied out of the ring.
    cur: abi::Cqe,
    /// Whether `cur` is still in the ring (the consumer is not past it).
    holding: bool,
    /// The rings resize_cq replaced: a lock-free empty poll may still be
    /// reading one of their headers, so they are unmapped only with the CQ.
    retired: Vec<Ring>,
}

/// Why a CQ cannot be polled.
struct CqError;

impl CqState {
    /// The next completion, left in the ring.
    fn peek(&self) -> Result<Option<abi::Cqe>, CqError> {
        let ring = &self.ring;
        if !ring.is_mapped()
            || ring.kernel_flags().load(Ordering::Acquire) & abi::QUEUE_OVERFLOWED != 0
        {
            return Err(CqError);
        }
        let cons = ring.consumer().load(Ordering::Relaxed);
        // Acquire: the CQE's contents are visible once producer covers it.
        if cons == ring.producer().load(Ordering::Acquire) {
            return Ok(None);
        }
        // SAFETY: the slot is inside the mapping and the kernel does not
        // rewrite it until the consumer moves past it.
        Ok(Some(unsafe {
            ptr::read_volatile(ring.slot(cons).cast::<abi::Cqe>())
        }))
    }

    /// Releases the slot at the consumer to the kernel.
    fn advance(&mut self) {
        let c = self.ring.consumer();
        // Release: the CQE was read before the kernel may reuse its slot.
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
        self.holding = false;
    }

    /// Drop the completions of QP `qpn` that are still waiting (the QP was
    /// reset: IBTA lets them go, and rdma-core's tests expect them gone).
    /// The others move towards the producer, which the kernel owns, and the
    /// consumer moves past the gap.
    fn clean(&mut self, qpn: u32) {
        let ring = &self.ring;
        if !ring.is_mapped() {
            return;
        }
        let cons = ring.consumer().load(Ordering::Relaxed);
        let prod = ring.producer().load(Ordering::Acquire);
        if !ring.span_ok(prod, cons) {
            return;
        }
        let mut dst = prod;
        let mut i = prod;
        while i != cons {
            i = i.wrapping_sub(1);
            // SAFETY: slots between consumer and producer are ours to read
            // and rewrite until the consumer moves past them.
            let cqe = unsafe { ptr::read_volatile(ring.slot(i).cast::<abi::Cqe>()) };
            if cqe.qp_num == qpn {
                continue;
            }
            dst = dst.wrapping_sub(1);
            if dst != i {
                // SAFETY: as above; `dst` lies between `i` and the producer.
                unsafe { ptr::write_volatile(ring.slot(dst).cast::<abi::Cqe>(), cqe) };
            }
        }
        // Release: the moved CQEs are written before the kernel may reuse
        // the slots the consumer passes.
        ring.consumer().store(dst, Ordering::Release);
        self.holding = false;
    }

    /// ibv_poll_cq: up to `ne` completions into `wc`.
    ///
    /// # Safety
    /// `wc` has room for `ne` entries.
    unsafe fn poll(&mut self, ne: c_int, wc: *mut ibv_wc) -> c_int {
        let mut n = 0;
        while n < ne {
            match self.peek() {
                Ok(Some(cqe)) => {
                    // SAFETY: n < ne, inside the caller's array.
                    unsafe { wc.add(n as usize).write(to_wc(&cqe)) };
                    self.advance();
                    n += 1;
                }
                Ok(None) => break,
                // An overflowed CQ is in error (IBTA): a negative return.
                // Completions already consumed are returned first; the
                // next call reports the error.
                Err(CqError) if n > 0 => break,
                Err(CqError) => {
                    set_errno(libc::EIO);
                    return -1;
                }
            }
        }
        n
    }
}

/// A QP of ours went to RESET: drop its waiting completions from `cq`.
///
/// # Safety
/// `cq` is NULL or one of our live CQs.
pub unsafe fn clean_qp(cq: *mut ibv_cq, qpn: u32) {
    if cq.is_null() {
        return;
    }
    // SAFETY: one of our CQs (the ibv_cq is at offset 0 of Cq).
    let q = unsafe { &*addr_of!((*cq.cast::<Cq>()).q) };
    q.lock().clean(qpn);
}

fn to_wc(c: &abi::Cqe) -> ibv_wc {
    // SAFETY: ibv_wc is plain data; all-zero is valid.
    let mut wc: ibv_wc = unsafe { zeroed() };
    wc.wr_id = c.wr_id;
    wc.status = c.status.into();
    wc.opcode = c.opcode.into();
    wc.vendor_err = c.vendor_err;
    wc.byte_len = c.byte_len;
    // imm_data (network order, as written) and invalidated_rkey share it.
    wc.__bindgen_anon_1.imm_data = c.ex;
    wc.qp_num = c.qp_num;
    wc.src_qp = c.src_qp;
    wc.wc_flags = c.wc_flags;
    wc.pkey_index = c.pkey_index;
    wc.slid = c.slid;
    wc.sl = c.sl;
    wc.dlid_path_bits = c.dlid_path_bits;
    wc
}

/// CREATE_CQ and RESIZE_CQ responses with softrnic's driver data appended:
/// ib_uverbs hands the kernel driver the bytes after the core response.
#[repr(C)]
struct CreateCqResp {
    ibv: ib_uverbs_create_cq_resp,
    drv: abi::CreateCqResp,
}

#[repr(C)]
struct CreateCqExResp {
    ibv: ib_uverbs_ex_create_cq_resp,
    drv: abi::CreateCqResp,
}

#[repr(C)]
struct ResizeCqResp {
    ibv: ib_uverbs_resize_cq_resp,
    drv: abi::CreateCqResp,
}

// The driver data must start right where the core response ends.
const _: () = assert!(offset_of!(CreateCqResp, drv) == size_of::<ib_uverbs_create_cq_resp>());
const _: () = assert!(offset_of!(CreateCqExResp, drv) == size_of::<ib_uverbs_ex_create_cq_resp>());
const _: () = assert!(offset_of!(ResizeCqResp, drv) == size_of::<ib_uverbs_resize_cq_resp>());

/// The Locked state of the CQ behind `cq`.
///
/// # Safety
/// `cq` is a CQ this provider created and has not destroyed.
unsafe fn state<'a>(cq: *mut ibv_cq) -> &'a Locked<CqState> {
    // SAFETY: ibv_cq is at offset 0 of Cq; only the `q` field is borrowed
    // (libibverbs keeps writing to its own part).
    unsafe { &*addr_of!((*cq.cast::<Cq>()).q) }
}

/// Maps the new CQ's ring and finishes it, or undoes the create.
///
/// # Safety
/// `cq` was just created in the kernel through `ctx` and is otherwise
/// unused; `info` is the kernel's response.
unsafe fn finish_create(ctx: *mut ibv_context, cq: *mut Cq, info: &abi::QueueInfo) -> bool {
    // SAFETY: ctx is the live context.
    match unsafe { Ring::map(cmd_fd(ctx), info, size_of::<abi::Cqe>()) } {
        Ok(ring) => {
            let head = ring.header_addr();
            let st = CqState {
                ring,
                cur: abi::Cqe::default(),
                holding: false,
                retired: Vec::new(),
            };
            // SAFETY: cq is ours and its `q` is uninitialised memory.
            unsafe { Locked::init(addr_of_mut!((*cq).q), st) };
            // SAFETY: as above; nobody polls it yet.
            unsafe { (*cq).head.store(head, Ordering::Release) };
            true
        }
        Err(e) => {
            // SAFETY: the CQ exists in the kernel and nobody else knows it.
            unsafe {
                ibv_cmd_destroy_cq(addr_of_mut!((*cq).vcq.__bindgen_anon_1.cq));
                free_obj(cq);
            }
            set_errno(e);
            false
        }
    }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let Some(cq) = alloc_obj::<Cq>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_create_cq, CreateCqResp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: cq is a fresh zeroed allocation; the buffers are sized.
    let ret = unsafe {
        ibv_cmd_create_cq(
            ctx,
            cqe,
            channel,
            comp_vector,
            addr_of_mut!((*cq).vcq.__bindgen_anon_1.cq),
            &mut cmd,
            size_of::<ibv_create_cq>(),
            &mut resp.ibv,
            size_of::<CreateCqResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows cq.
        unsafe { free_obj(cq) };
        return fail(ret);
    }
    // SAFETY: the CQ was just created.
    if !unsafe { finish_create(ctx, cq, &resp.drv.cq) } {
        return ptr::null_mut();
    }
    cq.cast()
}

const SUP_WC_FLAGS: u64 = (IBV_WC_EX_WITH_BYTE_LEN
    | IBV_WC_EX_WITH_IMM
    | IBV_WC_EX_WITH_QP_NUM
    | IBV_WC_EX_WITH_SRC_QP
    | IBV_WC_EX_WITH_SLID
    | IBV_WC_EX_WITH_SL
    | IBV_WC_EX_WITH_DLID_PATH_BITS) as u64;

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    // SAFETY: libibverbs passes a valid attribute structure.
    let a = unsafe { &*attr };
    // Completion timestamps, flow tags and ignoring overruns are not
    // supported; a single-threaded hint needs nothing, nor a parent
    // domain (its allocators go unused: the ring is the kernel's).
    let flags = if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        a.flags
    } else {
        0
    };
    if a.wc_flags & !SUP_WC_FLAGS != 0
        || a.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0
        || flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        return fail(libc::EOPNOTSUPP);
    }
    // SAFETY: a PD the consumer passes is a live PD of this context's.
    if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0
        && (a.parent_domain.is_null() || !unsafe { crate::pd::is_parent_domain(a.parent_domain) })
    {
        return fail(libc::EINVAL);
    }
    let Some(cq) = alloc_obj::<Cq>() else {
        return fail(libc::ENOMEM);
    };
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_create_cq_ex, CreateCqExResp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: cq is a fresh zeroed allocation; the buffers are sized.
    let ret = unsafe {
        ibv_cmd_create_cq_ex(
            ctx,
            attr,
            addr_of_mut!((*cq).vcq),
            &mut cmd,
            size_of::<ibv_create_cq_ex>(),
            &mut resp.ibv,
            size_of::<CreateCqExResp>(),
            0,
        )
    };
    if ret != 0 {
        // SAFETY: nobody else knows cq.
        unsafe { free_obj(cq) };
        return fail(ret);
    }
    // SAFETY: the CQ was just created.
    if !unsafe { finish_create(ctx, cq, &resp.drv.cq) } {
        return ptr::null_mut();
    }
    // SAFETY: cq is initialised and still ours alone.
    let ex = unsafe { &mut (*cq).vcq.__bindgen_anon_1.cq_ex };
    ex.start_poll = Some(start_poll);
    ex.next_poll = Some(next_poll);
    ex.end_poll = Some(end_poll);
    ex.read_opcode = Some(read_opcode);
    ex.read_vendor_err = Some(read_vendor_err);
    ex.read_wc_flags = Some(read_wc_flags);
    ex.read_byte_len = Some(read_byte_len);
    ex.read_imm_data = Some(read_imm_data);
    ex.read_qp_num = Some(read_qp_num);
    ex.read_src_qp = Some(read_src_qp);
    ex.read_slid = Some(read_slid);
    ex.read_sl = Some(read_sl);
    ex.read_dlid_path_bits = Some(read_dlid_path_bits);
    ex
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn destroy_cq(ibcq: *mut ibv_cq) -> c_int {
    // SAFETY: ibcq is one of our CQs.
    let ret = unsafe { ibv_cmd_destroy_cq(ibcq) };
    if ret != 0 {
        return ret;
    }
    let cq = ibcq.cast::<Cq>();
    // SAFETY: destroyed in the kernel; libibverbs no longer uses it. Dropping
    // the state unmaps the ring.
    unsafe {
        Locked::destroy(addr_of_mut!((*cq).q));
        free_obj(cq);
    }
    0
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn resize_cq(ibcq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: ibcq is one of our CQs.
    let mut st = unsafe { state(ibcq) }.lock();
    // Room to keep the old ring mapped, before the kernel lets it go.
    if st.retired.try_reserve(1).is_err() {
        return libc::ENOMEM;
    }
    // SAFETY: zeroed command/response structures are valid inputs.
    let (mut cmd, mut resp): (ibv_resize_cq, ResizeCqResp) = unsafe { (zeroed(), zeroed()) };
    // SAFETY: ibcq is live; the buffers are sized.  The lock keeps pollers
    // off the ring while the kernel moves the outstanding CQEs.
    let ret = unsafe {
        ibv_cmd_resize_cq(
            ibcq,
            cqe,
            &mut cmd,
            size_of::<ibv_resize_cq>(),
            &mut resp.ibv,
            size_of::<ResizeCqResp>(),
        )
    };
    if ret != 0 {
        return ret;
    }
    // The kernel has switched to the new ring (its header's counters
    // continue where the old ones were); the old one is stale either way,
    // but stays mapped (`retired`).  A lock-free poll that read the old
    // header saw it empty before the switch, which is an answer it could
    // have had then.
    // SAFETY: ibcq's context is live.
    let (ring, ret) =
        match unsafe { Ring::map(cmd_fd((*ibcq).context), &resp.drv.cq, size_of::<abi::Cqe>()) } {
            Ok(ring) => (ring, 0),
            Err(e) => (Ring::NONE, e), // polls now fail
        };
    // SAFETY: ibcq is one of our CQs.
    unsafe {
        (*ibcq.cast::<Cq>())
            .head
            .store(ring.header_addr(), Ordering::Release)
    };
    let old = core::mem::replace(&mut st.ring, ring);
    st.retired.push(old); // reserved above
    ret
}

/// Whether the CQ holds no completion and no error, seen without its lock:
/// the common answer of a busy-polling application, at the cost of three
/// loads instead of a lock round trip.
///
/// # Safety
/// `ibcq` is one of our live CQs.
unsafe fn looks_empty(ibcq: *mut ibv_cq) -> bool {
    // SAFETY: per the caller's promise.
    let head = unsafe { (*ibcq.cast::<Cq>()).head.load(Ordering::Acquire) };
    // SAFETY: a ring `head` pointed to stays mapped until destroy_cq.
    !head.is_null() && unsafe { Ring::idle_at(head, abi::QUEUE_OVERFLOWED) }
}

/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn poll_cq(ibcq: *mut ibv_cq, ne: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: ibcq is one of our CQs; wc has room for ne entries.
    unsafe {
        if looks_empty(ibcq) {
            return 0;
        }
        state(ibcq).lock().poll(ne, wc)
    }
}

/// Arming is a store into the ring header, no syscall: the kernel raises
/// one event per new `arm_seq` once a matching CQE is written.
///
/// # Safety
/// Called only by libibverbs, with the pointers its provider interface
/// promises.
pub unsafe extern "C" fn req_notify_cq(ibcq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: ibcq is one of our CQs.  The lock pairs each arm_flags with
    // its arm_seq when threads arm concurrently.
    let st = unsafe { state(ibcq) }.lock();
    let ring = &st.ring;
    if !ring.is_mapped() {
        return libc::EINVAL;
    }
    let flags = if solicited_only != 0 {
        abi::ARM_SOLICITED
    } else {
        0
    };
    ring.arm_flags().store(flags, Ordering::Relaxed);
    // Release: arm_flags before the arm_seq that publishes it.
    ring.arm_seq().fetch_add(1, Ordering::Release);
    // The caller polls again after arming; the kernel stores producer, then
    // loads arm_seq.  A full fence on both sides means at least one of them
    // sees the other's store, so no completion is missed by both.
    fence(Ordering::SeqCst);
    0
}

/// The kernel counts events itself; nothing to do per event.
///
/// # Safety
/// Called only by libibverbs.
pub unsafe extern "C" fn cq_event(_cq: *mut ibv_cq) {}

// ---------------------------------------------------------------------------
// Extended poll (ibv_cq_ex): start_poll takes the CQ's lock and end_poll
// releases it; the read_* functions read the current completion in between.

/// # Safety
/// `c` is a CQ created by create_cq_ex.
unsafe fn ex_state<'a>(c: *mut ibv_cq_ex) -> &'a Locked<CqState> {
    // SAFETY: ibv_cq_ex shares offset 0 with ibv_cq in verbs_cq.
    unsafe { state(c.cast()) }
}

/// Makes the next completion current, or says why there is none.
///
/// # Safety
/// The caller holds the CQ's lock; `c` is the CQ.
unsafe fn load_current(c: *mut ibv_cq_ex, st: &mut CqState) -> c_int {
    match st.peek() {
        Ok(Some(cqe)) => {
            st.cur = cqe;
            st.holding = true;
            // SAFETY: c is live; these two fields are the provider's to set.
            unsafe {
                (*c).status = cqe.status.into();
                (*c).wr_id = cqe.wr_id;
            }
            0
        }
        Ok(None) => libc::ENOENT,
        Err(CqError) => libc::EIO,
    }
}

unsafe extern "C" fn start_poll(c: *mut ibv_cq_ex, _attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: c is one of our extended CQs (ibv_cq_ex is at offset 0).
    if unsafe { looks_empty(c.cast()) } {
        return libc::ENOENT;
    }
    // SAFETY: as above.
    let q = unsafe { ex_state(c) };
    // SAFETY: released by end_poll, or below when nothing is returned (the
    // caller does not call end_poll then).
    unsafe { q.raw_lock() };
    // SAFETY: this thread holds the lock.
    let ret = unsafe { load_current(c, q.locked_data()) };
    if ret != 0 {
        // SAFETY: taken above.
        unsafe { q.raw_unlock() };
    }
    ret
}

unsafe extern "C" fn next_poll(c: *mut ibv_cq_ex) -> c_int {
    // SAFETY: c is one of our extended CQs, locked since start_poll.
    let st = unsafe { ex_state(c).locked_data() };
    if st.holding {
        st.advance();
    }
    // SAFETY: as above.
    unsafe { load_current(c, st) }
}

unsafe extern "C" fn end_poll(c: *mut ibv_cq_ex) {
    // SAFETY: c is one of our extended CQs, locked since start_poll.
    unsafe {
        let q = ex_state(c);
        let st = q.locked_data();
        if st.holding {
            st.advance();
        }
        q.raw_unlock();
    }
}

/// The current completion.
///
/// # Safety
/// Between a successful start_poll and end_poll on `c`, in that thread.
unsafe fn cur<'a>(c: *mut ibv_cq_ex) -> &'a abi::Cqe {
    // SAFETY: per the caller's promise, this thread holds the lock.
    unsafe { &ex_state(c).locked_data().cur }
}

unsafe extern "C" fn read_opcode(c: *mut ibv_cq_ex) -> ibv_wc_opcode {
    // SAFETY: libibverbs's callers call read_* only while polling.
    unsafe { cur(c) }.opcode.into()
}

unsafe extern "C" fn read_vendor_err(c: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.vendor_err
}

unsafe extern "C" fn read_byte_len(c: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.byte_len
}

unsafe extern "C" fn read_imm_data(c: *mut ibv_cq_ex) -> __be32 {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.ex
}

unsafe extern "C" fn read_qp_num(c: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.qp_num
}

unsafe extern "C" fn read_src_qp(c: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.src_qp
}

unsafe extern "C" fn read_wc_flags(c: *mut ibv_cq_ex) -> c_uint {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.wc_flags
}

unsafe extern "C" fn read_slid(c: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.slid.into()
}

unsafe extern "C" fn read_sl(c: *mut ibv_cq_ex) -> u8 {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.sl
}

unsafe extern "C" fn read_dlid_path_bits(c: *mut ibv_cq_ex) -> u8 {
    // SAFETY: as in read_opcode.
    unsafe { cur(c) }.dlid_path_bits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::test_ring;

    /// A CQ as create_cq leaves it, on a test ring.
    fn test_cq(slots: u32) -> *mut Cq {
        let cq = alloc_obj::<Cq>().expect("calloc");
        let ring = test_ring(slots, abi::CQE_BYTES, size_of::<abi::Cqe>());
        let head = ring.header_addr();
        let st = CqState {
            ring,
            cur: abi::Cqe::default(),
            holding: false,
            retired: Vec::new(),
        };
        // SAFETY: fresh allocation.
        unsafe {
            Locked::init(addr_of_mut!((*cq).q), st);
            (*cq).head.store(head, Ordering::Release);
        }
        cq
    }

    fn drop_cq(cq: *mut Cq) {
        // SAFETY: made by test_cq, no longer used.
        unsafe {
            Locked::destroy(addr_of_mut!((*cq).q));
            free_obj(cq);
        }
    }

    /// The kernel's side: writes a CQE and publishes it.
    fn produce(cq: *mut Cq, cqe: abi::Cqe) {
        // SAFETY: cq is a live test CQ.
        let st = unsafe { state(cq.cast()) }.lock();
        let p = st.ring.producer().load(Ordering::Relaxed);
        // SAFETY: a free slot of the test ring.
        unsafe { ptr::write(st.ring.slot(p).cast::<abi::Cqe>(), cqe) };
        st.ring
            .producer()
            .store(p.wrapping_add(1), Ordering::Release);
    }

    fn cqe(wr_id: u64) -> abi::Cqe {
        abi::Cqe {
            wr_id,
            status: abi::WC_SUCCESS,
            opcode: abi::WC_RECV,
            wc_flags: abi::WC_WITH_IMM,
            byte_len: 77,
            ex: 0x0102_0304,
            qp_num: 9,
            src_qp: 10,
            pkey_index: 1,
            slid: 2,
            sl: 3,
            dlid_path_bits: 4,
            ..Default::default()
        }
    }

    #[test]
    fn reset_cleans_only_that_qps_completions() {
        let cq = test_cq(8);
        let ibcq: *mut ibv_cq = cq.cast();
        for (i, qpn) in [5u32, 9, 5, 9, 9, 5].into_iter().enumerate() {
            produce(
                cq,
                abi::Cqe {
                    qp_num: qpn,
                    ..cqe(i as u64)
                },
            );
        }
        // SAFETY: a live CQ of ours.
        unsafe { clean_qp(ibcq, 5) };
        // SAFETY: plain data.
        let mut wc: [ibv_wc; 8] = unsafe { zeroed() };
        // SAFETY: a live CQ; wc has room.
        assert_eq!(unsafe { poll_cq(ibcq, 8, wc.as_mut_ptr()) }, 3);
        let got: Vec<(u64, u32)> = wc[..3].iter().map(|w| (w.wr_id, w.qp_num)).collect();
        assert_eq!(got, [(1, 9), (3, 9), (4, 9)]);
        // The producer (the kernel's) never moved; new CQEs follow.
        produce(cq, cqe(6));
        // SAFETY: as above.
        assert_eq!(unsafe { poll_cq(ibcq, 8, wc.as_mut_ptr()) }, 1);
        assert_eq!(wc[0].wr_id, 6);
        drop_cq(cq);
    }

    #[test]
    fn poll_converts_and_consumes() {
        let cq = test_cq(4);
        let ibcq: *mut ibv_cq = cq.cast();
        // SAFETY: plain data.
        let mut wc: [ibv_wc; 4] = unsafe { zeroed() };
        // SAFETY: a live CQ; wc has room.
        assert_eq!(unsafe { poll_cq(ibcq, 4, wc.as_mut_ptr()) }, 0);
        for i in 0..3 {
            produce(cq, cqe(i));
        }
        // SAFETY: as above.
        assert_eq!(unsafe { poll_cq(ibcq, 2, wc.as_mut_ptr()) }, 2);
        let w = &wc[1];
        assert_eq!(
            (w.wr_id, w.status, w.opcode),
            (1, IBV_WC_SUCCESS, IBV_WC_RECV)
        );
        assert_eq!(
            (w.byte_len, w.qp_num, w.src_qp, w.wc_flags),
            (77, 9, 10, IBV_WC_WITH_IMM)
        );
        // SAFETY: imm_data is the u32 written.
        assert_eq!(unsafe { w.__bindgen_anon_1.imm_data }, 0x0102_0304);
        assert_eq!((w.pkey_index, w.slid, w.sl, w.dlid_path_bits), (1, 2, 3, 4));
        // SAFETY: as above.
        assert_eq!(unsafe { poll_cq(ibcq, 4, wc.as_mut_ptr()) }, 1);
        assert_eq!(wc[0].wr_id, 2);
        // SAFETY: live CQ.
        let st = unsafe { state(ibcq) }.lock();
        assert_eq!(st.ring.consumer().load(Ordering::Relaxed), 3);
        drop(st);
        drop_cq(cq);
    }

    #[test]
    fn overflow_is_an_error() {
        let cq = test_cq(4);
        let ibcq: *mut ibv_cq = cq.cast();
        produce(cq, cqe(0));
        {
            // SAFETY: live CQ.
            let st = unsafe { state(ibcq) }.lock();
            st.ring
                .kernel_flags()
                .store(abi::QUEUE_OVERFLOWED, Ordering::Release);
        }
        // SAFETY: plain data.
        let mut wc: [ibv_wc; 2] = unsafe { zeroed() };
        // SAFETY: a live CQ; wc has room.
        assert_eq!(unsafe { poll_cq(ibcq, 2, wc.as_mut_ptr()) }, -1);
        drop_cq(cq);
    }

    #[test]
    fn overflow_of_an_empty_cq_is_an_error() {
        let cq = test_cq(4);
        let ibcq: *mut ibv_cq = cq.cast();
        // SAFETY: live CQ.
        unsafe { state(ibcq) }
            .lock()
            .ring
            .kernel_flags()
            .store(abi::QUEUE_OVERFLOWED, Ordering::Release);
        // SAFETY: plain data.
        let mut wc: [ibv_wc; 1] = unsafe { zeroed() };
        // SAFETY: a live CQ; wc has room.  The lock-free check must not
        // answer "empty" for a CQ in error.
        assert_eq!(unsafe { poll_cq(ibcq, 1, wc.as_mut_ptr()) }, -1);
        drop_cq(cq);
    }

    /// A poll that finds nothing does not wait for a thread that holds the
    /// lock (another poller, or an extended poll between start and end).
    #[test]
    fn empty_poll_takes_no_lock() {
        let cq = test_cq(4);
        let ibcq: *mut ibv_cq = cq.cast();
        // SAFETY: live CQ; released below.
        unsafe { state(ibcq).raw_lock() };
        let addr = cq as usize;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let ibcq = addr as *mut ibv_cq;
            let ex = addr as *mut ibv_cq_ex;
            // SAFETY: plain data.
            let (mut wc, mut attr): ([ibv_wc; 1], ibv_poll_cq_attr) = unsafe { zeroed() };
            // SAFETY: a live CQ; wc has room.
            let polled = unsafe { poll_cq(ibcq, 1, wc.as_mut_ptr()) };
            // SAFETY: as above.
            let started = unsafe { start_poll(ex, &mut attr) };
            tx.send((polled, started)).unwrap();
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(
            got,
            Ok((0, libc::ENOENT)),
            "an empty poll waited for the lock"
        );
        // SAFETY: taken above.
        unsafe { state(ibcq).raw_unlock() };
        // Something to poll: the locked path takes it.
        produce(cq, cqe(3));
        // SAFETY: plain data.
        let mut wc: [ibv_wc; 1] = unsafe { zeroed() };
        // SAFETY: a live CQ; wc has room.
        assert_eq!(unsafe { poll_cq(ibcq, 1, wc.as_mut_ptr()) }, 1);
        assert_eq!(wc[0].wr_id, 3);
        drop_cq(cq);
    }

    #[test]
    fn arming_is_a_store() {
        let cq = test_cq(4);
        let ibcq: *mut ibv_cq = cq.cast();
        // SAFETY: live CQ.
        assert_eq!(unsafe { req_notify_cq(ibcq, 1) }, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { req_notify_cq(ibcq, 0) }, 0);
        // SAFETY: as above.
        let st = unsafe { state(ibcq) }.lock();
        assert_eq!(st.ring.arm_seq().load(Ordering::Relaxed), 2);
        assert_eq!(st.ring.arm_flags().load(Ordering::Relaxed), 0);
        drop(st);
        drop_cq(cq);
    }

    #[test]
    fn extended_poll() {
        let cq = test_cq(4);
        // SAFETY: cq is ours.
        let ex = unsafe { addr_of_mut!((*cq).vcq.__bindgen_anon_1.cq_ex) };
        // SAFETY: plain data.
        let mut attr: ibv_poll_cq_attr = unsafe { zeroed() };
        // SAFETY: a live CQ; nothing is polled.
        assert_eq!(unsafe { start_poll(ex, &mut attr) }, libc::ENOENT);
        produce(cq, cqe(5)); // the lock was released on ENOENT
        produce(cq, cqe(6));
        // SAFETY: a live CQ, polled by this thread from start to end.
        unsafe {
            assert_eq!(start_poll(ex, &mut attr), 0);
            assert_eq!(((*ex).wr_id, read_byte_len(ex), read_sl(ex)), (5, 77, 3));
            assert_eq!(read_opcode(ex), IBV_WC_RECV);
            assert_eq!(next_poll(ex), 0);
            assert_eq!((*ex).wr_id, 6);
            assert_eq!(next_poll(ex), libc::ENOENT);
            end_poll(ex);
            assert_eq!(start_poll(ex, &mut attr), libc::ENOENT);
        }
        produce(cq, cqe(7));
        // SAFETY: as above; end_poll consumes the current completion.
        unsafe {
            assert_eq!(start_poll(ex, &mut attr), 0);
            end_poll(ex);
            let st = state(cq.cast()).lock();
            assert_eq!(st.ring.consumer().load(Ordering::Relaxed), 3);
        }
        drop_cq(cq);
    }
}
