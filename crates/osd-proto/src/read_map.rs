//! READ MAP parameter data (OSD-2 r05 §6.21; layout as Tessera implements it): which ranges of
//! a user object hold written data and which are holes.
//!
//! ```text
//! header (16 bytes)
//! 0..7    additional length: bytes after this field that the target returned
//! 8..15   starting byte address the map was requested from (echo of CDB bytes 40..47)
//! map descriptors (24 bytes each), in address order:
//! 0..7    first byte address
//! 8..15   length in bytes
//! 16..17  map type: 1 written data, 2 hole
//! 18..23  reserved
//! ```
//!
//! A target returns the whole descriptors that fit the allocation length
//! ([`ReadMapResult::encode_within`]); an initiator continues from the end of the last one.

use tessera_types::limits::TRANSFER_LEN_MAX;

use crate::command::MapType;
use crate::error::{DecodeError, ParamField};

pub const HEADER_LEN: usize = 16;
const ADDITIONAL_LEN: usize = 0;
const START: usize = 8;
pub const DESCRIPTOR_LEN: usize = 24;
const D_OFFSET: usize = 0;
const D_LEN: usize = 8;
const D_TYPE: usize = 16;
const _: () = assert!(START + 8 == HEADER_LEN && D_TYPE + 8 == DESCRIPTOR_LEN);

/// One mapped range. `map_type` is [`MapType::Written`] or [`MapType::Holes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapEntry {
    pub offset: u64,
    pub len: u64,
    pub map_type: MapType,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReadMapResult {
    pub start: u64,
    pub entries: Vec<MapEntry>,
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

impl ReadMapResult {
    pub fn encode_within(&self, allocation_len: u64) -> Vec<u8> {
        let room = allocation_len.saturating_sub(HEADER_LEN as u64) / DESCRIPTOR_LEN as u64;
        let n = self.entries.len().min(room as usize);
        let mut out = Vec::with_capacity(HEADER_LEN + n * DESCRIPTOR_LEN);
        out.extend_from_slice(&((HEADER_LEN - 8 + n * DESCRIPTOR_LEN) as u64).to_be_bytes());
        out.extend_from_slice(&self.start.to_be_bytes());
        for e in &self.entries[..n] {
            out.extend_from_slice(&e.offset.to_be_bytes());
            out.extend_from_slice(&e.len.to_be_bytes());
            out.extend_from_slice(&(e.map_type as u16).to_be_bytes());
            out.extend_from_slice(&[0; 6]);
        }
        out
    }

    pub fn encode(&self) -> Vec<u8> {
        self.encode_within(u64::MAX)
    }

    pub fn decode(bytes: &[u8]) -> Result<ReadMapResult, DecodeError> {
        if bytes.len() < HEADER_LEN {
            return Err(DecodeError::ParameterListLength { need: HEADER_LEN as u64, have: bytes.len() as u64 });
        }
        let additional = be64(bytes, ADDITIONAL_LEN);
        if additional < (HEADER_LEN - 8) as u64 || additional > TRANSFER_LEN_MAX {
            return Err(DecodeError::param(ParamField::ListLength, ADDITIONAL_LEN as u64));
        }
        let end = bytes.len().min(8 + additional as usize);
        let body = &bytes[HEADER_LEN..end];
        let mut entries = Vec::with_capacity(body.len() / DESCRIPTOR_LEN);
        for (i, d) in body.chunks_exact(DESCRIPTOR_LEN).enumerate() {
            let kind = u16::from_be_bytes([d[D_TYPE], d[D_TYPE + 1]]);
            let map_type = match kind {
                1 => MapType::Written,
                2 => MapType::Holes,
                _ => return Err(DecodeError::param(ParamField::ListType, (HEADER_LEN + i * DESCRIPTOR_LEN + D_TYPE) as u64)),
            };
            entries.push(MapEntry { offset: be64(d, D_OFFSET), len: be64(d, D_LEN), map_type });
        }
        Ok(ReadMapResult { start: be64(bytes, START), entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(start in any::<u64>(), entries in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<bool>()), 0..10)) {
            let r = ReadMapResult { start, entries: entries.into_iter().map(|(offset, len, w)| MapEntry { offset, len, map_type: if w { MapType::Written } else { MapType::Holes } }).collect() };
            prop_assert_eq!(ReadMapResult::decode(&r.encode()).unwrap(), r.clone());
            let cut = ReadMapResult::decode(&r.encode_within(16 + 24 * 2 + 3)).unwrap();
            prop_assert_eq!(cut.entries.len(), r.entries.len().min(2));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = ReadMapResult::decode(&bytes);
        }
    }
}
