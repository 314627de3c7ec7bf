// SPDX-License-Identifier: GPL-2.0
//! UD multicast: the groups of a device (a multicast GID and the QPs
//! attached to it), within the device limits.  The first QP to attach to a
//! group joins its IP multicast group on the port's netdev, the last to
//! leave leaves it; received datagrams for QPN 0xFFFFFF go to every member.

use kernel::new_spinlock_irq;
use kernel::prelude::*;
use kernel::sync::SpinLockIrq;

use crate::limits::DeviceLimits;

/// The destination QPN of a multicast datagram.
pub(crate) const MULTICAST_QPN: u32 = 0xff_ffff;
/// Members of one group delivered to at once (`max_mcast_qp_attach`).
pub(crate) const MAX_MEMBERS: usize = 56;

pub(crate) struct Group {
    mgid: [u8; 16],
    qpns: KVec<u32>,
}

pub(crate) struct Groups(KVec<Group>);

pub(crate) fn new_groups() -> impl PinInit<SpinLockIrq<Groups>> {
    new_spinlock_irq!(Groups(KVec::new()), "softrnic_mcast")
}

/// A multicast GID: IPv4-mapped 224.0.0.0/4, or IPv6 ff00::/8.
pub(crate) fn is_multicast(gid: &[u8; 16]) -> bool {
    if crate::verbs::ah::is_v4_mapped(gid) {
        gid[12] & 0xf0 == 0xe0
    } else {
        gid[0] == 0xff
    }
}

impl Groups {
    /// Attach `qpn` to `mgid`; `Ok(true)` when it created the group (join
    /// the IP group).  EINVAL if already attached, ENOMEM past the limits.
    pub(crate) fn attach(&mut self, mgid: &[u8; 16], qpn: u32, l: &DeviceLimits) -> Result<bool> {
        if let Some(g) = self.0.iter_mut().find(|g| g.mgid == *mgid) {
            if g.qpns.contains(&qpn) {
                return Err(EINVAL);
            }
            if g.qpns.len() >= core::cmp::min(l.max_mcast_qp_attach as usize, MAX_MEMBERS) {
                return Err(ENOMEM);
            }
            g.qpns.push(qpn, GFP_ATOMIC)?;
            return Ok(false);
        }
        if self.0.len() >= l.max_mcast_grp as usize {
            return Err(ENOMEM);
        }
        let mut qpns = KVec::with_capacity(1, GFP_ATOMIC)?;
        qpns.push(qpn, GFP_ATOMIC)?;
        self.0.push(Group { mgid: *mgid, qpns }, GFP_ATOMIC)?;
        Ok(true)
    }

    /// Detach `qpn` from `mgid`; `Ok(true)` when the group is now empty
    /// (leave the IP group).  EINVAL if it was not attached.
    pub(crate) fn detach(&mut self, mgid: &[u8; 16], qpn: u32) -> Result<bool> {
        let gi = self.0.iter().position(|g| g.mgid == *mgid).ok_or(EINVAL)?;
        let g = &mut self.0[gi];
        let qi = g.qpns.iter().position(|&q| q == qpn).ok_or(EINVAL)?;
        g.qpns.remove(qi).map_err(|_| EINVAL)?;
        if g.qpns.is_empty() {
            self.0.remove(gi).map_err(|_| EINVAL)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The members of `mgid`, copied into `out`; how many.
    pub(crate) fn members(&self, mgid: &[u8; 16], out: &mut [u32; MAX_MEMBERS]) -> usize {
        let Some(g) = self.0.iter().find(|g| g.mgid == *mgid) else {
            return 0;
        };
        let n = core::cmp::min(g.qpns.len(), MAX_MEMBERS);
        out[..n].copy_from_slice(&g.qpns[..n]);
        n
    }

    /// The groups `qpn` is attached to (one at a time: the caller detaches
    /// it and asks again).
    pub(crate) fn any_group_of(&self, qpn: u32) -> Option<[u8; 16]> {
        self.0
            .iter()
            .find(|g| g.qpns.contains(&qpn))
            .map(|g| g.mgid)
    }
}
