//! `tessera mds`: one metadata server. It reads the cluster file for the OSDs and its peers,
//! opens (or creates) its SQLite namespace under `--data`, makes sure every OSD has the file
//! data partition, listens, prints the ready line, and runs until SIGTERM/SIGINT.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tessera_client::{ClusterConfig, OsdEntry, StripeHint};
use tessera_initiator::iscsi::{ReconnectingSession, SessionConfig};
use tessera_initiator::osd_client::{OsdClient, OsdError};
use tessera_mds::{Mds, MdsConfig, OsdObjects, PrecreateConfig};
use tessera_mds_proto::{ClusterMap, OsdInfo};

use crate::daemon::ready_line;
use crate::units::parse_size;

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
}

pub fn run(args: MdsArgs) -> Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    let cluster = ClusterConfig::load(&args.cluster)?;
    let Some(me) = cluster.mds.get(args.index as usize) else {
        bail!("--index {} but {} names only {} metadata server(s)", args.index, args.cluster.display(), cluster.mds.len());
    };
    let listen = args.listen.clone().unwrap_or_else(|| me.addr.clone());
    let listener = TcpListener::bind(&listen).with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr()?;
    std::fs::create_dir_all(&args.data).with_context(|| format!("creating {}", args.data.display()))?;

    let nodes = cluster.osds.iter().map(|osd| connect_osd(&cluster, osd)).collect::<Result<Vec<_>>>()?;
    let config = MdsConfig {
        server_index: args.index,
        cluster: ClusterMap {
            servers: cluster.mds.iter().map(|m| m.addr.clone()).collect(),
            osds: cluster.osds.iter().map(|o| OsdInfo { addr: o.addr.clone(), partition_id: o.partition_id }).collect(),
        },
        default_stripe: StripeHint { stripe_unit: args.stripe_unit, stripe_count: args.stripe_count, start_osd: None },
        precreate: PrecreateConfig { batch: args.precreate_batch, low_water: args.precreate_low_water, ..PrecreateConfig::default() },
    };
    let db = db_path(&args.data, args.index);
    let mds = Arc::new(Mds::open(&db, config, Arc::new(OsdObjects::new(nodes))).with_context(|| format!("opening {}", db.display()))?);
    tessera_mds::tcp::spawn(listener, mds).context("starting the listener")?;
    println!(
        "{}",
        ready_line(&[("addr", addr.to_string()), ("index", args.index.to_string()), ("data", args.data.display().to_string())])
    );
    eprintln!(
        "tessera mds: server {} of {} on {addr}, {} OSDs, namespace in {}",
        args.index,
        cluster.mds.len(),
        cluster.osds.len(),
        db.display()
    );
    let signal = signals.forever().next();
    eprintln!("tessera mds: signal {signal:?}, shutting down");
    // Every acknowledged namespace change is in a durable SQLite commit: nothing to flush.
    Ok(())
}

pub fn db_path(data: &Path, index: u32) -> PathBuf {
    data.join(format!("mds{index}.db"))
}

/// A reconnecting client to one OSD whose file data partition exists (created on first start).
fn connect_osd(cluster: &ClusterConfig, osd: &OsdEntry) -> Result<(OsdClient<ReconnectingSession>, u64)> {
    let session = ReconnectingSession::new(&osd.addr, SessionConfig::new(&cluster.initiator_name, &osd.target));
    let client = OsdClient::new(session, osd.lun);
    let deadline = Instant::now() + OSD_WAIT;
    loop {
        match ensure_partition(&client, osd.partition_id) {
            Ok(()) => return Ok((client, osd.partition_id)),
            Err(OsdError::Transport(e)) if Instant::now() < deadline => {
                tracing::info!(osd = %osd.addr, error = %e, "OSD not answering yet");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => bail!("OSD {} ({}): cannot prepare partition {:#x}: {e}", osd.addr, osd.target, osd.partition_id),
        }
    }
}

/// Creates the partition unless the root already lists it.
fn ensure_partition(client: &OsdClient<ReconnectingSession>, partition_id: u64) -> Result<(), OsdError> {
    if client.list_all(0)?.contains(&partition_id) {
        return Ok(());
    }
    client.create_partition(Some(partition_id)).map(|_| ())
}
