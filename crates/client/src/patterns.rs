//! Regular file-side access patterns that expand to extent lists: a strided vector (MPI's
//! vector type; seed 000 §3.2's strided DDT, here at file level) and an N-dimensional subarray
//! of a row-major array (MPI's subarray type in C order; the BTIO shape of issue 4).
//!
//! Both are validated once, when built, so their extents never overflow; they expand lazily,
//! in transfer order, merging blocks that touch. The client plans them like any extent list,
//! and on each object the pieces of a regular pattern come out regular again (when blocks do
//! not straddle stripe units), so each OSD gets one strided or nested command.

use thiserror::Error;

use tessera_layout::Extent;

/// Most dimensions a [`Subarray`] may have: as many as a nested descriptor has levels, plus the
/// contiguous innermost row.
pub const SUBARRAY_DIMS_MAX: usize = tessera_types::limits::NESTED_LEVELS_MAX as usize + 1;

/// Why a pattern was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PatternError {
    #[error("the pattern reaches past 2^64 bytes of file")]
    EndOverflow,
    #[error("the pattern's blocks total more than 2^64 - 1 bytes")]
    TotalOverflow,
    #[error("the element size is 0")]
    ZeroElementSize,
    #[error("{dims} array dimensions, {start} subarray starts and {sizes} subarray sizes: need one of each per dimension")]
    DimensionMismatch { dims: usize, start: usize, sizes: usize },
    #[error("{0} dimensions; a subarray has 1..={SUBARRAY_DIMS_MAX}")]
    DimensionCount(usize),
    #[error("dimension {axis}: subarray start {start} + size {size} exceeds the array's {dim}")]
    OutOfBounds { axis: usize, start: u64, size: u64, dim: u64 },
    #[error("the array holds more than 2^64 - 1 bytes")]
    ArrayOverflow,
}

/// `count` blocks of `block_len` bytes, block i at `offset + i * stride`. Any stride is allowed:
/// below the block length the blocks overlap (a write's later block wins, as on a plain file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridedPattern {
    offset: u64,
    block_len: u64,
    stride: u64,
    count: u64,
}

impl StridedPattern {
    pub fn new(offset: u64, block_len: u64, stride: u64, count: u64) -> Result<StridedPattern, PatternError> {
        count.checked_mul(block_len).ok_or(PatternError::TotalOverflow)?;
        if count > 0 && block_len > 0 {
            (count - 1)
                .checked_mul(stride)
                .and_then(|last| last.checked_add(offset))
                .and_then(|last| last.checked_add(block_len))
                .ok_or(PatternError::EndOverflow)?;
        }
        Ok(StridedPattern { offset, block_len, stride, count })
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn block_len(&self) -> u64 {
        self.block_len
    }

    pub fn stride(&self) -> u64 {
        self.stride
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes the pattern transfers (cannot overflow: checked when built).
    pub fn total_len(&self) -> u64 {
        self.count * self.block_len
    }

    /// The blocks in order; back-to-back blocks (stride == block length) come out as one.
    pub fn extents(&self) -> impl Iterator<Item = Extent> {
        let p = *self;
        let (count, block_len) = match (p.block_len, p.stride == p.block_len) {
            (0, _) => (0, 0),
            (_, true) => (p.count.min(1), p.total_len()),
            (_, false) => (p.count, p.block_len),
        };
        (0..count).map(move |i| Extent { offset: p.offset + i * p.stride, len: block_len })
    }
}

/// The part `start[i]..start[i] + sizes[i]` (in elements, per dimension) of a row-major array
/// of `dims` elements of `element_size` bytes whose first element is at file offset `offset`.
/// The last dimension varies fastest, as in C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subarray {
    offset: u64,
    element_size: u64,
    dims: Vec<u64>,
    start: Vec<u64>,
    sizes: Vec<u64>,
}

impl Subarray {
    pub fn new(offset: u64, element_size: u64, dims: &[u64], start: &[u64], sizes: &[u64]) -> Result<Subarray, PatternError> {
        if dims.len() != start.len() || dims.len() != sizes.len() {
            return Err(PatternError::DimensionMismatch { dims: dims.len(), start: start.len(), sizes: sizes.len() });
        }
        if dims.is_empty() || dims.len() > SUBARRAY_DIMS_MAX {
            return Err(PatternError::DimensionCount(dims.len()));
        }
        if element_size == 0 {
            return Err(PatternError::ZeroElementSize);
        }
        for (axis, ((&dim, &s), &size)) in dims.iter().zip(start).zip(sizes).enumerate() {
            let inside = matches!(s.checked_add(size), Some(end) if end <= dim);
            if !inside {
                return Err(PatternError::OutOfBounds { axis, start: s, size, dim });
            }
        }
        let array_len = dims.iter().try_fold(element_size, |a, &d| a.checked_mul(d)).ok_or(PatternError::ArrayOverflow)?;
        offset.checked_add(array_len).ok_or(PatternError::EndOverflow)?;
        Ok(Subarray { offset, element_size, dims: dims.to_vec(), start: start.to_vec(), sizes: sizes.to_vec() })
    }

    /// Bytes the subarray transfers (no larger than the array, so it fits).
    pub fn total_len(&self) -> u64 {
        self.sizes.iter().product::<u64>() * self.element_size
    }

    /// The subarray's rows in row-major order. Trailing dimensions the subarray spans whole
    /// make one longer run, so a subarray of whole rows is one extent per plane, and the whole
    /// array is one extent.
    pub fn extents(&self) -> SubarrayExtents {
        let n = self.dims.len();
        // Bytes one step along each dimension moves.
        let mut step = vec![self.element_size; n];
        for axis in (0..n - 1).rev() {
            step[axis] = step[axis + 1] * self.dims[axis + 1];
        }
        // The innermost dimension not spanned whole (or 0): it and everything inside it is one run.
        let run_axis = (1..n).rev().find(|&a| self.start[a] != 0 || self.sizes[a] != self.dims[a]).unwrap_or(0);
        let first = self.offset + self.start.iter().zip(&step).map(|(s, st)| s * st).sum::<u64>();
        let empty = self.sizes.contains(&0);
        SubarrayExtents {
            counts: self.sizes[..run_axis].to_vec(),
            steps: step[..run_axis].to_vec(),
            index: vec![0; run_axis],
            next: if empty { None } else { Some(first) },
            run_len: self.sizes[run_axis] * step[run_axis],
        }
    }
}

/// Iterator over a [`Subarray`]'s runs (an odometer over the dimensions outside the run).
#[derive(Clone, Debug)]
pub struct SubarrayExtents {
    counts: Vec<u64>,
    steps: Vec<u64>,
    index: Vec<u64>,
    next: Option<u64>,
    run_len: u64,
}

impl Iterator for SubarrayExtents {
    type Item = Extent;

    fn next(&mut self) -> Option<Extent> {
        let offset = self.next?;
        // Advance the innermost outer dimension; carry outwards.
        self.next = None;
        let mut at = offset;
        for axis in (0..self.index.len()).rev() {
            if self.index[axis] + 1 < self.counts[axis] {
                self.index[axis] += 1;
                self.next = Some(at + self.steps[axis]);
                break;
            }
            at -= self.index[axis] * self.steps[axis];
            self.index[axis] = 0;
        }
        Some(Extent { offset, len: self.run_len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(offset: u64, len: u64) -> Extent {
        Extent { offset, len }
    }

    #[test]
    fn strided_blocks() {
        let p = StridedPattern::new(100, 4, 10, 3).unwrap();
        assert_eq!(p.extents().collect::<Vec<_>>(), vec![e(100, 4), e(110, 4), e(120, 4)]);
        assert_eq!(p.total_len(), 12);
        // Back to back: one extent. Overlapping: kept as given.
        assert_eq!(StridedPattern::new(0, 8, 8, 1000).unwrap().extents().collect::<Vec<_>>(), vec![e(0, 8000)]);
        assert_eq!(StridedPattern::new(0, 8, 2, 2).unwrap().extents().collect::<Vec<_>>(), vec![e(0, 8), e(2, 8)]);
        assert_eq!(StridedPattern::new(5, 0, 3, 9).unwrap().extents().count(), 0);
        assert_eq!(StridedPattern::new(5, 4, 3, 0).unwrap().extents().count(), 0);
        assert_eq!(StridedPattern::new(u64::MAX - 10, 4, 4, 3), Err(PatternError::EndOverflow));
        assert!(StridedPattern::new(u64::MAX - 12, 4, 4, 3).is_ok());
        assert_eq!(StridedPattern::new(0, 1 << 33, 1 << 33, 1 << 32), Err(PatternError::TotalOverflow));
    }

    #[test]
    fn subarray_rows() {
        // A 4 x 6 array of 2-byte elements at 1000; rows 1..3, columns 2..5.
        let s = Subarray::new(1000, 2, &[4, 6], &[1, 2], &[2, 3]).unwrap();
        assert_eq!(s.extents().collect::<Vec<_>>(), vec![e(1000 + 12 + 4, 6), e(1000 + 24 + 4, 6)]);
        assert_eq!(s.total_len(), 12);
        // Whole rows of a 3-D array: one run per plane.
        let s = Subarray::new(0, 1, &[3, 4, 5], &[0, 1, 0], &[3, 2, 5]).unwrap();
        assert_eq!(s.extents().collect::<Vec<_>>(), vec![e(5, 10), e(25, 10), e(45, 10)]);
        // The whole array: one extent.
        assert_eq!(Subarray::new(7, 4, &[3, 4], &[0, 0], &[3, 4]).unwrap().extents().collect::<Vec<_>>(), vec![e(7, 48)]);
        assert_eq!(Subarray::new(0, 1, &[3, 4], &[1, 1], &[0, 2]).unwrap().extents().count(), 0);
    }

    #[test]
    fn subarray_errors() {
        assert_eq!(Subarray::new(0, 1, &[3], &[0, 0], &[1]), Err(PatternError::DimensionMismatch { dims: 1, start: 2, sizes: 1 }));
        assert_eq!(Subarray::new(0, 1, &[], &[], &[]), Err(PatternError::DimensionCount(0)));
        assert_eq!(Subarray::new(0, 0, &[3], &[0], &[1]), Err(PatternError::ZeroElementSize));
        assert_eq!(Subarray::new(0, 1, &[3, 4], &[0, 3], &[1, 2]), Err(PatternError::OutOfBounds { axis: 1, start: 3, size: 2, dim: 4 }));
        assert_eq!(Subarray::new(0, 1, &[3], &[u64::MAX], &[2]), Err(PatternError::OutOfBounds { axis: 0, start: u64::MAX, size: 2, dim: 3 }));
        assert_eq!(Subarray::new(0, 1 << 40, &[1 << 30], &[0], &[1]), Err(PatternError::ArrayOverflow));
        assert_eq!(Subarray::new(u64::MAX, 1, &[2], &[0], &[1]), Err(PatternError::EndOverflow));
        let ten = [2u64; SUBARRAY_DIMS_MAX + 1];
        assert_eq!(Subarray::new(0, 1, &ten, &ten.map(|_| 0), &ten), Err(PatternError::DimensionCount(SUBARRAY_DIMS_MAX + 1)));
    }

    /// Every element of a subarray, in row-major order, by brute force: (file offset) per element.
    fn elements(s: &Subarray) -> Vec<u64> {
        let mut out = vec![s.offset];
        for axis in 0..s.dims.len() {
            let inner: u64 = s.dims[axis + 1..].iter().product::<u64>() * s.element_size;
            out = out.iter().flat_map(|&o| (s.start[axis]..s.start[axis] + s.sizes[axis]).map(move |i| o + i * inner)).collect();
        }
        out
    }

    proptest! {
        /// Goal: the runs cover exactly the subarray's bytes in row-major order. Method: expand
        /// the runs to bytes and compare with every element's bytes listed by brute force.
        #[test]
        fn subarray_runs_are_its_elements_in_order(
            element_size in 1u64..5,
            shape in prop::collection::vec((1u64..6, any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..5),
            offset in 0u64..100,
        ) {
            let dims: Vec<u64> = shape.iter().map(|s| s.0).collect();
            let start: Vec<u64> = shape.iter().map(|(d, a, _)| a.index(*d as usize) as u64).collect();
            let sizes: Vec<u64> = shape.iter().zip(&start).map(|((d, _, b), s)| b.index((d - s + 1) as usize) as u64).collect();
            let s = Subarray::new(offset, element_size, &dims, &start, &sizes).unwrap();
            let bytes: Vec<u64> = s.extents().flat_map(|x| x.offset..x.offset + x.len).collect();
            let expect: Vec<u64> = elements(&s).into_iter().flat_map(|o| o..o + element_size).collect();
            prop_assert_eq!(s.total_len(), expect.len() as u64);
            prop_assert_eq!(bytes, expect);
            // Runs never touch: the merging is complete.
            let runs: Vec<Extent> = s.extents().collect();
            prop_assert!(runs.windows(2).all(|w| w[0].offset + w[0].len != w[1].offset));
        }
    }
}
