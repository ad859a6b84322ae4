//! A local cluster's life cycle as an operator drives it: `tessera up`, `down`, `status` and
//! hand-started daemons, each a real `tessera` process on loopback. Goals: a store in use is
//! locked (a second daemon, or a second `up`, is refused), `down` is idempotent, and daemon
//! logs are plain text.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::tessera_exe;
use tessera_cli::cluster::read_records;

/// A directory for `tessera up`, stopped with `tessera down` even when a test fails.
struct ClusterDir {
    dir: tempfile::TempDir,
}

impl ClusterDir {
    fn new() -> ClusterDir {
        ClusterDir { dir: tempfile::Builder::new().prefix("tessera-life-").tempdir().unwrap() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn arg(&self) -> &str {
        self.path().to_str().unwrap()
    }

    fn up_args<'a>(&'a self, osds: &'a str) -> Vec<&'a str> {
        vec!["up", "--dir", self.arg(), "--osds", osds]
    }

    fn pid_of(&self, name: &str) -> u32 {
        let records = read_records(self.path()).expect("daemons.json");
        records.iter().find(|r| r.name() == name).unwrap_or_else(|| panic!("no {name} in daemons.json")).pid
    }

    fn log(&self, name: &str) -> PathBuf {
        self.path().join("logs").join(format!("{name}.log"))
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

fn run_ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(out.status.success(), "`tessera {}` failed: {}{}", args.join(" "), text(&out.stderr), text(&out.stdout));
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `tessera args`, which must end on its own within `limit`; a daemon that starts instead
/// of refusing is killed and the test fails.
fn run_expecting_exit(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(tessera_exe())
        .args(args)
        .env_remove("TESSERA_CLUSTER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running tessera");
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("`tessera {}` still runs after {limit:?}: {}{}", args.join(" "), text(&out.stdout), text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_second_daemon_on_a_store_in_use_is_refused_and_names_the_holder() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("1"));
    let osd0 = c.path().join("osd0");
    let out = run_expecting_exit(&["osd", "--data", osd0.to_str().unwrap(), "--listen", "127.0.0.1:0"], Duration::from_secs(20));
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&format!("{} is in use by pid {}", osd0.display(), c.pid_of("osd0"))), "{err}");

    let mds0 = c.path().join("mds0");
    let cluster = c.path().join("cluster.toml");
    let keys = c.path().join("keys");
    let args = ["mds", "--data", mds0.to_str().unwrap(), "--cluster", cluster.to_str().unwrap(), "--listen", "127.0.0.1:0", "--master-keys", keys.to_str().unwrap()];
    let out = run_expecting_exit(&args, Duration::from_secs(20));
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&format!("{} is in use by pid {}", mds0.display(), c.pid_of("mds0"))), "{err}");
    // The refused daemons touched nothing: the cluster still answers.
    run_ok(&["status", "--dir", c.arg()]);
}

#[test]
fn daemon_logs_hold_no_terminal_colour_codes() {
    let c = ClusterDir::new();
    // NOSEC makes every OSD log a WARN through the tracing formatter, the one that colours.
    let mut args = c.up_args("1");
    args.push("--insecure");
    run_ok(&args);
    let log = std::fs::read(c.log("osd0")).unwrap();
    assert!(text(&log).contains("capability security is off"), "the WARN is in the log: {}", text(&log));
    assert!(!log.contains(&0x1b), "ESC in {}: {:?}", c.log("osd0").display(), text(&log));
}
