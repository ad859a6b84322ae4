//! Goal: `tessera repair` finds objects on the OSDs that no file accounts for (orphans) and
//! names them, leaves every file's objects alone, and with `--remove` removes the orphans.
//! Method: a real cluster (one `tessera mds`, two `tessera osd`, NOSEC so that the test can
//! make an object by hand, as a store restored from an old backup would leave one); the
//! `tessera` command against it; the OSD's own object list to check what is left.

mod common;

use common::{run, tessera_exe};
use tessera_cli::cluster::{ClusterSpec, LocalCluster, SecuritySpec};
use tessera_client::Client;
use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_initiator::osd_client::OsdClient;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tessera repair ARGS` against the cluster file `file`, which must succeed; its stdout.
fn repair_ok(file: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec!["repair"];
    all.extend_from_slice(args);
    let out = run(&all, Some(file));
    assert!(out.status.success(), "repair {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn repair_reports_orphans_and_removes_them_on_request() {
    let dir = tempfile::Builder::new().prefix("tessera-repair-").tempdir().unwrap();
    let spec = ClusterSpec { security: SecuritySpec::nosec(), ..ClusterSpec::new(2) };
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    for name in ["/a", "/b"] {
        client.create(name, 0o644, None).unwrap().pwrite(0, &[7u8; 100_000]).unwrap();
    }
    let file = cluster.cluster_file();
    let repair = |args: &[&str]| repair_ok(&file, args);
    assert!(repair(&[]).contains("every object on the OSDs is accounted for"), "a clean cluster has no orphans");

    // An object in metadata server 0's id range that nothing accounts for, on OSD 1.
    let osd = &cluster.config().osds[1];
    let session = Session::login(osd.addr.as_str(), SessionConfig::new("iqn.2026-11.org.tessera:repair-test", &osd.target)).unwrap();
    let by_hand = OsdClient::new(session, 0);
    let orphan = tessera_mds::store::files::object_id(0, 1 << 40);
    by_hand.create(osd.partition_id, Some(orphan), 1).unwrap();

    let report = repair(&[]);
    assert!(report.contains("mds0: 1 orphan object found") && report.contains(&format!("osd1    object {orphan:#x}")), "{report}");
    assert!(report.contains("`tessera repair --remove`"), "{report}");
    assert!(by_hand.list_all(osd.partition_id).unwrap().contains(&orphan), "reporting removes nothing");

    let removed = repair(&["--remove"]);
    assert!(removed.contains("1 orphan object removed"), "{removed}");
    assert!(!by_hand.list_all(osd.partition_id).unwrap().contains(&orphan), "the orphan is gone from its OSD");
    assert!(repair(&[]).contains("every object on the OSDs is accounted for"));
    for name in ["/a", "/b"] {
        assert_eq!(client.open(name).unwrap().read_to_end().unwrap(), vec![7u8; 100_000], "{name} untouched");
    }
    cluster.stop().unwrap();
}

/// Goal: a file whose data object its OSD no longer holds (an OSD store lost or replaced) is
/// reported by path with the object, and `--remove` leaves the file alone. Method: REMOVE one
/// object of a striped file behind the metadata server's back (NOSEC lets the test).
#[test]
fn repair_names_files_whose_objects_their_osds_lost() {
    let dir = tempfile::Builder::new().prefix("tessera-repair-").tempdir().unwrap();
    let spec = ClusterSpec { security: SecuritySpec::nosec(), ..ClusterSpec::new(2) };
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    client.mkdir("/d", 0o755).unwrap();
    for name in ["/d/whole", "/d/hurt"] {
        client.create(name, 0o644, Some(tessera_client::StripeHint { stripe_unit: 4096, stripe_count: 2, start_osd: Some(0) })).unwrap().pwrite(0, &[7u8; 20_000]).unwrap();
    }
    let file = cluster.cluster_file();
    let repair = |args: &[&str]| repair_ok(&file, args);
    assert!(repair(&[]).contains("every file's data objects are on their OSDs"));

    let lost = client.open("/d/hurt").unwrap().layout().objects[1];
    assert_eq!(lost.osd, 1);
    let osd = &cluster.config().osds[1];
    let session = Session::login(osd.addr.as_str(), SessionConfig::new("iqn.2026-11.org.tessera:repair-test", &osd.target)).unwrap();
    let by_hand = OsdClient::new(session, 0);
    by_hand.remove(tessera_types::ObjectAddr::new(osd.partition_id, lost.object_id)).unwrap();

    for args in [&[][..], &["--remove"][..]] {
        let report = repair(args);
        assert!(report.contains("mds0: 1 file whose data objects its OSDs do not hold"), "{report}");
        assert!(report.contains(&format!("  /d/hurt: osd1 object {:#x}", lost.object_id)), "{report}");
        assert!(report.contains("repair: 1 file lost data with its objects") && !report.contains("/d/whole"), "{report}");
    }
    // Its stat says what happened, not that an OSD did not answer.
    let err = client.stat("/d/hurt").unwrap_err().to_string();
    assert!(err.contains(&format!("OSD 1 at {} does not hold the file's object {:#x}: that part of the file's data is lost", osd.addr, lost.object_id)), "{err}");
    assert!(!err.contains("did not answer"), "{err}");
    assert!(client.readdir("/d").unwrap().iter().any(|e| e.name == "hurt"), "repair leaves the damaged file");
    assert_eq!(client.open("/d/whole").unwrap().read_to_end().unwrap(), vec![7u8; 20_000]);
    cluster.stop().unwrap();
}

/// Goal: the temporary a `put` killed outright leaves (`.<name>.put-<pid>`) is found by
/// `repair` once it has not been written for an hour, and removed with `--remove`; a younger
/// one (a copy may still be running) and other hidden files are left alone. Method: a real
/// cluster; the leftovers made with the client library as a killed `put` leaves them, one
/// dated two hours back.
#[test]
fn repair_finds_the_temporaries_of_copies_that_did_not_finish() {
    let dir = tempfile::Builder::new().prefix("tessera-repair-tmp-").tempdir().unwrap();
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &ClusterSpec::new(2)).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    client.mkdir("/d", 0o755).unwrap();
    let two_hours_ago = tessera_client::Timespec { secs: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64 - 7200, nanos: 0 };
    for (path, old) in [("/d/.big.put-4242", true), ("/.x.tessera-mv-7", true), ("/d/.young.cp-99", false), ("/d/.profile", true), ("/d/.notes.put-draft", true)] {
        client.create(path, 0o644, None).unwrap().pwrite(0, &[1u8; 5000]).unwrap();
        if old {
            client.set_times(path, Some(two_hours_ago), Some(two_hours_ago)).unwrap();
        }
    }
    let file = cluster.cluster_file();
    let out = run(&["repair"], Some(&file));
    let report = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(report.contains("  /.x.tessera-mv-7  (5000 bytes)\n  /d/.big.put-4242  (5000 bytes)\n"), "{report}");
    assert!(report.contains("repair: 2 temporary files left by copies that did not finish"), "{report}");
    assert!(!report.contains(".young") && !report.contains(".profile") && !report.contains(".notes"), "{report}");
    assert!(report.contains("repair: left alone, as a put, cp or mv may still be writing them: 1 temporary file changed within the last 1h; once none runs, `tessera repair --older-than 0` includes them"), "{report}");
    let out = run(&["repair", "--remove"], Some(&file));
    assert!(text(&out.stdout).contains("2 temporary files left by copies that did not finish removed"), "{}", text(&out.stdout));
    let mut left: Vec<String> = client.readdir("/d").unwrap().into_iter().map(|e| e.name).collect();
    left.extend(client.readdir("/").unwrap().into_iter().map(|e| e.name));
    left.sort();
    assert_eq!(left, [".notes.put-draft", ".profile", ".young.cp-99", "d"]);
    let report = text(&run(&["repair"], Some(&file)).stdout);
    assert!(report.contains("repair: no temporary left by a copy that did not finish 1h ago or more\n"), "the young one is still there: {report}");
    client.unlink("/d/.young.cp-99").unwrap();
    let report = text(&run(&["repair"], Some(&file)).stdout);
    assert!(report.contains("repair: no temporary left by an unfinished copy\n") && !report.contains("left alone"), "{report}");
    cluster.stop().unwrap();
}

/// Goal: a source that a killed `mv` between metadata servers left renamed aside
/// (`.<name>.tessera-mv-src-<pid>`, a file or a directory) is reported with the command that
/// puts it back, once renamed longer ago than `--older-than`, and `--remove` keeps it: it holds
/// the only copy of its data. Method: a real cluster; the claims made by hand as `mv` makes them.
#[test]
fn repair_reports_the_sources_a_killed_mv_left_aside_and_keeps_them() {
    let dir = tempfile::Builder::new().prefix("tessera-repair-mv-").tempdir().unwrap();
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &ClusterSpec::new(2)).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    client.mkdir("/d", 0o755).unwrap();
    client.create("/d/data.bin", 0o644, None).unwrap().pwrite(0, b"the only copy").unwrap();
    client.mkdir("/tree", 0o755).unwrap();
    client.rename("/d/data.bin", "/d/.data.bin.tessera-mv-src-4242").unwrap();
    client.rename("/tree", "/.tree.tessera-mv-src-77").unwrap();
    let file = cluster.cluster_file();

    let out = run(&["repair"], Some(&file));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("tessera-mv-src"), "renamed moments ago, as a running mv does: {}", text(&out.stdout));
    assert!(text(&out.stdout).contains("left alone, as a put, cp or mv may still be writing them: 2 mv sources renamed aside changed within the last 1h"), "but counted: {}", text(&out.stdout));

    std::thread::sleep(std::time::Duration::from_millis(2100));
    let out = run(&["repair", "--remove", "--older-than", "1s"], Some(&file));
    let report = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(report.contains("  /.tree.tessera-mv-src-77  (put it back: tessera mv '/.tree.tessera-mv-src-77' '/tree')\n"), "{report}");
    assert!(report.contains("  /d/.data.bin.tessera-mv-src-4242  (put it back: tessera mv '/d/.data.bin.tessera-mv-src-4242' '/d/data.bin')\n"), "{report}");
    assert!(report.contains("repair: 2 sources of a mv between metadata servers that did not finish"), "{report}");
    let mut data = vec![0u8; 13];
    client.open("/d/.data.bin.tessera-mv-src-4242").unwrap().pread(0, &mut data).unwrap();
    assert_eq!(&data, b"the only copy", "--remove leaves a claimed source");
    assert!(client.lookup("/.tree.tessera-mv-src-77").is_ok());

    let out = run(&["repair", "--older-than", "1 fortnight"], Some(&file));
    assert!(!out.status.success() && text(&out.stderr).contains("unknown duration unit"), "{}", text(&out.stderr));
    cluster.stop().unwrap();
}

/// Goal: what a cross-server mkdir or rmdir cut short leaves (each is two steps on two metadata
/// servers) is found by `repair` and removed with `--remove`: a directory inode that no entry
/// names (once older than `--older-than`, so a mkdir still between its steps is left alone),
/// and an entry naming a directory that is gone, which until then hides from listings and
/// makes a mkdir of its name fail with EEXIST. Method: a real cluster with two metadata
/// servers; the first step of each sent by hand to server 1, as a server would send it before
/// stopping.
#[test]
fn repair_finds_the_halves_of_cross_server_mkdirs_and_rmdirs() {
    use tessera_mds_proto::request::NewInode;
    use tessera_mds_proto::{InodeId, Reply, Request};

    let dir = tempfile::Builder::new().prefix("tessera-repair-split-").tempdir().unwrap();
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &ClusterSpec { mds: 2, ..ClusterSpec::new(1) }).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let on1 = (0..32)
        .map(|i| format!("/d{i}"))
        .find(|p| {
            client.mkdir(p, 0o755).unwrap();
            client.lstat(p).unwrap().ino.server() == 1
        })
        .expect("a directory homed on server 1");
    client.mkdir(&format!("{on1}/kept"), 0o755).unwrap();
    let gone = client.lstat(&on1).unwrap().ino;
    client.rmdir(&format!("{on1}/kept")).unwrap();

    let mut server1 = tessera_client::prover::open_mds(cluster.config(), 1, Some(std::time::Duration::from_secs(10))).unwrap();
    // An rmdir's first step: the inode goes on its home server; the entry on server 0 stays.
    assert_eq!(server1.call(&Request::PeerRemoveDir { ino: gone }).unwrap(), Ok(Reply::Done));
    // A mkdir's first step: the inode is made on server 1; no entry ever names it.
    let made = match server1.call(&Request::PeerCreateDir { parent: InodeId::ROOT, new: NewInode { mode: 0o755, uid: 0, gid: 0 }, stripe: None }).unwrap() {
        Ok(Reply::Attr(a)) => a.ino,
        other => panic!("{other:?}"),
    };
    let name = &on1[1..];
    assert!(!client.readdir("/").unwrap().iter().any(|e| e.name == name), "the entry hides from listings");
    assert_eq!(client.mkdir(&on1, 0o755).unwrap_err().fs_error(), Some(tessera_client::FsError::Exists), "and holds its name");

    let file = cluster.cluster_file();
    let out = run(&["repair"], Some(&file));
    let report = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(report.contains(&format!("mds0: 1 entry naming a directory that is gone (an rmdir cut short) found\n  '{name}' in directory 0x1 -> inode {:#x} (metadata server 1)\n", gone.0)), "{report}");
    assert!(!report.contains(&format!("{:#x}\n", made.0)), "made moments ago, as by a mkdir still running: {report}");

    std::thread::sleep(std::time::Duration::from_millis(2100));
    let out = run(&["repair", "--remove", "--older-than", "1s"], Some(&file));
    let report = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(report.contains(&format!("mds1: 1 directory inode that no entry names (a mkdir cut short) removed\n  inode {:#x}\n", made.0)), "{report}");
    assert!(report.contains("repair: 1 unnamed directory inode, 1 entry naming a gone directory removed"), "{report}");
    assert_eq!(server1.call(&Request::GetAttr { ino: made }).unwrap(), Err(tessera_client::FsError::Stale), "the unnamed inode is gone");

    client.mkdir(&on1, 0o755).unwrap();
    let out = run(&["repair"], Some(&file));
    assert!(text(&out.stdout).contains("repair: every directory split across metadata servers is whole"), "{}", text(&out.stdout));
    cluster.stop().unwrap();
}
