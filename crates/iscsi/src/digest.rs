//! CRC32C header and data digests (RFC 7143 §13.1, §11.1: the digest of a header covers the BHS
//! and AHS; the digest of a data segment covers the data and its padding). The wire form is the
//! CRC as a little-endian 32-bit word, as in RFC 7143 Appendix B's example (Linux and libiscsi
//! agree).

/// Bytes a digest occupies on the wire.
pub const DIGEST_LEN: usize = 4;

/// CRC32C (Castagnoli) of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Continues a CRC32C over another piece, so a digest over scattered buffers needs no copy.
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, bytes)
}

/// The 4 wire bytes of a digest value.
pub fn digest_bytes(crc: u32) -> [u8; DIGEST_LEN] {
    crc.to_le_bytes()
}

/// A digest value read off the wire.
pub fn digest_from_bytes(bytes: [u8; DIGEST_LEN]) -> u32 {
    u32::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3720 Appendix B.4 test vectors for CRC32C.
    #[test]
    fn known_vectors() {
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let inc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&inc), 0x46DD_794E);
        let dec: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c(&dec), 0x113F_DB5C);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn append_equals_whole() {
        let whole = crc32c(b"hello world");
        assert_eq!(crc32c_append(crc32c(b"hello "), b"world"), whole);
        assert_eq!(digest_from_bytes(digest_bytes(whole)), whole);
    }
}
