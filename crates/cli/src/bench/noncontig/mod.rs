//! `tessera bench noncontig`: issue 4's experiments on native non-contiguous I/O, each in its own
//! file, all against real daemons in one run so every ratio has its baseline beside it:
//!
//! 1. [`fig10`]: seed 000 Fig. 10, iterative / SGL / strided against segment size, one OSD;
//! 2. [`model`]: seed 000 Fig. 8, the seed's model with its network and with this run's;
//! 3. [`small_pieces`]: 1024 pieces of 64 B (and larger) against one contiguous transfer;
//! 4. [`subarray`]: the BTIO shape, a 2-D subarray of a file striped over 4 OSDs (a real
//!    cluster: metadata server and OSD processes), native against iterative;
//! 5. [`memory`]: seed 003, pack vs gather vs hybrid for one WRITE of 128 scattered pieces;
//! 6. [`store`]: the target's side, per-piece system calls vs sieving.
//!
//! One JSON (every row tagged with its `experiment`, plus the `summary`) and one PNG per
//! experiment: `<name>.png` (Fig. 10 writes) and `<name>-<experiment>.png` beside it.

mod fig10;
mod memory;
mod model;
pub mod pattern;
mod small_pieces;
mod store;
mod subarray;
mod timing;

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use serde_json::Value;
use tessera_initiator::osd_client::GATHER_MIN_PIECE_BYTES;

use super::baseline::RawServer;
use super::pinning::{self, PinArgs};
use super::report::{plot_lines, Axes, OutputPaths, Report, Series};
use super::target::BenchTarget;
use super::CommonArgs;

#[derive(Args, Clone, Default)]
pub struct NoncontigArgs {
    /// Run only these experiments (comma-separated: fig10, small, subarray, memory, store; fig10 includes
    /// the model). The summary then holds NaN for what was skipped.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(EXPERIMENTS))]
    only: Vec<String>,
    #[command(flatten)]
    pin: PinArgs,
}

/// The experiments `--only` may name.
const EXPERIMENTS: [&str; 5] = ["fig10", "small", "subarray", "memory", "store"];

impl NoncontigArgs {
    fn wants(&self, experiment: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == experiment)
    }
}

/// The goals.
const GOAL_SPEEDUP_64B: f64 = 50.0;
const GOAL_1024X64B: f64 = 1.5;
const GOAL_4KIB: f64 = 1.1;

pub fn run(args: NoncontigArgs, common: &CommonArgs) -> Result<()> {
    let quick = common.quick;
    let paths = OutputPaths::resolve("noncontig", common.json.as_deref(), &common.out);
    let mut report = Report::new("noncontig");
    report.param("quick", quick);
    report.param("pinned", if common.target.is_some() { "no (--target: a daemon this bench did not start)".into() } else { pinning::apply(&args.pin)? });
    let target = BenchTarget::start(common)?;
    report.param("target", target.addr.clone());
    let client = target.client()?;
    let raw = RawServer::start()?;
    let mut raw_client = raw.connect()?;
    let network = model::measure(&mut raw_client, quick)?;

    let (mut speedup_w, mut speedup_r) = (f64::NAN, f64::NAN);
    if args.wants("fig10") {
        let mut r = Report::new("fig10");
        let points = fig10::run(&client, quick, &mut r)?;
        absorb(&mut report, "fig10", r);
        for (png, read) in [(paths.png.clone(), false), (sibling(&paths.png, "read"), true)] {
            let series = fig10_series(&points, read);
            let title = if read { "Seed 000 Fig. 10 (read): 2-byte holes, one OSD" } else { "Seed 000 Fig. 10 (write): 2-byte holes, one OSD" };
            plot_lines(&png, &Axes { title, x_label: "segment size (bytes)", y_label: "MiB/s of data (log)", log_x: true, log_y: true }, &series)?;
        }
        (speedup_w, speedup_r) = fig10::speedup(&points, 64);

        let mut r = Report::new("model");
        let series = model::run(&points, network, &mut r);
        absorb(&mut report, "model", r);
        let axes = Axes { title: "Seed 000 Fig. 8: model (seed's and this run's network) beside measured writes", x_label: "segment size (bytes)", y_label: "MiB/s (log)", log_x: true, log_y: true };
        plot_lines(&sibling(&paths.png, "model"), &axes, &series)?;
    }

    let mut ratios = Vec::new();
    if args.wants("small") {
        let mut r = Report::new("small");
        let series;
        (ratios, series) = small_pieces::run(&client, quick, &mut r)?;
        absorb(&mut report, "small", r);
        let axes = Axes { title: "1024 pieces at a 16x stride: time over one contiguous transfer", x_label: "piece size (bytes)", y_label: "time ratio", log_x: true, log_y: false };
        plot_lines(&sibling(&paths.png, "small"), &axes, &series)?;
    }

    if args.wants("subarray") {
        let mut r = Report::new("subarray");
        let sub = subarray::run(quick, &mut r)?;
        absorb(&mut report, "subarray", r);
        let axes = Axes { title: "BTIO shape over 4 OSDs: iterative time / native time", x_label: "array side N (doubles)", y_label: "speed-up", log_x: true, log_y: false };
        plot_lines(&sibling(&paths.png, "subarray"), &axes, &sub.series)?;
        report.summary("subarray_4osd_native_over_iterative_write", sub.write_speedup);
        report.summary("subarray_4osd_native_over_iterative_read", sub.read_speedup);
    }

    if args.wants("memory") {
        let mut r = Report::new("memory");
        let mem = memory::run(&client, quick, &mut r)?;
        absorb(&mut report, "memory", r);
        let axes = Axes { title: "Seed 003: one WRITE of 128 scattered pieces", x_label: "piece size (bytes)", y_label: "MiB/s", log_x: true, log_y: false };
        plot_lines(&sibling(&paths.png, "memory"), &axes, &mem.series)?;
        report.summary("pack_gather_crossover_bytes", mem.crossover_bytes.map_or(Value::Null, Value::from));
        report.summary("hybrid_over_best", mem.hybrid_over_best);
    }

    if args.wants("store") {
        let mut r = Report::new("store");
        let st = store::run(quick, &mut r)?;
        absorb(&mut report, "store", r);
        let axes = Axes { title: "Target side: 64-byte pieces, us per piece against the gap between them", x_label: "gap (bytes)", y_label: "us per piece (log)", log_x: true, log_y: true };
        plot_lines(&sibling(&paths.png, "store"), &axes, &st.series)?;
        report.summary("store_write_sieve_wins_to_gap_bytes", st.write_sieve_wins_to.map_or(Value::Null, Value::from));
        report.summary("store_read_through_gaps_wins_to_gap_bytes", st.read_through_wins_to.map_or(Value::Null, Value::from));
    }

    let at = |piece: u64| ratios.iter().find(|r| r.piece == piece).copied();
    let (w64, r64) = at(64).map_or((f64::NAN, f64::NAN), |r| (r.native_write, r.native_read));
    let (w4k, r4k) = at(4096).map_or((f64::NAN, f64::NAN), |r| (r.native_write, r.native_read));
    let speedup = speedup_w.min(speedup_r);
    report.summary("native_over_iterative_64B", speedup);
    report.summary("native_over_iterative_64B_write", speedup_w);
    report.summary("native_over_iterative_64B_read", speedup_r);
    report.summary("list_over_contig_1024x64B_write", w64);
    report.summary("list_over_contig_1024x64B_read", r64);
    report.summary("list_over_contig_4KiB", w4k.max(r4k));
    report.summary("list_over_contig_4KiB_write", w4k);
    report.summary("list_over_contig_4KiB_read", r4k);
    report.summary("goal_native_over_iterative_64B_at_least_50x", judged(&[speedup], speedup >= GOAL_SPEEDUP_64B));
    report.summary("goal_1024x64B_within_1_5x", judged(&[w64, r64], w64 <= GOAL_1024X64B && r64 <= GOAL_1024X64B));
    report.summary("goal_4KiB_within_1_1x", judged(&[w4k, r4k], w4k.max(r4k) <= GOAL_4KIB));
    report.summary("gather_min_piece_bytes", GATHER_MIN_PIECE_BYTES);
    report.summary("local_rtt_us", network.rtt_s * 1e6);
    report.summary("local_bandwidth_mib_s", network.bytes_per_s / (1 << 20) as f64);
    report.print_summary();
    report.write_json(&paths.json)?;
    println!("\nwrote {} and the PNGs beside it", paths.json.display());
    Ok(())
}

/// A goal's verdict, or null when an experiment it needs did not run (`--only`): a goal that
/// was not measured is neither met nor missed.
fn judged(inputs: &[f64], met: bool) -> Value {
    if inputs.iter().any(|v| v.is_nan()) {
        Value::Null
    } else {
        Value::from(met)
    }
}

/// Moves an experiment's rows into the run's report, each tagged with the experiment.
fn absorb(report: &mut Report, experiment: &str, part: Report) {
    for mut row in part.rows {
        row.insert("experiment".into(), experiment.into());
        report.rows.push(row);
    }
    for (k, v) in part.params {
        report.params.insert(format!("{experiment}.{k}"), v);
    }
}

/// `dir/name-suffix.png` beside `dir/name.png`.
fn sibling(png: &Path, suffix: &str) -> PathBuf {
    let stem = png.file_stem().and_then(|s| s.to_str()).unwrap_or("noncontig");
    png.with_file_name(format!("{stem}-{suffix}.png"))
}

fn fig10_series(points: &[fig10::Point], read: bool) -> Vec<Series> {
    let mut out = Vec::new();
    for total in fig10::totals(false) {
        for (_, mode) in fig10::MODES {
            let pts: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.total == total && p.mode == mode)
                .map(|p| (p.segment as f64, if read { p.read_mib_s } else { p.write_mib_s }))
                .collect();
            if !pts.is_empty() {
                out.push(Series { name: format!("{mode}, {} MiB", total >> 20), points: pts });
            }
        }
    }
    out
}
