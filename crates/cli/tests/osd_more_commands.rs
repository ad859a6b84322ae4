//! Goal: the OSD-2 commands and attribute features the other end-to-end files do not drive over
//! the real socket behave as docs/engine.md and docs/osd2-wire-format.md say: FORMAT OSD,
//! QUERY, the member-object commands, FLUSH COLLECTION, piggy-backed attribute lists on data
//! and creating commands, timestamps control, standard pages read whole, page identification,
//! partition counts, the maximum-length quota and a LIST allocation too small for one entry.
//! Method: one real `tessera osd` daemon per test, driven by Tessera's iSCSI initiator and
//! `OsdClient` (its typed methods, or `execute` with a hand-built `OsdRequestBuilder` where a
//! command needs lists the typed methods do not send).

mod common;

use common::*;
use tessera_initiator::osd_client::ListParams;
use tessera_osd_proto::pages::{CURRENT_COMMAND_OBJECT_ID, CURRENT_COMMAND_PARTITION_ID};
use tessera_osd_proto::{
    AttrId, Attribute, Command, DataLayout, FlushScope, GetAttrs, OsdRequestBuilder, QueryCondition, QueryCriteria,
    TimestampsControl,
};
use tessera_scsi::SenseKey;
use tessera_types::ObjectAddr;

const USER_PAGE: u32 = 0x0002_0000;
const LOGICAL_LENGTH: AttrId = AttrId::new(0x1, 0x82);
const DATA_MODIFIED: AttrId = AttrId::new(0x3, 0x5);
const ATTR_MODIFIED: AttrId = AttrId::new(0x3, 0x3);
const ROOT_INFO: u32 = 0x9000_0001;
const PARTITION_INFO: u32 = 0x3000_0001;
const CURRENT_COMMAND_OBJECT_TYPE: AttrId = AttrId::new(0xFFFF_FFFE, 0x2);
const ALL: u32 = AttrId::ALL_IN_PAGE;

fn attr(page: u32, number: u32, value: &[u8]) -> Attribute {
    Attribute { id: AttrId::new(page, number), value: value.to_vec() }
}

fn value_of(c: &tessera_initiator::osd_client::OsdClient<tessera_initiator::iscsi::Session>, addr: ObjectAddr, id: AttrId) -> Option<Vec<u8>> {
    c.get_attributes(addr, &[id]).unwrap().remove(0).value
}

fn u64_of(c: &tessera_initiator::osd_client::OsdClient<tessera_initiator::iscsi::Session>, addr: ObjectAddr, id: AttrId) -> u64 {
    be64(&value_of(c, addr, id).unwrap_or_else(|| panic!("{id:?} undefined on {addr:?}")))
}

fn ms48(v: &[u8]) -> u64 {
    assert_eq!(v.len(), 6, "timestamps are 6 bytes");
    v.iter().fold(0u64, |acc, b| acc << 8 | *b as u64)
}

/// The 32-byte name field of a page identification, without the NUL padding.
fn page_name(id: &[u8]) -> String {
    assert_eq!(id.len(), 40, "page identification is 40 bytes");
    String::from_utf8(id[8..].iter().copied().take_while(|b| *b != 0).collect()).unwrap()
}

/// A partition, a collection and `n` user objects that are its members.
fn collection_with_members(
    c: &tessera_initiator::osd_client::OsdClient<tessera_initiator::iscsi::Session>,
    n: u16,
) -> (u64, ObjectAddr, Vec<ObjectAddr>) {
    let pid = c.create_partition(None).unwrap();
    let cid = c.create_collection(pid, None).unwrap();
    let members: Vec<ObjectAddr> = c.create(pid, None, n).unwrap().into_iter().map(|oid| ObjectAddr::new(pid, oid)).collect();
    for m in &members {
        c.add_to_collection(*m, 1, cid).unwrap();
    }
    (pid, ObjectAddr::new(pid, cid), members)
}

fn files_under(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .map(|e| e.unwrap().path())
        .map(|p| if p.is_dir() { files_under(&p) } else { 1 })
        .sum()
}

/// Goal: FORMAT OSD erases every partition, object, attribute and data file, and the root
/// information page then reports the formatted capacity (0x80), no partitions and no used
/// capacity; the new capacity is enforced and the root's timestamps are set.
/// Method: populate two partitions with data, FORMAT with 64 KiB, inspect the root, the old
/// addresses, the data directory, then write more than 64 KiB.
#[test]
fn format_osd_wipes_everything_and_reports_the_formatted_capacity() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, obj) = partition_with_object(&c);
    c.write(obj, 0, &pattern(50_000, 3), false).unwrap();
    c.set_attributes(obj, &[attr(USER_PAGE, 1, b"before")]).unwrap();
    c.create_partition(None).unwrap();
    assert!(files_under(&osd.data_dir().join("objects")) >= 1, "the write made a data file");

    let capacity = 64 * 1024;
    c.format_osd(capacity).unwrap();

    let root = c.get_attributes(ObjectAddr::ROOT, &[AttrId::new(ROOT_INFO, 0x80), AttrId::new(ROOT_INFO, 0xC0), AttrId::new(ROOT_INFO, 0x81)]).unwrap();
    assert_eq!(be64(root[0].value.as_ref().unwrap()), capacity, "total capacity is the formatted capacity");
    assert_eq!(be64(root[1].value.as_ref().unwrap()), 0, "no partitions after FORMAT");
    assert_eq!(be64(root[2].value.as_ref().unwrap()), 0, "no used capacity after FORMAT");
    assert!(c.list_all(0).unwrap().is_empty(), "LIST of partitions is empty");
    let created = ms48(&value_of(&c, ObjectAddr::ROOT, AttrId::new(0x9000_0003, 0x1)).unwrap());
    assert!(created > 0, "FORMAT sets the root's created time");

    let err = c.get_attributes(obj, &[AttrId::new(USER_PAGE, 1)]).unwrap_err();
    let sense = err.sense().expect("sense");
    assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::IllegalRequest, 0x2400), "the old object is gone: {err}");
    assert!(c.read(obj, 0, 10).is_err());
    assert_eq!(files_under(&osd.data_dir().join("objects")), 0, "FORMAT removed the data files");

    // The old partition id can be created again, empty, and the capacity holds.
    assert_eq!(c.create_partition(Some(pid)).unwrap(), pid);
    assert!(c.list_all(pid).unwrap().is_empty());
    let fresh = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    let err = c.write(fresh, 0, &vec![1u8; 2 * capacity as usize], false).unwrap_err();
    let sense = err.sense().expect("sense");
    assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::DataProtect, 0x5507), "beyond the formatted capacity: {err}");
    c.write(fresh, 0, &[1u8; 1000], false).unwrap();
}

/// Goal: QUERY returns the members of a collection whose attributes lie within [min, max]
/// (byte-wise; an empty bound is open; an undefined attribute never matches), combining
/// conditions with match all (AND) or match any (OR), and never returns non-members.
/// Method: four members with a user attribute holding 8-byte numbers 10, 20, 30 and
/// (undefined), a second attribute "a"/"b", plus a non-member that matches everything; run
/// QUERYs with single conditions, AND, OR, none, and on a computed attribute.
#[test]
fn query_selects_members_by_range_with_match_all_and_any() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, coll, m) = collection_with_members(&c, 4);
    let num = AttrId::new(USER_PAGE, 1);
    let tag = AttrId::new(USER_PAGE, 2);
    for (i, v) in [10u64, 20, 30].iter().enumerate() {
        c.set_attributes(m[i], &[Attribute { id: num, value: v.to_be_bytes().to_vec() }]).unwrap();
    }
    for (i, t) in [b"a", b"b", b"b", b"b"].iter().enumerate() {
        c.set_attributes(m[i], &[Attribute { id: tag, value: t.to_vec() }]).unwrap();
    }
    c.write(m[3], 0, &[0u8; 500], false).unwrap();
    // Not a member: matches every condition below but must never be returned.
    let outsider = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    c.set_attributes(outsider, &[Attribute { id: num, value: 20u64.to_be_bytes().to_vec() }, attr(USER_PAGE, 2, b"b")]).unwrap();

    let cond = |id: AttrId, min: &[u8], max: &[u8]| QueryCondition { attr: id, min: min.to_vec(), max: max.to_vec() };
    let q = |match_all: bool, conditions: Vec<QueryCondition>| {
        let mut ids = c.query(coll, QueryCriteria { match_all, conditions }, 4096).unwrap();
        ids.sort();
        ids
    };
    let ids = |v: &[usize]| v.iter().map(|i| m[*i].object_id.0).collect::<Vec<_>>();

    assert_eq!(q(true, vec![cond(num, &15u64.to_be_bytes(), &25u64.to_be_bytes())]), ids(&[1]), "min and max");
    assert_eq!(q(true, vec![cond(num, &20u64.to_be_bytes(), &[])]), ids(&[1, 2]), "min only, inclusive");
    assert_eq!(q(true, vec![cond(num, &[], &20u64.to_be_bytes())]), ids(&[0, 1]), "max only, inclusive");
    assert_eq!(q(true, vec![cond(num, &[], &[])]), ids(&[0, 1, 2]), "open bounds match every defined value, not the undefined one");
    assert_eq!(q(true, vec![cond(num, &40u64.to_be_bytes(), &[])]), ids(&[]), "nothing above 30");

    let only_b = cond(tag, b"b", b"b");
    let at_most_20 = cond(num, &[], &20u64.to_be_bytes());
    assert_eq!(q(true, vec![only_b.clone(), at_most_20.clone()]), ids(&[1]), "match all: b AND <= 20");
    assert_eq!(q(false, vec![only_b, at_most_20]), ids(&[0, 1, 2, 3]), "match any: b OR <= 20");
    assert_eq!(q(false, vec![cond(num, &11u64.to_be_bytes(), &19u64.to_be_bytes())]), ids(&[]), "match any with no match");
    assert_eq!(q(true, vec![]), ids(&[0, 1, 2, 3]), "no conditions: every member");

    // A computed attribute: only m[3] has data.
    assert_eq!(q(true, vec![cond(LOGICAL_LENGTH, &1u64.to_be_bytes(), &[])]), ids(&[3]), "logical length >= 1");

    // QUERY addresses a collection; a user object is refused.
    let err = c.query(m[0], QueryCriteria { match_all: true, conditions: vec![] }, 4096).unwrap_err();
    assert_eq!(err.sense().expect("sense").asc_ascq(), 0x2400, "{err}");
}

/// Goal: GET MEMBER ATTRIBUTES answers the get list for every member (a multi-object list),
/// SET MEMBER ATTRIBUTES applies a set list to every member and to nothing else, all or
/// nothing, and REMOVE MEMBER OBJECTS removes the members (data included) but leaves the
/// collection and non-members.
/// Method: a collection of three objects with different lengths and one non-member; run the
/// three commands and check each object with ordinary GET ATTRIBUTES, LIST and READ.
#[test]
fn member_commands_get_set_and_remove_the_members_only() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, coll, m) = collection_with_members(&c, 3);
    for (i, obj) in m.iter().enumerate() {
        c.write(*obj, 0, &pattern(100 * (i + 1), i as u32), false).unwrap();
    }
    let outsider = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    c.write(outsider, 0, b"keep me", false).unwrap();

    let got = c.get_member_attributes(coll, &[LOGICAL_LENGTH, AttrId::new(0x1, 0x2)], 4096).unwrap();
    assert_eq!(got.len(), 6, "two attributes per member, nothing for the non-member: {got:?}");
    for (i, obj) in m.iter().enumerate() {
        let len = got.iter().find(|a| a.object_id == obj.object_id.0 && a.attr.id == LOGICAL_LENGTH).expect("member's length");
        assert_eq!(be64(len.attr.value.as_ref().unwrap()), 100 * (i as u64 + 1));
        let oid = got.iter().find(|a| a.object_id == obj.object_id.0 && a.attr.id.number == 0x2).expect("member's id");
        assert_eq!(be64(oid.attr.value.as_ref().unwrap()), obj.object_id.0);
    }
    assert!(got.iter().all(|a| a.object_id != outsider.object_id.0));

    let owner = AttrId::new(USER_PAGE, 9);
    c.set_member_attributes(coll, &[Attribute { id: owner, value: b"alice".to_vec() }]).unwrap();
    for obj in &m {
        assert_eq!(value_of(&c, *obj, owner).as_deref(), Some(&b"alice"[..]), "member {obj:?}");
    }
    assert_eq!(value_of(&c, outsider, owner), None, "the non-member is untouched");

    // A list holding a read-only attribute is refused as a whole.
    let err = c
        .set_member_attributes(coll, &[Attribute { id: owner, value: b"bob".to_vec() }, Attribute { id: AttrId::new(0x1, 0x81), value: vec![0; 8] }])
        .unwrap_err();
    let sense = err.sense().expect("sense");
    assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::IllegalRequest, 0x2600), "{err}");
    for obj in &m {
        assert_eq!(value_of(&c, *obj, owner).as_deref(), Some(&b"alice"[..]), "nothing applied on {obj:?}");
    }

    c.remove_member_objects(coll).unwrap();
    let left = c.list_all(pid).unwrap();
    assert!(m.iter().all(|obj| !left.contains(&obj.object_id.0)), "members removed: {left:x?}");
    assert!(left.contains(&coll.object_id.0), "the collection stays");
    assert!(left.contains(&outsider.object_id.0), "the non-member stays");
    assert!(c.list_collection(coll, &ListParams::default()).unwrap().entries.is_empty(), "the collection is empty");
    assert!(c.read(m[0], 0, 1).is_err(), "a removed member cannot be read");
    assert_eq!(c.read(outsider, 0, 7).unwrap().data, b"keep me");
    assert!(c.get_member_attributes(coll, &[LOGICAL_LENGTH], 4096).unwrap().is_empty());
    // An empty collection can now be removed without force.
    c.remove_collection(coll, false).unwrap();
}

/// Goal: FLUSH COLLECTION succeeds at every scope on a collection, is refused (2400 at the
/// object id) on anything that is not a collection, and what it flushed is there after a
/// SIGKILL of the daemon.
/// Method: a collection with written members; flush at the three scopes; flush a user object
/// id and an unknown id as collections; kill -9, restart, read back.
#[test]
fn flush_collection_flushes_collections_and_refuses_other_objects() {
    let mut osd = TestOsd::start();
    let (pid, coll, m) = {
        let c = osd.client();
        let (pid, coll, m) = collection_with_members(&c, 2);
        for (i, obj) in m.iter().enumerate() {
            c.write(*obj, 0, &pattern(4096, i as u32), false).unwrap();
        }
        for scope in [FlushScope::DataAndAttributes, FlushScope::AttributesOnly, FlushScope::Everything] {
            c.flush_collection(coll, scope).unwrap_or_else(|e| panic!("{scope:?}: {e}"));
        }
        for not_a_collection in [m[0], ObjectAddr::new(pid, 0x7_0000)] {
            let err = c.flush_collection(not_a_collection, FlushScope::DataAndAttributes).unwrap_err();
            let sense = err.sense().expect("sense");
            assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::IllegalRequest, 0x2400), "{err}");
            assert_eq!(sense.field_pointer.map(|f| f.byte), Some(24), "points at the object id");
        }
        (pid, coll, m)
    };
    osd.restart(true);
    let c = osd.client();
    for (i, obj) in m.iter().enumerate() {
        assert_eq!(c.read(*obj, 0, 4096).unwrap().data, pattern(4096, i as u32));
    }
    let members: Vec<u64> = c.list_collection(coll, &ListParams::default()).unwrap().entries.iter().map(|e| e.object_id).collect();
    assert_eq!(members, m.iter().map(|a| a.object_id.0).collect::<Vec<_>>());
    assert!(c.list_all(pid).unwrap().contains(&coll.object_id.0));
}

/// Goal: a WRITE carrying a set list and a get list sets the attribute and returns, in the same
/// command, the logical length after the write and the attribute just set (order: function,
/// set, get).
/// Method: `execute` a WRITE built with `.set_attr` and `.get_attrs(List)`; check the reply's
/// retrieved list, then the stored state with separate commands.
#[test]
fn write_with_piggybacked_set_and_get_returns_the_new_length() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    c.write(obj, 0, &[5u8; 1000], false).unwrap();
    let data = pattern(500, 7);
    let tag = AttrId::new(USER_PAGE, 3);
    let b = OsdRequestBuilder::new(Command::Write { addr: obj, offset: 1000, len: 500, layout: DataLayout::Contiguous })
        .data(&data)
        .set_attr(tag, b"written-with-data".to_vec())
        .get_attrs(GetAttrs::List { ids: vec![LOGICAL_LENGTH, tag, CURRENT_COMMAND_OBJECT_ID], allocation_len: 512 });
    let reply = c.execute(&b).unwrap();
    let list = reply.retrieved.as_ref().expect("a retrieved list");
    assert!(!list.truncated);
    assert_eq!(list.attrs.iter().map(|a| a.id).collect::<Vec<_>>(), vec![LOGICAL_LENGTH, tag, CURRENT_COMMAND_OBJECT_ID], "list order");
    assert_eq!(be64(reply.attr(LOGICAL_LENGTH).expect("length")), 1500, "the get sees the write");
    assert_eq!(reply.attr(tag), Some(&b"written-with-data"[..]), "the get sees the set");
    assert_eq!(be64(reply.attr(CURRENT_COMMAND_OBJECT_ID).expect("current oid")), obj.object_id.0);
    assert!(reply.data.is_empty(), "a WRITE has no command data");

    assert_eq!(value_of(&c, obj, tag).as_deref(), Some(&b"written-with-data"[..]));
    let back = c.read(obj, 0, 1500).unwrap();
    assert_eq!(&back.data[..1000], &[5u8; 1000][..]);
    assert_eq!(&back.data[1000..], &data[..]);
}

/// Goal: a READ with a get list returns the data at Data-In offset 0 and the attributes at the
/// retrieved offset, also when the read runs past the end (RECOVERED ERROR 3B17).
/// Method: `execute` READs built with `.get_attrs(List)` (and one with page format), compare
/// data and attribute values.
#[test]
fn read_with_piggybacked_get_returns_data_and_attributes() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, obj) = partition_with_object(&c);
    let data = pattern(3000, 11);
    c.write(obj, 0, &data, false).unwrap();
    let tag = AttrId::new(USER_PAGE, 4);
    c.set_attributes(obj, &[Attribute { id: tag, value: b"v".to_vec() }]).unwrap();

    let ids = vec![LOGICAL_LENGTH, tag, AttrId::new(0x1, 0x1), AttrId::new(USER_PAGE, 99)];
    let b = OsdRequestBuilder::new(Command::Read { addr: obj, offset: 100, len: 2000, layout: DataLayout::Contiguous })
        .get_attrs(GetAttrs::List { ids: ids.clone(), allocation_len: 512 });
    let reply = c.execute(&b).unwrap();
    assert_eq!(reply.data, &data[100..2100]);
    assert!(reply.recovered.is_none());
    assert_eq!(be64(reply.attr(LOGICAL_LENGTH).unwrap()), 3000);
    assert_eq!(reply.attr(tag), Some(&b"v"[..]));
    assert_eq!(be64(reply.attr(AttrId::new(0x1, 0x1)).unwrap()), pid);
    let undefined = reply.attrs().iter().find(|a| a.id == AttrId::new(USER_PAGE, 99)).expect("listed although undefined");
    assert_eq!(undefined.value, None);

    // Past the end: the data that exists, the recovered error, and still the attributes.
    let b = OsdRequestBuilder::new(Command::Read { addr: obj, offset: 2500, len: 1000, layout: DataLayout::Contiguous })
        .get_attrs(GetAttrs::List { ids: vec![LOGICAL_LENGTH], allocation_len: 64 });
    let reply = c.execute(&b).unwrap();
    assert_eq!(reply.recovered.as_ref().map(|s| s.asc_ascq()), Some(0x3B17));
    assert_eq!(&reply.data[..500], &data[2500..]);
    assert_eq!(be64(reply.attr(LOGICAL_LENGTH).expect("attributes despite the recovered error")), 3000);

    // Page format on a READ: the user object information page.
    let b = OsdRequestBuilder::new(Command::Read { addr: obj, offset: 0, len: 10, layout: DataLayout::Contiguous })
        .get_attrs(GetAttrs::Page { page: 0x1, allocation_len: 512 });
    let reply = c.execute(&b).unwrap();
    assert_eq!(reply.data, &data[..10]);
    assert_eq!(be64(reply.attr(AttrId::new(0x1, 0x2)).expect("oid in page")), obj.object_id.0);
}

/// Goal: a CREATE whose get list names the Current Command page returns the new object's id,
/// partition id and type; the set list applies to every object created; a requested id comes
/// back as itself.
/// Method: `execute` CREATE of three objects with `.set_attr` and a Current Command get list;
/// then CREATE with a requested id; check LIST and each object's attribute.
#[test]
fn create_get_list_returns_the_current_command_object_id() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let label = AttrId::new(USER_PAGE, 5);
    let gets = vec![CURRENT_COMMAND_OBJECT_ID, CURRENT_COMMAND_PARTITION_ID, CURRENT_COMMAND_OBJECT_TYPE, label];
    let b = OsdRequestBuilder::new(Command::Create { partition_id: pid, requested: None, count: 3 })
        .set_attr(label, b"batch".to_vec())
        .get_attrs(GetAttrs::List { ids: gets.clone(), allocation_len: 512 });
    let reply = c.execute(&b).unwrap();
    let first = be64(reply.attr(CURRENT_COMMAND_OBJECT_ID).expect("new object id"));
    assert!(first >= 0x10000, "{first:#x}");
    assert_eq!(be64(reply.attr(CURRENT_COMMAND_PARTITION_ID).expect("partition id")), pid);
    assert_eq!(reply.attr(CURRENT_COMMAND_OBJECT_TYPE), Some(&[0x80u8][..]), "user object type code");
    assert_eq!(reply.attr(label), Some(&b"batch"[..]), "the get describes the first object after the set");
    assert_eq!(c.list_all(pid).unwrap(), vec![first, first + 1, first + 2]);
    for oid in first..first + 3 {
        assert_eq!(value_of(&c, ObjectAddr::new(pid, oid), label).as_deref(), Some(&b"batch"[..]), "set on {oid:#x}");
    }

    let b = OsdRequestBuilder::new(Command::Create { partition_id: pid, requested: Some(0x50_0000), count: 1 })
        .get_attrs(GetAttrs::List { ids: vec![CURRENT_COMMAND_OBJECT_ID], allocation_len: 64 });
    assert_eq!(be64(c.execute(&b).unwrap().attr(CURRENT_COMMAND_OBJECT_ID).unwrap()), 0x50_0000);
}

/// Goal: timestamps control "do not update" (CDB byte 12 = 0x7F) leaves the data modified and
/// attributes modified times alone while the WRITE itself takes effect; without it the same
/// WRITE moves them.
/// Method: WRITE, wait, WRITE with DoNotUpdate (also extending the object), compare the
/// timestamps; then a normal WRITE after a wait.
#[test]
fn timestamps_do_not_update_leaves_modified_times_unchanged() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    c.write(obj, 0, b"first", false).unwrap();
    let before_data = ms48(&value_of(&c, obj, DATA_MODIFIED).unwrap());
    let before_attr = ms48(&value_of(&c, obj, ATTR_MODIFIED).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(30));

    let data = b"second write, longer";
    let b = OsdRequestBuilder::new(Command::Write { addr: obj, offset: 0, len: data.len() as u64, layout: DataLayout::Contiguous })
        .data(data)
        .timestamps(TimestampsControl::DoNotUpdate);
    c.execute(&b).unwrap();
    assert_eq!(c.read(obj, 0, data.len() as u64).unwrap().data, data, "the write happened");
    assert_eq!(u64_of(&c, obj, LOGICAL_LENGTH), data.len() as u64);
    assert_eq!(ms48(&value_of(&c, obj, DATA_MODIFIED).unwrap()), before_data, "data modified unchanged");
    assert_eq!(ms48(&value_of(&c, obj, ATTR_MODIFIED).unwrap()), before_attr, "attributes modified unchanged");

    c.write(obj, 0, b"third", false).unwrap();
    assert!(ms48(&value_of(&c, obj, DATA_MODIFIED).unwrap()) > before_data, "an ordinary WRITE moves it");
}

/// Goal: "all attributes of a page" (number 0xFFFFFFFF) on a standard page returns every
/// defined attribute of it: for user object information page 1 the identification, partition
/// id, object id, used capacity and logical length; for the timestamps page all five times;
/// page 0xFFFFFFFF with 0xFFFFFFFF returns every page's attributes, user pages included.
/// Method: GET ATTRIBUTES with those list entries; check numbers and values.
#[test]
fn all_attributes_of_standard_pages() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, obj) = partition_with_object(&c);
    c.write(obj, 0, &pattern(8192, 2), false).unwrap();
    c.set_attributes(obj, &[attr(USER_PAGE, 6, b"mine")]).unwrap();

    let page1 = c.get_attributes(obj, &[AttrId::new(0x1, ALL)]).unwrap();
    let numbers: Vec<u32> = page1.iter().map(|a| a.id.number).collect();
    assert_eq!(numbers, vec![0x0, 0x1, 0x2, 0x81, 0x82], "defined attributes of the information page, in order");
    assert!(page1.iter().all(|a| a.id.page == 0x1 && a.value.is_some()));
    let v = |n: u32| page1.iter().find(|a| a.id.number == n).and_then(|a| a.value.clone()).unwrap();
    assert_eq!(be64(&v(0x1)), pid);
    assert_eq!(be64(&v(0x2)), obj.object_id.0);
    assert_eq!(be64(&v(0x82)), 8192);
    assert!(be64(&v(0x81)) > 0, "used capacity after an 8 KiB write");
    assert_eq!(page_name(&v(0x0)), "T10 User Object Information");

    let times = c.get_attributes(obj, &[AttrId::new(0x3, ALL)]).unwrap();
    assert_eq!(times.iter().map(|a| a.id.number).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4, 5]);
    assert!(times[1..].iter().all(|a| a.value.as_ref().map(Vec::len) == Some(6)));

    let everything = c.get_attributes(obj, &[AttrId::new(0xFFFF_FFFF, ALL)]).unwrap();
    for want in [AttrId::new(0x1, 0x82), AttrId::new(0x3, 0x5), AttrId::new(USER_PAGE, 6), AttrId::new(0x2, 0x1)] {
        assert!(everything.iter().any(|a| a.id == want && a.value.is_some()), "{want:?} in every page: {everything:?}");
    }
}

/// Goal: attribute 0 of a page identifies it (40 bytes: "INCITS  " + "T10 <type> <page>" for
/// standard pages, "TESSERA " + "Application page 0x........" for application pages), on
/// every object type, and the directory page lists the object's pages by absolute number.
/// Method: GET ATTRIBUTES of attribute 0 of information, timestamps, quotas and an
/// application page on a user object, a collection, a partition and the root.
#[test]
fn page_identification_attribute_zero_names_the_page() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, obj) = partition_with_object(&c);
    let coll = ObjectAddr::new(pid, c.create_collection(pid, None).unwrap());
    c.set_attributes(obj, &[attr(USER_PAGE, 1, b"x")]).unwrap();

    let cases: [(ObjectAddr, u32, &[u8; 8], &str); 8] = [
        (obj, 0x1, b"INCITS  ", "T10 User Object Information"),
        (obj, 0x3, b"INCITS  ", "T10 User Object Timestamps"),
        (obj, 0x2, b"INCITS  ", "T10 User Object Quotas"),
        (obj, USER_PAGE, b"TESSERA ", "Application page 0x00020000"),
        (coll, 0x6000_0001, b"INCITS  ", "T10 Collection Information"),
        (ObjectAddr::partition(pid), PARTITION_INFO, b"INCITS  ", "T10 Partition Information"),
        (ObjectAddr::ROOT, ROOT_INFO, b"INCITS  ", "T10 Root Information"),
        (obj, 0xFFFF_FFFE, b"INCITS  ", "T10 Current Command"),
    ];
    for (addr, page, vendor, name) in cases {
        let v = value_of(&c, addr, AttrId::new(page, 0)).unwrap_or_else(|| panic!("page {page:#x} has no identification"));
        assert_eq!(&v[..8], vendor, "vendor of page {page:#x}");
        assert_eq!(page_name(&v), name, "page {page:#x}");
    }

    let dir = c.get_attributes(obj, &[AttrId::new(0x0, ALL)]).unwrap();
    let listed: Vec<u32> = dir.iter().map(|a| a.id.number).collect();
    for page in [0x0, 0x1, 0x2, 0x3, 0x4, USER_PAGE] {
        assert!(listed.contains(&page), "directory lists page {page:#x}: {listed:x?}");
    }
    let user_entry = dir.iter().find(|a| a.id.number == USER_PAGE).unwrap();
    assert_eq!(page_name(user_entry.value.as_ref().unwrap()), "Application page 0x00020000");
    // A page the object does not have: no identification.
    assert_eq!(value_of(&c, obj, AttrId::new(0x3_0000, 0)), None);
    // An application may name its page by storing attribute 0.
    let own = tessera_osd_proto::AttrId::new(USER_PAGE + 1, 0);
    let mut name = [0u8; 40];
    name[..8].copy_from_slice(b"ACME    ");
    name[8..18].copy_from_slice(b"index page");
    c.set_attributes(obj, &[Attribute { id: own, value: name.to_vec() }, attr(USER_PAGE + 1, 1, b"y")]).unwrap();
    assert_eq!(value_of(&c, obj, own).as_deref(), Some(&name[..]));
    // The policy/security page (5) holds only the policy/access tag (attribute 1, used by
    // capability security): undefined until set; other numbers refuse SET.
    assert_eq!(value_of(&c, obj, AttrId::new(0x5, 1)), None);
    c.set_attributes(obj, &[attr(0x5, 1, &[0, 0, 0, 9])]).unwrap();
    assert_eq!(value_of(&c, obj, AttrId::new(0x5, 1)).as_deref(), Some(&[0, 0, 0, 9][..]));
    let err = c.set_attributes(obj, &[attr(0x5, 2, &[0; 8])]).unwrap_err();
    assert_eq!(err.sense().expect("sense").asc_ascq(), 0x2600, "{err}");
}

/// Goal: the partition information page (0x30000001) reports the partition id, the number of
/// collections (0xC1) and of user objects (0xC2), and used capacity, and follows creations and
/// removals.
/// Method: two collections and five objects, one removed; GET ATTRIBUTES on the partition.
#[test]
fn partition_information_page_counts_collections_and_objects() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let part = ObjectAddr::partition(pid);
    let id = |n: u32| AttrId::new(PARTITION_INFO, n);
    assert_eq!((u64_of(&c, part, id(0xC1)), u64_of(&c, part, id(0xC2))), (0, 0), "a new partition is empty");

    c.create_collection(pid, None).unwrap();
    c.create_collection(pid, None).unwrap();
    let objs = c.create(pid, None, 5).unwrap();
    c.write(ObjectAddr::new(pid, objs[0]), 0, &[1u8; 8192], false).unwrap();
    assert_eq!(u64_of(&c, part, id(0x1)), pid);
    assert_eq!(u64_of(&c, part, id(0xC1)), 2, "collections");
    assert_eq!(u64_of(&c, part, id(0xC2)), 5, "user objects");
    assert!(u64_of(&c, part, id(0x81)) > 0, "used capacity follows the write");

    c.remove(ObjectAddr::new(pid, objs[0])).unwrap();
    assert_eq!(u64_of(&c, part, id(0xC2)), 4);
    assert_eq!(u64_of(&c, part, id(0x81)), 0, "removal gives the capacity back");
    // Other partitions do not count.
    let other = c.create_partition(None).unwrap();
    c.create(other, None, 2).unwrap();
    assert_eq!(u64_of(&c, part, id(0xC2)), 4);
    assert_eq!(u64_of(&c, ObjectAddr::partition(other), id(0xC2)), 2);
    assert_eq!(u64_of(&c, ObjectAddr::ROOT, AttrId::new(ROOT_INFO, 0xC0)), 2);
}

/// Goal: the maximum user object length quota (user object quotas page 2, attribute 0x1; the
/// partition default on 0x30000002 attribute 0x1 is inherited) refuses a WRITE that would end
/// beyond it with DATA PROTECT 5507 naming the object, and nothing of that WRITE is written;
/// writes within the quota still work.
/// Method: set the quota to 1000, write 1000 bytes, then a WRITE over the boundary and one
/// wholly beyond; check sense, logical length and contents. Then a partition default.
#[test]
fn max_user_object_length_quota_refuses_longer_writes_with_5507() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, obj) = partition_with_object(&c);
    let max_len = AttrId::new(0x2, 0x1);
    assert_eq!(u64_of(&c, obj, max_len), u64::MAX, "unlimited by default");
    c.set_attributes(obj, &[Attribute { id: max_len, value: 1000u64.to_be_bytes().to_vec() }]).unwrap();
    assert_eq!(u64_of(&c, obj, max_len), 1000);
    c.write(obj, 0, &[7u8; 1000], false).unwrap();

    for (offset, len) in [(990u64, 20usize), (5000, 10)] {
        let err = c.write(obj, offset, &vec![9u8; len], false).unwrap_err();
        let sense = err.sense().expect("sense");
        assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::DataProtect, 0x5507), "{err}");
        let ident = sense.osd_object.expect("OSD object identification");
        assert_eq!((ident.partition_id, ident.object_id), (pid, obj.object_id.0));
    }
    assert_eq!(u64_of(&c, obj, LOGICAL_LENGTH), 1000, "no write extended the object");
    let back = c.read(obj, 0, 1000).unwrap();
    assert!(back.data.iter().all(|b| *b == 7), "the refused write changed nothing");
    // Exactly up to the quota is allowed.
    c.write(obj, 990, &[8u8; 10], false).unwrap();
    // Extending through the logical length is refused the same way.
    let err = c.set_attributes(obj, &[Attribute { id: LOGICAL_LENGTH, value: 1001u64.to_be_bytes().to_vec() }]).unwrap_err();
    assert_eq!(err.sense().expect("sense").asc_ascq(), 0x5507, "{err}");

    // A partition default applies to objects without their own quota.
    c.set_attributes(ObjectAddr::partition(pid), &[Attribute { id: AttrId::new(0x3000_0002, 0x1), value: 100u64.to_be_bytes().to_vec() }]).unwrap();
    let other = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    assert_eq!(u64_of(&c, other, max_len), 100, "inherited from the partition");
    let err = c.write(other, 0, &[1u8; 101], false).unwrap_err();
    assert_eq!(err.sense().expect("sense").asc_ascq(), 0x5507, "{err}");
    assert_eq!(u64_of(&c, other, LOGICAL_LENGTH), 0);
    c.write(other, 0, &[1u8; 100], false).unwrap();
}

/// Goal: a LIST whose allocation length holds the header but not one entry returns no entries,
/// a continuation object id equal to the first object (so nothing is skipped), and succeeds;
/// resuming with room returns everything. A LIST allocation shorter than the 24-byte header is
/// answered with what fits (the client reports the short parameter data, not a hang or a
/// SCSI failure).
/// Method: five objects; LIST with allocation 24 and 31; then resume; then allocation 16.
#[test]
fn list_with_allocation_too_small_for_one_entry() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let ids = c.create(pid, None, 5).unwrap();
    for allocation_len in [24u64, 31] {
        let page = c.list(pid, &ListParams { allocation_len, ..ListParams::default() }).unwrap();
        assert!(page.entries.is_empty(), "allocation {allocation_len}: {page:?}");
        assert_eq!(page.continuation_oid, ids[0], "allocation {allocation_len}: continue at the first object");
        let rest = c.list(pid, &ListParams { initial_oid: page.continuation_oid, list_id: page.list_id, ..ListParams::default() }).unwrap();
        assert_eq!(rest.entries.iter().map(|e| e.object_id).collect::<Vec<_>>(), ids);
        assert_eq!(rest.continuation_oid, 0);
    }
    // With attributes, one entry needs 16 bytes plus its attributes.
    let params = ListParams { allocation_len: 24 + 16, attrs: Some(vec![LOGICAL_LENGTH]), ..ListParams::default() };
    let page = c.list(pid, &params).unwrap();
    assert!(page.entries.is_empty() && page.continuation_oid == ids[0], "{page:?}");

    // Shorter than the header: the command itself succeeds and carries at most 16 bytes.
    let reply = c
        .execute(&OsdRequestBuilder::new(Command::List { partition_id: pid, list_id: 0, initial_oid: 0, allocation_len: 16, with_attrs: false }))
        .unwrap();
    assert!(reply.data.len() <= 16, "allocation length honoured: {} bytes", reply.data.len());
    assert!(c.list(pid, &ListParams { allocation_len: 16, ..ListParams::default() }).is_err(), "the client cannot decode a cut header");
    assert_eq!(c.list_all(pid).unwrap(), ids, "the daemon still serves");
}

/// Goal: SET KEY and SET MASTER KEY (0x8898 / 0x8899), not implemented until capability
/// security lands, are refused cleanly as an unsupported service action (ILLEGAL REQUEST
/// 24/00 pointing at CDB byte 8) and the session keeps working.
/// Method: a valid OSD CDB with its service action replaced, sent raw on the client's session.
#[test]
fn set_key_and_set_master_key_are_refused_at_the_service_action() {
    use tessera_scsi::{ScsiRequest, ScsiStatus, ScsiTransport};
    let osd = TestOsd::start();
    let c = osd.client();
    // The first command takes the power-on unit attention (the client resends it).
    let pid = c.create_partition(None).unwrap();
    for sa in [0x8898u16, 0x8899] {
        let mut cdb = OsdRequestBuilder::new(Command::GetAttributes { addr: ObjectAddr::partition(pid) }).encode().unwrap().cdb;
        cdb[8..10].copy_from_slice(&sa.to_be_bytes());
        let r = c.transport().execute(&ScsiRequest { lun: 0, cdb: &cdb, data_out: &[], data_in_len: 0 }).unwrap();
        assert_eq!(r.status, ScsiStatus::CheckCondition, "{sa:#x}: {r:?}");
        let sense = r.sense.expect("sense");
        assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::IllegalRequest, 0x2400), "{sa:#x}");
        assert_eq!(sense.field_pointer.map(|f| (f.in_cdb, f.byte)), Some((true, 8)), "{sa:#x}");
    }
    assert_eq!(c.list_all(0).unwrap(), vec![pid], "the session still works");
}
