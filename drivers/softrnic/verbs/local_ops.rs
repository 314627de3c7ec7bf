// SPDX-License-Identifier: GPL-2.0
//! Local work requests: the send-queue operations that touch only this
//! RNIC's memory-registration state — binding a memory window (BIND_MW),
//! invalidating a key (LOCAL_INV) and fast-registering an MR (REG_MR).  They
//! complete in order with the rest of the send queue; this runs them while
//! they are at its head (the transports run the rest).
//!
//! The rules are IBTA 10.6.7 (windows) and 10.7.2 (fast registration): every
//! failure is a completion error that moves the QP to ERR.

use super::mr::{MrKind, MwBinding};
use super::{DeviceVerbs, MW_INDEX_BASE};
use crate::abi::{self, SendWqe};
use crate::glue::access;

const LOCAL_WRITE: u32 = access::LOCAL_WRITE;
const REMOTE_WRITE: u32 = access::REMOTE_WRITE;
const REMOTE_READ: u32 = access::REMOTE_READ;
const REMOTE_ATOMIC: u32 = access::REMOTE_ATOMIC;
const MW_BIND: u32 = access::MW_BIND;
const ZERO_BASED: u32 = access::ZERO_BASED;

/// Whether a send WQE is a local operation this module executes.
pub(crate) fn is_local(opcode: u32) -> bool {
    matches!(opcode, abi::WR_BIND_MW | abi::WR_LOCAL_INV | abi::WR_REG_MR)
}

/// A local operation that may run before the WQEs ahead of it complete:
/// a fast registration or MW bind makes a key valid that was not (nothing
/// earlier can use it), and fails without changing anything (so it can
/// run again at the head).  A local invalidate waits: an earlier message
/// still unacknowledged may need its key to be resent.
pub(crate) fn runs_early(opcode: u32) -> bool {
    matches!(opcode, abi::WR_BIND_MW | abi::WR_REG_MR)
}

/// The QP a local operation runs on: its PD and number.
pub(crate) struct OnQp {
    pub(crate) pd: usize,
    pub(crate) qpn: u32,
}

/// Execute one local operation; `Err` carries the completion status.
pub(crate) fn execute(v: &DeviceVerbs, qp: &OnQp, w: &SendWqe) -> Result<(), u8> {
    match w.opcode {
        abi::WR_BIND_MW => bind_mw(v, qp, w),
        abi::WR_LOCAL_INV => local_inv(v, qp, w.ex),
        abi::WR_REG_MR => reg_mr(v, qp, w),
        _ => Err(abi::WC_LOC_QP_OP_ERR),
    }
}

/// `addr..addr+len` lies inside `base..base+size`.
fn inside(addr: u64, len: u64, base: u64, size: u64) -> bool {
    match (addr.checked_add(len), base.checked_add(size)) {
        (Some(end), Some(limit)) => addr >= base && end <= limit,
        _ => false,
    }
}

fn bind_mw(v: &DeviceVerbs, qp: &OnQp, w: &SendWqe) -> Result<(), u8> {
    const ERR: u8 = abi::WC_MW_BIND_ERR;
    let index = w.bind_mw_rkey >> 8;
    if index < MW_INDEX_BASE || w.bind_new_rkey >> 8 != index {
        return Err(ERR);
    }
    let mw = v.mws.get(index).ok_or(ERR)?;
    if mw.pd() != qp.pd {
        return Err(ERR);
    }
    let mut ms = mw.inner.lock();
    if ms.rkey != w.bind_mw_rkey {
        return Err(ERR);
    }
    // A type 2 window is bound once, then invalidated before it is reused.
    if mw.is_type2() && ms.binding.is_some() {
        return Err(ERR);
    }
    if w.bind_length == 0 && !mw.is_type2() {
        // A zero-length bind of a type 1 window unbinds it.
        ms.binding = None;
        ms.rkey = w.bind_new_rkey;
        return Ok(());
    }
    // Local write says nothing about a window (its rights are remote);
    // rdma-core's tests pass it, and other providers ignore it too.
    if w.bind_access & !(REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | ZERO_BASED | LOCAL_WRITE) != 0
    {
        return Err(ERR);
    }
    // Zero-based windows are a type 2 feature.
    if w.bind_access & ZERO_BASED != 0 && !mw.is_type2() {
        return Err(ERR);
    }
    let mr_index = w.bind_mr_lkey >> 8;
    if mr_index == 0 || mr_index >= MW_INDEX_BASE {
        return Err(ERR);
    }
    let mr = v.mrs.get(mr_index).ok_or(ERR)?;
    if mr.pd() != qp.pd {
        return Err(ERR);
    }
    let m = mr.inner.lock();
    if !m.valid || m.key != w.bind_mr_lkey || m.access & MW_BIND == 0 {
        return Err(ERR);
    }
    // Remote write or atomic through the window needs a writable region.
    if w.bind_access & (REMOTE_WRITE | REMOTE_ATOMIC) != 0 && m.access & LOCAL_WRITE == 0 {
        return Err(ERR);
    }
    if !inside(w.bind_addr, w.bind_length, m.iova, m.length) {
        return Err(ERR);
    }
    ms.binding = Some(MwBinding {
        mr_index,
        mr_key: m.key,
        addr: w.bind_addr,
        length: w.bind_length,
        access: w.bind_access,
        qpn: if mw.is_type2() { qp.qpn } else { 0 },
    });
    ms.rkey = w.bind_new_rkey;
    Ok(())
}

fn local_inv(v: &DeviceVerbs, qp: &OnQp, key: u32) -> Result<(), u8> {
    let index = key >> 8;
    if index >= MW_INDEX_BASE {
        // Only a type 2 window bound through this QP can be invalidated.
        const ERR: u8 = abi::WC_MW_BIND_ERR;
        let mw = v.mws.get(index).ok_or(ERR)?;
        let mut ms = mw.inner.lock();
        if !mw.is_type2() || ms.rkey != key || mw.pd() != qp.pd {
            return Err(ERR);
        }
        match ms.binding {
            Some(bnd) if bnd.qpn == qp.qpn => {
                ms.binding = None;
                Ok(())
            }
            _ => Err(ERR),
        }
    } else {
        mr_inv(v, qp, key, true)
    }
}

/// Invalidate (`commit`) or check that one could invalidate the
/// fast-registration MR `key` from this QP.
fn mr_inv(v: &DeviceVerbs, qp: &OnQp, key: u32, commit: bool) -> Result<(), u8> {
    const ERR: u8 = abi::WC_LOC_QP_OP_ERR;
    let index = key >> 8;
    if index == 0 || index >= MW_INDEX_BASE {
        return Err(ERR);
    }
    let mr = v.mrs.get(index).ok_or(ERR)?;
    let mut m = mr.inner.lock();
    if !matches!(m.kind, MrKind::FastReg(_)) || m.key != key || mr.pd() != qp.pd {
        return Err(ERR);
    }
    if commit {
        m.valid = false;
    }
    Ok(())
}

/// RDMA READ with invalidate: whether its key is one the READ may
/// invalidate (checked when the WQE is taken, so that the READ fails
/// before it goes on the wire rather than after its data has landed).
pub(crate) fn read_inv_check(v: &DeviceVerbs, qp: &OnQp, key: u32) -> Result<(), u8> {
    mr_inv(v, qp, key, false)
}

/// RDMA READ with invalidate: its data has landed; invalidate its key.
pub(crate) fn read_inv(v: &DeviceVerbs, qp: &OnQp, key: u32) -> Result<(), u8> {
    mr_inv(v, qp, key, true)
}

fn reg_mr(v: &DeviceVerbs, qp: &OnQp, w: &SendWqe) -> Result<(), u8> {
    const ERR: u8 = abi::WC_LOC_QP_OP_ERR;
    let index = w.bind_new_rkey >> 8;
    if index == 0 || index >= MW_INDEX_BASE || w.bind_mr_lkey >> 8 != index {
        return Err(ERR);
    }
    let mr = v.mrs.get(index).ok_or(ERR)?;
    if mr.pd() != qp.pd {
        return Err(abi::WC_LOC_PROT_ERR);
    }
    let mut m = mr.inner.lock();
    let MrKind::FastReg(pages) = &m.kind else {
        return Err(ERR);
    };
    if m.valid {
        return Err(ERR);
    }
    let capacity = pages.len() as u64 * crate::glue::page_size();
    if w.bind_length > capacity {
        return Err(abi::WC_LOC_LEN_ERR);
    }
    m.iova = w.bind_addr;
    m.length = w.bind_length;
    m.access = w.bind_access;
    m.key = w.bind_new_rkey;
    m.valid = true;
    Ok(())
}
