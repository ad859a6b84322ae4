//! Goal: a WRITE whose data is put straight into the object's file (the target's single-copy
//! receive path) ends exactly like the same WRITE through `execute` when it commits, and leaves
//! length and used capacity describing the file when it does not: abandoned half-way, cut by a
//! concurrent length change, or overtaken by REMOVE and re-creation. Method: the real engine on
//! a temp directory; the test plays the transport, writing the data into the placement's file
//! with `pwrite` as the target's receive path does.

mod common;

use std::os::unix::fs::{FileExt, MetadataExt};

use common::*;
use tessera_engine::{CommandError, PlacedWrite};
use tessera_osd_proto::{Command, DataLayout, Request};
use tessera_types::ObjectAddr;

const INFO: u32 = 1;
const USED: u32 = 0x81;
const LENGTH: u32 = 0x82;
const PARTITION_INFO: u32 = 0x3000_0001;

fn write_req(addr: ObjectAddr, offset: u64, len: u64) -> Request<'static> {
    req(Command::Write { addr, offset, len, layout: DataLayout::Contiguous })
}

fn begin(osd: &Osd, addr: ObjectAddr, offset: u64, len: u64) -> PlacedWrite {
    let r = write_req(addr, offset, len);
    assert!(osd.engine.placeable(&r));
    osd.engine.begin_placed_write(&r).expect("begin")
}

/// Puts `data[from..to]` where the placement says, as the transport does.
fn place(w: &PlacedWrite, data: &[u8], from: usize, to: usize) {
    w.file.write_all_at(&data[from..to], w.offset + from as u64).unwrap();
}

fn attr(osd: &Osd, addr: ObjectAddr, page: u32, number: u32) -> u64 {
    be_bytes(&osd.get1(addr, page, number).expect("attribute defined"))
}

/// Length and used capacity agree with the file: stored bytes never run past the logical
/// length, and used capacity (object, and its share of the partition) is what the file holds.
fn assert_consistent(osd: &Osd, addr: ObjectAddr) {
    let path = osd.dir.path().join("objects").join(format!("{:x}", addr.partition_id.0)).join(format!("{:x}", addr.object_id.0));
    let meta = std::fs::metadata(&path).unwrap();
    let length = attr(osd, addr, INFO, LENGTH);
    assert!(meta.len() <= length, "stored {} bytes past the logical length {length}", meta.len());
    assert_eq!(attr(osd, addr, INFO, USED), meta.blocks() * 512, "used capacity describes the file");
}

fn object(osd: &Osd) -> ObjectAddr {
    let pid = osd.partition();
    ObjectAddr::new(pid, osd.create(pid))
}

#[test]
fn a_committed_placement_equals_the_same_write_through_execute() {
    let placed = Osd::new();
    let buffered = Osd::new();
    let (a, b) = (object(&placed), object(&buffered));
    assert_eq!(a, b);
    let data = pattern(3 << 20, 1);
    for (offset, len) in [(0u64, 1usize << 20), (5000, 3 << 20), (100, 10)] {
        let w = begin(&placed, a, offset, len as u64);
        place(&w, &data, len / 2, len); // any order: the transport may fill from either end
        place(&w, &data, 0, len / 2);
        placed.engine.finish_placed_write(w, &write_req(a, offset, len as u64), placed.now()).unwrap();
        buffered.write(b, offset, &data[..len]);
    }
    let len = attr(&buffered, b, INFO, LENGTH);
    assert_eq!(attr(&placed, a, INFO, LENGTH), len);
    assert_eq!(placed.read(a, 0, len).data_in, buffered.read(b, 0, len).data_in);
    assert_eq!(attr(&placed, a, INFO, USED), attr(&buffered, b, INFO, USED));
    assert_eq!(attr(&placed, ObjectAddr::partition(PID), PARTITION_INFO, USED), attr(&buffered, ObjectAddr::partition(PID), PARTITION_INFO, USED));
    assert_consistent(&placed, a);
}

#[test]
fn an_abandoned_placement_leaves_length_and_capacity_describing_the_file() {
    let osd = Osd::new();
    let a = object(&osd);
    let old = pattern(100_000, 2);
    osd.write(a, 0, &old);
    let new = pattern(1 << 20, 3);
    // Half of a WRITE that would grow the object from 100,000 to 1,050,000 bytes.
    let w = begin(&osd, a, 50_000, new.len() as u64);
    place(&w, &new, 0, 600_000);
    osd.engine.abandon_placed_write(w);
    assert_eq!(attr(&osd, a, INFO, LENGTH), 100_000, "the length did not move");
    assert_consistent(&osd, a);
    // Inside the old length the unacknowledged bytes may stay (partly applied); past it nothing.
    let got = osd.read(a, 0, 100_000).data_in;
    assert_eq!(&got[..50_000], &old[..50_000]);
    assert_eq!(&got[50_000..], &new[..50_000]);
    // A later extension reads zeros where the abandoned bytes were.
    osd.write(a, 900_000, b"end");
    let got = osd.read(a, 100_000, 800_000).data_in;
    assert!(got.iter().all(|b| *b == 0), "abandoned bytes past the old length came back");
    assert_consistent(&osd, a);
}

#[test]
fn an_extension_during_a_placement_keeps_the_placed_bytes() {
    let osd = Osd::new();
    let a = object(&osd);
    let data = pattern(1 << 20, 4);
    let w = begin(&osd, a, 0, data.len() as u64);
    place(&w, &data, 0, 500_000);
    // A buffered WRITE past the current length trims the stale tail first; it must not cut
    // bytes still arriving.
    osd.write(a, 2 << 20, b"tail");
    place(&w, &data, 500_000, data.len());
    osd.engine.finish_placed_write(w, &write_req(a, 0, data.len() as u64), osd.now()).unwrap();
    assert_eq!(osd.read(a, 0, data.len() as u64).data_in, data);
    assert_eq!(attr(&osd, a, INFO, LENGTH), (2 << 20) + 4);
    assert_consistent(&osd, a);
}

#[test]
fn a_length_set_during_a_placement_fails_it() {
    let osd = Osd::new();
    let a = object(&osd);
    let data = pattern(1 << 20, 5);
    let w = begin(&osd, a, 0, data.len() as u64);
    place(&w, &data, 0, 700_000);
    osd.set(a, INFO, LENGTH, &1000u64.to_be_bytes()).unwrap();
    place(&w, &data, 700_000, data.len());
    let err = osd.engine.finish_placed_write(w, &write_req(a, 0, data.len() as u64), osd.now()).unwrap_err();
    assert!(matches!(err, CommandError::WriteOvertaken { .. }), "{err}");
    assert_eq!(err.sense().asc_ascq(), 0x2F00);
    assert_eq!(attr(&osd, a, INFO, LENGTH), 1000);
    assert_consistent(&osd, a);
}

#[test]
fn remove_and_create_again_during_a_placement_fails_it_and_spares_the_new_object() {
    let osd = Osd::new();
    let a = object(&osd);
    let data = pattern(300_000, 6);
    let w = begin(&osd, a, 0, data.len() as u64);
    place(&w, &data, 0, 100_000);
    osd.ok(&req(Command::Remove { addr: a }));
    osd.ok(&req(Command::Create { partition_id: PID, requested: Some(a.object_id.0), count: 1 }));
    osd.write(a, 0, b"fresh");
    place(&w, &data, 100_000, data.len());
    let err = osd.engine.finish_placed_write(w, &write_req(a, 0, data.len() as u64), osd.now()).unwrap_err();
    assert!(matches!(err, CommandError::WriteOvertaken { .. }), "{err}");
    assert_eq!(osd.read(a, 0, 5).data_in, b"fresh");
    assert_eq!(attr(&osd, a, INFO, LENGTH), 5);
    assert_consistent(&osd, a);
}

#[test]
fn a_removed_object_fails_the_commit_with_its_usual_sense() {
    let osd = Osd::new();
    let a = object(&osd);
    let w = begin(&osd, a, 0, 10);
    osd.ok(&req(Command::Remove { addr: a }));
    let err = osd.engine.finish_placed_write(w, &write_req(a, 0, 10), osd.now()).unwrap_err();
    assert!(matches!(err, CommandError::NoSuchObject { .. }), "{err}");
}

#[test]
fn only_plain_writes_on_file_stores_are_placed_and_checks_still_answer() {
    let in_memory = tempfile::tempdir().unwrap();
    let engine = tessera_engine::Engine::open_with_data(in_memory.path(), config(), std::sync::Arc::new(tessera_engine::MemStore::new())).unwrap();
    assert!(!engine.placeable(&write_req(ObjectAddr::new(PID, PID), 0, 10)), "no files to place into");
    let osd = Osd::new();
    let a = object(&osd);
    let with_set = with_set(write_req(a, 0, 10), &[(APP_PAGE, 1, b"v")]);
    assert!(!osd.engine.placeable(&with_set));
    assert!(osd.engine.begin_placed_write(&with_set).is_err());
    let with_get = with_get(write_req(a, 0, 10), &[tessera_osd_proto::AttrId::new(INFO, LENGTH)]);
    assert!(!osd.engine.placeable(&with_get));
    let strided = req(Command::Write { addr: a, offset: 0, len: 10, layout: DataLayout::Strided { stride: 4, block_len: 2 } });
    assert!(!osd.engine.placeable(&strided));
    assert!(!osd.engine.placeable(&req(Command::Append { addr: a, len: 10 })));
    let missing = ObjectAddr::new(PID, a.object_id.0 + 1);
    let err = osd.engine.begin_placed_write(&write_req(missing, 0, 10)).unwrap_err();
    assert!(matches!(err, CommandError::NoSuchObject { .. }), "{err}");
    osd.set(a, 0x2, 0x1, &1000u64.to_be_bytes()).unwrap(); // maximum user object length
    let err = osd.engine.begin_placed_write(&write_req(a, 900, 200)).unwrap_err();
    assert!(matches!(err, CommandError::QuotaExceeded { .. }), "{err}");
}

fn list_req(addr: ObjectAddr, offset: u64, len: u64, layout: DataLayout) -> Request<'static> {
    req(Command::Write { addr, offset, len, layout })
}

/// Puts a placed list's data where its pieces say: through the mapping (as the transport's
/// `recvmsg` does) for the pieces in `mapped`, with `pwrite` for the others.
fn place_list(w: &PlacedWrite, data: &[u8], mapped: impl Fn(usize) -> bool) {
    let list = w.list.as_ref().expect("a list placement");
    let memory = list.mapping.as_ref().expect("a file store maps list writes");
    for (i, p) in list.pieces.iter().enumerate() {
        let bytes = &data[p.buf_offset..p.buf_offset + p.len];
        if mapped(i) {
            assert!(p.object_offset + p.len as u64 <= w.file.metadata().unwrap().len(), "the file covers every piece");
            let base = tessera_scsi::MappedMemory::as_ptr(&**memory) as *mut u8;
            // SAFETY: the piece lies below the file's length, inside the mapping.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(p.object_offset as usize), p.len) };
        } else {
            w.file.write_all_at(bytes, p.object_offset).unwrap();
        }
    }
}

#[test]
fn a_committed_list_placement_equals_the_same_write_through_execute() {
    let placed = Osd::new();
    let buffered = Osd::new();
    let (a, b) = (object(&placed), object(&buffered));
    let overlapping = DataLayout::List(vec![
        tessera_osd_proto::Extent { offset: 900_000, len: 5000 },
        tessera_osd_proto::Extent { offset: 10, len: 70_000 },
        tessera_osd_proto::Extent { offset: 40_000, len: 3000 }, // overlaps the one before: wins
    ]);
    let writes = [
        (0u64, DataLayout::Strided { stride: 65_536, block_len: 4096 }, 4096 * 64u64),
        (1000, DataLayout::Strided { stride: 10_000, block_len: 6000 }, 200_001),
        (0, overlapping, 78_000),
        (5, DataLayout::Nested { block_len: 2048, levels: vec![(4, 5000), (3, 100_000)] }, 2048 * 12),
    ];
    for (i, (offset, layout, len)) in writes.into_iter().enumerate() {
        let data = pattern(len as usize, i as u32 + 10);
        let r = list_req(a, offset, len, layout.clone());
        assert!(placed.engine.placeable(&r), "{layout:?}");
        let w = placed.engine.begin_placed_write(&r).expect("begin");
        place_list(&w, &data, |piece| piece % 3 != 1);
        placed.engine.finish_placed_write(w, &r, placed.now()).unwrap();
        buffered.ok(&Request { data: &data, ..list_req(b, offset, len, layout) });
    }
    let len = attr(&buffered, b, INFO, LENGTH);
    assert_eq!(attr(&placed, a, INFO, LENGTH), len);
    assert_eq!(placed.read(a, 0, len).data_in, buffered.read(b, 0, len).data_in);
    assert_eq!(attr(&placed, a, INFO, USED), attr(&buffered, b, INFO, USED));
    assert_consistent(&placed, a);
}

#[test]
fn an_abandoned_list_placement_trims_the_extension_it_made() {
    let osd = Osd::new();
    let a = object(&osd);
    let old = pattern(100_000, 2);
    osd.write(a, 0, &old);
    // 256 pieces of 4 KiB at a 64 KiB stride: the file is extended to 16 MiB before any byte.
    let r = list_req(a, 0, 1 << 20, DataLayout::Strided { stride: 65_536, block_len: 4096 });
    let w = osd.engine.begin_placed_write(&r).unwrap();
    assert!(w.file.metadata().unwrap().len() >= 255 * 65_536 + 4096);
    place_list(&w, &pattern(1 << 20, 3), |piece| piece < 100);
    osd.engine.abandon_placed_write(w);
    assert_eq!(attr(&osd, a, INFO, LENGTH), 100_000, "the length did not move");
    assert_consistent(&osd, a);
    osd.write(a, 20 << 20, b"end");
    assert!(osd.read(a, 100_000, (20 << 20) - 100_000).data_in.iter().all(|b| *b == 0), "abandoned bytes came back");
    assert_consistent(&osd, a);
}

#[test]
fn list_writes_are_placed_from_a_mean_piece_of_a_kibibyte() {
    let osd = Osd::new();
    let a = object(&osd);
    let min = tessera_engine::PLACED_LIST_PIECE_MIN;
    let strided = |block_len: u64| list_req(a, 0, block_len * 100, DataLayout::Strided { stride: 2 * block_len, block_len });
    assert!(osd.engine.placeable(&strided(min)));
    assert!(!osd.engine.placeable(&strided(min - 1)));
    let with_set = with_set(strided(min), &[(APP_PAGE, 1, b"v")]);
    assert!(!osd.engine.placeable(&with_set), "attribute lists go through execute");
    // Reaching past what the store maps: each piece would need its own pwrite.
    let far = tessera_engine::store::mapped::MAPPED_OBJECT_MAX;
    let beyond = list_req(a, far - 4096, 8192, DataLayout::Strided { stride: 4096, block_len: 4096 });
    assert!(!osd.engine.placeable(&beyond));
    let within = list_req(a, far - 8192, 8192, DataLayout::Strided { stride: 4096, block_len: 4096 });
    assert!(osd.engine.placeable(&within));
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 24) as u8).collect()
}
