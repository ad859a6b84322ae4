//! Planning list I/O: turning the pieces of a [`tessera_osd_proto::DataLayout`] into as few
//! system calls as possible. Pure, so it is tested without files.
//!
//! Writes: pieces adjacent in both the object and the buffer merge. When no two pieces
//! overlap, the order of writing does not matter, so pieces are sorted by object offset and
//! every object-contiguous run becomes one pwritev(2) whatever the buffer order. When pieces
//! overlap, list order decides the result ("later wins"), so they are written one merged
//! piece at a time in list order.
//!
//! Reads: order never matters (each piece has its own place in the buffer), so pieces are
//! sorted by object offset and runs are formed across small gaps: one preadv(2) reads the
//! gap into a scratch buffer rather than paying a second system call.

use std::ops::Range;

/// Maximum iovecs in one preadv/pwritev (Linux IOV_MAX).
pub const IOV_MAX: usize = 1024;

/// One piece of a list I/O: `len` bytes at `object_offset` in the object, at `buf_offset`
/// in the command's data buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub object_offset: u64,
    pub buf_offset: usize,
    pub len: usize,
}

/// One segment of a run: a slice of the command's buffer, or (reads only) a gap of the
/// object to read and throw away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Buf(Range<usize>),
    Gap(u64),
}

/// Object-contiguous bytes starting at `object_offset`, moved by one vectored system call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub object_offset: u64,
    pub segments: Vec<Segment>,
}

impl Run {
    pub fn len(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Buf(r) => r.len() as u64,
                Segment::Gap(n) => *n,
            })
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn end(&self) -> u64 {
        self.object_offset + self.len()
    }
}

/// Merges pieces that follow each other in the list and are adjacent in both the object and
/// the buffer.
pub fn merge_adjacent(pieces: &[Piece]) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for p in pieces.iter().filter(|p| p.len > 0) {
        if let Some(last) = out.last_mut() {
            if last.object_offset + last.len as u64 == p.object_offset && last.buf_offset + last.len == p.buf_offset {
                last.len += p.len;
                continue;
            }
        }
        out.push(*p);
    }
    out
}

fn sorted_by_object(pieces: &[Piece]) -> Vec<Piece> {
    let mut sorted = pieces.to_vec();
    sorted.sort_by_key(|p| p.object_offset);
    sorted
}

fn overlaps(sorted: &[Piece]) -> bool {
    sorted.windows(2).any(|w| w[0].object_offset + w[0].len as u64 > w[1].object_offset)
}

/// Plans a list write (see the module comment).
pub fn plan_write(pieces: &[Piece]) -> Vec<Run> {
    let merged = merge_adjacent(pieces);
    let sorted = sorted_by_object(&merged);
    if overlaps(&sorted) {
        return merged
            .iter()
            .map(|p| Run { object_offset: p.object_offset, segments: vec![Segment::Buf(p.buf_offset..p.buf_offset + p.len)] })
            .collect();
    }
    runs(&sorted, 0)
}

/// Plans a list read (see the module comment); gaps up to `gap_max` bytes are read through.
pub fn plan_read(pieces: &[Piece], gap_max: u64) -> Vec<Run> {
    let sorted = sorted_by_object(&merge_adjacent(pieces));
    runs(&sorted, gap_max)
}

fn runs(sorted: &[Piece], gap_max: u64) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for p in sorted {
        let range = p.buf_offset..p.buf_offset + p.len;
        if let Some(run) = out.last_mut() {
            let end = run.end();
            let fits = run.segments.len() + 2 <= IOV_MAX;
            if p.object_offset >= end && p.object_offset - end <= gap_max && fits {
                let gap = p.object_offset - end;
                if gap > 0 {
                    run.segments.push(Segment::Gap(gap));
                }
                match run.segments.last_mut() {
                    Some(Segment::Buf(last)) if gap == 0 && last.end == range.start => last.end = range.end,
                    _ => run.segments.push(Segment::Buf(range)),
                }
                continue;
            }
        }
        out.push(Run { object_offset: p.object_offset, segments: vec![Segment::Buf(range)] });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn piece(object_offset: u64, buf_offset: usize, len: usize) -> Piece {
        Piece { object_offset, buf_offset, len }
    }

    #[test]
    fn contiguous_list_is_one_run_with_one_segment() {
        let runs = plan_write(&[piece(0, 0, 4), piece(4, 4, 4), piece(8, 8, 4)]);
        assert_eq!(runs, vec![Run { object_offset: 0, segments: vec![Segment::Buf(0..12)] }]);
    }

    #[test]
    fn reversed_pieces_write_as_one_vectored_run() {
        let runs = plan_write(&[piece(8, 0, 4), piece(0, 4, 8)]);
        assert_eq!(runs, vec![Run { object_offset: 0, segments: vec![Segment::Buf(4..12), Segment::Buf(0..4)] }]);
    }

    #[test]
    fn overlapping_writes_keep_list_order() {
        let runs = plan_write(&[piece(0, 0, 8), piece(4, 8, 8)]);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].object_offset, 0);
        assert_eq!(runs[1].object_offset, 4);
    }

    #[test]
    fn strided_reads_read_through_small_gaps() {
        let runs = plan_read(&[piece(0, 0, 2), piece(10, 2, 2), piece(1_000_000, 4, 2)], 100);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].segments, vec![Segment::Buf(0..2), Segment::Gap(8), Segment::Buf(2..4)]);
    }

    /// Applies runs to a model object, to check a plan moves exactly the listed bytes.
    fn apply_write(object: &mut Vec<u8>, runs: &[Run], data: &[u8]) {
        for run in runs {
            let mut at = run.object_offset as usize;
            for s in &run.segments {
                let Segment::Buf(r) = s else { panic!("gap in a write plan") };
                if object.len() < at + r.len() {
                    object.resize(at + r.len(), 0);
                }
                object[at..at + r.len()].copy_from_slice(&data[r.clone()]);
                at += r.len();
            }
        }
    }

    proptest! {
        /// Goal: a planned write leaves the object exactly as writing the pieces one by one
        /// in list order would. Method: random (possibly overlapping) lists over a small object.
        #[test]
        fn write_plan_equals_list_order(list in proptest::collection::vec((0u64..64, 1usize..16), 1..12)) {
            let mut pieces = Vec::new();
            let mut at = 0;
            for (off, len) in &list {
                pieces.push(piece(*off, at, *len));
                at += len;
            }
            let data: Vec<u8> = (0..at).map(|i| (i * 7 + 1) as u8).collect();
            let mut expected = Vec::new();
            for p in &pieces {
                apply_write(&mut expected, &[Run { object_offset: p.object_offset, segments: vec![Segment::Buf(p.buf_offset..p.buf_offset + p.len)] }], &data);
            }
            let mut planned = Vec::new();
            apply_write(&mut planned, &plan_write(&pieces), &data);
            prop_assert_eq!(planned, expected);
        }

        /// Goal: a read plan fills every piece from the right object bytes. Method: random
        /// lists against a patterned object, gaps read through up to 8 bytes.
        #[test]
        fn read_plan_fills_every_piece(list in proptest::collection::vec((0u64..64, 1usize..16), 1..12)) {
            let object: Vec<u8> = (0..128u32).map(|i| (i * 3 + 5) as u8).collect();
            let mut pieces = Vec::new();
            let mut at = 0;
            for (off, len) in &list {
                pieces.push(piece(*off, at, *len));
                at += len;
            }
            let mut buf = vec![0u8; at];
            for run in plan_read(&pieces, 8) {
                let mut pos = run.object_offset as usize;
                for s in &run.segments {
                    match s {
                        Segment::Buf(r) => { buf[r.clone()].copy_from_slice(&object[pos..pos + r.len()]); pos += r.len(); }
                        Segment::Gap(n) => pos += *n as usize,
                    }
                }
            }
            for p in &pieces {
                let o = p.object_offset as usize;
                prop_assert_eq!(&buf[p.buf_offset..p.buf_offset + p.len], &object[o..o + p.len]);
            }
        }
    }
}
