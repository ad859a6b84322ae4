//! Tessera's vendor-specific atomic attribute commands (service actions 0x8F81 and 0x8F82, in
//! the 0x8F80..=0x8FFF range OSD-2 r05 table 3 leaves to vendors).
//!
//! Both operate on one attribute whose value is an 8-byte big-endian unsigned integer, of any
//! object the CDB addresses (root, partition, collection or user object: the same addressing as
//! GET ATTRIBUTES). An undefined attribute reads as 0.
//!
//! CDB: the usual header; bytes 32..39 (length) = the parameter block length (24 or 16); the
//! CDB continuation length is 0; piggy-backed get/set attribute lists are allowed as on any
//! command (set runs after the atomic, get after the set).
//!
//! Data-Out parameter block, at Data-Out offset 0:
//!
//! ```text
//! COMPARE AND SWAP (0x8F81), 24 bytes      FETCH AND ADD (0x8F82), 16 bytes
//! 0..3    attribute page                   0..3   attribute page
//! 4..7    attribute number                 4..7   attribute number
//! 8..15   expected value                   8..15  addend (wrapping, modulo 2^64)
//! 16..23  new value
//! ```
//!
//! Data-In: 8 bytes at offset 0, the attribute's value before the command. Compare-and-swap
//! stored `new` exactly when that old value equals `expected`.
//!
//! The page must not be 0xFFFFFFFE (Current Command) or 0xFFFFFFFF, and the number must not be
//! 0xFFFFFFFF (all attributes): 26/00 pointing at Data-Out byte 0 or 4.

use crate::attr::AttrId;
use crate::error::{DecodeError, ParamField};

pub const CAS_PARAM_LEN: usize = 24;
pub const FAA_PARAM_LEN: usize = 16;
pub const OLD_VALUE_LEN: usize = 8;
const PAGE: usize = 0;
const NUMBER: usize = 4;
const FIRST_OPERAND: usize = 8;
const SECOND_OPERAND: usize = 16;
const _: () = assert!(SECOND_OPERAND + 8 == CAS_PARAM_LEN && FIRST_OPERAND + 8 == FAA_PARAM_LEN);

const CURRENT_COMMAND_PAGE: u32 = 0xFFFF_FFFE;

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

fn attr(params: &[u8]) -> Result<AttrId, DecodeError> {
    let page = u32::from_be_bytes([params[0], params[1], params[2], params[3]]);
    let number = u32::from_be_bytes([params[4], params[5], params[6], params[7]]);
    if page >= CURRENT_COMMAND_PAGE {
        return Err(DecodeError::param(ParamField::AttrId, PAGE as u64));
    }
    if number == AttrId::ALL_IN_PAGE {
        return Err(DecodeError::param(ParamField::AttrId, NUMBER as u64));
    }
    Ok(AttrId::new(page, number))
}

/// Decodes a compare-and-swap block of exactly [`CAS_PARAM_LEN`] bytes: (attr, expected, new).
pub fn decode_cas(params: &[u8; CAS_PARAM_LEN]) -> Result<(AttrId, u64, u64), DecodeError> {
    Ok((attr(params)?, be64(params, FIRST_OPERAND), be64(params, SECOND_OPERAND)))
}

/// Decodes a fetch-and-add block of exactly [`FAA_PARAM_LEN`] bytes: (attr, addend).
pub fn decode_faa(params: &[u8; FAA_PARAM_LEN]) -> Result<(AttrId, u64), DecodeError> {
    Ok((attr(params)?, be64(params, FIRST_OPERAND)))
}

pub fn encode_cas(attr: AttrId, expected: u64, new: u64) -> [u8; CAS_PARAM_LEN] {
    let mut b = [0u8; CAS_PARAM_LEN];
    b[PAGE..PAGE + 4].copy_from_slice(&attr.page.to_be_bytes());
    b[NUMBER..NUMBER + 4].copy_from_slice(&attr.number.to_be_bytes());
    b[FIRST_OPERAND..FIRST_OPERAND + 8].copy_from_slice(&expected.to_be_bytes());
    b[SECOND_OPERAND..SECOND_OPERAND + 8].copy_from_slice(&new.to_be_bytes());
    b
}

pub fn encode_faa(attr: AttrId, addend: u64) -> [u8; FAA_PARAM_LEN] {
    let mut b = [0u8; FAA_PARAM_LEN];
    b[PAGE..PAGE + 4].copy_from_slice(&attr.page.to_be_bytes());
    b[NUMBER..NUMBER + 4].copy_from_slice(&attr.number.to_be_bytes());
    b[FIRST_OPERAND..FIRST_OPERAND + 8].copy_from_slice(&addend.to_be_bytes());
    b
}

/// The Data-In of an atomic: the old value.
pub fn encode_old_value(old: u64) -> Vec<u8> {
    old.to_be_bytes().to_vec()
}

/// Reads the old value from an atomic's Data-In; `None` when fewer than 8 bytes arrived.
pub fn decode_old_value(data_in: &[u8]) -> Option<u64> {
    data_in.get(..OLD_VALUE_LEN).map(|b| be64(b, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cas_bytes() {
        let b = encode_cas(AttrId::new(0x1_0000, 2), 5, 6);
        assert_eq!(&b[..8], &[0, 1, 0, 0, 0, 0, 0, 2]);
        assert_eq!(b[15], 5);
        assert_eq!(b[23], 6);
        assert_eq!(decode_cas(&b).unwrap(), (AttrId::new(0x1_0000, 2), 5, 6));
        let b = encode_faa(AttrId::new(0xFFFF_FFFE, 2), 1);
        assert_eq!(decode_faa(&b).unwrap_err(), DecodeError::param(ParamField::AttrId, 0));
    }
}
