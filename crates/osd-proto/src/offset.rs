//! Encoded buffer offsets (OSD-2 r05 §4.12.5, "data-in and data-out buffer offsets").
//!
//! Every offset into Data-Out or Data-In that a CDB carries is a 4-byte value:
//!
//! ```text
//! bits 31..28  e  signed exponent (two's complement, -8..=7)
//! bits 27..0   m  mantissa
//! offset = m << (e + 8)            0xFFFF_FFFF = "no buffer" (unused)
//! ```
//!
//! With e = -8 the encoding is byte exact up to 2^28 - 1 (256 MiB), which covers
//! [`tessera_types::limits::TRANSFER_LEN_MAX`]; larger offsets round up to a multiple of
//! 2^(e+8) and the encoder pads the buffer to reach them.

/// The reserved value meaning "this buffer is not used".
pub const OFFSET_UNUSED: u32 = 0xFFFF_FFFF;

const MANTISSA_BITS: u32 = 28;
const MANTISSA_MASK: u32 = (1 << MANTISSA_BITS) - 1;
const EXPONENT_MIN: i32 = -8;
const EXPONENT_MAX: i32 = 7;
/// Largest offset the format can express: (2^28 - 1) << 15.
pub const OFFSET_MAX: u64 = (MANTISSA_MASK as u64) << (EXPONENT_MAX + 8);

const _: () = assert!(MANTISSA_MASK == 0x0FFF_FFFF);
const _: () = assert!(OFFSET_MAX >= tessera_types::limits::TRANSFER_LEN_MAX);

/// Decodes a 4-byte encoded offset: `None` for [`OFFSET_UNUSED`].
pub fn decode_offset(raw: u32) -> Option<u64> {
    if raw == OFFSET_UNUSED {
        return None;
    }
    let mantissa = (raw & MANTISSA_MASK) as u64;
    // Sign-extend the 4-bit exponent.
    let exponent = ((raw >> MANTISSA_BITS) as i32 ^ 0x8) - 0x8;
    debug_assert!((EXPONENT_MIN..=EXPONENT_MAX).contains(&exponent));
    Some(mantissa << (exponent + 8) as u32)
}

/// Encodes the smallest representable offset that is >= `offset`, with the smallest exponent
/// that reaches it. Returns the encoded value and the exact offset it stands for (callers pad up
/// to it). `None` when `offset` exceeds [`OFFSET_MAX`].
pub fn encode_offset_at_least(offset: u64) -> Option<(u32, u64)> {
    if offset > OFFSET_MAX {
        return None;
    }
    for exponent in EXPONENT_MIN..=EXPONENT_MAX {
        let shift = (exponent + 8) as u32;
        let unit = 1u64 << shift;
        let mantissa = offset.div_ceil(unit);
        if mantissa <= MANTISSA_MASK as u64 {
            let raw = ((exponent as u32 & 0xF) << MANTISSA_BITS) | mantissa as u32;
            // The all-ones pattern is reserved; (e = -1, m = 2^28-1) never arises because a
            // smaller exponent always reaches such an offset first.
            debug_assert_ne!(raw, OFFSET_UNUSED);
            return Some((raw, mantissa << shift));
        }
    }
    None
}

/// Encodes `offset` exactly, or `None` when it is not representable.
pub fn encode_offset_exact(offset: u64) -> Option<u32> {
    match encode_offset_at_least(offset) {
        Some((raw, at)) if at == offset => Some(raw),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Goal: the byte-exact vectors of the format. Method: hand-computed values.
    #[test]
    fn known_vectors() {
        assert_eq!(decode_offset(0xFFFF_FFFF), None);
        // e = -8 (0x8): byte granularity.
        assert_eq!(decode_offset(0x8000_0000), Some(0));
        assert_eq!(decode_offset(0x8000_0001), Some(1));
        assert_eq!(decode_offset(0x8FFF_FFFF), Some(0x0FFF_FFFF));
        // e = 0: 256-byte units.
        assert_eq!(decode_offset(0x0000_0001), Some(256));
        // e = 7: 32 KiB units.
        assert_eq!(decode_offset(0x7000_0001), Some(1 << 15));
        // e = -1 (0xF): 128-byte units.
        assert_eq!(decode_offset(0xF000_0003), Some(384));
        assert_eq!(encode_offset_exact(0), Some(0x8000_0000));
        assert_eq!(encode_offset_exact(1000), Some(0x8000_03E8));
        assert_eq!(encode_offset_at_least(1 << 28), Some((0x9800_0000, 1 << 28)));
        assert_eq!(encode_offset_at_least(OFFSET_MAX + 1), None);
    }

    proptest! {
        /// Goal: encode never lands below the request and decode inverts it.
        #[test]
        fn encode_decode(offset in 0u64..=OFFSET_MAX) {
            let (raw, at) = encode_offset_at_least(offset).unwrap();
            prop_assert!(at >= offset);
            prop_assert_eq!(decode_offset(raw), Some(at));
            if offset < (1 << 28) {
                prop_assert_eq!(at, offset);
            }
        }

        #[test]
        fn decode_any(raw in any::<u32>()) {
            if let Some(o) = decode_offset(raw) { prop_assert!(o <= OFFSET_MAX); }
        }
    }
}
