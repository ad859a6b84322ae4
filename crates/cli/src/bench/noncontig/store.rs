//! Experiment 6, the target's side of a list: how an OSD should move n small pieces between
//! its page cache and the command buffer. Measured on a file in the temporary directory (the
//! file system the OSD's objects live in), for pieces of 64 B and 4 KiB separated by gaps of
//! 2 B to 64 KiB:
//!
//! - WRITE: one pwrite(2) per piece, against read-modify-write of the covering span ("sieve":
//!   pread the span, patch the pieces in, pwrite the span: two system calls whatever n);
//! - READ: one pread(2) per piece, against one preadv(2) that reads the gaps into a scratch
//!   buffer, against pread of the span followed by copying the pieces out;
//! - both: what the engine's `FileStore` does with the same pieces (its rule, see
//!   docs/noncontiguous.md, "the target's rule").
//!
//! Vectored I/O alone cannot merge pieces separated by holes: pwritev writes one contiguous
//! range. Its win (object-adjacent pieces in any buffer order become one call) needs no
//! measurement: it is one call instead of n for the same bytes.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use anyhow::{ensure, Result};
use serde_json::json;
use tessera_engine::{FileStore, ObjectData, Piece};
use tessera_types::ObjectAddr;

use super::timing::{interleaved, median, reps_for, Variant};
use crate::bench::report::{Report, Series};

/// Piece sizes measured: the headline 64 B and a page.
pub const PIECES: [usize; 2] = [64, 4096];
const ADDR: ObjectAddr = ObjectAddr { partition_id: tessera_types::PartitionId(0x10000), object_id: tessera_types::ObjectId(0x10000) };

pub struct Outcome {
    /// Largest gap at which the sieve write beat per-piece writes, 64-byte pieces (None: never).
    pub write_sieve_wins_to: Option<usize>,
    /// Largest gap at which reading through gaps beat per-piece reads.
    pub read_through_wins_to: Option<usize>,
    pub series: Vec<Series>,
}

pub fn run(quick: bool, report: &mut Report) -> Result<Outcome> {
    let (rounds, budget, count) = if quick { (3, 0.005, 64) } else { (9, 0.03, 256) };
    let gaps: Vec<usize> = if quick { vec![2, 1024, 65536] } else { vec![2, 64, 256, 1024, 4096, 16384, 65536] };
    let dir = crate::children::scratch_dir("tessera-bench-store-", None)?;
    let store = FileStore::open(&dir.path().join("objects"), 16, tessera_engine::EngineConfig::default().read_gap_max_bytes)?;
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(dir.path().join("plain"))?;
    let mut series: Vec<Series> = ["write per piece", "write sieve", "write engine", "read per piece", "read through gaps", "read span+copy", "read engine"]
        .iter()
        .map(|n| Series { name: (*n).into(), points: Vec::new() })
        .collect();
    let (mut write_sieve_wins_to, mut read_through_wins_to) = (None, None);
    let pieces_sizes: &[usize] = if quick { &PIECES[..1] } else { &PIECES };
    for (&piece, &gap) in pieces_sizes.iter().flat_map(|p| gaps.iter().map(move |g| (p, g))) {
        let stride = piece + gap;
        let span = stride * (count - 1) + piece;
        let pieces: Vec<Piece> = (0..count).map(|i| Piece { object_offset: (i * stride) as u64, buf_offset: i * piece, len: piece }).collect();
        let data: Vec<u8> = (0..count * piece).map(|i| (i * 7 + gap) as u8).collect();
        let fill = vec![0xEEu8; span];
        file.write_all_at(&fill, 0)?;
        store.write_at(ADDR, 0, &fill)?;
        let (pieces, data, file, store) = (&pieces, &data, &file, &store);
        let scratch = std::cell::RefCell::new((vec![0u8; span], vec![0u8; count * piece]));
        let scratch = &scratch;
        let mut variants: Vec<Variant<'_>> = vec![
            Box::new(move || write_per_piece(file, pieces, data)),
            Box::new(move || write_sieve(file, pieces, data, &mut scratch.borrow_mut().0)),
            Box::new(move || Ok(store.write_pieces(ADDR, pieces, data)?)),
            Box::new(move || read_per_piece(file, pieces, &mut scratch.borrow_mut().1)),
            Box::new(move || read_through_gaps(file, pieces, &mut scratch.borrow_mut().1)),
            Box::new(move || {
                let s = &mut *scratch.borrow_mut();
                read_span_copy(file, pieces, &mut s.0, &mut s.1)
            }),
            Box::new(move || Ok(store.read_pieces(ADDR, pieces, &mut scratch.borrow_mut().1)?)),
        ];
        let reps = reps_for(budget, &mut variants[0])?;
        let t = interleaved(rounds, reps, &mut variants)?;
        drop(variants);
        // The writes left the pieces in both files; every read strategy returns them.
        let mut got = vec![0u8; count * piece];
        read_per_piece(file, pieces, &mut got)?;
        ensure!(&got == data, "the file holds other bytes than the writes wrote");
        for (name, read) in [("through gaps", read_through_gaps as fn(&File, &[Piece], &mut [u8]) -> Result<()>), ("span+copy", |f, p, b| {
            let mut span = vec![0u8; (p[p.len() - 1].object_offset - p[0].object_offset) as usize + p[0].len];
            read_span_copy(f, p, &mut span, b)
        })] {
            got.fill(0);
            read(file, pieces, &mut got)?;
            ensure!(&got == data, "reading {name} returned other bytes");
        }
        got.fill(0);
        store.read_pieces(ADDR, pieces, &mut got)?;
        ensure!(&got == data, "the engine's store holds other bytes than its writes wrote");
        let us: Vec<f64> = t.iter().map(|v| median(v) * 1e6).collect();
        report.row(json!({
            "piece_bytes": piece, "gap_bytes": gap, "pieces": count, "span_bytes": span,
            "write_per_piece_us": us[0], "write_sieve_us": us[1], "write_engine_us": us[2],
            "read_per_piece_us": us[3], "read_through_gaps_us": us[4], "read_span_copy_us": us[5], "read_engine_us": us[6],
        }));
        if piece == PIECES[0] && us[1] < us[0] {
            write_sieve_wins_to = Some(gap);
        }
        if piece == PIECES[0] && us[4] < us[3] {
            read_through_wins_to = Some(gap);
        }
        if piece == PIECES[0] {
            for (s, v) in series.iter_mut().zip(&us) {
                s.points.push((gap as f64, v / count as f64));
            }
        }
    }
    report.print_table(
        &format!("The target's side: pieces separated by gaps, per-piece system calls vs sieving (us per list of {count} pieces)"),
        &["piece_bytes", "gap_bytes", "span_bytes", "write_per_piece_us", "write_sieve_us", "write_engine_us", "read_per_piece_us", "read_through_gaps_us", "read_span_copy_us", "read_engine_us"],
    );
    Ok(Outcome { write_sieve_wins_to, read_through_wins_to, series })
}

fn write_per_piece(file: &File, pieces: &[Piece], data: &[u8]) -> Result<()> {
    for p in pieces {
        file.write_all_at(&data[p.buf_offset..p.buf_offset + p.len], p.object_offset)?;
    }
    Ok(())
}

/// Read-modify-write of the covering span (pieces sorted, as the pattern is).
fn write_sieve(file: &File, pieces: &[Piece], data: &[u8], span: &mut [u8]) -> Result<()> {
    let start = pieces[0].object_offset;
    file.read_exact_at(span, start)?;
    for p in pieces {
        let at = (p.object_offset - start) as usize;
        span[at..at + p.len].copy_from_slice(&data[p.buf_offset..p.buf_offset + p.len]);
    }
    file.write_all_at(span, start)?;
    Ok(())
}

fn read_per_piece(file: &File, pieces: &[Piece], buf: &mut [u8]) -> Result<()> {
    for p in pieces {
        file.read_exact_at(&mut buf[p.buf_offset..p.buf_offset + p.len], p.object_offset)?;
    }
    Ok(())
}

/// One preadv per 1024 iovecs, the gaps landing in one small scratch buffer.
fn read_through_gaps(file: &File, pieces: &[Piece], buf: &mut [u8]) -> Result<()> {
    let gap = pieces.get(1).map_or(0, |p| (p.object_offset - pieces[0].object_offset) as usize - pieces[0].len);
    let mut scratch = vec![0u8; gap];
    let mut iovs = Vec::with_capacity(2 * pieces.len());
    let base = buf.as_mut_ptr();
    for (i, p) in pieces.iter().enumerate() {
        if i > 0 && gap > 0 {
            iovs.push(libc::iovec { iov_base: scratch.as_mut_ptr().cast(), iov_len: gap });
        }
        // SAFETY (pointer arithmetic): buf_offset + len <= buf.len() for every piece.
        iovs.push(libc::iovec { iov_base: unsafe { base.add(p.buf_offset) }.cast(), iov_len: p.len });
    }
    let mut at = pieces[0].object_offset;
    for chunk in iovs.chunks(1024) {
        let want: usize = chunk.iter().map(|v| v.iov_len).sum();
        // SAFETY: every iovec points into `buf` or `scratch`, both live and mutably borrowed here.
        let n = unsafe { libc::preadv(file.as_raw_fd(), chunk.as_ptr(), chunk.len() as libc::c_int, at as libc::off_t) };
        ensure!(n as usize == want, "short preadv: {n} of {want}");
        at += want as u64;
    }
    Ok(())
}

fn read_span_copy(file: &File, pieces: &[Piece], span: &mut [u8], buf: &mut [u8]) -> Result<()> {
    let start = pieces[0].object_offset;
    file.read_exact_at(span, start)?;
    for p in pieces {
        let at = (p.object_offset - start) as usize;
        buf[p.buf_offset..p.buf_offset + p.len].copy_from_slice(&span[at..at + p.len]);
    }
    Ok(())
}
