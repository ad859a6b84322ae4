//! Goal: a full disk under an OSD is an ENOSPC that says so, not a wedged cluster. Data written
//! before stays readable (an accessed time that cannot be stored is skipped), a removal frees
//! space even though the attribute store cannot grow, a write that does not fit leaves no data
//! behind, and once space is back writes work again. With another OSD that has room, new files
//! go there instead. Method: real clusters (`tessera mds`, `tessera osd`) whose stores, or one
//! OSD's store, live on a small tmpfs mounted for the test; the file system is filled with a
//! file of zeros beside them.
//! Needs root to mount; where it cannot mount, it says so and checks nothing, except under CI,
//! where that fails the test.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{alive, tessera_exe, until_objects_removed};
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::{Client, StripeHint};

struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(at).status().ok()?.success();
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes zeros to `path` until the file system refuses more.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0u8; 64 << 10];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
}

fn objects_on_disk(data: &Path) -> usize {
    walk(&data.join("objects"))
}

fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries.flatten().map(|e| if e.path().is_dir() { walk(&e.path()) } else { 1 }).sum()
    })
}

/// A tmpfs of `size` at `at`, or `None` after saying why the test `name` checks nothing.
fn tmpfs_or_skip(at: &Path, size: &str, name: &str) -> Option<Tmpfs> {
    let mounted = Tmpfs::mount(at, size);
    if mounted.is_none() {
        // As the multi-host test: under CI (root, by the project's own scripts) this must run.
        assert!(std::env::var_os("CI").is_none(), "cannot mount a tmpfs under CI");
        // Straight to the stream, not through `eprintln!`, which the harness captures for a
        // passing test: the skip must show in the test command's output.
        let _ = writeln!(std::io::stderr(), "SKIPPED: {name}: cannot mount a tmpfs here (needs root)");
    }
    mounted
}

#[test]
fn a_full_disk_under_an_osd_is_enospc_and_keeps_data_readable() {
    let dir = tempfile::Builder::new().prefix("tessera-full-").tempdir().unwrap();
    let Some(_fs) = tmpfs_or_skip(dir.path(), "24m", "a_full_disk_under_an_osd_is_enospc_and_keeps_data_readable") else { return };
    let cluster = LocalCluster::start_spec(tessera_exe(), &dir.path().join("c"), &ClusterSpec::new(1)).unwrap();
    let osd_data = cluster.records().into_iter().find(|r| r.role == "osd").unwrap().data;
    let client = Client::connect(cluster.config()).unwrap();
    let one = Some(StripeHint { stripe_unit: 1 << 20, stripe_count: 1, start_osd: Some(0) });
    let kept: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let f = client.create("/kept", 0o644, one).unwrap();
    f.pwrite(0, &kept).unwrap();
    f.fsync().unwrap();
    let doomed = client.create("/doomed", 0o644, one).unwrap();
    doomed.pwrite(0, &[9u8; 300_000]).unwrap();
    doomed.fsync().unwrap();
    let before = objects_on_disk(&osd_data);

    let free = |client: &Client| {
        let usage = client.osd_usage().unwrap();
        assert!(usage[0].fs.is_some(), "the OSD reports its file system: {usage:?}");
        usage[0].avail_bytes()
    };
    assert!(free(&client) > 8 << 20, "most of the tmpfs is free: {}", free(&client));

    let filler = dir.path().join("filler");
    fill(&filler);
    // The OSD's formatted capacity is barely used, but its disk is full: df says so.
    assert!(free(&client) < 1 << 20, "a full disk leaves no space to write: {}", free(&client));
    let df = Command::new(tessera_exe()).args(["df", "--cluster"]).arg(dir.path().join("c").join("cluster.toml")).output().unwrap();
    let df = String::from_utf8_lossy(&df.stdout).into_owned();
    let row = df.lines().find(|l| l.starts_with("osd0")).unwrap_or_else(|| panic!("{df}"));
    assert!(row.ends_with(" 100%"), "df shows the OSD full: {df}");
    assert!(df.contains("full (under 1% free): osd0;"), "and names it: {df}");

    let err = client.create("/big", 0o644, one).and_then(|b| b.pwrite(0, &vec![1u8; 8 << 20]).map(drop)).unwrap_err();
    assert_eq!(err.errno(), 28, "a write that does not fit is ENOSPC: {err}");
    assert!(err.to_string().contains("disk is full"), "the error says why in words: {err}");
    let _ = client.unlink("/big");

    assert_eq!(client.open("/kept").unwrap().read_to_end().unwrap(), kept, "data written before stays readable");
    assert_eq!(client.stat("/kept").unwrap().size, kept.len() as u64);
    client.unlink("/doomed").expect("a removal on a full disk");
    until_objects_removed(&client);
    assert!(objects_on_disk(&osd_data) < before, "the removed file's object left the disk");

    std::fs::remove_file(&filler).unwrap();
    assert!(free(&client) > 8 << 20, "the space is back: {}", free(&client));
    let again = client.create("/again", 0o644, one).unwrap();
    again.pwrite(0, &kept).unwrap();
    again.fsync().unwrap();
    assert_eq!(client.open("/again").unwrap().read_to_end().unwrap(), kept, "writes work once space is back");
    cluster.stop().unwrap();
}

/// OSD 0's store is on a small tmpfs, OSD 1's on the test's disk. Files of one stripe each
/// alternate between them; once OSD 0's disk is full (the metadata server reads every OSD's
/// usage at least every 5 s), new files all go to OSD 1, and once it has room again they
/// alternate again.
#[test]
fn new_files_pass_over_a_full_osd_while_another_has_room() {
    let dir = tempfile::Builder::new().prefix("tessera-full2-").tempdir().unwrap();
    let osd0 = dir.path().join("c").join("osd0");
    std::fs::create_dir_all(&osd0).unwrap();
    let Some(_fs) = tmpfs_or_skip(&osd0, "16m", "new_files_pass_over_a_full_osd_while_another_has_room") else { return };
    let cluster = LocalCluster::start_spec(tessera_exe(), &dir.path().join("c"), &ClusterSpec::new(2)).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let one = Some(StripeHint { stripe_unit: 1 << 16, stripe_count: 1, start_osd: None });
    let mut made = 0;
    let mut place_files = |n: usize| -> Vec<u32> {
        (0..n)
            .map(|_| {
                made += 1;
                let f = client.create(&format!("/f{made}"), 0o644, one).unwrap();
                f.layout().objects[0].osd
            })
            .collect()
    };
    let placed = place_files(4);
    assert!(placed.contains(&0) && placed.contains(&1), "with room on both, files spread: {placed:?}");

    let filler = osd0.join("filler");
    fill(&filler);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let placed = place_files(4);
        if placed.iter().all(|&o| o == 1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "new files still placed on the full OSD 0: {placed:?}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(place_files(6).iter().all(|&o| o == 1), "the full OSD gets no new file");

    std::fs::remove_file(&filler).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !place_files(4).contains(&0) {
        assert!(std::time::Instant::now() < deadline, "OSD 0 has room again but gets no new file");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    cluster.stop().unwrap();
}

/// Goal: a full disk under the metadata server refuses namespace changes with ENOSPC, not
/// EIO or a hang; reads go on meanwhile; changes work again once there is room; and nothing
/// acknowledged is lost across a restart. Method: the cluster's directory (the metadata
/// store with it) on a small tmpfs, filled with a file of zeros; directories made until the
/// metadata server refuses (its preallocated WAL takes a thousand or so first).
#[test]
fn a_full_disk_under_the_metadata_server_is_enospc_and_reads_go_on() {
    let dir = tempfile::Builder::new().prefix("tessera-mds-full-").tempdir().unwrap();
    let Some(_fs) = tmpfs_or_skip(dir.path(), "40m", "a_full_disk_under_the_metadata_server_is_enospc_and_reads_go_on") else { return };
    let at = dir.path().join("c");
    let cluster = LocalCluster::start_spec(tessera_exe(), &at, &ClusterSpec::new(1)).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    client.mkdir("/d", 0o755).unwrap();
    let filler = dir.path().join("filler");
    fill(&filler);

    let mut made = 0;
    let err = loop {
        assert!(made < 100_000, "the metadata server never refused a change on a full disk");
        match client.mkdir(&format!("/d/{made}"), 0o755) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err.errno(), 28, "ENOSPC, not EIO: {err}");
    assert!(err.to_string().contains("no space left on device"), "{err}");
    // Reads go on: every directory acknowledged is listed.
    assert_eq!(client.readdir("/d").unwrap().len(), made);
    assert!(client.stat(&format!("/d/{}", made - 1)).is_ok());

    std::fs::remove_file(&filler).unwrap();
    client.mkdir("/d/again", 0o755).expect("changes work once there is room");
    cluster.stop().unwrap();
    let cluster = LocalCluster::start_spec(tessera_exe(), &at, &ClusterSpec::new(1)).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let names: std::collections::HashSet<String> = client.readdir("/d").unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names.len(), made + 1, "every acknowledged directory survives the restart");
    assert!((0..made).all(|i| names.contains(&i.to_string())) && names.contains("again"));
    cluster.stop().unwrap();
}

/// An ext4 file system on a loop device whose backing file is sparse and lives on `backing`
/// (a small tmpfs): once the tmpfs is full, writes to blocks of the image not yet backed fail
/// in the kernel's writeback, and `fdatasync` reports EIO or ENOSPC for them, as a failing
/// disk would. Unmounted and detached on drop.
struct FailingDisk {
    mount: PathBuf,
    device: String,
}

impl FailingDisk {
    fn make(backing: &Path, mount: &Path) -> Option<FailingDisk> {
        let image = backing.join("image");
        std::fs::File::create(&image).ok()?.set_len(256 << 20).ok()?;
        let out = Command::new("losetup").args(["-f", "--show"]).arg(&image).output().ok()?;
        let device = String::from_utf8(out.stdout).ok()?.trim().to_string();
        if !out.status.success() || device.is_empty() {
            return None;
        }
        let disk = FailingDisk { mount: mount.to_path_buf(), device };
        std::fs::create_dir_all(mount).ok()?;
        let formatted = Command::new("mkfs.ext4").args(["-q", &disk.device]).status().ok()?.success();
        let mounted = formatted && Command::new("mount").arg(&disk.device).arg(mount).status().ok()?.success();
        mounted.then_some(disk)
    }
}

impl Drop for FailingDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

/// A cluster directory `at` whose `store` (`mds0`, `osd0`) lives on a [`FailingDisk`], the
/// rest on the ordinary disk; `backing` is the tmpfs to fill. Dropped in field order: the
/// disk, then the tmpfs under it, then the directory.
struct StoreOnFailingDisk {
    at: PathBuf,
    backing: PathBuf,
    _disk: FailingDisk,
    _fs: Tmpfs,
    _dir: tempfile::TempDir,
}

/// [`StoreOnFailingDisk`], or `None` after saying why the test `name` checks nothing (which
/// fails the test under CI, where the project's own scripts run as root).
fn store_on_failing_disk(name: &str, store: &str) -> Option<StoreOnFailingDisk> {
    let dir = tempfile::Builder::new().prefix("tessera-eio-").tempdir().unwrap();
    let backing = dir.path().join("backing");
    std::fs::create_dir(&backing).unwrap();
    let fs = tmpfs_or_skip(&backing, "48m", name)?;
    let Some(disk) = FailingDisk::make(&backing, &dir.path().join("disk")) else {
        assert!(std::env::var_os("CI").is_none(), "cannot make a loop device under CI");
        let _ = writeln!(std::io::stderr(), "SKIPPED: {name}: cannot make a loop device with ext4 here (needs root)");
        return None;
    };
    let at = dir.path().join("c");
    std::fs::create_dir(&at).unwrap();
    std::fs::create_dir(disk.mount.join(store)).unwrap();
    std::os::unix::fs::symlink(disk.mount.join(store), at.join(store)).unwrap();
    Some(StoreOnFailingDisk { at, backing, _disk: disk, _fs: fs, _dir: dir })
}

/// Goal: a metadata server whose WAL cannot be made durable (fdatasync fails: what is on the
/// disk is then unknown) refuses the change, exits with an error that says why instead of
/// lingering, and a restart once the disk is mended recovers every change it acknowledged.
/// Method: the server's store on an ext4 whose loop device's backing file sits on a small
/// tmpfs (`FailingDisk`), the OSD's elsewhere; the tmpfs filled, directories made until one
/// is refused; the server's exit and log read; the filler removed and the server restarted.
/// Needs root and a loop device; where there is none, it says so and checks nothing, except
/// under CI, where that fails the test.
#[test]
fn a_metadata_store_whose_flush_fails_stops_its_server_and_a_restart_recovers_it() {
    let Some(setup) = store_on_failing_disk("a_metadata_store_whose_flush_fails_stops_its_server_and_a_restart_recovers_it", "mds0") else { return };
    let (at, backing) = (&setup.at, &setup.backing);
    let mut cluster = LocalCluster::start_spec(tessera_exe(), at, &ClusterSpec::new(1)).unwrap();
    let mds = cluster.records().into_iter().find(|r| r.role == "mds").unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    client.mkdir("/d", 0o755).unwrap();
    fill(&backing.join("filler"));

    let mut made = 0;
    let err = loop {
        assert!(made < 200_000, "the metadata server never failed a flush on a failing disk");
        match client.mkdir(&format!("/d/{made}"), 0o755) {
            Ok(_) => made += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err.errno(), 5 | 28), "EIO or ENOSPC: {err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while alive(mds.pid) {
        assert!(std::time::Instant::now() < deadline, "the server with a failed store still runs 30 s later");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(at.join("logs").join("mds0.log")).unwrap();
    assert!(log.contains("failed to flush") && log.contains("exiting"), "the log says why: {log}");

    std::fs::remove_file(backing.join("filler")).unwrap();
    cluster.crash_and_restart_mds(0).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let names: std::collections::HashSet<String> = client.readdir("/d").unwrap().into_iter().map(|e| e.name).collect();
    // The refused one may be there or not, as after any failed flush; every acknowledged one is.
    assert!((0..made).all(|i| names.contains(&i.to_string())), "{} of {made} acknowledged directories after the restart", names.len());
    client.mkdir("/d/again", 0o755).expect("changes work after the restart");
    cluster.stop().unwrap();
}

/// Goal: once the kernel failed to write an object's data back (and so reported it to one
/// flush and then marked the pages clean), no later flush of that object says the data is on
/// disk: every one fails, as the first did. Before, the second `fsync` succeeded.
/// Method: the OSD's store on a `FailingDisk`; a file written and flushed; the tmpfs under the
/// disk filled; more written; `fsync` twice through the real client.
#[test]
fn a_flush_that_failed_keeps_failing_rather_than_claim_lost_data_is_on_disk() {
    let Some(setup) = store_on_failing_disk("a_flush_that_failed_keeps_failing_rather_than_claim_lost_data_is_on_disk", "osd0") else { return };
    let (at, backing) = (&setup.at, &setup.backing);
    let cluster = LocalCluster::start_spec(tessera_exe(), at, &ClusterSpec::new(1)).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let f = client.create("/f", 0o644, Some(StripeHint { stripe_unit: 1 << 20, stripe_count: 1, start_osd: Some(0) })).unwrap();
    f.pwrite(0, &[1u8; 1 << 20]).unwrap();
    f.fsync().unwrap();
    fill(&backing.join("filler"));
    // More than the tmpfs could ever hold, so some of it cannot reach the disk.
    let more = vec![2u8; 8 << 20];
    let mut at_offset = 1 << 20;
    let first = loop {
        assert!(at_offset < 1 << 30, "no flush failed on a disk that cannot take the data");
        f.pwrite(at_offset, &more).unwrap();
        at_offset += more.len() as u64;
        if let Err(e) = f.fsync() {
            break e;
        }
    };
    let again = f.fsync().expect_err("a flush after a failed one must not report the lost data durable");
    assert_eq!(again.errno(), first.errno(), "the same error again: {first} / {again}");
    drop(f);
    drop(client);
    // The OSD's own flush at shutdown fails too, rightly; what matters is that it stops.
    let _ = cluster.stop();
}
