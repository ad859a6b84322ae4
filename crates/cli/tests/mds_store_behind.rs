//! Goal: a metadata store older than its OSDs gives out no object the OSDs already hold. The
//! store may have been restored from an earlier copy, or lost and started afresh. Either way,
//! no file's objects are removed, and no new file gets another file's bytes; the files the
//! store does not know of are reported by `repair` as orphans. Before, a fresh store's
//! precreates were refused and abandoned, which removed the old files' objects. A restored store
//! handed its lost later life's objects, with their data, to new files.
//! Method: `tessera up` and `tessera down` on one directory. Between runs, the metadata
//! store is swapped for an earlier copy, or moved away. Files are checked byte for byte with
//! the client library.

mod common;

use std::path::Path;

use common::run;
use tessera_client::{Client, ClusterConfig};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn up(dir: &Path) -> Client {
    up_with(dir, &[])
}

fn up_with(dir: &Path, flags: &[&str]) -> Client {
    let mut args = vec!["up", "--dir", dir.to_str().unwrap(), "--osds", "2"];
    args.extend(flags);
    let out = run(&args, None);
    assert!(out.status.success(), "up: {}", text(&out.stderr));
    Client::connect(&ClusterConfig::load(&dir.join("cluster.toml")).unwrap()).unwrap()
}

/// Stops the cluster under a directory even when the test fails part-way.
struct DownOnDrop<'a>(&'a Path);

impl Drop for DownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = run(&["down", "--dir", self.0.to_str().unwrap()], None);
    }
}

fn down(dir: &Path) {
    let out = run(&["down", "--dir", dir.to_str().unwrap()], None);
    assert!(out.status.success(), "down: {}", text(&out.stderr));
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1).collect()
}

fn write(client: &Client, path: &str, data: &[u8]) {
    let f = client.create(path, 0o644, None).unwrap();
    f.pwrite(0, data).unwrap();
    f.fsync().unwrap();
}

fn read(client: &Client, path: &str) -> Vec<u8> {
    client.open(path).unwrap().read_to_end().unwrap()
}

fn orphans(dir: &Path) -> u64 {
    let out = run(&["repair"], Some(&dir.join("cluster.toml")));
    assert!(out.status.success(), "repair: {}", text(&out.stderr));
    let report = text(&out.stdout);
    let line = report.lines().find(|l| l.starts_with("mds0: ")).unwrap_or_else(|| panic!("{report}"));
    line[6..].split(' ').next().unwrap().parse().unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn a_store_older_than_its_osds_gives_out_no_object_they_hold() {
    let work = tempfile::Builder::new().prefix("tessera-behind-").tempdir().unwrap();
    let dir = work.path().join("cluster");
    let _down = DownOnDrop(&dir);
    let client = up(&dir);
    let kept = bytes(1, 300_000);
    write(&client, "/kept", &kept);
    drop(client);
    down(&dir);
    let copy = work.path().join("mds0-copy");
    assert!(std::process::Command::new("cp").args(["-a"]).arg(dir.join("mds0")).arg(&copy).status().unwrap().success());

    // A later life the copy will not know: files written into objects from the pools.
    let client = up(&dir);
    for i in 0..40u8 {
        write(&client, &format!("/later{i}"), &bytes(100 + i, 70_000));
    }
    drop(client);
    down(&dir);

    // Restored from the copy: it knows /kept only. A new file must read back as written.
    std::fs::remove_dir_all(dir.join("mds0")).unwrap();
    std::fs::rename(&copy, dir.join("mds0")).unwrap();
    let client = up(&dir);
    assert!(read(&client, "/kept") == kept, "/kept reads back as written");
    for i in 0..40u8 {
        let fresh = bytes(200 + i, 50_000);
        write(&client, &format!("/new{i}"), &fresh);
        assert!(read(&client, &format!("/new{i}")) == fresh, "new file {i} holds exactly its own bytes");
        assert_eq!(client.stat(&format!("/new{i}")).unwrap().size, 50_000);
    }
    drop(client);
    assert!(orphans(&dir) >= 40, "the later life's objects are still there, reported as orphans");
    down(&dir);

    // Lost entirely: `up` refuses to start an empty store in its place until told to; then
    // the new store's namespace is empty, and nothing on the OSDs is removed.
    std::fs::remove_dir_all(dir.join("mds0")).unwrap();
    let out = run(&["up", "--dir", dir.to_str().unwrap()], None);
    assert!(!out.status.success() && text(&out.stderr).contains("mds0 is missing"), "{}", text(&out.stderr));
    let client = up_with(&dir, &["--reconfigure"]);
    assert!(client.readdir("/").unwrap().is_empty());
    let fresh = bytes(7, 120_000);
    write(&client, "/fresh", &fresh);
    assert!(read(&client, "/fresh") == fresh, "/fresh reads back as written");
    drop(client);
    assert!(orphans(&dir) >= 81, "every earlier file's objects are still on the OSDs");
    down(&dir);
}
