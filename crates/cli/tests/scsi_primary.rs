//! Goal: the SCSI primary commands every initiator sends are answered by the real daemon the way
//! SPC-4 says, for an OSD (peripheral device type 0x11). Method: raw CDBs over Tessera's session.

mod common;

use common::*;
use tessera_scsi::{ScsiRequest, ScsiResponse, ScsiStatus, ScsiTransport, SenseKey};

fn run(c: &impl ScsiTransport, lun: u64, cdb: &[u8], data_in_len: u32) -> ScsiResponse {
    c.execute(&ScsiRequest { lun, cdb, data_out: &[], data_in_len }).expect("transport")
}

#[test]
fn first_command_sees_power_on_unit_attention_then_tur_is_clean() {
    let osd = TestOsd::start();
    let c = osd.client();
    let t = c.transport();
    let first = run(t, 0, &[0x00, 0, 0, 0, 0, 0], 0);
    assert_eq!(first.status, ScsiStatus::CheckCondition);
    let sense = first.sense.expect("unit attention sense");
    assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::UnitAttention, 0x2900));
    assert_eq!(run(t, 0, &[0x00, 0, 0, 0, 0, 0], 0).status, ScsiStatus::Good);
}

#[test]
fn inquiry_reports_an_osd_with_vpd_pages() {
    let osd = TestOsd::start();
    let c = osd.client();
    let t = c.transport();
    let std = run(t, 0, &[0x12, 0, 0, 0, 96, 0], 96);
    assert_eq!(std.status, ScsiStatus::Good);
    assert_eq!(std.data_in[0] & 0x1F, 0x11, "peripheral device type OSD");
    assert!(String::from_utf8_lossy(&std.data_in[8..16]).contains("TESSERA"), "vendor id");

    let supported = run(t, 0, &[0x12, 1, 0x00, 0, 255, 0], 255);
    let pages = &supported.data_in[4..4 + supported.data_in[3] as usize];
    for p in [0x00, 0x80, 0x83] {
        assert!(pages.contains(&p), "VPD page {p:#x} listed in {pages:x?}");
    }
    let serial = run(t, 0, &[0x12, 1, 0x80, 0, 255, 0], 255);
    assert_eq!(serial.data_in[1], 0x80);
    assert!(serial.data_in[3] > 0, "unit serial number present");
    let ids = run(t, 0, &[0x12, 1, 0x83, 0, 255, 0], 255);
    assert_eq!(ids.data_in[1], 0x83);
    assert!(u16::from_be_bytes([ids.data_in[2], ids.data_in[3]]) >= 4, "at least one designator");

    // Allocation length truncates.
    let short = run(t, 0, &[0x12, 0, 0, 0, 5, 0], 5);
    assert_eq!(short.data_in.len(), 5);
}

#[test]
fn report_luns_lists_lun_zero_and_other_luns_are_refused() {
    let osd = TestOsd::start();
    let c = osd.client();
    let t = c.transport();
    let r = run(t, 0, &[0xA0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0], 64);
    assert_eq!(r.status, ScsiStatus::Good);
    assert_eq!(u32::from_be_bytes(r.data_in[0..4].try_into().unwrap()), 8, "one LUN");
    assert_eq!(&r.data_in[8..16], &[0u8; 8]);
    let other = run(t, 5, &[0x00, 0, 0, 0, 0, 0], 0);
    assert_eq!(other.status, ScsiStatus::CheckCondition);
    let sense = other.sense.expect("sense");
    assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::IllegalRequest, 0x2500));
}

#[test]
fn request_sense_answers_no_sense_when_nothing_is_pending() {
    let osd = TestOsd::start();
    let c = osd.client();
    let t = c.transport();
    let _ = run(t, 0, &[0x00, 0, 0, 0, 0, 0], 0); // consume the unit attention
    let r = run(t, 0, &[0x03, 1, 0, 0, 252, 0], 252);
    assert_eq!(r.status, ScsiStatus::Good);
    let sense = tessera_scsi::Sense::decode(&r.data_in).expect("sense data");
    assert_eq!(sense.key, SenseKey::NoSense);
}
