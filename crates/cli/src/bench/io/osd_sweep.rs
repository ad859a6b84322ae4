//! Aggregate throughput against the number of OSDs a file stripes over (seed 002 slides,
//! "aggregate I/O": one metadata server, one client, constant work per server). For N OSDs, a
//! file striped over OSDs 0..N with 1 MiB units receives `per_osd` bytes per OSD in
//! sequential `pwrite`s of N x `chunk` bytes (every OSD busy in every call); write+fsync is the
//! same pass followed by one `fsync`; read reads it back in the same calls. The baseline in
//! each round: N raw TCP streams at once, one to each OSD's host, moving the same bytes in
//! the same chunks. CPU time of the bench process and every daemon is read around each pass,
//! for the cost per GiB of each path.

use std::time::Duration;

use anyhow::{ensure, Result};
use serde_json::{json, Value};
use tessera_client::{File, StripeHint};

use super::super::baseline::fan_out;
use super::super::report::Report;
use super::site::{Site, STRIPE_UNIT};
use super::{cpu_s_per_gib, median, mib_s, pattern, timed_cpu, CpuCost, Measured};

pub struct Plan<'a> {
    pub counts: &'a [u32],
    pub per_osd: u64,
    /// Bytes each OSD receives per call.
    pub chunk: u64,
    pub rounds: usize,
}

pub fn run(site: &Site, plan: &Plan<'_>, report: &mut Report) -> Result<Vec<Measured>> {
    let _on_client_host = site.enter_client()?;
    let client = site.connect()?;
    let calls = (plan.per_osd / plan.chunk).max(1) as usize;
    let pids = site.daemon_pids();
    let mut points = Vec::new();
    for &n in plan.counts {
        let path = format!("/bench-osds-{n}");
        let hint = StripeHint { stripe_unit: STRIPE_UNIT, stripe_count: n, start_osd: Some(0) };
        let file = client.create(&path, 0o644, Some(hint))?;
        let call_len = (n as u64 * plan.chunk) as usize;
        let data = pattern(call_len);
        let mut back = vec![0u8; call_len];
        let total = (call_len * calls) as u64;
        let mut raw = site.raw_clients(n as usize)?;
        write_pass(&file, &data, calls)?; // allocate the objects before timing
        let mut t = [Duration::ZERO; 5];
        let mut cpu = [Duration::ZERO; 4];
        let (mut write_ratios, mut read_ratios) = (Vec::new(), Vec::new());
        for _ in 0..plan.rounds {
            let (w, cw) = timed_cpu(&pids, || write_pass(&file, &data, calls))?;
            let (rw, crw) = timed_cpu(&pids, || fan_out(&mut raw, calls, plan.chunk as usize, true).map(drop))?;
            let (ws, _) = timed_cpu(&pids, || {
                write_pass(&file, &data, calls)?;
                Ok(file.fsync()?)
            })?;
            let (r, cr) = timed_cpu(&pids, || {
                for c in 0..calls {
                    let got = file.pread((c * call_len) as u64, &mut back)?;
                    ensure!(got == call_len, "short read: {got} of {call_len} bytes");
                }
                Ok(())
            })?;
            ensure!(back == data, "{path}: the bytes read back differ from those written");
            let (rr, crr) = timed_cpu(&pids, || fan_out(&mut raw, calls, plan.chunk as usize, false).map(drop))?;
            for (acc, d) in t.iter_mut().zip([w, ws, r, rw, rr]) {
                *acc += d;
            }
            for (acc, d) in cpu.iter_mut().zip([cw, cr, crw, crr]) {
                *acc += d;
            }
            write_ratios.push(rw.as_secs_f64() / w.as_secs_f64());
            read_ratios.push(rr.as_secs_f64() / r.as_secs_f64());
        }
        drop(raw);
        client.unlink(&path)?;
        let bytes = total * plan.rounds as u64;
        let m = Measured {
            x: n as f64,
            write: mib_s(bytes, t[0]),
            write_fsync: mib_s(bytes, t[1]),
            read: mib_s(bytes, t[2]),
            raw_write: mib_s(bytes, t[3]),
            raw_read: mib_s(bytes, t[4]),
            write_over_raw: median(write_ratios),
            read_over_raw: median(read_ratios),
            cpu: Some(CpuCost {
                write: cpu_s_per_gib(cpu[0], bytes),
                read: cpu_s_per_gib(cpu[1], bytes),
                raw_write: cpu_s_per_gib(cpu[2], bytes),
                raw_read: cpu_s_per_gib(cpu[3], bytes),
            }),
        };
        report.row(row(site, n, total, &m));
        points.push(m);
    }
    Ok(points)
}

fn write_pass(file: &File, data: &[u8], calls: usize) -> Result<()> {
    for c in 0..calls {
        file.pwrite((c * data.len()) as u64, data)?;
    }
    Ok(())
}

fn row(site: &Site, n: u32, bytes_per_pass: u64, m: &Measured) -> Value {
    let mut row = json!({
        "sweep": format!("osds/{}", site.label),
        "osds": n,
        "bytes_per_pass": bytes_per_pass,
        "fs_write_mib_s": m.write,
        "fs_write_fsync_mib_s": m.write_fsync,
        "fs_read_mib_s": m.read,
        "raw_write_mib_s": m.raw_write,
        "raw_read_mib_s": m.raw_read,
        "write_over_raw": m.write_over_raw,
        "read_over_raw": m.read_over_raw,
    });
    if let Some(cpu) = m.cpu {
        row["fs_write_cpu_s_per_gib"] = json!(cpu.write);
        row["fs_read_cpu_s_per_gib"] = json!(cpu.read);
        row["raw_write_cpu_s_per_gib"] = json!(cpu.raw_write);
        row["raw_read_cpu_s_per_gib"] = json!(cpu.raw_read);
    }
    if let Some(rate) = site.rate {
        let link = n as f64 * rate.mib_per_sec();
        row["links_mib_s"] = json!(link);
        row["write_of_links"] = json!(m.write / link);
        row["write_fsync_of_links"] = json!(m.write_fsync / link);
        row["read_of_links"] = json!(m.read / link);
        row["raw_write_of_links"] = json!(m.raw_write / link);
        row["raw_read_of_links"] = json!(m.raw_read / link);
    }
    row
}
