//! Experiment 4, the BTIO shape (seed 003's BTIO runs; issue 4): one process's quarter of an
//! N x N array of doubles under a 2 x 2 block decomposition, a 2-D subarray of N/2 rows of
//! N/2 elements, in a file striped over 4 OSDs with one array row per stripe unit. Through the
//! client library against a real cluster (`tessera mds` + 4 `tessera osd` processes): native
//! (`Mode::Auto`, here one strided command per OSD) against iterative (one command per row
//! piece, up to four in flight per OSD), WRITE and READ, speed-up = iterative time / native
//! time, median of paired rounds.

use anyhow::{ensure, Result};
use serde_json::json;
use tessera_client::patterns::Subarray;
use tessera_client::{Client, Extent, Mode, StripeHint};

use super::timing::{interleaved, median, paired_ratio, reps_for, Variant};
use crate::bench::report::{Report, Series};
use crate::cluster::LocalCluster;

pub const OSDS: u32 = 4;
const ELEMENT: u64 = 8;

pub struct Outcome {
    pub write_speedup: f64,
    pub read_speedup: f64,
    pub series: Vec<Series>,
}

pub fn run(quick: bool, report: &mut Report) -> Result<Outcome> {
    let sizes: Vec<u64> = if quick { vec![256] } else { vec![256, 512, 1024] };
    let (rounds, budget) = if quick { (3, 0.02) } else { (11, 0.1) };
    let dir = crate::children::scratch_dir("tessera-bench-cluster-", None)?;
    let cluster = LocalCluster::start(dir.path(), OSDS)?;
    let client = Client::connect(cluster.config())?;
    let (mut sw, mut sr) = (Vec::new(), Vec::new());
    let mut last = (f64::NAN, f64::NAN);
    for n in sizes {
        let row = n * ELEMENT;
        let hint = StripeHint { stripe_unit: row, stripe_count: OSDS, start_osd: None };
        let file = client.create(&format!("/btio-{n}"), 0o644, Some(hint))?;
        file.pwrite(0, &vec![0u8; (n * row) as usize])?;
        let extents: Vec<Extent> = Subarray::new(0, ELEMENT, &[n, n], &[0, 0], &[n / 2, n / 2])?.extents().collect();
        let len: u64 = extents.iter().map(|e| e.len).sum();
        let data: Vec<u8> = (0..len).map(|i| (i * 3 + n) as u8).collect();
        let bufs = [0, 1].map(|_| std::cell::RefCell::new(vec![0u8; len as usize]));
        let (file, extents, data) = (&file, &extents, &data);
        let write = |mode| -> Variant<'_> { Box::new(move || Ok(file.write_extents(extents, data, mode)?)) };
        let reps = reps_for(budget, write(Mode::Iterative))?;
        let mut variants: Vec<Variant<'_>> = vec![
            write(Mode::Iterative),
            write(Mode::Auto),
            Box::new(|| Ok(file.read_extents(extents, &mut bufs[0].borrow_mut(), Mode::Iterative)?)),
            Box::new(|| Ok(file.read_extents(extents, &mut bufs[1].borrow_mut(), Mode::Auto)?)),
        ];
        let t = interleaved(rounds, reps, &mut variants)?;
        drop(variants);
        ensure!(*bufs[0].borrow() == *data && *bufs[1].borrow() == *data, "subarray reads returned other bytes than were written");
        last = (paired_ratio(&t[0], &t[1]), paired_ratio(&t[2], &t[3]));
        report.row(json!({
            "array_elements": n, "rows": n / 2, "row_piece_bytes": n / 2 * ELEMENT, "subarray_bytes": len,
            "osds": OSDS, "stripe_unit_bytes": row,
            "iterative_write_us": median(&t[0]) * 1e6, "native_write_us": median(&t[1]) * 1e6,
            "iterative_read_us": median(&t[2]) * 1e6, "native_read_us": median(&t[3]) * 1e6,
            "write_speedup": last.0, "read_speedup": last.1,
        }));
        sw.push((n as f64, last.0));
        sr.push((n as f64, last.1));
    }
    report.print_table(
        "BTIO shape: a quarter subarray of an N x N array of doubles striped over 4 OSDs, native against iterative",
        &["array_elements", "rows", "row_piece_bytes", "iterative_write_us", "native_write_us", "write_speedup", "iterative_read_us", "native_read_us", "read_speedup"],
    );
    cluster.stop()?;
    let series = vec![Series { name: "WRITE speed-up".into(), points: sw }, Series { name: "READ speed-up".into(), points: sr }];
    Ok(Outcome { write_speedup: last.0, read_speedup: last.1, series })
}
