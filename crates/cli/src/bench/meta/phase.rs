//! One timed phase of `bench meta`: every client runs its share of operations on its own
//! thread, all released together by a barrier. Wall time runs from the release to the last
//! client's finish, so operations per second are what the server sustained for all of them.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use super::super::report::percentile;

/// What one phase measured.
pub struct Phase {
    pub ops: usize,
    pub wall: Duration,
    /// Per-operation latencies in microseconds, sorted.
    pub latencies_us: Vec<f64>,
}

impl Phase {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.wall.as_secs_f64()
    }

    pub fn median_us(&self) -> f64 {
        percentile(&self.latencies_us, 50.0)
    }

    pub fn p99_us(&self) -> f64 {
        percentile(&self.latencies_us, 99.0)
    }
}

/// Runs `op(client, i)` for i in 0..per_client on one thread per client.
pub fn run<C: Sync>(clients: &[C], per_client: usize, op: impl Fn(&C, usize) -> Result<()> + Sync) -> Result<Phase> {
    let barrier = Barrier::new(clients.len() + 1);
    let (wall, results) = std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter()
            .map(|client| {
                let (barrier, op) = (&barrier, &op);
                s.spawn(move || -> Result<Vec<f64>> {
                    let mut lat = Vec::with_capacity(per_client);
                    barrier.wait();
                    for i in 0..per_client {
                        let t = Instant::now();
                        op(client, i)?;
                        lat.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    Ok(lat)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let results: Vec<Result<Vec<f64>>> =
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("a bench client thread panicked")))).collect();
        (start.elapsed(), results)
    });
    let mut latencies_us = Vec::with_capacity(clients.len() * per_client);
    for r in results {
        latencies_us.extend(r?);
    }
    latencies_us.sort_by(f64::total_cmp);
    Ok(Phase { ops: latencies_us.len(), wall, latencies_us })
}

/// Waits until the metadata servers have removed every unlinked file's objects from the OSDs
/// (they do so after answering the unlink: `tessera_mds::reaper`), so that the next phase does
/// not share the machine with that work; returns how long that took.
pub fn until_objects_removed(admin: &tessera_client::Client) -> Result<Duration> {
    let start = Instant::now();
    loop {
        let left = admin.statfs()?.pending_removals;
        if left == 0 {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(start.elapsed() < REMOVAL_WAIT_MAX, "{left} unlinked files' objects are still awaiting removal after {REMOVAL_WAIT_MAX:?}: is an OSD down?");
        std::thread::sleep(REMOVAL_POLL);
    }
}

/// How often [`until_objects_removed`] asks, and for how long at most.
const REMOVAL_POLL: Duration = Duration::from_millis(1);
const REMOVAL_WAIT_MAX: Duration = Duration::from_secs(60);

/// Runs `phase` and returns it with the CPU time process `pid` used meanwhile.
pub fn with_cpu_of(pid: u32, phase: impl FnOnce() -> Result<Phase>) -> Result<(Phase, Duration)> {
    let before = crate::bench::cpu::process_cpu(pid)?;
    let p = phase()?;
    Ok((p, crate::bench::cpu::process_cpu(pid)?.saturating_sub(before)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn every_client_runs_its_share_and_errors_surface() {
        let count = AtomicUsize::new(0);
        let p = run(&[1, 2, 3], 10, |c, _| {
            count.fetch_add(*c, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        assert_eq!(p.ops, 30);
        assert_eq!(count.load(Ordering::SeqCst), 60);
        assert!(p.latencies_us.windows(2).all(|w| w[0] <= w[1]));
        let failed = run(&[0, 1], 5, |c, i| if *c == 1 && i == 3 { Err(anyhow!("boom")) } else { Ok(()) });
        assert!(failed.is_err());
    }

    #[test]
    fn cpu_time_of_this_process_grows_with_work() {
        let me = std::process::id();
        let (_, cpu) = with_cpu_of(me, || {
            let t = Instant::now();
            let mut x = 0u64;
            while t.elapsed() < Duration::from_millis(300) {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            std::hint::black_box(x);
            run(&[()], 1, |_, _| Ok(()))
        })
        .unwrap();
        assert!(cpu >= Duration::from_millis(100), "{cpu:?} for 300 ms of spinning");
    }
}
