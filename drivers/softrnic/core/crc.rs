// SPDX-License-Identifier: GPL-2.0
//! The two CRCs of softrnic's wire formats, both reflected, both started
//! at all ones and inverted at the end:
//! - CRC-32 (IEEE 802.3 polynomial 0x04C11DB7, reflected 0xEDB88320): the
//!   RoCEv2 ICRC (`icrc.rs`);
//! - CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78): the
//!   MPA FPDU CRC of iWARP (RFC 5044 section 6, as iSCSI's RFC 3385).
//!
//! Sans-IO: `core` only, incremental, so a caller can feed a packet in
//! pieces.  The kernel has optimised versions of both (`crc32_le`,
//! `crc32c`), which compute the same running value: a caller may pass one
//! of them as the `Update` step.

/// The table of a reflected CRC-32 with polynomial `poly` (reflected).
const fn reflected_table(poly: u32) -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { poly ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

const CRC32_TABLE: [u32; 256] = reflected_table(0xEDB8_8320);
const CRC32C_TABLE: [u32; 256] = reflected_table(0x82F6_3B78);

/// One CRC step over `bytes` from the running (not inverted) value: the
/// recurrence of the kernel's `crc32_le` and `crc32c`.
pub(crate) type Update = fn(u32, &[u8]) -> u32;

fn table_step(t: &[u32; 256], crc: u32, bytes: &[u8]) -> u32 {
    let mut c = crc;
    for &b in bytes {
        c = t[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    c
}

/// The table-driven CRC-32 `Update`.
pub(crate) fn crc32_update(crc: u32, bytes: &[u8]) -> u32 {
    table_step(&CRC32_TABLE, crc, bytes)
}

/// The table-driven CRC-32C `Update`.
pub(crate) fn crc32c_update(crc: u32, bytes: &[u8]) -> u32 {
    table_step(&CRC32C_TABLE, crc, bytes)
}

/// A running CRC with its step function.
#[derive(Clone, Copy)]
pub(crate) struct Crc {
    value: u32,
    step: Update,
}

impl Crc {
    /// A CRC-32 by `step` (`crc32_update` or the kernel's `crc32_le`).
    pub(crate) const fn new(step: Update) -> Crc {
        Crc {
            value: 0xFFFF_FFFF,
            step,
        }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        // (No step for nothing: a step may be a call into the kernel.)
        if !bytes.is_empty() {
            self.value = (self.step)(self.value, bytes);
        }
    }

    /// The CRC of everything fed so far.
    pub(crate) const fn finish(&self) -> u32 {
        !self.value
    }
}

/// The CRC-32 of `bytes`, table-driven.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc::new(crc32_update);
    c.update(bytes);
    c.finish()
}

/// The CRC-32C of `bytes`, table-driven.
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    let mut c = Crc::new(crc32c_update);
    c.update(bytes);
    c.finish()
}
