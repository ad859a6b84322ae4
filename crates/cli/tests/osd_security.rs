//! Goal: a secured OSD refuses every command the security manager did not authorise, with the
//! sense OSD-2 gives, and writes nothing: no capability, a forged capability, a capability for
//! another object, bytes outside the allowed range, missing permission bits, an expired
//! capability, a replayed nonce, a stale key version, a revoked policy tag, a tampered CDB,
//! tampered data under ALLDATA. Method: the real `tessera osd --security cmdrsp` daemon on a
//! loopback port; the security manager's side played with `OsdKeys` over the same iSCSI
//! initiator; the hostile client built by hand from the project's own builder and signer, its
//! bytes changed after signing where the attack needs it. After each refusal the object is read
//! back with the manager's credential to prove nothing was written.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use tessera_cli::daemon::Daemon;
use tessera_cli::session::connect;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_osd_proto::pages::{value_u64, CURRENT_COMMAND_OBJECT_ID, CURRENT_COMMAND_PARTITION_ID};
use tessera_osd_proto::{AttrId, Command, DataLayout, GetAttrs, OsdRequestBuilder};
use tessera_scsi::{ScsiRequest, ScsiResponse, ScsiStatus, ScsiTransport, SenseKey};
use tessera_security::clock::now_ms;
use tessera_security::policy::{policy_page, POLICY_ACCESS_TAG};
use tessera_security::{Capability, Credential, Key, KeySlot, Nonce, OsdKeys, Permissions, SecurityMethod};
use tessera_types::ObjectAddr;

const MASTER_HEX: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const HOUR_MS: u64 = 3_600_000;
const TAG: u32 = 0x7A6;
const ORIGINAL: &[u8] = b"original contents";

static NONCE: AtomicU64 = AtomicU64::new(1);

fn nonce() -> Nonce {
    Nonce::new(now_ms(), NONCE.fetch_add(1, Ordering::Relaxed))
}

/// A secured daemon, the manager's keys for it, a partition and two objects (X, tagged, holding
/// ORIGINAL; Y).
struct Secured {
    _daemon: Daemon,
    _dir: tempfile::TempDir,
    addr: String,
    target: String,
    keys: OsdKeys,
    method: SecurityMethod,
    pid: u64,
    x: ObjectAddr,
    y: ObjectAddr,
}

fn start(method: &str) -> Secured {
    let dir = tempfile::Builder::new().prefix("tessera-sec-").tempdir().unwrap();
    let key_file = dir.path().join("master.key");
    tessera_cli::cluster::write_private(&key_file, MASTER_HEX).unwrap();
    let data = dir.path().join("osd");
    let args = ["osd", "--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0", "--security", method, "--master-key-file", key_file.to_str().unwrap()];
    let daemon = Daemon::spawn_exe(tessera_exe(), &args).expect("start a secured tessera osd");
    assert_eq!(daemon.field("security").unwrap(), method);
    let addr = daemon.field("addr").unwrap().to_string();
    let target = daemon.field("target").unwrap().to_string();
    let manager = connect(&addr, &target).unwrap();
    let m = SecurityMethod::from_name(method).unwrap();
    let mut keys = OsdKeys::new(manager.system_id().unwrap(), Key::from_hex(MASTER_HEX).unwrap());
    manager.establish_key(&mut keys, KeySlot::Root, m).unwrap();
    let root = keys.credential(keys.root_capability(m, Permissions::CREATE, now_ms() + HOUR_MS)).unwrap();
    let get = |id| GetAttrs::List { ids: vec![id], allocation_len: 64 };
    let reply = manager.execute_as(&OsdRequestBuilder::new(Command::CreatePartition { requested: None }).get_attrs(get(CURRENT_COMMAND_PARTITION_ID)), &root).unwrap();
    let pid = value_u64(reply.attr(CURRENT_COMMAND_PARTITION_ID).unwrap()).unwrap();
    manager.establish_key(&mut keys, KeySlot::Partition(pid), m).unwrap();
    manager.establish_key(&mut keys, KeySlot::Working(pid, 0), m).unwrap();
    let s = Secured { _daemon: daemon, _dir: dir, addr, target, keys, method: m, pid, x: ObjectAddr::ROOT, y: ObjectAddr::ROOT };
    let all = s.partition_credential();
    let mut objects = Vec::new();
    for _ in 0..2 {
        let create = OsdRequestBuilder::new(Command::Create { partition_id: pid, requested: None, count: 1 }).get_attrs(get(CURRENT_COMMAND_OBJECT_ID));
        let reply = manager.execute_as(&create, &all).unwrap();
        objects.push(ObjectAddr::new(pid, value_u64(reply.attr(CURRENT_COMMAND_OBJECT_ID).unwrap()).unwrap()));
    }
    let (x, y) = (objects[0], objects[1]);
    manager.execute_as(&write(x, 0, ORIGINAL), &all).unwrap();
    set_tag(&manager, &all, x, TAG);
    Secured { x, y, ..s }
}

fn write(addr: ObjectAddr, offset: u64, data: &[u8]) -> OsdRequestBuilder<'_> {
    OsdRequestBuilder::new(Command::Write { addr, offset, len: data.len() as u64, layout: DataLayout::Contiguous }).data(data)
}

/// The manager changes an object's policy/access tag (POL_SEC through a piggy-backed set).
fn set_tag(client: &OsdClient<Session>, credential: &Credential, addr: ObjectAddr, tag: u32) {
    let b = OsdRequestBuilder::new(Command::SetAttributes { addr }).set_attr(AttrId::new(policy_page(0), POLICY_ACCESS_TAG), tag.to_be_bytes().to_vec());
    client.execute_as(&b, credential).unwrap();
}

impl Secured {
    /// A logged-in session whose power-on unit attention is already taken.
    fn session(&self) -> OsdClient<Session> {
        let c = connect(&self.addr, &self.target).unwrap();
        let tur = ScsiRequest { lun: 0, cdb: &[0u8; 6], data_out: &[], data_in_len: 0 };
        let first = c.transport().execute(&tur).unwrap();
        assert_eq!(first.sense.map(|s| s.key), Some(SenseKey::UnitAttention));
        c
    }

    fn partition_credential(&self) -> Credential {
        let m = self.method;
        self.keys.credential(self.keys.partition_capability(m, self.pid, Permissions::ALL, now_ms() + HOUR_MS).unwrap()).unwrap()
    }

    /// The capability a client holding X for writing would get.
    fn x_capability(&self, method: SecurityMethod) -> Capability {
        let rw = Permissions::READ | Permissions::WRITE;
        self.keys.object_capability(method, self.pid, self.x.object_id.0, rw, now_ms() + HOUR_MS, TAG).unwrap()
    }

    /// X's first bytes, read with the manager's credential.
    fn x_contents(&self) -> Vec<u8> {
        let read = OsdRequestBuilder::new(Command::Read { addr: self.x, offset: 0, len: ORIGINAL.len() as u64, layout: DataLayout::Contiguous });
        self.session().execute_as(&read, &self.partition_credential()).unwrap().data
    }
}

/// Sends an encoded (and possibly altered) command as it stands.
fn send(c: &OsdClient<Session>, encoded: &tessera_osd_proto::EncodedRequest<'_>, data_out: Option<&[u8]>) -> ScsiResponse {
    let pieces = encoded.data_out();
    let altered = data_out.map(|d| [d]);
    let out: &[&[u8]] = match &altered {
        Some(a) => a,
        None => &pieces,
    };
    let request = ScsiRequest { lun: 0, cdb: &encoded.cdb, data_out: out, data_in_len: encoded.data_in_len };
    c.transport().execute(&request).unwrap()
}

/// Asserts a refusal with (ASC/ASCQ, CDB field pointer).
fn assert_refused(r: &ScsiResponse, asc_ascq: u16, field: Option<u16>, case: &str) {
    assert_eq!(r.status, ScsiStatus::CheckCondition, "{case}: {r:?}");
    let sense = r.sense.as_ref().expect("sense");
    assert_eq!(sense.key, SenseKey::IllegalRequest, "{case}");
    assert_eq!((sense.asc_ascq(), sense.field_pointer.map(|f| f.byte)), (asc_ascq, field), "{case}: {sense}");
}

/// Signs WRITE "EVIL" at 0 on X with `credential` and sends it.
fn evil_write(s: &Secured, credential: &Credential) -> ScsiResponse {
    let c = s.session();
    let mut enc = write(s.x, 0, b"EVIL").encode().unwrap();
    credential.sign(&mut enc, nonce()).unwrap();
    send(&c, &enc, None)
}

#[test]
fn hostile_capabilities_are_refused_and_nothing_is_written() {
    let s = start("cmdrsp");
    let m = SecurityMethod::CmdRsp;
    assert_eq!(s.x_contents(), ORIGINAL);
    // The legitimate credential works (so each refusal below is the change's doing).
    let legit = s.keys.credential(s.x_capability(m)).unwrap();
    s.session().execute_as(&write(s.x, 0, b"orig"), &legit).unwrap();

    // No capability: a NOSEC command.
    let c = s.session();
    let enc = write(s.x, 0, b"EVIL").encode().unwrap();
    assert_refused(&send(&c, &enc, None), 0x2400, Some(82), "no capability");

    // A forged capability: right fields, a key the client made up.
    let forged = Credential::new(s.x_capability(m), &Key([0x42; 32]));
    assert_refused(&evil_write(&s, &forged), 0x2400, Some(184), "forged capability");

    // Missing permission bits: the genuine READ-only credential. (Widening its permissions
    // in place breaks its key like the forgery above; crates/security/src/tests.rs shows it.)
    let read_only = s.keys.object_capability(m, s.pid, s.x.object_id.0, Permissions::READ, now_ms() + HOUR_MS, TAG).unwrap();
    let key_of_read_only = s.keys.credential(read_only).unwrap();
    assert_refused(&evil_write(&s, &key_of_read_only), 0x2400, Some(129), "missing WRITE");

    // A capability for another object.
    let for_y = s.keys.object_capability(m, s.pid, s.y.object_id.0, Permissions::ALL, now_ms() + HOUR_MS, 0).unwrap();
    assert_refused(&evil_write(&s, &s.keys.credential(for_y).unwrap()), 0x2400, Some(160), "another object");

    // Bytes outside the allowed range.
    let mut ranged = s.x_capability(m);
    ranged.range_start = 4096;
    ranged.range_len = 4096;
    assert_refused(&evil_write(&s, &s.keys.credential(ranged).unwrap()), 0x2400, Some(168), "outside the range");

    // Expired.
    let mut expired = s.x_capability(m);
    expired.expires_ms = now_ms() - 1000;
    assert_refused(&evil_write(&s, &s.keys.credential(expired).unwrap()), 0x2400, Some(84), "expired");

    // A key version the OSD does not hold.
    let mut unknown_version = s.x_capability(m);
    unknown_version.key_version = 9;
    let fake = tessera_security::icv::capability_key(&Key([1; 32]), &unknown_version.encode(), &s.keys.system_id());
    assert_refused(&evil_write(&s, &Credential::new(unknown_version, &fake)), 0x2400, Some(81), "unknown key version");

    // A tampered CDB: signed for offset 0, sent for offset 8.
    let c = s.session();
    let mut enc = write(s.x, 0, b"EVIL").encode().unwrap();
    legit.sign(&mut enc, nonce()).unwrap();
    enc.cdb[tessera_osd_proto::cdb::START + 7] = 8;
    assert_refused(&send(&c, &enc, None), 0x2400, Some(184), "tampered CDB");

    assert_eq!(&s.x_contents()[..4], b"orig", "no refused command wrote anything");
    assert_eq!(&s.x_contents()[4..], &ORIGINAL[4..]);
}

#[test]
fn a_replayed_nonce_is_refused() {
    let s = start("cmdrsp");
    let legit = s.keys.credential(s.x_capability(SecurityMethod::CmdRsp)).unwrap();
    let c = s.session();
    let mut first = write(s.x, 0, b"AAAA").encode().unwrap();
    legit.sign(&mut first, nonce()).unwrap();
    assert_eq!(send(&c, &first, None).status, ScsiStatus::Good);
    c.execute_as(&write(s.x, 0, b"BBBB"), &legit).unwrap();
    // The captured first command, sent again byte for byte (on another session too).
    assert_refused(&send(&c, &first, None), 0x2406, Some(216), "replay");
    assert_refused(&send(&s.session(), &first, None), 0x2406, Some(216), "replay on another session");
    assert_eq!(&s.x_contents()[..4], b"BBBB");
    // A nonce from long ago.
    let mut stale = write(s.x, 0, b"CCCC").encode().unwrap();
    legit.sign(&mut stale, Nonce::new(now_ms() - 10 * 60_000, 1)).unwrap();
    assert_refused(&send(&c, &stale, None), 0x2407, Some(216), "old nonce");
    assert_eq!(&s.x_contents()[..4], b"BBBB");
}

/// Goal: revocation by policy tag and by key rotation, the way `rm`, `chmod` and the rotation
/// schedule use them.
#[test]
fn revoked_tag_and_stale_key_are_refused() {
    let mut s = start("cmdrsp");
    let m = SecurityMethod::CmdRsp;
    let legit = s.keys.credential(s.x_capability(m)).unwrap();
    s.session().execute_as(&write(s.x, 0, b"ok"), &legit).unwrap();

    set_tag(&s.session(), &s.partition_credential(), s.x, TAG + 1);
    assert_refused(&evil_write(&s, &legit), 0x2400, Some(140), "revoked policy tag");

    // Rotation: version 1 beside 0, then version 0 replaced; the old credential dies.
    let mut retagged = s.x_capability(m);
    retagged.policy_tag = TAG + 1;
    let old_key = s.keys.credential(retagged.clone()).unwrap();
    s.session().execute_as(&write(s.x, 0, b"v0"), &old_key).unwrap();
    let manager = s.session();
    let pid = s.pid;
    manager.establish_key(&mut s.keys, KeySlot::Working(pid, 1), m).unwrap();
    manager.establish_key(&mut s.keys, KeySlot::Working(pid, 0), m).unwrap();
    assert_refused(&evil_write(&s, &old_key), 0x2400, Some(184), "stale key version");
    assert_eq!(&s.x_contents()[..2], b"v0");
}

#[test]
fn tampered_data_under_alldata_is_refused() {
    let s = start("alldata");
    let legit = s.keys.credential(s.x_capability(SecurityMethod::AllData)).unwrap();
    let c = s.session();
    let mut enc = write(s.x, 0, b"EVIL").encode().unwrap();
    legit.sign(&mut enc, nonce()).unwrap();
    let mut data = enc.data_out_vec();
    data[1] ^= 0x20; // "EvIL"
    assert_refused(&send(&c, &enc, Some(&data)), 0x260F, None, "tampered Data-Out");
    // A CMDRSP command is below this OSD's minimum.
    let weaker = s.keys.credential(s.x_capability(SecurityMethod::CmdRsp)).unwrap();
    assert_refused(&evil_write(&s, &weaker), 0x2400, Some(82), "method below the minimum");
    assert_eq!(s.x_contents(), ORIGINAL);
}

/// Goal: WRITEs large enough to be received straight into the object's file are checked
/// exactly like small ones: authorized before any byte lands, refusals with the same sense,
/// replays refused, and under ALLDATA (whose check covers the data) still verified over the
/// bytes. Each refusal's data is read and dropped, and the session goes on.
#[test]
fn large_writes_received_into_place_are_checked_like_small_ones() {
    let big = |seed: u8| -> Vec<u8> { (0..(1u32 << 20) + 5).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect() };
    let s = start("cmdrsp");
    let m = SecurityMethod::CmdRsp;
    let legit = s.keys.credential(s.x_capability(m)).unwrap();
    let c = s.session();
    let first = big(1);
    let mut enc = write(s.x, 0, &first).encode().unwrap();
    legit.sign(&mut enc, nonce()).unwrap();
    assert_eq!(send(&c, &enc, None).status, ScsiStatus::Good);
    assert_refused(&send(&c, &enc, None), 0x2406, Some(216), "large replay");
    let read_only = s.keys.object_capability(m, s.pid, s.x.object_id.0, Permissions::READ, now_ms() + HOUR_MS, TAG).unwrap();
    let second = big(2);
    let mut enc = write(s.x, 0, &second).encode().unwrap();
    s.keys.credential(read_only).unwrap().sign(&mut enc, nonce()).unwrap();
    assert_refused(&send(&c, &enc, None), 0x2400, Some(129), "large write without WRITE permission");
    let other = big(3);
    let unsigned = write(s.x, 0, &other).encode().unwrap();
    assert_refused(&send(&c, &unsigned, None), 0x2400, Some(82), "large write without a capability");
    // The response integrity value of a placed WRITE verifies (execute_as checks it).
    let third = big(4);
    c.execute_as(&write(s.x, 0, &third), &legit).unwrap();
    let read = OsdRequestBuilder::new(Command::Read { addr: s.x, offset: 0, len: third.len() as u64, layout: DataLayout::Contiguous });
    assert!(c.execute_as(&read, &legit).unwrap().data == third, "refused WRITEs wrote nothing");

    let s = start("alldata");
    let legit = s.keys.credential(s.x_capability(SecurityMethod::AllData)).unwrap();
    let c = s.session();
    let data = big(5);
    let mut enc = write(s.x, 0, &data).encode().unwrap();
    legit.sign(&mut enc, nonce()).unwrap();
    let mut tampered = enc.data_out_vec();
    tampered[700_000] ^= 1;
    assert_refused(&send(&c, &enc, Some(&tampered)), 0x260F, None, "large tampered Data-Out");
    assert_eq!(s.x_contents(), ORIGINAL);
    c.execute_as(&write(s.x, 0, &data), &legit).unwrap();
    let read = OsdRequestBuilder::new(Command::Read { addr: s.x, offset: 0, len: data.len() as u64, layout: DataLayout::Contiguous });
    assert!(c.execute_as(&read, &legit).unwrap().data == data);
}

#[test]
fn the_osd_keeps_its_keys_across_a_restart() {
    let s = start("cmdrsp");
    let legit = s.keys.credential(s.x_capability(SecurityMethod::CmdRsp)).unwrap();
    let dir = s._dir.path().to_path_buf();
    let Secured { _daemon, keys, x, _dir, .. } = s;
    _daemon.stop().unwrap();
    // No master key file this time: the store has one.
    let data = dir.join("osd");
    let args = ["osd", "--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0", "--security", "cmdrsp"];
    let daemon = Daemon::spawn_exe(tessera_exe(), &args).unwrap();
    let c = connect(daemon.field("addr").unwrap(), daemon.field("target").unwrap()).unwrap();
    c.execute_as(&write(x, 0, b"after"), &legit).unwrap();
    let read = OsdRequestBuilder::new(Command::Read { addr: x, offset: 0, len: 5, layout: DataLayout::Contiguous });
    assert_eq!(c.execute_as(&read, &legit).unwrap().data, b"after");
    drop(keys);
}
