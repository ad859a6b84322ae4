//! Goal: list I/O gives exactly the bytes a plain byte array gives, in every mode, for every
//! form of the API: random extent lists (unsorted, overlapping, crossing stripe units and
//! objects), random strided patterns and random 2-D and 3-D subarrays, written from and read
//! into random lists of memory regions. Later overlapping pieces win on write; reads return
//! pieces in list order; bytes past end of file read as zeros.
//!
//! Method: one in-process cluster of four real OSD targets and a metadata server on loopback.
//! Each case draws a stripe layout (1..4 objects, units 4..64 KiB, not only powers of two), a
//! file that already holds some bytes, a write shape and a separate read shape (so reads also
//! reach holes and past end of file), memory cuts, and the API form to call. Each case writes
//! one fresh file per mode; every file must equal the model afterwards, and each file is read
//! back in a different mode, each read equal to the model. Some cases use the smallest
//! transfer cap (64 KiB) so commands are split.

mod common;

use common::*;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tessera_client::{Client, ClusterConfig, Extent, File, Mode, StridedPattern, Subarray};

const KIB: u64 = 1024;
/// Rows of stripe units a case's file spans.
const ROWS: u64 = 6;
const CASES: u32 = 64;

/// The file side of one list I/O.
#[derive(Clone, Debug)]
enum Shape {
    List(Vec<Extent>),
    Strided(StridedPattern),
    Subarray(Subarray),
}

impl Shape {
    fn extents(&self) -> Vec<Extent> {
        match self {
            Shape::List(l) => l.clone(),
            Shape::Strided(p) => p.extents().collect(),
            Shape::Subarray(s) => s.extents().collect(),
        }
    }
}

/// Which call carries the I/O.
#[derive(Clone, Copy, Debug)]
enum Api {
    /// read_list / write_list over the memory cuts.
    Regions,
    /// read_extents / write_extents over one buffer.
    OneBuffer,
    /// pread_vec / pwrite_vec: one memory region per extent.
    Vectors,
    /// read_strided / read_subarray and their writes, when the shape is a pattern.
    Pattern,
}

#[derive(Clone, Debug)]
struct Case {
    unit: u64,
    count: u32,
    small_cap: bool,
    existing_len: u64,
    write: Shape,
    read: Shape,
    /// Cut points in the memory stream (as fractions); equal points make empty regions.
    cuts: Vec<Index>,
    api: Api,
    seed: u64,
}

fn span(unit: u64, count: u32) -> u64 {
    ROWS * unit * count as u64
}

fn layouts() -> impl Strategy<Value = (u64, u32)> {
    let unit = prop_oneof![(12u32..=16).prop_map(|s| 1u64 << s), (4u64..=64).prop_map(|k| k * KIB), 4096u64..=65536];
    (unit, 1u32..=4)
}

/// Random extents: mostly anywhere in the span, some crowded into a few units so they overlap.
fn lists(unit: u64, span: u64) -> impl Strategy<Value = Shape> {
    let len = prop_oneof![1u64..64, 1..=unit, 1..=2 * unit];
    let crowded = (4 * unit).min(span);
    let window = prop_oneof![Just(span), Just(crowded)];
    (window, prop::collection::vec((any::<Index>(), len), 1..16)).prop_map(move |(window, raw)| {
        Shape::List(
            raw.into_iter()
                .map(|(at, len)| {
                    let offset = at.index(window as usize) as u64;
                    Extent { offset, len: len.min(span - offset) }
                })
                .collect(),
        )
    })
}

/// Strided patterns: strides that divide the unit with blocks that stay inside a unit (regular
/// on every object), arbitrary strides and offsets, back-to-back blocks and overlapping blocks.
fn strided(unit: u64, span: u64) -> impl Strategy<Value = Shape> {
    let block = prop_oneof![1u64..64, 1u64..1024, 1..=unit / 2, 1..=2 * unit];
    (block, 0u32..6, any::<Index>(), 0u8..5, 1u64..=120, any::<Index>()).prop_map(move |(block, shift, pick, kind, count, at)| {
        let anywhere = at.index(span as usize) as u64;
        let (stride, offset, block) = match kind {
            // Aligned: every block inside one unit, so each object sees a plain strided list.
            0 => {
                let stride = (unit >> shift).max(1);
                let block = block.min(stride);
                let row = at.index((span / stride) as usize) as u64;
                (stride, row * stride + pick.index((stride - block + 1) as usize) as u64, block)
            }
            1 => (block + pick.index(4096) as u64, anywhere, block),
            2 => (block, anywhere, block),
            3 => ((unit >> shift).max(block), anywhere, block),
            // Overlapping blocks.
            _ => (pick.index(block as usize) as u64, anywhere, block),
        };
        let block = block.min(span - offset);
        let fits = (span - offset - block).checked_div(stride).map_or(count, |n| n + 1);
        // Overlapping blocks could repeat a large block many times; keep the data under 512 KiB.
        let count = count.min(fits).min((512 * KIB / block).max(1));
        Shape::Strided(StridedPattern::new(offset, block, stride, count).unwrap())
    })
}

/// Subarrays of a row-major array that fits the span. Aligned ones are 3-D with planes of
/// exactly one or two units and rows a power-of-two fraction of a unit, so each object sees
/// whole planes (a nested pattern: rows within planes); the others are 2-D or 3-D of any shape.
fn subarrays(unit: u64, span: u64) -> impl Strategy<Value = Shape> {
    let raw = prop::collection::vec((1u64..12, any::<Index>(), any::<Index>()), 3);
    (prop_oneof![Just(1u64), Just(2), Just(4), Just(8), 3u64..8], 1u32..4, 1u64..=2, prop::bool::weighted(0.6), raw, any::<Index>(), any::<bool>()).prop_map(
        move |(elem, shift, planes_per_unit, aligned, raw, at, three_d)| {
            let row_elems = unit / (elem << shift);
            let aligned = aligned && row_elems * (elem << shift) == unit;
            let mut dims: Vec<u64> = if aligned {
                vec![raw[0].0 + 4, (1u64 << shift) * planes_per_unit, row_elems]
            } else if three_d {
                vec![raw[0].0, raw[1].0, 1 + (shift as u64) * 9]
            } else {
                vec![raw[0].0, ((unit >> shift) / elem).max(1)]
            };
            // Shrink the outer dimensions, innermost first, until the array fits the span.
            for i in (0..dims.len() - 1).rev() {
                let inner = dims[i + 1..].iter().product::<u64>() * elem;
                dims[i] = dims[i].min((span / inner).max(1));
            }
            let array = dims.iter().product::<u64>() * elem;
            let offset = if aligned { 0 } else { at.index(span.saturating_sub(array) as usize + 1) as u64 };
            let mut start: Vec<u64> = dims.iter().zip(&raw).map(|(&d, r)| r.1.index(d as usize) as u64).collect();
            let mut sizes: Vec<u64> = dims.iter().zip(&raw).zip(&start).map(|((&d, r), &s)| 1 + r.2.index((d - s) as usize) as u64).collect();
            if aligned {
                // Most planes, so every object holds several, and two rows or more of each.
                start[0] = raw[0].1.index(dims[0] as usize / 2 + 1) as u64;
                sizes[0] = dims[0] - start[0];
                start[1] = start[1].min(dims[1] - 2);
                sizes[1] = sizes[1].clamp(2, dims[1] - start[1]);
            }
            Shape::Subarray(Subarray::new(offset, elem, &dims, &start, &sizes).unwrap())
        },
    )
}

fn shapes(unit: u64, span: u64) -> impl Strategy<Value = Shape> {
    prop_oneof![lists(unit, span), strided(unit, span), subarrays(unit, span)]
}

fn cases() -> impl Strategy<Value = Case> {
    layouts().prop_flat_map(|(unit, count)| {
        let span = span(unit, count);
        let api = prop_oneof![Just(Api::Regions), Just(Api::OneBuffer), Just(Api::Vectors), Just(Api::Pattern)];
        (
            any::<bool>(),
            prop_oneof![Just(0u64), 0..span / 2],
            shapes(unit, span),
            shapes(unit, span),
            prop::collection::vec(any::<Index>(), 0..6),
            api,
            any::<u64>(),
        )
            .prop_map(move |(small_cap, existing_len, write, read, cuts, api, seed)| Case {
                unit,
                count,
                small_cap,
                existing_len,
                write,
                read,
                cuts,
                api,
                seed,
            })
    })
}

/// Region lengths cutting `total` bytes at the case's cut points.
fn region_lens(cuts: &[Index], total: usize) -> Vec<usize> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(total + 1)).collect();
    points.sort_unstable();
    let mut lens = Vec::new();
    let mut at = 0;
    for p in points.into_iter().chain([total]) {
        lens.push(p - at);
        at = p;
    }
    lens
}

/// The file after writing `buf` over `extents` in order.
fn apply(model: &mut Vec<u8>, extents: &[Extent], buf: &[u8]) {
    let mut at = 0usize;
    for e in extents {
        let end = (e.offset + e.len) as usize;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[e.offset as usize..end].copy_from_slice(&buf[at..at + e.len as usize]);
        at += e.len as usize;
    }
}

/// What reading `extents` from `model` gives: pieces in list order, zeros past the end.
fn gather(model: &[u8], extents: &[Extent]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in extents {
        out.extend((e.offset..e.offset + e.len).map(|f| model.get(f as usize).copied().unwrap_or(0)));
    }
    out
}

fn write(f: &File, api: Api, shape: &Shape, buf: &[u8], cuts: &[Index], mode: Mode) -> Result<(), tessera_client::ClientError> {
    let extents = shape.extents();
    match (api, shape) {
        (Api::Pattern, Shape::Strided(p)) => f.write_strided(p, buf, mode),
        (Api::Pattern, Shape::Subarray(s)) => f.write_subarray(s, buf, mode),
        (Api::OneBuffer, _) | (Api::Pattern, Shape::List(_)) => f.write_extents(&extents, buf, mode),
        (Api::Vectors, _) => {
            let mut at = 0usize;
            let writes: Vec<(u64, &[u8])> = extents
                .iter()
                .map(|e| {
                    let piece = &buf[at..at + e.len as usize];
                    at += e.len as usize;
                    (e.offset, piece)
                })
                .collect();
            f.pwrite_vec(&writes, mode)
        }
        (Api::Regions, _) => {
            let mut rest = buf;
            let regions: Vec<&[u8]> = region_lens(cuts, buf.len())
                .into_iter()
                .map(|n| {
                    let (head, tail) = rest.split_at(n);
                    rest = tail;
                    head
                })
                .collect();
            f.write_list(&regions, &extents, mode)
        }
    }
}

fn read(f: &File, api: Api, shape: &Shape, total: usize, cuts: &[Index], mode: Mode) -> Result<Vec<u8>, tessera_client::ClientError> {
    let extents = shape.extents();
    let mut buf = vec![0xA5u8; total];
    match (api, shape) {
        (Api::Pattern, Shape::Strided(p)) => f.read_strided(p, &mut buf, mode)?,
        (Api::Pattern, Shape::Subarray(s)) => f.read_subarray(s, &mut buf, mode)?,
        (Api::OneBuffer, _) | (Api::Pattern, Shape::List(_)) => f.read_extents(&extents, &mut buf, mode)?,
        (Api::Vectors, _) => {
            let mut rest = buf.as_mut_slice();
            let mut reads: Vec<(u64, &mut [u8])> = extents
                .iter()
                .map(|e| {
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(e.len as usize);
                    rest = tail;
                    (e.offset, head)
                })
                .collect();
            f.pread_vec(&mut reads, mode)?
        }
        (Api::Regions, _) => {
            let mut rest = buf.as_mut_slice();
            let mut regions: Vec<&mut [u8]> = region_lens(cuts, total)
                .into_iter()
                .map(|n| {
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
                    rest = tail;
                    head
                })
                .collect();
            f.read_list(&mut regions, &extents, mode)?
        }
    }
    Ok(buf)
}

fn total(extents: &[Extent]) -> usize {
    extents.iter().map(|e| e.len as usize).sum()
}

fn run_case(clients: &[Client; 2], case: &Case, index: u32) -> Result<(), TestCaseError> {
    let client = &clients[case.small_cap as usize];
    let existing = pattern(case.seed, case.existing_len as usize);
    let write_extents = case.write.extents();
    let read_extents = case.read.extents();
    let data = pattern(case.seed ^ 0x5555, total(&write_extents));
    let mut model = existing.clone();
    apply(&mut model, &write_extents, &data);
    let expect_read = gather(&model, &read_extents);
    for (m, write_mode) in Mode::ALL.into_iter().enumerate() {
        let path = format!("/case{index}-{write_mode:?}");
        let f = client.create(&path, 0o644, hint(case.unit, case.count)).unwrap();
        f.pwrite(0, &existing).unwrap();
        write(&f, case.api, &case.write, &data, &case.cuts, write_mode).map_err(|e| TestCaseError::fail(format!("{path}: write: {e}")))?;
        let back = f.read_to_end().unwrap();
        prop_assert_eq!(back.len(), model.len(), "{}: size after a {:?} write", path, write_mode);
        prop_assert!(back == model, "{}: contents after a {:?} write", path, write_mode);
        // Every file now equals the model, so reading each in another mode covers every mode.
        let read_mode = Mode::ALL[(m + index as usize) % Mode::ALL.len()];
        let got = read(&f, case.api, &case.read, expect_read.len(), &case.cuts, read_mode)
            .map_err(|e| TestCaseError::fail(format!("{path}: read: {e}")))?;
        prop_assert!(got == expect_read, "{}: a {:?} read", path, read_mode);
        client.unlink(&path).unwrap();
    }
    Ok(())
}

#[test]
fn list_io_matches_a_byte_array_in_every_mode() {
    let cluster = start(4, 1);
    let mut small: ClusterConfig = cluster.config.clone();
    small.max_transfer_bytes = 64 * KIB;
    let clients = [cluster.client(), Client::connect(&small).unwrap()];
    let mut runner = TestRunner::new(Config { cases: CASES, failure_persistence: None, ..Config::default() });
    let index = std::cell::Cell::new(0u32);
    let result = runner.run(&cases(), |case| {
        index.set(index.get() + 1);
        run_case(&clients, &case, index.get())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Memory that does not hold exactly the file extents' bytes is refused, in every form, before
/// anything is sent.
#[test]
fn memory_must_match_the_file_extents() {
    let cluster = start(2, 1);
    let f = cluster.client().create("/m", 0o644, hint(4 * KIB, 2)).unwrap();
    let extents = [Extent { offset: 0, len: 10 }, Extent { offset: 100, len: 5 }];
    let (a, b) = ([1u8; 10], [2u8; 4]);
    let is_length = |r: Result<(), tessera_client::ClientError>, want: (u64, u64)| match r {
        Err(tessera_client::ClientError::BufferLength { extents_len, buffer_len, .. }) => (extents_len, buffer_len) == want,
        _ => false,
    };
    assert!(is_length(f.write_list(&[&a, &b], &extents, Mode::Auto), (15, 14)));
    let (mut c, mut d) = ([0u8; 10], [0u8; 6]);
    assert!(is_length(f.read_list(&mut [&mut c, &mut d], &extents, Mode::Sgl), (15, 16)));
    let p = StridedPattern::new(0, 4, 8, 3).unwrap();
    assert!(is_length(f.write_strided(&p, &[0u8; 11], Mode::Strided), (12, 11)));
    let s = Subarray::new(0, 2, &[4, 4], &[1, 1], &[2, 2]).unwrap();
    assert!(is_length(f.read_subarray(&s, &mut [0u8; 9], Mode::Auto), (8, 9)));
    // Nothing was written.
    assert_eq!(f.size().unwrap(), 0);
}
