//! Goal: a client holding credentials from the security manager runs the usual commands
//! against a secured OSD, and its answers' integrity values verify, under every method.
//! Method: the real OSD logical unit with capability checks in-process behind
//! `DirectTransport`, a temporary SQLite store, and [`OsdKeys`] playing the security manager
//! (the hostile cases run over real iSCSI in crates/cli/tests/osd_security.rs).

use std::sync::Arc;

use tessera_engine::{Engine, EngineConfig};
use tessera_osd_proto::{AttrId, DataLayout, Extent};
use tessera_scsi::DirectTransport;
use tessera_security::{Key, KeySlot, OsdKeys, Permissions, SecurityMethod};
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::security_gate::TargetSecurity;
use tessera_target::spc::ScsiFront;
use tessera_types::ObjectAddr;

use super::*;

type Direct = DirectTransport<ScsiFront<Arc<OsdCommandSet>>>;

const MASTER: Key = Key([0x5A; 32]);
const HOUR_MS: u64 = 3_600_000;

struct SecuredOsd {
    client: OsdClient<Direct>,
    keys: OsdKeys,
    pid: u64,
    _dir: tempfile::TempDir,
}

/// A secured OSD requiring `required`, with root, partition and working key 0 established and
/// one partition made, all by the manager's own credentials.
fn secured(required: SecurityMethod) -> SecuredOsd {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), EngineConfig::default()).unwrap();
    let system_id = engine.system_id();
    let set = OsdCommandSet::with_security(engine, TargetSecurity::new(required, Some(MASTER))).unwrap();
    let device = Arc::new(ScsiFront::new(Arc::new(set)));
    let client = OsdClient::new(DirectTransport::new(device, "iqn.2026-11.org.tessera:test,i,0x1", 1), 0);
    assert_eq!(client.system_id().unwrap(), system_id, "INQUIRY names the system id");
    let mut keys = OsdKeys::new(system_id, MASTER);
    client.establish_key(&mut keys, KeySlot::Root, required).unwrap();
    let root = keys.credential(keys.root_capability(required, Permissions::CREATE, now_ms() + HOUR_MS)).unwrap();
    let pid = client.execute_as(&OsdRequestBuilder::new(Command::CreatePartition { requested: None }).get_attrs(
        tessera_osd_proto::GetAttrs::List { ids: vec![tessera_osd_proto::pages::CURRENT_COMMAND_PARTITION_ID], allocation_len: 64 },
    ), &root)
    .map(|r| tessera_osd_proto::pages::value_u64(r.attr(tessera_osd_proto::pages::CURRENT_COMMAND_PARTITION_ID).unwrap()).unwrap())
    .unwrap();
    client.establish_key(&mut keys, KeySlot::Partition(pid), required).unwrap();
    client.establish_key(&mut keys, KeySlot::Working(pid, 0), required).unwrap();
    SecuredOsd { client, keys, pid, _dir: dir }
}

impl SecuredOsd {
    fn partition_credential(&self, method: SecurityMethod) -> Credential {
        let cap = self.keys.partition_capability(method, self.pid, Permissions::ALL, now_ms() + HOUR_MS).unwrap();
        self.keys.credential(cap).unwrap()
    }

    fn object_credential(&self, method: SecurityMethod, oid: u64, permissions: Permissions) -> Credential {
        let cap = self.keys.object_capability(method, self.pid, oid, permissions, now_ms() + HOUR_MS, 0).unwrap();
        self.keys.credential(cap).unwrap()
    }
}

#[test]
fn every_method_runs_the_usual_commands() {
    for method in [SecurityMethod::CapKey, SecurityMethod::CmdRsp, SecurityMethod::AllData] {
        let mut osd = secured(method);
        osd.client.set_credentials(Some(Arc::new(osd.partition_credential(method))));
        let oid = osd.client.create_one(osd.pid).unwrap();
        let addr = ObjectAddr::new(osd.pid, oid);
        // Object-scoped credential from here on, as a file-system client holds.
        let rw = Permissions::READ | Permissions::WRITE | Permissions::GET_ATTR | Permissions::SET_ATTR;
        osd.client.set_credentials(Some(Arc::new(osd.object_credential(method, oid, rw))));
        let data: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
        osd.client.write(addr, 0, &data, false).unwrap();
        assert_eq!(osd.client.read(addr, 0, data.len() as u64).unwrap().data, data, "{method}");
        let layout = DataLayout::List(vec![Extent { offset: 10, len: 5 }, Extent { offset: 1000, len: 3 }]);
        osd.client.write_layout(addr, 0, b"abcdefgh", layout.clone(), false).unwrap();
        assert_eq!(osd.client.read_layout(addr, 0, 8, layout).unwrap().data, b"abcdefgh");
        let len_attr = AttrId::new(1, 0x82);
        let attrs = osd.client.get_attributes(addr, &[len_attr]).unwrap();
        assert_eq!(tessera_osd_proto::pages::value_u64(attrs.iter().find(|a| a.id == len_attr).unwrap().value.as_deref().unwrap()), Some(70_000));
        // Reading past the end still answers (RECOVERED ERROR) and verifies.
        let past = osd.client.read(addr, 69_990, 100).unwrap();
        assert!(past.past_end, "{method}");
    }
}

#[test]
fn a_nosec_client_is_refused() {
    let osd = secured(SecurityMethod::CmdRsp);
    let err = osd.client.create_one(osd.pid).unwrap_err();
    let sense = err.sense().expect("a refusal");
    assert_eq!((sense.asc_ascq(), sense.field_pointer.map(|f| f.byte)), (0x2400, Some(82)));
}

/// Goal: rotating the working key keeps outstanding capabilities working until their version
/// is replaced; then they are refused. Method: version 1 beside 0, then a new version 0.
#[test]
fn working_key_rotation() {
    let mut osd = secured(SecurityMethod::CmdRsp);
    let method = SecurityMethod::CmdRsp;
    let oid = osd.client.execute_as(
        &OsdRequestBuilder::new(Command::Create { partition_id: osd.pid, requested: None, count: 1 })
            .get_attrs(tessera_osd_proto::GetAttrs::List { ids: vec![tessera_osd_proto::pages::CURRENT_COMMAND_OBJECT_ID], allocation_len: 64 }),
        &osd.partition_credential(method),
    ).map(|r| tessera_osd_proto::pages::value_u64(r.attr(tessera_osd_proto::pages::CURRENT_COMMAND_OBJECT_ID).unwrap()).unwrap()).unwrap();
    let addr = ObjectAddr::new(osd.pid, oid);
    let old = osd.object_credential(method, oid, Permissions::READ | Permissions::WRITE);
    let pid = osd.pid;
    let mut keys = osd.keys.clone();
    osd.client.establish_key(&mut keys, KeySlot::Working(pid, 1), method).unwrap();
    osd.keys = keys;
    let new = osd.object_credential(method, oid, Permissions::READ | Permissions::WRITE);
    assert_eq!(new.capability().key_version, 1);
    let write = |c: &Credential| osd.client.execute_as(&OsdRequestBuilder::new(Command::Write { addr, offset: 0, len: 2, layout: DataLayout::Contiguous }).data(b"hi"), c);
    write(&old).unwrap();
    write(&new).unwrap();
    let mut keys = osd.keys.clone();
    osd.client.establish_key(&mut keys, KeySlot::Working(pid, 0), method).unwrap();
    let sense = write(&old).unwrap_err().sense().cloned().expect("refused");
    assert_eq!((sense.asc_ascq(), sense.field_pointer.map(|f| f.byte)), (0x2400, Some(184)));
    write(&new).unwrap();
}
