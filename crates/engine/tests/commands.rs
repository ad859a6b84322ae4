//! Goal: each command does what OSD-2 r05 (and docs/engine.md) say, end to end through
//! `Engine::execute`, on real SQLite and real files in a temp dir.

mod common;

use common::*;
use tessera_osd_proto::{AttrId, Command, DataLayout, Extent, FlushScope, GetAttrs, MapType, ReadMapResult, Request, ListResult, QueryResult, TimestampsControl};
use tessera_osd_proto::command::{QueryCondition, QueryCriteria};
use tessera_types::ObjectAddr;

#[test]
fn create_many_reports_the_first_id_and_ids_are_never_reused() {
    let osd = Osd::new();
    let pid = osd.partition();
    let r = with_get(req(Command::Create { partition_id: pid, requested: None, count: 3 }), &[AttrId::new(CURRENT, 3), AttrId::new(CURRENT, 4)]);
    let reply = osd.ok(&r);
    assert_eq!(be(&reply.retrieved[0]), pid);
    let first = be(&reply.retrieved[1]);
    assert_eq!(first, 0x10000);
    for oid in first..first + 3 {
        assert_eq!(osd.get1(ObjectAddr::new(pid, oid), 1, 0x2).map(|v| be_bytes(&v)), Some(oid));
    }
    osd.ok(&req(Command::Remove { addr: ObjectAddr::new(pid, first + 2) }));
    assert_eq!(osd.create(pid), first + 3, "a removed id is not handed out again");
    // A requested id moves the counter past itself.
    osd.ok(&req(Command::Create { partition_id: pid, requested: Some(0x20000), count: 1 }));
    assert_eq!(osd.create(pid), 0x20001);
}

#[test]
fn write_read_append_and_logical_length() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    osd.write(addr, 0, b"hello");
    osd.write(addr, 10, b"world");
    let r = osd.read(addr, 0, 15);
    assert_eq!(&r.data_in, b"hello\0\0\0\0\0world");
    assert!(r.recovered.is_none());
    assert_eq!(osd.get1(addr, 1, 0x82).map(|v| be_bytes(&v)), Some(15));
    let append = with_get(req(Command::Append { addr, len: 3 }), &[AttrId::new(CURRENT, 5)]);
    let reply = osd.ok(&Request { data: b"!!!", ..append });
    assert_eq!(be(&reply.retrieved[0]), 15, "append start address");
    assert_eq!(osd.read(addr, 12, 6).data_in, b"rld!!!");
    // Truncate through the logical length attribute, then extend: the tail reads as zeros.
    osd.set(addr, 1, 0x82, &4u64.to_be_bytes()).unwrap();
    osd.set(addr, 1, 0x82, &8u64.to_be_bytes()).unwrap();
    assert_eq!(osd.read(addr, 0, 8).data_in, b"hell\0\0\0\0");
}

#[test]
fn read_past_end_zero_fills_with_recovered_error() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    osd.write(addr, 0, b"abc");
    let r = osd.read(addr, 1, 6);
    assert_eq!(r.data_in, b"bc\0\0\0\0");
    let s = r.recovered.expect("3B17");
    assert_eq!((s.key, s.asc_ascq()), (tessera_scsi::SenseKey::RecoveredError, 0x3B17));
}

#[test]
fn create_and_write_then_list_io_with_overlaps() {
    let osd = Osd::new();
    let pid = osd.partition();
    let data = b"AAAABBBBCC";
    let layout = DataLayout::List(vec![Extent { offset: 8, len: 4 }, Extent { offset: 0, len: 4 }, Extent { offset: 2, len: 2 }]);
    let r = with_get(req(Command::CreateAndWrite { partition_id: pid, requested: None, offset: 100, len: 10, layout }), &[AttrId::new(CURRENT, 4)]);
    let oid = be(&osd.ok(&Request { data, ..r }).retrieved[0]);
    let addr = ObjectAddr::new(pid, oid);
    assert_eq!(osd.read(addr, 100, 12).data_in, b"BBCC\0\0\0\0AAAA");
    let strided = req(Command::Read { addr, offset: 100, len: 6, layout: DataLayout::Strided { stride: 4, block_len: 2 } });
    assert_eq!(osd.ok(&strided).data_in, b"BB\0\0AA");
}

#[test]
fn standard_pages_and_all_of_page() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let root = osd.get(ObjectAddr::ROOT, &[AttrId::new(0x9000_0001, 3), AttrId::new(0x9000_0001, 0xC0), AttrId::new(0x9000_0001, 0xA)]);
    assert_eq!(root[0].value.as_deref(), Some(&[7u8; 20][..]));
    assert_eq!(be(&root[1]), 1);
    assert_eq!(be(&root[2]), tessera_types::limits::CONTINUATION_LEN_MAX as u64);
    let part = osd.get(ObjectAddr::partition(pid), &[AttrId::new(0x3000_0001, 1), AttrId::new(0x3000_0001, 0xC2), AttrId::new(0x3000_0001, 0xC1)]);
    assert_eq!((be(&part[0]), be(&part[1]), be(&part[2])), (pid, 1, 0));
    let info = osd.ok(&Request { get_attrs: GetAttrs::Page { page: 1, allocation_len: 4096 }, ..req(Command::GetAttributes { addr }) }).retrieved;
    let numbers: Vec<u32> = info.iter().map(|a| a.id.number).collect();
    assert_eq!(numbers, vec![0, 1, 2, 0x81, 0x82]);
    assert_eq!(&info[0].value.as_ref().unwrap()[..8], b"INCITS  ");
    assert_eq!(info[0].value.as_ref().unwrap().len(), 40);
    // A user page shows up in the directory and in "all of page".
    osd.set(addr, APP_PAGE, 5, b"five").unwrap();
    osd.set(addr, APP_PAGE, 6, b"six").unwrap();
    let all = osd.get(addr, &[AttrId::new(APP_PAGE, AttrId::ALL_IN_PAGE)]);
    assert_eq!(all.iter().map(|a| a.id.number).collect::<Vec<_>>(), vec![5, 6]);
    let dir = osd.get(addr, &[AttrId::new(0, AttrId::ALL_IN_PAGE)]);
    let pages: Vec<u32> = dir.iter().map(|a| a.id.number).collect();
    assert_eq!(pages, vec![0, 1, 2, 3, 4, APP_PAGE]);
    // Zero-length set deletes.
    osd.set(addr, APP_PAGE, 5, b"").unwrap();
    assert_eq!(osd.get1(addr, APP_PAGE, 5), None);
}

#[test]
fn set_then_get_in_one_command_sees_the_set() {
    let osd = Osd::new();
    let pid = osd.partition();
    let r = with_get(
        with_set(req(Command::Create { partition_id: pid, requested: None, count: 2 }), &[(APP_PAGE, 1, b"tag")]),
        &[AttrId::new(APP_PAGE, 1), AttrId::new(CURRENT, 4)],
    );
    let reply = osd.ok(&r);
    assert_eq!(reply.retrieved[0].value.as_deref(), Some(&b"tag"[..]));
    let first = be(&reply.retrieved[1]);
    assert_eq!(osd.get1(ObjectAddr::new(pid, first + 1), APP_PAGE, 1).as_deref(), Some(&b"tag"[..]), "set applies to every created object");
}

#[test]
fn timestamps_are_stored_and_honour_do_not_update() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let ts = |osd: &Osd| osd.get(addr, &[AttrId::new(3, 1), AttrId::new(3, 5)]).iter().map(be).collect::<Vec<_>>();
    let before = ts(&osd);
    osd.write(addr, 0, b"x");
    let after = ts(&osd);
    assert_eq!(before[0], after[0]);
    assert!(after[1] > before[1], "data modified moves on write");
    let quiet = Request { timestamps: TimestampsControl::DoNotUpdate, data: b"y", ..req(Command::Write { addr, offset: 0, len: 1, layout: DataLayout::Contiguous }) };
    osd.ok(&quiet);
    assert_eq!(ts(&osd)[1], after[1], "DoNotUpdate leaves data modified alone");
}

#[test]
fn collections_list_query_and_members() {
    let osd = Osd::new();
    let pid = osd.partition();
    let r = with_get(req(Command::CreateCollection { partition_id: pid, requested: None }), &[AttrId::new(CURRENT, 4)]);
    let cid = be(&osd.ok(&r).retrieved[0]);
    let coll = ObjectAddr::new(pid, cid);
    let objs: Vec<u64> = (0..5).map(|_| osd.create(pid)).collect();
    for (i, oid) in objs.iter().enumerate() {
        let addr = ObjectAddr::new(pid, *oid);
        osd.set(addr, 4, 1, &cid.to_be_bytes()).unwrap();
        osd.write(addr, 0, &vec![1u8; i * 10]);
    }
    assert_eq!(osd.get1(ObjectAddr::new(pid, objs[0]), 4, 1).map(|v| be_bytes(&v)), Some(cid));
    // LIST COLLECTION with a small allocation length continues where it was cut.
    let list = |initial: u64| {
        let r = req(Command::ListCollection { addr: coll, list_id: 0, initial_oid: initial, allocation_len: 24 + 8 * 3, with_attrs: false });
        ListResult::decode(&osd.ok(&r).data_in).unwrap()
    };
    let first = list(0);
    assert_eq!(first.entries.iter().map(|e| e.object_id).collect::<Vec<_>>(), objs[..3]);
    assert_eq!(first.continuation_oid, objs[3]);
    let second = list(first.continuation_oid);
    assert_eq!(second.entries.iter().map(|e| e.object_id).collect::<Vec<_>>(), objs[3..]);
    assert_eq!(second.continuation_oid, 0);
    // LIST of the partition holds the collection and the objects.
    let all = ListResult::decode(&osd.ok(&req(Command::List { partition_id: pid, list_id: 0, initial_oid: 0, allocation_len: 4096, with_attrs: false })).data_in).unwrap();
    assert_eq!(all.entries.len(), 6);
    let parts = ListResult::decode(&osd.ok(&req(Command::List { partition_id: 0, list_id: 0, initial_oid: 0, allocation_len: 4096, with_attrs: false })).data_in).unwrap();
    assert!(parts.root);
    assert_eq!(parts.entries.iter().map(|e| e.object_id).collect::<Vec<_>>(), vec![pid]);
    // QUERY on logical length in [15, 35].
    let criteria = QueryCriteria {
        match_all: true,
        conditions: vec![QueryCondition { attr: AttrId::new(1, 0x82), min: 15u64.to_be_bytes().to_vec(), max: 35u64.to_be_bytes().to_vec() }],
    };
    let q = osd.ok(&req(Command::Query { addr: coll, allocation_len: 4096, criteria }));
    assert_eq!(QueryResult::decode(&q.data_in).unwrap().object_ids, objs[2..4]);
    // Member attributes.
    let set = with_set(req(Command::SetMemberAttributes { addr: coll }), &[(APP_PAGE, 9, b"m")]);
    osd.ok(&set);
    let get = with_get(req(Command::GetMemberAttributes { addr: coll }), &[AttrId::new(APP_PAGE, 9)]);
    let members = osd.ok(&get).member_retrieved;
    assert_eq!(members.len(), 5);
    assert!(members.iter().all(|m| m.attr.value.as_deref() == Some(&b"m"[..])));
    // Removing the collection needs force; REMOVE MEMBER OBJECTS empties it.
    assert_eq!(osd.run(&req(Command::RemoveCollection { addr: coll, force: false })).unwrap_err().sense().asc_ascq(), 0x2C0A);
    osd.ok(&req(Command::RemoveMemberObjects { addr: coll }));
    assert_eq!(osd.get1(ObjectAddr::partition(pid), 0x3000_0001, 0xC2).map(|v| be_bytes(&v)), Some(0));
    osd.ok(&req(Command::RemoveCollection { addr: coll, force: false }));
    osd.ok(&req(Command::RemovePartition { partition_id: pid }));
}

#[test]
fn punch_clear_and_read_map() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    osd.write(addr, 0, &vec![0xAB; 256 * 1024]);
    osd.ok(&req(Command::Punch { addr, offset: 64 * 1024, len: 64 * 1024 }));
    osd.ok(&req(Command::Clear { addr, offset: 192 * 1024, len: 4 }));
    let data = osd.read(addr, 0, 256 * 1024).data_in;
    assert!(data[64 * 1024..128 * 1024].iter().all(|b| *b == 0));
    assert_eq!(&data[192 * 1024..192 * 1024 + 5], &[0, 0, 0, 0, 0xAB]);
    assert_eq!(osd.get1(addr, 1, 0x82).map(|v| be_bytes(&v)), Some(256 * 1024), "punch keeps the length");
    let map = |t| ReadMapResult::decode(&osd.ok(&req(Command::ReadMap { addr, offset: 0, len: 300 * 1024, map_type: t, allocation_len: 4096 })).data_in).unwrap();
    let holes: Vec<(u64, u64)> = map(MapType::Holes).entries.iter().map(|e| (e.offset, e.len)).collect();
    assert_eq!(holes, vec![(64 * 1024, 64 * 1024), (256 * 1024, 44 * 1024)]);
    let all = map(MapType::All);
    assert_eq!(all.entries.iter().map(|e| e.len).sum::<u64>(), 300 * 1024);
}

#[test]
fn atomics_return_the_old_value() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let attr = AttrId::new(APP_PAGE, 1);
    let faa = |n| be_bytes(&osd.ok(&req(Command::FetchAndAdd { addr, attr, addend: n })).data_in);
    assert_eq!(faa(5), 0);
    assert_eq!(faa(2), 5);
    let cas = |e, n| be_bytes(&osd.ok(&req(Command::CompareAndSwap { addr, attr, expected: e, new: n })).data_in);
    assert_eq!(cas(1, 100), 7, "a failed swap returns the current value");
    assert_eq!(cas(7, 100), 7);
    assert_eq!(osd.get1(addr, APP_PAGE, 1).map(|v| be_bytes(&v)), Some(100));
}

#[test]
fn flushes_and_format() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    osd.write(addr, 0, b"data");
    osd.ok(&req(Command::Flush { addr, scope: FlushScope::DataAndAttributes }));
    osd.ok(&req(Command::FlushPartition { partition_id: pid, scope: FlushScope::Everything }));
    osd.ok(&req(Command::FlushOsd { scope: FlushScope::Everything }));
    osd.ok(&req(Command::FormatOsd { capacity_bytes: 1 << 30 }));
    assert_eq!(osd.get1(ObjectAddr::ROOT, 0x9000_0001, 0x80).map(|v| be_bytes(&v)), Some(1 << 30));
    assert_eq!(osd.get1(ObjectAddr::ROOT, 0x9000_0001, 0xC0).map(|v| be_bytes(&v)), Some(0));
    assert!(osd.run(&req(Command::Read { addr, offset: 0, len: 1, layout: DataLayout::Contiguous })).is_err());
}

#[test]
fn used_capacity_follows_blocks() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let r = with_get(req(Command::Write { addr, offset: 0, len: 8192, layout: DataLayout::Contiguous }), &[AttrId::new(CURRENT, 6)]);
    let change = be(&osd.ok(&Request { data: &[1u8; 8192], ..r }).retrieved[0]);
    assert!(change >= 8192, "used capacity change {change}");
    let obj = osd.get1(addr, 1, 0x81).map(|v| be_bytes(&v)).unwrap();
    let part = osd.get1(ObjectAddr::partition(pid), 0x3000_0001, 0x81).map(|v| be_bytes(&v)).unwrap();
    let root = osd.get1(ObjectAddr::ROOT, 0x9000_0001, 0x81).map(|v| be_bytes(&v)).unwrap();
    assert_eq!((obj, part, root), (change, change, change));
}

/// Requested ids start empty whether used before or never: a data file left behind by a crash
/// during REMOVE (row gone, file not yet) does not show through a later CREATE of the same id,
/// and a batch of ids above anything used (a metadata server's precreation, which skips the
/// per-id cleanup) starts empty too.
#[test]
fn requested_ids_start_empty_whether_used_before_or_never() {
    let osd = Osd::new();
    let pid = osd.partition();
    let old = ObjectAddr::new(pid, 0x30000);
    osd.ok(&req(Command::Create { partition_id: pid, requested: Some(0x30000), count: 1 }));
    osd.write(old, 0, b"earlier incarnation");
    let file = osd.dir.path().join(tessera_engine::OBJECTS_DIR).join(format!("{pid:x}")).join(format!("{:x}", 0x30000));
    let kept = std::fs::read(&file).expect("the object's data file");
    osd.ok(&req(Command::Remove { addr: old }));
    std::fs::write(&file, &kept).unwrap(); // as if the crash came between row and file
    osd.ok(&req(Command::Create { partition_id: pid, requested: Some(0x30000), count: 4 }));
    assert_eq!(osd.get1(old, 1, 0x82).map(|v| be_bytes(&v)), Some(0), "the re-created object is empty");
    // Writing past the old bytes makes them part of the object: they must read as a hole.
    osd.write(old, 30, b"new");
    assert_eq!(osd.read(old, 0, 19).data_in, vec![0u8; 19]);
    // Far above anything used: a fresh batch.
    osd.ok(&req(Command::Create { partition_id: pid, requested: Some(0x1_0000_0000), count: 512 }));
    for oid in [0x1_0000_0000u64, 0x1_0000_01FF] {
        assert_eq!(osd.get1(ObjectAddr::new(pid, oid), 1, 0x82).map(|v| be_bytes(&v)), Some(0));
    }
}

/// The root's backing page reports the file system under the store as it is now (not the
/// formatted capacity, which config() sets to 1 TiB here); it is listed in the root's
/// directory and cannot be set.
#[test]
fn the_root_backing_page_reports_the_file_system_under_the_store() {
    const BACKING: u32 = 0x9000_8000;
    let osd = Osd::new();
    let fs = tessera_engine::store::space::of_dir(osd.dir.path()).unwrap();
    let got = |n| osd.get1(ObjectAddr::ROOT, BACKING, n).map(|v| be_bytes(&v));
    assert_eq!(got(1), Some(fs.fs_id));
    assert_eq!(got(2), Some(fs.size_bytes));
    assert_ne!(got(2), osd.get1(ObjectAddr::ROOT, 0x9000_0001, 0x80).map(|v| be_bytes(&v)), "not the formatted capacity");
    let avail = got(3).unwrap();
    assert!(avail <= fs.size_bytes && avail.abs_diff(fs.avail_bytes) < 64 << 20, "{avail} against {fs:?}");
    let directory = osd.get(ObjectAddr::ROOT, &[AttrId::new(0x9000_0000, u32::MAX)]);
    assert!(directory.iter().any(|a| a.id.number == BACKING), "listed in the root directory page: {directory:?}");
    let identification = osd.get1(ObjectAddr::ROOT, BACKING, 0).unwrap();
    assert!(identification.starts_with(b"TESSERA "), "{identification:?}");
    assert_eq!(osd.set(ObjectAddr::ROOT, BACKING, 3, &[0; 8]).unwrap_err().sense().asc_ascq(), 0x2600, "read-only");
}
