//! A local cluster's life cycle as an operator drives it: `tessera up`, `down`, `status` and
//! hand-started daemons, each a real `tessera` process on loopback. Goals: a store in use is
//! locked (a second daemon, or a second `up`, is refused), `down` is idempotent, and daemon
//! logs are plain text.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::tessera_exe;
use tessera_cli::bench::pinning::{cpus_of_thread_named, thread_named};
use tessera_cli::cluster::read_records;
use tessera_mds::cpus::CpuSet;
use tessera_mds::disk_interrupts::DiskInterrupts;
use tessera_mds::loop_cpus::LoopCpus;

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

    /// `tessera up` of this directory with `osds` OSDs and `extra` flags, which must succeed.
    fn up_with(&self, osds: &str, extra: &[&str]) {
        let mut args = self.up_args(osds);
        args.extend(extra);
        run_ok(&args);
    }

    fn cluster_file(&self) -> PathBuf {
        self.path().join("cluster.toml")
    }

    /// Every daemon's address in the cluster file, metadata servers first.
    fn addrs(&self) -> Vec<String> {
        let config = tessera_client::ClusterConfig::load(&self.cluster_file()).unwrap();
        config.mds.iter().map(|m| m.addr.clone()).chain(config.osds.iter().map(|o| o.addr.clone())).collect()
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

/// Processes (not zombies) whose command line names `dir`.
fn processes_under(dir: &Path) -> Vec<u32> {
    let needle = dir.to_str().unwrap();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let zombie = std::fs::read_to_string(entry.path().join("stat")).map_or(true, |s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'));
        if !zombie && cmdline.split(|b| *b == 0).any(|arg| String::from_utf8_lossy(arg).starts_with(needle)) {
            pids.push(pid);
        }
    }
    pids
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

    // A store path that is a file is refused as such.
    let file = c.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let out = run_expecting_exit(&["osd", "--data", file.to_str().unwrap(), "--listen", "127.0.0.1:0"], Duration::from_secs(20));
    assert!(text(&out.stderr).contains("is not a directory"), "{}", text(&out.stderr));
}

/// `tessera mds --loop-cpus auto` (the default) keeps the event loop on the CPUs that take the
/// completion interrupts of the disk under its store, says so when it starts, and a bad
/// `--loop-cpus` is refused before the server starts, saying what it takes.
#[test]
fn the_metadata_servers_loop_runs_where_its_disk_interrupts() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("1"));
    let allowed = CpuSet::of_thread(0).unwrap().cpus();
    let near = DiskInterrupts::of(c.path()).map_or(LoopCpus::Any, LoopCpus::NearDisk);
    let log = text(&std::fs::read(c.log("mds0")).unwrap());
    assert!(log.contains(&format!("event loop on {}", near.describe(&allowed))), "{near:?}: {log}");
    let expected = near.choose(&allowed).unwrap_or_else(|| allowed.clone());
    // A spawned thread takes its name when it first runs, which on a busy machine may be
    // after `up` has returned.
    let named_by = Instant::now() + Duration::from_secs(5);
    let mut loop_cpus = cpus_of_thread_named(c.pid_of("mds0"), "mds-loop").unwrap();
    while loop_cpus.is_none() && Instant::now() < named_by {
        std::thread::sleep(Duration::from_millis(20));
        loop_cpus = cpus_of_thread_named(c.pid_of("mds0"), "mds-loop").unwrap();
    }
    let loop_cpus = loop_cpus.expect("the mds-loop thread");
    assert_eq!(loop_cpus, expected, "{near:?}");
    // Placed, the loop's CPU is kept from halting through flushes by a lowest-priority thread
    // beside it (`tessera mds --flush-wait spin`); left free, there is no one CPU to keep.
    // Started by the loop's first turn, which may still be ahead when `up` returns.
    let started = Instant::now() + Duration::from_secs(5);
    let mut companion = thread_named(c.pid_of("mds0"), "mds-keep-awake").unwrap();
    while companion.is_none() && near.choose(&allowed).is_some() && Instant::now() < started {
        std::thread::sleep(Duration::from_millis(20));
        companion = thread_named(c.pid_of("mds0"), "mds-keep-awake").unwrap();
    }
    match near.choose(&allowed) {
        Some(cpus) => {
            let tid = companion.expect("a keep-awake thread beside the placed loop");
            assert_eq!(CpuSet::of_thread(tid).unwrap().cpus(), cpus);
            assert_eq!(unsafe { libc::sched_getscheduler(tid as libc::pid_t) }, libc::SCHED_IDLE);
            assert!(log.contains("kept awake through flushes"), "{log}");
        }
        None => assert!(companion.is_none() && !log.contains("kept awake"), "{log}"),
    }

    let data = c.path().join("another-mds");
    let cluster = c.path().join("cluster.toml");
    let args = ["mds", "--data", data.to_str().unwrap(), "--cluster", cluster.to_str().unwrap(), "--listen", "127.0.0.1:0", "--loop-cpus", "two"];
    let out = run_expecting_exit(&args, Duration::from_secs(20));
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("--loop-cpus two") && err.contains("auto, any"), "{err}");
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

#[test]
fn two_concurrent_ups_on_one_directory_start_exactly_one_cluster() {
    // A few rounds: without a lock the outcome of the race varies from run to run.
    for round in 0..3 {
        let c = ClusterDir::new();
        let spawn = || Command::new(tessera_exe()).args(c.up_args("2")).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let (a, b) = (spawn(), spawn());
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        let ok: Vec<&Output> = outs.iter().filter(|o| o.status.success()).collect();
        let all = outs.iter().map(|o| text(&o.stderr)).collect::<Vec<_>>().join("\n");
        assert_eq!(ok.len(), 1, "round {round}: exactly one `up` succeeds: {all}");
        let refused = outs.iter().find(|o| !o.status.success()).unwrap();
        let why = text(&refused.stderr);
        assert!(why.contains("another `tessera up`") || why.contains("already running"), "round {round}: {why}");
        // One metadata server and two OSDs, each alone on its store.
        let procs = processes_under(c.path());
        assert_eq!(procs.len(), 3, "round {round}: daemons on {}: {procs:?}", c.path().display());
        run_ok(&["status", "--dir", c.arg()]);
    }
}

#[test]
fn down_twice_says_already_stopped_and_succeeds() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("1"));
    let first = run_ok(&["down", "--dir", c.arg()]);
    assert!(text(&first.stdout).contains("stopped osd0"), "{}", text(&first.stdout));
    assert!(processes_under(c.path()).is_empty());
    let second = run(&["down", "--dir", c.arg()]);
    assert!(second.status.success(), "a second down exits 0: {}", text(&second.stderr));
    assert!(text(&second.stdout).contains("already stopped"), "{}", text(&second.stdout));
    // A directory that never held a cluster is an error, not "stopped".
    let empty = tempfile::tempdir().unwrap();
    let out = run(&["down", "--dir", empty.path().to_str().unwrap()]);
    assert!(!out.status.success() && text(&out.stderr).contains("holds no cluster"), "{}", text(&out.stderr));
}

#[test]
fn down_finds_daemons_that_daemons_json_does_not_name() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("1"));
    std::fs::write(c.path().join("daemons.json"), "{garbage").unwrap();
    // A broken record of the running daemons must not let a second cluster start over them.
    let out = run(&c.up_args("1"));
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("already running"), "{}", text(&out.stderr));
    let out = run_ok(&["down", "--dir", c.arg()]);
    assert!(text(&out.stdout).contains("stopped mds0") && text(&out.stdout).contains("stopped osd0"), "{}", text(&out.stdout));
    assert!(processes_under(c.path()).is_empty(), "{:?}", processes_under(c.path()));
}

/// Goal: frozen daemons are killed and named, and several cost one grace period together,
/// not one each.
#[test]
fn down_fails_when_a_daemon_does_not_shut_down_cleanly() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("2"));
    let frozen = [c.pid_of("osd0"), c.pid_of("osd1")];
    // A frozen OSD cannot act on SIGTERM: down must kill it and say it did not flush.
    for pid in frozen {
        // SAFETY: kill(2) on a daemon this test started.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
    }
    let started = Instant::now();
    let out = run(&["down", "--dir", c.arg()]);
    let waited = started.elapsed();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "down reports the failure: {}", text(&out.stdout));
    for (name, pid) in ["osd0", "osd1"].iter().zip(frozen) {
        assert!(err.contains(&format!("{name} (pid {pid})")) && err.contains("was killed: no clean shutdown"), "{err}");
    }
    assert!(text(&out.stdout).contains("stopped mds0"), "{}", text(&out.stdout));
    // One 15 s grace period for both, where one after the other would take 30.
    assert!(waited < Duration::from_secs(25), "down took {waited:?} for two frozen OSDs");
    assert!(processes_under(c.path()).is_empty(), "{:?}", processes_under(c.path()));
}

#[test]
fn a_daemon_that_fails_to_start_shows_its_log() {
    let c = ClusterDir::new();
    // A file where the OSD's store directory goes: the OSD exits at once, saying so in its log.
    let store = c.path().join("osd0");
    std::fs::write(&store, b"not a store").unwrap();
    let out = run(&c.up_args("1"));
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&c.log("osd0").display().to_string()), "{err}");
    assert!(err.contains(&format!("{} is not a directory", store.display())), "{err}");
    // A cluster that never started keeps no set-up: `up` again, without the file, starts.
    std::fs::remove_file(&store).unwrap();
    let out = run(&c.up_args("1"));
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn a_host_that_does_not_resolve_is_refused_before_anything_is_made() {
    let c = ClusterDir::new();
    let dir = c.path().join("never");
    let out = run(&["up", "--dir", dir.to_str().unwrap(), "--osds", "1", "--host", "999.1.1.1"]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--host 999.1.1.1: not an address"), "{err}");
    assert!(!dir.exists(), "nothing is made for a refused up");
}

#[test]
fn an_interrupted_up_leaves_no_daemon_running() {
    let c = ClusterDir::new();
    let mut up = Command::new(tessera_exe()).args(c.up_args("30")).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while processes_under(c.path()).len() < 4 {
        assert!(Instant::now() < deadline, "up started no daemons within 60 s");
        assert!(up.try_wait().unwrap().is_none(), "up ended before it was interrupted");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(up.id() as libc::pid_t, libc::SIGINT) };
    let status = up.wait().unwrap();
    assert!(!status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_under(c.path()).is_empty() {
        assert!(Instant::now() < deadline, "daemons still run 10 s after `up` was interrupted: {:?}", processes_under(c.path()));
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run_ok(&["down", "--dir", c.arg()]);
    assert!(text(&out.stdout).contains("already stopped"), "{}", text(&out.stdout));
}

#[test]
fn status_leaves_no_warning_in_osd_logs_but_a_real_capability_less_command_does() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("1"));
    for _ in 0..3 {
        let out = run_ok(&["status", "--dir", c.arg()]);
        assert!(text(&out.stdout).contains("checks capabilities"), "{}", text(&out.stdout));
    }
    let log = std::fs::read_to_string(c.log("osd0")).unwrap();
    assert!(!log.contains("WARN") && !log.contains("refused"), "status probes made the OSD warn: {log}");
    // The same LIST asking for data is an attempt to read without a capability: still refused
    // and still a warning.
    let config = tessera_client::ClusterConfig::load(&c.path().join("cluster.toml")).unwrap();
    let client = tessera_cli::session::connect(&config.osds[0].addr, &config.osds[0].target).unwrap();
    assert!(client.list_all(0).is_err(), "a capability-less LIST of the root is refused");
    let log = std::fs::read_to_string(c.log("osd0")).unwrap();
    assert!(log.contains("WARN") && log.contains("refused"), "{log}");
}

/// Goal: `up` on a cluster one of whose daemons died starts only that daemon again, on its
/// old address, so clients' cluster files stay valid and the files it holds are back.
#[test]
fn up_restarts_only_the_daemons_that_died_on_their_addresses() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("2"));
    let cluster = c.path().join("cluster.toml");
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    std::fs::write(&local, vec![7u8; 3 << 20]).unwrap();
    let with_cluster = |args: &[&str]| {
        let out = Command::new(tessera_exe()).args(args).env("TESSERA_CLUSTER", &cluster).output().unwrap();
        assert!(out.status.success(), "`tessera {}`: {}", args.join(" "), text(&out.stderr));
        out
    };
    with_cluster(&["put", "-c", "2", "-S", "64K", local.to_str().unwrap(), "/f"]);
    let before = read_records(c.path()).unwrap();
    let (mds0, osd0) = (c.pid_of("mds0"), c.pid_of("osd0"));
    // SAFETY: kill(2) of a daemon this test started.
    unsafe { libc::kill(c.pid_of("osd1") as libc::pid_t, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(300));

    let out = run_ok(&["up", "--dir", c.arg()]);
    assert!(text(&out.stdout).contains("restarted osd1"), "{}", text(&out.stdout));
    let after = read_records(c.path()).unwrap();
    assert_eq!(c.pid_of("mds0"), mds0, "the running metadata server was left alone");
    assert_eq!(c.pid_of("osd0"), osd0);
    for (b, a) in before.iter().zip(&after) {
        assert_eq!((&b.role, b.index, &b.addr), (&a.role, a.index, &a.addr), "every daemon keeps its address");
    }
    let back = work.path().join("back");
    with_cluster(&["get", "/f", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&local).unwrap(), "the file striped over the restarted OSD reads back");
}

/// Goal: `status` tells which daemon is not answering, in bounded time, when daemons are
/// frozen (SIGSTOP: their sockets still accept connections) rather than gone.
#[test]
fn status_reports_frozen_daemons_as_down_in_bounded_time() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("2"));
    let (mds0, osd1) = (c.pid_of("mds0"), c.pid_of("osd1"));
    let signal = |pid: u32, sig| {
        // SAFETY: kill(2) of a daemon this test started.
        unsafe { libc::kill(pid as libc::pid_t, sig) };
    };
    signal(mds0, libc::SIGSTOP);
    signal(osd1, libc::SIGSTOP);
    let started = Instant::now();
    let out = run_expecting_exit(&["status", "--dir", c.arg()], Duration::from_secs(60));
    let waited = started.elapsed();
    signal(mds0, libc::SIGCONT);
    signal(osd1, libc::SIGCONT);
    let report = text(&out.stdout);
    assert!(!out.status.success(), "status fails while daemons are down: {report}");
    let line = |name: &str| report.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in {report}")).to_string();
    assert!(line("mds0").contains("down"), "{report}");
    assert!(line("osd1").contains("down"), "{report}");
    assert!(line("osd0").contains(" up "), "{report}");
    assert!(waited < Duration::from_secs(30), "status took {waited:?}");
}

/// Goal: with its cluster file corrupt, `status --dir` still shows which daemons run (from the
/// records and the stores' locks), fails, and says how to get the file back.
#[test]
fn status_with_a_corrupt_cluster_file_shows_the_daemons_from_the_directory() {
    let c = ClusterDir::new();
    run_ok(&c.up_args("2"));
    let (mds0, osd1) = (c.pid_of("mds0"), c.pid_of("osd1"));
    std::fs::write(c.path().join("cluster.toml"), "osds = [[").unwrap();
    let out = run(&["status", "--dir", c.arg()]);
    let (report, err) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{report}");
    assert!(err.contains("cluster.toml cannot be read, so clients cannot find the cluster") && err.contains("then `tessera up --dir"), "{err}");
    for (name, pid) in [("mds0", mds0), ("osd1", osd1)] {
        let line = report.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in {report}"));
        assert!(line.contains("accepts connections") && line.contains(&format!("(pid {pid})")), "{report}");
    }
    run_ok(&["down", "--dir", c.arg()]);
    run_ok(&c.up_args("2"));
    run_ok(&["status", "--dir", c.arg()]);
    // A directory that holds no cluster (a typo) is named as such, with no advice to make one.
    let typo = c.path().join("no-such-cluster");
    let out = run(&["status", "--dir", typo.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("holds no cluster") && !err.contains("tessera up --dir"), "{err}");
}

/// Goal: `up --host` takes an IPv6 address too: every daemon serves on it, the cluster file
/// names each in brackets, and a striped file reads back through it.
#[test]
fn a_cluster_on_the_ipv6_loopback_serves_files() {
    let c = ClusterDir::new();
    c.up_with("2", &["--host", "::1"]);
    let cluster = c.cluster_file();
    let addrs = c.addrs();
    assert_eq!(addrs.len(), 3);
    assert!(addrs.iter().all(|a| a.starts_with("[::1]:")), "{addrs:?}");
    let work = tempfile::tempdir().unwrap();
    let (local, back) = (work.path().join("f"), work.path().join("back"));
    std::fs::write(&local, (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    for args in [["put", "-c", "2", "-S", "64K", local.to_str().unwrap(), "/f"].as_slice(), &["get", "/f", back.to_str().unwrap()]] {
        let out = Command::new(tessera_exe()).args(args).env("TESSERA_CLUSTER", &cluster).output().unwrap();
        assert!(out.status.success(), "`tessera {}`: {}", args.join(" "), text(&out.stderr));
    }
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&local).unwrap());
}

/// Goal: `up` binds each daemon's port itself and hands the socket over, on a port outside
/// the kernel's ephemeral range (docs/architecture.md): no outgoing connection on the host can
/// hold a daemon's port, at start or when it restarts on its recorded address.
#[test]
fn up_hands_every_daemon_a_port_outside_the_ephemeral_range() {
    let c = ClusterDir::new();
    c.up_with("2", &["--mds", "2"]);
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let bounds: Vec<u16> = range.split_whitespace().map(|p| p.parse().unwrap()).collect();
    let records = read_records(c.path()).unwrap();
    assert_eq!(records.len(), 4);
    for r in &records {
        let port: u16 = r.addr.rsplit(':').next().unwrap().parse().unwrap();
        assert!(!(bounds[0]..=bounds[1]).contains(&port), "{} on {} inside {range}", r.name(), r.addr);
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", r.pid)).unwrap();
        let words: Vec<String> = cmdline.split(|&b| b == 0).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
        assert!(words.iter().any(|w| w == "--listen-fd"), "{}: {words:?}", r.name());
    }
}

/// Goal: a cluster stopped and started again keeps its addresses, so a client made before the
/// `down` carries on after the `up` without reading the cluster file again.
#[test]
fn a_cluster_started_again_keeps_its_addresses_and_its_clients() {
    let c = ClusterDir::new();
    c.up_with("2", &["--mds", "2"]);
    let before = c.addrs();
    let client = tessera_client::Client::connect(&tessera_client::ClusterConfig::load(&c.cluster_file()).unwrap()).unwrap();
    client.create("/kept", 0o644, None).unwrap().pwrite(0, b"across a restart").unwrap();
    run_ok(&["down", "--dir", c.arg()]);
    run_ok(&["up", "--dir", c.arg()]);
    assert_eq!(c.addrs(), before);
    let mut back = vec![0u8; 16];
    assert_eq!(client.open("/kept").unwrap().pread(0, &mut back).unwrap(), 16);
    assert_eq!(&back, b"across a restart");
}
