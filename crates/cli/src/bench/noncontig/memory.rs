//! Experiment 5, seed 003 ("PVFS list I/O", 128 segments of 128 B to 8 KiB): the memory side of
//! one WRITE whose data lies in 128 pieces scattered in the caller's memory (each piece followed
//! by a gap as large as itself), written contiguously to one object.
//!
//! - pack: copy the pieces into one buffer, send it;
//! - gather: send the PDU header and the 128 caller slices with one vectored write, no copy;
//! - hybrid: `OsdClient::write_scattered`, which packs below `GATHER_MIN_PIECE_BYTES` and
//!   gathers above (the rule the client library uses for striped writes).
//!
//! The crossover reported is the smallest piece size from which gather is at least as fast as
//! pack at that size and every larger one; it is what `GATHER_MIN_PIECE_BYTES` is set from.

use anyhow::Result;
use serde_json::json;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::{OsdClient, GATHER_MIN_PIECE_BYTES};
use tessera_osd_proto::DataLayout;
use tessera_types::ObjectAddr;

use super::timing::{interleaved, median, paired_ratio, reps_for, Variant};
use crate::bench::report::{Report, Series};

pub const PIECES: usize = 128;

pub struct Outcome {
    pub crossover_bytes: Option<usize>,
    pub series: Vec<Series>,
    /// Hybrid time over the faster of pack and gather, worst piece size.
    pub hybrid_over_best: f64,
}

pub fn run(client: &OsdClient<Session>, quick: bool, report: &mut Report) -> Result<Outcome> {
    let (rounds, budget) = if quick { (3, 0.01) } else { (21, 0.04) };
    let sizes: Vec<usize> = (7..=13).map(|b| 1 << b).collect();
    let pid = client.create_partition(None)?;
    let addr = ObjectAddr::new(pid, client.create_one(pid)?);
    let (mut sp, mut sg, mut sh) = (Vec::new(), Vec::new(), Vec::new());
    let mut gather_wins = Vec::new();
    let mut hybrid_over_best: f64 = 0.0;
    for &size in &sizes {
        // Piece i at 2 * i * size: scattered, never adjacent.
        let memory: Vec<u8> = (0..2 * PIECES * size).map(|i| (i * 31 + size) as u8).collect();
        let slices: Vec<&[u8]> = (0..PIECES).map(|i| &memory[2 * i * size..(2 * i + 1) * size]).collect();
        let slices = &slices;
        let pack = move || Ok(client.write_layout(addr, 0, &slices.concat(), DataLayout::Contiguous, false)?);
        let gather = move || Ok(client.write_gather(addr, 0, slices, DataLayout::Contiguous, false)?);
        let hybrid = move || Ok(client.write_scattered(addr, 0, slices, DataLayout::Contiguous, false)?);
        let reps = reps_for(budget, pack)?;
        let mut variants: Vec<Variant<'_>> = vec![Box::new(pack), Box::new(gather), Box::new(hybrid)];
        let t = interleaved(rounds, reps, &mut variants)?;
        drop(variants);
        anyhow::ensure!(client.read(addr, 0, (PIECES * size) as u64)?.data == slices.concat(), "the object holds other bytes than were written");
        let gather_over_pack = paired_ratio(&t[1], &t[0]);
        let best = median(&t[0]).min(median(&t[1]));
        hybrid_over_best = hybrid_over_best.max(median(&t[2]) / best);
        report.row(json!({
            "piece_bytes": size, "pieces": PIECES, "write_bytes": PIECES * size,
            "pack_us": median(&t[0]) * 1e6, "gather_us": median(&t[1]) * 1e6, "hybrid_us": median(&t[2]) * 1e6,
            "gather_over_pack": gather_over_pack,
            "hybrid_choice": if size >= GATHER_MIN_PIECE_BYTES { "gather" } else { "pack" },
        }));
        gather_wins.push((size, gather_over_pack <= 1.0));
        let x = size as f64;
        sp.push((x, (PIECES * size) as f64 / median(&t[0]) / (1 << 20) as f64));
        sg.push((x, (PIECES * size) as f64 / median(&t[1]) / (1 << 20) as f64));
        sh.push((x, (PIECES * size) as f64 / median(&t[2]) / (1 << 20) as f64));
    }
    report.print_table(
        &format!("Seed 003: one WRITE of 128 scattered pieces, pack vs gather vs hybrid (hybrid gathers from {GATHER_MIN_PIECE_BYTES} B)"),
        &["piece_bytes", "write_bytes", "pack_us", "gather_us", "hybrid_us", "gather_over_pack", "hybrid_choice"],
    );
    let crossover_bytes = (0..gather_wins.len()).find(|&i| gather_wins[i..].iter().all(|w| w.1)).map(|i| gather_wins[i].0);
    let series = vec![
        Series { name: "pack".into(), points: sp },
        Series { name: "gather".into(), points: sg },
        Series { name: "hybrid".into(), points: sh },
    ];
    Ok(Outcome { crossover_bytes, series, hybrid_over_best })
}
