//! `tessera bench ...`: each bench reproduces one of the seeds' experiments, always measures its
//! baseline in the same run, prints a table, and writes JSON (rows + `summary`) and a PNG.

mod attr;
mod baseline;
mod io;
pub mod report;
mod security;
mod target;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// GET ATTRIBUTES round-trip latency with the seed's breakdown (slides 002, "Overheads in
    /// getattr"), beside the raw loopback TCP round trip.
    Attr(attr::AttrArgs),
    /// READ and WRITE throughput against transfer size (seed 000 Fig. 9), beside raw TCP.
    Io(io::IoArgs),
    /// Throughput and per-command cost of NOSEC, CAPKEY, CMDRSP and ALLDATA, contiguous and
    /// strided, against a NOSEC target in the same run (issue 5).
    Security(security::SecurityArgs),
}

#[derive(Args, Clone)]
pub struct CommonArgs {
    /// Write the JSON report here (the PNG goes beside it, same name, .png).
    #[arg(long, global = true)]
    pub json: Option<PathBuf>,
    /// Directory for reports when --json is not given.
    #[arg(long, global = true, default_value = "bench-out")]
    pub out: PathBuf,
    /// A short run (for CI): fewer iterations and sizes, same shape of output.
    #[arg(long, global = true)]
    pub quick: bool,
    /// Use a running target (HOST:PORT) instead of starting a temporary one.
    #[arg(long, global = true)]
    pub target: Option<String>,
    /// iSCSI name of the target given with --target (default: discovered).
    #[arg(long, global = true)]
    pub target_name: Option<String>,
}

pub fn run(which: BenchCommand, common: CommonArgs) -> Result<()> {
    match which {
        BenchCommand::Attr(args) => attr::run(args, &common),
        BenchCommand::Io(args) => io::run(args, &common),
        BenchCommand::Security(args) => security::run(args, &common),
    }
}

/// Default arguments of `bench attr` (for the demo).
pub fn attr_args_default() -> attr::AttrArgs {
    attr::AttrArgs::default()
}
