//! `tessera`: the one binary. Daemons (`osd`), the demonstration (`demo`) and the benchmarks
//! (`bench ...`). Each subcommand lives in its own module of the `tessera_cli` library; this file
//! only parses arguments.

use clap::{Args, Parser, Subcommand};
use tessera_cli::{bench, cmd_osd, demo};

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a parallel file system on object-based storage devices (T10 OSD-2 over iSCSI)",
    long_about = "Tessera: a parallel file system whose storage nodes are object-based storage devices.\n\n\
        Each storage node runs `tessera osd`, an OSD-2 target served over iSCSI. `tessera demo` starts a\n\
        target in a temporary directory and exercises it; `tessera bench` reproduces the seed papers'\n\
        experiments against a baseline measured in the same run."
)]
struct Cli {
    /// Log filter (e.g. `info`, `tessera_target=debug`); also read from RUST_LOG.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve one object-based storage device (LUN 0) over iSCSI.
    Osd(cmd_osd::OsdArgs),
    /// Start a target in a temporary directory, exercise it, and run a short benchmark.
    Demo(demo::DemoArgs),
    /// Reproduce the seed papers' experiments; every bench also measures its baseline.
    Bench(BenchArgs),
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    which: bench::BenchCommand,
    #[command(flatten)]
    common: bench::CommonArgs,
}

fn main() {
    tune_allocator();
    let cli = Cli::parse();
    let filter = std::env::var("RUST_LOG").unwrap_or(cli.log.clone());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Osd(args) => cmd_osd::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::run(args.which, args.common),
    };
    if let Err(e) = result {
        eprintln!("tessera: error: {e:#}");
        std::process::exit(1);
    }
}

/// Keeps multi-megabyte I/O buffers in the heap instead of a fresh mmap per command: glibc
/// otherwise maps and unmaps every buffer above its threshold, and each transfer then pays a
/// page fault and a kernel zeroing per 4 KiB page (measured: throughput fell from 1 MiB to
/// 16 MiB transfers). 32 MiB is the largest threshold glibc accepts.
fn tune_allocator() {
    // SAFETY: mallopt only sets allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}
