//! Where the event loop runs (`tessera mds --loop-cpus`). By default on the CPUs that take
//! the completion interrupts of the store's disk: the loop waits for every group's fdatasync
//! (a write, then a cache flush), and each completion wakes it. Elsewhere, each wake-up is a
//! second interrupt, from the disk's CPU to the loop's, which on a virtual machine also costs
//! the loop's CPU a return from halt. Measured in docs/benchmarks.md ("The event loop runs
//! where the disk interrupts"). Interrupts can be moved (irqbalance), so the disk's CPUs are
//! read again every [`RECHECK`].

use std::path::Path;
use std::time::{Duration, Instant};

use crate::cpus::{format_list, parse_list, CpuSet};
use crate::disk_interrupts::DiskInterrupts;

/// How often a loop near its disk looks again at where the disk's interrupts go.
pub const RECHECK: Duration = Duration::from_secs(10);

/// Which CPUs the event loop may run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoopCpus {
    /// Wherever the scheduler puts it.
    Any,
    /// These CPUs.
    Fixed(Vec<usize>),
    /// The CPUs that take these interrupts (the store's disk's).
    NearDisk(DiskInterrupts),
}

impl LoopCpus {
    /// From `--loop-cpus`: `auto` (near the disk under `store_dir`, or anywhere when it has no
    /// disk of its own), `any`, or a CPU list such as `1` or `0-3,8`.
    pub fn parse(arg: &str, store_dir: &Path) -> Result<LoopCpus, String> {
        match arg {
            "auto" => Ok(DiskInterrupts::of(store_dir).map_or(LoopCpus::Any, LoopCpus::NearDisk)),
            "any" => Ok(LoopCpus::Any),
            list => match parse_list(list) {
                Ok(cpus) if !cpus.is_empty() => Ok(LoopCpus::Fixed(cpus)),
                Ok(_) => Err("an empty CPU list: name CPUs (e.g. 1 or 0-3), or auto or any".into()),
                Err(e) => Err(format!("{e} (--loop-cpus takes auto, any, or CPUs such as 1 or 0-3,8)")),
            },
        }
    }

    /// The CPUs the loop would run on now, of `allowed` (the CPUs this process may use); None
    /// for all of them.
    pub fn choose(&self, allowed: &[usize]) -> Option<Vec<usize>> {
        let wanted = match self {
            LoopCpus::Any => return None,
            LoopCpus::Fixed(cpus) => cpus.clone(),
            LoopCpus::NearDisk(disk) => disk.cpus(),
        };
        narrow(&wanted, allowed)
    }

    /// For the server's start line: "CPU 1, where vda's completion interrupts are taken".
    pub fn describe(&self, allowed: &[usize]) -> String {
        match (self, self.choose(allowed)) {
            (_, None) => "any CPU".into(),
            (LoopCpus::NearDisk(disk), Some(cpus)) => format!("CPU {}, where {}'s completion interrupts are taken", format_list(&cpus), disk.disks.join(",")),
            (_, Some(cpus)) => format!("CPU {}", format_list(&cpus)),
        }
    }
}

/// `wanted` within `allowed`; None when that is all of `allowed` (nothing to narrow) or none of
/// it (a set the process may not use: stay where the kernel allows).
fn narrow(wanted: &[usize], allowed: &[usize]) -> Option<Vec<usize>> {
    let within: Vec<usize> = allowed.iter().copied().filter(|c| wanted.contains(c)).collect();
    (!within.is_empty() && within.len() < allowed.len()).then_some(within)
}

/// The calling thread kept on the CPUs a [`LoopCpus`] names.
pub struct Placement {
    wanted: LoopCpus,
    /// The CPUs the thread could use before it was placed.
    allowed: Vec<usize>,
    placed: Option<Vec<usize>>,
    next_check: Instant,
}

impl Placement {
    /// Places the calling thread.
    pub fn start(wanted: LoopCpus) -> Placement {
        let allowed = CpuSet::of_thread(0).map(|s| s.cpus()).unwrap_or_default();
        let mut placement = Placement { wanted, allowed, placed: None, next_check: Instant::now() };
        placement.place();
        placement
    }

    /// Places the thread again if the disk's interrupts have moved since the last look
    /// ([`RECHECK`] ago or more).
    pub fn check(&mut self, now: Instant) {
        if now >= self.next_check && matches!(self.wanted, LoopCpus::NearDisk(_)) {
            self.place();
        }
    }

    /// The CPUs the thread is held to; None: all it may use.
    pub fn placed(&self) -> Option<&[usize]> {
        self.placed.as_deref()
    }

    fn place(&mut self) {
        self.next_check = Instant::now() + RECHECK;
        let chosen = self.wanted.choose(&self.allowed);
        if chosen == self.placed {
            return;
        }
        let set = CpuSet::of(chosen.as_deref().unwrap_or(&self.allowed));
        match set.apply_to(0) {
            Ok(()) => {
                tracing::info!(cpus = ?chosen, wanted = ?self.wanted, "MDS event loop placed");
                self.placed = chosen;
            }
            Err(e) => tracing::warn!(%e, cpus = ?chosen, "cannot place the MDS event loop; it stays where it was"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_is_narrowed_only_to_a_part_of_what_it_may_use() {
        assert_eq!(narrow(&[1], &[0, 1]), Some(vec![1]));
        assert_eq!(narrow(&[1, 3, 9], &[0, 1, 2, 3]), Some(vec![1, 3]));
        assert_eq!(narrow(&[0, 1], &[0, 1]), None, "every allowed CPU: nothing to narrow");
        assert_eq!(narrow(&[5], &[0, 1]), None, "none allowed: stays where the kernel allows");
        assert_eq!(narrow(&[], &[0, 1]), None, "interrupts not readable");
        assert_eq!(LoopCpus::Any.choose(&[0, 1]), None);
        assert_eq!(LoopCpus::Fixed(vec![1]).choose(&[0, 1]), Some(vec![1]));
    }

    #[test]
    fn the_flag_takes_auto_any_or_a_list_and_says_what_is_wrong() {
        let shm = Path::new("/dev/shm");
        if shm.exists() {
            assert_eq!(LoopCpus::parse("auto", shm), Ok(LoopCpus::Any), "a RAM-backed store has no disk to be near");
        }
        assert_eq!(LoopCpus::parse("any", shm), Ok(LoopCpus::Any));
        assert_eq!(LoopCpus::parse("1,3", shm), Ok(LoopCpus::Fixed(vec![1, 3])));
        assert!(LoopCpus::parse("", shm).unwrap_err().contains("empty"));
        assert!(LoopCpus::parse("two", shm).unwrap_err().contains("auto, any"));
    }

    #[test]
    fn a_placed_thread_runs_on_the_chosen_cpu_only() {
        let allowed = CpuSet::of_thread(0).unwrap().cpus();
        let last = *allowed.last().unwrap();
        std::thread::spawn(move || {
            let placement = Placement::start(LoopCpus::Fixed(vec![last]));
            let now = CpuSet::of_thread(0).unwrap().cpus();
            if allowed.len() > 1 {
                assert_eq!((placement.placed(), now), (Some(&[last][..]), vec![last]));
            } else {
                assert_eq!((placement.placed(), now), (None, allowed), "one CPU: nothing to narrow");
            }
        })
        .join()
        .unwrap();
    }
}
