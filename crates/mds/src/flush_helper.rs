//! The event loop's flushes run by a helper thread on the loop's CPU while the loop polls for
//! the end, yielding, instead of sleeping in fdatasync itself. A flush is a write and a cache
//! flush, each ended by the disk's interrupt; a sleeping loop leaves its CPU idle, and on a
//! virtual machine an idle CPU halts, so each interrupt first pays the return from halt. With
//! the loop polling, the CPU is busy when the interrupt comes; the helper, on the same CPU, is
//! woken without crossing CPUs and the loop's next yield lets it run. Measured in
//! docs/benchmarks.md ("The flush polled on the disk's CPU"). The loop polls for at most
//! [`POLL_MAX`], then sleeps until the helper wakes it: a slow or failing disk costs no CPU.
//!
//! Which thread uses a helper is per thread ([`install`]): the group commit's rounds call
//! [`sync_data`], which hands the flush to the calling thread's helper if it has one (the loop),
//! and flushes in place otherwise (workers).

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// The longest the caller polls before it sleeps: a few flushes of a disk with a write-back
/// cache (about 80 us each here); past that the wake-up is small beside the flush.
pub const POLL_MAX: Duration = Duration::from_millis(2);

/// A flush's outcome, written by the helper.
struct Done {
    finished: AtomicBool,
    errno: AtomicI32,
}

/// One flush asked of the helper: the descriptor (open until the caller has seen the outcome:
/// the caller waits for it) and whom to wake.
struct Job {
    fd: RawFd,
    caller: Thread,
}

/// A thread that runs fdatasync for one caller at a time.
pub struct FlushHelper {
    jobs: Sender<Job>,
    done: Arc<Done>,
    tid: u32,
    poll_max: Duration,
}

impl FlushHelper {
    /// Starts the helper. It inherits the caller's CPUs (start it after placing the caller).
    pub fn start(poll_max: Duration) -> io::Result<FlushHelper> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (tid_tx, tid_rx) = mpsc::channel();
        let done = Arc::new(Done { finished: AtomicBool::new(false), errno: AtomicI32::new(0) });
        let outcome = done.clone();
        std::thread::Builder::new().name("mds-flush".into()).spawn(move || {
            // SAFETY: gettid has no arguments.
            let _ = tid_tx.send(unsafe { libc::gettid() } as u32);
            while let Ok(job) = rx.recv() {
                // SAFETY: the caller keeps the descriptor open until it has read the outcome.
                let errno = match unsafe { libc::fdatasync(job.fd) } {
                    0 => 0,
                    _ => io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO),
                };
                outcome.errno.store(errno, Ordering::Relaxed);
                outcome.finished.store(true, Ordering::Release);
                job.caller.unpark();
            }
        })?;
        let tid = tid_rx.recv().map_err(|_| io::Error::other("the flush helper did not start"))?;
        Ok(FlushHelper { jobs, done, tid, poll_max })
    }

    /// The helper's thread id (to place it with its caller).
    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// fdatasync of `file`, run by the helper while the caller polls, then sleeps.
    pub fn sync_data(&self, file: &File) -> io::Result<()> {
        self.done.finished.store(false, Ordering::Relaxed);
        if self.jobs.send(Job { fd: file.as_raw_fd(), caller: std::thread::current() }).is_err() {
            return file.sync_data();
        }
        let until = Instant::now() + self.poll_max;
        while !self.done.finished.load(Ordering::Acquire) {
            if Instant::now() < until {
                // SAFETY: sched_yield has no arguments.
                unsafe { libc::sched_yield() };
            } else {
                std::thread::park_timeout(Duration::from_millis(10));
            }
        }
        match self.done.errno.load(Ordering::Relaxed) {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }
}

thread_local! {
    static HELPER: RefCell<Option<FlushHelper>> = const { RefCell::new(None) };
}

/// From now on the calling thread's [`sync_data`] calls go through `helper`.
pub fn install(helper: FlushHelper) {
    HELPER.with(|h| *h.borrow_mut() = Some(helper));
}

/// fdatasync of `file`: through the calling thread's helper if it has one.
pub fn sync_data(file: &File) -> io::Result<()> {
    HELPER.with(|h| match h.borrow().as_ref() {
        Some(helper) => helper.sync_data(file),
        None => file.sync_data(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushes_run_on_the_helper_and_report_its_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("wal")).unwrap();
        for poll_max in [POLL_MAX, Duration::ZERO] {
            let helper = FlushHelper::start(poll_max).unwrap();
            // SAFETY: gettid has no arguments.
            assert_ne!(helper.tid(), unsafe { libc::gettid() } as u32);
            for _ in 0..3 {
                helper.sync_data(&file).unwrap();
            }
            // A pipe cannot be synced: the helper's EINVAL comes back, as fdatasync's would.
            let mut fds = [0; 2];
            // SAFETY: pipe fills two descriptors through a valid pointer.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            // SAFETY: both descriptors are new and owned here alone.
            let (pipe, _write) = unsafe { (<File as std::os::fd::FromRawFd>::from_raw_fd(fds[0]), <File as std::os::fd::FromRawFd>::from_raw_fd(fds[1])) };
            let err = helper.sync_data(&pipe).unwrap_err();
            assert_eq!(err.raw_os_error(), file_sync_error(&pipe), "poll_max {poll_max:?}");
        }
    }

    fn file_sync_error(f: &File) -> Option<i32> {
        f.sync_data().unwrap_err().raw_os_error()
    }

    #[test]
    fn only_the_thread_that_installed_a_helper_uses_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("wal")).unwrap();
        std::thread::spawn(move || {
            install(FlushHelper::start(POLL_MAX).unwrap());
            sync_data(&file).unwrap();
            HELPER.with(|h| assert!(h.borrow().is_some()));
        })
        .join()
        .unwrap();
        HELPER.with(|h| assert!(h.borrow().is_none()));
    }
}
