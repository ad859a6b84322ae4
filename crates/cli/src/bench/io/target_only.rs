//! `tessera bench io --target-only`: READ and WRITE throughput of one OSD against transfer size
//! (4 KiB to 64 MiB; seed 000 Fig. 9 plots the same against one OSD), beside raw TCP exchanges of
//! the same sizes measured in the same run (send N bytes and wait for an acknowledgement; ask for
//! N bytes and read them), and beside pwrite/pread of a local file (the page cache every WRITE
//! must also pass through). The goal: at 16 MiB, at least 70% of raw TCP.
//!
//! Method: each size runs in interleaved rounds (OSD, raw, file, back to back). The MiB/s
//! columns are totals over all rounds; the `*_over_raw` ratios are the median over rounds of each
//! round's paired ratio, which a drifting machine (CPU power states, other tenants) cannot skew
//! the way one slow baseline round skews a ratio of totals.
//!
//! Beside throughput, the CPU time WRITEs cost per GiB (this process, whose initiator and raw
//! TCP ends run here, plus the target daemon when this bench started it; the kernel's network
//! work is charged to them too): other tenants of a shared machine change throughput much more
//! than they change what a byte costs.

use std::os::unix::fs::FileExt;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;

use super::super::baseline::RawServer;
use super::super::report::{percentile, plot_lines, Axes, OutputPaths, Report, Series};
use super::super::target::BenchTarget;
use super::super::CommonArgs;
use super::super::cpu::total_cpu;
use super::{cpu_s_per_gib, time_reps, KIB, MIB};

/// Interleaved rounds per transfer size.
const ROUNDS: usize = 8;

pub fn run(bytes_per_point: usize, common: &CommonArgs) -> Result<()> {
    let sizes: Vec<usize> = if common.quick {
        vec![4 * KIB, 64 * KIB, MIB, 16 * MIB]
    } else {
        vec![4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB]
    };
    let budget = if common.quick { bytes_per_point.min(48 * MIB) } else { bytes_per_point };

    let raw = RawServer::start()?;
    let mut raw_client = raw.connect()?;
    let target = BenchTarget::start(common)?;
    let (client, addr) = target.client_with_object()?;
    let pids: Vec<u32> = target.pid().into_iter().collect();
    // The page-cache baseline: the same transfers as pwrite/pread on a local file beside the
    // OSD's data. A WRITE cannot beat min(network, page cache); this shows which one binds.
    let local_dir = crate::children::scratch_dir("tessera-bench-file-", None)?;
    let local = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(local_dir.path().join("baseline"))?;

    let mut report = Report::new("io");
    report.param("mode", "target-only");
    report.param("bytes_per_point", budget);
    report.param("target", target.addr.clone());
    report.param("write_cpu_counts_target", !pids.is_empty());
    report.param("load_average_at_start", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    let (mut w, mut r, mut rw, mut rr, mut fw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut ratio_16m = (f64::NAN, f64::NAN);
    let mut ceiling_16m = f64::NAN;
    let mut cpu_16m = (f64::NAN, f64::NAN);
    for &size in &sizes {
        let reps = (budget / size).clamp(4, 20_000);
        let data: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
        client.write(addr, 0, &data, false)?; // warm the object to full size
        // Rounds interleave the four measurements so that drift in the machine's speed (other
        // tenants, CPU power states) hits the OSD and its baseline alike.
        let rounds = reps.min(ROUNDS);
        let per_round = reps / rounds;
        let reps = per_round * rounds;
        let (mut osd_write, mut osd_read, mut raw_write, mut raw_read) = (Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let mut read_buf = Vec::new();
        let (mut file_write, mut file_read) = (Duration::ZERO, Duration::ZERO);
        let mut file_buf = vec![0u8; size];
        let (mut write_ratios, mut read_ratios) = (Vec::new(), Vec::new());
        let (mut osd_write_cpu, mut raw_write_cpu) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..rounds {
            let (w0, r0, rw0, rr0) = (osd_write, osd_read, raw_write, raw_read);
            let cpu0 = total_cpu(&pids)?;
            osd_write += time_reps(per_round, || client.write(addr, 0, &data, false).map_err(Into::into))?;
            let cpu1 = total_cpu(&pids)?;
            raw_write += time_reps(per_round, || raw_client.write(size).map(|_| ()))?;
            let cpu2 = total_cpu(&pids)?;
            osd_write_cpu += cpu1.saturating_sub(cpu0);
            raw_write_cpu += cpu2.saturating_sub(cpu1);
            osd_read += time_reps(per_round, || {
                let got = client.read_reusing(addr, 0, size as u64, std::mem::take(&mut read_buf))?.data;
                anyhow::ensure!(got.len() == size, "short read: {} of {size} bytes", got.len());
                read_buf = got;
                Ok(())
            })?;
            raw_read += time_reps(per_round, || raw_client.read(size).map(|_| ()))?;
            file_write += time_reps(per_round, || Ok(local.write_all_at(&data, 0)?))?;
            file_read += time_reps(per_round, || Ok(local.read_exact_at(&mut file_buf, 0)?))?;
            // Throughput ratio of this round's back-to-back pair (raw time / OSD time).
            write_ratios.push((raw_write - rw0).as_secs_f64() / (osd_write - w0).as_secs_f64());
            read_ratios.push((raw_read - rr0).as_secs_f64() / (osd_read - r0).as_secs_f64());
        }
        write_ratios.sort_by(f64::total_cmp);
        read_ratios.sort_by(f64::total_cmp);
        let (write_ratio, read_ratio) = (percentile(&write_ratios, 50.0), percentile(&read_ratios, 50.0));
        let mib_s = |d: Duration| (size * reps) as f64 / MIB as f64 / d.as_secs_f64();
        let row = json!({
            "size_bytes": size,
            "transfers": reps,
            "osd_write_mib_s": mib_s(osd_write),
            "osd_read_mib_s": mib_s(osd_read),
            "raw_write_mib_s": mib_s(raw_write),
            "raw_read_mib_s": mib_s(raw_read),
            "write_over_raw": write_ratio,
            "read_over_raw": read_ratio,
            "file_write_mib_s": mib_s(file_write),
            "file_read_mib_s": mib_s(file_read),
            "write_over_ceiling": mib_s(osd_write) / mib_s(raw_write).min(mib_s(file_write)),
            "write_cpu_s_per_gib": cpu_s_per_gib(osd_write_cpu, (size * reps) as u64),
            "raw_write_cpu_s_per_gib": cpu_s_per_gib(raw_write_cpu, (size * reps) as u64),
        });
        if size == 16 * MIB {
            ratio_16m = (write_ratio, read_ratio);
            cpu_16m = (cpu_s_per_gib(osd_write_cpu, (size * reps) as u64), cpu_s_per_gib(raw_write_cpu, (size * reps) as u64));
            ceiling_16m = mib_s(osd_write) / mib_s(raw_write).min(mib_s(file_write));
        }
        let x = size as f64;
        w.push((x, mib_s(osd_write)));
        r.push((x, mib_s(osd_read)));
        rw.push((x, mib_s(raw_write)));
        rr.push((x, mib_s(raw_read)));
        fw.push((x, mib_s(file_write)));
        report.row(row);
    }
    report.print_table(
        "One OSD target: throughput against transfer size (seed 000 Fig. 9), beside raw loopback TCP",
        &[
            "size_bytes",
            "transfers",
            "osd_write_mib_s",
            "raw_write_mib_s",
            "file_write_mib_s",
            "write_over_raw",
            "write_cpu_s_per_gib",
            "raw_write_cpu_s_per_gib",
            "osd_read_mib_s",
            "raw_read_mib_s",
            "read_over_raw",
        ],
    );
    report.param("load_average_at_end", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    report.summary("write_over_raw_16MiB", ratio_16m.0);
    report.summary("read_over_raw_16MiB", ratio_16m.1);
    report.summary("write_over_ceiling_16MiB", ceiling_16m);
    report.summary("write_cpu_s_per_gib_16MiB", cpu_16m.0);
    report.summary("raw_write_cpu_s_per_gib_16MiB", cpu_16m.1);
    report.summary("goal_16MiB_at_least_70pct", ratio_16m.0 >= 0.7 && ratio_16m.1 >= 0.7);
    report.print_summary();

    let paths = OutputPaths::resolve("io", common.json.as_deref(), &common.out);
    report.write_json(&paths.json)?;
    plot_lines(
        &paths.png,
        &Axes { title: "One OSD: throughput vs transfer size", x_label: "transfer size (bytes)", y_label: "MiB/s (log)", log_x: true, log_y: true },
        &[
            Series { name: "OSD WRITE".into(), points: w },
            Series { name: "OSD READ".into(), points: r },
            Series { name: "raw TCP send+ack".into(), points: rw },
            Series { name: "raw TCP request+receive".into(), points: rr },
            Series { name: "local file pwrite (page cache)".into(), points: fw },
        ],
    )?;
    println!("\nwrote {} and {}", paths.json.display(), paths.png.display());
    Ok(())
}
