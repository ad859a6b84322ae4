//! The metadata server as security manager, end to end: a cluster of real `tessera mds` and
//! `tessera osd` processes with capability security on (the default of `tessera up`), a client
//! library that gets its capabilities with each layout, and a hostile client (Tessera's own
//! initiator driven by hand) holding a captured credential or none.
//!
//! Goals: files work unchanged with security on; an OSD refuses what the metadata server did not
//! authorise; chmod and rm revoke outstanding capabilities; working keys rotate on schedule
//! while clients keep working, refreshing their capabilities without being asked.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{tessera_exe, until_objects_removed};
use tessera_cli::cluster::{ClusterSpec, LocalCluster, SecuritySpec, KEYS_DIR};
use tessera_cli::session::connect;
use tessera_client::{Client, File, FsError};
use tessera_initiator::osd_client::{OsdClient, OsdError};
use tessera_mds_proto::{Reply, Request, SetAttrs};
use tessera_osd_proto::cdb::CAPABILITY;
use tessera_osd_proto::{Command, DataLayout, OsdRequestBuilder};
use tessera_scsi::SenseKey;
use tessera_security::capability::{EXPIRATION, POLICY_TAG};
use tessera_security::{Capability, Credential, Key};
use tessera_types::ObjectAddr;

fn start(dir: &Path, security: SecuritySpec) -> LocalCluster {
    let spec = ClusterSpec { stripe_unit: 64 << 10, stripe_count: 2, security, ..ClusterSpec::new(2) };
    LocalCluster::start_spec(tessera_exe(), dir, &spec).expect("starting the cluster")
}

/// What a client that captured a layout reply holds: slot 0's object and its credential.
struct Captured {
    osd: usize,
    addr: ObjectAddr,
    credential: Credential,
}

/// Asks the metadata server for `file`'s layout by hand and keeps slot 0's credential.
fn capture(cluster: &LocalCluster, file: &File) -> Captured {
    let mut mds = tessera_client::prover::open_mds(cluster.config(), 0, None).unwrap();
    let (layout, grant) = match mds.call(&Request::GetLayout { ino: file.ino() }).unwrap().unwrap() {
        Reply::Layout { layout, grant } => (layout, grant),
        other => panic!("{other:?}"),
    };
    assert_eq!(grant.len(), layout.objects.len(), "one credential per object");
    let o = layout.objects[0];
    let credential = Credential::new(Capability::decode(&grant[0].capability).unwrap(), &Key(grant[0].key));
    let partition = cluster.config().osds[o.osd as usize].partition_id;
    Captured { osd: o.osd as usize, addr: ObjectAddr::new(partition, o.object_id), credential }
}

fn hostile_session(cluster: &LocalCluster, osd: usize) -> OsdClient<tessera_initiator::iscsi::Session> {
    let e = &cluster.config().osds[osd];
    connect(&e.addr, &e.target).unwrap()
}

fn read_cmd(addr: ObjectAddr, len: u64) -> OsdRequestBuilder<'static> {
    OsdRequestBuilder::new(Command::Read { addr, offset: 0, len, layout: DataLayout::Contiguous })
}

/// The command was refused with INVALID FIELD IN CDB pointing at capability byte `field`.
fn assert_refused_at(result: Result<tessera_initiator::osd_client::OsdReply, OsdError>, field: usize, case: &str) {
    let e = result.err().unwrap_or_else(|| panic!("{case}: accepted"));
    let sense = e.sense().unwrap_or_else(|| panic!("{case}: {e}"));
    assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::IllegalRequest, 0x2400), "{case}: {sense}");
    assert_eq!(sense.field_pointer.map(|f| f.byte as usize), Some(CAPABILITY + field), "{case}: {sense}");
}

#[test]
fn a_secure_cluster_serves_files_and_refuses_commands_it_did_not_authorise() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let cluster = start(dir.path(), SecuritySpec::default());
    for i in 0..2 {
        let mode = std::fs::metadata(dir.path().join(KEYS_DIR).join(format!("osd{i}.key"))).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "master key files are private");
    }
    let client = Client::connect(cluster.config()).unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let f = client.create("/f", 0o644, None).unwrap();
    f.pwrite(0, &data).unwrap();
    f.fsync().unwrap();
    assert_eq!(client.open("/f").unwrap().read_to_end().unwrap(), data);

    let c = capture(&cluster, &f);
    let hostile = hostile_session(&cluster, c.osd);
    // The captured credential itself works: each refusal below is the change's doing.
    assert_eq!(hostile.execute_as(&read_cmd(c.addr, 16), &c.credential).unwrap().data.len(), 16);
    // No capability at all (NOSEC) is refused, and writes nothing.
    let evil = b"EVIL";
    let bare_write = OsdRequestBuilder::new(Command::Write { addr: c.addr, offset: 0, len: 4, layout: DataLayout::Contiguous }).data(evil);
    let e = hostile.execute(&bare_write).unwrap_err();
    assert_eq!(e.sense().map(|s| (s.key, s.asc_ascq())), Some((SenseKey::IllegalRequest, 0x2400)), "{e}");
    assert!(hostile.execute(&read_cmd(c.addr, 16)).is_err(), "a bare READ is refused");
    // The credential for one object does not open another (the other slot's object).
    let other = ObjectAddr::new(c.addr.partition_id.0, c.addr.object_id.0 + 1);
    assert!(hostile.execute_as(&read_cmd(other, 16), &c.credential).is_err());
    let mut back = vec![0u8; data.len()];
    f.pread(0, &mut back).unwrap();
    assert_eq!(back, data, "nothing was written by the refused commands");
}

#[test]
fn chmod_revokes_capabilities_and_open_files_follow_the_new_mode() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let cluster = start(dir.path(), SecuritySpec::default());
    let client = Client::connect(cluster.config()).unwrap();
    let f = client.create("/g", 0o644, None).unwrap();
    f.pwrite(0, b"before chmod").unwrap();
    let c = capture(&cluster, &f);
    let hostile = hostile_session(&cluster, c.osd);
    hostile.execute_as(&read_cmd(c.addr, 4), &c.credential).unwrap();

    client.chmod("/g", 0o444).unwrap();
    // The captured capability names the old policy tag: revoked.
    assert_refused_at(hostile.execute_as(&read_cmd(c.addr, 4), &c.credential), POLICY_TAG, "capability issued before chmod");
    // The open file refreshes: reading is still allowed, writing is not.
    let mut back = [0u8; 12];
    f.pread(0, &mut back).unwrap();
    assert_eq!(&back, b"before chmod");
    let e = f.pwrite(0, b"after").unwrap_err();
    assert_eq!(e.fs_error(), Some(FsError::Access), "{e}");
    assert_eq!(e.errno(), 13);
    assert_eq!(f.set_len(0).unwrap_err().fs_error(), Some(FsError::Access), "no truncate without a write bit");
    f.fsync().expect("what was written before the chmod can still be made durable");

    client.chmod("/g", 0o600).unwrap();
    f.pwrite(0, b"after").unwrap();
    f.pread(0, &mut back).unwrap();
    assert_eq!(&back, b"aftere chmod", "the write bit is back: the open file writes again");
}

/// Goal: an open file reads on while its mode is changed again and again, as long as every
/// mode lets its user read. Each chmod revokes the file's capabilities, and the grants handed
/// out meanwhile carry a tag the OSDs do not hold yet, so a refresh during a chmod, or a chmod
/// between a refresh and the repeated read, leaves the read refused again; it must ask again,
/// not fail. Method: one client toggles the mode between 0600 and 0644 in a loop (1 ms apart)
/// while another reads the whole striped file (512 KiB over two OSDs) through one handle, over
/// and over, for 3 s; every read must return the bytes.
#[test]
fn reads_go_on_through_a_loop_of_chmods() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let cluster = start(dir.path(), SecuritySpec::default());
    let client = Client::connect(cluster.config()).unwrap();
    let data: Vec<u8> = (0..512 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    let f = client.create("/toggled", 0o644, None).unwrap();
    f.pwrite(0, &data).unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let toggler = {
        let (stop, config) = (stop.clone(), cluster.config().clone());
        std::thread::spawn(move || {
            let c = Client::connect(&config).unwrap();
            let mut chmods = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                c.chmod("/toggled", if chmods.is_multiple_of(2) { 0o600 } else { 0o644 }).unwrap();
                chmods += 1;
                // A loop of chmod(1) commands leaves gaps like this one between them.
                std::thread::sleep(Duration::from_millis(1));
            }
            chmods
        })
    };
    let started = Instant::now();
    let (mut reads, mut failures) = (0u64, Vec::new());
    let mut back = vec![0u8; data.len()];
    while started.elapsed() < Duration::from_secs(3) {
        match f.pread(0, &mut back) {
            Ok(n) => assert!(n == data.len() && back == data, "read {n} bytes, not the file's"),
            Err(e) => failures.push(e.to_string()),
        }
        reads += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let chmods = toggler.join().unwrap();
    assert!(failures.is_empty(), "{} of {reads} reads failed during {chmods} chmods: {:?}", failures.len(), &failures[..failures.len().min(3)]);
    assert!(reads > 20 && chmods > 100, "the race ran: {reads} reads, {chmods} chmods");
}

/// Goal: a chmod while one of the file's OSDs is down is not lost: it answers EIO (the
/// revocation is not complete), and once the OSD is back the metadata server finishes it by
/// itself, without the chmod being repeated. Method: stop the OSD holding slot 0's object,
/// chmod, start the OSD again on the same store and address, then poll with a capability
/// captured before the chmod until that OSD refuses it for its policy tag; the file still
/// reads with fresh capabilities.
#[test]
fn a_revocation_owed_to_a_stopped_osd_completes_when_it_returns() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let mut cluster = start(dir.path(), SecuritySpec::default());
    let client = Client::connect(cluster.config()).unwrap();
    let f = client.create("/down", 0o644, None).unwrap();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    f.pwrite(0, &data).unwrap();
    f.fsync().unwrap();
    let c = capture(&cluster, &f);
    hostile_session(&cluster, c.osd).execute_as(&read_cmd(c.addr, 4), &c.credential).unwrap();

    cluster.stop_osd(c.osd as u32).unwrap();
    // By inode, as a mounted client (which knows the inode) sends it: a lookup by path would
    // need the down OSD for the file's size.
    let mut mds = tessera_client::prover::open_mds(cluster.config(), 0, None).unwrap();
    let chmod = Request::SetAttr { ino: f.ino(), changes: SetAttrs { mode: Some(0o444), ..SetAttrs::default() } };
    assert_eq!(mds.call(&chmod).unwrap(), Err(FsError::Io), "an incomplete revocation is reported");
    cluster.start_osd(c.osd as u32).unwrap();
    assert_eq!(client.stat("/down").unwrap().mode & 0o777, 0o444, "the mode change itself committed");

    // The background retry runs every 2 s; allow several rounds on a loaded machine.
    let hostile = hostile_session(&cluster, c.osd);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match hostile.execute_as(&read_cmd(c.addr, 4), &c.credential) {
            Err(_) => break,
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Ok(_) => panic!("the capability issued before the chmod still works 30 s after the OSD returned"),
        }
    }
    assert_refused_at(hostile.execute_as(&read_cmd(c.addr, 4), &c.credential), POLICY_TAG, "capability issued before the chmod");
    // The same client (its idle sessions to the restarted OSD are replaced before use) reads
    // with fresh capabilities, which carry the new tag.
    assert_eq!(client.open("/down").unwrap().read_to_end().unwrap(), data, "fresh capabilities carry the new tag");
}

#[test]
fn rm_revokes_by_removing_the_objects() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let cluster = start(dir.path(), SecuritySpec::default());
    let client = Client::connect(cluster.config()).unwrap();
    let f = client.create("/h", 0o644, None).unwrap();
    f.pwrite(0, b"doomed").unwrap();
    let c = capture(&cluster, &f);
    let hostile = hostile_session(&cluster, c.osd);
    hostile.execute_as(&read_cmd(c.addr, 6), &c.credential).unwrap();
    client.unlink("/h").unwrap();
    // The objects go a moment after the unlink is answered; from then on nothing reaches them.
    until_objects_removed(&client);
    let e = hostile.execute_as(&read_cmd(c.addr, 6), &c.credential).unwrap_err();
    assert!(e.sense().is_some(), "refused by the OSD: {e}");
    let write = OsdRequestBuilder::new(Command::Write { addr: c.addr, offset: 0, len: 4, layout: DataLayout::Contiguous }).data(b"back");
    assert!(hostile.execute_as(&write, &c.credential).is_err(), "a removed object cannot be written back into being");
}

#[test]
fn working_keys_rotate_and_clients_refresh_without_noticing() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let period = Duration::from_millis(400);
    let lifetime = Duration::from_millis(800);
    let security = SecuritySpec { capability_lifetime: Some(lifetime), key_period: Some(period), ..SecuritySpec::default() };
    let cluster = start(dir.path(), security);
    let client = Client::connect(cluster.config()).unwrap();
    let f = client.create("/r", 0o644, None).unwrap();
    let first = capture(&cluster, &f);
    let mut versions = std::collections::BTreeSet::new();
    let start = Instant::now();
    let mut round = 0u32;
    // Several capability lifetimes and key periods of steady I/O through one open file.
    while start.elapsed() < lifetime * 4 {
        let bytes = round.to_be_bytes();
        f.pwrite(u64::from(round % 64) * 4, &bytes).unwrap_or_else(|e| panic!("write {round} at {:?}: {e}", start.elapsed()));
        let mut back = [0u8; 4];
        f.pread(u64::from(round % 64) * 4, &mut back).unwrap();
        assert_eq!(back, bytes);
        versions.insert(capture(&cluster, &f).credential.capability().key_version);
        round += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(versions.len() >= 3, "capabilities were issued under rotating key versions: {versions:?}");
    // The first capability has expired by now: refused, at its expiration time.
    let hostile = hostile_session(&cluster, first.osd);
    assert_refused_at(hostile.execute_as(&read_cmd(first.addr, 4), &first.credential), EXPIRATION, "expired capability");
}

#[test]
fn a_chap_cluster_admits_only_initiators_with_the_secret() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let cluster = start(dir.path(), SecuritySpec { chap: true, ..SecuritySpec::default() });
    let secrets = cluster.config().chap_secret_file.clone().expect("the cluster file names the CHAP secrets");
    assert_eq!(std::fs::metadata(&secrets).unwrap().permissions().mode() & 0o777, 0o600);
    // The metadata server and the client log in with the secret the cluster file names.
    let client = Client::connect(cluster.config()).unwrap();
    let f = client.create("/c", 0o644, None).unwrap();
    f.pwrite(0, b"behind chap").unwrap();
    assert_eq!(client.open("/c").unwrap().read_to_end().unwrap(), b"behind chap");
    // An initiator without it cannot even open a session.
    let osd = &cluster.config().osds[0];
    let bare = tessera_initiator::iscsi::SessionConfig::new("iqn.2026-11.org.tessera:intruder", &osd.target);
    match tessera_initiator::iscsi::Session::login(osd.addr.as_str(), bare) {
        Err(e) => assert!(e.to_string().to_lowercase().contains("auth"), "{e}"),
        Ok(_) => panic!("a login without CHAP was admitted"),
    }
}

/// Goal: as open(O_CREAT) hands the creator a read-write descriptor whatever the new file's
/// mode, a file created 0444 is filled through the handle that created it (install -m 444,
/// git's object files); a handle opened afterwards follows the mode.
#[test]
fn a_file_created_read_only_is_written_by_its_creator() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let cluster = start(dir.path(), SecuritySpec::default());
    let client = Client::connect(cluster.config()).unwrap();
    let f = client.create("/ro", 0o444, None).unwrap();
    f.pwrite(0, b"filled by its creator").unwrap();
    f.fsync().unwrap();
    let later = client.open("/ro").unwrap();
    assert_eq!(later.read_to_end().unwrap(), b"filled by its creator");
    assert_eq!(later.pwrite(0, b"x").unwrap_err().fs_error(), Some(FsError::Access), "a later open follows the mode");
}

/// Goal: an OSD, like a metadata server, refuses a master key file that group or others can
/// read (whoever can read it can sign any command), saying how to fix it; the same file made
/// private starts it. Method: real `tessera osd` processes.
#[test]
fn an_osd_refuses_a_master_key_file_others_can_read() {
    let dir = tempfile::Builder::new().prefix("tessera-fssec-").tempdir().unwrap();
    let key = dir.path().join("osd0.key");
    std::fs::write(&key, format!("{}\n", "5a".repeat(32))).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let data = dir.path().join("osd");
    let args = ["osd", "--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0", "--security", "cmdrsp", "--master-key-file", key.to_str().unwrap()];
    let log = dir.path().join("osd.log");
    assert!(tessera_cli::daemon::Daemon::spawn_with(tessera_exe(), &args, Some(&log)).is_err(), "an OSD started on a key file its group can read");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("master key file") && text.contains("chmod 600"), "{text}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let osd = tessera_cli::daemon::Daemon::spawn_with(tessera_exe(), &args, Some(&log)).expect("the OSD starts once its key is private");
    drop(osd);
}
