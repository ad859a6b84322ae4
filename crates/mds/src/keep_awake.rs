//! Keeps the event loop's CPU from halting while the loop waits for its disk.
//!
//! A round's fdatasync sleeps twice, until the write's and then the cache flush's completion
//! interrupt. The loop runs on the CPU that takes them (`loop_cpus.rs`), and that CPU has
//! nothing else to run meanwhile, so it halts. On a virtual machine whose guest does not poll
//! before halting (`haltpoll` with `guest_halt_poll_ns` 0, as on the machines Tessera is
//! measured on), each interrupt then first brings the vCPU back from the host, and the loop
//! pays that twice a round. The guest's own
//! halt polling, turned on for a test, took four clients' creates to 23.1-23.4k/s
//! (docs/benchmarks.md, "Why the flush varies").
//!
//! This is the same within the server: while the loop waits for a flush, a companion thread
//! placed on the loop's CPUs spins. It runs under `SCHED_IDLE`, so anything else that wants the
//! CPU, the loop woken by its interrupt first, takes it at once. It spins only while a flush
//! that several replies wait for is in flight ([`KeepAwake::during`], [`ANSWERS_MIN`]) and
//! parks otherwise, and it gives up on a flush that outlasts [`SPIN_MAX`]. So a quiet server
//! spins not at all, a busy one at most for the time it waits on a quick disk, and one on a
//! slow disk (a spinning one's flush takes milliseconds) hardly at all. Measured in
//! docs/metadata.md ("The loop's CPU kept awake through flushes").
//!
//! `tessera mds --flush-wait sleep` turns it off; a loop left unplaced (`--loop-cpus any`, or a
//! store without a disk) never uses it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::cpus::CpuSet;

/// The fewest replies a flush must hold back for the CPU to be kept awake through it. Four
/// clients' rounds gained 14% (medians 21.1k against 24.1k creates/s, ahead in six pairs of
/// six); spinning for a lone client's rounds gained nothing and cost 30-55 us of CPU a create
/// and up to 30 us of latency (docs/metadata.md, "The loop's CPU kept awake through flushes").
pub const ANSWERS_MIN: usize = 2;

/// The longest the companion spins through one flush. A flush of a solid-state or virtual disk
/// takes 20-200 us, and a CPU that halts costs its wake-up, tens of us, on each; a spinning
/// disk's takes milliseconds, against which the wake-up is lost in the noise and the spin is
/// a CPU burnt.
pub const SPIN_MAX: Duration = Duration::from_millis(1);

/// How the loop's CPU waits for a flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushWait {
    /// A lowest-priority thread on the loop's CPUs spins, so the CPU does not halt.
    Spin,
    /// The CPU may halt.
    Sleep,
}

impl FlushWait {
    pub fn parse(arg: &str) -> Result<FlushWait, String> {
        match arg {
            "spin" => Ok(FlushWait::Spin),
            "sleep" => Ok(FlushWait::Sleep),
            other => Err(format!("`{other}`: --flush-wait takes spin or sleep")),
        }
    }
}

struct Shared {
    /// The flush in flight, numbered from 1; 0 when none is.
    waiting: AtomicU64,
    /// The number the last flush was given.
    flushes: AtomicU64,
    /// The owner is gone: end.
    stop: AtomicBool,
}

/// The companion thread, once the loop is placed.
struct Companion {
    thread: Thread,
    tid: u32,
    cpus: Vec<usize>,
}

pub struct KeepAwake {
    mode: FlushWait,
    shared: Arc<Shared>,
    companion: Option<Companion>,
    /// The loop is placed, so the companion helps (it stays, parked, while the loop is not).
    active: bool,
    /// CPUs the companion could not be placed on: not tried again (this runs every loop turn)
    /// until the loop moves.
    failed_on: Option<Vec<usize>>,
    /// Placements tried, successful or not: one per move of the loop.
    tries: u32,
}

impl KeepAwake {
    pub fn new(mode: FlushWait) -> KeepAwake {
        KeepAwake { mode, shared: Arc::new(Shared { waiting: AtomicU64::new(0), flushes: AtomicU64::new(0), stop: AtomicBool::new(false) }), companion: None, active: false, failed_on: None, tries: 0 }
    }

    /// Keeps `cpus` awake from now on (the loop's placement, `None` when it is not placed, in
    /// which case nothing is kept awake: there is no one CPU the interrupts will find).
    pub fn follow(&mut self, cpus: Option<&[usize]>) {
        if self.mode == FlushWait::Sleep {
            return;
        }
        let Some(cpus) = cpus else {
            self.active = false;
            return;
        };
        if self.active && self.companion.as_ref().is_some_and(|c| c.cpus == cpus) || self.failed_on.as_deref() == Some(cpus) {
            return;
        }
        self.tries += 1;
        let result = match &self.companion {
            Some(c) => CpuSet::of(cpus).apply_to(c.tid).map(|()| Companion { thread: c.thread.clone(), tid: c.tid, cpus: cpus.to_vec() }),
            None => spawn(&self.shared, cpus),
        };
        match result {
            Ok(companion) => {
                self.companion = Some(companion);
                self.active = true;
                self.failed_on = None;
            }
            Err(e) => {
                self.active = false;
                self.failed_on = Some(cpus.to_vec());
                tracing::warn!(%e, ?cpus, "cannot keep the MDS event loop's CPU awake through flushes; it may halt");
            }
        }
    }

    /// Runs `wait`, a flush whose end `answers` replies wait for, with the CPUs kept awake when
    /// there are at least [`ANSWERS_MIN`] of them.
    pub fn during<T>(&self, answers: usize, wait: impl FnOnce() -> T) -> T {
        let Some(companion) = self.companion.as_ref().filter(|_| self.active && answers >= ANSWERS_MIN) else { return wait() };
        let flush = self.shared.flushes.fetch_add(1, Ordering::Relaxed) + 1;
        self.shared.waiting.store(flush, Ordering::Release);
        companion.thread.unpark();
        // Stops the spinning however `wait` ends.
        struct Done<'a>(&'a AtomicU64);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::Release);
            }
        }
        let _done = Done(&self.shared.waiting);
        wait()
    }

    /// The companion thread's id while it keeps a CPU awake.
    pub fn companion_tid(&self) -> Option<u32> {
        self.companion.as_ref().filter(|_| self.active).map(|c| c.tid)
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(c) = &self.companion {
            c.thread.unpark();
        }
    }
}

fn spawn(shared: &Arc<Shared>, cpus: &[usize]) -> io::Result<Companion> {
    let (tx, rx) = std::sync::mpsc::channel();
    let shared = shared.clone();
    let set = CpuSet::of(cpus);
    let handle = std::thread::Builder::new().name("mds-keep-awake".into()).spawn(move || {
        // SAFETY: plain system calls about the calling thread, with a parameter that lives
        // across the call.
        let placed = set.apply_to(0).and_then(|()| {
            let param = libc::sched_param { sched_priority: 0 };
            match unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } {
                0 => Ok(()),
                _ => Err(io::Error::last_os_error()),
            }
        });
        let tid = unsafe { libc::gettid() } as u32;
        let ok = placed.is_ok();
        let _ = tx.send(placed.map(|()| tid));
        if !ok {
            return;
        }
        // The last flush spun through, to its end or to `SPIN_MAX`.
        let mut spun = 0;
        while !shared.stop.load(Ordering::Acquire) {
            let flush = shared.waiting.load(Ordering::Acquire);
            if flush == 0 || flush == spun {
                std::thread::park();
                continue;
            }
            spun = flush;
            let start = Instant::now();
            // The clock is read every 64 turns: a turn is a few ns, a clock read tens.
            let mut turns = 0u32;
            while shared.waiting.load(Ordering::Acquire) == flush {
                std::hint::spin_loop();
                turns = turns.wrapping_add(1);
                if turns.is_multiple_of(64) && start.elapsed() > SPIN_MAX {
                    break;
                }
            }
        }
    })?;
    let tid = rx.recv().map_err(|_| io::Error::other("the keep-awake thread ended at start"))??;
    Ok(Companion { thread: handle.thread().clone(), tid, cpus: cpus.to_vec() })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Nanoseconds thread `tid` of this process has run (`/proc/.../schedstat`).
    fn ran_ns(tid: u32) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap();
        text.split_whitespace().next().unwrap().parse().unwrap()
    }

    #[test]
    fn the_companion_spins_at_idle_priority_on_the_loops_cpu_only_during_a_flush() {
        let cpu = *CpuSet::of_thread(0).unwrap().cpus().last().unwrap();
        let mut awake = KeepAwake::new(FlushWait::Spin);
        awake.during(4, || ()); // nothing to keep awake yet: no companion
        assert_eq!(awake.companion_tid(), None);
        awake.follow(Some(&[cpu]));
        let tid = awake.companion_tid().expect("a companion");
        assert_eq!(unsafe { libc::sched_getscheduler(tid as libc::pid_t) }, libc::SCHED_IDLE);
        assert_eq!(CpuSet::of_thread(tid).unwrap().cpus(), vec![cpu]);

        // Measured over several flushes: another test may hold the CPU through one.
        let before = ran_ns(tid);
        for _ in 0..10 {
            awake.during(4, || std::thread::sleep(Duration::from_micros(800)));
        }
        let spun = ran_ns(tid) - before;
        assert!(spun > 1_000_000, "spun {spun} ns through ten 0.8 ms flushes four replies wait for");

        // A slow disk's flush: spun through for `SPIN_MAX`, then parked for the rest.
        std::thread::sleep(Duration::from_millis(10));
        let before = ran_ns(tid);
        for _ in 0..5 {
            awake.during(4, || std::thread::sleep(Duration::from_millis(20)));
        }
        let spun = ran_ns(tid) - before;
        assert!(spun > 1_000_000 && spun < 15_000_000, "spun {spun} ns through five 20 ms flushes, 1 ms at most each");

        std::thread::sleep(Duration::from_millis(10));
        let before = ran_ns(tid);
        awake.during(1, || std::thread::sleep(Duration::from_millis(100)));
        let alone = ran_ns(tid) - before;
        assert!(alone < 10_000_000, "ran {alone} ns through a flush one reply waits for");

        std::thread::sleep(Duration::from_millis(10));
        let before = ran_ns(tid);
        std::thread::sleep(Duration::from_millis(100));
        let idle = ran_ns(tid) - before;
        assert!(idle < 10_000_000, "ran {idle} ns with no flush in flight");
    }

    #[test]
    fn cpus_it_cannot_be_placed_on_are_tried_once_until_the_loop_moves() {
        let mut awake = KeepAwake::new(FlushWait::Spin);
        let nowhere = [usize::MAX - 1];
        awake.follow(Some(&nowhere));
        assert_eq!(awake.companion_tid(), None);
        assert_eq!(awake.failed_on.as_deref(), Some(&nowhere[..]));
        for _ in 0..50 {
            awake.follow(Some(&nowhere));
        }
        assert_eq!(awake.tries, 1, "CPUs that already failed are not tried every turn");
        let cpu = *CpuSet::of_thread(0).unwrap().cpus().last().unwrap();
        awake.follow(Some(&[cpu]));
        assert!(awake.companion_tid().is_some() && awake.failed_on.is_none(), "placed once the loop moves");
    }

    #[test]
    fn sleep_and_an_unplaced_loop_keep_nothing_awake() {
        let mut awake = KeepAwake::new(FlushWait::Sleep);
        awake.follow(Some(&[0]));
        assert_eq!(awake.companion_tid(), None);
        let mut awake = KeepAwake::new(FlushWait::Spin);
        awake.follow(None);
        assert_eq!(awake.companion_tid(), None);
        assert_eq!(FlushWait::parse("spin"), Ok(FlushWait::Spin));
        assert_eq!(FlushWait::parse("sleep"), Ok(FlushWait::Sleep));
        assert!(FlushWait::parse("poll").unwrap_err().contains("spin or sleep"));
    }
}
