//! From one slot's piece list to the OSD commands that carry it: pure, so it is tested without
//! a cluster.
//!
//! A slot's data stream is its pieces back to back, in plan order (tessera-layout `plan.rs`).
//! Each [`SlotCommand`] carries one contiguous range of that stream (`stream_start`, `len`),
//! described on the object by a starting address and a [`DataLayout`]. Commands are split only
//! when the stream exceeds the transfer cap or an SGL would exceed `SGL_ENTRIES_MAX`, and
//! [`Mode`] decides which descriptors are allowed:
//!
//! | mode | per command |
//! |---|---|
//! | `Iterative` | one contiguous object extent (the baseline: one command per piece) |
//! | `Sgl` | an SGL whenever there is more than one extent (seed 002's list I/O) |
//! | `Strided` | a strided or nested descriptor when the extents are regular; otherwise one command per extent, never an SGL, so a benchmark of this mode measures the descriptor |
//! | `Auto` | `tessera_layout::choose_descriptor`: contiguous, strided, nested, else SGL |
//!
//! A regular slot (strided or nested, however many blocks) is one command up to the cap. Past
//! the cap it is cut on the pattern's own boundaries (whole blocks, whole rows, whole planes), so
//! every command is still strided or nested rather than an SGL of the blocks a blind cut leaves.

use tessera_layout::{choose_descriptor, DescriptorError, Extent, PerOsdPlan, Piece};
use tessera_osd_proto::DataLayout;
use tessera_types::limits::SGL_ENTRIES_MAX;

/// Which OSD data layouts a non-contiguous request may use (see the module table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    Iterative,
    Sgl,
    Strided,
    #[default]
    Auto,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Iterative, Mode::Sgl, Mode::Strided, Mode::Auto];
}

/// One READ or WRITE on one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotCommand {
    /// Where this command's data starts in the slot's data stream.
    pub stream_start: u64,
    pub len: u64,
    /// The CDB's starting byte address on the object.
    pub offset: u64,
    pub layout: DataLayout,
}

/// The commands for one slot, in stream order. `max_transfer` >= 1 bounds each command's data.
pub fn slot_commands(plan: &PerOsdPlan, mode: Mode, max_transfer: u64) -> Result<Vec<SlotCommand>, DescriptorError> {
    assert!(max_transfer >= 1, "a command must carry at least one byte");
    let extents = plan.object_extents();
    let regular = match mode {
        Mode::Auto | Mode::Strided => regular_groups(&extents, max_transfer)?,
        Mode::Iterative | Mode::Sgl => None,
    };
    let mut out = Vec::new();
    for (stream_start, group) in regular.unwrap_or_else(|| groups(&extents, mode, max_transfer)) {
        describe(stream_start, &group, mode, &mut out)?;
    }
    Ok(out)
}

/// Runs of a slot's extents, each with its stream start: one command's worth each.
type Groups = Vec<(u64, Vec<Extent>)>;

/// When the extents form one strided or nested pattern, its groups of whole blocks, rows or
/// planes of at most `max_transfer` bytes, each again regular; `None` when the pattern is not
/// regular or a single block exceeds the cap (then blocks are split like any extent).
///
/// The pattern has levels (count c_i, stride s_i), innermost first; one instance of level j
/// holds b_j = c_0 * ... * c_{j-1} blocks. The largest j whose instance fits the cap sets the
/// cut: m = cap / (instance bytes) instances of level j per command, never crossing an
/// instance of level j + 1, so each group is the same grid with its level j count cut to m.
fn regular_groups(extents: &[Extent], max_transfer: u64) -> Result<Option<Groups>, DescriptorError> {
    let total: u64 = extents.iter().map(|e| e.len).sum();
    let (block_len, levels) = match choose_descriptor(extents) {
        Ok((_, DataLayout::Strided { stride, block_len })) => (block_len, vec![(extents.len() as u64, stride)]),
        Ok((_, DataLayout::Nested { block_len, levels })) => (block_len, levels),
        // Contiguous and lists are split by `groups`; too many irregular extents is no error yet.
        Ok(_) | Err(DescriptorError::TooManyExtents { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    if total <= max_transfer {
        return Ok(Some(vec![(0, extents.to_vec())]));
    }
    if block_len > max_transfer {
        return Ok(None);
    }
    // blocks[j] = blocks in one instance of level j (blocks[0] = 1: a block).
    let mut blocks = vec![1u64];
    for &(count, _) in &levels {
        blocks.push(blocks.last().copied().unwrap_or(1).saturating_mul(count));
    }
    // The whole pattern exceeds the cap, so the largest level that fits is below the top.
    let j = (0..levels.len()).rev().find(|&j| blocks[j].saturating_mul(block_len) <= max_transfer).unwrap_or(0);
    let per_group = (max_transfer / (blocks[j] * block_len)).min(levels[j].0) * blocks[j];
    let outer = blocks[j + 1];
    let mut out = Vec::new();
    let mut stream = 0u64;
    let n = extents.len() as u64;
    for instance in (0..n).step_by(outer as usize) {
        let instance_end = (instance + outer).min(n);
        for first in (instance..instance_end).step_by(per_group as usize) {
            let group = extents[first as usize..(first + per_group).min(instance_end) as usize].to_vec();
            let len: u64 = group.iter().map(|e| e.len).sum();
            out.push((stream, group));
            stream += len;
        }
    }
    Ok(Some(out))
}

/// Splits the extents into runs of at most `max_transfer` bytes and `SGL_ENTRIES_MAX` extents
/// (one extent per run in `Iterative` mode), each with its stream start.
fn groups(extents: &[Extent], mode: Mode, max_transfer: u64) -> Groups {
    let per_group = if mode == Mode::Iterative { 1 } else { SGL_ENTRIES_MAX as usize };
    let mut out = Vec::new();
    let (mut stream, mut group_start, mut group_len) = (0u64, 0u64, 0u64);
    let mut group: Vec<Extent> = Vec::new();
    for e in extents {
        let mut done = 0;
        while done < e.len {
            let take = (e.len - done).min(max_transfer - group_len);
            group.push(Extent { offset: e.offset + done, len: take });
            done += take;
            group_len += take;
            stream += take;
            if group_len == max_transfer || group.len() == per_group {
                out.push((group_start, std::mem::take(&mut group)));
                group_start = stream;
                group_len = 0;
            }
        }
    }
    if !group.is_empty() {
        out.push((group_start, group));
    }
    out
}

fn describe(stream_start: u64, group: &[Extent], mode: Mode, out: &mut Vec<SlotCommand>) -> Result<(), DescriptorError> {
    let len = group.iter().map(|e| e.len).sum();
    let chosen = match mode {
        Mode::Iterative | Mode::Sgl if group.len() == 1 => (group[0].offset, DataLayout::Contiguous),
        Mode::Iterative => unreachable!("iterative groups hold one extent"),
        Mode::Sgl => sgl(group),
        Mode::Auto | Mode::Strided => match choose_descriptor(group) {
            Err(DescriptorError::TooManyExtents { .. }) => {
                // Only a group cut from a regular pattern can be this long; should its cut not
                // read as regular, it still goes out, as lists of bounded length.
                let mut at = stream_start;
                for part in group.chunks(SGL_ENTRIES_MAX as usize) {
                    describe(at, part, mode, out)?;
                    at += part.iter().map(|e| e.len).sum::<u64>();
                }
                return Ok(());
            }
            Err(e) => return Err(e),
            Ok((_, DataLayout::List(_))) if mode == Mode::Strided => {
                // Irregular: one contiguous command per extent rather than an SGL.
                let mut at = stream_start;
                for e in group {
                    out.push(SlotCommand { stream_start: at, len: e.len, offset: e.offset, layout: DataLayout::Contiguous });
                    at += e.len;
                }
                return Ok(());
            }
            Ok(chosen) => chosen,
        },
    };
    out.push(SlotCommand { stream_start, len, offset: chosen.0, layout: chosen.1 });
    Ok(())
}

/// An SGL: offsets are unsigned and relative to the CDB start, so the start is the lowest
/// offset; the list keeps the stream order.
fn sgl(group: &[Extent]) -> (u64, DataLayout) {
    let start = group.iter().map(|e| e.offset).min().unwrap_or(0);
    (start, DataLayout::List(group.iter().map(|e| Extent { offset: e.offset - start, len: e.len }).collect()))
}

/// Where the slot stream range [stream_start, stream_start + len) sits in the caller's buffer:
/// (buffer offset, length) runs in stream order, neighbours that touch in the buffer merged.
/// `piece_starts[i]` is the stream offset of `pieces[i]`.
pub fn buffer_runs(pieces: &[Piece], piece_starts: &[u64], stream_start: u64, len: u64) -> Vec<(u64, u64)> {
    debug_assert_eq!(pieces.len(), piece_starts.len());
    let end = stream_start + len;
    let first = piece_starts.partition_point(|&s| s <= stream_start).saturating_sub(1);
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (p, &s) in pieces[first..].iter().zip(&piece_starts[first..]) {
        if s >= end {
            break;
        }
        let a = stream_start.max(s);
        let b = end.min(s + p.len);
        if a >= b {
            continue;
        }
        let run = (p.buffer_offset + (a - s), b - a);
        match out.last_mut() {
            Some(last) if last.0 + last.1 == run.0 => last.1 += run.1,
            _ => out.push(run),
        }
    }
    out
}

/// Stream offsets of each piece (prefix sums of their lengths).
pub fn piece_starts(pieces: &[Piece]) -> Vec<u64> {
    let mut at = 0;
    pieces
        .iter()
        .map(|p| {
            let s = at;
            at += p.len;
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_layout::{plan, StripeLayout};

    fn e(offset: u64, len: u64) -> Extent {
        Extent { offset, len }
    }

    /// The object extents a command list covers, in stream order.
    fn expand(cmds: &[SlotCommand]) -> Vec<Extent> {
        let mut out: Vec<Extent> = Vec::new();
        let mut stream = 0;
        for c in cmds {
            assert_eq!(c.stream_start, stream, "commands follow the stream");
            stream += c.len;
            for x in c.layout.extents(c.offset, c.len) {
                match out.last_mut() {
                    Some(l) if l.offset + l.len == x.offset => l.len += x.len,
                    _ => out.push(x),
                }
            }
        }
        out
    }

    #[test]
    fn modes_pick_their_descriptors() {
        let l = StripeLayout::new(4, 2).unwrap();
        // File extents hitting slot 0 at object 0..2, 4..6, 8..10: a regular stride.
        let p = plan(&l, &[e(0, 2), e(8, 2), e(16, 2)]).unwrap();
        let auto = slot_commands(&p[0], Mode::Auto, 1 << 20).unwrap();
        assert_eq!(auto, vec![SlotCommand { stream_start: 0, len: 6, offset: 0, layout: DataLayout::Strided { stride: 4, block_len: 2 } }]);
        assert_eq!(slot_commands(&p[0], Mode::Strided, 1 << 20).unwrap(), auto);
        assert_eq!(slot_commands(&p[0], Mode::Iterative, 1 << 20).unwrap().len(), 3);
        let sgl = slot_commands(&p[0], Mode::Sgl, 1 << 20).unwrap();
        assert!(matches!(&sgl[..], [SlotCommand { layout: DataLayout::List(l), .. }] if l.len() == 3));
        // Irregular: Strided falls back to one command per extent, Auto to an SGL.
        let p = plan(&l, &[e(8, 2), e(0, 1)]).unwrap();
        assert_eq!(slot_commands(&p[0], Mode::Strided, 1 << 20).unwrap().len(), 2);
        assert!(matches!(&slot_commands(&p[0], Mode::Auto, 1 << 20).unwrap()[..], [SlotCommand { layout: DataLayout::List(_), .. }]));
    }

    #[test]
    fn buffer_runs_follow_pieces() {
        let pieces = [
            Piece { object_offset: 0, len: 4, buffer_offset: 10 },
            Piece { object_offset: 8, len: 4, buffer_offset: 14 },
            Piece { object_offset: 20, len: 4, buffer_offset: 0 },
        ];
        let starts = piece_starts(&pieces);
        assert_eq!(starts, vec![0, 4, 8]);
        assert_eq!(buffer_runs(&pieces, &starts, 0, 12), vec![(10, 8), (0, 4)]);
        assert_eq!(buffer_runs(&pieces, &starts, 2, 8), vec![(12, 6), (0, 2)]);
        assert_eq!(buffer_runs(&pieces, &starts, 9, 1), vec![(1, 1)]);
    }

    /// One object's plan holding exactly `extents` (which must not touch one another).
    fn slot(extents: &[Extent]) -> PerOsdPlan {
        let mut at = 0;
        let pieces = extents
            .iter()
            .map(|x| {
                let p = Piece { object_offset: x.offset, len: x.len, buffer_offset: at };
                at += x.len;
                p
            })
            .collect();
        PerOsdPlan { slot: 0, pieces }
    }

    fn is_regular(c: &SlotCommand) -> bool {
        matches!(c.layout, DataLayout::Strided { .. } | DataLayout::Nested { .. } | DataLayout::Contiguous)
    }

    #[test]
    fn many_blocks_under_the_cap_are_one_strided_command() {
        // More blocks than an SGL may hold: still one strided command, not one per SGL's worth.
        let n = SGL_ENTRIES_MAX + 1000;
        let p = slot(&(0..n).map(|i| e(i * 3, 1)).collect::<Vec<_>>());
        for mode in [Mode::Auto, Mode::Strided] {
            let cmds = slot_commands(&p, mode, 1 << 20).unwrap();
            assert_eq!(cmds, vec![SlotCommand { stream_start: 0, len: n, offset: 0, layout: DataLayout::Strided { stride: 3, block_len: 1 } }]);
        }
        // The SGL mode has to split at the list bound.
        assert_eq!(slot_commands(&p, Mode::Sgl, 1 << 20).unwrap().len(), 2);
    }

    #[test]
    fn regular_patterns_past_the_cap_are_cut_on_their_own_boundaries() {
        // 3 planes of 5 rows of 4 blocks of 10 bytes (one row = 40 bytes, one plane = 200),
        // the very last block short.
        let mut grid: Vec<Extent> =
            (0..3).flat_map(|z| (0..5).flat_map(move |y| (0..4).map(move |x| e(z * 10_000 + y * 100 + x * 16, 10)))).collect();
        grid.last_mut().unwrap().len = 7;
        let p = slot(&grid);
        // Cap 130: three whole rows (120 bytes) per command, never across a plane: 3 + 2 rows per plane.
        let cmds = slot_commands(&p, Mode::Auto, 130).unwrap();
        assert_eq!(cmds.len(), 6);
        assert!(cmds.iter().all(is_regular), "{cmds:?}");
        assert_eq!(cmds[0].layout, DataLayout::Nested { block_len: 10, levels: vec![(4, 16), (3, 100)] });
        assert_eq!((cmds[1].offset, cmds[1].len), (300, 80));
        assert_eq!((cmds[2].offset, cmds[2].len), (10_000, 120));
        assert_eq!(expand(&cmds), p.object_extents());
        // Cap 25: two blocks per command, never across a row.
        let cmds = slot_commands(&p, Mode::Strided, 25).unwrap();
        assert_eq!(cmds.len(), 30);
        assert!(cmds.iter().all(|c| matches!(c.layout, DataLayout::Strided { stride: 16, block_len: 10 })), "{cmds:?}");
        assert_eq!(cmds.last().unwrap().len, 17);
        // A block larger than the cap: blocks are split like any extent.
        let cmds = slot_commands(&p, Mode::Auto, 8).unwrap();
        assert!(cmds.iter().all(|c| c.len <= 8));
        assert_eq!(expand(&cmds), p.object_extents());
    }

    /// A random 1..3-level grid of blocks (the last one maybe short), as a slot's extents.
    fn grids() -> impl Strategy<Value = Vec<Extent>> {
        (1u64..12, prop::collection::vec((1u64..6, 1u64..30), 1..4), any::<bool>()).prop_map(|(block, dims, short)| {
            let mut pts = vec![0u64];
            let mut span = block;
            for (count, gap) in dims {
                let stride = span + gap;
                pts = (0..count).flat_map(|i| pts.iter().map(move |p| p + i * stride)).collect();
                span += (count - 1) * stride;
            }
            let n = pts.len();
            pts.iter().enumerate().map(|(i, &p)| e(p, if short && i + 1 == n && block > 1 { block - 1 } else { block })).collect()
        })
    }

    proptest! {
        /// Goal: a regular slot stays regular at any cap at least one block long: every command
        /// is strided, nested or contiguous, within the cap, and together they carry the stream.
        #[test]
        fn regular_slots_stay_regular_at_any_cap(grid in grids(), cap in 1u64..400) {
            let p = slot(&grid);
            let block = grid[0].len;
            for mode in [Mode::Auto, Mode::Strided] {
                let cmds = slot_commands(&p, mode, cap).unwrap();
                prop_assert!(cmds.iter().all(|c| c.len <= cap && c.len > 0));
                prop_assert_eq!(expand(&cmds), p.object_extents());
                if cap >= block {
                    prop_assert!(cmds.iter().all(is_regular), "cap {}: {:?}", cap, cmds);
                }
            }
        }

        /// Goal: in every mode and at every cap, the commands carry exactly the slot's stream,
        /// in order, each within the cap. Method: random extent lists over random layouts.
        #[test]
        fn every_mode_covers_the_stream(
            unit in 1u64..64, count in 1u32..5,
            extents in prop::collection::vec((0u64..2000, 0u64..200), 1..20),
            cap in 1u64..300,
        ) {
            let l = StripeLayout::new(unit, count).unwrap();
            let extents: Vec<Extent> = extents.into_iter().map(|(o, n)| e(o, n)).collect();
            for p in plan(&l, &extents).unwrap() {
                for mode in Mode::ALL {
                    let cmds = slot_commands(&p, mode, cap).unwrap();
                    prop_assert!(cmds.iter().all(|c| c.len <= cap && c.len > 0));
                    prop_assert_eq!(cmds.iter().map(|c| c.len).sum::<u64>(), p.total_len());
                    prop_assert_eq!(expand(&cmds), p.object_extents());
                }
            }
        }
    }
}
