//! Sets of CPUs as the kernel's affinity calls take them, and the kernel's list notation for
//! them ("0-3,8", as in `/proc/irq/*/effective_affinity_list`). The MDS keeps its event loop
//! near its disk (`loop_cpus.rs`); the benches give each side of a measurement cores of its own.

use std::fmt;
use std::io;

/// A set of CPUs.
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The set of `cpus` (numbers past what the kernel's set holds are left out).
    pub fn of(cpus: &[usize]) -> CpuSet {
        // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside the set for c < CPU_SETSIZE.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        CpuSet(set)
    }

    /// The CPUs thread (or process) `tid` may run on, as the kernel has them (0: the calling
    /// thread).
    pub fn of_thread(tid: u32) -> io::Result<CpuSet> {
        // SAFETY: as above; the kernel fills at most the set's size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        match unsafe { libc::sched_getaffinity(tid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } {
            0 => Ok(CpuSet(set)),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// The CPUs in the set, in order.
    pub fn cpus(&self) -> Vec<usize> {
        // SAFETY: CPU_ISSET reads inside the set for c < CPU_SETSIZE.
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &self.0) }).collect()
    }

    /// Restricts thread `tid` (0: the calling thread, or between fork and exec the new process)
    /// to the set. One system call, async-signal-safe.
    pub fn apply_to(&self, tid: u32) -> io::Result<()> {
        // SAFETY: a plain system call on a set that lives across it.
        match unsafe { libc::sched_setaffinity(tid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &self.0) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", format_list(&self.cpus()))
    }
}

/// Parses the kernel's list notation: numbers and inclusive ranges, comma-separated
/// ("0-3,8"), into sorted distinct CPUs. Empty input is the empty set.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |n: &str| n.trim().parse::<usize>().map_err(|_| format!("{part:?} is not a CPU number or a range like 0-3"));
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if first > last || last >= libc::CPU_SETSIZE as usize {
            return Err(format!("{part:?}: a range runs upwards, below CPU {}", libc::CPU_SETSIZE));
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// "0,1,5": CPUs for messages and reports.
pub fn format_list(cpus: &[usize]) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_as_the_kernel_writes_them_and_bad_ones_are_refused() {
        assert_eq!(parse_list("1\n"), Ok(vec![1]));
        assert_eq!(parse_list("0-3,8"), Ok(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_list("5,1-2,2"), Ok(vec![1, 2, 5]));
        assert_eq!(parse_list(""), Ok(vec![]));
        for bad in ["x", "3-1", "1-", "-1", "0-99999"] {
            assert!(parse_list(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(format_list(&[0, 1, 5]), "0,1,5");
    }

    #[test]
    fn a_thread_runs_where_it_is_put_and_reads_back_so() {
        let allowed = CpuSet::of_thread(0).unwrap().cpus();
        assert!(!allowed.is_empty());
        let last = *allowed.last().unwrap();
        std::thread::spawn(move || {
            CpuSet::of(&[last]).apply_to(0).unwrap();
            assert_eq!(CpuSet::of_thread(0).unwrap().cpus(), vec![last]);
            // SAFETY: sched_getcpu has no arguments.
            assert_eq!(unsafe { libc::sched_getcpu() }, last as i32);
        })
        .join()
        .unwrap();
        assert_eq!(CpuSet::of_thread(0).unwrap().cpus(), allowed, "only the thread that asked moved");
    }
}
