//! The mapped list path against real files: growth while mapped, pieces past the end, overlaps,
//! faults, and a model comparison with the system-call path.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use proptest::prelude::*;
use tessera_types::ObjectAddr;

use super::*;
use crate::store::file::FileStore;
use crate::store::ObjectData;

const A: ObjectAddr = ObjectAddr { partition_id: tessera_types::PartitionId(0x10000), object_id: tessera_types::ObjectId(0x10000) };

fn piece(object_offset: u64, buf_offset: usize, len: usize) -> Piece {
    Piece { object_offset, buf_offset, len }
}

/// Pieces laid end to end in the buffer, in list order.
fn list(raw: &[(u64, usize)]) -> (Vec<Piece>, usize) {
    let mut at = 0;
    let pieces = raw
        .iter()
        .map(|&(off, len)| {
            at += len;
            piece(off, at - len, len)
        })
        .collect();
    (pieces, at)
}

fn store(dir: &std::path::Path, mapped: bool) -> FileStore {
    FileStore::open(dir, 4, 4096).unwrap().with_mapped_lists(mapped)
}

fn whole(s: &FileStore) -> Vec<u8> {
    let mut out = vec![0u8; s.stored_len(A).unwrap() as usize];
    s.read_at(A, 0, &mut out).unwrap();
    out
}

/// Goal: an object that grows while its mapping is cached is read and written correctly past
/// the old mapping (by list writes beyond its capacity, by a plain write, after a truncate).
/// Method: a real file; the mapping is created by a first list write, then outgrown.
#[test]
fn growth_while_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), true);
    let (small, n) = list(&[(0, 16), (100, 16)]);
    s.write_pieces(A, &small, &vec![1u8; n]).unwrap();
    let first = s.cache.mapping(&A).expect("a list write maps the object");
    // Past the mapping's capacity: a new, larger mapping.
    let far = first.len() as u64 + 5000;
    let (big, n) = list(&[(far, 8), (10, 4)]);
    s.write_pieces(A, &big, &[2u8; 12][..n]).unwrap();
    let second = s.cache.mapping(&A).unwrap();
    assert!(second.len() as u64 > far, "remapped to cover the growth");
    assert_eq!(s.stored_len(A).unwrap(), far + 8);
    // A plain write grows the file beyond both mappings; a list read still sees it.
    let plain_at = second.len() as u64 + 100;
    s.write_at(A, plain_at, b"plain").unwrap();
    let (reads, n) = list(&[(plain_at, 5), (far, 8), (0, 4), (10, 4)]);
    let mut buf = vec![9u8; n];
    s.read_pieces(A, &reads, &mut buf).unwrap();
    assert_eq!(&buf, b"plain\x02\x02\x02\x02\x02\x02\x02\x02\x01\x01\x01\x01\x02\x02\x02\x02");
    // Shrunk by the engine: the cached mapping is larger than the file; reads past the new
    // end leave the caller's bytes alone, and nothing faults.
    s.set_len(A, 50).unwrap();
    let mut buf = vec![9u8; n];
    s.read_pieces(A, &reads, &mut buf).unwrap();
    let expected: Vec<u8> = [vec![9u8; 13], vec![1; 4], vec![2; 4]].concat();
    assert_eq!(buf, expected);
}

/// Goal: list READ pieces at or past the end of the stored data read as holes (the caller's
/// zeros stay zeros), including pieces inside the mapping's headroom and straddling the end,
/// without SIGBUS. Method: a 3000-byte object whose mapping reserves a MiB.
#[test]
fn pieces_past_end_read_as_holes() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), true);
    let data: Vec<u8> = (1..=3000u32).map(|i| (i % 250 + 1) as u8).collect();
    s.write_at(A, 0, &data).unwrap();
    let (reads, n) = list(&[(2990, 20), (3000, 4096), (700_000, 64), (20_000_000, 8), (0, 10)]);
    let mut buf = vec![0u8; n];
    s.read_pieces(A, &reads, &mut buf).unwrap();
    assert!(s.cache.mapping(&A).is_some(), "read through the mapping");
    let mut expected = vec![0u8; n];
    expected[..10].copy_from_slice(&data[2990..]);
    expected[n - 10..].copy_from_slice(&data[..10]);
    assert_eq!(buf, expected);
    assert_eq!(s.stored_len(A).unwrap(), 3000, "reads never extend the object");
}

/// Goal: overlapping pieces of one WRITE list resolve in list order (later wins), and the
/// gaps between pieces stay holes (no block the pieces did not touch is allocated). Method: a
/// list written through the mapping, read back whole and mapped with SEEK_HOLE.
#[test]
fn overlapping_pieces_later_wins() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), true);
    let (pieces, n) = list(&[(0, 8), (4, 8), (2, 2), (40_000, 4), (40_002, 4)]);
    let data: Vec<u8> = (b'a'..).take(n).collect();
    s.write_pieces(A, &pieces, &data).unwrap();
    let got = whole(&s);
    assert_eq!(got.len(), 40_006);
    assert_eq!(&got[..12], b"abqrijklmnop");
    assert_eq!(&got[40_000..], b"stwxyz");
    assert!(got[12..40_000].iter().all(|b| *b == 0));
    // Both written blocks map as data; on a sparse file system the blocks between are a hole.
    let map = s.map(A, 0, 40_006).unwrap();
    let written = |at: u64| map.iter().any(|e| e.written && (e.offset..e.offset + e.len).contains(&at));
    assert!(written(0) && written(40_005), "{map:?}");
    assert!(map.iter().filter(|e| !e.written).count() <= 1, "{map:?}");
}

/// Goal: a fault inside a mapping (here: the file truncated behind the engine's back) makes
/// the copy fail and marks the mapping, instead of killing the process with SIGBUS; the store
/// then redoes the command with system calls and answers like them. Method: a real mapping
/// of a file shrunk through another handle.
#[test]
fn a_fault_fails_the_copy_instead_of_crashing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    file.write_all_at(&[5u8; 8192], 0).unwrap();
    let m = Mapping::new(&file, 1 << 20).unwrap();
    let pieces = [piece(0, 0, 4), piece(6000, 4, 4)];
    let mut buf = [0u8; 8];
    m.read_pieces(&pieces, &mut buf, 8192).unwrap();
    assert_eq!(buf, [5; 8]);
    file.set_len(0).unwrap();
    assert!(m.read_pieces(&pieces, &mut buf, 8192).is_err());
    assert!(m.is_damaged());
    let m = Mapping::new(&file, 1 << 20).unwrap();
    assert!(m.write_pieces(&pieces, &[1u8; 8]).is_err());

    // Through the store: its cached mapping outlives a truncate done elsewhere.
    let s = store(dir.path(), true);
    s.write_pieces(A, &pieces, &[3u8; 8]).unwrap();
    let object = dir.path().join(format!("{:x}", A.partition_id.0)).join(format!("{:x}", A.object_id.0));
    OpenOptions::new().write(true).open(&object).unwrap().set_len(6002).unwrap();
    let mut buf = [9u8; 8];
    s.read_pieces(A, &pieces, &mut buf).unwrap();
    assert_eq!(buf, [3, 3, 3, 3, 3, 3, 9, 9]);
    s.write_pieces(A, &pieces, &[4u8; 8]).unwrap();
    assert_eq!(s.stored_len(A).unwrap(), 6004);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Goal: list WRITEs and READs through the mapping leave and return exactly the bytes a
    /// plain byte-array model does (pieces applied one by one in list order, holes as zeros,
    /// length ending at the last piece), and the same as the system-call path. Method: random
    /// overlapping lists, several rounds per object so mappings are reused and outgrown.
    #[test]
    fn mapped_lists_match_a_model(
        rounds in proptest::collection::vec(proptest::collection::vec((0u64..3_000_000, 1usize..5000), 1..30), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (mapped, plain) = (store(&dir.path().join("m"), true), store(&dir.path().join("p"), false));
        let mut model: Vec<u8> = Vec::new();
        for (round, raw) in rounds.iter().enumerate() {
            let (pieces, n) = list(raw);
            let data: Vec<u8> = (0..n).map(|i| (i * 31 + round * 7 + 1) as u8).collect();
            for p in &pieces {
                let end = p.object_offset as usize + p.len;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[p.object_offset as usize..end].copy_from_slice(&data[p.buf_offset..p.buf_offset + p.len]);
            }
            mapped.write_pieces(A, &pieces, &data).unwrap();
            plain.write_pieces(A, &pieces, &data).unwrap();
            prop_assert_eq!(&whole(&mapped), &model);
            prop_assert_eq!(&whole(&plain), &model);
            // Read every round's list back, plus pieces past the end.
            let (mut reads, mut m) = list(raw);
            reads.push(piece(model.len() as u64 - 1, m, 10));
            m += 10;
            let mut got = vec![0u8; m];
            mapped.read_pieces(A, &reads, &mut got).unwrap();
            for p in &reads {
                let o = p.object_offset as usize;
                let stored = model.len().saturating_sub(o).min(p.len);
                prop_assert_eq!(&got[p.buf_offset..p.buf_offset + stored], &model[o..o + stored]);
                prop_assert!(got[p.buf_offset + stored..p.buf_offset + p.len].iter().all(|b| *b == 0));
            }
        }
        prop_assert!(mapped.cache.mapping(&A).is_some());
    }
}
