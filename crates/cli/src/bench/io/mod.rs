//! `tessera bench io`: contiguous read and write throughput.
//!
//! - Default, the file system: a real cluster (metadata server + OSD daemons) and the client
//!   library, against transfer size on one OSD (seed 000 Fig. 9: one I/O server, one metadata
//!   server) and against the number of OSDs a file stripes over (seed 002 slides, "aggregate
//!   I/O"), with write, write+fsync and read, beside raw TCP to the same hosts. `--netns` runs
//!   the OSD-count sweep again with every daemon on its own network namespace behind a `tc tbf`
//!   link, against N x the link rate.
//! - `--target-only`: one OSD target over iSCSI, no metadata server ([`target_only`]).

mod fs_run;
mod osd_sweep;
mod site;
mod size_sweep;
mod target_only;

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;

use super::CommonArgs;
use crate::units::{parse_size_min, Rate};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

#[derive(Args, Clone)]
pub struct IoArgs {
    /// Measure one OSD target alone over iSCSI (no metadata server, no striping) instead of
    /// the file system.
    #[arg(long)]
    target_only: bool,
    /// Bytes moved per transfer size and direction (at least 4 transfers each).
    #[arg(long, default_value = "256M", value_parser = parse_size_min::<1>)]
    bytes_per_point: u64,
    /// OSD counts of the aggregate sweep.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8", conflicts_with = "target_only")]
    osds: Vec<u32>,
    /// Bytes each OSD stores per pass of the aggregate sweep (constant work per server).
    #[arg(long, default_value = "256M", value_parser = parse_size_min::<1>, conflicts_with = "target_only")]
    bytes_per_osd: u64,
    /// Bytes each OSD receives per `pwrite` / `pread` call of the aggregate sweep (a call
    /// moves N times this). Above the client's 16 MiB command cap, several commands are in
    /// flight per OSD, so a link does not idle while its OSD stores the last one. At least
    /// 64K: smaller calls measure the cost of a call, not the links.
    #[arg(long, default_value = "64M", value_parser = parse_size_min::<{ 64 * 1024 }>, conflicts_with = "target_only")]
    osd_call_bytes: u64,
    /// Run the aggregate sweep a second time with the metadata server, every OSD and the
    /// client each in its own network namespace (needs root), every OSD behind a `tc tbf` link
    /// of --rate; reports throughput over N x rate.
    #[arg(long, conflicts_with = "target_only")]
    netns: bool,
    /// Link rate of each OSD's namespace with --netns, e.g. 1gbit, 500mbit. The client's and
    /// the metadata server's links are not limited, so only the OSD links can bind.
    #[arg(long, default_value = "1gbit", requires = "netns")]
    rate: Rate,
}

pub fn run(args: IoArgs, common: &CommonArgs) -> Result<()> {
    if args.target_only {
        target_only::run(args.bytes_per_point as usize, common)
    } else {
        fs_run::run(&args, common)
    }
}

/// Throughput of one measured point of a file-system sweep, MiB/s, and its paired ratios.
#[derive(Clone, Copy, Debug)]
struct Measured {
    /// Transfer size in bytes, or number of OSDs.
    x: f64,
    write: f64,
    write_fsync: f64,
    read: f64,
    raw_write: f64,
    raw_read: f64,
    /// Median over rounds of (raw time / file-system time) for the round's write pair.
    write_over_raw: f64,
    read_over_raw: f64,
    /// CPU cost, where measured.
    cpu: Option<CpuCost>,
}

/// CPU seconds per GiB moved, over the bench process and every daemon of the cluster (the
/// kernel's network work is charged to them too).
#[derive(Clone, Copy, Debug)]
struct CpuCost {
    write: f64,
    read: f64,
    raw_write: f64,
    raw_read: f64,
}

/// Runs `f`, returning its wall time and the CPU time this process and `pids` spent meanwhile.
fn timed_cpu(pids: &[u32], f: impl FnOnce() -> Result<()>) -> Result<(Duration, Duration)> {
    let before = super::cpu::total_cpu(pids)?;
    let wall = timed(f)?;
    Ok((wall, super::cpu::total_cpu(pids)?.saturating_sub(before)))
}

fn cpu_s_per_gib(cpu: Duration, bytes: u64) -> f64 {
    cpu.as_secs_f64() / (bytes as f64 / (1u64 << 30) as f64)
}

fn time_reps(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let t = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    Ok(t.elapsed())
}

fn timed(f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

fn mib_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / MIB as f64 / d.as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    super::report::percentile(&v, 50.0)
}

/// Bytes that differ from offset to offset, so a misplaced piece never reads back equal.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}
