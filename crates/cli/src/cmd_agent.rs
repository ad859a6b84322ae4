//! `tessera agent`: this host's user agent, for a client host of a multi-host install (a local
//! cluster's metadata server 0 is its own host's agent). It proves to the metadata servers the
//! user of any local process that asks, by the kernel's word (`tessera_mds::user_agent`), with
//! the cluster's user key, which only the agent and the servers need to read.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tessera_client::ClusterConfig;

use crate::daemon::ready_line;

#[derive(Args)]
pub struct AgentArgs {
    /// The cluster file: its `user_key_file` is the key proofs are made with, its
    /// `user_agent_socket` where the agent listens (unless --socket).
    #[arg(long, env = "TESSERA_CLUSTER")]
    cluster: PathBuf,
    /// The unix socket to listen on (made open to every local user); default: the cluster
    /// file's `user_agent_socket`.
    #[arg(long)]
    socket: Option<PathBuf>,
}

pub fn run(args: AgentArgs) -> Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    let cluster = ClusterConfig::load(&args.cluster)?;
    let Some(key_file) = &cluster.user_key_file else {
        bail!("{} names no user_key_file: its metadata servers believe the user ids clients send, so there is nothing to prove", args.cluster.display());
    };
    let key = crate::cmd_mds::read_user_key(key_file)?;
    let Some(socket) = args.socket.clone().or_else(|| cluster.user_agent_socket.clone()) else {
        bail!("where should the agent listen? give --socket PATH, or name user_agent_socket in {}", args.cluster.display());
    };
    let listener = tessera_mds::user_agent::bind(&socket).with_context(|| format!("user agent socket {}", socket.display()))?;
    tessera_mds::user_agent::spawn(listener, key).context("starting the user agent")?;
    println!("{}", ready_line(&[("socket", socket.display().to_string())]));
    eprintln!("tessera agent: proving local users on {}", socket.display());
    let signal = signals.forever().next();
    eprintln!("tessera agent: signal {}, shutting down", signal.unwrap_or_default());
    let _ = std::fs::remove_file(&socket);
    Ok(())
}
