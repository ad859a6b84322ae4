//! CPU time consumed by processes, read from `/proc/<pid>/stat` (user + system, all threads).
//! Benches divide it by the bytes moved: CPU seconds per GiB is a cost of the stack itself,
//! which other tenants of a shared machine do not change, unlike its throughput.

use std::time::Duration;

use anyhow::{Context, Result};

/// User + system CPU time of process `pid` so far ("self" for this process).
pub fn process_cpu(pid: &str) -> Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_stat(&text).with_context(|| format!("parsing {path}"))
}

/// Sum of [`process_cpu`] over this process and `pids`.
pub fn total_cpu(pids: &[u32]) -> Result<Duration> {
    let mut total = process_cpu("self")?;
    for pid in pids {
        total += process_cpu(&pid.to_string())?;
    }
    Ok(total)
}

fn parse_stat(text: &str) -> Option<Duration> {
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / per_sec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_up_as_cpu_time() {
        let before = process_cpu("self").unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(200) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let used = process_cpu("self").unwrap() - before;
        assert!(used >= Duration::from_millis(50), "{used:?} of CPU for 200 ms of spinning");
    }

    #[test]
    fn names_with_spaces_and_parentheses_parse() {
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1 1 1";
        let ticks = 300u64;
        let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        assert_eq!(parse_stat(line), Some(Duration::from_nanos(ticks * 1_000_000_000 / per_sec)));
    }
}
