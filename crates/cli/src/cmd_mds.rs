//! `tessera mds`: one metadata server. It reads the cluster file for the OSDs and its peers,
//! opens (or creates) its SQLite namespace under `--data`, makes sure every OSD has the file
//! data partition, listens, prints the ready line, and runs until SIGTERM/SIGINT.
//!
//! With `--master-keys DIR` it is the cluster's security manager (docs/security.md): it
//! establishes each OSD's root, partition and working keys, rotates the working keys, and
//! hands a capability per data object with every layout. Without it the OSDs must run NOSEC.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tessera_client::{ClusterConfig, OsdEntry, StripeHint};
use tessera_initiator::iscsi::ReconnectingSession;
use tessera_initiator::osd_client::{OsdClient, OsdError};
use tessera_mds::cpus::CpuSet;
use tessera_mds::keep_awake::FlushWait;
use tessera_mds::loop_cpus::LoopCpus;
use tessera_mds::security::KeyInstaller;
use tessera_mds::tcp::LoopConfig;
use tessera_mds::{Mds, MdsConfig, OsdObjects, OsdSecret, PrecreateConfig, SecurityConfig, SecurityManager};
use tessera_mds_proto::{ClusterMap, OsdInfo};
use tessera_scsi::ScsiTransport;
use tessera_security::clock::now_ms;
use tessera_security::{Key, SecurityMethod};

use crate::daemon::ready_line;
use crate::lock::DirLock;
use crate::units::{parse_duration, parse_size};

type OsdConn = OsdClient<ReconnectingSession>;

/// How long the MDS waits at start for an OSD that is not answering yet.
const OSD_WAIT: Duration = Duration::from_secs(30);

#[derive(Args)]
pub struct MdsArgs {
    /// Directory holding this server's namespace database (created if missing).
    #[arg(long)]
    data: PathBuf,
    /// The cluster file naming every metadata server and OSD (what `tessera up` writes).
    #[arg(long, env = "TESSERA_CLUSTER")]
    cluster: PathBuf,
    /// This server's position among the cluster file's [[mds]] tables.
    #[arg(long, default_value_t = 0)]
    index: u32,
    /// Address to listen on; default: this server's `addr` in the cluster file.
    #[arg(long)]
    listen: Option<String>,
    /// Serve on this inherited descriptor, a TCP socket already listening on this server's
    /// address, instead of binding it (how `tessera up` starts its metadata servers: it binds
    /// each port itself, so nothing can take the port before the server serves on it).
    #[arg(long, conflicts_with = "listen", value_name = "FD")]
    listen_fd: Option<i32>,
    /// Stripe unit of new files in directories without their own default (e.g. 64K, 1M).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    stripe_unit: u64,
    /// OSDs a new file stripes over by default; 0 means every OSD.
    #[arg(long, default_value_t = 0)]
    stripe_count: u32,
    /// Objects precreated on an OSD by one CREATE (files take their objects from these pools).
    #[arg(long, default_value_t = PrecreateConfig::default().batch, value_parser = clap::value_parser!(u16).range(1..))]
    precreate_batch: u16,
    /// A pool below this many ready objects is topped up in the background.
    #[arg(long, default_value_t = PrecreateConfig::default().low_water)]
    precreate_low_water: u32,
    /// Directory of the OSDs' master keys, `osd<N>.key` for OSD N (64 hex digits, mode 0600;
    /// `tessera up` writes them). Makes this server the security manager; without it layouts
    /// carry no capabilities and the OSDs must run NOSEC.
    #[arg(long)]
    master_keys: Option<PathBuf>,
    /// Security method of the capabilities handed out: capkey, cmdrsp or alldata.
    #[arg(long, default_value = "cmdrsp", value_parser = parse_capability_method)]
    security: SecurityMethod,
    /// How long a client's capability lives (clients refresh it before then), e.g. 10m.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    capability_lifetime: Duration,
    /// How often working keys rotate, e.g. 1h (at least the capability lifetime / 14).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    key_period: Duration,
    /// The longest the event loop keeps asking for requests without sleeping, after serving
    /// some (0 sleeps at once). It polls less, down to not at all, while requests come farther
    /// apart than this, and the whole time again once they come sooner. On virtual machines
    /// waking a sleeping thread costs more than this polling; on a host whose cores are all
    /// busy, 0 leaves them to the others.
    #[arg(long, default_value = "50us", value_parser = parse_duration, env = "TESSERA_MDS_BUSY_POLL")]
    busy_poll: Duration,
    /// CPUs the event loop runs on: `auto` (those that take the completion interrupts of the
    /// disk under --data, which wake the loop after every group's flush; anywhere when that
    /// is RAM-backed or every CPU takes them), `any` (wherever the scheduler puts it), or a
    /// list such as `1` or `0-3,8`.
    #[arg(long, default_value = "auto", env = "TESSERA_MDS_LOOP_CPUS")]
    loop_cpus: String,
    /// How the event loop's CPU waits for a flush of its disk, once the loop is placed (see
    /// --loop-cpus): `spin` (while a flush that two or more replies wait for is in flight, a
    /// lowest-priority thread on that CPU spins, for at most 1 ms, so the disk's completion
    /// finds the CPU awake; it yields to anything else at once and parks otherwise) or `sleep`
    /// (the CPU may halt; on a virtual machine each completion then waits for the host to
    /// bring it back).
    #[arg(long, default_value = "spin", value_parser = FlushWait::parse, env = "TESSERA_MDS_FLUSH_WAIT")]
    flush_wait: FlushWait,
    /// Also serve as this host's user agent on this unix socket: proves to the metadata
    /// servers the user of any local process that asks (needs `user_key_file` in the cluster
    /// file; `tessera up` gives it to metadata server 0). See `tessera agent --help`.
    #[arg(long)]
    agent_socket: Option<PathBuf>,
}

/// A method capabilities can name: NOSEC is refused (running without security is a flag of its
/// own: `tessera up --insecure`, or no `--master-keys`).
pub fn parse_capability_method(s: &str) -> Result<SecurityMethod, String> {
    match SecurityMethod::from_name(s) {
        Some(SecurityMethod::NoSec) => Err("NOSEC capabilities protect nothing: run without security explicitly instead (tessera up --insecure; tessera mds without --master-keys)".into()),
        Some(m) => Ok(m),
        None => Err(format!("unknown security method {s:?}: use capkey, cmdrsp or alldata")),
    }
}

pub fn run(args: MdsArgs) -> Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    crate::parent_tie::watch_if_tied("mds");
    let cluster = ClusterConfig::load(&args.cluster)?;
    let Some(me) = cluster.mds.get(args.index as usize) else {
        bail!("--index {} but {} names only {} metadata server(s)", args.index, args.cluster.display(), cluster.mds.len());
    };
    // Held until this process exits, and taken before the OSDs are touched: a second server on
    // one namespace database fails its commits and would also re-key the OSDs.
    let _lock = DirLock::create_and_acquire(&args.data, "the metadata store")?;
    let loop_cpus = LoopCpus::parse(&args.loop_cpus, &args.data).map_err(|e| anyhow::anyhow!("--loop-cpus {}: {e}", args.loop_cpus))?;
    let user_key = load_user_key(&cluster)?;
    let agent = match (&args.agent_socket, &user_key) {
        (Some(path), Some(key)) => Some((tessera_mds::user_agent::bind(path).with_context(|| format!("user agent socket {}", path.display()))?, key.clone())),
        (Some(_), None) => bail!("--agent-socket needs the cluster file to name a user_key_file"),
        (None, _) => None,
    };
    let listener = match args.listen_fd {
        Some(fd) => crate::listeners::inherited(fd)?,
        None => {
            let listen = args.listen.clone().unwrap_or_else(|| me.addr.clone());
            TcpListener::bind(&listen).with_context(|| format!("listening on {listen}"))?
        }
    };
    let addr = listener.local_addr()?;

    let mut clients = cluster.osds.iter().map(|osd| connect_osd(&cluster, osd)).collect::<Result<Vec<_>>>()?;
    let config = SecurityConfig { method: args.security, capability_lifetime: args.capability_lifetime, key_period: args.key_period };
    let manager = args.master_keys.as_deref().map(|dir| security_manager(config, dir, &cluster, &mut clients)).transpose()?;
    let probes = cluster
        .osds
        .iter()
        .enumerate()
        .map(|(i, osd)| probe_client(&cluster, osd, manager.as_ref().map(|m| m.source(i as u32))))
        .collect::<Result<Vec<_>>>()?;
    let clients: Vec<Arc<OsdConn>> = clients.into_iter().map(Arc::new).collect();
    let security = match manager {
        Some(manager) => Some(start_security(&args, manager, &cluster, &clients)?),
        None => {
            eprintln!("tessera mds: WARNING: no --master-keys: layouts carry no capabilities, so the OSDs must run NOSEC (no protection)");
            for (client, osd) in clients.iter().zip(&cluster.osds) {
                ensure_partition(client, osd.partition_id).with_context(|| format!("OSD {}: preparing partition {:#x}", osd.addr, osd.partition_id))?;
            }
            None
        }
    };
    let nodes: Vec<(Arc<OsdConn>, u64)> = clients.iter().zip(&cluster.osds).map(|(c, o)| (c.clone(), o.partition_id)).collect();
    let config = MdsConfig {
        server_index: args.index,
        cluster: ClusterMap {
            servers: cluster.mds.iter().map(|m| m.addr.clone()).collect(),
            osds: cluster.osds.iter().map(|o| OsdInfo { addr: o.addr.clone(), partition_id: o.partition_id }).collect(),
        },
        default_stripe: StripeHint { stripe_unit: args.stripe_unit, stripe_count: args.stripe_count, start_osd: None },
        precreate: PrecreateConfig { batch: args.precreate_batch, low_water: args.precreate_low_water, ..PrecreateConfig::default() },
        security,
        user_key,
        removal_queue_max: tessera_mds::reaper::QUEUED_MAX,
    };
    let db = db_path(&args.data, args.index);
    let mds = Arc::new(Mds::open(&db, config, Arc::new(OsdObjects::new(nodes).with_probes(probes))).with_context(|| format!("opening {}", db.display()))?);
    let allowed = CpuSet::of_thread(0).context("reading this process's CPUs")?.cpus();
    let mut placed = loop_cpus.describe(&allowed);
    if loop_cpus.choose(&allowed).is_some() && args.flush_wait == FlushWait::Spin {
        placed.push_str(", kept awake through flushes");
    }
    let descriptors = crate::fd_limit::raise()?;
    let connections_max = crate::fd_limit::connections(descriptors, crate::fd_limit::DESCRIPTORS_KEPT, 1, tessera_mds::tcp::CONNECTIONS_MAX);
    tracing::info!(descriptors, connections = connections_max, "client connections served at once");
    let loop_config = LoopConfig { busy_poll: args.busy_poll, cpus: loop_cpus, flush_wait: args.flush_wait, connections_max };
    tessera_mds::tcp::spawn_with(listener, mds.clone(), loop_config).context("starting the listener")?;
    if let Some((socket, key)) = agent {
        tessera_mds::user_agent::spawn(socket, key).context("starting the user agent")?;
    }
    println!(
        "{}",
        ready_line(&[("addr", addr.to_string()), ("index", args.index.to_string()), ("data", args.data.display().to_string())])
    );
    eprintln!(
        "tessera mds: server {} of {} on {addr}, {} OSDs, namespace in {}, event loop on {placed}",
        args.index,
        cluster.mds.len(),
        cluster.osds.len(),
        db.display()
    );
    // Until a signal, or until the store fails: a server whose store cannot flush answers
    // nothing (what is on disk is not known), so it exits rather than linger looking alive;
    // a restart recovers the store from the disk, as PostgreSQL does after a failed fsync.
    loop {
        if let Some(signal) = signals.pending().next() {
            eprintln!("tessera mds: signal {signal}, shutting down");
            if let Some(socket) = &args.agent_socket {
                let _ = std::fs::remove_file(socket);
            }
            // Every acknowledged namespace change is in a durable SQLite commit: nothing to
            // flush. Removals of unlinked files' objects are journaled too; finishing those
            // under way only spares the next start the work, so it is bounded.
            if !mds.settle_removals(REMOVALS_SETTLE_MAX) {
                eprintln!("tessera mds: objects still awaiting removal are left to the next start");
            }
            return Ok(());
        }
        if mds.store_failed() {
            bail!(
                "the metadata store in {} failed to flush (its disk is full or failing; see the errors above): exiting, since nothing can be answered until a restart recovers the store from the disk. Make room (or mend the disk), then start this server again (`tessera up --dir DIR` restarts it)",
                args.data.display()
            );
        }
        std::thread::sleep(STORE_CHECK_EVERY);
    }
}

/// The longest a stopping server waits for removals under way.
const REMOVALS_SETTLE_MAX: Duration = Duration::from_secs(2);

/// How often the main thread looks at the store's health between signals.
const STORE_CHECK_EVERY: Duration = Duration::from_millis(200);

pub fn db_path(data: &Path, index: u32) -> PathBuf {
    data.join(format!("mds{index}.db"))
}

/// A reconnecting client to one OSD, once it answers (INQUIRY needs no capability).
fn connect_osd(cluster: &ClusterConfig, osd: &OsdEntry) -> Result<OsdConn> {
    let session = ReconnectingSession::new(&osd.addr, cluster.session_config(osd)?);
    let client = OsdClient::new(session, osd.lun);
    let deadline = Instant::now() + OSD_WAIT;
    loop {
        match client.system_id() {
            Ok(_) => return Ok(client),
            Err(OsdError::Transport(e)) if Instant::now() < deadline => {
                tracing::info!(osd = %osd.addr, error = %e, "OSD not answering yet");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => bail!("OSD {} ({}): not answering INQUIRY: {e}", osd.addr, osd.target),
        }
    }
}

/// Longest liveness interval of the sessions that probe OSDs: a probe gives up on a silent OSD
/// after two, as `tessera status` does (`PROBE_TIMEOUT` there), where the operations' own
/// sessions wait two of the cluster's (10 s by default). An OSD busy with clients still
/// answers the probe's NOP-Out ping from its connection's reader thread within that time.
const PROBE_LIVENESS: Duration = Duration::from_secs(3);

/// The session the liveness probe uses for `osd`: its own, with a liveness interval of at most
/// [`PROBE_LIVENESS`], logged in on first use. Signs with `credentials` under security.
fn probe_client(cluster: &ClusterConfig, osd: &OsdEntry, credentials: Option<Arc<dyn tessera_initiator::osd_client::CredentialSource>>) -> Result<OsdConn> {
    let mut config = cluster.session_config(osd)?;
    config.liveness = config.liveness.min(PROBE_LIVENESS);
    let mut client = OsdClient::new(ReconnectingSession::new(&osd.addr, config), osd.lun);
    client.set_credentials(credentials);
    Ok(client)
}

/// Creates the partition unless the root already lists it (NOSEC clusters).
fn ensure_partition(client: &OsdConn, partition_id: u64) -> Result<(), OsdError> {
    if client.list_all(0)?.contains(&partition_id) {
        return Ok(());
    }
    client.create_partition(Some(partition_id)).map(|_| ())
}

/// Reads the master keys and makes the security manager; the clients sign with its
/// credentials from here on.
pub fn security_manager<T: ScsiTransport>(config: SecurityConfig, dir: &Path, cluster: &ClusterConfig, clients: &mut [OsdClient<T>]) -> Result<Arc<SecurityManager>> {
    let mut secrets = Vec::new();
    for (i, (osd, client)) in cluster.osds.iter().zip(clients.iter()).enumerate() {
        let system_id = client.system_id().with_context(|| format!("OSD {i} ({}): reading its system id", osd.addr))?;
        secrets.push(OsdSecret { system_id, master: read_master_key(&dir.join(format!("osd{i}.key")))?, partition_id: osd.partition_id });
    }
    let manager = Arc::new(SecurityManager::new(config, secrets)?);
    for (i, client) in clients.iter_mut().enumerate() {
        client.set_credentials(Some(manager.source(i as u32)));
    }
    Ok(manager)
}

/// Establishes every OSD's keys (and data partition).
pub fn establish_keys<T: ScsiTransport + Send + Sync>(manager: &SecurityManager, cluster: &ClusterConfig, clients: &[Arc<OsdClient<T>>]) -> Result<()> {
    let now = now_ms();
    for (i, (client, osd)) in clients.iter().zip(&cluster.osds).enumerate() {
        manager.establish(i as u32, client.as_ref(), now).with_context(|| format!("establishing keys on OSD {i} ({})", osd.addr))?;
    }
    Ok(())
}

/// [`establish_keys`], then the rotation thread.
fn start_security(args: &MdsArgs, manager: Arc<SecurityManager>, cluster: &ClusterConfig, clients: &[Arc<OsdConn>]) -> Result<Arc<SecurityManager>> {
    establish_keys(&manager, cluster, clients)?;
    let installers: Vec<Arc<dyn KeyInstaller>> = clients.iter().map(|c| c.clone() as Arc<dyn KeyInstaller>).collect();
    manager.clone().spawn_rotation(installers).context("starting the key rotation thread")?;
    eprintln!(
        "tessera mds: security manager for {} OSDs: {} capabilities living {:?}, working keys rotating every {:?}",
        clients.len(),
        args.security.name(),
        args.capability_lifetime,
        args.key_period
    );
    Ok(manager)
}

/// A master key file: 64 hex digits, readable by its owner only (the same mode rule as a CHAP
/// secret file).
pub fn read_master_key(path: &Path) -> Result<Key> {
    read_private_key(path, "master key file")
}

/// A key file (64 hex digits) that must be readable by its owner only.
fn read_private_key(path: &Path, what: &str) -> Result<Key> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).with_context(|| format!("reading the {what} {}", path.display()))?;
    tessera_iscsi::login::auth::check_file_mode(meta.permissions().mode()).with_context(|| format!("{what} {}", path.display()))?;
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the {what} {}", path.display()))?;
    Key::from_hex(&text).with_context(|| format!("{} must hold a 32-byte key as 64 hex digits", path.display()))
}

/// The cluster's user key, when the cluster file names one: then every client must prove its
/// user (docs/security.md, "Users"); without one, callers are believed, which the log says.
fn load_user_key(cluster: &ClusterConfig) -> Result<Option<tessera_mds_proto::UserKey>> {
    match &cluster.user_key_file {
        Some(path) => Ok(Some(read_user_key(path)?)),
        None => {
            eprintln!("tessera mds: WARNING: the cluster file names no user_key_file: clients' user ids are believed as they claim them (as NFS AUTH_SYS)");
            Ok(None)
        }
    }
}

/// The user key file for a server or an agent: readable by its owner only, as a master key
/// file (a key others can read lets them prove any user).
pub fn read_user_key(path: &Path) -> Result<tessera_mds_proto::UserKey> {
    read_private_key(path, "user key file").map(|key| tessera_mds_proto::UserKey::from_bytes(key.bytes()))
}
