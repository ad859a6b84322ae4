//! Binary text values (RFC 7143 §6.1): `0x` / `0X` followed by hex digits, or `0b` / `0B`
//! followed by base64 (RFC 4648). CHAP_C and CHAP_R travel this way. The encoded length is
//! checked against the decoded bound before anything is decoded.

use base64::alphabet::STANDARD;
use base64::engine::general_purpose::GeneralPurposeConfig;
use base64::engine::{DecodePaddingMode, GeneralPurpose};
use base64::Engine;
use thiserror::Error;

/// Largest decoded CHAP_C or CHAP_R (RFC 7143 §12.1.3: "MUST NOT exceed 1024 bytes").
pub const BINARY_LEN_MAX: usize = 1024;

/// Base64 with or without the trailing `=`: RFC 7143 does not say which, so accept both.
const BASE64: GeneralPurpose =
    GeneralPurpose::new(&STANDARD, GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent));

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BinaryError {
    #[error("a binary value must start with 0x (hex) or 0b (base64)")]
    NoPrefix,
    #[error("the binary value is empty after its prefix")]
    Empty,
    #[error("the binary value decodes to more than {max} bytes")]
    TooLong { max: usize },
    #[error("the binary value has a character that is not a {0} digit")]
    BadDigit(&'static str),
}

/// Decodes a hex or base64 binary value of at most `max` bytes.
pub fn decode_binary(value: &str, max: usize) -> Result<Vec<u8>, BinaryError> {
    let (prefix, body) = (value.get(..2).ok_or(BinaryError::NoPrefix)?, &value[2..]);
    let hex = match prefix {
        "0x" | "0X" => true,
        "0b" | "0B" => false,
        _ => return Err(BinaryError::NoPrefix),
    };
    if body.is_empty() {
        return Err(BinaryError::Empty);
    }
    if hex {
        return decode_hex(body, max);
    }
    // 4 characters carry 3 bytes; anything longer cannot fit.
    if body.len() > max.div_ceil(3) * 4 {
        return Err(BinaryError::TooLong { max });
    }
    let bytes = BASE64.decode(body).map_err(|_| BinaryError::BadDigit("base64"))?;
    if bytes.len() > max {
        return Err(BinaryError::TooLong { max });
    }
    Ok(bytes)
}

/// Hex digits to bytes; an odd count has an implied leading zero (RFC 7143 §6.1: n digits are
/// (n+1)/2 bytes).
fn decode_hex(digits: &str, max: usize) -> Result<Vec<u8>, BinaryError> {
    if digits.len() > max * 2 {
        return Err(BinaryError::TooLong { max });
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8).ok_or(BinaryError::BadDigit("hex"));
    let bytes = digits.as_bytes();
    let mut out = Vec::with_capacity(bytes.len().div_ceil(2));
    let (head, rest) = bytes.split_at(bytes.len() % 2);
    if let Some(&c) = head.first() {
        out.push(nibble(c)?);
    }
    for pair in rest.chunks_exact(2) {
        out.push(nibble(pair[0])? << 4 | nibble(pair[1])?);
    }
    Ok(out)
}

/// `0x` and lowercase hex: the form every initiator and target parses.
pub fn encode_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 + bytes.len() * 2);
    s.push_str("0x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}
