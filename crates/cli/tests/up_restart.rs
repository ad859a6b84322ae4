//! `tessera up` on a directory that already holds a cluster restarts it as it was set up
//! (DIR/up.json): a forgotten flag adds no OSD, drops no metadata server, CHAP or security, and
//! a flag that disagrees is refused unless `--reconfigure` says the change is meant.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::tessera_exe;

/// A directory for `tessera up`, stopped with `tessera down` even when a test fails.
struct ClusterDir {
    dir: tempfile::TempDir,
}

impl ClusterDir {
    fn new() -> ClusterDir {
        ClusterDir { dir: tempfile::Builder::new().prefix("tessera-restart-").tempdir().unwrap() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn arg(&self) -> &str {
        self.path().to_str().unwrap()
    }

    /// `tessera up --dir DIR` with `flags`.
    fn up(&self, flags: &[&str]) -> Output {
        let mut args = vec!["up", "--dir", self.arg()];
        args.extend(flags);
        run(&args)
    }

    fn up_ok(&self, flags: &[&str]) -> String {
        let out = self.up(flags);
        assert!(out.status.success(), "`up {}` failed: {}{}", flags.join(" "), text(&out.stderr), text(&out.stdout));
        text(&out.stdout)
    }

    /// `up` with `flags` must be refused; returns its error.
    fn up_refused(&self, flags: &[&str]) -> String {
        let out = self.up(flags);
        assert!(!out.status.success(), "`up {}` should be refused: {}", flags.join(" "), text(&out.stdout));
        text(&out.stderr)
    }

    fn down(&self) {
        let out = run(&["down", "--dir", self.arg()]);
        assert!(out.status.success(), "down: {}", text(&out.stderr));
    }

    fn has_store(&self, name: &str) -> bool {
        self.path().join(name).is_dir()
    }
}

impl Drop for ClusterDir {
    fn drop(&mut self) {
        let _ = run(&["down", "--dir", self.arg()]);
    }
}

fn run(args: &[&str]) -> Output {
    Command::new(tessera_exe()).args(args).env_remove("TESSERA_CLUSTER").output().expect("running tessera")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_restart_without_flags_keeps_counts_chap_and_security() {
    let c = ClusterDir::new();
    c.up_ok(&["--osds", "2", "--mds", "2", "--chap", "--security", "capkey"]);
    c.down();
    let out = c.up_ok(&[]);
    assert!(out.contains("2 metadata servers, 2 OSDs"), "{out}");
    assert!(out.contains("CHAP: mutual") && out.contains("security: CAPKEY"), "{out}");
    assert!(!c.has_store("osd2"), "no OSD was added");
    let cluster = std::fs::read_to_string(c.path().join("cluster.toml")).unwrap();
    assert!(cluster.contains("chap_secret_file"), "{cluster}");
    // The restarted cluster works, CHAP included.
    let file = c.path().join("cluster.toml");
    let mkdir = run(&["mkdir", "--cluster", file.to_str().unwrap(), "/after-restart"]);
    assert!(mkdir.status.success(), "{}", text(&mkdir.stderr));
}

#[test]
fn a_flag_that_disagrees_is_refused_and_changes_nothing() {
    let c = ClusterDir::new();
    c.up_ok(&["--osds", "2", "--mds", "2", "--chap"]);
    c.down();
    let err = c.up_refused(&["--osds", "3"]);
    assert!(err.contains("OSDs: the cluster has 2, --osds asks for 3") && err.contains("--reconfigure"), "{err}");
    assert!(!c.has_store("osd2"), "a refused up made no store");
    let err = c.up_refused(&["--mds", "1"]);
    assert!(err.contains("metadata servers: the cluster has 2"), "{err}");
    let err = c.up_refused(&["--insecure"]);
    assert!(err.contains("security: the cluster has cmdrsp, --security/--insecure asks for nosec"), "{err}");
    let err = c.up_refused(&["--no-chap"]);
    assert!(err.contains("CHAP: the cluster has CHAP"), "{err}");
    // Fewer metadata servers would lose the namespace they hold: not even --reconfigure.
    let err = c.up_refused(&["--mds", "1", "--reconfigure"]);
    assert!(err.contains("strand"), "{err}");

    // A change that is meant: one more OSD, and it stays on the next restart.
    let out = c.up_ok(&["--osds", "3", "--reconfigure"]);
    assert!(out.contains("2 metadata servers, 3 OSDs"), "{out}");
    c.down();
    let out = c.up_ok(&[]);
    assert!(out.contains("2 metadata servers, 3 OSDs") && out.contains("CHAP: mutual"), "{out}");
}

#[test]
fn a_refused_first_up_leaves_no_directory() {
    let parent = tempfile::Builder::new().prefix("tessera-restart-").tempdir().unwrap();
    let dir = parent.path().join("never");
    let out = run(&["up", "--dir", dir.to_str().unwrap(), "--osds", "0"]);
    assert!(!out.status.success() && text(&out.stderr).contains("at least one OSD"), "{}", text(&out.stderr));
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

/// Goal: `up` refuses to restart a cluster one of whose stores is missing (deleted or moved),
/// rather than start an empty daemon in its place without a word; `--reconfigure` says the
/// empty store is meant. Before, a missing OSD store became an empty OSD, and every file
/// striped over it failed with a sense code.
#[test]
fn a_missing_store_is_refused_unless_an_empty_one_is_meant() {
    let c = ClusterDir::new();
    c.up_ok(&["--osds", "2"]);
    c.down();
    let moved = c.path().join("osd1-moved");
    std::fs::rename(c.path().join("osd1"), &moved).unwrap();
    let err = c.up_refused(&[]);
    assert!(err.contains("osd1 is missing (deleted or moved?): the files striped over OSD 1 could not be read"), "{err}");
    assert!(err.contains("--reconfigure"), "{err}");
    assert!(!c.has_store("osd1"), "a refused up made no store");
    std::fs::rename(c.path().join("mds0"), c.path().join("mds0-moved")).unwrap();
    let err = c.up_refused(&[]);
    assert!(err.contains("mds0 is missing") && err.contains("namespace would start empty"), "{err}");

    std::fs::rename(c.path().join("mds0-moved"), c.path().join("mds0")).unwrap();
    std::fs::rename(&moved, c.path().join("osd1")).unwrap();
    c.up_ok(&[]);
    c.down();
    std::fs::remove_dir_all(c.path().join("osd1")).unwrap();
    c.up_ok(&["--reconfigure"]);
    assert!(c.has_store("osd1"), "an empty OSD, as asked");
}

/// Goal: a deleted master key file is not silently replaced by a new key, which the OSD (holding
/// the key it was made with) would refuse, leaving a metadata server that cannot start and an
/// error that names neither the file nor the cause. Method: move a key file away and restart,
/// plain and with `--reconfigure`; then put it back, and a file written before reads back.
#[test]
fn a_missing_master_key_is_refused_not_made_anew() {
    let c = ClusterDir::new();
    c.up_ok(&["--osds", "2"]);
    let cluster = c.path().join("cluster.toml");
    let cluster = cluster.to_str().unwrap();
    let local = c.path().join("local");
    std::fs::write(&local, (0..3u32 << 20).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let out = run(&["put", "--cluster", cluster, local.to_str().unwrap(), "/f"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    c.down();
    let key = c.path().join("keys").join("osd1.key");
    let kept = c.path().join("osd1.key.kept");
    std::fs::rename(&key, &kept).unwrap();
    for flags in [&[][..], &["--reconfigure"][..]] {
        let err = c.up_refused(flags);
        assert!(err.contains(&format!("{} is missing", key.display())) && err.contains("put the file back"), "{err}");
        assert!(!key.exists(), "no new key was made in its place");
    }
    std::fs::rename(&kept, &key).unwrap();
    c.up_ok(&[]);
    let back = c.path().join("back");
    let out = run(&["get", "--cluster", cluster, "/f", back.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read(&back).unwrap() == std::fs::read(&local).unwrap(), "the file reads back under the kept key");
}

/// Goal: a key file that does not match the OSD's master key (replaced by another) makes the
/// metadata server say so, not just report a sense code.
#[test]
fn a_master_key_the_osd_does_not_hold_is_named_as_such() {
    use std::os::unix::fs::PermissionsExt;
    let c = ClusterDir::new();
    c.up_ok(&["--osds", "2"]);
    c.down();
    let key = c.path().join("keys").join("osd1.key");
    std::fs::write(&key, format!("{}\n", "5a".repeat(32))).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = c.up_refused(&[]);
    assert!(err.contains("OSD 1 refused the root key signed under the master key this server has for it"), "{err}");
    assert!(err.contains("give this server the key file the OSD was first started with"), "{err}");
}

/// Goal: a first `up` that did not finish (a daemon would not start, or the command was
/// interrupted) leaves the next `up` free to start the cluster as asked, instead of taking the
/// stores it left for a cluster set up differently ("the cluster has 2 OSDs"). Method: a bad
/// key file makes OSD 1 fail after OSD 0 and OSD 1 made their stores; the same `up` then runs
/// again once the file is gone.
#[test]
fn a_first_up_that_did_not_finish_can_simply_be_run_again() {
    use std::os::unix::fs::PermissionsExt;
    let c = ClusterDir::new();
    let keys = c.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(keys.join("osd1.key"), "not a key\n").unwrap();
    std::fs::set_permissions(keys.join("osd1.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = c.up_refused(&["--osds", "3"]);
    assert!(err.contains("osd1.key"), "{err}");
    assert!(c.has_store("osd0") && c.has_store("osd1"), "the failed start left stores behind");
    std::fs::remove_file(keys.join("osd1.key")).unwrap();
    let out = c.up_ok(&["--osds", "3"]);
    assert!(out.contains("cluster up: 1 metadata server, 3 OSDs"), "{out}");
    c.down();
    c.up_ok(&[]);
}
