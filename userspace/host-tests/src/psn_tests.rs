//! Tests of `core/psn.rs`: 24-bit PSN arithmetic and the regions seen from
//! an expected PSN, with the wrap-around at 2^24.

use crate::psn::*;
use proptest::prelude::*;

const MAX: u32 = PSN_MASK;

fn p(raw: u32) -> Psn {
    Psn::new(raw)
}

#[test]
fn new_masks_to_24_bits() {
    assert_eq!(p(0).get(), 0);
    assert_eq!(p(MAX).get(), 0xff_ffff);
    assert_eq!(p(1 << 24).get(), 0);
    assert_eq!(p(0xffff_ffff).get(), 0xff_ffff);
    assert_eq!(p(0x1234_5678).get(), 0x34_5678);
}

#[test]
fn add_sub_next_wrap() {
    assert_eq!(p(MAX) + 1, p(0));
    assert_eq!(p(MAX).next(), p(0));
    assert_eq!(p(0) - 1, p(MAX));
    assert_eq!(p(5) + 10, p(15));
    assert_eq!(p(MAX - 2) + 5, p(2));
    assert_eq!(p(2) - 5, p(MAX - 2));
    // Large steps wrap too: a whole circle is the identity.
    assert_eq!(p(77) + (1 << 24), p(77));
    assert_eq!(p(77) - (1 << 24), p(77));
    assert_eq!(p(77) + u32::MAX, p(76));
    assert_eq!(p(77) - u32::MAX, p(78));
    assert_eq!(p(0).offset(-1), p(MAX));
    assert_eq!(p(MAX).offset(1), p(0));
    assert_eq!(p(0).offset(i32::MIN), p(0));
    assert_eq!(p(3).offset(i32::MAX), p(2));
}

#[test]
fn diff_is_signed_and_wraps() {
    assert_eq!(diff(p(0), p(0)), 0);
    assert_eq!(diff(p(1), p(0)), 1);
    assert_eq!(diff(p(0), p(1)), -1);
    // Across the wrap.
    assert_eq!(diff(p(0), p(MAX)), 1);
    assert_eq!(diff(p(MAX), p(0)), -1);
    assert_eq!(diff(p(2), p(MAX - 2)), 5);
    assert_eq!(diff(p(MAX - 2), p(2)), -5);
    // The edges of the half circle: 2^23 - 1 ahead is after, 2^23 is behind.
    assert_eq!(diff(p(PSN_HALF - 1), p(0)), (PSN_HALF - 1) as i32);
    assert_eq!(diff(p(PSN_HALF), p(0)), -(PSN_HALF as i32));
    assert_eq!(diff(p(0), p(PSN_HALF)), -(PSN_HALF as i32));
    assert_eq!(diff(p(PSN_HALF + 1), p(0)), -(PSN_HALF as i32) + 1);
    assert_eq!(diff(p(10), p(10 + PSN_HALF)), -(PSN_HALF as i32));
}

#[test]
fn after_duplicate_ahead_regions() {
    let e = p(100);
    assert!(!is_duplicate(e, e) && !is_ahead(e, e) && !is_after(e, e));
    assert!(is_ahead(e + 1, e) && is_after(e + 1, e));
    assert!(is_ahead(e + (PSN_HALF - 1), e));
    assert!(!is_ahead(e + PSN_HALF, e));
    assert!(is_duplicate(e - 1, e));
    assert!(is_duplicate(e - PSN_HALF, e));
    assert!(!is_duplicate(e - (PSN_HALF + 1), e));
    // Each PSN other than e is in exactly one region (checked at the edges
    // and at the wrap, e near 0 and near 2^24).
    for e in [p(0), p(1), p(MAX), p(MAX - 1), p(PSN_HALF), p(PSN_HALF - 1)] {
        for d in [1, 2, PSN_HALF - 1, PSN_HALF, PSN_HALF + 1, MAX - 1, MAX] {
            let psn = e + d;
            assert_ne!(is_duplicate(psn, e), is_ahead(psn, e), "e {e:?} d {d}");
        }
        // 2^23 duplicates, 2^23 - 1 ahead.
        assert!(is_duplicate(e + PSN_HALF, e));
        assert!(is_ahead(e + (PSN_HALF - 1), e));
    }
}

#[test]
fn in_window_bounds() {
    let e = p(1000);
    assert!(in_window(e, e, 1));
    assert!(!in_window(e + 1, e, 1));
    assert!(!in_window(e, e, 0));
    assert!(in_window(e + 9, e, 10));
    assert!(!in_window(e + 10, e, 10));
    assert!(!in_window(e - 1, e, 10));
    // At the wrap.
    let e = p(MAX - 1);
    assert!(in_window(p(MAX), e, 4));
    assert!(in_window(p(0), e, 4));
    assert!(in_window(p(1), e, 4));
    assert!(!in_window(p(2), e, 4));
    assert!(!in_window(p(MAX - 2), e, 4));
    // The window is capped at half the circle.
    assert!(in_window(e + (PSN_HALF - 1), e, u32::MAX));
    assert!(!in_window(e + PSN_HALF, e, u32::MAX));
    assert!(!in_window(e - 1, e, u32::MAX));
}

proptest! {
    #[test]
    fn diff_and_offset_are_inverse(a in any::<u32>(), b in any::<u32>()) {
        let (a, b) = (p(a), p(b));
        let d = diff(a, b);
        prop_assert!((-(PSN_HALF as i32)..PSN_HALF as i32).contains(&d));
        prop_assert_eq!(b.offset(d), a);
        prop_assert_eq!(b + d as u32, a);
        prop_assert_eq!(a - d as u32, b);
        // diff is antisymmetric except at exactly half the circle.
        if d != -(PSN_HALF as i32) {
            prop_assert_eq!(diff(b, a), -d);
        }
    }

    #[test]
    fn add_then_diff_is_the_step(b in any::<u32>(), n in -(PSN_HALF as i32)..PSN_HALF as i32) {
        let b = p(b);
        prop_assert_eq!(diff(b.offset(n), b), n);
        if n >= 0 {
            prop_assert_eq!(diff(b + n as u32, b), n);
            prop_assert_eq!(diff(b - n as u32, b), -n);
        }
    }

    #[test]
    fn add_sub_cancel(a in any::<u32>(), n in any::<u32>()) {
        prop_assert_eq!(p(a) + n - n, p(a));
        prop_assert_eq!((p(a) + n).get(), a.wrapping_add(n) & MAX);
    }

    #[test]
    fn regions_partition_the_circle(psn in any::<u32>(), e in any::<u32>()) {
        let (psn, e) = (p(psn), p(e));
        let regions = [psn == e, is_duplicate(psn, e), is_ahead(psn, e)];
        prop_assert_eq!(regions.iter().filter(|&&r| r).count(), 1);
        prop_assert_eq!(in_window(psn, e, PSN_HALF), psn == e || is_ahead(psn, e));
    }
}
