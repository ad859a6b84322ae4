//! Experiment 2, seed 000 §4.1 and Fig. 8: the seed's analytic model of the three ways of
//! sending n segments of x bytes, evaluated with the seed's network (RTT 30 us, 800 Mb/s) and
//! with the loopback RTT and bandwidth measured in this run, beside the Fig. 10 curves measured
//! in the same run. The model (the seed's formulas as printed, write; a read adds RTT/2):
//!
//! | mode | bytes sent S | round trips |
//! |---|---|---|
//! | iterative | x n | n |
//! | SGL | x n + 16 n + 16 | 1 |
//! | strided | x n + 16 | 1 |
//!
//! T = S / BW + round trips * RTT; throughput = x n / T.

use anyhow::Result;
use serde_json::json;

use super::fig10::{Point, MODES};
use crate::bench::baseline::RawClient;
use crate::bench::report::{percentile, Report, Series};

const MIB: f64 = 1024.0 * 1024.0;
/// The seed's network: RTT 30 us, 800 Mb/s.
pub const PAPER: Network = Network { rtt_s: 30e-6, bytes_per_s: 800e6 / 8.0 };

#[derive(Clone, Copy, Debug)]
pub struct Network {
    pub rtt_s: f64,
    pub bytes_per_s: f64,
}

/// Modelled seconds to move `n` segments of `x` bytes.
pub fn time(net: Network, mode: &str, n: f64, x: f64, read: bool) -> f64 {
    let (bytes, trips) = match mode {
        "iterative" => (x * n, n),
        "sgl" => (x * n + 16.0 * n + 16.0, 1.0),
        _ => (x * n + 16.0, 1.0),
    };
    bytes / net.bytes_per_s + trips * net.rtt_s + if read { net.rtt_s / 2.0 } else { 0.0 }
}

fn mib_s(net: Network, mode: &str, total: u64, segment: u64, read: bool) -> f64 {
    let n = (total / segment) as f64;
    n * segment as f64 / MIB / time(net, mode, n, segment as f64, read)
}

/// Measures the loopback network the way the model sees it: the median small-message round
/// trip and the bandwidth of 16 MiB one-way transfers.
pub fn measure(raw: &mut RawClient, quick: bool) -> Result<Network> {
    let pings = if quick { 200 } else { 2000 };
    let mut rtts = (0..pings).map(|_| raw.ping().map(|d| d.as_secs_f64())).collect::<Result<Vec<_>>>()?;
    rtts.sort_by(f64::total_cmp);
    let len = 16 << 20;
    let mut times = (0..if quick { 3 } else { 8 }).map(|_| raw.write(len).map(|d| d.as_secs_f64())).collect::<Result<Vec<_>>>()?;
    times.sort_by(f64::total_cmp);
    Ok(Network { rtt_s: percentile(&rtts, 50.0), bytes_per_s: len as f64 / percentile(&times, 50.0) })
}

/// Adds the model rows beside the measured points of the largest total; returns the plot series
/// (write).
pub fn run(points: &[Point], local: Network, report: &mut Report) -> Vec<Series> {
    let total = points.iter().map(|p| p.total).max().unwrap_or(0);
    let mut series = Vec::new();
    for (_, mode) in MODES {
        let mine: Vec<&Point> = points.iter().filter(|p| p.total == total && p.mode == mode).collect();
        for p in &mine {
            report.row(json!({
                "total_bytes": total, "segment_bytes": p.segment, "mode": mode,
                "paper_model_write_mib_s": mib_s(PAPER, mode, total, p.segment, false),
                "local_model_write_mib_s": mib_s(local, mode, total, p.segment, false),
                "measured_write_mib_s": p.write_mib_s,
                "local_model_read_mib_s": mib_s(local, mode, total, p.segment, true),
                "measured_read_mib_s": p.read_mib_s,
            }));
        }
        let curve = |f: &dyn Fn(&Point) -> f64| mine.iter().map(|p| (p.segment as f64, f(p))).collect::<Vec<_>>();
        series.push(Series { name: format!("{mode} measured"), points: curve(&|p| p.write_mib_s) });
        series.push(Series { name: format!("{mode} model, this run's network"), points: curve(&|p| mib_s(local, mode, total, p.segment, false)) });
        series.push(Series { name: format!("{mode} model, seed's network"), points: curve(&|p| mib_s(PAPER, mode, total, p.segment, false)) });
    }
    report.param("local_rtt_us", local.rtt_s * 1e6);
    report.param("local_bandwidth_mib_s", local.bytes_per_s / MIB);
    report.print_table(
        &format!(
            "Seed 000 Fig. 8: the model (seed's network: RTT 30 us, 800 Mb/s; this run's loopback: RTT {:.1} us, {:.0} MiB/s) beside the measured curves",
            local.rtt_s * 1e6,
            local.bytes_per_s / MIB
        ),
        &["segment_bytes", "mode", "paper_model_write_mib_s", "local_model_write_mib_s", "measured_write_mib_s", "local_model_read_mib_s", "measured_read_mib_s"],
    );
    series
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the model reproduces the seed's Fig. 8 shape: strided >= SGL >= iterative at
    /// every segment size, all three close at 1 MiB segments, and iterative at 8-byte
    /// segments bound by one RTT per segment.
    #[test]
    fn model_orders_the_modes_like_fig_8() {
        let total = 100_000_000;
        for x in [8u64, 64, 4096, 1 << 20] {
            let it = mib_s(PAPER, "iterative", total, x, false);
            let sgl = mib_s(PAPER, "sgl", total, x, false);
            let st = mib_s(PAPER, "strided", total, x, false);
            assert!(st >= sgl && sgl >= it, "x={x}: {st} {sgl} {it}");
        }
        let big = 1 << 20;
        assert!(mib_s(PAPER, "iterative", total, big, false) / mib_s(PAPER, "strided", total, big, false) > 0.95);
        let t = time(PAPER, "iterative", 1000.0, 8.0, false);
        assert!((t - (8000.0 / 1e8 + 1000.0 * 30e-6)).abs() < 1e-12);
    }
}
