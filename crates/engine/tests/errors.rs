//! Goal: every sense the engine produces, with its key, ASC/ASCQ, field pointer and OSD
//! object descriptor. Method: provoke each error through `Engine::execute` and compare the
//! `CommandError::sense()`.

mod common;

use common::*;
use tessera_osd_proto::{AttrId, Command, DataLayout, Request};
use tessera_scsi::{FieldPointer, SenseKey};
use tessera_types::ObjectAddr;

fn sense_of(osd: &Osd, r: &Request<'_>) -> tessera_scsi::Sense {
    osd.run(r).expect_err("command should fail").sense()
}

#[test]
fn missing_object_points_at_the_object_id() {
    let osd = Osd::new();
    let pid = osd.partition();
    let s = sense_of(&osd, &req(Command::Read { addr: ObjectAddr::new(pid, 0x12345), offset: 0, len: 1, layout: DataLayout::Contiguous }));
    assert_eq!((s.key, s.asc_ascq(), s.field_pointer), (SenseKey::IllegalRequest, 0x2400, Some(FieldPointer::cdb(24))));
}

#[test]
fn missing_partition_points_at_the_partition_id() {
    let osd = Osd::new();
    let s = sense_of(&osd, &req(Command::Create { partition_id: 0x99999, requested: None, count: 1 }));
    assert_eq!((s.asc_ascq(), s.field_pointer), (0x2400, Some(FieldPointer::cdb(16))));
    let s = sense_of(&osd, &req(Command::GetAttributes { addr: ObjectAddr::new(0x99999, 0x10000) }));
    assert_eq!(s.field_pointer, Some(FieldPointer::cdb(16)));
}

#[test]
fn wrong_object_type_is_a_missing_object() {
    let osd = Osd::new();
    let pid = osd.partition();
    let r = with_get(req(Command::CreateCollection { partition_id: pid, requested: None }), &[AttrId::new(CURRENT, 4)]);
    let cid = be(&osd.ok(&r).retrieved[0]);
    let s = sense_of(&osd, &req(Command::Read { addr: ObjectAddr::new(pid, cid), offset: 0, len: 1, layout: DataLayout::Contiguous }));
    assert_eq!((s.asc_ascq(), s.field_pointer), (0x2400, Some(FieldPointer::cdb(24))));
}

#[test]
fn remove_partition_with_objects_is_2c0a_with_the_partition() {
    let osd = Osd::new();
    let pid = osd.partition();
    osd.create(pid);
    let s = sense_of(&osd, &req(Command::RemovePartition { partition_id: pid }));
    assert_eq!((s.key, s.asc_ascq()), (SenseKey::IllegalRequest, 0x2C0A));
    let o = s.osd_object.expect("OSD object identification descriptor");
    assert_eq!((o.partition_id, o.object_id), (pid, 0));
}

#[test]
fn remove_collection_with_members_is_2c0a_unless_forced() {
    let osd = Osd::new();
    let pid = osd.partition();
    let r = with_get(req(Command::CreateCollection { partition_id: pid, requested: None }), &[AttrId::new(CURRENT, 4)]);
    let cid = be(&osd.ok(&r).retrieved[0]);
    let oid = osd.create(pid);
    osd.set(ObjectAddr::new(pid, oid), 4, 1, &cid.to_be_bytes()).unwrap();
    let s = sense_of(&osd, &req(Command::RemoveCollection { addr: ObjectAddr::new(pid, cid), force: false }));
    assert_eq!(s.asc_ascq(), 0x2C0A);
    assert_eq!(s.osd_object.map(|o| o.object_id), Some(cid));
    osd.ok(&req(Command::RemoveCollection { addr: ObjectAddr::new(pid, cid), force: true }));
    assert_eq!(osd.get1(ObjectAddr::new(pid, oid), 4, 1), None, "force drops the membership");
}

#[test]
fn quota_exceeded_is_5507_and_writes_nothing() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    osd.set(addr, 2, 1, &100u64.to_be_bytes()).unwrap();
    let write = Request { data: &[1u8; 10], ..req(Command::Write { addr, offset: 95, len: 10, layout: DataLayout::Contiguous }) };
    let s = sense_of(&osd, &write);
    assert_eq!((s.key, s.asc_ascq()), (SenseKey::DataProtect, 0x5507));
    assert_eq!(osd.get1(addr, 1, 0x82).map(|v| be_bytes(&v)), Some(0), "nothing written");
    // Partition capacity quota.
    osd.set(ObjectAddr::partition(pid), 0x3000_0002, 0x1_0001, &4096u64.to_be_bytes()).unwrap();
    let other = ObjectAddr::new(pid, osd.create(pid));
    let big = Request { data: &[1u8; 8192], ..req(Command::Write { addr: other, offset: 0, len: 8192, layout: DataLayout::Contiguous }) };
    assert_eq!(sense_of(&osd, &big).asc_ascq(), 0x5507);
    assert!(osd.read(other, 0, 1).recovered.is_some(), "object still empty");
    // Logical length beyond the maximum.
    let s = osd.set(addr, 1, 0x82, &1000u64.to_be_bytes()).unwrap_err().sense();
    assert_eq!(s.asc_ascq(), 0x5507);
}

#[test]
fn read_only_attribute_is_2600_at_the_set_list_entry() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let r = with_set(req(Command::SetAttributes { addr }), &[(APP_PAGE, 1, b"ok"), (3, 1, &[0; 6])]);
    let s = sense_of(&osd, &r);
    assert_eq!((s.key, s.asc_ascq(), s.field_pointer), (SenseKey::IllegalRequest, 0x2600, Some(FieldPointer::data(8 + 24))));
    assert_eq!(osd.get1(addr, APP_PAGE, 1), None, "a refused list sets nothing");
    assert_eq!(osd.set(ObjectAddr::ROOT, 0x9000_0001, 3, &[0; 20]).unwrap_err().sense().asc_ascq(), 0x2600);
}

#[test]
fn duplicate_requested_id_is_refused() {
    let osd = Osd::new();
    let pid = osd.partition();
    osd.ok(&req(Command::Create { partition_id: pid, requested: Some(0x10005), count: 1 }));
    let s = sense_of(&osd, &req(Command::Create { partition_id: pid, requested: Some(0x10003), count: 4 }));
    assert_eq!((s.asc_ascq(), s.field_pointer), (0x2400, Some(FieldPointer::cdb(24))));
    let s = sense_of(&osd, &req(Command::CreatePartition { requested: Some(pid) }));
    assert_eq!(s.field_pointer, Some(FieldPointer::cdb(16)));
}

#[test]
fn atomics_refuse_standard_and_non_counter_attributes() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let s = sense_of(&osd, &req(Command::FetchAndAdd { addr, attr: AttrId::new(1, 0x82), addend: 1 }));
    assert_eq!(s.asc_ascq(), 0x2400);
    osd.set(addr, APP_PAGE, 2, b"abc").unwrap();
    assert!(osd.run(&req(Command::FetchAndAdd { addr, attr: AttrId::new(APP_PAGE, 2), addend: 1 })).is_err());
}

#[test]
fn read_past_end_is_recovered_not_failed() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let r = osd.read(addr, 0, 4);
    assert_eq!(r.data_in, vec![0; 4]);
    let s = r.recovered.expect("recovered error");
    assert_eq!((s.key, s.asc_ascq()), (SenseKey::RecoveredError, 0x3B17));
}
