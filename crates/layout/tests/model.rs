//! Goal: planning + descriptor choice + `for_each_extent` moves every byte exactly where the
//! striping formula says, for writes and reads alike. Method: a model of plain byte arrays, one
//! per object. The direct path writes the file model byte by byte through `locate`; the planned
//! path gathers each slot's Data-Out from the buffer piece by piece, picks a descriptor, and
//! applies it the way the engine does (the data stream in `for_each_extent` order). Reads go the
//! other way and scatter by `buffer_offset`.

use proptest::prelude::*;
use tessera_layout::{choose_descriptor, plan, Extent, StripeLayout};

const OBJECT_BYTES: usize = 1 << 16;

fn layouts() -> impl Strategy<Value = StripeLayout> {
    // Small units keep the model arrays small while still crossing many unit boundaries.
    (0u32..=6, 1u32..=8).prop_map(|(shift, count)| StripeLayout::new(1 << shift, count).unwrap())
}

fn file_extents() -> impl Strategy<Value = Vec<Extent>> {
    prop::collection::vec((0u64..2000, 0u64..300).prop_map(|(offset, len)| Extent { offset, len }), 1..12)
}

fn direct_write(l: &StripeLayout, objects: &mut [Vec<u8>], extents: &[Extent], buf: &[u8]) {
    let mut b = 0usize;
    for e in extents {
        for f in e.offset..e.offset + e.len {
            let pos = l.locate(f);
            objects[pos.slot as usize][pos.object_offset as usize] = buf[b];
            b += 1;
        }
    }
}

fn planned_write(l: &StripeLayout, objects: &mut [Vec<u8>], extents: &[Extent], buf: &[u8]) {
    for p in plan(l, extents).unwrap() {
        let mut data_out = Vec::new();
        for piece in &p.pieces {
            let at = piece.buffer_offset as usize;
            data_out.extend_from_slice(&buf[at..at + piece.len as usize]);
        }
        let (start, layout) = choose_descriptor(&p.object_extents()).unwrap();
        let object = &mut objects[p.slot as usize];
        let mut consumed = 0usize;
        layout.for_each_extent(start, data_out.len() as u64, |o, n| {
            object[o as usize..(o + n) as usize].copy_from_slice(&data_out[consumed..consumed + n as usize]);
            consumed += n as usize;
        });
        assert_eq!(consumed, data_out.len());
    }
}

fn planned_read(l: &StripeLayout, objects: &[Vec<u8>], extents: &[Extent], total: usize) -> Vec<u8> {
    let mut buf = vec![0u8; total];
    for p in plan(l, extents).unwrap() {
        let (start, layout) = choose_descriptor(&p.object_extents()).unwrap();
        let mut data_in = Vec::new();
        layout.for_each_extent(start, p.total_len(), |o, n| data_in.extend_from_slice(&objects[p.slot as usize][o as usize..(o + n) as usize]));
        let mut at = 0usize;
        for piece in &p.pieces {
            let n = piece.len as usize;
            buf[piece.buffer_offset as usize..][..n].copy_from_slice(&data_in[at..at + n]);
            at += n;
        }
    }
    buf
}

proptest! {
    #[test]
    fn planned_io_matches_the_file_model(l in layouts(), extents in file_extents(), seed in any::<u8>()) {
        let total: usize = extents.iter().map(|e| e.len as usize).sum();
        let buf: Vec<u8> = (0..total).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        let count = l.stripe_count() as usize;
        let mut direct = vec![vec![0u8; OBJECT_BYTES]; count];
        let mut planned = direct.clone();
        direct_write(&l, &mut direct, &extents, &buf);
        planned_write(&l, &mut planned, &extents, &buf);
        prop_assert_eq!(&direct, &planned);

        // Reading the same extents back gives, for every byte, what the file model holds.
        let expected: Vec<u8> = extents
            .iter()
            .flat_map(|e| e.offset..e.offset + e.len)
            .map(|f| { let p = l.locate(f); direct[p.slot as usize][p.object_offset as usize] })
            .collect();
        prop_assert_eq!(planned_read(&l, &direct, &extents, total), expected);
    }
}

/// Micro-benchmark: planning a strided 1-D pattern (many small extents) over 8 objects. Small by
/// default so it runs in CI; `TESSERA_BENCH=1` makes it large and prints the rate.
#[test]
fn bench_plan_strided() {
    let big = std::env::var("TESSERA_BENCH").is_ok_and(|v| v == "1");
    let n: u64 = if big { 1_000_000 } else { 1_000 };
    let l = StripeLayout::new(64 * 1024, 8).unwrap();
    let extents: Vec<Extent> = (0..n).map(|i| Extent { offset: i * 4096 * 3, len: 4096 }).collect();
    let t = std::time::Instant::now();
    let plans = plan(&l, &extents).unwrap();
    let descriptors: Vec<_> = plans.iter().map(|p| choose_descriptor(&p.object_extents()).unwrap()).collect();
    let elapsed = t.elapsed();
    assert_eq!(descriptors.len(), 8);
    if big {
        println!("plan+choose {n} extents over 8 objects: {:?} ({:.1} M extents/s)", elapsed, n as f64 / elapsed.as_secs_f64() / 1e6);
    }
}
