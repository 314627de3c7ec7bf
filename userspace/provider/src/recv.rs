//! Receive rings (a QP's receive queue or an SRQ): RecvWqe + Sges per slot.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{fence, Ordering};

use softrnic_abi as abi;

use crate::ffi::*;
use crate::ring::{entries_after, Ring};

/// Provider side of a receive ring (kept under the queue's lock).
pub struct RecvQueue {
    pub ring: Ring,
    /// Sges a WQE may carry: the kernel's max_sge, bounded by the slot.
    pub max_sge: u32,
}

impl RecvQueue {
    pub fn new(ring: Ring, max_sge: u32) -> RecvQueue {
        let fit = entries_after::<abi::RecvWqe, abi::Sge>(ring.slot_bytes());
        RecvQueue {
            max_sge: max_sge.min(u32::try_from(fit).unwrap_or(u32::MAX)),
            ring,
        }
    }

    /// Whether the kernel has put the QP in ERR: receives posted now are
    /// flushed only if the provider rings the doorbell.  Called after
    /// `post` published its producer; the fence pairs with the kernel's
    /// (flag store, fence, producer load), so either the kernel's flush saw
    /// the new WQEs or this sees the flag.
    pub fn qp_in_error(&self) -> bool {
        fence(Ordering::SeqCst);
        self.ring.is_mapped()
            && self.ring.kernel_flags().load(Ordering::Relaxed) & abi::QUEUE_QP_ERROR != 0
    }

    /// Posts the list at `wr`; on error, `*bad_wr` is the first one not
    /// posted.  The WQEs before it are published.
    ///
    /// # Safety
    /// `wr` is a valid work request list (libibverbs's caller's promise) and
    /// `bad_wr` is writable.
    pub unsafe fn post(
        &mut self,
        mut wr: *mut ibv_recv_wr,
        bad_wr: *mut *mut ibv_recv_wr,
    ) -> c_int {
        if !self.ring.is_mapped() {
            // SAFETY: bad_wr is writable.
            unsafe { *bad_wr = wr };
            return libc::EINVAL;
        }
        let ring = &self.ring;
        let mut prod = ring.producer().load(Ordering::Relaxed);
        // Acquire: the kernel has copied a slot out before it advanced past it.
        let mut cons = ring.consumer().load(Ordering::Acquire);
        let mut ret = 0;
        while !wr.is_null() {
            // SAFETY: wr is an element of the caller's list.
            let w = unsafe { &*wr };
            let num_sge = match u32::try_from(w.num_sge) {
                Ok(n) if n <= self.max_sge => n,
                _ => {
                    ret = libc::EINVAL;
                    break;
                }
            };
            if !ring.room_for(prod, &mut cons) {
                ret = libc::ENOMEM;
                break;
            }
            let slot = ring.slot(prod);
            let hdr = abi::RecvWqe {
                wr_id: w.wr_id,
                num_sge,
                _reserved: 0,
            };
            // SAFETY: the slot is free (consumer is past it) and holds the
            // header plus max_sge Sges (RecvQueue::new); sg_list has
            // num_sge entries (the caller's promise).
            unsafe {
                ptr::write_volatile(slot.cast::<abi::RecvWqe>(), hdr);
                write_sges(slot.add(size_of::<abi::RecvWqe>()), w.sg_list, num_sge);
            }
            prod = prod.wrapping_add(1);
            wr = w.next;
        }
        // Release: the slots' contents before the new producer value.
        ring.producer().store(prod, Ordering::Release);
        if ret != 0 {
            // SAFETY: bad_wr is writable.
            unsafe { *bad_wr = wr };
        }
        ret
    }
}

/// Copies `n` ibv_sges to `dst` as abi::Sges (same layout, copied by field
/// so the ABI does not depend on libibverbs's struct).
///
/// # Safety
/// `src` holds `n` entries (or `n` is 0) and `dst` has room for `n` Sges.
pub unsafe fn write_sges(dst: *mut u8, src: *const ibv_sge, n: u32) {
    for i in 0..n as usize {
        // SAFETY: per the caller's promise.
        unsafe {
            let s = &*src.add(i);
            let sge = abi::Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
            ptr::write_volatile(dst.cast::<abi::Sge>().add(i), sge);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::test_ring;
    use core::mem::zeroed;
    use core::ptr::null_mut;

    #[test]
    fn recv_post_limits() {
        // 64-byte slots hold 3 Sges, whatever the kernel's max_sge says.
        let mut q = RecvQueue::new(test_ring(4, 64, size_of::<abi::RecvWqe>()), 8);
        assert_eq!(q.max_sge, 3);
        let mut sg = [ibv_sge {
            addr: 1,
            length: 2,
            lkey: 3,
        }; 4];
        // SAFETY: plain data.
        let mut w: [ibv_recv_wr; 4] = unsafe { zeroed() };
        for (i, w) in w.iter_mut().enumerate() {
            w.wr_id = i as u64;
            w.sg_list = sg.as_mut_ptr();
            w.num_sge = 3;
        }
        let p: *mut ibv_recv_wr = w.as_mut_ptr();
        // SAFETY: links inside the array.
        unsafe {
            (*p).next = p.add(1);
            (*p.add(1)).next = p.add(2);
            (*p.add(2)).next = p.add(3);
        }
        let mut bad = null_mut();
        // SAFETY: a valid list.  4 slots take 3 WQEs (max_wr).
        assert_eq!(unsafe { q.post(p, &mut bad) }, libc::ENOMEM);
        assert_eq!(bad, p.wrapping_add(3));
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 3);
        // SAFETY: slot 1 of the test ring.
        let wqe = unsafe { ptr::read(q.ring.slot(1).cast::<abi::RecvWqe>()) };
        assert_eq!((wqe.wr_id, wqe.num_sge), (1, 3));
        q.ring.consumer().store(1, Ordering::Release);
        w[3].num_sge = 4;
        // SAFETY: as above.
        assert_eq!(unsafe { q.post(p.wrapping_add(3), &mut bad) }, libc::EINVAL);
        assert_eq!(q.ring.producer().load(Ordering::Relaxed), 3);
    }
}
