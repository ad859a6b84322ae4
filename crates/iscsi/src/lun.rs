//! LUN field encoding (RFC 7143 §11.3.6 defers to SAM-5 §4.7): Tessera numbers logical units
//! 0..16383 and puts them in the first level of the 8-byte LUN field, with peripheral device
//! addressing below 256 and flat space addressing above, as Linux and libiscsi do.

/// Highest LUN number representable in one level.
pub const LUN_NUMBER_MAX: u64 = 0x3FFF;
const FLAT_SPACE: u64 = 0x4000;

/// The 8-byte wire LUN for LUN number `lun` (`lun` must be at most [`LUN_NUMBER_MAX`]).
pub fn encode_lun(lun: u64) -> u64 {
    assert!(lun <= LUN_NUMBER_MAX, "LUN number out of range");
    if lun < 256 {
        lun << 48
    } else {
        (FLAT_SPACE | lun) << 48
    }
}

/// The LUN number from a wire LUN; any other addressing method or a second level yields a
/// number no device has (`u64::MAX`), so the command meets "LUN not supported".
pub fn decode_lun(field: u64) -> u64 {
    let first = field >> 48;
    if field & 0x0000_FFFF_FFFF_FFFF != 0 {
        return u64::MAX;
    }
    match first >> 14 {
        0b00 if first < 256 => first,
        0b01 => first & LUN_NUMBER_MAX,
        _ => u64::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_round_trips() {
        assert_eq!(encode_lun(0), 0);
        assert_eq!(encode_lun(1), 0x0001_0000_0000_0000);
        assert_eq!(encode_lun(300), 0x412C_0000_0000_0000);
        for l in [0, 1, 255, 256, 300, LUN_NUMBER_MAX] {
            assert_eq!(decode_lun(encode_lun(l)), l);
        }
        assert_eq!(decode_lun(1), u64::MAX);
    }
}
