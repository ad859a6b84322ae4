//! `tessera bench io` through the file system: the transfer-size sweep and the OSD-count sweep
//! on loopback, the OSD-count sweep again in namespaces with `--netns`; one table per sweep,
//! one JSON report, one PNG with a chart per sweep.
//!
//! MiB/s are totals over all rounds; `*_over_raw` are medians of each round's paired ratio
//! (raw time / file-system time), which a drifting machine cannot skew through one slow round;
//! `*_of_links` divide by N x the link rate.

use anyhow::{bail, Result};
use serde_json::Value;

use super::super::report::{plot_panels, Axes, OutputPaths, Report, Series};
use super::super::CommonArgs;
use super::osd_sweep::{self, Plan};
use super::site::{Site, STRIPE_UNIT};
use super::{size_sweep, IoArgs, Measured, MIB};

/// The efficiency goal at 8 OSDs behind 1 Gbit/s links (issue 3).
const LINK_GOAL: f64 = 0.90;

pub fn run(args: &IoArgs, common: &CommonArgs) -> Result<()> {
    let mut counts: Vec<u32> = if common.quick { args.osds.iter().copied().filter(|&n| n <= 4).collect() } else { args.osds.clone() };
    counts.sort_unstable();
    counts.dedup();
    if counts.is_empty() || counts[0] == 0 {
        bail!("--osds needs counts of at least 1 (e.g. 1,2,4,8)");
    }
    let max = *counts.last().expect("not empty");
    let budget = if common.quick { args.bytes_per_point.min(32 * MIB as u64) } else { args.bytes_per_point } as usize;
    let chunk = if common.quick { args.osd_call_bytes.min(4 * MIB as u64) } else { args.osd_call_bytes }.max(1);
    let per_osd = if common.quick { args.bytes_per_osd.min(8 * MIB as u64) } else { args.bytes_per_osd }.max(chunk);
    let plan = Plan { counts: &counts, per_osd, chunk, rounds: if common.quick { 1 } else { 3 } };

    let mut report = Report::new("io");
    report.param("mode", "file-system");
    report.param("stripe_unit", STRIPE_UNIT);
    report.param("bytes_per_point", budget);
    report.param("osd_counts", counts.clone());
    report.param("bytes_per_osd_per_pass", per_osd);
    report.param("bytes_per_osd_per_call", chunk);
    report.param("rounds", plan.rounds);
    // Other tenants' load changes throughput on a shared machine (not the CPU cost per GiB).
    report.param("load_average_at_start", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());

    let loopback = Site::loopback(max)?;
    report.param("loopback_osds", loopback.osd_addrs());
    let sizes = size_sweep::run(&loopback, &size_sweep::sizes(common.quick), budget, &mut report)?;
    let local = osd_sweep::run(&loopback, &plan, &mut report)?;
    drop(loopback);
    let spread = if args.netns {
        let site = Site::namespaces(max, args.rate)?;
        report.param("netns_rate", args.rate.to_string());
        report.param("netns_osds", site.osd_addrs());
        report.param("netns_client_link", "unlimited");
        report.param("netns_mds_link", "unlimited");
        Some(osd_sweep::run(&site, &plan, &mut report)?)
    } else {
        None
    };

    report.param("load_average_at_end", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    print_tables(&report, args);
    summarize(&mut report, &sizes, &local, spread.as_deref(), args);
    report.print_summary();
    let paths = OutputPaths::resolve("io", common.json.as_deref(), &common.out);
    report.write_json(&paths.json)?;
    plot(&paths.png, &sizes, &local, spread.as_deref(), args)?;
    println!("\nwrote {} and {}", paths.json.display(), paths.png.display());
    Ok(())
}

fn is_sweep(sweep: &'static str) -> impl Fn(&serde_json::Map<String, Value>) -> bool {
    move |row| row.get("sweep").and_then(Value::as_str) == Some(sweep)
}

fn print_tables(report: &Report, args: &IoArgs) {
    let rates = ["fs_write_mib_s", "fs_write_fsync_mib_s", "fs_read_mib_s", "raw_write_mib_s", "raw_read_mib_s", "write_over_raw", "read_over_raw"];
    let with = |first: &'static str| -> Vec<&str> { std::iter::once(first).chain(rates).collect() };
    report.print_table_where(
        "File system, one OSD: throughput (MiB/s) against transfer size (seed 000 Fig. 9), beside raw TCP",
        &with("size_bytes"),
        is_sweep("size"),
    );
    report.print_table_where(
        "File system on loopback: aggregate throughput (MiB/s) against OSDs (seed 002 slides, aggregate I/O)",
        &with("osds"),
        is_sweep("osds/loopback"),
    );
    report.print_table_where(
        "  ... CPU seconds per GiB moved (bench process + daemons), file system and raw TCP",
        &["osds", "fs_write_cpu_s_per_gib", "fs_read_cpu_s_per_gib", "raw_write_cpu_s_per_gib", "raw_read_cpu_s_per_gib"],
        is_sweep("osds/loopback"),
    );
    if args.netns {
        report.print_table_where(
            &format!("File system, every daemon on its own namespace, OSD links {}: aggregate throughput (MiB/s)", args.rate),
            &with("osds"),
            is_sweep("osds/netns"),
        );
        report.print_table_where(
            "  ... CPU seconds per GiB moved (bench process + daemons), file system and raw TCP",
            &["osds", "fs_write_cpu_s_per_gib", "fs_read_cpu_s_per_gib", "raw_write_cpu_s_per_gib", "raw_read_cpu_s_per_gib"],
            is_sweep("osds/netns"),
        );
        report.print_table_where(
            "  ... the same as fractions of N x link rate",
            &["osds", "links_mib_s", "write_of_links", "write_fsync_of_links", "read_of_links", "raw_write_of_links", "raw_read_of_links"],
            is_sweep("osds/netns"),
        );
    }
}

fn summarize(report: &mut Report, sizes: &[Measured], local: &[Measured], spread: Option<&[Measured]>, args: &IoArgs) {
    let biggest_common = [16 * MIB, MIB].into_iter().find(|&s| size_sweep::at(sizes, s).is_some());
    if let Some(p) = biggest_common.and_then(|s| size_sweep::at(sizes, s)) {
        let tag = if p.x as usize == 16 * MIB { "16MiB" } else { "1MiB" };
        report.summary(&format!("fs_write_over_raw_{tag}"), p.write_over_raw);
        report.summary(&format!("fs_read_over_raw_{tag}"), p.read_over_raw);
        report.summary(&format!("fs_write_mib_s_{tag}"), p.write);
        report.summary(&format!("fs_write_fsync_mib_s_{tag}"), p.write_fsync);
        report.summary(&format!("fs_read_mib_s_{tag}"), p.read);
    }
    if let (Some(first), Some(last)) = (local.first(), local.last()) {
        let n = last.x as u32;
        report.summary(&format!("loopback_write_mib_s_at_{n}"), last.write);
        report.summary(&format!("loopback_read_mib_s_at_{n}"), last.read);
        report.summary(&format!("loopback_write_over_raw_at_{n}"), last.write_over_raw);
        report.summary(&format!("loopback_read_over_raw_at_{n}"), last.read_over_raw);
        report.summary(&format!("loopback_write_{n}_over_{}", first.x as u32), last.write / first.write);
    }
    if let Some(last) = spread.and_then(|s| s.last()) {
        let n = last.x as u32;
        let link = n as f64 * args.rate.mib_per_sec();
        let (w, r) = (last.write / link, last.read / link);
        report.summary(&format!("netns_write_efficiency_at_{n}"), w);
        report.summary(&format!("netns_write_fsync_efficiency_at_{n}"), last.write_fsync / link);
        report.summary(&format!("netns_read_efficiency_at_{n}"), r);
        report.summary(&format!("netns_raw_write_efficiency_at_{n}"), last.raw_write / link);
        report.summary(&format!("netns_raw_read_efficiency_at_{n}"), last.raw_read / link);
        report.summary(&format!("netns_efficiency_at_{n}"), w.min(r));
        report.summary(&format!("goal_netns_{}pct_at_{n}", (LINK_GOAL * 100.0) as u32), w.min(r) >= LINK_GOAL);
        if let Some(cpu) = last.cpu {
            // What this machine's cores could carry if the stack had them all to itself.
            let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1) as f64;
            report.summary(&format!("netns_fs_write_cpu_s_per_gib_at_{n}"), cpu.write);
            report.summary(&format!("netns_fs_read_cpu_s_per_gib_at_{n}"), cpu.read);
            report.summary(&format!("netns_raw_write_cpu_s_per_gib_at_{n}"), cpu.raw_write);
            report.summary(&format!("netns_raw_read_cpu_s_per_gib_at_{n}"), cpu.raw_read);
            report.summary(&format!("netns_fs_cpu_ceiling_of_links_at_{n}"), cores * 1024.0 / cpu.write.max(cpu.read) / link);
        }
    }
}

fn series(points: &[Measured], prefix: &str) -> Vec<Series> {
    let line = |name: &str, f: fn(&Measured) -> f64| Series { name: format!("{prefix}{name}"), points: points.iter().map(|p| (p.x, f(p))).collect() };
    vec![
        line("write", |p| p.write),
        line("write+fsync", |p| p.write_fsync),
        line("read", |p| p.read),
        line("raw TCP send", |p| p.raw_write),
        line("raw TCP receive", |p| p.raw_read),
    ]
}

fn plot(path: &std::path::Path, sizes: &[Measured], local: &[Measured], spread: Option<&[Measured]>, args: &IoArgs) -> Result<()> {
    let size_axes = Axes { title: "One OSD: throughput vs transfer size", x_label: "transfer size (bytes)", y_label: "MiB/s (log)", log_x: true, log_y: true };
    let local_axes = Axes { title: "Loopback: aggregate vs OSDs", x_label: "OSDs", y_label: "MiB/s", log_x: false, log_y: false };
    let title = format!("Namespaces, {} per OSD: aggregate vs OSDs", args.rate);
    let spread_axes = Axes { title: &title, x_label: "OSDs", y_label: "MiB/s", log_x: false, log_y: false };
    let size_series = series(sizes, "");
    let local_series = series(local, "");
    let mut panels: Vec<(&Axes<'_>, &[Series])> = vec![(&size_axes, &size_series), (&local_axes, &local_series)];
    let spread_series = spread.map(|points| {
        let mut s = series(points, "");
        s.push(Series { name: format!("N x {}", args.rate), points: points.iter().map(|p| (p.x, p.x * args.rate.mib_per_sec())).collect() });
        s
    });
    if let Some(s) = &spread_series {
        panels.push((&spread_axes, s));
    }
    plot_panels(path, &panels)
}
