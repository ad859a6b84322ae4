//! Goal: the security gate's view of the store: keys survive a reopen and can be dropped per
//! partition; an object's type, created time and policy/access tag (settable on the
//! policy/security page) come back as stored. Method: real SQLite and files in a temp dir.

mod common;

use common::*;
use tessera_engine::StoredKey;
use tessera_engine::security_store::{POLICY_ACCESS_TAG, POLICY_PAGE_REL};
use tessera_engine::ObjectKind;
use tessera_osd_proto::Command;
use tessera_types::ObjectAddr;

fn key(kind: u8, pid: u64, version: u8, byte: u8) -> StoredKey {
    StoredKey { kind, partition_id: pid, version, key: [byte; 32], key_id: [byte; 7] }
}

#[test]
fn keys_survive_reopen_and_partition_keys_can_be_dropped() {
    let osd = Osd::new();
    osd.engine.put_security_key(&key(0, 0, 0, 1)).unwrap();
    osd.engine.put_security_key(&key(2, 0x10000, 0, 2)).unwrap();
    osd.engine.put_security_key(&key(3, 0x10000, 4, 3)).unwrap();
    osd.engine.put_security_key(&key(3, 0x10001, 0, 4)).unwrap();
    // Replacing a slot keeps one row.
    osd.engine.put_security_key(&key(3, 0x10000, 4, 5)).unwrap();
    let osd = osd.reopen();
    let mut keys = osd.engine.security_keys().unwrap();
    keys.sort_by_key(|k| (k.kind, k.partition_id, k.version));
    assert_eq!(keys, vec![key(0, 0, 0, 1), key(2, 0x10000, 0, 2), key(3, 0x10000, 4, 5), key(3, 0x10001, 0, 4)]);
    osd.engine.delete_partition_keys(0x10000).unwrap();
    assert_eq!(osd.engine.security_keys().unwrap().len(), 2);
    osd.engine.delete_partition_keys(0).unwrap();
    assert_eq!(osd.engine.security_keys().unwrap(), vec![key(0, 0, 0, 1)]);
}

#[test]
fn object_facts_follow_the_policy_tag() {
    let osd = Osd::new();
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let facts = osd.engine.object_security(addr).unwrap().unwrap();
    assert_eq!((facts.kind, facts.policy_tag), (ObjectKind::User, 0));
    assert_eq!(facts.created_ms, be_bytes(&osd.get1(addr, 3, 1).unwrap()));
    osd.set(addr, POLICY_PAGE_REL, POLICY_ACCESS_TAG, &42u32.to_be_bytes()).unwrap();
    assert_eq!(osd.engine.object_security(addr).unwrap().unwrap().policy_tag, 42);
    let partition = osd.engine.object_security(ObjectAddr::partition(pid)).unwrap().unwrap();
    assert_eq!(partition.kind, ObjectKind::Partition);
    osd.ok(&req(Command::Remove { addr }));
    assert_eq!(osd.engine.object_security(addr).unwrap(), None);
    assert_eq!(osd.engine.object_security(ObjectAddr::new(u64::MAX, 1)).unwrap(), None);
}

/// Goal: the cached facts never outlive a change. Method: read the facts (filling the cache),
/// then WRITE (which must not matter), retag, remove and re-create the same id, reading after
/// each step.
#[test]
fn cached_object_facts_follow_retags_and_re_creation() {
    let osd = Osd::new();
    let pid = osd.partition();
    let oid = osd.create(pid);
    let addr = ObjectAddr::new(pid, oid);
    osd.set(addr, POLICY_PAGE_REL, POLICY_ACCESS_TAG, &7u32.to_be_bytes()).unwrap();
    let first = osd.engine.object_security(addr).unwrap().unwrap();
    assert_eq!(first.policy_tag, 7);
    osd.write(addr, 0, b"data");
    assert_eq!(osd.engine.object_security(addr).unwrap(), Some(first), "a WRITE changes no fact");
    osd.set(addr, POLICY_PAGE_REL, POLICY_ACCESS_TAG, &8u32.to_be_bytes()).unwrap();
    assert_eq!(osd.engine.object_security(addr).unwrap().unwrap().policy_tag, 8, "a retag is seen at once");
    osd.ok(&req(Command::Remove { addr }));
    assert_eq!(osd.engine.object_security(addr).unwrap(), None, "a removed object has no facts");
    osd.ok(&req(Command::Create { partition_id: pid, requested: Some(oid), count: 1 }));
    let again = osd.engine.object_security(addr).unwrap().unwrap();
    assert_eq!(again.policy_tag, 0, "the new object under the old id does not inherit the old tag");
}
