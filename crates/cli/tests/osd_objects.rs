//! Goal: the object-management commands of OSD-2 behave as the standard says when driven over a
//! real iSCSI session against the real daemon. Method: one daemon per test, Tessera's own client.

mod common;

use common::*;
use tessera_initiator::osd_client::ListParams;
use tessera_osd_proto::AttrId;
use tessera_types::ObjectAddr;

#[test]
fn partitions_are_created_listed_and_removed() {
    let osd = TestOsd::start();
    let c = osd.client();
    let a = c.create_partition(None).unwrap();
    let b = c.create_partition(Some(0x20000)).unwrap();
    assert!(a >= 0x10000, "target-chosen partition id {a:#x} is in the reserved range");
    assert_eq!(b, 0x20000);
    let listed = c.list(0, &ListParams::default()).unwrap();
    assert!(listed.root, "LIST of partition 0 lists partitions");
    let ids: Vec<u64> = listed.entries.iter().map(|e| e.object_id).collect();
    assert!(ids.contains(&a) && ids.contains(&b), "{ids:x?}");

    // Creating an existing partition id fails; removing an empty partition works.
    assert!(c.create_partition(Some(0x20000)).is_err());
    c.remove_partition(b).unwrap();
    let ids = c.list_all(0).unwrap();
    assert!(!ids.contains(&b));
}

#[test]
fn removing_a_partition_that_holds_objects_fails_with_2c0a() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, obj) = partition_with_object(&c);
    let err = c.remove_partition(pid).unwrap_err();
    let sense = err.sense().expect("sense data");
    assert_eq!(sense.asc_ascq(), 0x2C0A, "{err}");
    c.remove(obj).unwrap();
    c.remove_partition(pid).unwrap();
}

#[test]
fn create_makes_one_or_many_objects_with_requested_or_chosen_ids() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let many = c.create(pid, None, 5).unwrap();
    assert_eq!(many.len(), 5);
    for w in many.windows(2) {
        assert_eq!(w[1], w[0] + 1, "multi-object CREATE uses consecutive ids");
    }
    let requested = c.create(pid, Some(0x900000), 1).unwrap();
    assert_eq!(requested, vec![0x900000]);
    let err = c.create(pid, Some(0x900000), 1).unwrap_err();
    assert!(err.sense().is_some(), "re-creating an existing id must fail with sense: {err}");
    let listed = c.list_all(pid).unwrap();
    for id in many.iter().chain(&requested) {
        assert!(listed.contains(id), "{id:#x} missing from LIST {listed:x?}");
    }
    // Removed objects disappear from LIST and their reads fail.
    c.remove(ObjectAddr::new(pid, many[0])).unwrap();
    assert!(!c.list_all(pid).unwrap().contains(&many[0]));
    assert!(c.read(ObjectAddr::new(pid, many[0]), 0, 1).is_err());
}

#[test]
fn list_continues_across_small_allocation_lengths() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let created = c.create(pid, None, 40).unwrap();
    let mut seen = Vec::new();
    let mut params = ListParams { allocation_len: 24 + 8 * 7, ..ListParams::default() };
    for _ in 0..100 {
        let page = c.list(pid, &params).unwrap();
        assert!(page.entries.len() <= 7, "allocation length honoured");
        seen.extend(page.entries.iter().map(|e| e.object_id));
        if page.continuation_oid == 0 {
            break;
        }
        params.initial_oid = page.continuation_oid;
        params.list_id = page.list_id;
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen, created);
}

#[test]
fn list_with_attributes_returns_each_objects_values() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let ids = c.create(pid, None, 3).unwrap();
    for (i, id) in ids.iter().enumerate() {
        c.write(ObjectAddr::new(pid, *id), 0, &vec![7u8; 100 * (i + 1)], false).unwrap();
    }
    let logical_length = AttrId::new(0x1, 0x82);
    let params = ListParams { attrs: Some(vec![logical_length]), ..ListParams::default() };
    let result = c.list(pid, &params).unwrap();
    assert!(result.with_attrs);
    for (i, id) in ids.iter().enumerate() {
        let entry = result.entries.iter().find(|e| e.object_id == *id).expect("listed");
        let v = entry.attrs.iter().find(|a| a.id == logical_length).and_then(|a| a.value.clone()).expect("length");
        assert_eq!(be64(&v), 100 * (i as u64 + 1));
    }
}

#[test]
fn collections_hold_members_and_refuse_removal_unless_forced() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let cid = c.create_collection(pid, None).unwrap();
    let coll = ObjectAddr::new(pid, cid);
    let members = c.create(pid, None, 3).unwrap();
    for m in &members {
        c.add_to_collection(ObjectAddr::new(pid, *m), 1, cid).unwrap();
    }
    let listed: Vec<u64> = c.list_collection(coll, &ListParams::default()).unwrap().entries.iter().map(|e| e.object_id).collect();
    assert_eq!(listed, members);

    let err = c.remove_collection(coll, false).unwrap_err();
    assert_eq!(err.sense().expect("sense").asc_ascq(), 0x2C0A, "{err}");
    c.remove_collection(coll, true).unwrap();
    // Forced removal of the collection leaves its members in place.
    assert!(c.list_all(pid).unwrap().contains(&members[0]));
}
