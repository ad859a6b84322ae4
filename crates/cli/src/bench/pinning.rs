//! Each side of a bench on cores of its own, as two hosts would be. On a two-core machine the
//! scheduler otherwise places a client and the daemon it talks to over loopback differently
//! from one daemon to the next and from one run to the next (the same core, or one each, which
//! changes what each command costs). Two identical NOSEC daemons measured in turn then differed
//! by up to 2x in time and CPU per 1 MiB READ; pinned, by a few percent (docs/benchmarks.md,
//! "Each side on its own core"). Baseline and measured variant are pinned alike. Pinning adds a
//! cross-CPU wake-up to every command, which makes time ratios of short transfers smaller; the
//! docs give the runs without it too.

use anyhow::{bail, Context, Result};
use clap::Args;
use tessera_mds::cpus::{format_list, CpuSet};

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
        format!("client on CPU {}, daemons on CPU {}", format_list(&self.client), format_list(&self.daemons))
    }
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
        let tid: u32 = entry?.file_name().to_string_lossy().parse()?;
        set_affinity(tid, &split.client)?;
    }
    crate::children::set_daemon_cpus(Some(CpuSet::of(&split.daemons)));
    Ok(split.describe())
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Result<Vec<usize>> {
    cpus_of(0)
}

/// The CPUs process (or thread) `pid` may run on, as the kernel has them (0: this thread):
/// what a report states, read back rather than assumed.
pub fn cpus_of(pid: u32) -> Result<Vec<usize>> {
    Ok(CpuSet::of_thread(pid).with_context(|| format!("sched_getaffinity of {pid}"))?.cpus())
}

/// The CPUs of the thread of process `pid` whose name starts with `prefix` (a daemon's event
/// loop, which may place itself: `tessera mds --loop-cpus`), read back for a report; None when
/// no thread has that name.
pub fn cpus_of_thread_named(pid: u32, prefix: &str) -> Result<Option<Vec<usize>>> {
    thread_named(pid, prefix)?.map(cpus_of).transpose()
}

/// The id of the thread of process `pid` whose name starts with `prefix`; None when no thread
/// has that name.
pub fn thread_named(pid: u32, prefix: &str) -> Result<Option<u32>> {
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).with_context(|| format!("listing the threads of process {pid}"))? {
        let task = entry?.path();
        let named = std::fs::read_to_string(task.join("comm")).is_ok_and(|n| n.starts_with(prefix));
        let tid = task.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<u32>().ok());
        if let (true, Some(tid)) = (named, tid) {
            return Ok(Some(tid));
        }
    }
    Ok(None)
}

fn set_affinity(tid: u32, cpus: &[usize]) -> Result<()> {
    match CpuSet::of(cpus).apply_to(tid) {
        // A thread that has just exited is no longer there to pin.
        Err(e) if e.raw_os_error() != Some(libc::ESRCH) => bail!("pinning thread {tid} to CPU {}: {e}", format_list(cpus)),
        _ => Ok(()),
    }
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
