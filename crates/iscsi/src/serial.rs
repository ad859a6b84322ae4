//! Serial number arithmetic on 32-bit sequence numbers (RFC 1982, required by RFC 7143 §4.2.2.1
//! for CmdSN, StatSN and DataSN comparisons).

/// `a < b` in serial arithmetic.
pub fn sn_lt(a: u32, b: u32) -> bool {
    a != b && b.wrapping_sub(a) < (1 << 31)
}

/// `a <= b` in serial arithmetic.
pub fn sn_le(a: u32, b: u32) -> bool {
    a == b || sn_lt(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_around() {
        assert!(sn_lt(1, 2));
        assert!(sn_lt(u32::MAX, 0));
        assert!(!sn_lt(0, u32::MAX));
        assert!(sn_le(5, 5));
        assert!(!sn_lt(5, 5));
    }
}
