//! `tessera bench meta`: metadata operations on a real cluster (one `tessera mds`, `--osds`
//! `tessera osd` processes, loopback), after the seed's slides (002): "Create Latency" (one
//! client, varying I/O elements), "Create Throughput" (one I/O element, varying clients) and
//! "Stat Microbenchmark" (one client, varying I/O elements).
//!
//! - Clients sweep: for 1, 2, 4, 8 clients (each its own [`Client`], so its own connections,
//!   on its own thread), every client creates, then stats, then removes its files in one
//!   shared directory striped over `--stripe-count` OSDs (1 like the seed's "1 I/O
//!   element"). Each operation is one request through an open directory handle ([`Dir`]), as
//!   a kernel client with a warm dentry cache sends it; "create by path" repeats the creates
//!   through `Client::create(path)`, which walks the path from the root first. A server
//!   answers an unlink once the namespace change is durable and removes the file's objects
//!   after (`tessera_mds::reaper`): "remove" times the answers, "remove, objects gone" the
//!   same removals until the servers report no object left awaiting removal. Every phase
//!   starts once none is left, so it does not share the machine with that work.
//! - Stripe sweep: one client creates, stats, lists and removes files striped over 1..=N
//!   OSDs. A stat reads every object's length, so it grows with the stripe count; a create
//!   need not. A listing (readdir with attributes) reads the same lengths for a whole page of
//!   files at once; its entries per second are set against the stats per second of the same
//!   files, the baseline of one request per file.
//! - Baselines, same run: a raw durable SQLite insert on the same disk with the server's
//!   settings, and an empty round trip to the metadata server from the same number of clients
//!   (`baseline.rs`).
//! - Paced creates: one client pausing between creates, against its creates back to back: the
//!   server's CPU per create when requests come farther apart than its polling (`paced.rs`).
//! - The seed's configuration, same run: the creates of the largest client count (at most 4)
//!   repeated on a cluster kept on a RAM-backed file system (`ram.rs`), as the slides' "RAM-
//!   mounted to eliminate disk effects".

mod baseline;
mod paced;
mod phase;
mod ram;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use tessera_client::{Client, Dir, FileType, StripeHint};

use super::report::{plot_lines, Axes, OutputPaths, Report, Series};
use super::CommonArgs;
use crate::cluster::{ClusterSpec, LocalCluster};
use crate::units::parse_positive;

/// Stripe unit of every bench file (no data is written; it only shapes the layout).
const STRIPE_UNIT: u64 = 1 << 20;
/// Untimed creates and unlinks per client before a sweep point.
const WARMUP: usize = 20;
/// Listings of each stripe sweep point's directory.
const LISTINGS: usize = 3;
/// Creates of each kind in the paced section (each paced one waits [`paced::PAUSE`] first).
const PACED_FILES: usize = 2000;

#[derive(Args, Clone)]
pub struct MetaArgs {
    /// OSDs in the cluster (the stripe sweep goes from 1 to this many).
    #[arg(long, default_value_t = 4)]
    osds: u32,
    /// Client counts of the clients sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4, 8])]
    clients: Vec<usize>,
    /// Files each client creates, stats and removes per client count.
    #[arg(long, default_value_t = 5000, value_parser = parse_positive)]
    files_per_client: usize,
    /// OSDs each file of the clients sweep stripes over.
    #[arg(long, default_value_t = 1)]
    stripe_count: u32,
    /// Files per stripe count in the stripe sweep.
    #[arg(long, default_value_t = 1000, value_parser = parse_positive)]
    stripe_files: usize,
    /// Empty directory for the cluster and the SQLite baseline (default: a temporary one). Its
    /// disk is the one measured.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// RAM-backed directory for the seed's RAM-mounted repeat of the creates (default /dev/shm
    /// when it is tmpfs); `none` skips it.
    #[arg(long)]
    ram_dir: Option<PathBuf>,
}

/// The most clients one sweep point may have: each is a thread of this one process with a
/// metadata-server connection of its own, and past a thousand on one host the sweep would
/// measure the host's scheduler rather than the server.
const CLIENTS_MAX: usize = 1024;

/// One client of a sweep: its number (for unique names), the client and its open directory.
type Worker = (usize, Client, Dir);

pub fn run(args: MetaArgs, common: &CommonArgs) -> Result<()> {
    if common.target.is_some() {
        bail!("bench meta starts its own cluster (one metadata server, --osds OSDs); --target does not apply");
    }
    if args.osds == 0 || args.stripe_count == 0 || args.stripe_count > args.osds {
        bail!("need 1 <= --stripe-count ({}) <= --osds ({})", args.stripe_count, args.osds);
    }
    if args.clients.is_empty() || args.clients.contains(&0) {
        bail!("--clients needs one or more counts above zero");
    }
    if let Some(n) = args.clients.iter().find(|&&n| n > CLIENTS_MAX) {
        bail!("--clients {n}: at most {CLIENTS_MAX} (each client is a thread of this one process, with a connection of its own)");
    }
    let files = if common.quick { args.files_per_client.min(100) } else { args.files_per_client };
    let stripe_files = if common.quick { args.stripe_files.min(50) } else { args.stripe_files };
    let (_tmp, dir) = bench_dir(args.dir.as_deref())?;
    let ram_dir = ram::ram_dir(args.ram_dir.as_deref())?;

    let mut report = Report::new("meta");
    report.param("osds", args.osds);
    report.param("files_per_client", files);
    report.param("stripe_count", args.stripe_count);
    report.param("stripe_unit", STRIPE_UNIT);
    report.param("stripe_files", stripe_files);
    report.param("dir", dir.display().to_string());

    let sqlite = baseline::sqlite_durable_inserts(&dir, files.max(200))?;
    let flush = baseline::disk_flushes(&dir, files.max(200))?;
    for (op, p) in [("sqlite durable insert", &sqlite), ("disk flush (4 KiB + fdatasync)", &flush)] {
        report.row(json!({"section": "baseline", "op": op, "clients": 1,
            "ops_per_sec": p.ops_per_sec(), "median_us": p.median_us(), "p99_us": p.p99_us()}));
    }
    report.summary("sqlite_durable_tx_per_sec", sqlite.ops_per_sec());
    report.summary("sqlite_durable_tx_median_us", sqlite.median_us());
    report.summary("disk_flush_median_us", flush.median_us());

    let exe = std::env::current_exe().context("finding the tessera executable")?;
    let spec = ClusterSpec { stripe_unit: STRIPE_UNIT, stripe_count: 1, ..ClusterSpec::new(args.osds) };
    let cluster = LocalCluster::start_spec(&exe, &dir.join("cluster"), &spec)?;
    let config = cluster.config().clone();
    let mds_pid = cluster.records().iter().find(|r| r.role == "mds").map(|r| r.pid).context("the cluster has no metadata server")?;
    let admin = Client::connect(&config)?;

    let mut create_points = Vec::new();
    let mut stat_points = Vec::new();
    let mut remove_points = Vec::new();
    let mut trip_points = Vec::new();
    let mut path_points = Vec::new();
    for &k in &args.clients {
        let top = format!("/clients{k}");
        let workers = open_workers(&admin, &config, &top, k, args.stripe_count)?;
        let trips = baseline::mds_round_trips(&config, k, files)?;
        let (create, create_cpu) = phase::with_cpu_of(mds_pid, || {
            phase::run(&workers, files, |(c, _, d), i| {
                d.create(&name(*c, i), 0o644, None)?;
                Ok(())
            })
        })?;
        let mds_us_per_create = create_cpu.as_secs_f64() * 1e6 / create.ops as f64;
        let stat = phase::run(&workers, files, |(c, _, d), i| {
            let a = d.stat(&name(*c, i))?;
            anyhow::ensure!(a.file_type == FileType::Regular && a.size == 0, "{top}/{}: unexpected {a:?}", name(*c, i));
            Ok(())
        })?;
        let remove = phase::run(&workers, files, |(c, _, d), i| Ok(d.unlink(&name(*c, i))?))?;
        // Until the objects are off the OSDs too: the unlinks' whole cost.
        let removed = remove.ops as f64 / (remove.wall + phase::until_objects_removed(&admin)?).as_secs_f64();
        // The same creates by path: the client walks from the root (one lookup per component)
        // before each create, as `Client::create` does without a directory handle.
        let by_path = phase::run(&workers, files, |(c, client, _), i| {
            client.create(&format!("{top}/{}", name(*c, i)), 0o644, None)?;
            Ok(())
        })?;
        phase::run(&workers, files, |(c, _, d), i| Ok(d.unlink(&name(*c, i))?))?;
        phase::until_objects_removed(&admin)?;
        for (op, p) in [("round trip", &trips), ("create", &create), ("stat", &stat), ("remove", &remove), ("create by path", &by_path)] {
            let mut row = json!({"section": "clients", "op": op, "clients": k, "stripe_count": args.stripe_count,
                "ops_per_sec": p.ops_per_sec(), "median_us": p.median_us(), "p99_us": p.p99_us(),
                "over_round_trip": p.ops_per_sec() / trips.ops_per_sec()});
            if op == "create" {
                row["mds_cpu_us_per_op"] = json!(mds_us_per_create);
            }
            report.row(row);
            if op == "remove" {
                report.row(json!({"section": "clients", "op": "remove, objects gone", "clients": k, "stripe_count": args.stripe_count,
                    "ops_per_sec": removed, "over_round_trip": removed / trips.ops_per_sec()}));
            }
        }
        report.summary(&format!("creates_per_sec_{k}_clients"), create.ops_per_sec());
        report.summary(&format!("mds_cpu_us_per_create_{k}_clients"), mds_us_per_create);
        report.summary(&format!("creates_by_path_per_sec_{k}_clients"), by_path.ops_per_sec());
        report.summary(&format!("stats_per_sec_{k}_clients"), stat.ops_per_sec());
        report.summary(&format!("removes_per_sec_{k}_clients"), remove.ops_per_sec());
        report.summary(&format!("removes_with_objects_gone_per_sec_{k}_clients"), removed);
        report.summary(&format!("round_trips_per_sec_{k}_clients"), trips.ops_per_sec());
        report.summary(&format!("create_median_us_{k}_clients"), create.median_us());
        report.summary(&format!("create_p99_us_{k}_clients"), create.p99_us());
        report.summary(&format!("creates_over_round_trips_{k}_clients"), create.ops_per_sec() / trips.ops_per_sec());
        report.summary(&format!("creates_over_sqlite_tx_{k}_clients"), create.ops_per_sec() / sqlite.ops_per_sec());
        create_points.push((k as f64, create.ops_per_sec()));
        stat_points.push((k as f64, stat.ops_per_sec()));
        remove_points.push((k as f64, remove.ops_per_sec()));
        trip_points.push((k as f64, trips.ops_per_sec()));
        path_points.push((k as f64, by_path.ops_per_sec()));
        admin.rmdir(&top)?;
    }
    let paced = paced::creates(&admin, &config, mds_pid, files.min(PACED_FILES))?;
    let pause_us = paced::PAUSE.as_micros();
    for (op, p, cpu) in [("create, back to back", &paced.back_to_back, paced.back_to_back_cpu_us), (&*format!("create, {pause_us} us apart"), &paced.paced, paced.paced_cpu_us)] {
        report.row(json!({"section": "paced", "op": op, "clients": 1, "stripe_count": 1,
            "ops_per_sec": p.ops_per_sec(), "median_us": p.median_us(), "p99_us": p.p99_us(), "mds_cpu_us_per_op": cpu}));
    }
    report.summary("mds_cpu_us_per_create_back_to_back", paced.back_to_back_cpu_us);
    report.summary("mds_cpu_us_per_create_paced", paced.paced_cpu_us);
    report.summary("paced_over_back_to_back_mds_cpu", paced.paced_cpu_us / paced.back_to_back_cpu_us);
    report.summary("create_median_us_paced", paced.paced.median_us());
    // Where the server's event loop ran (`tessera mds --loop-cpus`), as the kernel has it.
    let loop_cpus = crate::bench::pinning::cpus_of_thread_named(mds_pid, "mds-loop")?;
    report.param("mds_loop_cpus", loop_cpus.map_or("unknown".into(), |c| tessera_mds::cpus::format_list(&c)));
    if let Some(rate) = report.summary.get("creates_per_sec_4_clients").and_then(|v| v.as_f64()) {
        report.summary("goal_20000_creates_per_sec_4_clients", rate >= 20_000.0);
    }

    let mut stripe_series = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for count in 1..=args.osds {
        let top = format!("/stripes{count}");
        let workers = open_workers(&admin, &config, &top, 1, count)?;
        let create = phase::run(&workers, stripe_files, |(c, _, d), i| {
            d.create(&name(*c, i), 0o644, None)?;
            Ok(())
        })?;
        let stat = phase::run(&workers, stripe_files, |(c, _, d), i| Ok(d.stat(&name(*c, i)).map(drop)?))?;
        // The same attributes for every file at once: a listing, against the stats above.
        let listing = phase::run(&workers, LISTINGS, |(_, _, d), _| {
            let entries = d.readdir()?;
            anyhow::ensure!(entries.len() == stripe_files, "{top}: listed {} entries of {stripe_files}", entries.len());
            Ok(())
        })?;
        let remove = phase::run(&workers, stripe_files, |(c, _, d), i| Ok(d.unlink(&name(*c, i))?))?;
        phase::until_objects_removed(&admin)?;
        for (series, (op, p)) in stripe_series.iter_mut().zip([("create", &create), ("stat", &stat), ("remove", &remove)]) {
            report.row(json!({"section": "stripes", "op": op, "clients": 1, "stripe_count": count,
                "ops_per_sec": p.ops_per_sec(), "median_us": p.median_us(), "p99_us": p.p99_us()}));
            series.push((count as f64, p.median_us()));
            report.summary(&format!("{op}_median_us_stripes_{count}"), p.median_us());
        }
        let entries_per_sec = listing.ops_per_sec() * stripe_files as f64;
        let entry_us = listing.median_us() / stripe_files as f64;
        report.row(json!({"section": "stripes", "op": "readdir, per entry", "clients": 1, "stripe_count": count,
            "ops_per_sec": entries_per_sec, "median_us": entry_us, "over_stat": entries_per_sec / stat.ops_per_sec()}));
        stripe_series[3].push((count as f64, entry_us));
        report.summary(&format!("readdir_entries_per_sec_stripes_{count}"), entries_per_sec);
        report.summary(&format!("readdir_entries_over_stats_stripes_{count}"), entries_per_sec / stat.ops_per_sec());
        admin.rmdir(&top)?;
    }
    cluster.stop()?;

    // The seed's RAM-mounted configuration, at the goal's 4 clients (or fewer if not swept).
    let ram_clients = args.clients.iter().copied().filter(|&k| k <= 4).max();
    if let (Some(ram), Some(k)) = (&ram_dir, ram_clients) {
        let run = ram::creates(&exe, ram, args.osds, k, files, args.stripe_count)?;
        let c = &run.create;
        report.row(json!({"section": "ram-mounted", "op": "create", "clients": k, "stripe_count": args.stripe_count,
            "ops_per_sec": c.ops_per_sec(), "median_us": c.median_us(), "p99_us": c.p99_us(), "mds_cpu_us_per_op": run.mds_cpu_us_per_create}));
        report.summary(&format!("creates_per_sec_{k}_clients_ram_mounted"), c.ops_per_sec());
        report.summary(&format!("mds_cpu_us_per_create_{k}_clients_ram_mounted"), run.mds_cpu_us_per_create);
        if k == 4 {
            report.summary("goal_20000_creates_per_sec_4_clients_ram_mounted", c.ops_per_sec() >= 20_000.0);
        }
        report.param("ram_dir", ram.display().to_string());
    }
    // The most this disk allows four clients that each wait for their reply: a group holds at
    // most their four creates and pays one flush plus the server's own work for the four (its
    // CPU per create RAM-mounted, where a flush costs next to nothing). The clients' CPU and
    // the wake-ups only add to a round (docs/benchmarks.md, "Every goal again on a new machine").
    let number = |key: &str| report.summary.get(key).and_then(|v| v.as_f64());
    if let (Some(cpu), Some(flush)) = (number("mds_cpu_us_per_create_4_clients_ram_mounted"), number("disk_flush_median_us")) {
        report.summary("disk_ceiling_creates_per_sec_4_clients", 4.0 / ((flush + 4.0 * cpu) * 1e-6));
    }

    report.print_table(
        "Metadata operations (seed 002 slides: create latency, create throughput, stat against I/O elements)",
        &["section", "op", "clients", "stripe_count", "ops_per_sec", "median_us", "p99_us", "over_round_trip", "over_stat", "mds_cpu_us_per_op"],
    );
    report.print_summary();
    let paths = OutputPaths::resolve("meta", common.json.as_deref(), &common.out);
    report.write_json(&paths.json)?;
    let series = |name: &str, points: Vec<(f64, f64)>| Series { name: name.into(), points };
    plot_lines(
        &paths.png,
        &Axes { title: "Metadata operations per second against clients", x_label: "clients", y_label: "operations/s", log_x: true, log_y: true },
        &[
            series("empty MDS round trip", trip_points),
            series(&format!("create ({} OSD per file)", args.stripe_count), create_points),
            series("create by path (walk from the root)", path_points),
            series("stat", stat_points),
            series("remove", remove_points),
        ],
    )?;
    let stripes_png = stripes_plot_path(&paths.png);
    let [create, stat, remove, listed] = stripe_series;
    plot_lines(
        &stripes_png,
        &Axes { title: "Median latency against stripe count (1 client)", x_label: "stripe count (OSDs per file)", y_label: "latency (us)", log_x: false, log_y: false },
        &[series("create", create), series("stat", stat), series("remove", remove), series("readdir, per entry", listed)],
    )?;
    println!("\nwrote {}, {} and {}", paths.json.display(), paths.png.display(), stripes_png.display());
    Ok(())
}

fn name(client: usize, i: usize) -> String {
    format!("f{client}-{i}")
}

/// `meta.png` -> `meta-stripes.png`.
fn stripes_plot_path(png: &Path) -> PathBuf {
    let stem = png.file_stem().and_then(|s| s.to_str()).unwrap_or("meta");
    png.with_file_name(format!("{stem}-stripes.png"))
}

/// Makes `top` striped over `stripe_count` OSDs and opens it from `k` separate clients, each
/// warmed up by [`WARMUP`] creates and unlinks (connections open, caches fill, the server's
/// pools are made, all outside the timed phases).
fn open_workers(admin: &Client, config: &tessera_client::ClusterConfig, top: &str, k: usize, stripe_count: u32) -> Result<Vec<Worker>> {
    admin.mkdir(top, 0o755)?;
    admin.setstripe(top, Some(StripeHint { stripe_unit: STRIPE_UNIT, stripe_count, start_osd: None }))?;
    (0..k)
        .map(|c| {
            let client = Client::connect(config)?;
            let dir = client.open_dir(top)?;
            for i in 0..WARMUP {
                let warm = format!("warm{c}-{i}");
                dir.create(&warm, 0o644, None)?;
                dir.unlink(&warm)?;
            }
            Ok((c, client, dir))
        })
        .collect::<Result<Vec<Worker>>>()
        .and_then(|workers| {
            phase::until_objects_removed(admin)?;
            Ok(workers)
        })
}

/// The directory to work in: the one given (must be empty or absent), or a fresh temporary one
/// (returned too, so it lives until the bench ends).
fn bench_dir(given: Option<&Path>) -> Result<(Option<tempfile::TempDir>, PathBuf)> {
    match given {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            if std::fs::read_dir(d)?.next().is_some() {
                bail!("{} is not empty; bench meta needs a fresh directory", d.display());
            }
            Ok((None, d.to_path_buf()))
        }
        None => {
            let t = crate::children::scratch_dir("tessera-bench-meta-", None)?;
            let p = t.path().to_path_buf();
            Ok((Some(t), p))
        }
    }
}
