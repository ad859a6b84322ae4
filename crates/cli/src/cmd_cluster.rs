//! `tessera up`, `tessera down`, `tessera status`: a local cluster's life cycle, and a health
//! check of any cluster a cluster file names (local or on other hosts).

use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use tessera_client::ClusterConfig;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_mds_proto::Request;
use tessera_osd_proto::{Command, OsdRequestBuilder};

use crate::cluster::{check_not_shrinking, read_records, ClusterSpec, DaemonRecord, LocalCluster, Placement, SecuritySpec, CLUSTER_FILE, DAEMONS_FILE};
use tessera_security::SecurityMethod;
use crate::daemon::{log_len, log_since, signal, ERROR_PREFIX};
use crate::lock::DirLock;
use crate::running;
use crate::units::{count, parse_size};
use crate::up_options::{self, UpOptions};

/// How long `down` waits for a daemon to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(15);
/// How long `status` waits for a daemon to accept a connection.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// `up`'s cluster options are `None` when not given: a new cluster then takes the default shown,
/// an existing one what it was set up with (DIR/up.json).
#[derive(Args)]
pub struct UpArgs {
    /// Directory for the cluster's stores, logs and cluster.toml (created if missing; an
    /// existing one is restarted with its data and the options it was set up with).
    #[arg(long)]
    dir: PathBuf,
    /// Number of OSDs [new cluster: 4].
    #[arg(long)]
    osds: Option<u32>,
    /// Number of metadata servers sharing the namespace [new cluster: 1].
    #[arg(long)]
    mds: Option<u32>,
    /// Address every daemon binds [new cluster: 127.0.0.1].
    #[arg(long)]
    host: Option<String>,
    /// Default stripe unit of new files, up to 64M [new cluster: 1M].
    #[arg(long, value_parser = parse_size)]
    stripe_unit: Option<u64>,
    /// Default stripe count of new files; -1 or 0 stripes over every OSD [new cluster: 0].
    #[arg(long, allow_negative_numbers = true, value_parser = crate::units::parse_stripe_count)]
    stripe_count: Option<u32>,
    /// Capability security method the OSDs require: capkey, cmdrsp or alldata [new cluster:
    /// cmdrsp]. Master keys are provisioned under DIR/keys on first start.
    #[arg(long, value_parser = crate::cmd_mds::parse_capability_method, conflicts_with = "insecure")]
    security: Option<SecurityMethod>,
    /// Run every OSD NOSEC instead: any client that reaches an OSD can read, write and remove
    /// every object. Only for benchmarks of the unprotected path and for debugging.
    #[arg(long)]
    insecure: bool,
    /// Also require mutual CHAP at every iSCSI login: secrets go to DIR/keys/chap.secrets
    /// (mode 0600), which the cluster file names for clients.
    #[arg(long, conflicts_with = "no_chap")]
    chap: bool,
    /// No CHAP (with --reconfigure, turns it off on a cluster that has it).
    #[arg(long)]
    no_chap: bool,
    /// Restart an existing cluster with the options given here instead of the ones it was set
    /// up with (more OSDs or metadata servers, other default striping, security or CHAP), or
    /// with an empty store in place of one that is missing.
    #[arg(long)]
    reconfigure: bool,
}

impl UpArgs {
    /// The options given on the command line.
    fn given(&self) -> UpOptions {
        let security = match (self.insecure, self.security) {
            (true, _) => Some(up_options::NOSEC.to_string()),
            (false, m) => m.map(|m| m.name().to_ascii_lowercase()),
        };
        let chap = (self.chap || self.no_chap).then_some(self.chap);
        UpOptions { osds: self.osds, mds: self.mds, host: self.host.clone(), stripe_unit: self.stripe_unit, stripe_count: self.stripe_count, security, chap }
    }
}

#[derive(Args)]
pub struct DownArgs {
    /// The directory given to `tessera up`.
    #[arg(long)]
    dir: PathBuf,
}

#[derive(Args)]
pub struct StatusArgs {
    /// A cluster file (default: TESSERA_CLUSTER, or DIR/cluster.toml with --dir).
    #[arg(long, env = "TESSERA_CLUSTER", value_parser = crate::fs::cluster_path)]
    cluster: Option<PathBuf>,
    /// The directory given to `tessera up` (also shows pids and logs).
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub fn up(args: UpArgs) -> Result<()> {
    // Absolute, so the cluster file and `down` work from any directory.
    let dir = absolute(&args.dir);
    // Checked before the directory is made: a refused `up` leaves nothing behind.
    let (options, recorded) = up_options::resolve(&dir, &args.given(), args.reconfigure)?;
    let spec = spec_of(&options)?;
    check_not_shrinking(&dir, &spec)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Held until this command returns: a second `up` on DIR meanwhile is refused, so two
    // clusters never start on the same stores.
    let _lock = match DirLock::try_acquire(&dir)? {
        Ok(lock) => lock,
        Err(holder) => bail!("another `tessera up` ({holder}) is starting a cluster in {}; once it is done, see `tessera status --dir {}`", dir.display(), dir.display()),
    };
    // Under the lock: an `up` still making the stores holds it.
    if let Some(was) = recorded.as_ref().filter(|_| !args.reconfigure) {
        crate::cluster::check_no_store_missing(&dir, was.osds.unwrap_or(spec.osds), was.mds.unwrap_or(spec.mds))?;
    }
    // Secured before and now: each existing OSD store needs the key it was made with.
    let was_secured = recorded.as_ref().is_some_and(|was| was.security.as_deref() != Some(up_options::NOSEC));
    if was_secured && spec.security.method.is_some() {
        crate::cluster::check_no_key_missing(&dir, spec.osds)?;
    }
    let running = running::find(&dir);
    if !running.is_empty() && running.unknown.is_empty() && running.broken_records.is_none() && !args.reconfigure {
        // Part of the cluster is up: start the rest where they were, as a service manager
        // restarts one failed unit.
        if let Ok(records) = crate::cluster::read_records(&dir) {
            if records.iter().all(|r| !r.addr.is_empty()) && records.len() > running.daemons.len() {
                let exe = std::env::current_exe().context("finding the tessera executable")?;
                let started = crate::cluster::restart_missing(&exe, &dir, &spec, &records, &running.daemons)?;
                for r in &started {
                    println!("restarted {:<6} pid {:<8} {:<22} {}", r.name(), r.pid, r.addr, r.data.display());
                }
                println!("cluster up: the other daemons were running; logs in {}", dir.join("logs").display());
                return Ok(());
            }
        }
    }
    if !running.is_empty() {
        let hint = match &running.broken_records {
            Some(e) => format!(" ({e}; `down` finds the daemons by their store locks)"),
            None => String::new(),
        };
        bail!("a cluster is already running in {}: {}; stop it with `tessera down --dir {}`{hint}", dir.display(), running.describe(), dir.display());
    }
    if let Some(e) = &running.broken_records {
        eprintln!("tessera up: note: {e}; no daemon holds a store of {}, so it is replaced", dir.display());
    }
    if recorded.is_some() {
        println!("restarting the cluster in {} as set up ({})", dir.display(), dir.join(up_options::OPTIONS_FILE).display());
    }
    if spec.security.method.is_none() {
        eprintln!("tessera up: WARNING: NOSEC (--insecure): every OSD runs NOSEC; anyone who reaches an OSD can read, write and remove every object");
    }
    let exe = std::env::current_exe().context("finding the tessera executable")?;
    // A first start records its set-up only once it is up (`up_options::STARTING_FILE`): one
    // that fails or is interrupted leaves the next `up` free to take its options afresh.
    match recorded {
        Some(_) => options.save(&dir)?,
        None => options.save_as(&dir, up_options::STARTING_FILE)?,
    }
    let cluster = LocalCluster::start_spec(&exe, &dir, &spec)?;
    if recorded.is_none() {
        let (starting, done) = (dir.join(up_options::STARTING_FILE), dir.join(up_options::OPTIONS_FILE));
        std::fs::rename(&starting, &done).with_context(|| format!("renaming {} to {}", starting.display(), done.display()))?;
    }
    let cluster_file = cluster.cluster_file();
    let records = cluster.detach()?;
    for r in &records {
        println!("{:<6} pid {:<8} {:<22} {}", r.name(), r.pid, r.addr, r.data.display());
    }
    println!("cluster up: {}, {}; logs in {}", count(spec.mds, "metadata server", "metadata servers"), count(spec.osds, "OSD", "OSDs"), dir.join("logs").display());
    match spec.security.method {
        Some(m) => println!("security: {} capabilities; master keys in {} (keep them private)", m.name(), dir.join(crate::cluster::KEYS_DIR).display()),
        None => println!("security: OFF (NOSEC)"),
    }
    if spec.security.chap {
        println!("CHAP: mutual, secrets in {}", dir.join(crate::cluster::KEYS_DIR).join("chap.secrets").display());
    }
    println!("users: proven (user key in {}; other local users through the agent at {})", dir.join(crate::cluster::KEYS_DIR).join("users.key").display(), dir.join(crate::cluster::AGENT_SOCKET).display());
    println!("export TESSERA_CLUSTER={}", absolute(&cluster_file).display());
    Ok(())
}

/// The cluster `options` (all filled in) describe.
fn spec_of(options: &UpOptions) -> Result<ClusterSpec> {
    if options.osds == Some(0) || options.mds == Some(0) {
        bail!("a cluster needs at least one OSD and one metadata server");
    }
    check_default_striping(options)?;
    if let Some(host) = &options.host {
        use std::net::ToSocketAddrs;
        (host.as_str(), 0).to_socket_addrs().map_err(|e| anyhow::anyhow!("--host {host}: not an address or a host name this host can resolve ({e})"))?;
    }
    let security = options.security.as_deref().unwrap_or("cmdrsp");
    let method = match security {
        up_options::NOSEC => None,
        name => Some(crate::cmd_mds::parse_capability_method(name).map_err(anyhow::Error::msg)?),
    };
    Ok(ClusterSpec {
        osds: options.osds.unwrap_or(0),
        mds: options.mds.unwrap_or(0),
        placement: Placement::Shared(options.host.clone().unwrap_or_default()),
        stripe_unit: options.stripe_unit.unwrap_or(0),
        stripe_count: options.stripe_count.unwrap_or(0),
        security: SecuritySpec { method, chap: options.chap.unwrap_or(false), ..SecuritySpec::default() },
    })
}

/// The metadata servers would accept a default no file can have, and every create would then
/// fail with a bare EINVAL.
fn check_default_striping(options: &UpOptions) -> Result<()> {
    let (unit, count, osds) = (options.stripe_unit.unwrap_or(0), options.stripe_count.unwrap_or(0), options.osds.unwrap_or(0));
    let max = tessera_layout::STRIPE_UNIT_MAX;
    if unit == 0 || unit > max {
        bail!("default stripe unit {unit} bytes is outside 1 byte to {} MiB (--stripe-unit)", max >> 20);
    }
    if count > osds {
        bail!("default stripe count {count} is more than the cluster's {} (--stripe-count; 0 stripes over all of them)", crate::units::count(osds, "OSD", "OSDs"));
    }
    Ok(())
}

pub fn down(args: DownArgs) -> Result<()> {
    let dir = absolute(&args.dir);
    let running = running::find(&dir);
    if running.is_empty() && running::stores(&dir).is_empty() && !dir.join(CLUSTER_FILE).exists() {
        bail!("{} holds no cluster (no stores, no {CLUSTER_FILE}); give the directory given to `tessera up`", dir.display());
    }
    if let Some(e) = &running.broken_records {
        eprintln!("tessera down: warning: {e}; stopping the daemons that hold the cluster's stores");
    }
    // Metadata servers first: no namespace change half-done against an OSD that is already
    // gone. Within each role all at once, so frozen daemons cost one grace period, not one each.
    let mut failed = Vec::new();
    for role in ["mds", "osd"] {
        let of_role: Vec<&DaemonRecord> = running.daemons.iter().filter(|r| r.role == role).collect();
        let outcomes: Vec<_> = thread::scope(|scope| {
            let stops: Vec<_> = of_role.iter().map(|r| scope.spawn(|| stop(r))).collect();
            stops.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("could not be stopped: the stopping thread panicked".into()))).collect()
        });
        for (r, outcome) in of_role.iter().zip(outcomes) {
            match outcome {
                Ok(()) => println!("stopped {} (pid {})", r.name(), r.pid),
                Err(why) => {
                    eprintln!("tessera down: {} (pid {}) {why}", r.name(), r.pid);
                    failed.push(r.name());
                }
            }
        }
    }
    for data in &running.unknown {
        eprintln!("tessera down: {} is locked by a process that has not written its pid; run `tessera down` again", data.display());
        failed.push(data.display().to_string());
    }
    let _ = std::fs::remove_file(dir.join(DAEMONS_FILE));
    if running.is_empty() {
        println!("the cluster in {} is already stopped", dir.display());
    }
    if !failed.is_empty() {
        let all = count((running.daemons.len() + running.unknown.len()) as u64, "daemon", "daemons");
        bail!("{} of {all} did not shut down cleanly: {}; see their logs in {}", failed.len(), failed.join(", "), dir.join("logs").display());
    }
    Ok(())
}

/// Stops one daemon: SIGTERM, then SIGKILL after [`STOP_GRACE`]. An error says why the stop
/// was not clean: the daemon had to be killed (an OSD then did not flush), or it reported an
/// error while shutting down (e.g. a flush that failed on a full disk), which is in its log.
fn stop(r: &DaemonRecord) -> std::result::Result<(), String> {
    let log_start = log_len(&r.log);
    signal(r.pid, libc::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while running::alive(r.pid) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    if running::alive(r.pid) {
        signal(r.pid, libc::SIGKILL);
        return Err(format!("did not exit within {STOP_GRACE:?} of SIGTERM and was killed: no clean shutdown, no flush"));
    }
    let shutdown = log_since(&r.log, log_start);
    match shutdown.lines().rev().find_map(|l| l.strip_prefix(ERROR_PREFIX)) {
        Some(error) => Err(format!("failed while shutting down: {error} (log {})", r.log.display())),
        None => Ok(()),
    }
}

pub fn status(args: StatusArgs) -> Result<()> {
    let file = match (crate::fs::given(&args.cluster), &args.dir) {
        (_, Some(dir)) => dir.join(CLUSTER_FILE),
        (Some(file), None) => file.clone(),
        (None, None) => bail!("which cluster? give --cluster FILE, --dir DIR, or set TESSERA_CLUSTER"),
    };
    let config = match (ClusterConfig::load(&file), &args.dir) {
        (Ok(config), _) => config,
        (Err(e), Some(dir)) => return status_from_dir(&absolute(dir), &file, anyhow::Error::from(e)),
        (Err(e), None) => return Err(e.into()),
    };
    let records = args.dir.as_deref().and_then(|d| read_records(d).ok()).unwrap_or_default();
    // Every daemon at once: a frozen one costs its probe timeout, and several should not
    // cost it one after another.
    let (mds_states, osd_states) = thread::scope(|scope| {
        let mds: Vec<_> = config.mds.iter().enumerate().map(|(i, m)| scope.spawn({
            let config = &config;
            move || probe_mds(config, i as u32, &m.addr)
        })).collect();
        let osds: Vec<_> = (0..config.osds.len()).map(|i| scope.spawn({
            let config = &config;
            move || probe_osd(config, i)
        })).collect();
        let joined = |handles: Vec<thread::ScopedJoinHandle<'_, Result<String>>>| -> Vec<Result<String>> {
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the probe panicked")))).collect()
        };
        (joined(mds), joined(osds))
    });
    let mut down = 0;
    println!("{:<6} {:<22} {:<6} detail", "daemon", "address", "state");
    for (i, (mds, state)) in config.mds.iter().zip(&mds_states).enumerate() {
        down += state.is_err() as usize;
        print_state(&format!("mds{i}"), &mds.addr, state, pid_of(&records, "mds", i));
    }
    for (i, (osd, state)) in config.osds.iter().zip(&osd_states).enumerate() {
        down += state.is_err() as usize;
        print_state(&format!("osd{i}"), &osd.addr, state, pid_of(&records, "osd", i));
    }
    if down > 0 {
        bail!("{} down", count(down as u64, "daemon", "daemons"));
    }
    Ok(())
}

/// `status --dir` when the cluster file cannot be read: which daemons run, from the records
/// and the stores' locks (as `down` finds them), and whether each recorded address still
/// accepts connections. The command still fails: clients cannot find the cluster.
fn status_from_dir(dir: &Path, file: &Path, why: anyhow::Error) -> Result<()> {
    if !file.exists() && running::stores(dir).is_empty() {
        bail!("{} holds no cluster (no stores, no {CLUSTER_FILE}); give the directory given to `tessera up`", dir.display());
    }
    eprintln!("tessera status: warning: {why}\nshowing what {} holds of the daemons instead", dir.display());
    let running = running::find(dir);
    println!("{:<6} {:<22} {:<6} detail", "daemon", "address", "state");
    for r in &running.daemons {
        let state = match r.addr.as_str() {
            "" => Ok("running; its address is not recorded".to_string()),
            addr => reachable(addr).map(|()| "running; accepts connections".to_string()),
        };
        print_state(&r.name(), &r.addr, &state, Some(r.pid));
    }
    for data in &running.unknown {
        println!("{:<6} {:<22} {:<6} its store {} is locked by a process still starting", "?", "", "?", data.display());
    }
    if running.is_empty() {
        println!("(no daemon of this cluster runs)");
    }
    bail!(
        "{} cannot be read, so clients cannot find the cluster; `tessera down --dir {d}` then `tessera up --dir {d}` writes it again",
        file.display(),
        d = dir.display()
    )
}

fn pid_of(records: &[DaemonRecord], role: &str, index: usize) -> Option<u32> {
    records.iter().find(|r| r.role == role && r.index as usize == index).map(|r| r.pid)
}

fn print_state(name: &str, addr: &str, state: &Result<String>, pid: Option<u32>) {
    let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
    match state {
        Ok(detail) => println!("{name:<6} {addr:<22} {:<6} {detail}{pid}", "up"),
        Err(e) => println!("{name:<6} {addr:<22} {:<6} {e:#}{pid}", "down"),
    }
}

/// Connects with a deadline first, so a dead host costs seconds, not the kernel's minutes.
fn reachable(addr: &str) -> Result<()> {
    let sockaddr = addr.to_socket_addrs()?.next().with_context(|| format!("{addr} resolves to nothing"))?;
    TcpStream::connect_timeout(&sockaddr, PROBE_TIMEOUT).with_context(|| format!("connecting to {addr}"))?;
    Ok(())
}

fn probe_mds(config: &ClusterConfig, index: u32, addr: &str) -> Result<String> {
    reachable(addr)?;
    // A stopped (SIGSTOP) server accepts connections but never answers: bounded, so status
    // can say so and go on to the next daemon.
    let mut conn = tessera_client::prover::open_mds(config, index, Some(PROBE_TIMEOUT))?;
    let counts = match conn.call(&Request::StatFs)? {
        Ok(tessera_mds_proto::Reply::StatFs(s)) => format!("{}, {}", crate::units::count(s.files, "file", "files"), crate::units::count(s.directories, "directory", "directories")),
        Ok(other) => bail!("unexpected answer {other:?}"),
        Err(e) => bail!("refused STATFS: {e}"),
    };
    // Its own view of the OSDs: on several hosts it may not reach one that this host does.
    let unreachable = match conn.call(&Request::OsdsDown)? {
        Ok(tessera_mds_proto::Reply::OsdsDown(down)) if !down.is_empty() => {
            let named: Vec<String> = down.iter().map(|i| format!("osd{i}")).collect();
            format!("; cannot reach {}", named.join(", "))
        }
        _ => String::new(),
    };
    Ok(format!("{counts}{unreachable}"))
}

fn probe_osd(config: &ClusterConfig, index: usize) -> Result<String> {
    let osd = &config.osds[index];
    reachable(&osd.addr)?;
    // Bounded likewise: an unanswered login or command fails after two probe timeouts.
    let login = tessera_initiator::iscsi::SessionConfig { liveness: PROBE_TIMEOUT, ..config.session_config(osd)? };
    let session = Session::login(osd.addr.as_str(), login)?;
    let client = OsdClient::new(session, osd.lun);
    // INQUIRY needs no capability; a LIST of the root without one, asking for 0 bytes, tells
    // a NOSEC OSD (answers) from one that checks capabilities (refuses, and knows such a probe
    // for one: no warning in its log).
    client.system_id()?;
    let probe = Command::List { partition_id: 0, list_id: 0, initial_oid: 0, allocation_len: 0, with_attrs: false };
    let detail = match client.execute(&OsdRequestBuilder::new(probe)) {
        Ok(_) if client.list_all(0)?.contains(&osd.partition_id) => "NOSEC, data partition ready",
        Ok(_) => "NOSEC, no data partition yet",
        Err(tessera_initiator::osd_client::OsdError::Sense { .. }) => "checks capabilities",
        Err(e) => return Err(e.into()),
    };
    Ok(format!("{}, {detail}", osd.target))
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that, like a daemon whose flush fails, logs an error when told to stop.
    fn stand_in(log: &Path, on_term: &str) -> (std::process::Child, DaemonRecord) {
        let script = format!("trap '{on_term}; exit 1' TERM; echo ready >&2; while :; do sleep 0.05; done");
        let stderr = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        let child = std::process::Command::new("sh").args(["-c", &script]).stderr(stderr).spawn().unwrap();
        while !std::fs::read_to_string(log).unwrap().contains("ready") {
            thread::sleep(Duration::from_millis(10));
        }
        let record = DaemonRecord { role: "osd".into(), index: 0, pid: child.id(), addr: String::new(), data: log.into(), log: log.into() };
        (child, record)
    }

    #[test]
    fn stop_reports_an_error_the_daemon_logged_while_shutting_down() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("osd0.log");
        // An error from an earlier run is not this shutdown's.
        std::fs::write(&log, format!("{ERROR_PREFIX}an old failure\n")).unwrap();
        let (mut child, record) = stand_in(&log, &format!("echo \"{ERROR_PREFIX}flushing the object store on shutdown: disk full\" >&2"));
        let err = stop(&record).unwrap_err();
        assert!(err.contains("flushing the object store on shutdown: disk full"), "{err}");
        child.wait().unwrap();

        let (mut child, record) = stand_in(&log, "echo shutting down >&2");
        assert_eq!(stop(&record), Ok(()));
        child.wait().unwrap();
    }
}
