//! Lookups while other clients create, on a metadata server whose readers have read a lot
//! before: what a reader pays when every lookup follows a commit (docs/metadata.md, "Reader
//! caches"). A local cluster of one `tessera mds` and one `tessera osd`; FILES files made, then
//! every one stat-ed once by each of two clients (the readers' caches fill), then for SECONDS
//! two clients stat random files while two others create new ones. Prints the stats' median
//! and the server's CPU per stat and create in that last phase.
//!
//! `cargo run --release -p tessera-cli --example mixed_meta -- TESSERA_EXE FILES SECONDS`

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tessera_cli::bench::cpu::CpuClock;
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::Client;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() == 4, "usage: mixed_meta TESSERA_EXE FILES SECONDS");
    let exe = std::path::Path::new(&args[1]);
    let files: usize = args[2].parse()?;
    let secs: f64 = args[3].parse()?;
    let dir = tempfile::tempdir()?;
    let cluster = LocalCluster::start_spec(exe, dir.path(), &ClusterSpec::new(1))?;
    let config = cluster.config().clone();
    let mds_pid = cluster.records().iter().find(|r| r.role == "mds").map(|r| r.pid).ok_or_else(|| anyhow::anyhow!("no mds"))?;
    let admin = Client::connect(&config)?;
    admin.mkdir("/m", 0o755)?;
    let d = admin.open_dir("/m")?;
    for i in 0..files {
        d.create(&format!("f{i}"), 0o644, None)?;
    }
    std::thread::scope(|s| -> anyhow::Result<()> {
        let warm: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| -> anyhow::Result<()> {
                    let c = Client::connect(&config)?;
                    let d = c.open_dir("/m")?;
                    for i in 0..files {
                        d.stat(&format!("f{i}"))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in warm {
            w.join().expect("warm-up thread")?;
        }
        Ok(())
    })?;

    let stop = AtomicBool::new(false);
    let (stats, creates) = (AtomicU64::new(0), AtomicU64::new(0));
    let clock = CpuClock::of_process(mds_pid)?;
    let cpu0 = clock.now()?;
    let start = Instant::now();
    let mut latencies: Vec<Duration> = std::thread::scope(|s| -> anyhow::Result<Vec<Duration>> {
        let creators: Vec<_> = (0..2)
            .map(|k| {
                let (stop, creates, config) = (&stop, &creates, &config);
                s.spawn(move || -> anyhow::Result<()> {
                    let c = Client::connect(config)?;
                    let d = c.open_dir("/m")?;
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        d.create(&format!("n{k}-{i}"), 0o644, None)?;
                        i += 1;
                        creates.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        let statters: Vec<_> = (0..2)
            .map(|k| {
                let (stop, stats, config) = (&stop, &stats, &config);
                s.spawn(move || -> anyhow::Result<Vec<Duration>> {
                    let c = Client::connect(config)?;
                    let d = c.open_dir("/m")?;
                    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ k;
                    let mut took = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let t = Instant::now();
                        d.stat(&format!("f{}", seed % files as u64))?;
                        took.push(t.elapsed());
                        stats.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(took)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        for c in creators {
            c.join().expect("creator thread")?;
        }
        let mut all = Vec::new();
        for t in statters {
            all.extend(t.join().expect("stat thread")?);
        }
        Ok(all)
    })?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = (clock.now()? - cpu0).as_secs_f64();
    latencies.sort();
    let (n_stats, n_creates) = (stats.load(Ordering::Relaxed), creates.load(Ordering::Relaxed));
    println!(
        "{n_stats} stats ({:.0}/s, median {:.0} us) beside {n_creates} creates ({:.0}/s); server CPU {:.1} us per operation",
        n_stats as f64 / wall,
        latencies[latencies.len() / 2].as_secs_f64() * 1e6,
        n_creates as f64 / wall,
        cpu * 1e6 / (n_stats + n_creates) as f64
    );
    cluster.stop()?;
    Ok(())
}
