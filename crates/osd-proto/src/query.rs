//! QUERY criteria, the body of continuation descriptor 0x0002 (OSD-2 r05 §6.18, §5.4.4).
//!
//! ```text
//! 0       query type: 0x00 match any criterion (OR), 0x01 match all (AND)
//! 1..3    reserved
//! 4..     criteria entries, back to back:
//!         0..1   reserved
//!         2..3   query entry length: bytes after this field (12 + min length + max length)
//!         4..7   attribute page
//!         8..11  attribute number
//!         12..13 minimum value length (0: no lower bound)
//!         14..   minimum value
//!         ..     maximum value length (2, 0: no upper bound), maximum value
//! ```

use tessera_types::limits::{ATTR_ENTRIES_MAX, ATTR_VALUE_LEN_MAX};

use crate::attr::AttrId;
use crate::command::{QueryCondition, QueryCriteria};
use crate::error::{DecodeError, ParamField};

const QUERY_TYPE: usize = 0;
const ENTRIES: usize = 4;
const ENTRY_LEN_FIELD: usize = 2;
const ENTRY_FIXED: usize = 4 + 4 + 2 + 2;
pub const QUERY_MATCH_ANY: u8 = 0x00;
pub const QUERY_MATCH_ALL: u8 = 0x01;

pub fn criteria_len(c: &QueryCriteria) -> usize {
    ENTRIES + c.conditions.iter().map(|q| 4 + ENTRY_FIXED + q.min.len() + q.max.len()).sum::<usize>()
}

/// Encodes the descriptor body. Bound lengths are the caller's to check (the builder does).
pub fn encode_criteria(c: &QueryCriteria, out: &mut Vec<u8>) {
    out.push(if c.match_all { QUERY_MATCH_ALL } else { QUERY_MATCH_ANY });
    out.extend_from_slice(&[0; 3]);
    for q in &c.conditions {
        assert!(q.min.len() <= ATTR_VALUE_LEN_MAX && q.max.len() <= ATTR_VALUE_LEN_MAX);
        out.extend_from_slice(&[0; 2]);
        out.extend_from_slice(&((ENTRY_FIXED + q.min.len() + q.max.len()) as u16).to_be_bytes());
        out.extend_from_slice(&q.attr.page.to_be_bytes());
        out.extend_from_slice(&q.attr.number.to_be_bytes());
        out.extend_from_slice(&(q.min.len() as u16).to_be_bytes());
        out.extend_from_slice(&q.min);
        out.extend_from_slice(&(q.max.len() as u16).to_be_bytes());
        out.extend_from_slice(&q.max);
    }
}

fn be16(b: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]) as usize)
}

/// Decodes a criteria body; error positions are relative to the body's first byte.
pub fn decode_criteria(body: &[u8]) -> Result<QueryCriteria, DecodeError> {
    let match_all = match body.get(QUERY_TYPE) {
        Some(&QUERY_MATCH_ANY) => false,
        Some(&QUERY_MATCH_ALL) => true,
        _ => return Err(DecodeError::param(ParamField::QueryType, QUERY_TYPE as u64)),
    };
    if body.len() < ENTRIES {
        return Err(DecodeError::param(ParamField::DescriptorLength, 0));
    }
    let mut conditions = Vec::with_capacity((body.len() / (4 + ENTRY_FIXED)).min(ATTR_ENTRIES_MAX as usize));
    let mut at = ENTRIES;
    while at < body.len() {
        let bad_len = DecodeError::param(ParamField::QueryEntryLength, (at + ENTRY_LEN_FIELD) as u64);
        if conditions.len() == ATTR_ENTRIES_MAX as usize {
            return Err(DecodeError::param(ParamField::EntryCount, at as u64));
        }
        let e = &body[at..];
        let entry_len = be16(e, ENTRY_LEN_FIELD).ok_or(bad_len.clone())?;
        let end = 4 + entry_len;
        if entry_len < ENTRY_FIXED || end > e.len() {
            return Err(bad_len);
        }
        let e = &e[..end];
        let page = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        let number = u32::from_be_bytes([e[8], e[9], e[10], e[11]]);
        let min_len = be16(e, 12).ok_or(bad_len.clone())?;
        let min = e.get(14..14 + min_len).ok_or(bad_len.clone())?.to_vec();
        let max_at = 14 + min_len;
        let max_len = be16(e, max_at).ok_or(bad_len.clone())?;
        if max_at + 2 + max_len != end || min_len > ATTR_VALUE_LEN_MAX || max_len > ATTR_VALUE_LEN_MAX {
            return Err(bad_len);
        }
        let max = e[max_at + 2..end].to_vec();
        conditions.push(QueryCondition { attr: AttrId::new(page, number), min, max });
        at += end;
    }
    Ok(QueryCriteria { match_all, conditions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(match_all in any::<bool>(), conds in proptest::collection::vec((any::<u32>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..12)), 0..6)) {
            let c = QueryCriteria { match_all, conditions: conds.into_iter().map(|(p, n, min, max)| QueryCondition { attr: AttrId::new(p, n), min, max }).collect() };
            let mut out = Vec::new();
            encode_criteria(&c, &mut out);
            prop_assert_eq!(out.len(), criteria_len(&c));
            prop_assert_eq!(decode_criteria(&out).unwrap(), c);
        }

        #[test]
        fn never_panics(body in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_criteria(&body);
        }
    }
}
