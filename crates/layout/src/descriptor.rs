//! Choosing the OSD data layout for one command: the cheapest descriptor that
//! [`DataLayout::for_each_extent`] expands to exactly the given object extents, in order.
//!
//! Seed 002's client picked contiguous for one piece, strided for equal sizes with equal gaps,
//! and an SGL otherwise. Tessera adds the nested strided descriptor for regular multi-level
//! patterns (a 2-D or 3-D subarray), which the seed's SGL sent as one entry per block.
//!
//! Rules the descriptors impose (osd-proto `continuation.rs`): strided needs
//! `stride >= block_len > 0` and only the last block may be short; nested needs each level's
//! stride to cover the span of the level inside it, at most `NESTED_LEVELS_MAX` levels, and
//! again only the very last block short. Strided and nested offsets only grow, so both start at
//! the first extent. An SGL's offsets are unsigned and relative to the CDB's starting address,
//! so its start is the lowest offset and the list keeps the caller's order.

// `% run != 0` rather than `is_multiple_of`: the workspace's rust-version is 1.80.
#![allow(clippy::manual_is_multiple_of)]

use tessera_osd_proto::DataLayout;
use tessera_types::limits::{NESTED_LEVELS_MAX, SGL_ENTRIES_MAX};
use thiserror::Error;

use crate::Extent;

/// Why no single descriptor can carry the extents.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum DescriptorError {
    #[error("no extents")]
    Empty,
    #[error("extent {index} has length 0")]
    ZeroLength { index: usize },
    #[error("extent {index} ends past 2^64")]
    Overflow { index: usize },
    #[error("{count} irregular extents exceed the SGL bound {SGL_ENTRIES_MAX}; split the command")]
    TooManyExtents { count: usize },
}

/// Returns (starting byte address, layout) for a command carrying `extents` in order.
pub fn choose_descriptor(extents: &[Extent]) -> Result<(u64, DataLayout), DescriptorError> {
    let first = extents.first().ok_or(DescriptorError::Empty)?;
    for (index, e) in extents.iter().enumerate() {
        if e.len == 0 {
            return Err(DescriptorError::ZeroLength { index });
        }
        if e.offset.checked_add(e.len).is_none() {
            return Err(DescriptorError::Overflow { index });
        }
    }
    if extents.len() == 1 {
        return Ok((first.offset, DataLayout::Contiguous));
    }
    if let Some(levels) = regular_levels(extents) {
        let block_len = first.len;
        let layout = match levels.as_slice() {
            [(_, stride)] => DataLayout::Strided { stride: *stride, block_len },
            _ => DataLayout::Nested { block_len, levels },
        };
        return Ok((first.offset, layout));
    }
    if extents.len() as u64 > SGL_ENTRIES_MAX {
        return Err(DescriptorError::TooManyExtents { count: extents.len() });
    }
    let start = extents.iter().map(|e| e.offset).min().unwrap_or(first.offset);
    let list = extents.iter().map(|e| Extent { offset: e.offset - start, len: e.len }).collect();
    Ok((start, DataLayout::List(list)))
}

/// The (count, stride) levels, innermost first, when the extents are equal blocks (the last may
/// be shorter) on a regular grid with non-overlapping levels; `None` otherwise. Each level is the
/// longest run of equal steps from the start of the current sequence; the next level looks at
/// the first element of every run.
fn regular_levels(extents: &[Extent]) -> Option<Vec<(u64, u64)>> {
    let block_len = extents[0].len;
    let (last, body) = extents.split_last()?;
    if body.iter().any(|e| e.len != block_len) || last.len > block_len {
        return None;
    }
    let base = extents[0].offset;
    let mut points: Vec<u64> = Vec::with_capacity(extents.len());
    for e in extents {
        points.push(e.offset.checked_sub(base)?);
    }
    let mut levels = Vec::new();
    let mut span = block_len; // bytes one instance of the current level covers
    while points.len() > 1 {
        if levels.len() == NESTED_LEVELS_MAX as usize {
            return None;
        }
        let stride = points[1].checked_sub(points[0])?;
        if stride < span {
            return None;
        }
        let run = 1 + points.windows(2).take_while(|w| w[1].checked_sub(w[0]) == Some(stride)).count();
        if points.len() % run != 0 {
            return None;
        }
        for group in points.chunks_exact(run) {
            for (i, p) in group.iter().enumerate() {
                if group[0].checked_add(i as u64 * stride) != Some(*p) {
                    return None;
                }
            }
        }
        levels.push((run as u64, stride));
        span += (run as u64 - 1) * stride;
        points = points.iter().step_by(run).copied().collect();
    }
    Some(levels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(offset: u64, len: u64) -> Extent {
        Extent { offset, len }
    }

    fn expands(extents: &[Extent]) -> Vec<Extent> {
        let (start, layout) = choose_descriptor(extents).unwrap();
        let total = extents.iter().map(|e| e.len).sum();
        layout.extents(start, total)
    }

    #[test]
    fn picks_each_kind() {
        assert_eq!(choose_descriptor(&[e(7, 3)]), Ok((7, DataLayout::Contiguous)));
        assert_eq!(choose_descriptor(&[e(10, 4), e(20, 4), e(30, 2)]), Ok((10, DataLayout::Strided { stride: 10, block_len: 4 })));
        let grid = [e(0, 2), e(4, 2), e(100, 2), e(104, 2)];
        assert_eq!(choose_descriptor(&grid), Ok((0, DataLayout::Nested { block_len: 2, levels: vec![(2, 4), (2, 100)] })));
        assert_eq!(
            choose_descriptor(&[e(50, 1), e(10, 2)]),
            Ok((10, DataLayout::List(vec![e(40, 1), e(0, 2)])))
        );
        assert_eq!(choose_descriptor(&[]), Err(DescriptorError::Empty));
        assert_eq!(choose_descriptor(&[e(0, 0)]), Err(DescriptorError::ZeroLength { index: 0 }));
    }

    #[test]
    fn overlapping_blocks_fall_back_to_a_list() {
        // Stride 2 < block 4: a strided descriptor would be refused by the decoder.
        assert!(matches!(choose_descriptor(&[e(0, 4), e(2, 4)]), Ok((0, DataLayout::List(_)))));
        // Short block in the middle.
        assert!(matches!(choose_descriptor(&[e(0, 4), e(10, 2), e(20, 4)]), Ok((0, DataLayout::List(_)))));
    }

    fn arbitrary_extents() -> impl Strategy<Value = Vec<Extent>> {
        prop::collection::vec((0u64..1 << 20, 1u64..64).prop_map(|(o, l)| e(o, l)), 1..40)
    }

    fn grid_extents() -> impl Strategy<Value = Vec<Extent>> {
        // A random 1..3-level grid, optionally with a short last block.
        (1u64..16, prop::collection::vec((1u64..5, 0u64..40), 1..4), any::<bool>(), 0u64..1000).prop_map(
            |(block, dims, short, base)| {
                let mut pts = vec![0u64];
                let mut span = block;
                for (count, gap) in dims {
                    let stride = span + gap;
                    pts = (0..count).flat_map(|i| pts.iter().map(move |p| p + i * stride)).collect();
                    span += (count - 1) * stride;
                }
                let n = pts.len();
                pts.iter()
                    .enumerate()
                    .map(|(i, p)| e(base + p, if short && i + 1 == n && block > 1 { block - 1 } else { block }))
                    .collect()
            },
        )
    }

    proptest! {
        /// Goal: whatever descriptor is chosen expands to exactly the input. Method: random
        /// lists, expanded with osd-proto's own `for_each_extent`.
        #[test]
        fn any_list_expands_to_itself(extents in arbitrary_extents()) {
            prop_assert_eq!(expands(&extents), extents);
        }

        /// Goal: regular grids are recognised (never sent as an SGL) and still expand exactly.
        #[test]
        fn grids_are_strided_or_nested(extents in grid_extents()) {
            let (_, layout) = choose_descriptor(&extents).unwrap();
            prop_assert!(!matches!(layout, DataLayout::List(_)), "{:?} -> {:?}", extents, layout);
            prop_assert_eq!(expands(&extents), extents);
        }
    }
}
