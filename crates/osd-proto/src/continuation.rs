//! The CDB continuation segment (OSD-2 r05 §5.4): at Data-Out offset 0, CDB continuation
//! length bytes (CDB bytes 48..51) long.
//!
//! ```text
//! header (40 bytes)
//! 0       format = 0x01
//! 1       reserved
//! 2..3    continued service action (must equal the CDB's)
//! 4..7    reserved
//! 8..39   continuation integrity check value (security; zero under NOSEC)
//! descriptors, back to back up to the continuation length:
//! 0..1    descriptor type
//! 2       reserved
//! 3       pad length (bits 2:0): zero bytes after the body
//! 4..7    descriptor length: body bytes, pad excluded; (length + pad) % 8 == 0
//! 8..     body
//! ```
//!
//! Descriptor types:
//!
//! | type | body |
//! |---|---|
//! | 0x0000 | end of descriptors: the rest of the segment is ignored |
//! | 0x0001 | scatter/gather list: N x (offset 8, length 8), offsets relative to the starting byte address |
//! | 0x0002 | query criteria ([`crate::query`]) |
//! | 0xFF01 | Tessera strided: stride (8), block length (8) |
//! | 0xFF02 | Tessera nested strided: block length (8), level count (4), reserved (4), then level count x (count 8, stride 8), innermost level first |
//!
//! Validation against the CDB (given a [`DataSpan`]): an SGL has 1..=`SGL_ENTRIES_MAX` entries, no
//! zero length, no `start + offset + length` overflow, and lengths summing to the CDB length.
//! Strided: `stride >= block_len > 0`; blocks are `ceil(length / block_len)` and only the last
//! may be short; the last byte must not overflow. Nested: `block_len > 0`, 1..=`NESTED_LEVELS_MAX`
//! levels, each count >= 1, each level's stride at least the span of the level inside it (blocks
//! never overlap), and the product of the counts equal to `ceil(length / block_len)`: every
//! block is visited exactly once and only the very last block may be short.

// `% 8 != 0` rather than `is_multiple_of`: the workspace's rust-version is 1.80.
#![allow(clippy::manual_is_multiple_of)]

use tessera_types::limits::{CONTINUATION_DESCRIPTORS_MAX, NESTED_LEVELS_MAX, SGL_ENTRIES_MAX};

use crate::attr_list::pad8;
use crate::command::{DataLayout, Extent, QueryCriteria};
use crate::error::{DecodeError, ParamField};
use crate::query;

pub const HEADER_LEN: usize = 40;
const FORMAT: usize = 0;
const SERVICE_ACTION: usize = 2;
const ICV: usize = 8;
pub const ICV_LEN: usize = 32;
const _: () = assert!(ICV + ICV_LEN == HEADER_LEN);
pub const FORMAT_01: u8 = 0x01;

pub const DESCRIPTOR_HEADER_LEN: usize = 8;
const D_TYPE: usize = 0;
const D_PAD: usize = 3;
const D_LEN: usize = 4;
const _: () = assert!(D_LEN + 4 == DESCRIPTOR_HEADER_LEN);

pub const TYPE_END: u16 = 0x0000;
pub const TYPE_SGL: u16 = 0x0001;
pub const TYPE_QUERY: u16 = 0x0002;
/// Tessera vendor descriptor: strided (the vendor range 0xFF00..0xFFED is unused by r05).
pub const TYPE_STRIDED: u16 = 0xFF01;
/// Tessera vendor descriptor: nested strided.
pub const TYPE_NESTED: u16 = 0xFF02;

pub const SGL_ENTRY_LEN: usize = 16;
pub const STRIDED_BODY_LEN: usize = 16;
pub const NESTED_FIXED_LEN: usize = 16;
pub const NESTED_LEVEL_LEN: usize = 16;

/// One decoded descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Descriptor {
    /// A data layout (SGL, strided or nested), already checked against the CDB when decoded
    /// with a [`DataSpan`].
    Layout(DataLayout),
    Query(QueryCriteria),
}

/// A decoded continuation segment. `descriptors` carry the Data-Out position of their type field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Continuation {
    pub service_action: u16,
    pub icv: [u8; ICV_LEN],
    pub descriptors: Vec<(u64, Descriptor)>,
}

/// The CDB's data range, which layouts are checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSpan {
    pub start: u64,
    pub len: u64,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Decodes a continuation segment that is exactly `bytes` long (its CDB length). Errors point
/// at bytes of the segment, which starts at Data-Out offset 0.
pub fn decode_continuation(bytes: &[u8], service_action: u16, span: DataSpan) -> Result<Continuation, DecodeError> {
    if bytes.len() < HEADER_LEN || bytes.len() % 8 != 0 {
        return Err(DecodeError::cdb(crate::error::CdbField::ContinuationLength));
    }
    if bytes[FORMAT] != FORMAT_01 {
        return Err(DecodeError::param(ParamField::ContinuationFormat, FORMAT as u64));
    }
    let sa = u16::from_be_bytes([bytes[SERVICE_ACTION], bytes[SERVICE_ACTION + 1]]);
    if sa != service_action {
        return Err(DecodeError::param(ParamField::ContinuationServiceAction, SERVICE_ACTION as u64));
    }
    let mut icv = [0u8; ICV_LEN];
    icv.copy_from_slice(&bytes[ICV..HEADER_LEN]);
    let mut descriptors = Vec::new();
    let mut at = HEADER_LEN;
    while bytes.len() - at >= DESCRIPTOR_HEADER_LEN {
        let d = &bytes[at..];
        let kind = u16::from_be_bytes([d[D_TYPE], d[D_TYPE + 1]]);
        if kind == TYPE_END {
            break;
        }
        if descriptors.len() == CONTINUATION_DESCRIPTORS_MAX {
            return Err(DecodeError::param(ParamField::DescriptorType, at as u64));
        }
        let pad = d[D_PAD];
        let len = be32(d, D_LEN) as usize;
        let total = DESCRIPTOR_HEADER_LEN as u64 + len as u64 + pad as u64;
        if pad > 7 || (len + pad as usize) % 8 != 0 {
            return Err(DecodeError::param(ParamField::DescriptorPadLength, (at + D_PAD) as u64));
        }
        if total > d.len() as u64 {
            return Err(DecodeError::param(ParamField::DescriptorLength, (at + D_LEN) as u64));
        }
        let body = &d[DESCRIPTOR_HEADER_LEN..DESCRIPTOR_HEADER_LEN + len];
        let body_at = (at + DESCRIPTOR_HEADER_LEN) as u64;
        let desc = match kind {
            TYPE_SGL => Descriptor::Layout(decode_sgl(body, span).map_err(|e| e.rebased(body_at))?),
            TYPE_STRIDED => Descriptor::Layout(decode_strided(body, span).map_err(|e| e.rebased(body_at))?),
            TYPE_NESTED => Descriptor::Layout(decode_nested(body, span).map_err(|e| e.rebased(body_at))?),
            TYPE_QUERY => Descriptor::Query(query::decode_criteria(body).map_err(|e| e.rebased(body_at))?),
            _ => return Err(DecodeError::param(ParamField::DescriptorType, at as u64)),
        };
        descriptors.push((at as u64, desc));
        at += total as usize;
    }
    Ok(Continuation { service_action: sa, icv, descriptors })
}

fn total_error() -> DecodeError {
    // Relative to the body; the body's length field sits 4 bytes before it.
    DecodeError::param(ParamField::LayoutTotal, 0)
}

fn decode_sgl(body: &[u8], span: DataSpan) -> Result<DataLayout, DecodeError> {
    if body.is_empty() || body.len() % SGL_ENTRY_LEN != 0 {
        return Err(DecodeError::param(ParamField::SglLength, 0));
    }
    let count = body.len() / SGL_ENTRY_LEN;
    if count as u64 > SGL_ENTRIES_MAX {
        return Err(DecodeError::param(ParamField::SglLength, (SGL_ENTRIES_MAX as usize * SGL_ENTRY_LEN) as u64));
    }
    let mut extents = Vec::with_capacity(count);
    let mut sum = 0u64;
    for (i, e) in body.chunks_exact(SGL_ENTRY_LEN).enumerate() {
        let pos = (i * SGL_ENTRY_LEN) as u64;
        let offset = be64(e, 0);
        let len = be64(e, 8);
        if len == 0 {
            return Err(DecodeError::param(ParamField::SglLength, pos + 8));
        }
        let end = span.start.checked_add(offset).and_then(|o| o.checked_add(len));
        if end.is_none() {
            return Err(DecodeError::param(ParamField::SglOffset, pos));
        }
        sum = sum.checked_add(len).ok_or(DecodeError::param(ParamField::SglLength, pos + 8))?;
        extents.push(Extent { offset, len });
    }
    if sum != span.len {
        return Err(total_error());
    }
    Ok(DataLayout::List(extents))
}

fn decode_strided(body: &[u8], span: DataSpan) -> Result<DataLayout, DecodeError> {
    if body.len() != STRIDED_BODY_LEN {
        return Err(DecodeError::param(ParamField::DescriptorLength, 0));
    }
    let stride = be64(body, 0);
    let block_len = be64(body, 8);
    if block_len == 0 {
        return Err(DecodeError::param(ParamField::BlockLength, 8));
    }
    if stride < block_len {
        return Err(DecodeError::param(ParamField::Stride, 0));
    }
    if span.len > 0 {
        let blocks = span.len.div_ceil(block_len);
        let last_len = span.len - (blocks - 1) * block_len;
        let end = (blocks - 1)
            .checked_mul(stride)
            .and_then(|o| o.checked_add(span.start))
            .and_then(|o| o.checked_add(last_len));
        if end.is_none() {
            return Err(DecodeError::param(ParamField::Stride, 0));
        }
    }
    Ok(DataLayout::Strided { stride, block_len })
}

fn decode_nested(body: &[u8], span: DataSpan) -> Result<DataLayout, DecodeError> {
    if body.len() < NESTED_FIXED_LEN {
        return Err(DecodeError::param(ParamField::DescriptorLength, 0));
    }
    let block_len = be64(body, 0);
    let level_count = be32(body, 8);
    if block_len == 0 {
        return Err(DecodeError::param(ParamField::BlockLength, 0));
    }
    if level_count == 0 || level_count > NESTED_LEVELS_MAX {
        return Err(DecodeError::param(ParamField::LevelCount, 8));
    }
    if body.len() != NESTED_FIXED_LEN + level_count as usize * NESTED_LEVEL_LEN {
        return Err(DecodeError::param(ParamField::DescriptorLength, 0));
    }
    let mut levels = Vec::with_capacity(level_count as usize);
    let mut span_bytes = block_len; // bytes covered by one instance of the current level
    let mut blocks = 1u64;
    for i in 0..level_count as usize {
        let pos = NESTED_FIXED_LEN + i * NESTED_LEVEL_LEN;
        let count = be64(body, pos);
        let stride = be64(body, pos + 8);
        if count == 0 {
            return Err(DecodeError::param(ParamField::LevelCount, pos as u64));
        }
        if count > 1 {
            if stride < span_bytes {
                return Err(DecodeError::param(ParamField::LevelStride, (pos + 8) as u64));
            }
            span_bytes = (count - 1)
                .checked_mul(stride)
                .and_then(|s| s.checked_add(span_bytes))
                .ok_or(DecodeError::param(ParamField::LevelStride, (pos + 8) as u64))?;
        }
        blocks = blocks.checked_mul(count).ok_or(DecodeError::param(ParamField::LevelCount, pos as u64))?;
        levels.push((count, stride));
    }
    if span.len.div_ceil(block_len) != blocks {
        return Err(total_error());
    }
    if span.start.checked_add(span_bytes).is_none() {
        return Err(DecodeError::param(ParamField::LevelStride, (NESTED_FIXED_LEN + 8) as u64));
    }
    Ok(DataLayout::Nested { block_len, levels })
}

// ---- encoding ----

fn descriptor_body(desc: &Descriptor) -> Option<(u16, Vec<u8>)> {
    let mut body = Vec::new();
    let kind = match desc {
        Descriptor::Layout(DataLayout::Contiguous) => return None,
        Descriptor::Layout(DataLayout::List(extents)) => {
            for e in extents {
                body.extend_from_slice(&e.offset.to_be_bytes());
                body.extend_from_slice(&e.len.to_be_bytes());
            }
            TYPE_SGL
        }
        Descriptor::Layout(DataLayout::Strided { stride, block_len }) => {
            body.extend_from_slice(&stride.to_be_bytes());
            body.extend_from_slice(&block_len.to_be_bytes());
            TYPE_STRIDED
        }
        Descriptor::Layout(DataLayout::Nested { block_len, levels }) => {
            body.extend_from_slice(&block_len.to_be_bytes());
            body.extend_from_slice(&(levels.len() as u32).to_be_bytes());
            body.extend_from_slice(&[0; 4]);
            for (count, stride) in levels {
                body.extend_from_slice(&count.to_be_bytes());
                body.extend_from_slice(&stride.to_be_bytes());
            }
            TYPE_NESTED
        }
        Descriptor::Query(c) => {
            query::encode_criteria(c, &mut body);
            TYPE_QUERY
        }
    };
    Some((kind, body))
}

/// Encodes a continuation segment holding `descriptors` (a contiguous layout adds nothing).
/// Returns an empty vector when there is nothing to continue.
pub fn encode_continuation(service_action: u16, icv: &[u8; ICV_LEN], descriptors: &[Descriptor]) -> Vec<u8> {
    let bodies: Vec<_> = descriptors.iter().filter_map(descriptor_body).collect();
    if bodies.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(HEADER_LEN + bodies.iter().map(|(_, b)| DESCRIPTOR_HEADER_LEN + pad8(b.len())).sum::<usize>());
    out.push(FORMAT_01);
    out.push(0);
    out.extend_from_slice(&service_action.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(icv);
    for (kind, body) in bodies {
        let pad = pad8(body.len()) - body.len();
        out.extend_from_slice(&kind.to_be_bytes());
        out.push(0);
        out.push(pad as u8);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out.resize(out.len() + pad, 0);
    }
    debug_assert_eq!(out.len() % 8, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPAN: DataSpan = DataSpan { start: 0, len: 10 };

    fn seg(d: Descriptor) -> Vec<u8> {
        encode_continuation(0x8886, &[0; ICV_LEN], &[d])
    }

    /// Goal: the byte layout of an SGL continuation. Method: hand-checked positions.
    #[test]
    fn sgl_bytes() {
        let s = seg(Descriptor::Layout(DataLayout::List(vec![Extent { offset: 100, len: 10 }])));
        assert_eq!(s.len(), 40 + 8 + 16);
        assert_eq!(&s[0..4], &[0x01, 0x00, 0x88, 0x86]);
        assert_eq!(&s[40..48], &[0x00, 0x01, 0, 0, 0, 0, 0, 16]);
        assert_eq!(s[63], 10);
        let c = decode_continuation(&s, 0x8886, SPAN).unwrap();
        assert_eq!(c.descriptors, vec![(40, Descriptor::Layout(DataLayout::List(vec![Extent { offset: 100, len: 10 }])))]);
    }

    /// Goal: each validation rule the seeds' target skipped is enforced.
    #[test]
    fn sgl_rules() {
        let bad = |extents: Vec<Extent>, span: DataSpan| {
            decode_continuation(&seg(Descriptor::Layout(DataLayout::List(extents))), 0x8886, span).unwrap_err()
        };
        // Sum differs from the CDB length.
        assert_eq!(bad(vec![Extent { offset: 0, len: 9 }], SPAN), DecodeError::param(ParamField::LayoutTotal, 48));
        // Zero length.
        assert_eq!(bad(vec![Extent { offset: 0, len: 0 }, Extent { offset: 0, len: 10 }], SPAN), DecodeError::param(ParamField::SglLength, 56));
        // Overflow.
        assert_eq!(bad(vec![Extent { offset: u64::MAX, len: 10 }], SPAN), DecodeError::param(ParamField::SglOffset, 48));
        // Empty list.
        assert_eq!(bad(vec![], SPAN), DecodeError::param(ParamField::SglLength, 48));
        // Wrong service action.
        let s = seg(Descriptor::Layout(DataLayout::List(vec![Extent { offset: 0, len: 10 }])));
        assert_eq!(decode_continuation(&s, 0x8885, SPAN).unwrap_err(), DecodeError::param(ParamField::ContinuationServiceAction, 2));
    }

    #[test]
    fn strided_rules() {
        let dec = |stride, block_len, span| decode_continuation(&seg(Descriptor::Layout(DataLayout::Strided { stride, block_len })), 0x8886, span);
        assert!(dec(10, 4, SPAN).is_ok());
        assert_eq!(dec(3, 4, SPAN).unwrap_err(), DecodeError::param(ParamField::Stride, 48));
        assert_eq!(dec(3, 0, SPAN).unwrap_err(), DecodeError::param(ParamField::BlockLength, 56));
        assert!(dec(u64::MAX / 2, 4, SPAN).is_err());
    }

    #[test]
    fn nested_rules() {
        let dec = |block_len, levels: Vec<(u64, u64)>, len| {
            decode_continuation(&seg(Descriptor::Layout(DataLayout::Nested { block_len, levels })), 0x8886, DataSpan { start: 0, len })
        };
        assert!(dec(2, vec![(3, 4), (2, 100)], 12).is_ok());
        // Short last block allowed.
        assert!(dec(2, vec![(3, 4), (2, 100)], 11).is_ok());
        // One block too few / too many.
        assert!(dec(2, vec![(3, 4), (2, 100)], 14).is_err());
        assert!(dec(2, vec![(3, 4), (2, 100)], 10).is_err());
        // Overlapping rows.
        assert!(dec(2, vec![(3, 4), (2, 8)], 12).is_err());
        // Too many levels.
        assert!(dec(1, vec![(1, 1); 9], 1).is_err());
    }
}
