//! Creates that come farther apart than the server's polling lasts: one client pausing
//! [`PAUSE`] before each create, against the same client's creates back to back (the
//! baseline, same run). The figure is the server's CPU per create: what its event loop spends
//! polling for requests that do not come in time (`tessera mds --busy-poll`; docs/metadata.md,
//! "Polling before sleeping").

use std::time::{Duration, Instant};

use anyhow::Result;
use tessera_client::{Client, ClusterConfig};

use super::phase::{self, Phase};

/// The pause before each paced create: well past the 50 us the loop polls by default, as a
/// client that thinks between requests, or many clients each sending now and then.
pub const PAUSE: Duration = Duration::from_micros(500);

/// One client's creates, back to back and paced, each with the server's CPU per create.
pub struct Paced {
    pub back_to_back: Phase,
    pub back_to_back_cpu_us: f64,
    pub paced: Phase,
    pub paced_cpu_us: f64,
}

pub fn creates(admin: &Client, config: &ClusterConfig, mds_pid: u32, files: usize) -> Result<Paced> {
    let top = "/paced";
    let workers = super::open_workers(admin, config, top, 1, 1)?;
    let name = |i: usize| format!("b{i}");
    let (back_to_back, cpu) = phase::with_cpu_of(mds_pid, || {
        phase::run(&workers, files, |(_, _, d), i| {
            d.create(&name(i), 0o644, None)?;
            Ok(())
        })
    })?;
    let back_to_back_cpu_us = cpu.as_secs_f64() * 1e6 / files as f64;
    let dir = &workers[0].2;
    let (paced, cpu) = phase::with_cpu_of(mds_pid, || {
        let start = Instant::now();
        let mut latencies_us = Vec::with_capacity(files);
        for i in 0..files {
            std::thread::sleep(PAUSE);
            let t = Instant::now();
            dir.create(&format!("p{i}"), 0o644, None)?;
            latencies_us.push(t.elapsed().as_secs_f64() * 1e6);
        }
        latencies_us.sort_by(f64::total_cmp);
        Ok(Phase { ops: files, wall: start.elapsed(), latencies_us })
    })?;
    let paced_cpu_us = cpu.as_secs_f64() * 1e6 / files as f64;
    for i in 0..files {
        dir.unlink(&name(i))?;
        dir.unlink(&format!("p{i}"))?;
    }
    drop(workers);
    admin.rmdir(top)?;
    Ok(Paced { back_to_back, back_to_back_cpu_us, paced, paced_cpu_us })
}
