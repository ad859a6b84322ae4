//! `tessera bench io --target-only`: READ and WRITE throughput of one OSD against transfer size
//! (4 KiB to 64 MiB; seed 000 Fig. 9 plots the same against one OSD), beside raw TCP exchanges of
//! the same sizes measured in the same run (send N bytes and wait for an acknowledgement; ask for
//! N bytes and read them). The goal: at 16 MiB, at least 70% of raw TCP.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use tessera_types::ObjectAddr;

use super::baseline::RawServer;
use super::report::{plot_lines, Axes, OutputPaths, Report, Series};
use super::target::BenchTarget;
use super::CommonArgs;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

#[derive(Args, Clone)]
pub struct IoArgs {
    /// Measure one target with no metadata server (the only mode until the file system lands).
    #[arg(long)]
    target_only: bool,
    /// Bytes moved per size and direction (at least 3 transfers each).
    #[arg(long, default_value_t = 256 * MIB)]
    bytes_per_point: usize,
}

pub fn run(args: IoArgs, common: &CommonArgs) -> Result<()> {
    if !args.target_only {
        bail!("file-system I/O needs the metadata server; run `tessera bench io --target-only` to measure one OSD target");
    }
    let sizes: Vec<usize> = if common.quick {
        vec![4 * KIB, 64 * KIB, MIB, 16 * MIB]
    } else {
        vec![4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB]
    };
    let budget = if common.quick { args.bytes_per_point.min(48 * MIB) } else { args.bytes_per_point };

    let raw = RawServer::start()?;
    let mut raw_client = raw.connect()?;
    let target = BenchTarget::start(common)?;
    let client = target.client()?;
    let pid = client.create_partition(None).context("creating the bench partition")?;
    let oid = client.create_one(pid).context("creating the bench object")?;
    let addr = ObjectAddr::new(pid, oid);

    let mut report = Report::new("io");
    report.param("mode", "target-only");
    report.param("bytes_per_point", budget);
    report.param("target", target.addr.clone());
    let (mut w, mut r, mut rw, mut rr) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut ratio_16m = (f64::NAN, f64::NAN);
    for &size in &sizes {
        let reps = (budget / size).clamp(3, 20_000);
        let data: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
        client.write(addr, 0, &data, false)?; // warm the object to full size
        let osd_write = time_reps(reps, || client.write(addr, 0, &data, false).map_err(Into::into))?;
        let osd_read = time_reps(reps, || {
            let got = client.read(addr, 0, size as u64)?.data;
            anyhow::ensure!(got.len() == size, "short read: {} of {size} bytes", got.len());
            Ok(())
        })?;
        let raw_write = time_reps(reps, || raw_client.write(size).map(|_| ()))?;
        let raw_read = time_reps(reps, || raw_client.read(size).map(|_| ()))?;
        let mib_s = |d: Duration| (size * reps) as f64 / MIB as f64 / d.as_secs_f64();
        let row = json!({
            "size_bytes": size,
            "transfers": reps,
            "osd_write_mib_s": mib_s(osd_write),
            "osd_read_mib_s": mib_s(osd_read),
            "raw_write_mib_s": mib_s(raw_write),
            "raw_read_mib_s": mib_s(raw_read),
            "write_over_raw": mib_s(osd_write) / mib_s(raw_write),
            "read_over_raw": mib_s(osd_read) / mib_s(raw_read),
        });
        if size == 16 * MIB {
            ratio_16m = (mib_s(osd_write) / mib_s(raw_write), mib_s(osd_read) / mib_s(raw_read));
        }
        let x = size as f64;
        w.push((x, mib_s(osd_write)));
        r.push((x, mib_s(osd_read)));
        rw.push((x, mib_s(raw_write)));
        rr.push((x, mib_s(raw_read)));
        report.row(row);
    }
    report.print_table(
        "One OSD target: throughput against transfer size (seed 000 Fig. 9), beside raw loopback TCP",
        &["size_bytes", "transfers", "osd_write_mib_s", "raw_write_mib_s", "write_over_raw", "osd_read_mib_s", "raw_read_mib_s", "read_over_raw"],
    );
    report.summary("write_over_raw_16MiB", ratio_16m.0);
    report.summary("read_over_raw_16MiB", ratio_16m.1);
    report.summary("goal_16MiB_at_least_70pct", ratio_16m.0 >= 0.7 && ratio_16m.1 >= 0.7);
    report.print_summary();

    let paths = OutputPaths::resolve("io", common.json.as_deref(), &common.out);
    report.write_json(&paths.json)?;
    plot_lines(
        &paths.png,
        &Axes { title: "One OSD: throughput vs transfer size", x_label: "transfer size (bytes)", y_label: "MiB/s", log_x: true, log_y: false },
        &[
            Series { name: "OSD WRITE".into(), points: w },
            Series { name: "OSD READ".into(), points: r },
            Series { name: "raw TCP send+ack".into(), points: rw },
            Series { name: "raw TCP request+receive".into(), points: rr },
        ],
    )?;
    println!("\nwrote {} and {}", paths.json.display(), paths.png.display());
    Ok(())
}

fn time_reps(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let t = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    Ok(t.elapsed())
}
