//! List-I/O planning: a file-level extent list -> one object-local piece list per slot.
//!
//! The caller's buffer is the file extents laid end to end in the order given (the MPI-IO and
//! POSIX lio convention). Every piece records its object offset, its length and where its
//! bytes sit in that buffer, so a read can scatter each node's reply straight into place and a
//! write can gather a node's Data-Out from the buffer without an intermediate copy.
//!
//! Order: a slot's pieces follow the order of the file extents, never sorted. Bytes of one file
//! offset always land on the same slot, so with overlapping write extents the last one still
//! wins on the object, exactly as on a plain file. The wire data of one command is the
//! concatenation of its pieces in this order.

use thiserror::Error;

use crate::stripe::StripeLayout;
use crate::Extent;

/// Why a file extent list cannot be planned.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("file extent {index} ends past 2^64")]
    ExtentOverflow { index: usize },
    #[error("the extents total more than 2^64 bytes")]
    TotalOverflow,
}

/// One contiguous run on one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub object_offset: u64,
    pub len: u64,
    /// Offset of the piece's first byte in the caller's linear buffer.
    pub buffer_offset: u64,
}

/// The part of one request that goes to one slot's object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerOsdPlan {
    pub slot: u32,
    pub pieces: Vec<Piece>,
}

impl PerOsdPlan {
    /// Bytes this slot's command carries.
    pub fn total_len(&self) -> u64 {
        self.pieces.iter().map(|p| p.len).sum()
    }

    /// The object-local extents in order, neighbours that touch merged (a file range longer than
    /// one row puts back-to-back units on each object). The data stream is unchanged by merging,
    /// so this is what [`crate::choose_descriptor`] should see.
    pub fn object_extents(&self) -> Vec<Extent> {
        let mut out: Vec<Extent> = Vec::with_capacity(self.pieces.len());
        for p in &self.pieces {
            match out.last_mut() {
                Some(last) if last.offset + last.len == p.object_offset => last.len += p.len,
                _ => out.push(Extent { offset: p.object_offset, len: p.len }),
            }
        }
        out
    }
}

/// Splits `file_extents` (zero-length ones are skipped) into per-slot piece lists. Only slots
/// that receive bytes appear, in increasing slot order.
pub fn plan(layout: &StripeLayout, file_extents: &[Extent]) -> Result<Vec<PerOsdPlan>, PlanError> {
    let mut per_slot: Vec<Vec<Piece>> = vec![Vec::new(); layout.stripe_count() as usize];
    let mut buffer_offset = 0u64;
    for (index, e) in file_extents.iter().enumerate() {
        let end = e.offset.checked_add(e.len).ok_or(PlanError::ExtentOverflow { index })?;
        let mut at = e.offset;
        let mut buf = buffer_offset;
        while at < end {
            let pos = layout.locate(at);
            let len = layout.run_len(at).min(end - at);
            let pieces = &mut per_slot[pos.slot as usize];
            // A run continuing the previous piece in both object and buffer is the same piece.
            match pieces.last_mut() {
                Some(last) if last.object_offset + last.len == pos.object_offset && last.buffer_offset + last.len == buf => {
                    last.len += len
                }
                _ => pieces.push(Piece { object_offset: pos.object_offset, len, buffer_offset: buf }),
            }
            at += len;
            buf += len;
        }
        buffer_offset = buffer_offset.checked_add(e.len).ok_or(PlanError::TotalOverflow)?;
    }
    Ok(per_slot
        .into_iter()
        .enumerate()
        .filter(|(_, pieces)| !pieces.is_empty())
        .map(|(slot, pieces)| PerOsdPlan { slot: slot as u32, pieces })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(offset: u64, len: u64) -> Extent {
        Extent { offset, len }
    }

    #[test]
    fn one_range_over_two_rows() {
        // S = 4, C = 2, file [2, 14): slot 0 gets file 2..4 and 8..12, slot 1 gets 4..8 and 12..14.
        let l = StripeLayout::new(4, 2).unwrap();
        let p = plan(&l, &[e(2, 12)]).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(
            p[0].pieces,
            vec![Piece { object_offset: 2, len: 2, buffer_offset: 0 }, Piece { object_offset: 4, len: 4, buffer_offset: 6 }]
        );
        assert_eq!(p[0].object_extents(), vec![e(2, 6)]);
        assert_eq!(
            p[1].pieces,
            vec![Piece { object_offset: 0, len: 4, buffer_offset: 2 }, Piece { object_offset: 4, len: 2, buffer_offset: 10 }]
        );
    }

    #[test]
    fn single_object_merges_pieces() {
        let l = StripeLayout::new(4, 1).unwrap();
        let p = plan(&l, &[e(0, 10), e(10, 3), e(20, 0)]).unwrap();
        assert_eq!(p, vec![PerOsdPlan { slot: 0, pieces: vec![Piece { object_offset: 0, len: 13, buffer_offset: 0 }] }]);
    }

    #[test]
    fn overflow_is_an_error() {
        let l = StripeLayout::new(4, 1).unwrap();
        assert_eq!(plan(&l, &[e(u64::MAX, 2)]), Err(PlanError::ExtentOverflow { index: 0 }));
    }
}
