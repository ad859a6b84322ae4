//! `tessera demo`: the README's one-command tour. Starts a local cluster (one metadata server
//! and four OSDs, real processes on loopback) in a temporary directory, writes a striped file
//! and reads it back, shows its layout, restarts every daemon to show that flushed files
//! survive, and ends with a small benchmark table.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::Args;
use tessera_client::{Client, Extent, Mode, StripeHint};

use crate::cluster::{ClusterSpec, LocalCluster};
use crate::fs::stripe::print_stripe;
use crate::units::format_size;

#[derive(Args)]
pub struct DemoArgs {
    /// Keep the cluster's data here instead of a temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Number of OSDs.
    #[arg(long, default_value_t = 4)]
    osds: u32,
    /// Skip the closing benchmark table.
    #[arg(long)]
    no_bench: bool,
}

/// The demo file: large enough that every OSD holds several stripe units.
const FILE_LEN: usize = 32 << 20;
const STRIPE_UNIT: u64 = 1 << 20;

pub fn run(args: DemoArgs) -> Result<()> {
    // A temporary directory only when none was given: a demo killed outright cannot remove it.
    let (root, _temp) = match args.dir.clone() {
        Some(dir) => (dir, None),
        None => {
            let temp = crate::children::scratch_dir("tessera-demo-", None)?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let exe = std::env::current_exe().context("finding the tessera executable")?;
    let spec = ClusterSpec::new(args.osds);

    step(&format!("starting a cluster in {}: 1 metadata server, {} OSDs (`tessera up`)", root.display(), args.osds));
    let cluster = LocalCluster::start_spec(&exe, &root, &spec)?;
    for r in cluster.records() {
        done(&format!("{:<5} pid {:<7} listening on {}", r.name(), r.pid, r.addr));
    }
    let client = Client::connect(cluster.config())?;

    step(&format!("writing /demo/striped.dat: {} striped over every OSD in {} units", format_size(FILE_LEN as u64), format_size(STRIPE_UNIT)));
    client.mkdir("/demo", 0o755)?;
    let payload: Vec<u8> = (0..FILE_LEN as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let file = client.create("/demo/striped.dat", 0o644, Some(StripeHint { stripe_unit: STRIPE_UNIT, stripe_count: 0, start_osd: None }))?;
    let t = Instant::now();
    file.pwrite(0, &payload)?;
    file.fsync()?;
    let write_time = t.elapsed();
    let mut back = vec![0u8; FILE_LEN];
    let t = Instant::now();
    file.pread(0, &mut back)?;
    let read_time = t.elapsed();
    ensure!(back == payload, "read back differs from what was written");
    done(&format!("wrote (with fsync) at {}, read back at {}: byte for byte equal", rate(FILE_LEN, write_time), rate(FILE_LEN, read_time)));

    step("tessera getstripe /demo/striped.dat");
    print_stripe(cluster.config(), &client.getstripe("/demo/striped.dat")?);

    step("restarting every daemon on the same directories (`tessera down` then `tessera up`)");
    drop(file);
    drop(client);
    cluster.stop()?;
    let cluster = LocalCluster::start_spec(&exe, &root, &spec)?;
    let client = Client::connect(cluster.config())?;
    let file = client.open("/demo/striped.dat")?;
    let mut again = vec![0u8; FILE_LEN];
    file.pread(0, &mut again)?;
    ensure!(again == payload, "the file changed across the restart");
    done(&format!("after restart: {} intact, size {}", "/demo/striped.dat", client.stat("/demo/striped.dat")?.size));

    if !args.no_bench {
        step("a small benchmark (each row beside its baseline from the same run)");
        bench_table(&client, &file)?;
        println!("   full experiments: tessera bench --help");
    }
    drop(file);
    drop(client);
    cluster.stop()?;
    println!("\ndemo finished; the cluster's data was in {}", root.display());
    Ok(())
}

/// Non-contiguous reads through the striped client: native (one command per OSD carrying a
/// strided or list descriptor) against iterative (one command per piece, the baseline every
/// block protocol is stuck with); and a stat against an empty metadata round trip.
fn bench_table(client: &Client, file: &tessera_client::File) -> Result<()> {
    println!("   {:<36} {:>12} {:>12} {:>9}", "operation", "tessera", "baseline", "speed-up");
    for (pieces, piece_len, stride) in [(1024u64, 64u64, 1024u64), (256, 4096, 8192)] {
        let extents: Vec<Extent> = (0..pieces).map(|i| Extent { offset: i * stride, len: piece_len }).collect();
        let mut buf = vec![0u8; (pieces * piece_len) as usize];
        let native = best_of(5, || file.read_extents(&extents, &mut buf, Mode::Auto).map_err(Into::into))?;
        let iterative = best_of(3, || file.read_extents(&extents, &mut buf, Mode::Iterative).map_err(Into::into))?;
        let label = format!("read {pieces} x {} at {} stride", format_size(piece_len), format_size(stride));
        println!("   {label:<36} {:>12} {:>12} {:>8.1}x", micros(native), micros(iterative), iterative.as_secs_f64() / native.as_secs_f64());
    }
    let stat = best_of(20, || client.stat("/demo/striped.dat").map(drop).map_err(Into::into))?;
    let statfs = best_of(20, || client.statfs().map(drop).map_err(Into::into))?;
    println!("   {:<36} {:>12} {:>12} {:>9}", "stat (size from every data object)", micros(stat), micros(statfs), "");
    println!("   baselines: iterative = one READ per piece; stat's = one empty metadata round trip (statfs)");
    Ok(())
}

fn best_of(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed());
    }
    Ok(best)
}

fn micros(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

fn rate(bytes: usize, d: Duration) -> String {
    format!("{:.0} MiB/s", bytes as f64 / (1 << 20) as f64 / d.as_secs_f64().max(1e-9))
}

fn step(msg: &str) {
    println!("-> {msg}");
}

fn done(msg: &str) {
    println!("   ok: {msg}");
}
