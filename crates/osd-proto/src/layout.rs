//! Expanding a [`DataLayout`] into object byte ranges. One definition, used by the engine to
//! execute a list and by the client to check what it sends, so the two can never disagree.

use crate::command::{DataLayout, Extent};

impl DataLayout {
    /// Calls `f(object_offset, len)` for each piece, in list order, for a command whose CDB
    /// gives `start` (starting byte address) and `total_len` (data bytes). The decoder has
    /// already checked that the pieces sum to `total_len` and that nothing overflows, so this
    /// never fails; it stops after `total_len` bytes.
    pub fn for_each_extent(&self, start: u64, total_len: u64, mut f: impl FnMut(u64, u64)) {
        match self {
            DataLayout::Contiguous => {
                if total_len > 0 {
                    f(start, total_len)
                }
            }
            DataLayout::List(extents) => {
                for e in extents {
                    f(start + e.offset, e.len);
                }
            }
            DataLayout::Strided { stride, block_len } => {
                let mut left = total_len;
                let mut at = start;
                while left > 0 {
                    let n = left.min(*block_len);
                    f(at, n);
                    left -= n;
                    at += stride;
                }
            }
            DataLayout::Nested { block_len, levels } => {
                let mut left = total_len;
                let mut index = vec![0u64; levels.len()];
                while left > 0 {
                    let offset: u64 = index.iter().zip(levels).map(|(i, (_, stride))| i * stride).sum();
                    let n = left.min(*block_len);
                    f(start + offset, n);
                    left -= n;
                    // Odometer increment, innermost level first.
                    for (level, i) in index.iter_mut().enumerate() {
                        *i += 1;
                        if *i < levels[level].0 {
                            break;
                        }
                        *i = 0;
                    }
                }
            }
        }
    }

    /// How many pieces [`DataLayout::for_each_extent`] calls back with for `total_len` bytes,
    /// so a caller can size its piece list once instead of growing it.
    pub fn piece_count(&self, total_len: u64) -> u64 {
        match self {
            DataLayout::Contiguous => u64::from(total_len > 0),
            DataLayout::List(extents) => extents.len() as u64,
            DataLayout::Strided { block_len, .. } | DataLayout::Nested { block_len, .. } => total_len.div_ceil((*block_len).max(1)),
        }
    }

    /// The pieces as a vector (convenience for tests and small lists).
    pub fn extents(&self, start: u64, total_len: u64) -> Vec<Extent> {
        let mut out = Vec::new();
        self.for_each_extent(start, total_len, |offset, len| out.push(Extent { offset, len }));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piece_count_is_what_the_walk_yields() {
        let layouts = [
            DataLayout::Contiguous,
            DataLayout::List(vec![Extent { offset: 5, len: 3 }, Extent { offset: 0, len: 7 }]),
            DataLayout::Strided { stride: 10, block_len: 4 },
            DataLayout::Nested { block_len: 2, levels: vec![(3, 4), (2, 100)] },
        ];
        for l in &layouts {
            for total in [0u64, 1, 4, 9, 10, 12] {
                if matches!(l, DataLayout::List(_)) && total != 10 {
                    continue; // a list's lengths always sum to the total
                }
                assert_eq!(l.piece_count(total), l.extents(0, total).len() as u64, "{l:?} over {total}");
            }
        }
    }

    #[test]
    fn strided_last_block_is_short() {
        let l = DataLayout::Strided { stride: 10, block_len: 4 };
        let v: Vec<_> = l.extents(100, 10).iter().map(|e| (e.offset, e.len)).collect();
        assert_eq!(v, vec![(100, 4), (110, 4), (120, 2)]);
    }

    #[test]
    fn nested_walks_inner_level_first() {
        // 2 rows of 3 blocks of 2 bytes: inner stride 4, outer stride 100.
        let l = DataLayout::Nested { block_len: 2, levels: vec![(3, 4), (2, 100)] };
        let v: Vec<_> = l.extents(0, 12).iter().map(|e| e.offset).collect();
        assert_eq!(v, vec![0, 4, 8, 100, 104, 108]);
    }

    #[test]
    fn list_is_relative_to_start() {
        let l = DataLayout::List(vec![Extent { offset: 5, len: 1 }, Extent { offset: 0, len: 2 }]);
        let v: Vec<_> = l.extents(1000, 3).iter().map(|e| (e.offset, e.len)).collect();
        assert_eq!(v, vec![(1005, 1), (1000, 2)]);
    }
}
