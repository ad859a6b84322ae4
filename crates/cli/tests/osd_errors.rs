//! Goal: every malformed or impossible command gets CHECK CONDITION with the right sense key,
//! ASC/ASCQ and field pointer, and the daemon keeps serving. Method: hand-built and corrupted
//! CDBs sent over a real iSCSI session to the real daemon with Tessera's own initiator.

mod common;

use common::*;
use tessera_osd_proto::{AttrId, Command, DataLayout, OsdRequestBuilder};
use tessera_scsi::{ScsiRequest, ScsiResponse, ScsiStatus, ScsiTransport, Sense, SenseKey};
use tessera_types::ObjectAddr;

/// Sends `cdb` with `data_out` and returns the decoded sense (the command must fail).
fn send_raw(osd: &TestOsd, cdb: &[u8], data_out: &[u8], data_in_len: u32) -> ScsiResponse {
    let c = osd.client();
    // A new session's first command reports the power-on unit attention; take it with a TEST
    // UNIT READY so the command under test meets the state it is meant to test.
    let tur = ScsiRequest { lun: 0, cdb: &[0u8; 6], data_out: &[], data_in_len: 0 };
    let first = c.transport().execute(&tur).expect("transport");
    assert_eq!(first.sense.map(|s| s.key), Some(SenseKey::UnitAttention));
    let pieces = [data_out];
    let request = ScsiRequest { lun: 0, cdb, data_out: if data_out.is_empty() { &[] } else { &pieces }, data_in_len };
    c.transport().execute(&request).expect("transport")
}

fn sense_of(r: &ScsiResponse) -> &Sense {
    assert_eq!(r.status, ScsiStatus::CheckCondition, "{r:?}");
    r.sense.as_ref().expect("sense data")
}

fn read_cdb(pid: u64, oid: u64, len: u64) -> [u8; 236] {
    let b = OsdRequestBuilder::new(Command::Read { addr: ObjectAddr::new(pid, oid), offset: 0, len, layout: DataLayout::Contiguous });
    b.encode().unwrap().cdb
}

#[test]
fn missing_object_points_at_the_object_id() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let err = c.read(ObjectAddr::new(pid, 0x123456), 0, 10).unwrap_err();
    let sense = err.sense().expect("sense");
    assert_eq!(sense.key, SenseKey::IllegalRequest);
    assert_eq!(sense.asc_ascq(), 0x2400);
    assert_eq!(sense.field_pointer.map(|f| (f.in_cdb, f.byte)), Some((true, 24)), "{err}");
    assert!(err.to_string().contains("0x123456"), "message names the object: {err}");
}

#[test]
fn missing_partition_points_at_the_partition_id() {
    let osd = TestOsd::start();
    let c = osd.client();
    let err = c.create_one(0x777777).unwrap_err();
    let sense = err.sense().expect("sense");
    assert_eq!(sense.asc_ascq(), 0x2400);
    assert_eq!(sense.field_pointer.map(|f| f.byte), Some(16), "{err}");
}

#[test]
fn unknown_service_action_is_illegal_request_at_byte_8() {
    let osd = TestOsd::start();
    let mut cdb = read_cdb(0x10000, 0x10000, 1);
    cdb[8..10].copy_from_slice(&0x88FFu16.to_be_bytes());
    let r = send_raw(&osd, &cdb, &[], 1);
    let s = sense_of(&r);
    assert_eq!(s.key, SenseKey::IllegalRequest);
    assert_eq!(s.field_pointer.map(|f| f.byte), Some(8), "{s}");
}

#[test]
fn wrong_additional_cdb_length_is_refused() {
    let osd = TestOsd::start();
    let mut cdb = read_cdb(0x10000, 0x10000, 1);
    cdb[7] = 0x10;
    let r = send_raw(&osd, &cdb, &[], 1);
    let s = sense_of(&r);
    assert_eq!(s.key, SenseKey::IllegalRequest);
    assert_eq!(s.field_pointer.map(|f| f.byte), Some(7), "{s}");
}

#[test]
fn non_osd_opcodes_answer_invalid_opcode() {
    let osd = TestOsd::start();
    // READ(10) is a block command; an OSD has no blocks.
    let r = send_raw(&osd, &[0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0], &[], 512);
    let s = sense_of(&r);
    assert_eq!(s.key, SenseKey::IllegalRequest);
    assert_eq!(s.asc_ascq(), 0x2000, "{s}");
}

#[test]
fn write_whose_data_is_shorter_than_the_cdb_length_is_refused_and_nothing_is_written() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    let data = vec![1u8; 100];
    let b = OsdRequestBuilder::new(Command::Write { addr: obj, offset: 0, len: 100, layout: DataLayout::Contiguous }).data(&data);
    let encoded = b.encode().unwrap();
    let r = send_raw(&osd, &encoded.cdb, &data[..60], 0);
    let s = sense_of(&r);
    assert_eq!(s.key, SenseKey::IllegalRequest, "{s}");
    let back = c.read(obj, 0, 100).unwrap();
    assert!(back.data.iter().all(|b| *b == 0), "a refused WRITE wrote nothing");
}

#[test]
fn garbage_attribute_list_is_refused_with_a_parameter_pointer() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    let b = OsdRequestBuilder::new(Command::SetAttributes { addr: obj }).set_attr(AttrId::new(0x20000, 1), b"v".to_vec());
    let encoded = b.encode().unwrap();
    let mut data_out = encoded.data_out_vec();
    // Corrupt the list type nibble of the set list's header.
    let type_at = data_out.iter().position(|b| *b & 0x0F == 0x9).expect("set list header");
    data_out[type_at] = 0x05;
    let r = send_raw(&osd, &encoded.cdb, &data_out, 0);
    let s = sense_of(&r);
    assert_eq!(s.key, SenseKey::IllegalRequest, "{s}");
    assert!(s.field_pointer.is_some(), "{s}");
}

#[test]
fn the_daemon_keeps_serving_after_a_burst_of_bad_commands() {
    let osd = TestOsd::start();
    for i in 0..50u8 {
        let mut cdb = read_cdb(0x10000, 0x10000, 1);
        cdb[(i as usize * 7) % 236] ^= 0xA5;
        let _ = send_raw(&osd, &cdb, &[i; 17], 64);
    }
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    c.write(obj, 0, b"still here", false).unwrap();
    assert_eq!(c.read(obj, 0, 10).unwrap().data, b"still here");
}
