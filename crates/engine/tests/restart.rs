//! Goal: everything committed survives dropping the engine and reopening the directory:
//! data, attributes, timestamps, id allocation, membership. Method: real SQLite (WAL) and
//! files in a temp dir; once with FLUSH OSD before the drop, once without.

mod common;

use common::*;
use tessera_osd_proto::{AttrId, Command, FlushScope};
use tessera_types::ObjectAddr;

fn populate(osd: &Osd) -> (ObjectAddr, Vec<u64>) {
    let pid = osd.partition();
    let a = osd.create(pid);
    let b = osd.create(pid);
    osd.ok(&req(Command::Remove { addr: ObjectAddr::new(pid, b) }));
    let addr = ObjectAddr::new(pid, a);
    osd.write(addr, 0, b"persistent bytes");
    osd.set(addr, APP_PAGE, 1, b"attr").unwrap();
    let times: Vec<u64> = osd.get(addr, &[AttrId::new(3, 1), AttrId::new(3, 3), AttrId::new(3, 5)]).iter().map(be).collect();
    (addr, times)
}

fn check(osd: &Osd, addr: ObjectAddr, times: &[u64]) {
    assert_eq!(osd.read(addr, 0, 16).data_in, b"persistent bytes");
    assert_eq!(osd.get1(addr, APP_PAGE, 1).as_deref(), Some(&b"attr"[..]));
    let after: Vec<u64> = osd.get(addr, &[AttrId::new(3, 1), AttrId::new(3, 3), AttrId::new(3, 5)]).iter().map(be).collect();
    assert_eq!(after, times, "timestamps come from SQLite, not from file times");
    assert_eq!(osd.get1(ObjectAddr::ROOT, 0x9000_0001, 3).as_deref(), Some(&[7u8; 20][..]));
    // The removed id (a + 1) is not handed out again.
    assert_eq!(osd.create(addr.partition_id.0), addr.object_id.0 + 2);
}

#[test]
fn flushed_state_survives_reopen() {
    let osd = Osd::new();
    let (addr, times) = populate(&osd);
    osd.ok(&req(Command::FlushOsd { scope: FlushScope::Everything }));
    let osd = osd.reopen();
    check(&osd, addr, &times);
}

#[test]
fn committed_state_survives_reopen_without_flush() {
    let osd = Osd::new();
    let (addr, times) = populate(&osd);
    let osd = osd.reopen();
    check(&osd, addr, &times);
}

#[test]
fn system_id_is_kept_across_reopen_even_with_another_config() {
    let dir = tempfile::tempdir().unwrap();
    let first = tessera_engine::Engine::open(dir.path(), tessera_engine::EngineConfig::default()).unwrap().system_id();
    let again = tessera_engine::Engine::open(dir.path(), config()).unwrap().system_id();
    assert_eq!(first, again);
}
