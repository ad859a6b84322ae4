//! File-system throughput against transfer size on one OSD (seed 000 Fig. 9: one I/O server,
//! one metadata server, one file written and read whole per operation). A file striped over
//! OSD 0 only; each operation is one `pwrite`, `pwrite` + `fsync`, or `pread` of the whole
//! transfer at offset 0 through the client library; beside raw TCP exchanges of the same size
//! with OSD 0's host, interleaved in rounds.

use std::time::Duration;

use anyhow::{ensure, Result};
use serde_json::json;
use tessera_client::StripeHint;

use super::super::report::Report;
use super::site::{Site, STRIPE_UNIT};
use super::{median, mib_s, pattern, time_reps, Measured, MIB};

/// Interleaved rounds per transfer size.
const ROUNDS: usize = 8;
/// Each `pwrite` + `fsync` sends the data to the OSD's disk: a few of them per size suffice.
const FSYNC_OPS_MAX: usize = 32;

pub fn run(site: &Site, sizes: &[usize], budget: usize, report: &mut Report) -> Result<Vec<Measured>> {
    let _on_client_host = site.enter_client()?;
    let client = site.connect()?;
    let file = client.create("/bench-sizes", 0o644, Some(StripeHint { stripe_unit: STRIPE_UNIT, stripe_count: 1, start_osd: Some(0) }))?;
    let mut raw = site.raw_clients(1)?;
    let raw = &mut raw[0];
    let mut points = Vec::new();
    for &size in sizes {
        let data = pattern(size);
        let mut back = vec![0u8; size];
        file.pwrite(0, &data)?;
        let reps = (budget / size).clamp(4, 20_000);
        let rounds = reps.min(ROUNDS);
        let per_round = reps / rounds;
        let fsync_per_round = ((budget / 4 / size).clamp(2, FSYNC_OPS_MAX) / rounds).max(1);
        let mut t = [Duration::ZERO; 5];
        let (mut write_ratios, mut read_ratios) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let w = time_reps(per_round, || file.pwrite(0, &data).map(drop).map_err(Into::into))?;
            let rw = time_reps(per_round, || raw.write(size).map(drop))?;
            let ws = time_reps(fsync_per_round, || {
                file.pwrite(0, &data)?;
                Ok(file.fsync()?)
            })?;
            let r = time_reps(per_round, || {
                let n = file.pread(0, &mut back)?;
                ensure!(n == size, "short read: {n} of {size} bytes");
                Ok(())
            })?;
            let rr = time_reps(per_round, || raw.read(size).map(drop))?;
            for (acc, d) in t.iter_mut().zip([w, ws, r, rw, rr]) {
                *acc += d;
            }
            write_ratios.push(rw.as_secs_f64() / w.as_secs_f64());
            read_ratios.push(rr.as_secs_f64() / r.as_secs_f64());
        }
        ensure!(back == data, "the file read back differs from what was written ({size}-byte transfers)");
        let bytes = (size * per_round * rounds) as u64;
        let fsync_bytes = (size * fsync_per_round * rounds) as u64;
        let m = Measured {
            x: size as f64,
            write: mib_s(bytes, t[0]),
            write_fsync: mib_s(fsync_bytes, t[1]),
            read: mib_s(bytes, t[2]),
            raw_write: mib_s(bytes, t[3]),
            raw_read: mib_s(bytes, t[4]),
            write_over_raw: median(write_ratios),
            read_over_raw: median(read_ratios),
            cpu: None,
        };
        report.row(json!({
            "sweep": "size",
            "size_bytes": size,
            "transfers": per_round * rounds,
            "fsync_transfers": fsync_per_round * rounds,
            "fs_write_mib_s": m.write,
            "fs_write_fsync_mib_s": m.write_fsync,
            "fs_read_mib_s": m.read,
            "raw_write_mib_s": m.raw_write,
            "raw_read_mib_s": m.raw_read,
            "write_over_raw": m.write_over_raw,
            "read_over_raw": m.read_over_raw,
        }));
        points.push(m);
    }
    client.unlink("/bench-sizes")?;
    Ok(points)
}

/// The point at `size` bytes, if measured.
pub fn at(points: &[Measured], size: usize) -> Option<&Measured> {
    points.iter().find(|p| p.x == size as f64)
}

/// Transfer sizes of a full and a quick run.
pub fn sizes(quick: bool) -> Vec<usize> {
    use super::KIB;
    if quick {
        vec![4 * KIB, 64 * KIB, MIB, 16 * MIB]
    } else {
        vec![4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB]
    }
}
