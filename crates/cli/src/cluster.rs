//! A cluster of real daemons on this host: N `tessera osd` processes and one or more
//! `tessera mds` processes, each with its own directory under one cluster directory.
//!
//! ```text
//! DIR/cluster.toml     what clients read (--cluster / TESSERA_CLUSTER)
//! DIR/daemons.json     pid, address and directory of each daemon (for `down` and `status`)
//! DIR/up.json          the options `tessera up` set the cluster up with (crate::up_options)
//! DIR/osd<i>/          object store of OSD i
//! DIR/mds<i>/          namespace database of metadata server i
//! DIR/keys/osd<i>.key  OSD i's master key (mode 0600): given to OSD i and the metadata servers
//! DIR/keys/users.key   the user key (mode 0600): proofs of users are made with it
//! DIR/agent.sock       the user agent, served by metadata server 0: proves local users
//! DIR/logs/<name>.log  each daemon's log
//! DIR/tessera.lock     locked by `tessera up` while it starts the daemons
//! DIR/*/tessera.lock   locked by the daemon running on that store (crate::lock)
//! ```
//!
//! Capability security is on by default (CMDRSP): `start_spec` provisions a random master key
//! per OSD on first start (docs/security.md, provisioning) and reuses it on restarts.
//!
//! [`LocalCluster`] owns its daemons and stops them when dropped (benchmarks, tests, the demo);
//! `tessera up` detaches them instead and `tessera down` stops them by pid.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tessera_client::{ClusterConfig, MdsEntry, OsdEntry};
use tessera_security::SecurityMethod;

use crate::daemon::Daemon;
use crate::netns::Host;

pub const CLUSTER_FILE: &str = "cluster.toml";
pub const DAEMONS_FILE: &str = "daemons.json";
/// The partition every OSD keeps file data in (created by the metadata server on first start).
pub const DATA_PARTITION: u64 = tessera_client::config::DEFAULT_PARTITION_ID;
/// A metadata server's port on a host of its own (nothing else listens there).
pub const MDS_PORT: u16 = 7000;

/// Where the daemons run.
#[derive(Clone, Debug)]
pub enum Placement {
    /// Every daemon binds this address of this machine's network stack; ports are chosen by
    /// the kernel.
    Shared(String),
    /// Each daemon on a host of its own (a network namespace, see [`crate::netns`]): metadata
    /// server i on `mds[i]` at port [`MDS_PORT`], OSD i on `osds[i]`.
    Hosts { mds: Vec<Host>, osds: Vec<Host> },
}

impl Placement {
    /// The command that runs `exe` where daemon `role` `index` lives, and the host address it
    /// binds.
    fn command(&self, exe: &Path, role: &str, index: u32) -> Result<(Command, String)> {
        match self {
            Placement::Shared(host) => Ok((Command::new(exe), host.clone())),
            Placement::Hosts { mds, osds } => {
                let hosts = if role == "mds" { mds } else { osds };
                let host = hosts.get(index as usize).with_context(|| format!("no host given for {role}{index}"))?;
                Ok((host.command(exe), host.addr.to_string()))
            }
        }
    }
}

/// What to start.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub osds: u32,
    pub mds: u32,
    /// Where each daemon runs and which address it binds.
    pub placement: Placement,
    /// Default striping of new files (`tessera mds --stripe-unit/--stripe-count`).
    pub stripe_unit: u64,
    pub stripe_count: u32,
    pub security: SecuritySpec,
}

/// Capability security of a cluster.
#[derive(Clone, Debug)]
pub struct SecuritySpec {
    /// The method OSDs require and capabilities name; `None` runs everything NOSEC.
    pub method: Option<SecurityMethod>,
    /// `tessera mds --capability-lifetime`, `--key-period` (the server's defaults when `None`).
    pub capability_lifetime: Option<Duration>,
    pub key_period: Option<Duration>,
    /// Every iSCSI login (metadata servers, clients) must pass mutual CHAP with a secret
    /// `start_spec` writes to `DIR/keys/chap.secrets` and names in the cluster file.
    pub chap: bool,
}

impl Default for SecuritySpec {
    fn default() -> Self {
        SecuritySpec { method: Some(SecurityMethod::CmdRsp), capability_lifetime: None, key_period: None, chap: false }
    }
}

impl SecuritySpec {
    pub fn nosec() -> Self {
        SecuritySpec { method: None, ..Self::default() }
    }
}

impl ClusterSpec {
    pub fn new(osds: u32) -> ClusterSpec {
        ClusterSpec {
            osds,
            mds: 1,
            placement: Placement::Shared("127.0.0.1".into()),
            stripe_unit: 1 << 20,
            stripe_count: 0,
            security: SecuritySpec::default(),
        }
    }
}

/// One started daemon, as `daemons.json` records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DaemonRecord {
    /// `mds` or `osd`.
    pub role: String,
    pub index: u32,
    pub pid: u32,
    pub addr: String,
    pub data: PathBuf,
    pub log: PathBuf,
}

impl DaemonRecord {
    pub fn name(&self) -> String {
        format!("{}{}", self.role, self.index)
    }
}

pub struct LocalCluster {
    dir: PathBuf,
    exe: PathBuf,
    spec: ClusterSpec,
    config: ClusterConfig,
    /// Metadata servers first: they are stopped before the OSDs they talk to.
    daemons: Vec<(DaemonRecord, Daemon)>,
    /// OSDs stopped by [`LocalCluster::stop_osd`], to start again.
    stopped_osds: Vec<DaemonRecord>,
    stopped_mds: Vec<DaemonRecord>,
}

impl LocalCluster {
    /// Starts `osds` OSDs and one metadata server under `dir` with this same executable.
    pub fn start(dir: &Path, osds: u32) -> Result<LocalCluster> {
        let exe = std::env::current_exe().context("finding the tessera executable")?;
        Self::start_spec(&exe, dir, &ClusterSpec::new(osds))
    }

    /// Starts the cluster `spec` describes with the `tessera` executable `exe`, reusing the
    /// stores already under `dir` (a restart keeps every flushed file).
    pub fn start_spec(exe: &Path, dir: &Path, spec: &ClusterSpec) -> Result<LocalCluster> {
        if spec.osds == 0 || spec.mds == 0 {
            bail!("a cluster needs at least one OSD and one metadata server");
        }
        if let Placement::Hosts { mds, osds } = &spec.placement {
            if mds.len() < spec.mds as usize || osds.len() < spec.osds as usize {
                let (servers, targets) = (crate::units::count(spec.mds, "metadata server", "metadata servers"), crate::units::count(spec.osds, "OSD", "OSDs"));
                bail!("{servers} and {targets} need as many hosts; {} and {} given", mds.len(), osds.len());
            }
        }
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        check_not_shrinking(dir, spec)?;
        let chap = if spec.security.chap { Some(chap_secret_file(dir)?) } else { None };
        let mut osd_daemons = Vec::new();
        let mut osd_entries = Vec::new();
        // On a shared host every daemon is handed a socket bound here (listeners.rs); on hosts
        // of their own nothing else listens, and each binds its address itself.
        let (mut osd_listens, mds_listens): (Vec<Listen>, Vec<Listen>) = match &spec.placement {
            Placement::Shared(host) => {
                // The ports of the cluster's last start, where still free: clients that knew
                // them find the cluster again.
                let earlier = ClusterConfig::load(&dir.join(CLUSTER_FILE)).ok();
                let port = |addr: &str| addr.parse::<std::net::SocketAddr>().ok().map(|a| a.port());
                let osd_ports: Vec<Option<u16>> = earlier.iter().flat_map(|c| c.osds.iter().map(|o| port(&o.addr))).collect();
                let mds_ports: Vec<Option<u16>> = earlier.iter().flat_map(|c| c.mds.iter().map(|m| port(&m.addr))).collect();
                (
                    crate::listeners::reserve(host, spec.osds, &osd_ports)?.into_iter().map(Listen::Handed).collect(),
                    crate::listeners::reserve(host, spec.mds, &mds_ports)?.into_iter().map(Listen::Handed).collect(),
                )
            }
            Placement::Hosts { mds, osds } => (
                osds.iter().take(spec.osds as usize).map(|h| Listen::Bind(format!("{}:0", h.addr))).collect(),
                mds.iter().take(spec.mds as usize).map(|h| Listen::Bind(format!("{}:{MDS_PORT}", h.addr))).collect(),
            ),
        };
        for (i, listen) in (0..spec.osds).zip(osd_listens.drain(..)) {
            let (host_cmd, _) = spec.placement.command(exe, "osd", i)?;
            let (record, daemon, target) = spawn_osd(host_cmd, dir, spec, i, listen, chap.as_deref())?;
            osd_entries.push(OsdEntry { addr: record.addr.clone(), target, partition_id: DATA_PARTITION, lun: 0 });
            osd_daemons.push((record, daemon));
        }
        let mds_addrs = mds_listens.iter().map(Listen::addr).collect::<Result<Vec<_>>>()?;
        let mut config = ClusterConfig::new(mds_addrs.iter().map(|addr| MdsEntry { addr: addr.clone() }).collect(), osd_entries);
        config.chap_secret_file = chap;
        config.user_key_file = Some(user_key_file(dir)?);
        config.user_agent_socket = Some(dir.join(AGENT_SOCKET));
        let cluster_file = dir.join(CLUSTER_FILE);
        config.save(&cluster_file)?;
        let mut daemons = Vec::new();
        for (i, listen) in mds_listens.into_iter().enumerate() {
            daemons.push(spawn_mds(exe, dir, spec, i as u32, listen)?);
        }
        daemons.extend(osd_daemons);
        Ok(LocalCluster { dir: dir.to_path_buf(), exe: exe.to_path_buf(), spec: spec.clone(), config, daemons, stopped_osds: Vec::new(), stopped_mds: Vec::new() })
    }

    /// Stops metadata server `index` gracefully, leaving the other daemons running;
    /// [`LocalCluster::start_mds`] brings it back on the same store and address.
    pub fn stop_mds(&mut self, index: u32) -> Result<()> {
        let at = self.mds_position(index)?;
        let (record, daemon) = self.daemons.remove(at);
        daemon.stop()?;
        self.stopped_mds.push(record);
        Ok(())
    }

    /// Starts a stopped metadata server again on its store and address; returns once it is ready.
    pub fn start_mds(&mut self, index: u32) -> Result<()> {
        let at = self.stopped_mds.iter().position(|r| r.index == index).with_context(|| format!("metadata server {index} is not stopped"))?;
        let record = self.stopped_mds.remove(at);
        let started = spawn_mds(&self.exe, &self.dir, &self.spec, index, Listen::Bind(record.addr.clone()))?;
        self.daemons.push(started);
        Ok(())
    }

    fn mds_position(&self, index: u32) -> Result<usize> {
        self.daemons
            .iter()
            .position(|(r, _)| r.role == "mds" && r.index == index)
            .with_context(|| format!("no metadata server {index} in this cluster"))
    }

    /// Kills metadata server `index` without letting it clean up (SIGKILL: a crash), then
    /// starts it again on the same store and address; returns once it is ready. Clients with
    /// requests in flight see those fail, and reconnect on their next request.
    pub fn crash_and_restart_mds(&mut self, index: u32) -> Result<()> {
        let at = self.mds_position(index)?;
        let (record, daemon) = self.daemons.remove(at);
        daemon.kill()?;
        let restarted = spawn_mds(&self.exe, &self.dir, &self.spec, index, Listen::Bind(record.addr.clone()))?;
        self.daemons.insert(at, restarted);
        Ok(())
    }

    /// Stops OSD `index` gracefully (SIGTERM: it flushes), leaving the other daemons running;
    /// [`LocalCluster::start_osd`] brings it back on the same store and address.
    pub fn stop_osd(&mut self, index: u32) -> Result<()> {
        let at = self.osd_position(index)?;
        let (record, daemon) = self.daemons.remove(at);
        daemon.stop()?;
        self.stopped_osds.push(record);
        Ok(())
    }

    /// Starts a stopped OSD again on its store and address; returns once it is ready.
    pub fn start_osd(&mut self, index: u32) -> Result<()> {
        let at = self.stopped_osds.iter().position(|r| r.index == index).with_context(|| format!("OSD {index} is not stopped"))?;
        let record = self.stopped_osds.remove(at);
        let (cmd, _) = self.spec.placement.command(&self.exe, "osd", index)?;
        let chap = self.config.chap_secret_file.clone();
        let (record, daemon, _) = spawn_osd(cmd, &self.dir, &self.spec, index, Listen::Bind(record.addr.clone()), chap.as_deref())?;
        self.daemons.push((record, daemon));
        Ok(())
    }

    fn osd_position(&self, index: u32) -> Result<usize> {
        self.daemons
            .iter()
            .position(|(r, _)| r.role == "osd" && r.index == index)
            .with_context(|| format!("no running OSD {index} in this cluster"))
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn cluster_file(&self) -> PathBuf {
        self.dir.join(CLUSTER_FILE)
    }

    pub fn records(&self) -> Vec<DaemonRecord> {
        self.daemons.iter().map(|(r, _)| r.clone()).collect()
    }

    /// Leaves every daemon running and records them in `DIR/daemons.json`.
    pub fn detach(self) -> Result<Vec<DaemonRecord>> {
        let records = self.records();
        write_records(&self.dir, &records)?;
        for (_, daemon) in self.daemons {
            daemon.detach();
        }
        Ok(records)
    }

    /// Stops metadata servers, then OSDs, each gracefully (SIGTERM: the OSD flushes).
    pub fn stop(self) -> Result<()> {
        for (_, daemon) in self.daemons {
            daemon.stop()?;
        }
        Ok(())
    }
}

/// Starts again, on their recorded addresses, the daemons of the cluster under `dir` that
/// `records` lists and `running` does not (a crashed or killed daemon), leaving the running
/// ones alone; records the new pids and returns the records of those started. The clients'
/// cluster file stays valid: every daemon keeps its address.
pub fn restart_missing(exe: &Path, dir: &Path, spec: &ClusterSpec, records: &[DaemonRecord], running: &[DaemonRecord]) -> Result<Vec<DaemonRecord>> {
    let config = ClusterConfig::load(&dir.join(CLUSTER_FILE))?;
    let chap = config.chap_secret_file.clone();
    let mut all = Vec::with_capacity(records.len());
    let mut started = Vec::new();
    // OSDs first: a metadata server starting reaches its OSDs to fill its pools.
    let mut order: Vec<&DaemonRecord> = records.iter().collect();
    order.sort_by_key(|r| (r.role == "mds", r.index));
    for r in order {
        if let Some(live) = running.iter().find(|l| l.role == r.role && l.index == r.index) {
            all.push(DaemonRecord { addr: r.addr.clone(), ..live.clone() });
            continue;
        }
        let (record, daemon) = match r.role.as_str() {
            "osd" => {
                let (host_cmd, _) = spec.placement.command(exe, "osd", r.index)?;
                let (record, daemon, _) = spawn_osd(host_cmd, dir, spec, r.index, Listen::Bind(r.addr.clone()), chap.as_deref())?;
                (record, daemon)
            }
            _ => spawn_mds(exe, dir, spec, r.index, Listen::Bind(r.addr.clone()))?,
        };
        daemon.detach();
        started.push(record.clone());
        all.push(record);
    }
    all.sort_by_key(|r| (r.role != "mds", r.index));
    write_records(dir, &all)?;
    Ok(started)
}

/// Where a daemon serves.
enum Listen {
    /// On this socket, bound here and handed to the daemon (`--listen-fd`).
    Handed(TcpListener),
    /// On this address, which the daemon binds itself (port 0: the kernel picks).
    Bind(String),
}

impl Listen {
    fn addr(&self) -> Result<String> {
        match self {
            Listen::Handed(listener) => Ok(listener.local_addr()?.to_string()),
            Listen::Bind(addr) => Ok(addr.clone()),
        }
    }

    /// The daemon's arguments for it (`bind`: the flag that names an address to bind, if the
    /// daemon takes one); a handed socket is passed on to `cmd`'s child.
    fn args(&self, cmd: &mut std::process::Command, bind: Option<&str>) -> Vec<String> {
        match (self, bind) {
            (Listen::Handed(listener), _) => vec!["--listen-fd".into(), crate::listeners::hand_to(cmd, listener).to_string()],
            (Listen::Bind(addr), Some(flag)) => vec![flag.into(), addr.clone()],
            (Listen::Bind(_), None) => Vec::new(),
        }
    }
}

/// Starts OSD `index` of the cluster under `dir` serving on `listen` through `cmd` (this host,
/// or another); returns its record, the daemon and its target name.
fn spawn_osd(mut cmd: std::process::Command, dir: &Path, spec: &ClusterSpec, index: u32, listen: Listen, chap: Option<&Path>) -> Result<(DaemonRecord, Daemon, String)> {
    let data = dir.join(format!("osd{index}"));
    let log = dir.join("logs").join(format!("osd{index}.log"));
    let mut args: Vec<String> = ["osd", "--data", path_str(&data)?].map(String::from).to_vec();
    args.extend(listen.args(&mut cmd, Some("--listen")));
    if let Some(method) = spec.security.method {
        let key = master_key_file(dir, index)?;
        args.extend(["--security".into(), method.name().to_ascii_lowercase(), "--master-key-file".into(), path_str(&key)?.into()]);
    }
    if let Some(chap) = chap {
        args.extend(["--chap-secret-file".into(), path_str(chap)?.into()]);
    }
    cmd.args(&args);
    let daemon = Daemon::spawn_command(cmd, &args.join(" "), Some(&log))?;
    let addr = daemon.field("addr")?.to_string();
    let target = daemon.field("target")?.to_string();
    let record = DaemonRecord { role: "osd".into(), index, pid: daemon.pid(), addr, data, log };
    Ok((record, daemon, target))
}

/// Starts metadata server `index` of the cluster under `dir` serving on `listen`, its address
/// in the cluster file (written before).
fn spawn_mds(exe: &Path, dir: &Path, spec: &ClusterSpec, index: u32, listen: Listen) -> Result<(DaemonRecord, Daemon)> {
    let data = dir.join(format!("mds{index}"));
    let log = dir.join("logs").join(format!("mds{index}.log"));
    let cluster_file = dir.join(CLUSTER_FILE);
    let mut args = [
        "mds",
        "--data",
        path_str(&data)?,
        "--cluster",
        path_str(&cluster_file)?,
        "--index",
        &index.to_string(),
        "--stripe-unit",
        &spec.stripe_unit.to_string(),
        "--stripe-count",
        &spec.stripe_count.to_string(),
    ]
    .map(String::from)
    .to_vec();
    if let Some(method) = spec.security.method {
        args.extend(["--master-keys".into(), path_str(&dir.join(KEYS_DIR))?.into(), "--security".into(), method.name().to_ascii_lowercase()]);
        if let Some(t) = spec.security.capability_lifetime {
            args.extend(["--capability-lifetime".into(), format!("{}ms", t.as_millis())]);
        }
        if let Some(t) = spec.security.key_period {
            args.extend(["--key-period".into(), format!("{}ms", t.as_millis())]);
        }
    }
    if index == 0 {
        args.extend(["--agent-socket".into(), path_str(&dir.join(AGENT_SOCKET))?.into()]);
    }
    let (mut cmd, _) = spec.placement.command(exe, "mds", index)?;
    args.extend(listen.args(&mut cmd, None));
    cmd.args(&args);
    let daemon = Daemon::spawn_command(cmd, &args.join(" "), Some(&log))?;
    let record = DaemonRecord { role: "mds".into(), index, pid: daemon.pid(), addr: listen.addr()?, data, log };
    Ok((record, daemon))
}

/// Where the master keys live under a cluster directory.
pub const KEYS_DIR: &str = "keys";

/// OSD `index`'s master key file, made with a fresh random key (mode 0600, in a 0700
/// directory) unless it exists: the first-start provisioning step of docs/security.md.
pub fn master_key_file(dir: &Path, index: u32) -> Result<PathBuf> {
    key_file(&keys_dir(dir)?.join(format!("osd{index}.key")), "a master key")
}

/// The user agent's socket under a cluster directory, served by metadata server 0.
pub const AGENT_SOCKET: &str = "agent.sock";

/// The cluster's user key file, made with a fresh random key (mode 0600, beside the master
/// keys) unless it exists: with it the metadata servers ask every client to prove its user
/// (docs/security.md, "Users").
pub fn user_key_file(dir: &Path) -> Result<PathBuf> {
    key_file(&keys_dir(dir)?.join("users.key"), "the user key")
}

/// `path`, made holding 32 random bytes as 64 hex digits (mode 0600) unless it exists.
fn key_file(path: &Path, what: &str) -> Result<PathBuf> {
    if !path.exists() {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("no randomness for {what}: {e}"))?;
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        write_private(path, &format!("{hex}\n"))?;
    }
    Ok(path.to_path_buf())
}

/// The cluster's CHAP secret file, made with fresh random secrets for both directions (mutual
/// CHAP) unless it exists; mode 0600 beside the master keys.
pub fn chap_secret_file(dir: &Path) -> Result<PathBuf> {
    let path = keys_dir(dir)?.join("chap.secrets");
    if !path.exists() {
        let secret = || -> Result<String> {
            let mut bytes = [0u8; 16];
            getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a CHAP secret: {e}"))?;
            Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
        };
        let text = format!("# written by tessera up: initiator, then target (mutual CHAP)\ntessera-initiator {}\ntessera-osd {}\n", secret()?, secret()?);
        write_private(&path, &text)?;
    }
    Ok(path)
}

/// `DIR/keys`, created private.
fn keys_dir(dir: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let keys = dir.join(KEYS_DIR);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&keys).with_context(|| format!("creating {}", keys.display()))?;
    Ok(keys)
}

/// Creates `path` with mode 0600 holding `text`, durably; fails if it exists. The mode is set
/// at creation, so there is no moment when others could read it.
pub fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).with_context(|| format!("writing {}", path.display()))
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str().with_context(|| format!("{} is not valid UTF-8", path.display()))
}

/// Layouts name OSDs by index, and inodes their metadata server: a restart with fewer of
/// either would strand files.
pub fn check_not_shrinking(dir: &Path, spec: &ClusterSpec) -> Result<()> {
    for (role, flag, wanted) in [("osd", "--osds", spec.osds), ("mds", "--mds", spec.mds)] {
        let existing = (0..).take_while(|i| dir.join(format!("{role}{i}")).is_dir()).count() as u32;
        if existing > wanted {
            let what = if role == "osd" { "files striped over the others" } else { "the part of the namespace the others hold" };
            bail!("{} already holds {existing} {role} stores; starting only {wanted} would strand {what} (use {flag} {existing} or a new --dir)", dir.display());
        }
    }
    Ok(())
}

/// Refuses to restart a cluster one of whose stores is gone (deleted or moved): the daemon
/// would start empty in its place, so an OSD's files could no longer be read, or a metadata
/// server's part of the namespace would start empty, and nothing would say why. `stores` are
/// the counts the cluster last ran with; `--reconfigure` says an empty store is meant.
pub fn check_no_store_missing(dir: &Path, osds: u32, mds: u32) -> Result<()> {
    for (role, count) in [("mds", mds), ("osd", osds)] {
        for index in 0..count {
            let store = dir.join(format!("{role}{index}"));
            if store.is_dir() {
                continue;
            }
            let lost = match role {
                "osd" => format!("the files striped over OSD {index} could not be read, and an empty OSD would take its place"),
                _ => format!("metadata server {index}'s part of the namespace would start empty (its files' objects stay on the OSDs, as orphans `tessera repair` reports)"),
            };
            bail!("{} is missing (deleted or moved?): {lost}; put it back, or add --reconfigure to start an empty one", store.display());
        }
    }
    Ok(())
}

/// Refuses to restart a secured cluster one of whose OSD master key files is gone while the
/// OSD's store remains: `up` would write a fresh key, which the OSD (holding the key it was
/// first given, in its store) refuses, and the metadata server could then not start. A new key
/// cannot open that OSD, so `--reconfigure` does not waive this; only the key file can.
pub fn check_no_key_missing(dir: &Path, osds: u32) -> Result<()> {
    for index in 0..osds {
        let key = dir.join(KEYS_DIR).join(format!("osd{index}.key"));
        if dir.join(format!("osd{index}")).is_dir() && !key.exists() {
            bail!(
                "{} is missing (deleted or moved?), but OSD {index}'s store holds the master key it was made with and accepts no other; put the file back from a copy (mode 0600). A new key cannot open this OSD's objects",
                key.display()
            );
        }
    }
    Ok(())
}

/// Writes `DIR/daemons.json` whole or not at all (a new file renamed over the old one): a
/// full disk or a crash must not leave a half-written list of running daemons.
pub fn write_records(dir: &Path, records: &[DaemonRecord]) -> Result<()> {
    let path = dir.join(DAEMONS_FILE);
    let new = dir.join(format!("{DAEMONS_FILE}.new"));
    let text = serde_json::to_string_pretty(records)?;
    std::fs::write(&new, text).and_then(|()| std::fs::rename(&new, &path)).with_context(|| format!("writing {}", path.display()))
}

pub fn read_records(dir: &Path) -> Result<Vec<DaemonRecord>> {
    let path = dir.join(DAEMONS_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {} (is a cluster running there?)", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}
