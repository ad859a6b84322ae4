//! Data-In: where a command's data and retrieved attributes go (OSD-2 r05 §4.12.5, §5.2.2),
//! built by the target with [`encode_reply`] and taken apart by the initiator with
//! [`parse_data_in`].
//!
//! ```text
//! Data-In offset 0                 command data: READ data, LIST / QUERY / READ MAP parameter
//!                                  data, the old value of an atomic (at most `data_len_max`)
//! zero fill
//! retrieved attributes offset      retrieved list: header type 0x9 (0xE for GET MEMBER
//!                                  ATTRIBUTES) + entries, cut at the allocation length
//! ```
//!
//! The list header's length field always reports the whole list, even when the allocation
//! length cut it, so an initiator can retry with a bigger allocation (§5.2.2.3). Tessera answers
//! page-format gets with the same 0x9 list (one entry per attribute of the page) rather than a
//! page image; see docs/osd2-wire-format.md.

use crate::attr::RetrievedAttr;
use crate::attr_list::{self, RetrievedList};
use crate::cdb::AttrFormat;
use crate::command::Reply;
use crate::error::DecodeError;

/// Which retrieved list a command answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetrievedListType {
    /// Type 0x9: the addressed object's attributes.
    Single,
    /// Type 0xE: GET MEMBER ATTRIBUTES, one entry per (member, attribute).
    MultiObject,
}

/// Where the retrieved attributes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetrievedPlacement {
    /// Data-In offset (decoded from the CDB's encoded retrieved-attributes offset).
    pub offset: u64,
    /// At most this many bytes of the list are sent.
    pub allocation_len: u32,
    /// How the CDB asked (page or list format).
    pub format: AttrFormat,
    pub list_type: RetrievedListType,
}

/// Everything [`encode_reply`] needs to know about the CDB, decoded alongside the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyPlacement {
    /// Most command-data bytes Data-In may carry at offset 0: the READ length, the allocation
    /// length of LIST / LIST COLLECTION / QUERY / READ MAP, 8 for an atomic, else 0. The
    /// decoder checked that the retrieved offset lies at or beyond it.
    pub data_len_max: u64,
    pub retrieved: Option<RetrievedPlacement>,
}

impl ReplyPlacement {
    /// The Data-In length the initiator should expect: everything up to the end of the
    /// allocated retrieved area, or the data length.
    pub fn data_in_len(&self) -> u64 {
        match self.retrieved {
            Some(r) => r.offset + r.allocation_len as u64,
            None => self.data_len_max,
        }
    }

    /// The placement of the Data-In bytes from offset `skip` on, for an initiator that
    /// received the first `skip` bytes of command data elsewhere (`skip <= data_len_max`;
    /// the retrieved area lies beyond the command data, so it keeps its bytes).
    pub fn after(&self, skip: u64) -> ReplyPlacement {
        let skip = skip.min(self.data_len_max);
        ReplyPlacement {
            data_len_max: self.data_len_max - skip,
            retrieved: self.retrieved.map(|r| RetrievedPlacement { offset: r.offset.saturating_sub(skip), ..r }),
        }
    }
}

/// Builds the Data-In buffer: `reply.data_in` (cut at `data_len_max`) at offset 0, then the
/// retrieved list at its offset cut at the allocation length, the whole buffer cut at
/// `data_in_len` (the initiator's expected length).
pub fn encode_reply(placement: &ReplyPlacement, reply: Reply, data_in_len: u32) -> Vec<u8> {
    let cap = data_in_len as usize;
    let data_len = reply.data_in.len().min(placement.data_len_max.min(cap as u64) as usize);
    // Reuse the engine's buffer: read data can be many megabytes and must not be copied here.
    let mut out = reply.data_in;
    out.truncate(data_len);
    if let Some(r) = placement.retrieved {
        let mut list = Vec::new();
        match r.list_type {
            RetrievedListType::Single => attr_list::encode_retrieved_list(&reply.retrieved, &mut list),
            RetrievedListType::MultiObject => attr_list::encode_multi_object_list(&reply.member_retrieved, &mut list),
        }
        list.truncate(r.allocation_len as usize);
        // The decoder bounded offset + allocation by TRANSFER_LEN_MAX, so this fits in memory.
        let offset = r.offset as usize;
        if offset < cap && !list.is_empty() {
            let end = (offset + list.len()).min(cap);
            out.resize(offset, 0);
            out.extend_from_slice(&list[..end - offset]);
        }
    }
    out
}

/// What the initiator finds in Data-In.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataIn<'a> {
    /// Command data: the first `min(data_len_max, received)` bytes.
    pub data: &'a [u8],
    /// The retrieved list, when the command asked for one and it arrived.
    pub retrieved: Option<RetrievedList>,
    /// The multi-object list of GET MEMBER ATTRIBUTES (entries, full length).
    pub members: Option<(Vec<crate::attr::MemberAttr>, u64)>,
}

/// Splits received Data-In as `placement` laid it out. A retrieved area that did not arrive at
/// all (e.g. the command failed before it) gives `None`; a malformed list is an error.
pub fn parse_data_in<'a>(placement: &ReplyPlacement, data_in: &'a [u8]) -> Result<DataIn<'a>, DecodeError> {
    let data_len = (placement.data_len_max.min(data_in.len() as u64)) as usize;
    let mut parsed = DataIn { data: &data_in[..data_len], retrieved: None, members: None };
    if let Some(r) = placement.retrieved {
        let start = usize::try_from(r.offset).unwrap_or(usize::MAX);
        if start < data_in.len() {
            let end = data_in.len().min(start.saturating_add(r.allocation_len as usize));
            let bytes = &data_in[start..end];
            if bytes.len() >= attr_list::LIST_HEADER_LEN {
                match r.list_type {
                    RetrievedListType::Single => {
                        parsed.retrieved = Some(attr_list::decode_retrieved_list(bytes).map_err(|e| e.rebased(r.offset))?)
                    }
                    RetrievedListType::MultiObject => {
                        parsed.members = Some(attr_list::decode_multi_object_list(bytes).map_err(|e| e.rebased(r.offset))?)
                    }
                }
            }
        }
    }
    Ok(parsed)
}

/// Convenience: the retrieved attributes, or an empty list.
pub fn retrieved_attrs(data_in: &DataIn<'_>) -> Vec<RetrievedAttr> {
    data_in.retrieved.as_ref().map(|r| r.attrs.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::AttrId;

    fn placement(offset: u64, allocation_len: u32) -> ReplyPlacement {
        ReplyPlacement {
            data_len_max: 16,
            retrieved: Some(RetrievedPlacement { offset, allocation_len, format: AttrFormat::List, list_type: RetrievedListType::Single }),
        }
    }

    /// Goal: data at 0, zero fill, list at its offset, header length reporting the full list
    /// although the allocation cut it.
    #[test]
    fn layout_and_truncation() {
        let reply = Reply {
            data_in: vec![7; 10],
            retrieved: vec![
                RetrievedAttr { id: AttrId::new(1, 1), value: Some(vec![1; 8]) },
                RetrievedAttr { id: AttrId::new(1, 2), value: None },
            ],
            ..Reply::default()
        };
        let p = placement(16, 32);
        let out = encode_reply(&p, reply.clone(), 1000);
        assert_eq!(out.len(), 16 + 32);
        assert_eq!(&out[..10], &[7; 10]);
        assert_eq!(&out[10..16], &[0; 6]);
        assert_eq!(out[16], 0x09);
        assert_eq!(&out[20..24], &40u32.to_be_bytes()); // 24 + 16 bytes of entries
        let parsed = parse_data_in(&p, &out).unwrap();
        assert_eq!(parsed.data, &out[..16]);
        let list = parsed.retrieved.unwrap();
        assert_eq!((list.attrs.len(), list.full_len, list.truncated), (1, 48, true));
        // The initiator's expected length cuts everything.
        assert_eq!(encode_reply(&p, reply.clone(), 12).len(), 10);
    }
}
