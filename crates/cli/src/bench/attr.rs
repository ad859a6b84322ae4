//! `tessera bench attr`: GET ATTRIBUTES round-trip latency through the whole stack (OSD client,
//! iSCSI initiator, loopback TCP, iSCSI target, CDB codec, attribute store), broken down the way
//! the seed's slides break down `getattr` (002, "Table: Overheads in getattr": SQLite 81.3 us,
//! CDB 2.2 us, iSCSI 29.9 us, initiator 125.6 us, total 239.0 us), beside the raw loopback TCP
//! round trip of a message of the same size, measured in the same run.
//!
//! Breakdown method: the target times its own stages (decode, engine, encode) and reports the
//! sums on a statistics page; the bench reads the page before and after the timed loop. Then
//! attribute store = engine time, CDB = decode + encode, network = raw loopback round trip, and
//! iSCSI + initiator = everything else (both ends' framing, threads and system calls).

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;
use tessera_osd_proto::{AttrId, Attribute};
use tessera_target::osd_lu::{parse_stats, STATS_PAGE};
use tessera_types::ObjectAddr;

use super::baseline::{RawServer, PING_LEN};
use super::report::{percentile, plot_lines, Axes, OutputPaths, Report, Series};
use super::target::BenchTarget;
use super::CommonArgs;

/// The attribute read in the loop: a user-defined page attribute of 8 bytes, the kind of
/// lookup a file system's stat does.
const BENCH_ATTR: AttrId = AttrId::new(0x0001_0000, 1);

#[derive(Args, Clone)]
pub struct AttrArgs {
    /// Timed GET ATTRIBUTES round trips (after warm-up).
    #[arg(long, default_value_t = 20_000, value_parser = crate::units::parse_positive)]
    iterations: usize,
}

impl Default for AttrArgs {
    fn default() -> Self {
        AttrArgs { iterations: 20_000 }
    }
}

pub fn run(args: AttrArgs, common: &CommonArgs) -> Result<()> {
    let iterations = if common.quick { args.iterations.min(2_000) } else { args.iterations };
    let warmup = (iterations / 10).max(100);

    let raw = RawServer::start()?;
    let mut raw_client = raw.connect()?;
    let target = BenchTarget::start(common)?;
    let (client, addr) = target.client_with_object()?;
    client.set_attributes(addr, &[Attribute { id: BENCH_ATTR, value: 42u64.to_be_bytes().to_vec() }])?;

    // Interleave the two loops in rounds so machine noise hits both alike.
    let mut getattr_us = Vec::with_capacity(iterations);
    let mut loopback_us = Vec::with_capacity(iterations);
    for _ in 0..warmup {
        raw_client.ping()?;
        client.get_attributes(addr, &[BENCH_ATTR])?;
    }
    let before = read_stats(&client)?;
    let rounds = 10;
    for _ in 0..rounds {
        for _ in 0..iterations / rounds {
            let t = Instant::now();
            let got = client.get_attributes(addr, &[BENCH_ATTR])?;
            getattr_us.push(t.elapsed().as_secs_f64() * 1e6);
            anyhow::ensure!(got.first().and_then(|a| a.value.as_deref()) == Some(&42u64.to_be_bytes()[..]), "wrong attribute value");
        }
        for _ in 0..iterations / rounds {
            loopback_us.push(raw_client.ping()?.as_secs_f64() * 1e6);
        }
    }
    let after = read_stats(&client)?;
    // The stats read itself is one command between the snapshots: exclude it from the count.
    let commands = (after[0] - before[0]).saturating_sub(1).max(1) as f64;
    let per = |i: usize| (after[i] - before[i]) as f64 / commands / 1000.0;
    let (decode_us, store_us, encode_us) = (per(1), per(2), per(3));

    getattr_us.sort_by(f64::total_cmp);
    loopback_us.sort_by(f64::total_cmp);
    let getattr_median = percentile(&getattr_us, 50.0);
    let loopback_median = percentile(&loopback_us, 50.0);
    let cdb_us = decode_us + encode_us;
    let stack_us = (getattr_median - loopback_median - store_us - cdb_us).max(0.0);

    let mut report = Report::new("attr");
    report.param("iterations", iterations);
    report.param("warmup", warmup);
    report.param("attribute", format!("page {:#x} number {}", BENCH_ATTR.page, BENCH_ATTR.number));
    report.param("loopback_message_bytes", PING_LEN);
    report.param("target", target.addr.clone());
    for (name, us, seed) in [
        ("attribute store (cache over SQLite)", store_us, 81.3),
        ("CDB processing", cdb_us, 2.2),
        ("iSCSI target + initiator", stack_us, 29.9 + 125.6),
        ("network (raw loopback RTT)", loopback_median, f64::NAN),
        ("total getattr (median)", getattr_median, 239.0),
    ] {
        report.row(json!({"phase": name, "tessera_us": us, "seed_2007_us": if seed.is_nan() { json!("-") } else { json!(seed) }}));
    }
    report.print_table("GET ATTRIBUTES round trip, breakdown (seed slides 002: overheads in getattr)", &["phase", "tessera_us", "seed_2007_us"]);

    let getattr_p99 = percentile(&getattr_us, 99.0);
    let loopback_p99 = percentile(&loopback_us, 99.0);
    report.summary("getattr_median_us", getattr_median);
    report.summary("getattr_p99_us", getattr_p99);
    report.summary("loopback_rtt_median_us", loopback_median);
    report.summary("loopback_rtt_p99_us", loopback_p99);
    report.summary("getattr_over_loopback", getattr_median / loopback_median);
    report.summary("store_us", store_us);
    report.summary("cdb_us", cdb_us);
    report.summary("iscsi_and_initiator_us", stack_us);
    report.summary("goal_getattr_within_2x_loopback", getattr_median <= 2.0 * loopback_median);
    report.print_summary();

    let paths = OutputPaths::resolve("attr", common.json.as_deref(), &common.out);
    report.write_json(&paths.json)?;
    let cdf = |v: &[f64]| -> Vec<(f64, f64)> { (1..=99).map(|p| (p as f64, percentile(v, p as f64))).collect() };
    plot_lines(
        &paths.png,
        &Axes { title: "GET ATTRIBUTES vs raw loopback round trip", x_label: "percentile", y_label: "latency (us)", log_x: false, log_y: true },
        &[
            Series { name: "GET ATTRIBUTES (OSD over iSCSI)".into(), points: cdf(&getattr_us) },
            Series { name: format!("raw TCP ping-pong, {PING_LEN} B"), points: cdf(&loopback_us) },
        ],
    )?;
    println!("\nwrote {} and {}", paths.json.display(), paths.png.display());
    Ok(())
}

fn read_stats(client: &tessera_initiator::osd_client::OsdClient<tessera_initiator::iscsi::Session>) -> Result<[u64; 4]> {
    let attrs = client.get_attribute_page(ObjectAddr::ROOT, STATS_PAGE).context("reading the target's statistics page")?;
    parse_stats(&attrs).context("malformed statistics page")
}
