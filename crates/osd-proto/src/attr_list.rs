//! Attribute lists (OSD-2 r05 §7.1.3): the get list (type 0x1), the set / retrieved list
//! (type 0x9) and the multi-object retrieved list (type 0xE).
//!
//! ```text
//! list header (8 bytes)
//! 0      bits 3:0 list type (0x1, 0x9, 0xE); bits 7:4 reserved
//! 1..3   reserved
//! 4..7   list length: bytes after the header
//!
//! type 0x1 entry (8 bytes)          type 0x9 entry (16 + value, padded to 8)
//! 0..3   attribute page             0..3    attribute page
//! 4..7   attribute number           4..7    attribute number
//!                                   8..13   reserved
//!                                   14..15  value length (0xFFFF: undefined, no value bytes)
//!                                   16..    value, then zero padding to a multiple of 8
//!
//! type 0xE entry (Tessera's layout: 24 + value, padded to 8)
//! 0..7   user object id
//! 8..11  attribute page
//! 12..15 attribute number
//! 16..21 reserved
//! 22..23 value length (0xFFFF: undefined)
//! 24..   value, padding
//! ```
//!
//! Decoders take exactly the list's bytes. In Data-Out (get and set lists) the header length must
//! fill the CDB's list length exactly. In Data-In (retrieved lists) the buffer may be cut at the
//! allocation length while the header still reports the full length (§5.2.2.3), so the decoder
//! returns the entries that arrived whole and the full length, letting a caller retry with a
//! bigger allocation.

use tessera_types::limits::{ATTR_ENTRIES_MAX, ATTR_VALUE_LEN_MAX};

use crate::attr::{AttrId, Attribute, MemberAttr, RetrievedAttr};
use crate::error::{DecodeError, ParamField};

pub const LIST_HEADER_LEN: usize = 8;
const HEADER_TYPE: usize = 0;
const HEADER_LEN_FIELD: usize = 4;
const _: () = assert!(HEADER_LEN_FIELD + 4 == LIST_HEADER_LEN);

pub const LIST_TYPE_GET: u8 = 0x1;
pub const LIST_TYPE_SET_OR_RETRIEVED: u8 = 0x9;
pub const LIST_TYPE_MULTI_OBJECT: u8 = 0xE;

pub const GET_ENTRY_LEN: usize = 8;
pub const ENTRY_HEADER_LEN: usize = 16;
const ENTRY_PAGE: usize = 0;
const ENTRY_NUMBER: usize = 4;
const ENTRY_VALUE_LEN: usize = 14;
const _: () = assert!(ENTRY_VALUE_LEN + 2 == ENTRY_HEADER_LEN);
pub const MULTI_ENTRY_HEADER_LEN: usize = 24;
const MULTI_ENTRY_OBJECT: usize = 0;
const MULTI_ENTRY_PAGE: usize = 8;
const MULTI_ENTRY_NUMBER: usize = 12;
const MULTI_ENTRY_VALUE_LEN: usize = 22;
const _: () = assert!(MULTI_ENTRY_VALUE_LEN + 2 == MULTI_ENTRY_HEADER_LEN);

/// Value length meaning "undefined" in a retrieved entry.
pub const VALUE_LEN_UNDEFINED: u16 = 0xFFFF;

pub(crate) fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Reads a list header: (type, list length after the header).
fn header(bytes: &[u8], want_type: u8) -> Result<u64, DecodeError> {
    if bytes.len() < LIST_HEADER_LEN {
        return Err(DecodeError::param(ParamField::ListLength, HEADER_LEN_FIELD as u64));
    }
    if bytes[HEADER_TYPE] & 0x0F != want_type {
        return Err(DecodeError::param(ParamField::ListType, HEADER_TYPE as u64));
    }
    Ok(be32(bytes, HEADER_LEN_FIELD) as u64)
}

/// Checks that the header's length fills `bytes` exactly (Data-Out lists).
fn exact_body(bytes: &[u8], want_type: u8) -> Result<&[u8], DecodeError> {
    let len = header(bytes, want_type)?;
    if len != (bytes.len() - LIST_HEADER_LEN) as u64 {
        return Err(DecodeError::param(ParamField::ListLength, HEADER_LEN_FIELD as u64));
    }
    Ok(&bytes[LIST_HEADER_LEN..])
}

fn write_header(out: &mut Vec<u8>, list_type: u8, body_len: usize) {
    out.push(list_type);
    out.extend_from_slice(&[0; 3]);
    // Lists are bounded far below 4 GiB by the callers (ATTR_LIST_LEN_MAX, TRANSFER_LEN_MAX).
    out.extend_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_be_bytes());
}

// ---- get list (0x1) ----

pub fn get_list_len(ids: &[AttrId]) -> usize {
    LIST_HEADER_LEN + ids.len() * GET_ENTRY_LEN
}

pub fn encode_get_list(ids: &[AttrId], out: &mut Vec<u8>) {
    write_header(out, LIST_TYPE_GET, ids.len() * GET_ENTRY_LEN);
    for id in ids {
        out.extend_from_slice(&id.page.to_be_bytes());
        out.extend_from_slice(&id.number.to_be_bytes());
    }
}

/// Decodes a get list that is exactly `bytes` long. Positions in errors are relative to the
/// list's first byte.
pub fn decode_get_list(bytes: &[u8]) -> Result<Vec<AttrId>, DecodeError> {
    let body = exact_body(bytes, LIST_TYPE_GET)?;
    if body.len() % GET_ENTRY_LEN != 0 {
        return Err(DecodeError::param(ParamField::ListLength, HEADER_LEN_FIELD as u64));
    }
    let count = body.len() / GET_ENTRY_LEN;
    if count > ATTR_ENTRIES_MAX as usize {
        let byte = LIST_HEADER_LEN + ATTR_ENTRIES_MAX as usize * GET_ENTRY_LEN;
        return Err(DecodeError::param(ParamField::EntryCount, byte as u64));
    }
    Ok(body.chunks_exact(GET_ENTRY_LEN).map(|e| AttrId::new(be32(e, 0), be32(e, 4))).collect())
}

// ---- set / retrieved list (0x9) ----

fn entry_len(value_len: Option<usize>) -> usize {
    pad8(ENTRY_HEADER_LEN + value_len.unwrap_or(0))
}

fn write_entry(out: &mut Vec<u8>, id: AttrId, value: Option<&[u8]>) {
    let start = out.len();
    out.extend_from_slice(&id.page.to_be_bytes());
    out.extend_from_slice(&id.number.to_be_bytes());
    out.extend_from_slice(&[0; 6]);
    match value {
        Some(v) => {
            assert!(v.len() <= ATTR_VALUE_LEN_MAX, "attribute values are bounded before encoding");
            out.extend_from_slice(&(v.len() as u16).to_be_bytes());
            out.extend_from_slice(v);
        }
        None => out.extend_from_slice(&VALUE_LEN_UNDEFINED.to_be_bytes()),
    }
    out.resize(start + entry_len(value.map(<[u8]>::len)), 0);
}

pub fn set_list_len(attrs: &[Attribute]) -> usize {
    LIST_HEADER_LEN + attrs.iter().map(|a| entry_len(Some(a.value.len()))).sum::<usize>()
}

/// Encodes a set list. Panics if a value exceeds `limits::ATTR_VALUE_LEN_MAX` (callers check;
/// the builder returns an error first).
pub fn encode_set_list(attrs: &[Attribute], out: &mut Vec<u8>) {
    write_header(out, LIST_TYPE_SET_OR_RETRIEVED, set_list_len(attrs) - LIST_HEADER_LEN);
    for a in attrs {
        write_entry(out, a.id, Some(&a.value));
    }
}

/// The value a retrieved entry carries: values longer than the wire allows are reported
/// undefined (the engine never stores such values; this keeps encoding total).
fn wire_value(value: &Option<Vec<u8>>) -> Option<&[u8]> {
    value.as_deref().filter(|v| v.len() <= ATTR_VALUE_LEN_MAX)
}

pub fn retrieved_list_len(attrs: &[RetrievedAttr]) -> usize {
    LIST_HEADER_LEN + attrs.iter().map(|a| entry_len(wire_value(&a.value).map(<[u8]>::len))).sum::<usize>()
}

pub fn encode_retrieved_list(attrs: &[RetrievedAttr], out: &mut Vec<u8>) {
    write_header(out, LIST_TYPE_SET_OR_RETRIEVED, retrieved_list_len(attrs) - LIST_HEADER_LEN);
    for a in attrs {
        write_entry(out, a.id, wire_value(&a.value));
    }
}

/// Walks 0x9 entries in `body` (which starts at list byte `LIST_HEADER_LEN`), calling `f` for
/// each whole entry. With `strict`, an entry cut short is an error; otherwise the walk stops.
fn walk_entries(
    body: &[u8],
    strict: bool,
    mut f: impl FnMut(AttrId, Option<&[u8]>, u64) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let mut at = 0usize;
    let mut count = 0u32;
    while at < body.len() {
        let pos = (LIST_HEADER_LEN + at) as u64;
        if body.len() - at < ENTRY_HEADER_LEN {
            return if strict { Err(DecodeError::param(ParamField::ValueLength, pos)) } else { Ok(()) };
        }
        if count == ATTR_ENTRIES_MAX {
            return Err(DecodeError::param(ParamField::EntryCount, pos));
        }
        let e = &body[at..];
        let id = AttrId::new(be32(e, ENTRY_PAGE), be32(e, ENTRY_NUMBER));
        let raw_len = u16::from_be_bytes([e[ENTRY_VALUE_LEN], e[ENTRY_VALUE_LEN + 1]]);
        let value_len = (raw_len != VALUE_LEN_UNDEFINED).then_some(raw_len as usize);
        let len = entry_len(value_len);
        if len > e.len() {
            // A value running past the list; the padding of the last entry may be cut off in
            // a truncated Data-In, the value itself may not.
            return if strict { Err(DecodeError::param(ParamField::ValueLength, pos + ENTRY_VALUE_LEN as u64)) } else { Ok(()) };
        }
        let value = value_len.map(|l| &e[ENTRY_HEADER_LEN..ENTRY_HEADER_LEN + l]);
        f(id, value, pos)?;
        at += len;
        count += 1;
    }
    Ok(())
}

/// Decodes a set list that is exactly `bytes` long. Undefined (0xFFFF) values are refused: a
/// set list deletes with a zero length.
pub fn decode_set_list(bytes: &[u8]) -> Result<Vec<Attribute>, DecodeError> {
    let body = exact_body(bytes, LIST_TYPE_SET_OR_RETRIEVED)?;
    let mut out = Vec::with_capacity((body.len() / ENTRY_HEADER_LEN).min(ATTR_ENTRIES_MAX as usize));
    walk_entries(body, true, |id, value, pos| match value {
        Some(v) => {
            out.push(Attribute { id, value: v.to_vec() });
            Ok(())
        }
        None => Err(DecodeError::param(ParamField::ValueLength, pos + ENTRY_VALUE_LEN as u64)),
    })?;
    Ok(out)
}

/// A retrieved list as the initiator received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetrievedList {
    pub attrs: Vec<RetrievedAttr>,
    /// The whole list's length in bytes (header included), as the target reported it.
    pub full_len: u64,
    /// True when the allocation length cut the list: retry with `full_len`.
    pub truncated: bool,
}

/// Decodes a retrieved list that may have been cut at the allocation length.
pub fn decode_retrieved_list(bytes: &[u8]) -> Result<RetrievedList, DecodeError> {
    let body_len = header(bytes, LIST_TYPE_SET_OR_RETRIEVED)?;
    let have = (bytes.len() - LIST_HEADER_LEN) as u64;
    let body = &bytes[LIST_HEADER_LEN..LIST_HEADER_LEN + have.min(body_len) as usize];
    let mut attrs = Vec::with_capacity((body.len() / ENTRY_HEADER_LEN).min(ATTR_ENTRIES_MAX as usize));
    let mut whole = 0usize;
    walk_entries(body, false, |id, value, pos| {
        attrs.push(RetrievedAttr { id, value: value.map(<[u8]>::to_vec) });
        whole = pos as usize - LIST_HEADER_LEN + entry_len(value.map(<[u8]>::len));
        Ok(())
    })?;
    let truncated = have < body_len && whole < body_len as usize;
    Ok(RetrievedList { attrs, full_len: body_len + LIST_HEADER_LEN as u64, truncated })
}

// ---- multi-object retrieved list (0xE) ----

fn multi_entry_len(value_len: Option<usize>) -> usize {
    pad8(MULTI_ENTRY_HEADER_LEN + value_len.unwrap_or(0))
}

pub fn multi_object_list_len(attrs: &[MemberAttr]) -> usize {
    LIST_HEADER_LEN + attrs.iter().map(|m| multi_entry_len(wire_value(&m.attr.value).map(<[u8]>::len))).sum::<usize>()
}

pub fn encode_multi_object_list(attrs: &[MemberAttr], out: &mut Vec<u8>) {
    write_header(out, LIST_TYPE_MULTI_OBJECT, multi_object_list_len(attrs) - LIST_HEADER_LEN);
    for m in attrs {
        let start = out.len();
        out.extend_from_slice(&m.object_id.to_be_bytes());
        out.extend_from_slice(&m.attr.id.page.to_be_bytes());
        out.extend_from_slice(&m.attr.id.number.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        let value = wire_value(&m.attr.value);
        match value {
            Some(v) => {
                out.extend_from_slice(&(v.len() as u16).to_be_bytes());
                out.extend_from_slice(v);
            }
            None => out.extend_from_slice(&VALUE_LEN_UNDEFINED.to_be_bytes()),
        }
        out.resize(start + multi_entry_len(value.map(<[u8]>::len)), 0);
    }
}

/// Decodes a multi-object list that may have been cut at the allocation length: the entries
/// that arrived whole, and the full length the target reported.
pub fn decode_multi_object_list(bytes: &[u8]) -> Result<(Vec<MemberAttr>, u64), DecodeError> {
    let body_len = header(bytes, LIST_TYPE_MULTI_OBJECT)?;
    let have = (bytes.len() - LIST_HEADER_LEN) as u64;
    let body = &bytes[LIST_HEADER_LEN..LIST_HEADER_LEN + have.min(body_len) as usize];
    let mut out = Vec::with_capacity((body.len() / MULTI_ENTRY_HEADER_LEN).min(ATTR_ENTRIES_MAX as usize));
    let mut at = 0usize;
    while body.len() - at >= MULTI_ENTRY_HEADER_LEN {
        if out.len() == ATTR_ENTRIES_MAX as usize {
            return Err(DecodeError::param(ParamField::EntryCount, (LIST_HEADER_LEN + at) as u64));
        }
        let e = &body[at..];
        let raw_len = u16::from_be_bytes([e[MULTI_ENTRY_VALUE_LEN], e[MULTI_ENTRY_VALUE_LEN + 1]]);
        let value_len = (raw_len != VALUE_LEN_UNDEFINED).then_some(raw_len as usize);
        let len = multi_entry_len(value_len);
        if len > e.len() {
            break;
        }
        out.push(MemberAttr {
            object_id: be64(e, MULTI_ENTRY_OBJECT),
            attr: RetrievedAttr {
                id: AttrId::new(be32(e, MULTI_ENTRY_PAGE), be32(e, MULTI_ENTRY_NUMBER)),
                value: value_len.map(|l| e[MULTI_ENTRY_HEADER_LEN..MULTI_ENTRY_HEADER_LEN + l].to_vec()),
            },
        });
        at += len;
    }
    Ok((out, body_len + LIST_HEADER_LEN as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Goal: the byte layout of a 0x9 entry. Method: a hand-written vector.
    #[test]
    fn set_list_bytes() {
        let mut out = Vec::new();
        encode_set_list(&[Attribute { id: AttrId::new(0x1_0000, 7), value: vec![0xAA, 0xBB, 0xCC] }], &mut out);
        assert_eq!(
            out,
            [
                0x09, 0, 0, 0, 0, 0, 0, 24, // header: type 9, 24 bytes follow
                0, 1, 0, 0, 0, 0, 0, 7, // page, number
                0, 0, 0, 0, 0, 0, 0, 3, // reserved, length 3
                0xAA, 0xBB, 0xCC, 0, 0, 0, 0, 0, // value + padding
            ]
        );
        assert_eq!(decode_set_list(&out).unwrap()[0].value, vec![0xAA, 0xBB, 0xCC]);
    }

    /// Goal: an undefined retrieved value is 16 bytes with length 0xFFFF.
    #[test]
    fn undefined_entry() {
        let mut out = Vec::new();
        encode_retrieved_list(&[RetrievedAttr { id: AttrId::new(1, 2), value: None }], &mut out);
        assert_eq!(out.len(), 24);
        assert_eq!(&out[22..24], &[0xFF, 0xFF]);
        assert!(decode_set_list(&out).is_err());
    }

    /// Goal: a cut retrieved list still reports its full length.
    #[test]
    fn truncated_retrieved_list() {
        let attrs: Vec<_> = (0..4).map(|n| RetrievedAttr { id: AttrId::new(1, n), value: Some(vec![n as u8; 9]) }).collect();
        let mut out = Vec::new();
        encode_retrieved_list(&attrs, &mut out);
        let full = out.len() as u64;
        let got = decode_retrieved_list(&out[..40]).unwrap();
        assert_eq!((got.attrs.len(), got.full_len, got.truncated), (1, full, true));
        let got = decode_retrieved_list(&out).unwrap();
        assert_eq!((got.attrs, got.truncated), (attrs, false));
    }

    fn attr_id() -> impl Strategy<Value = AttrId> {
        (any::<u32>(), any::<u32>()).prop_map(|(p, n)| AttrId::new(p, n))
    }

    proptest! {
        #[test]
        fn get_list_round_trip(ids in proptest::collection::vec(attr_id(), 0..20)) {
            let mut out = Vec::new();
            encode_get_list(&ids, &mut out);
            prop_assert_eq!(out.len(), get_list_len(&ids));
            prop_assert_eq!(decode_get_list(&out).unwrap(), ids);
        }

        #[test]
        fn retrieved_round_trip(attrs in proptest::collection::vec((attr_id(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))), 0..10)) {
            let attrs: Vec<_> = attrs.into_iter().map(|(id, value)| RetrievedAttr { id, value }).collect();
            let mut out = Vec::new();
            encode_retrieved_list(&attrs, &mut out);
            prop_assert_eq!(out.len(), retrieved_list_len(&attrs));
            prop_assert_eq!(decode_retrieved_list(&out).unwrap().attrs, attrs);
        }

        #[test]
        fn multi_round_trip(attrs in proptest::collection::vec((any::<u64>(), attr_id(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))), 0..10)) {
            let attrs: Vec<_> = attrs.into_iter().map(|(object_id, id, value)| MemberAttr { object_id, attr: RetrievedAttr { id, value } }).collect();
            let mut out = Vec::new();
            encode_multi_object_list(&attrs, &mut out);
            prop_assert_eq!(out.len(), multi_object_list_len(&attrs));
            let (got, full) = decode_multi_object_list(&out).unwrap();
            prop_assert_eq!(got, attrs);
            prop_assert_eq!(full, out.len() as u64);
        }
    }
}
