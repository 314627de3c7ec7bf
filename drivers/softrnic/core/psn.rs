// SPDX-License-Identifier: GPL-2.0
//! Packet sequence numbers (IBTA vol. 1 §9.7.1): 24-bit counters compared on
//! a circle.  Plain `core` Rust, shared by the kernel module (`#[path]`) and
//! the host test crate.
//!
//! Seen from an expected PSN `e`, the circle has three regions (ch. 9.7):
//! `e` itself; the duplicate region, the 2^23 PSNs behind `e`; and the
//! invalid region, the 2^23 - 1 PSNs ahead of `e`.  [`diff`] maps a PSN to
//! its signed distance from `e`, in `[-2^23, 2^23)`, so that the regions are
//! `0`, `< 0` and `> 0`.

use core::ops::{Add, Sub};

/// The bits of a PSN.
pub(crate) const PSN_MASK: u32 = (1 << 24) - 1;
/// Half the PSN circle: the size of the duplicate region.
pub(crate) const PSN_HALF: u32 = 1 << 23;

/// A 24-bit packet sequence number; arithmetic wraps modulo 2^24.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Psn(u32);

impl Psn {
    /// The PSN of the low 24 bits of `raw` (the upper 8 are dropped).
    pub(crate) const fn new(raw: u32) -> Psn {
        Psn(raw & PSN_MASK)
    }

    /// The PSN as a number in `[0, 2^24)`.
    pub(crate) const fn get(self) -> u32 {
        self.0
    }

    /// The PSN after this one.
    pub(crate) const fn next(self) -> Psn {
        Psn::new(self.0.wrapping_add(1))
    }

    /// This PSN moved by the signed distance `d` (the inverse of [`diff`]).
    pub(crate) const fn offset(self, d: i32) -> Psn {
        Psn::new(self.0.wrapping_add_signed(d))
    }
}

/// `psn + n`: `n` PSNs later, modulo 2^24.
impl Add<u32> for Psn {
    type Output = Psn;

    fn add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }
}

/// `psn - n`: `n` PSNs earlier, modulo 2^24.
impl Sub<u32> for Psn {
    type Output = Psn;

    fn sub(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_sub(n))
    }
}

/// The signed distance from `b` to `a` on the circle, in `[-2^23, 2^23)`:
/// positive when `a` is after `b`, negative when it is behind (a PSN exactly
/// half a circle away counts as behind, i.e. in the duplicate region).
/// `b.offset(diff(a, b)) == a` for all `a`, `b`.
pub(crate) const fn diff(a: Psn, b: Psn) -> i32 {
    let d = a.0.wrapping_sub(b.0) & PSN_MASK;
    // Sign-extend the 24-bit difference.
    ((d << 8) as i32) >> 8
}

/// Whether `a` is after `b`: the distance is in `(0, 2^23)`.
pub(crate) const fn is_after(a: Psn, b: Psn) -> bool {
    diff(a, b) > 0
}

/// Whether `psn` is in `[expected, expected + window)`.  `window` is capped
/// at 2^23 so that the window never reaches into the duplicate region.
pub(crate) const fn in_window(psn: Psn, expected: Psn, window: u32) -> bool {
    let window = if window > PSN_HALF { PSN_HALF } else { window };
    let d = diff(psn, expected);
    d >= 0 && (d as u32) < window
}

/// Whether a request with `psn` is a duplicate for a responder expecting
/// `expected`: one of the 2^23 PSNs behind it.
pub(crate) const fn is_duplicate(psn: Psn, expected: Psn) -> bool {
    diff(psn, expected) < 0
}

/// Whether `psn` is ahead of `expected`, in the invalid region (a PSN
/// sequence error for a responder).
pub(crate) const fn is_ahead(psn: Psn, expected: Psn) -> bool {
    diff(psn, expected) > 0
}
