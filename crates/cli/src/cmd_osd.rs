//! `tessera osd`: open (or create) the object store under `--data`, serve it as LUN 0 of an
//! iSCSI target, print the ready line, and run until SIGTERM/SIGINT, then flush and exit.
//!
//! `--security METHOD` makes the OSD check every command's capability (docs/security.md);
//! `--master-key-file` provisions the first master key. Without `--security` the OSD trusts
//! every command (NOSEC), and says so loudly. `--chap-secret-file` makes every iSCSI login,
//! normal or discovery, pass CHAP first.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tessera_engine::{Engine, EngineConfig};
use tessera_target::iscsi_server::{TargetConfig, TargetServer};
use tessera_types::limits::SESSIONS_MAX;
use tessera_security::SecurityMethod;
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::security_gate::TargetSecurity;
use tessera_target::spc::ScsiFront;

use crate::chap_file::load_chap_secrets;
use crate::daemon::ready_line;
use crate::lock::DirLock;

#[derive(Args)]
pub struct OsdArgs {
    /// Directory holding this OSD's object data and attribute database (created if missing).
    #[arg(long)]
    data: PathBuf,
    /// Address to listen on, e.g. 0.0.0.0:3260 or 127.0.0.1:0 (the kernel picks a port).
    #[arg(long, default_value = "127.0.0.1:3260")]
    listen: SocketAddr,
    /// Serve on this inherited descriptor, a TCP socket already listening, instead of binding
    /// `--listen` (how `tessera up` starts its OSDs: it binds each port itself, so nothing can
    /// take the port before the OSD serves on it).
    #[arg(long, conflicts_with = "listen", value_name = "FD")]
    listen_fd: Option<i32>,
    /// iSCSI target name; default derived from the store's system id.
    #[arg(long)]
    target_name: Option<String>,
    /// Weakest security method accepted: nosec (no checks), capkey, cmdrsp or alldata.
    #[arg(long, default_value = "nosec", value_parser = parse_method)]
    security: SecurityMethod,
    /// File holding the first master key as 64 hex digits; read only while the store holds
    /// no master key yet (docs/security.md, provisioning).
    #[arg(long)]
    master_key_file: Option<PathBuf>,
    /// File with the CHAP secrets every iSCSI login must prove: `user secret` of the initiator,
    /// optionally a second line `user secret` the target answers mutual CHAP with. Mode 600.
    #[arg(long)]
    chap_secret_file: Option<PathBuf>,
}

fn parse_method(s: &str) -> Result<SecurityMethod, String> {
    SecurityMethod::from_name(s).ok_or_else(|| format!("unknown security method {s:?}: use nosec, capkey, cmdrsp or alldata"))
}

/// Descriptors one iSCSI session holds: its socket and the clones the server keeps to close
/// it on shutdown and on reinstatement, with one to spare.
const DESCRIPTORS_PER_SESSION: u64 = 4;

pub fn run(args: OsdArgs) -> Result<()> {
    // Signals are blocked for every thread before any is spawned, and taken by one iterator.
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    crate::parent_tie::watch_if_tied("osd");
    // Read before anything is opened, so a bad secret file stops the OSD at once.
    let chap = args.chap_secret_file.as_deref().map(load_chap_secrets).transpose()?;
    let inherited = args.listen_fd.map(crate::listeners::inherited).transpose()?;
    // Held until this process exits: a second OSD on the store would corrupt it.
    let _lock = DirLock::create_and_acquire(&args.data, "the OSD store")?;
    let engine = Engine::open(&args.data, EngineConfig::default())
        .with_context(|| format!("opening the object store in {}", args.data.display()))?;
    let system_id = engine.system_id();
    let target_name = args.target_name.unwrap_or_else(|| default_target_name(&system_id));
    let command_set = if args.security == SecurityMethod::NoSec {
        Arc::new(OsdCommandSet::new(engine))
    } else {
        let master_key = args.master_key_file.as_deref().map(crate::cmd_mds::read_master_key).transpose()?;
        let security = TargetSecurity::new(args.security, master_key);
        Arc::new(OsdCommandSet::with_security(engine, security).context("turning on capability security")?)
    };
    let device = Arc::new(ScsiFront::new(command_set.clone()));
    let portal = match &inherited {
        Some(listener) => listener.local_addr()?.to_string(),
        None => args.listen.to_string(),
    };
    let mut config = TargetConfig::new(&target_name, &portal);
    config.chap = chap;
    let descriptors = crate::fd_limit::raise()?;
    config.sessions_max = crate::fd_limit::connections(descriptors, crate::fd_limit::DESCRIPTORS_KEPT, DESCRIPTORS_PER_SESSION, SESSIONS_MAX);
    tracing::info!(descriptors, sessions = config.sessions_max, "sessions served at once");
    let auth = match &config.chap {
        None => "none",
        Some(c) if c.target.is_some() => "chap-mutual",
        Some(_) => "chap",
    };
    let server = match inherited {
        Some(listener) => TargetServer::on(listener, config, device).with_context(|| format!("serving on {portal}"))?,
        None => TargetServer::bind(config, device).with_context(|| format!("listening on {}", args.listen))?,
    };
    let addr = server.local_addr()?;
    if args.security == SecurityMethod::NoSec {
        // After binding, so the warning names the port clients reach, not a requested :0.
        eprintln!("tessera osd: WARNING: security is OFF (NOSEC): any client that reaches {addr} can read, write and remove every object; use --security cmdrsp");
        tracing::warn!("capability security is off (NOSEC)");
    }
    println!(
        "{}",
        ready_line(&[
            ("addr", addr.to_string()),
            ("target", target_name.clone()),
            ("lun", "0".into()),
            ("data", args.data.display().to_string()),
            ("security", args.security.name().to_ascii_lowercase()),
            ("auth", auth.to_string()),
        ])
    );
    eprintln!("tessera osd: serving {target_name} (LUN 0, OSD) on {addr}, data in {}", args.data.display());
    let handle = server.spawn();
    let signal = signals.forever().next();
    eprintln!("tessera osd: signal {signal:?}, shutting down");
    handle.shutdown();
    command_set.flush_all().context("flushing the object store on shutdown")?;
    Ok(())
}

/// `iqn.2026-11.org.tessera:osd-<first 4 bytes of the system id in hex>`.
pub fn default_target_name(system_id: &[u8; 20]) -> String {
    let hex: String = system_id[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("iqn.2026-11.org.tessera:osd-{hex}")
}
