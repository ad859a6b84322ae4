//! `tessera bench tree`: the whole-tree commands (`put -r`, `get -r`, `cp -r`, `rm -r`)
//! against how many files they handle at once, on a local cluster. The baseline, measured in
//! the same run, is one file at a time (`--workers 1`), the way the commands first ran. This
//! is not a seed figure: it measures the CLI's tree commands, whose per-file namespace
//! requests the metadata server's group commit can take together only when several are in
//! flight, as `bench meta` shows for creates against clients (seed slides 002, create
//! throughput).

use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use clap::Args;
use serde_json::json;
use tessera_client::Client;

use super::report::{percentile, plot_lines, Axes, OutputPaths, Report, Series};
use super::CommonArgs;
use crate::cluster::{ClusterSpec, LocalCluster};
use crate::fs::{copy, namespace, trees};
use crate::units::parse_size;

#[derive(Args, Clone)]
pub struct TreeArgs {
    /// Files in the tree (one directory).
    #[arg(long, default_value_t = 1000)]
    files: usize,
    /// Bytes in each file.
    #[arg(long, default_value = "4K", value_parser = parse_size)]
    file_size: u64,
    /// OSDs of the local cluster.
    #[arg(long, default_value_t = 2)]
    osds: u32,
    /// Files handled at once, each measured; 1, the baseline, is always added.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1, 2, 4, 8], value_parser = crate::units::parse_positive)]
    workers: Vec<usize>,
    /// Rounds over every worker count, interleaved so machine noise falls on each alike; the
    /// median round is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

const OPS: [&str; 4] = ["put -r", "get -r", "cp -r", "rm -r"];

pub fn run(args: TreeArgs, common: &CommonArgs) -> Result<()> {
    ensure!(common.target.is_none(), "bench tree starts its own cluster; --target does not apply");
    ensure!(args.files > 0 && args.osds > 0 && args.rounds > 0, "--files, --osds and --rounds must be above zero");
    let files = if common.quick { args.files.min(100) } else { args.files };
    let rounds = if common.quick { 1 } else { args.rounds };
    let mut workers: Vec<usize> = args.workers.iter().copied().chain([1]).collect();
    workers.sort_unstable();
    workers.dedup();

    let scratch = crate::children::scratch_dir("tessera-bench-tree-", None)?;
    let dir = scratch.path();
    let local = dir.join("tree");
    std::fs::create_dir(&local)?;
    for i in 0..files {
        std::fs::write(local.join(name(i)), content(i, args.file_size))?;
    }
    let exe = std::env::current_exe().context("finding the tessera executable")?;
    let cluster = LocalCluster::start_spec(&exe, &dir.join("cluster"), &ClusterSpec::new(args.osds))?;
    let client = Client::connect(cluster.config())?;

    // seconds[op][worker index] over the rounds.
    let mut seconds = vec![vec![Vec::new(); workers.len()]; OPS.len()];
    for round in 0..rounds {
        for (wi, &w) in workers.iter().enumerate() {
            let times = one_round(&client, &local, dir, files, args.file_size, w, round)?;
            for (op, t) in times.into_iter().enumerate() {
                seconds[op][wi].push(t);
            }
        }
    }
    cluster.stop()?;

    let mut report = Report::new("tree");
    report.param("files", files);
    report.param("file_size", args.file_size);
    report.param("osds", args.osds);
    report.param("rounds", rounds);
    let mut series = Vec::new();
    for (op, name) in OPS.iter().enumerate() {
        let medians: Vec<f64> = seconds[op]
            .iter_mut()
            .map(|v| {
                v.sort_by(f64::total_cmp);
                percentile(v, 50.0)
            })
            .collect();
        for (wi, &w) in workers.iter().enumerate() {
            report.row(json!({"op": name, "workers": w, "seconds": medians[wi], "files_per_sec": files as f64 / medians[wi],
                "speedup_over_1": medians[0] / medians[wi]}));
        }
        let key = name.split_whitespace().next().unwrap_or(name);
        let last = workers.len() - 1;
        report.summary(&format!("{key}_files_per_sec_1"), files as f64 / medians[0]);
        report.summary(&format!("{key}_files_per_sec_{}", workers[last]), files as f64 / medians[last]);
        report.summary(&format!("{key}_speedup_{}_over_1", workers[last]), medians[0] / medians[last]);
        series.push(Series { name: name.to_string(), points: workers.iter().zip(&medians).map(|(&w, &s)| (w as f64, files as f64 / s)).collect() });
    }
    report.print_table(
        &format!("Tree commands: {files} files of {} bytes, files at once (1 = baseline)", args.file_size),
        &["op", "workers", "seconds", "files_per_sec", "speedup_over_1"],
    );
    report.print_summary();
    let paths = OutputPaths::resolve("tree", common.json.as_deref(), &common.out);
    report.write_json(&paths.json)?;
    let axes = Axes { title: "Tree commands against files at once", x_label: "files at once", y_label: "files/s", log_x: true, log_y: false };
    plot_lines(&paths.png, &axes, &series)?;
    println!("\nwrote {} and {}", paths.json.display(), paths.png.display());
    Ok(())
}

/// One pass of the four commands with `workers` at once; returns their seconds in [`OPS`] order.
fn one_round(client: &Client, local: &Path, dir: &Path, files: usize, size: u64, workers: usize, round: usize) -> Result<[f64; 4]> {
    let remote = format!("/r{round}-w{workers}");
    let copied = format!("{remote}-copy");
    let back = dir.join(format!("back-r{round}-w{workers}"));
    let timed = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let t = Instant::now();
        f()?;
        Ok(t.elapsed().as_secs_f64())
    };
    let put = timed(&mut || trees::put_tree(client, local, &remote, workers, &mut trees::Copied::default()))?;
    let get = timed(&mut || trees::get_tree(client, &remote, &back, workers, &mut trees::Copied::default()))?;
    // Every file came back whole: a bench that lost files would time the wrong work.
    ensure!(std::fs::read_dir(&back)?.count() == files, "get -r brought back the wrong number of files");
    for i in [0, files / 2, files - 1] {
        ensure!(std::fs::read(back.join(name(i)))? == content(i, size), "{} came back different", name(i));
    }
    let cp = timed(&mut || copy::copy_tree(client, &remote, &copied, 0o755, workers))?;
    ensure!(client.readdir(&copied)?.len() == files, "cp -r copied the wrong number of files");
    let rm = timed(&mut || namespace::remove(client, &remote, true, workers))?;
    namespace::remove(client, &copied, true, workers)?;
    std::fs::remove_dir_all(&back)?;
    Ok([put, get, cp, rm])
}

fn name(i: usize) -> String {
    format!("f{i:05}")
}

/// Bytes that differ between files and within each.
fn content(i: usize, size: u64) -> Vec<u8> {
    (0..size).map(|j| (j as usize).wrapping_mul(31).wrapping_add(i * 7) as u8).collect()
}
