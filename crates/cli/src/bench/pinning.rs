//! Each side of a bench on cores of its own, as two hosts would be. On a two-core machine the
//! scheduler otherwise places a client and the daemon it talks to over loopback differently
//! from one daemon to the next and from one run to the next (the same core, or one each, which
//! changes what each command costs). Two identical NOSEC daemons measured in turn then differed
//! by up to 2x in time and CPU per 1 MiB READ; pinned, by a few percent (docs/benchmarks.md,
//! "Each side on its own core"). Baseline and measured variant are pinned alike. Pinning adds a
//! cross-CPU wake-up to every command, which makes time ratios of short transfers smaller; the
//! docs give the runs without it too.

use anyhow::{bail, Result};
use clap::Args;

#[derive(Args, Clone, Debug, Default)]
pub struct PinArgs {
    /// Let the scheduler place this process and its daemons. By default, on a machine with two
    /// or more CPUs, the client (this process) runs on the first CPU it may use and the daemons
    /// on the others, as two hosts would.
    #[arg(long)]
    pub no_pin: bool,
}

/// Which CPUs each side runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub client: Vec<usize>,
    pub daemons: Vec<usize>,
}

impl Split {
    /// The CPUs this process may use, first to the client and the rest to the daemons; None
    /// with fewer than two.
    pub fn of(allowed: &[usize]) -> Option<Split> {
        match allowed {
            [first, rest @ ..] if !rest.is_empty() => Some(Split { client: vec![*first], daemons: rest.to_vec() }),
            _ => None,
        }
    }

    /// For reports: "client on CPU 0, daemons on CPU 1".
    pub fn describe(&self) -> String {
        format!("client on CPU {}, daemons on CPU {}", list(&self.client), list(&self.daemons))
    }
}

fn list(cpus: &[usize]) -> String {
    cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// Pins this process (every thread it has; threads started later inherit their creator's CPUs)
/// to the client's CPUs, and every daemon it starts from now on to the daemons' CPUs (set in
/// the child before it runs, so none of its threads starts elsewhere). Returns what was done,
/// for the report: the split, or why there is none.
pub fn apply(args: &PinArgs) -> Result<String> {
    if args.no_pin {
        return Ok("no (--no-pin)".into());
    }
    let Some(split) = Split::of(&allowed_cpus()?) else {
        return Ok("no (fewer than two CPUs)".into());
    };
    for entry in std::fs::read_dir("/proc/self/task")? {
        let tid: libc::pid_t = entry?.file_name().to_string_lossy().parse()?;
        set_affinity(tid, &split.client)?;
    }
    crate::children::set_daemon_cpus(Some(cpu_set(&split.daemons)));
    Ok(split.describe())
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Result<Vec<usize>> {
    cpus_of(0)
}

/// The CPUs process (or thread) `pid` may run on, as the kernel has them (0: this thread):
/// what a report states, read back rather than assumed.
pub fn cpus_of(pid: u32) -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; the kernel fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(pid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        bail!("sched_getaffinity of {pid}: {}", std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: as above; CPU_SET only writes inside the set for c < CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

fn set_affinity(tid: libc::pid_t, cpus: &[usize]) -> Result<()> {
    let set = cpu_set(cpus);
    // SAFETY: a plain system call on a set that lives across it.
    if unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        let e = std::io::Error::last_os_error();
        // A thread that has just exited is no longer there to pin.
        if e.raw_os_error() != Some(libc::ESRCH) {
            bail!("pinning thread {tid} to CPU {}: {e}", list(cpus));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_cpu_goes_to_the_client_and_the_rest_to_the_daemons() {
        assert_eq!(Split::of(&[]), None);
        assert_eq!(Split::of(&[3]), None);
        assert_eq!(Split::of(&[0, 1]), Some(Split { client: vec![0], daemons: vec![1] }));
        let s = Split::of(&[2, 5, 7]).unwrap();
        assert_eq!((s.client, s.daemons.clone()), (vec![2], vec![5, 7]));
        assert_eq!(Split::of(&[0, 1]).unwrap().describe(), "client on CPU 0, daemons on CPU 1");
    }
}
