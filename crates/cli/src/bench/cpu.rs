//! CPU time consumed by processes (user + system, all threads), from their CPU clocks.
//! Benches divide it by the bytes moved: CPU seconds per GiB is a cost of the stack itself,
//! which other tenants of a shared machine do not change, unlike its throughput.

use std::time::Duration;

use anyhow::{Context, Result};

/// User + system CPU time of process `pid` so far, all threads, from its CPU clock.
pub fn process_cpu(pid: u32) -> Result<Duration> {
    CpuClock::of_process(pid)?.now()
}

/// CPU time so far of this process and `pids` together. From the CPU clocks, which count
/// nanoseconds: `/proc/<pid>/stat` counts 10 ms ticks, and the short passes of a `--quick`
/// run then read as no CPU at all.
pub fn total_cpu(pids: &[u32]) -> Result<Duration> {
    let mut total = CpuClock::this_process().now()?;
    for &pid in pids {
        total += process_cpu(pid)?;
    }
    Ok(total)
}

/// A process's CPU clock (user + system, all threads) read with `clock_gettime`, at
/// nanosecond resolution where `/proc/<pid>/stat` counts 10 ms ticks: fine enough to charge a
/// few thousand commands of a few microseconds each to the process that served them.
#[derive(Clone, Copy, Debug)]
pub struct CpuClock(libc::clockid_t);

impl CpuClock {
    /// The clock of process `pid` (a child daemon).
    pub fn of_process(pid: u32) -> Result<CpuClock> {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: clock_getcpuclockid writes one clockid_t through a valid pointer.
        let rc = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) };
        anyhow::ensure!(rc == 0, "no CPU clock for process {pid}: {}", std::io::Error::from_raw_os_error(rc));
        let clock = CpuClock(clock);
        clock.now().with_context(|| format!("reading the CPU clock of process {pid}"))?;
        Ok(clock)
    }

    /// This process's clock (every thread of it).
    pub fn this_process() -> CpuClock {
        CpuClock(libc::CLOCK_PROCESS_CPUTIME_ID)
    }

    /// CPU time consumed so far.
    pub fn now(&self) -> Result<Duration> {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec through a valid pointer.
        if unsafe { libc::clock_gettime(self.0, &mut t) } != 0 {
            return Err(std::io::Error::last_os_error()).context("clock_gettime of a CPU clock");
        }
        Ok(Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_up_as_cpu_time() {
        let before = total_cpu(&[]).unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(200) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let used = total_cpu(&[]).unwrap() - before;
        assert!(used >= Duration::from_millis(50), "{used:?} of CPU for 200 ms of spinning");
    }

    /// Goal: the precise clock sees another process's work. Method: a child that spins.
    #[test]
    fn a_child_spinning_shows_on_its_cpu_clock() {
        let mut child = std::process::Command::new("sh").args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"]).spawn().unwrap();
        let clock = CpuClock::of_process(child.id()).unwrap();
        let mut seen = Duration::ZERO;
        // Read it while the child runs (a reaped child has no clock).
        while child.try_wait().unwrap().is_none() {
            if let Ok(t) = clock.now() {
                seen = t;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(seen >= Duration::from_millis(5), "{seen:?} of CPU seen for a child that counted to 200000");
        let mine = CpuClock::this_process().now().unwrap();
        assert!(mine > Duration::ZERO);
    }
}
