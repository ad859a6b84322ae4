//! LIST, LIST COLLECTION and QUERY parameter data (OSD-2 r05 §6.14, §6.15, §6.18): encoded by
//! the engine, decoded by the client, one codec for both.
//!
//! ```text
//! LIST / LIST COLLECTION header (24 bytes)
//! 0..7    additional length: bytes after this field that the target returned
//! 8..15   continuation object id (0: the list is complete)
//! 16..19  list identifier (pass back in CDB bytes 48..51 to continue)
//! 20..22  reserved
//! 23      bits 7:2 object descriptor format (0x01 ids, 0x21 ids with attributes),
//!         bit 1 LSTCHG (the set of objects changed since the list began), bit 0 ROOT (a
//!         list of partitions)
//! then, id format:      8-byte object (or partition / collection) ids
//!       with attributes: object id (8), reserved (4), attribute list length (4) = bytes of
//!                        the 0x9 entries that follow (header-less, padded to 8)
//!
//! QUERY header (16 bytes)
//! 0..7    additional length
//! 8..14   reserved
//! 15      bits 7:2 object descriptor format (0x01)
//! then 8-byte matching user object ids
//! ```
//!
//! A target fills at most the allocation length with whole entries: [`ListResult::encode_within`]
//! drops the entries that do not fit and points the continuation object id at the first of them.

use tessera_types::limits::{ATTR_ENTRIES_MAX, TRANSFER_LEN_MAX};

use crate::attr::RetrievedAttr;
use crate::attr_list;
use crate::error::{DecodeError, ParamField};

pub const LIST_HEADER_LEN: usize = 24;
const ADDITIONAL_LEN: usize = 0;
const CONTINUATION_OID: usize = 8;
const LIST_ID: usize = 16;
const FLAGS: usize = 23;
const _: () = assert!(FLAGS + 1 == LIST_HEADER_LEN);
pub const QUERY_HEADER_LEN: usize = 16;
const QUERY_FLAGS: usize = 15;
const _: () = assert!(QUERY_FLAGS + 1 == QUERY_HEADER_LEN);

pub const FORMAT_IDS: u8 = 0x01;
pub const FORMAT_IDS_WITH_ATTRS: u8 = 0x21;
const FLAG_LSTCHG: u8 = 0x02;
const FLAG_ROOT: u8 = 0x01;
const ID_LEN: usize = 8;
const ATTR_ENTRY_FIXED: usize = 16;

/// One listed object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListEntry {
    pub object_id: u64,
    /// The attributes the LIST's get list named (empty in id format).
    pub attrs: Vec<RetrievedAttr>,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ListResult {
    /// First object id not returned, 0 when the list is complete.
    pub continuation_oid: u64,
    pub list_id: u32,
    /// LSTCHG: objects were created or removed since this list identifier began.
    pub list_changed: bool,
    /// ROOT: the entries are partition ids.
    pub root: bool,
    pub with_attrs: bool,
    pub entries: Vec<ListEntry>,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

fn entry_bytes(entry: &ListEntry, with_attrs: bool) -> Vec<u8> {
    let mut out = entry.object_id.to_be_bytes().to_vec();
    if with_attrs {
        let mut list = Vec::new();
        attr_list::encode_retrieved_list(&entry.attrs, &mut list);
        let body = &list[attr_list::LIST_HEADER_LEN..];
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
    }
    out
}

impl ListResult {
    fn header(&self, body_len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(LIST_HEADER_LEN + body_len);
        out.extend_from_slice(&((LIST_HEADER_LEN - 8 + body_len) as u64).to_be_bytes());
        out.extend_from_slice(&self.continuation_oid.to_be_bytes());
        out.extend_from_slice(&self.list_id.to_be_bytes());
        out.extend_from_slice(&[0; 3]);
        let format = if self.with_attrs { FORMAT_IDS_WITH_ATTRS } else { FORMAT_IDS };
        let mut flags = format << 2;
        if self.list_changed {
            flags |= FLAG_LSTCHG;
        }
        if self.root {
            flags |= FLAG_ROOT;
        }
        out.push(flags);
        out
    }

    /// Every entry, as is.
    pub fn encode(&self) -> Vec<u8> {
        let bodies: Vec<Vec<u8>> = self.entries.iter().map(|e| entry_bytes(e, self.with_attrs)).collect();
        let mut out = self.header(bodies.iter().map(Vec::len).sum());
        bodies.iter().for_each(|b| out.extend_from_slice(b));
        out
    }

    /// The whole entries that fit in `allocation_len` bytes; when some do not, the
    /// continuation object id becomes the first one left out.
    pub fn encode_within(&self, allocation_len: u64) -> Vec<u8> {
        let room = allocation_len.saturating_sub(LIST_HEADER_LEN as u64);
        let mut used = 0u64;
        let mut bodies = Vec::new();
        let mut result = self.clone();
        for e in &self.entries {
            let b = entry_bytes(e, self.with_attrs);
            if used + b.len() as u64 > room {
                result.continuation_oid = e.object_id;
                break;
            }
            used += b.len() as u64;
            bodies.push(b);
        }
        let mut out = result.header(used as usize);
        bodies.iter().for_each(|b| out.extend_from_slice(b));
        out
    }

    /// Decodes what arrived; a trailing entry cut by the initiator's allocation is dropped.
    pub fn decode(bytes: &[u8]) -> Result<ListResult, DecodeError> {
        if bytes.len() < LIST_HEADER_LEN {
            return Err(DecodeError::ParameterListLength { need: LIST_HEADER_LEN as u64, have: bytes.len() as u64 });
        }
        let additional = be64(bytes, ADDITIONAL_LEN);
        if additional < (LIST_HEADER_LEN - 8) as u64 || additional > TRANSFER_LEN_MAX {
            return Err(DecodeError::param(ParamField::ListLength, ADDITIONAL_LEN as u64));
        }
        let flags = bytes[FLAGS];
        let with_attrs = match flags >> 2 {
            FORMAT_IDS => false,
            FORMAT_IDS_WITH_ATTRS => true,
            _ => return Err(DecodeError::param(ParamField::ListType, FLAGS as u64)),
        };
        let end = bytes.len().min(8 + additional as usize);
        let body = &bytes[LIST_HEADER_LEN..end];
        let mut entries = Vec::with_capacity((body.len() / ID_LEN).min(ATTR_ENTRIES_MAX as usize));
        let mut at = 0usize;
        while body.len() - at >= ID_LEN {
            let object_id = be64(body, at);
            if !with_attrs {
                entries.push(ListEntry { object_id, attrs: Vec::new() });
                at += ID_LEN;
                continue;
            }
            if body.len() - at < ATTR_ENTRY_FIXED {
                break;
            }
            let list_len = be32(body, at + 12) as usize;
            let Some(list_body) = body.get(at + ATTR_ENTRY_FIXED..at + ATTR_ENTRY_FIXED + list_len) else { break };
            // Re-attach a header so the 0x9 decoder can walk the entries.
            let mut list = vec![attr_list::LIST_TYPE_SET_OR_RETRIEVED, 0, 0, 0];
            list.extend_from_slice(&(list_len as u32).to_be_bytes());
            list.extend_from_slice(list_body);
            let pos = (LIST_HEADER_LEN + at + ATTR_ENTRY_FIXED) as u64;
            let attrs = attr_list::decode_retrieved_list(&list).map_err(|e| e.rebased(pos.saturating_sub(8)))?;
            if attrs.truncated {
                return Err(DecodeError::param(ParamField::ValueLength, pos));
            }
            entries.push(ListEntry { object_id, attrs: attrs.attrs });
            at += ATTR_ENTRY_FIXED + list_len;
        }
        Ok(ListResult {
            continuation_oid: be64(bytes, CONTINUATION_OID),
            list_id: be32(bytes, LIST_ID),
            list_changed: flags & FLAG_LSTCHG != 0,
            root: flags & FLAG_ROOT != 0,
            with_attrs,
            entries,
        })
    }
}

/// QUERY results: the matching user object ids.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct QueryResult {
    pub object_ids: Vec<u64>,
}

impl QueryResult {
    /// The ids that fit in `allocation_len` (a QUERY has no continuation: an initiator that
    /// sees `additional length` cut short asks again with more room).
    pub fn encode_within(&self, allocation_len: u64) -> Vec<u8> {
        let room = allocation_len.saturating_sub(QUERY_HEADER_LEN as u64) / ID_LEN as u64;
        let n = self.object_ids.len().min(room as usize);
        let mut out = Vec::with_capacity(QUERY_HEADER_LEN + n * ID_LEN);
        out.extend_from_slice(&((QUERY_HEADER_LEN - 8 + n * ID_LEN) as u64).to_be_bytes());
        out.extend_from_slice(&[0; 7]);
        out.push(FORMAT_IDS << 2);
        self.object_ids[..n].iter().for_each(|id| out.extend_from_slice(&id.to_be_bytes()));
        out
    }

    pub fn encode(&self) -> Vec<u8> {
        self.encode_within(u64::MAX)
    }

    pub fn decode(bytes: &[u8]) -> Result<QueryResult, DecodeError> {
        if bytes.len() < QUERY_HEADER_LEN {
            return Err(DecodeError::ParameterListLength { need: QUERY_HEADER_LEN as u64, have: bytes.len() as u64 });
        }
        let additional = be64(bytes, ADDITIONAL_LEN);
        if additional < (QUERY_HEADER_LEN - 8) as u64 || additional > TRANSFER_LEN_MAX {
            return Err(DecodeError::param(ParamField::ListLength, ADDITIONAL_LEN as u64));
        }
        if bytes[QUERY_FLAGS] >> 2 != FORMAT_IDS {
            return Err(DecodeError::param(ParamField::ListType, QUERY_FLAGS as u64));
        }
        let end = bytes.len().min(8 + additional as usize);
        let object_ids = bytes[QUERY_HEADER_LEN..end].chunks_exact(ID_LEN).map(|c| be64(c, 0)).collect();
        Ok(QueryResult { object_ids })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::AttrId;
    use proptest::prelude::*;

    /// Goal: the header bytes of a partition list.
    #[test]
    fn header_bytes() {
        let r = ListResult { list_id: 7, root: true, entries: vec![ListEntry { object_id: 0x10000, attrs: vec![] }], ..Default::default() };
        let b = r.encode();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[0..8], &24u64.to_be_bytes());
        assert_eq!(&b[16..20], &7u32.to_be_bytes());
        assert_eq!(b[23], 0x05);
        assert_eq!(ListResult::decode(&b).unwrap(), r);
    }

    /// Goal: a list cut by the allocation length continues at the first id left out.
    #[test]
    fn within_allocation() {
        let r = ListResult { entries: (0..10).map(|i| ListEntry { object_id: 0x10000 + i, attrs: vec![] }).collect(), ..Default::default() };
        let got = ListResult::decode(&r.encode_within(24 + 3 * 8 + 5)).unwrap();
        assert_eq!(got.entries.len(), 3);
        assert_eq!(got.continuation_oid, 0x10003);
    }

    fn entries() -> impl Strategy<Value = Vec<ListEntry>> {
        proptest::collection::vec(
            (any::<u64>(), proptest::collection::vec((any::<u32>(), any::<u32>(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20))), 0..4)),
            0..8,
        )
        .prop_map(|v| {
            v.into_iter()
                .map(|(object_id, attrs)| ListEntry {
                    object_id,
                    attrs: attrs.into_iter().map(|(p, n, value)| RetrievedAttr { id: AttrId::new(p, n), value }).collect(),
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn list_round_trip(continuation_oid in any::<u64>(), list_id in any::<u32>(), list_changed in any::<bool>(), root in any::<bool>(), with_attrs in any::<bool>(), mut entries in entries()) {
            if !with_attrs { entries.iter_mut().for_each(|e| e.attrs.clear()); }
            let r = ListResult { continuation_oid, list_id, list_changed, root, with_attrs, entries };
            prop_assert_eq!(ListResult::decode(&r.encode()).unwrap(), r);
        }

        #[test]
        fn query_round_trip(object_ids in proptest::collection::vec(any::<u64>(), 0..20)) {
            let r = QueryResult { object_ids };
            prop_assert_eq!(QueryResult::decode(&r.encode()).unwrap(), r);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = ListResult::decode(&bytes);
            let _ = QueryResult::decode(&bytes);
        }
    }
}
