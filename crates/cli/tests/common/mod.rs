//! Shared harness for the end-to-end tests: each test starts the real `tessera osd` binary as a
//! child process on a kernel-chosen loopback port, in its own temporary directory, and talks to
//! it with Tessera's own iSCSI initiator and OSD client.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tessera_cli::daemon::Daemon;
use tessera_cli::session::connect;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_types::ObjectAddr;

pub fn tessera_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_tessera"))
}

/// A running OSD daemon with its data directory.
pub struct TestOsd {
    pub daemon: Option<Daemon>,
    pub dir: TempDir,
    pub addr: String,
    pub target_name: String,
}

impl TestOsd {
    pub fn start() -> TestOsd {
        let dir = tempfile::Builder::new().prefix("tessera-test-").tempdir().expect("temp dir");
        let (daemon, addr, target_name) = spawn(&dir.path().join("osd"));
        TestOsd { daemon: Some(daemon), dir, addr, target_name }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("osd")
    }

    pub fn client(&self) -> OsdClient<Session> {
        connect(&self.addr, &self.target_name).expect("login to the test OSD")
    }

    /// Stops the daemon (SIGTERM, or SIGKILL when `crash`) and starts a new one on the same
    /// directory; the port changes.
    pub fn restart(&mut self, crash: bool) {
        let daemon = self.daemon.take().expect("daemon running");
        if crash {
            daemon.kill().expect("kill daemon");
        } else {
            daemon.stop().expect("stop daemon");
        }
        let (daemon, addr, target_name) = spawn(&self.data_dir());
        self.daemon = Some(daemon);
        self.addr = addr;
        self.target_name = target_name;
    }
}

fn spawn(data: &Path) -> (Daemon, String, String) {
    let data = data.to_str().expect("utf-8 temp path");
    let daemon = Daemon::spawn_exe(tessera_exe(), &["osd", "--data", data, "--listen", "127.0.0.1:0"]).expect("start tessera osd");
    let addr = daemon.field("addr").expect("addr").to_string();
    let target = daemon.field("target").expect("target").to_string();
    (daemon, addr, target)
}

/// A fresh partition with one user object in it.
pub fn partition_with_object(client: &OsdClient<Session>) -> (u64, ObjectAddr) {
    let pid = client.create_partition(None).expect("create partition");
    let oid = client.create_one(pid).expect("create object");
    (pid, ObjectAddr::new(pid, oid))
}

/// Deterministic test bytes.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 24) as u8).collect()
}

pub fn be64(v: &[u8]) -> u64 {
    u64::from_be_bytes(v.try_into().expect("8-byte attribute"))
}

/// Runs `tessera ARGS` to completion, against `cluster` (as TESSERA_CLUSTER) or none.
pub fn run(args: &[&str], cluster: Option<&Path>) -> std::process::Output {
    let mut cmd = std::process::Command::new(tessera_exe());
    cmd.args(args).env_remove("TESSERA_CLUSTER");
    if let Some(c) = cluster {
        cmd.env("TESSERA_CLUSTER", c);
    }
    cmd.output().expect("running tessera")
}

pub fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a daemon this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0, "signal {sig} to {pid}");
}

/// SIGSTOP, then waits until every thread of `pid` has stopped: kill(2) returns once the
/// signal is queued, and a thread already running may still answer a command meanwhile.
pub fn freeze(pid: u32) {
    signal(pid, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        let stopped = tasks.flatten().all(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // The state follows the parenthesised command name.
            stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) == Some("T")
        });
        if stopped {
            return;
        }
        assert!(Instant::now() < deadline, "process {pid} did not stop within 10 s of SIGSTOP");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A local cluster whose cluster file sets `osd_liveness_secs = secs`, its metadata server
/// restarted so that its own sessions use it too; the cluster and the file's contents.
pub fn cluster_with_liveness(dir: &Path, spec: &tessera_cli::cluster::ClusterSpec, secs: u64) -> (tessera_cli::cluster::LocalCluster, tessera_client::ClusterConfig) {
    let mut cluster = tessera_cli::cluster::LocalCluster::start_spec(tessera_exe(), dir, spec).unwrap();
    let mut config = cluster.config().clone();
    config.osd_liveness_secs = secs;
    config.save(&cluster.cluster_file()).unwrap();
    cluster.crash_and_restart_mds(0).unwrap();
    (cluster, config)
}

/// Runs `f` with `pid` frozen ([`freeze`]), then thaws it; `f`'s result and how long it took.
pub fn while_frozen<T>(pid: u32, f: impl FnOnce() -> T) -> (T, Duration) {
    freeze(pid);
    let started = Instant::now();
    let result = f();
    let took = started.elapsed();
    signal(pid, libc::SIGCONT);
    (result, took)
}

/// Whether process `pid` runs (a zombie, which still has a /proc entry, does not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
}

/// Waits until the metadata servers report no unlinked file's object awaiting removal: they
/// remove a file's objects a moment after answering its unlink (`tessera_mds::reaper`).
pub fn until_objects_removed(client: &tessera_client::Client) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = client.statfs().unwrap().pending_removals;
        if left == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{left} objects still await removal after 20 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}
