//! Goal: a full disk under an OSD is an ENOSPC that says so, not a wedged cluster. Data written
//! before stays readable (an accessed time that cannot be stored is skipped), a removal frees
//! space even though the attribute store cannot grow, a write that does not fit leaves no data
//! behind, and once space is back writes work again. Method: a real cluster (one `tessera
//! mds`, one `tessera osd`) whose stores live on a 24 MiB tmpfs mounted for the test; the
//! file system is filled with a file of zeros beside them.
//! Needs root to mount; where it cannot mount, it says so and checks nothing, except under CI,
//! where that fails the test.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::tessera_exe;
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

#[test]
fn a_full_disk_under_an_osd_is_enospc_and_keeps_data_readable() {
    let dir = tempfile::Builder::new().prefix("tessera-full-").tempdir().unwrap();
    let Some(_fs) = Tmpfs::mount(dir.path(), "24m") else {
        // As the multi-host test: under CI (root, by the project's own scripts) this must run.
        assert!(std::env::var_os("CI").is_none(), "cannot mount a tmpfs under CI");
        // Straight to the stream, not through `eprintln!`, which the harness captures for a
        // passing test: the skip must show in the test command's output.
        let _ = writeln!(std::io::stderr(), "SKIPPED: a_full_disk_under_an_osd_is_enospc_and_keeps_data_readable: cannot mount a tmpfs here (needs root)");
        return;
    };
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

    let err = client.create("/big", 0o644, one).and_then(|b| b.pwrite(0, &vec![1u8; 8 << 20]).map(drop)).unwrap_err();
    assert_eq!(err.errno(), 28, "a write that does not fit is ENOSPC: {err}");
    assert!(err.to_string().contains("disk is full"), "the error says why in words: {err}");
    let _ = client.unlink("/big");

    assert_eq!(client.open("/kept").unwrap().read_to_end().unwrap(), kept, "data written before stays readable");
    assert_eq!(client.stat("/kept").unwrap().size, kept.len() as u64);
    client.unlink("/doomed").expect("a removal on a full disk");
    assert!(objects_on_disk(&osd_data) < before, "the removed file's object left the disk");

    std::fs::remove_file(&filler).unwrap();
    assert!(free(&client) > 8 << 20, "the space is back: {}", free(&client));
    let again = client.create("/again", 0o644, one).unwrap();
    again.pwrite(0, &kept).unwrap();
    again.fsync().unwrap();
    assert_eq!(client.open("/again").unwrap().read_to_end().unwrap(), kept, "writes work once space is back");
    cluster.stop().unwrap();
}
