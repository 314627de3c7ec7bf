// SPDX-License-Identifier: GPL-2.0
//! The access rights of memory regions, windows and QPs (`enum
//! ib_access_flags`), for the layers above glue.

use super::bindings as b;

pub(crate) const LOCAL_WRITE: u32 = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
pub(crate) const REMOTE_WRITE: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
pub(crate) const REMOTE_READ: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_READ;
pub(crate) const REMOTE_ATOMIC: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
pub(crate) const MW_BIND: u32 = b::ib_access_flags_IB_ACCESS_MW_BIND;
pub(crate) const ZERO_BASED: u32 = b::ib_access_flags_IB_ZERO_BASED;
pub(crate) const RELAXED_ORDERING: u32 = b::ib_access_flags_IB_ACCESS_RELAXED_ORDERING;
pub(crate) const FLUSH_GLOBAL: u32 = b::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL;
pub(crate) const FLUSH_PERSISTENT: u32 = b::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT;
