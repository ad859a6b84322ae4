//! `tessera bench ...`: each bench reproduces one of the seeds' experiments, always measures its
//! baseline in the same run, prints a table, and writes JSON (rows + `summary`) and a PNG.

mod attr;
mod baseline;
pub mod cpu;
mod io;
pub mod noncontig;
pub mod pinning;
mod meta;
pub mod report;
pub mod security;
mod target;
mod tree;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// GET ATTRIBUTES round-trip latency with the seed's breakdown (slides 002, "Overheads in
    /// getattr"), beside the raw loopback TCP round trip.
    Attr(attr::AttrArgs),
    /// File-system read and write throughput against transfer size (seed 000 Fig. 9) and
    /// against the number of OSDs (seed 002 slides), beside raw TCP to the same hosts; with
    /// --netns also with each OSD on its own rate-limited link; --target-only measures one OSD
    /// target alone.
    Io(io::IoArgs),
    /// Native non-contiguous I/O: seed 000 Figs. 8 and 10, 1024 x 64 B against one
    /// contiguous transfer, seed 003's pack vs gather, and the target's per-piece vs sieve rule.
    Noncontig(noncontig::NoncontigArgs),
    /// Throughput and per-command cost of NOSEC, CAPKEY, CMDRSP and ALLDATA, contiguous and
    /// strided, against a NOSEC target in the same run (goal: CMDRSP within 5% at 1 MiB and
    /// 5 us per command).
    Security(security::SecurityArgs),
    /// Create, stat and remove latency and throughput against clients and stripe count on a
    /// local cluster (seed 002 slides), beside a raw durable SQLite insert and an empty
    /// metadata-server round trip.
    Meta(meta::MetaArgs),
    /// The tree commands (`put -r`, `get -r`, `cp -r`, `rm -r`) against how many files they
    /// handle at once, one at a time (the baseline) to 8, on a local cluster.
    Tree(tree::TreeArgs),
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
        BenchCommand::Noncontig(args) => noncontig::run(args, &common),
        BenchCommand::Security(args) => security::run(args, &common),
        BenchCommand::Meta(args) => meta::run(args, &common),
        BenchCommand::Tree(args) => tree::run(args, &common),
    }
}

/// Default arguments of `bench attr` (for the demo).
pub fn attr_args_default() -> attr::AttrArgs {
    attr::AttrArgs::default()
}
