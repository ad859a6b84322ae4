//! Experiment 1, seed 000 Fig. 10: an MPI vector view writing blocks of x bytes, each followed by
//! a two-byte hole, D bytes of data in all (1 MiB and 16 MiB), x from 8 B to 1 MiB; WRITE then
//! READ throughput of the data bytes, one OSD, for the seed's three ways of sending it:
//! iterative (one command per block), SGL, strided.
//!
//! Iterative at small x means up to two million commands; it times the first
//! [`ITERATIVE_COMMANDS_TIMED`] commands of the pattern (the throughput of a steady stream of
//! identical commands does not depend on how many follow) and says so in `commands_timed`.

use std::time::Instant;

use anyhow::Result;
use serde_json::json;
use tessera_client::Mode;
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_types::ObjectAddr;

use super::pattern;
use super::timing::median;
use crate::bench::report::Report;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
/// The seed's hole after each block.
pub const HOLE: u64 = 2;
/// Iterative commands timed per pass (see the module doc).
pub const ITERATIVE_COMMANDS_TIMED: usize = 4096;

pub const MODES: [(Mode, &str); 3] = [(Mode::Iterative, "iterative"), (Mode::Sgl, "sgl"), (Mode::Strided, "strided")];

/// One measured point.
#[derive(Clone, Debug)]
pub struct Point {
    pub total: u64,
    pub segment: u64,
    pub mode: &'static str,
    pub write_mib_s: f64,
    pub read_mib_s: f64,
}

pub fn totals(quick: bool) -> Vec<u64> {
    if quick { vec![MIB] } else { vec![MIB, 16 * MIB] }
}

pub fn segments(quick: bool) -> Vec<u64> {
    if quick {
        vec![8, 64, 512, 4 * KIB, 64 * KIB, MIB]
    } else {
        (3..=20).map(|b| 1u64 << b).collect()
    }
}

pub fn run(client: &OsdClient<Session>, quick: bool, report: &mut Report) -> Result<Vec<Point>> {
    let rounds = if quick { 1 } else { 7 };
    let timed = if quick { 512 } else { ITERATIVE_COMMANDS_TIMED };
    let mut points = Vec::new();
    for total in totals(quick) {
        let pid = client.create_partition(None)?;
        let addr = ObjectAddr::new(pid, client.create_one(pid)?);
        for segment in segments(quick) {
            let extents = pattern::strided(total / segment, segment, segment + HOLE);
            let data: Vec<u8> = (0..total).map(|i| (i * 13 + segment) as u8).collect();
            let mut buf = vec![0u8; total as usize];
            for (mode, name) in MODES {
                let mut cmds = pattern::commands(&extents, mode)?;
                let all_commands = cmds.len();
                if mode == Mode::Iterative {
                    cmds.truncate(timed);
                }
                let bytes = pattern::bytes(&cmds) as f64;
                let (mut w, mut r) = (Vec::new(), Vec::new());
                for _ in 0..rounds {
                    let t = Instant::now();
                    pattern::write(client, addr, &cmds, &data)?;
                    w.push(t.elapsed().as_secs_f64());
                    let t = Instant::now();
                    pattern::read(client, addr, &cmds, &mut buf)?;
                    r.push(t.elapsed().as_secs_f64());
                    anyhow::ensure!(buf[..bytes as usize] == data[..bytes as usize], "{name} read back other bytes than it wrote");
                }
                let p = Point {
                    total,
                    segment,
                    mode: name,
                    write_mib_s: bytes / MIB as f64 / median(&w),
                    read_mib_s: bytes / MIB as f64 / median(&r),
                };
                report.row(json!({
                    "total_bytes": total, "segment_bytes": segment, "mode": name,
                    "commands": all_commands, "commands_timed": cmds.len(),
                    "write_mib_s": p.write_mib_s, "read_mib_s": p.read_mib_s,
                }));
                points.push(p);
            }
        }
    }
    report.print_table(
        "Seed 000 Fig. 10: blocks of x bytes each followed by a 2-byte hole, one OSD (MiB/s of data)",
        &["total_bytes", "segment_bytes", "mode", "commands", "commands_timed", "write_mib_s", "read_mib_s"],
    );
    Ok(points)
}

/// Iterative time over native (strided) time per byte at `segment`, for (write, read), from the
/// smallest total.
pub fn speedup(points: &[Point], segment: u64) -> (f64, f64) {
    let total = points.iter().map(|p| p.total).min().unwrap_or(0);
    let find = |mode: &str| points.iter().find(|p| p.total == total && p.segment == segment && p.mode == mode);
    match (find("iterative"), find("strided")) {
        (Some(i), Some(s)) => (s.write_mib_s / i.write_mib_s, s.read_mib_s / i.read_mib_s),
        _ => (f64::NAN, f64::NAN),
    }
}
