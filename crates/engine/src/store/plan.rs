//! Planning list I/O: turning the pieces of a [`tessera_osd_proto::DataLayout`] into as few
//! system calls as possible. Pure, so it is tested without files.
//!
//! Pieces (after merging neighbours adjacent in both the object and the buffer) are sorted by
//! object offset and grouped into windows: a window ends where the next piece starts more than
//! `gap_max` bytes after it (and, between pieces that do not overlap, once it holds
//! [`WINDOW_PIECES_MAX`] pieces or spans [`SIEVE_SPAN_MAX`] bytes). Windows are disjoint in the
//! object, so their order does not matter; overlapping pieces always share a window, whose
//! step keeps their list order ("later wins"). Each window becomes one step:
//!
//! - **Vectored**: object-contiguous bytes, through the gaps for reads, with one
//!   preadv(2)/pwritev(2) whatever order the pieces have in the buffer;
//! - **Sieve**: one read of the window's span into a scratch buffer, the pieces copied out of it
//!   (READ) or into it in list order and the span written back (WRITE): two system calls
//!   however many pieces.
//!
//! The rule, measured by `tessera bench noncontig` (experiment 6, docs/noncontiguous.md "the
//! target's rule"), where a system call costs about as much as copying 4 KiB and an iovec
//! about as much as a small system call:
//!
//! - READ: gaps up to `gap_max` (config `read_gap_max_bytes`, 4 KiB) are read through; a window
//!   whose mean piece is under [`READ_SIEVE_PIECE_MAX`] is sieved (one pread, cheap copies),
//!   otherwise read vectored (large pieces land in place, only the gaps are thrown away).
//! - WRITE: gaps below [`WRITE_GAP_MAX`] (and below the file system's block) are sieved when the
//!   window's mean piece is at most [`WRITE_SIEVE_PIECE_MAX`]; a window with larger pieces is
//!   written one gap-free run at a time. Because no gap holds a whole block, sieving allocates
//!   exactly the blocks that writing piece by piece would: READ MAP and used capacity see no
//!   difference.

use std::ops::Range;

/// Maximum iovecs in one preadv/pwritev (Linux IOV_MAX).
pub const IOV_MAX: usize = 1024;
/// Pieces in one window (its read plan needs up to twice as many iovecs).
pub const WINDOW_PIECES_MAX: usize = IOV_MAX / 2;
/// Bytes one window may span when it could end there (the sieve's scratch buffer).
pub const SIEVE_SPAN_MAX: u64 = 4 << 20;
/// A read window whose mean piece is shorter than this is sieved.
pub const READ_SIEVE_PIECE_MAX: u64 = 1024;
/// Gaps a WRITE may sieve across: below one 4 KiB file-system block (see the module doc).
pub const WRITE_GAP_MAX: u64 = 4095;
/// A write window whose mean piece is at most this is sieved.
pub const WRITE_SIEVE_PIECE_MAX: u64 = 4096;

/// One piece of a list I/O: `len` bytes at `object_offset` in the object, at `buf_offset`
/// in the command's data buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub object_offset: u64,
    pub buf_offset: usize,
    pub len: usize,
}

impl Piece {
    fn end(&self) -> u64 {
        self.object_offset + self.len as u64
    }
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
}

/// One system-call group of a list I/O (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Vectored(Run),
    /// The span [object_offset, object_offset + len) through a scratch buffer; `pieces` in
    /// list order.
    Sieve { object_offset: u64, len: u64, pieces: Vec<Piece> },
}

/// Merges pieces that follow each other in the list and are adjacent in both the object and
/// the buffer.
pub fn merge_adjacent(pieces: &[Piece]) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for p in pieces.iter().filter(|p| p.len > 0) {
        if let Some(last) = out.last_mut() {
            if last.end() == p.object_offset && last.buf_offset + last.len == p.buf_offset {
                last.len += p.len;
                continue;
            }
        }
        out.push(*p);
    }
    out
}

/// A window: a range of `order` (indices into the merged list, sorted by object offset), and
/// facts about it.
struct Window {
    range: Range<usize>,
    start: u64,
    end: u64,
    overlaps: bool,
    gaps: bool,
    bytes: u64,
}

impl Window {
    fn span(&self) -> u64 {
        self.end - self.start
    }

    fn mean_piece(&self) -> u64 {
        self.bytes / self.range.len() as u64
    }

    /// Its pieces in list order, for a sieve.
    fn sieve(&self, merged: &[Piece], order: &[usize]) -> Step {
        let mut list = order[self.range.clone()].to_vec();
        if !is_sorted(&list) {
            list.sort_unstable();
        }
        Step::Sieve { object_offset: self.start, len: self.span(), pieces: list.iter().map(|&i| merged[i]).collect() }
    }

    /// Its pieces one at a time, in list order.
    fn one_by_one(&self, merged: &[Piece], order: &[usize]) -> Vec<Step> {
        let mut list = order[self.range.clone()].to_vec();
        list.sort_unstable();
        list.iter()
            .map(|&i| merged[i])
            .map(|p| Step::Vectored(Run { object_offset: p.object_offset, segments: vec![Segment::Buf(p.buf_offset..p.buf_offset + p.len)] }))
            .collect()
    }

    /// Vectored runs in object order (no overlaps), gaps up to `gap_max` read through.
    fn runs(&self, merged: &[Piece], order: &[usize], gap_max: u64) -> Vec<Step> {
        let mut out: Vec<Run> = Vec::new();
        let mut end = 0;
        for p in order[self.range.clone()].iter().map(|&i| merged[i]) {
            let range = p.buf_offset..p.buf_offset + p.len;
            match out.last_mut() {
                Some(run) if p.object_offset >= end && p.object_offset - end <= gap_max => {
                    let gap = p.object_offset - end;
                    if gap > 0 {
                        run.segments.push(Segment::Gap(gap));
                    }
                    match run.segments.last_mut() {
                        Some(Segment::Buf(last)) if gap == 0 && last.end == range.start => last.end = range.end,
                        _ => run.segments.push(Segment::Buf(range)),
                    }
                }
                _ => out.push(Run { object_offset: p.object_offset, segments: vec![Segment::Buf(range)] }),
            }
            end = p.end();
        }
        out.into_iter().map(Step::Vectored).collect()
    }
}

fn is_sorted(v: &[usize]) -> bool {
    v.windows(2).all(|w| w[0] <= w[1])
}

/// The merged pieces' indices by object offset, and the windows over them (see the module doc).
/// Lists usually arrive sorted (every strided or nested pattern does), so sorting is skipped
/// then.
fn windows(merged: &[Piece], gap_max: u64) -> (Vec<usize>, Vec<Window>) {
    let mut order: Vec<usize> = (0..merged.len()).collect();
    if !merged.windows(2).all(|w| w[0].object_offset <= w[1].object_offset) {
        order.sort_by_key(|&i| merged[i].object_offset);
    }
    let mut out: Vec<Window> = Vec::new();
    for (at, &i) in order.iter().enumerate() {
        let p = merged[i];
        if let Some(w) = out.last_mut() {
            let overlap = p.object_offset < w.end;
            let near = p.object_offset <= w.end.saturating_add(gap_max);
            let full = w.range.len() >= WINDOW_PIECES_MAX || p.end() - w.start > SIEVE_SPAN_MAX;
            if overlap || (near && !full) {
                w.overlaps |= overlap;
                w.gaps |= p.object_offset > w.end;
                w.end = w.end.max(p.end());
                w.bytes += p.len as u64;
                w.range.end = at + 1;
                continue;
            }
        }
        out.push(Window { range: at..at + 1, start: p.object_offset, end: p.end(), overlaps: false, gaps: false, bytes: p.len as u64 });
    }
    (order, out)
}

/// Plans a list write; `gap_max` is at most [`WRITE_GAP_MAX`] and below the file system block.
pub fn plan_write(pieces: &[Piece], gap_max: u64) -> Vec<Step> {
    let merged = merge_adjacent(pieces);
    let (order, windows) = windows(&merged, gap_max);
    let mut out = Vec::with_capacity(windows.len());
    for w in windows {
        if w.overlaps && w.span() > SIEVE_SPAN_MAX {
            // Too large to sieve: each piece on its own, in list order.
            out.extend(w.one_by_one(&merged, &order));
        } else if w.overlaps || (w.gaps && w.mean_piece() <= WRITE_SIEVE_PIECE_MAX) {
            out.push(w.sieve(&merged, &order));
        } else {
            out.extend(w.runs(&merged, &order, 0));
        }
    }
    out
}

/// Plans a list read; gaps up to `gap_max` bytes are read through.
pub fn plan_read(pieces: &[Piece], gap_max: u64) -> Vec<Step> {
    let merged = merge_adjacent(pieces);
    let (order, windows) = windows(&merged, gap_max);
    let mut out = Vec::with_capacity(windows.len());
    for w in windows {
        if w.span() <= SIEVE_SPAN_MAX && (w.overlaps || (w.gaps && w.mean_piece() < READ_SIEVE_PIECE_MAX)) {
            out.push(w.sieve(&merged, &order));
        } else {
            out.extend(w.runs(&merged, &order, gap_max));
        }
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

    fn vectored(object_offset: u64, segments: Vec<Segment>) -> Step {
        Step::Vectored(Run { object_offset, segments })
    }

    #[test]
    fn contiguous_list_is_one_run_with_one_segment() {
        let steps = plan_write(&[piece(0, 0, 4), piece(4, 4, 4), piece(8, 8, 4)], WRITE_GAP_MAX);
        assert_eq!(steps, vec![vectored(0, vec![Segment::Buf(0..12)])]);
    }

    #[test]
    fn reversed_pieces_write_as_one_vectored_run() {
        let steps = plan_write(&[piece(8, 0, 4), piece(0, 4, 8)], WRITE_GAP_MAX);
        assert_eq!(steps, vec![vectored(0, vec![Segment::Buf(4..12), Segment::Buf(0..4)])]);
    }

    #[test]
    fn overlapping_writes_sieve_in_list_order() {
        let steps = plan_write(&[piece(4, 0, 8), piece(0, 8, 8)], WRITE_GAP_MAX);
        assert_eq!(steps, vec![Step::Sieve { object_offset: 0, len: 12, pieces: vec![piece(4, 0, 8), piece(0, 8, 8)] }]);
    }

    #[test]
    fn small_strided_pieces_sieve_and_large_ones_do_not() {
        let small: Vec<Piece> = (0..1024).map(|i| piece(i * 1024, i as usize * 64, 64)).collect();
        let steps = plan_write(&small, WRITE_GAP_MAX);
        assert_eq!(steps.len(), 2, "two windows of 512 pieces");
        assert!(steps.iter().all(|s| matches!(s, Step::Sieve { .. })));
        assert_eq!(plan_read(&small, 4096).len(), 2);
        // 64 KiB pieces with 2-byte holes: written run by run, read through the holes.
        let large: Vec<Piece> = (0..4).map(|i| piece(i * 65538, i as usize * 65536, 65536)).collect();
        assert_eq!(plan_write(&large, WRITE_GAP_MAX).len(), 4);
        assert!(matches!(&plan_read(&large, 4096)[..], [Step::Vectored(r)] if r.segments.len() == 7));
        // Gaps of a block or more are never sieved on write.
        let sparse: Vec<Piece> = (0..4).map(|i| piece(i * 4160, i as usize * 64, 64)).collect();
        assert_eq!(plan_write(&sparse, WRITE_GAP_MAX).len(), 4);
    }

    #[test]
    fn far_reads_split_into_windows() {
        let steps = plan_read(&[piece(0, 0, 2), piece(10, 2, 2), piece(1_000_000, 4, 2)], 100);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0], Step::Sieve { object_offset: 0, len: 12, pieces: vec![piece(0, 0, 2), piece(10, 2, 2)] });
    }

    /// Executes steps against a model object, as the file store does.
    fn apply_write(object: &mut Vec<u8>, steps: &[Step], data: &[u8]) {
        for step in steps {
            match step {
                Step::Vectored(run) => {
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
                Step::Sieve { object_offset, len, pieces } => {
                    let (start, end) = (*object_offset as usize, (*object_offset + *len) as usize);
                    if object.len() < end {
                        object.resize(end, 0);
                    }
                    let mut span = object[start..end].to_vec();
                    for p in pieces {
                        let at = p.object_offset as usize - start;
                        span[at..at + p.len].copy_from_slice(&data[p.buf_offset..p.buf_offset + p.len]);
                    }
                    object[start..end].copy_from_slice(&span);
                }
            }
        }
    }

    fn apply_read(object: &[u8], steps: &[Step], buf: &mut [u8]) {
        for step in steps {
            match step {
                Step::Vectored(run) => {
                    let mut pos = run.object_offset as usize;
                    for s in &run.segments {
                        match s {
                            Segment::Buf(r) => {
                                buf[r.clone()].copy_from_slice(&object[pos..pos + r.len()]);
                                pos += r.len();
                            }
                            Segment::Gap(n) => pos += *n as usize,
                        }
                    }
                }
                Step::Sieve { object_offset, len, pieces } => {
                    let span = &object[*object_offset as usize..(*object_offset + *len) as usize];
                    for p in pieces {
                        let at = (p.object_offset - object_offset) as usize;
                        buf[p.buf_offset..p.buf_offset + p.len].copy_from_slice(&span[at..at + p.len]);
                    }
                }
            }
        }
    }

    fn list(raw: &[(u64, usize)]) -> (Vec<Piece>, usize) {
        let mut pieces = Vec::new();
        let mut at = 0;
        for (off, len) in raw {
            pieces.push(piece(*off, at, *len));
            at += len;
        }
        (pieces, at)
    }

    proptest! {
        /// Goal: a planned write leaves the object exactly as writing the pieces one by one
        /// in list order would, sieved or not, and never writes past the last piece.
        /// Method: random (possibly overlapping) lists over a small object, every gap limit.
        #[test]
        fn write_plan_equals_list_order(raw in proptest::collection::vec((0u64..6000, 1usize..3000), 1..40), gap_max in 0u64..=WRITE_GAP_MAX) {
            let (pieces, total) = list(&raw);
            let data: Vec<u8> = (0..total).map(|i| (i * 7 + 1) as u8).collect();
            let mut expected = vec![0xEEu8; 100];
            let mut planned = expected.clone();
            for p in &pieces {
                let one = [vectored(p.object_offset, vec![Segment::Buf(p.buf_offset..p.buf_offset + p.len)])];
                apply_write(&mut expected, &one, &data);
            }
            apply_write(&mut planned, &plan_write(&pieces, gap_max), &data);
            prop_assert_eq!(planned, expected);
        }

        /// Goal: a read plan fills every piece from the right object bytes. Method: random
        /// lists against a patterned object, every gap limit.
        #[test]
        fn read_plan_fills_every_piece(raw in proptest::collection::vec((0u64..6000, 1usize..3000), 1..40), gap_max in 0u64..8192) {
            let object: Vec<u8> = (0..9000u32).map(|i| (i * 3 + 5) as u8).collect();
            let (pieces, total) = list(&raw);
            let mut buf = vec![0u8; total];
            apply_read(&object, &plan_read(&pieces, gap_max), &mut buf);
            for p in &pieces {
                let o = p.object_offset as usize;
                prop_assert_eq!(&buf[p.buf_offset..p.buf_offset + p.len], &object[o..o + p.len]);
            }
        }
    }
}
