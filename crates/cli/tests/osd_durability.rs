//! Goal: a store survives restart with everything that was flushed (after SIGTERM and after
//! SIGKILL), including attributes, timestamps and id allocation. Method: the real daemon,
//! stopped and started again on the same directory.

mod common;

use common::*;
use tessera_osd_proto::{AttrId, Attribute, FlushScope};
use tessera_types::ObjectAddr;

fn durable_state_survives(crash: bool) {
    let mut osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let ids = c.create(pid, None, 3).unwrap();
    let data: Vec<Vec<u8>> = (0..3).map(|i| pattern(100_000 + i * 7, i as u32)).collect();
    for (id, d) in ids.iter().zip(&data) {
        c.write(ObjectAddr::new(pid, *id), 0, d, false).unwrap();
    }
    let label = AttrId::new(0x30000, 1);
    c.set_attributes(ObjectAddr::new(pid, ids[0]), &[Attribute { id: label, value: b"kept".to_vec() }]).unwrap();
    let created = c.get_attributes(ObjectAddr::new(pid, ids[0]), &[AttrId::new(0x3, 0x1)]).unwrap()[0].value.clone();
    c.flush_osd(FlushScope::Everything).unwrap();
    drop(c);

    osd.restart(crash);
    let c = osd.client();
    for (id, d) in ids.iter().zip(&data) {
        assert!(c.read(ObjectAddr::new(pid, *id), 0, d.len() as u64).unwrap().data == *d);
    }
    let got = c.get_attributes(ObjectAddr::new(pid, ids[0]), &[label, AttrId::new(0x3, 0x1)]).unwrap();
    assert_eq!(got[0].value.as_deref(), Some(&b"kept"[..]));
    assert_eq!(got[1].value, created, "created time is stored, not recomputed");
    // Ids are never reused after restart.
    let next = c.create_one(pid).unwrap();
    assert!(ids.iter().all(|id| next > *id), "new id {next:#x} reuses one of {ids:x?}");
}

#[test]
fn flushed_state_survives_graceful_restart() {
    durable_state_survives(false);
}

#[test]
fn flushed_state_survives_sigkill() {
    durable_state_survives(true);
}

#[test]
fn fua_write_survives_sigkill_without_flush() {
    let mut osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    let data = pattern(70_000, 3);
    c.write(obj, 0, &data, true).unwrap();
    drop(c);
    osd.restart(true);
    assert!(osd.client().read(obj, 0, data.len() as u64).unwrap().data == data);
}
