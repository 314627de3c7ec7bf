// SPDX-License-Identifier: GPL-2.0
//! The ib_core part of each verbs object (`struct ib_qp` ... at the start
//! of the object ib_core allocates for us): `Opaque`, since ib_core writes
//! it, and readable only through these accessors.  Nothing outside glue
//! can make one: each exists only inside an object ib_core allocated on one
//! of our devices and glue initialised.

use core::ptr::NonNull;

use kernel::types::Opaque;

use super::bindings as b;
use super::table::Table;
use super::table::{Keyed, Plain};
use super::IbDevice;
use crate::verbs::mr::{Mr, Mw};
use crate::verbs::qp::Qp;
use crate::verbs::{ah, mcast, DeviceVerbs};

macro_rules! ib_object {
    ($(#[$doc:meta])* $name:ident, $c:ty) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub(crate) struct $name(Opaque<$c>);

        #[allow(dead_code)]
        impl $name {
            /// The C object, for ib_core calls and the shim.
            pub(crate) fn as_ptr(&self) -> *mut $c {
                self.0.get()
            }
        }
    };
}

ib_object!(
    /// `struct ib_qp` of a QP.
    IbQp,
    b::ib_qp
);
ib_object!(
    /// `struct ib_cq` of a CQ.
    IbCq,
    b::ib_cq
);
ib_object!(
    /// `struct ib_srq` of an SRQ.
    IbSrq,
    b::ib_srq
);
ib_object!(
    /// `struct ib_pd` of a PD.
    IbPd,
    b::ib_pd
);
ib_object!(
    /// `struct ib_ah` of an address handle.
    IbAh,
    b::ib_ah
);
ib_object!(
    /// `struct ib_mr` of a memory region.
    IbMr,
    b::ib_mr
);
ib_object!(
    /// `struct ib_mw` of a memory window.
    IbMw,
    b::ib_mw
);

impl IbQp {
    /// The QP number (set at creation, before the QP is published).
    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: a live ib_qp of ours; qp_num is written once, at creation.
        unsafe { (*self.as_ptr()).qp_num }
    }

    /// The QP's PD, as an identity (never dereferenced).
    pub(crate) fn pd_id(&self) -> usize {
        // SAFETY: a live ib_qp; ib_core sets the PD at creation.
        unsafe { (*self.as_ptr()).pd as usize }
    }

    /// The device the QP is on (alive while it has QPs).
    pub(crate) fn device(&self) -> IbDevice {
        // SAFETY: ib_core allocated this QP on one of our devices, which
        // outlives its QPs.
        unsafe { super::dev_of((*self.as_ptr()).device) }
    }
}

impl IbMr {
    /// The PD the MR is in now (ib_core moves it on rereg), as an identity.
    pub(crate) fn pd_id(&self) -> usize {
        // SAFETY: a pointer-sized aligned field of a live MR; ib_core writes
        // it only between our ops, a racing read sees the old or new PD.
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*self.as_ptr()).pd)) as usize }
    }
}

impl IbMw {
    /// The window's PD, as an identity.
    pub(crate) fn pd_id(&self) -> usize {
        // SAFETY: a live ib_mw; the PD is set at allocation.
        unsafe { (*self.as_ptr()).pd as usize }
    }

    /// A type 2 window (bound by work requests, to one QP).
    pub(crate) fn is_type2(&self) -> bool {
        // SAFETY: a live ib_mw; the type is set at allocation.
        unsafe { (*self.as_ptr()).type_ == b::ib_mw_type_IB_MW_TYPE_2 }
    }
}

/// A verbs object another holds through ib_core (a QP's CQs and SRQ):
/// ib_core keeps a use count on it for as long as the holder exists
/// (destroying it first fails with EBUSY).
pub(crate) struct Held<T>(NonNull<T>);

impl<T> Held<T> {
    /// # Safety
    /// `p` is a live object of ours that ib_core keeps alive (a use count)
    /// for as long as this `Held` exists.
    pub(crate) unsafe fn new(p: NonNull<T>) -> Held<T> {
        Held(p)
    }

    pub(crate) fn get(&self) -> &T {
        // SAFETY: alive while we exist (`new`).
        unsafe { self.0.as_ref() }
    }
}

// SAFETY: a shared reference to a `T` that is itself `Sync`.
unsafe impl<T: Sync> Send for Held<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Held<T> {}

// The objects' invariants the tables and threads rely on.
// SAFETY: REF_OFFSET is the offset of the Ref field, initialised in create
// before the QP enters the QP table and drained in destroy after it leaves.
unsafe impl Keyed for Qp {
    const REF_OFFSET: usize = core::mem::offset_of!(Qp, r);
}

// SAFETY: the CQ and SRQ are only read; every mutable part sits
// behind the spinlock or is an ib_core field ib_core itself synchronises.
unsafe impl Sync for Qp {}
// SAFETY: as above.
unsafe impl Send for Qp {}
// SAFETY: REF_OFFSET is the offset of the Ref field, initialised before the
// MR enters the table and drained before it is freed.
unsafe impl Keyed for Mr {
    const REF_OFFSET: usize = core::mem::offset_of!(Mr, r);
}
// SAFETY: mutable state sits behind the spinlock; the ib_mr fields are
// written only by ib_core or at creation and rereg (serialised by ib_core).
unsafe impl Sync for Mr {}
// SAFETY: as above.
unsafe impl Send for Mr {}
// SAFETY: as for Mr.
unsafe impl Keyed for Mw {
    const REF_OFFSET: usize = core::mem::offset_of!(Mw, r);
}
// SAFETY: as for Mr.
unsafe impl Sync for Mw {}
// SAFETY: as for Mr.
unsafe impl Send for Mw {}
// SAFETY: an AH has no `Ref` and is not `Keyed`: the AH table holds the
// AH itself, copied out under the table's lock.
unsafe impl Plain for ah::Ah {}

// The device's object tables: set up and torn down by glue with the device,
// and read by AH number for UD work requests.
impl DeviceVerbs {
    /// # Safety
    /// `this` points to zeroed, pinned memory nothing else uses yet.
    pub(crate) unsafe fn init(this: *mut DeviceVerbs) {
        // SAFETY: per the contract; the counts are valid when zeroed.
        unsafe {
            Table::init(core::ptr::addr_of_mut!((*this).qps));
            Table::init(core::ptr::addr_of_mut!((*this).mrs));
            Table::init(core::ptr::addr_of_mut!((*this).mws));
            Table::init(core::ptr::addr_of_mut!((*this).ahs));
            pin_init::raw_init(core::ptr::addr_of_mut!((*this).mcast), mcast::new_groups());
        }
    }

    /// # Safety
    /// The device is being freed: every object is gone.
    pub(crate) unsafe fn destroy(&self) {
        // SAFETY: per the contract.
        unsafe {
            self.qps.destroy();
            self.mrs.destroy();
            self.mws.destroy();
            self.ahs.destroy();
            core::ptr::drop_in_place(core::ptr::from_ref(&self.mcast).cast_mut());
        }
    }

    /// The address vector of AH number `num` (UD work requests name AHs by
    /// number).
    pub(crate) fn ah_av(&self, num: u32) -> Option<ah::Av> {
        // SAFETY: AV_OFFSET is the offset of the `av` field (a Copy value)
        // of the AHs the table holds.
        unsafe { self.ahs.read::<ah::Av>(num, ah::AV_OFFSET) }
    }
}
