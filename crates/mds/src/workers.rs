//! [`Workers`]: threads for the requests the event loop must not run itself, because they
//! may block: on an OSD (a stat reads object lengths, an unlink removes objects, a create
//! refills an empty pool), on a peer server, or on a group's flush.
//!
//! A job never waits for a free thread: when none is idle a new one starts, so a slow OSD or
//! a peer that calls back can never starve or deadlock the others. Each connection has at most
//! one job at a time (it reads no further request meanwhile), so there are never more threads
//! than connections; idle ones end after [`IDLE_END`].

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How long a thread waits for work before it ends.
const IDLE_END: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

#[derive(Clone, Default)]
pub struct Workers {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    idle: usize,
}

impl Workers {
    /// Runs `job` on an idle thread, or on a new one if none is idle.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.idle > q.jobs.len() {
            q.jobs.push_back(Box::new(job));
            drop(q);
            self.shared.ready.notify_one();
            return;
        }
        drop(q);
        let shared = self.shared.clone();
        let first: Job = Box::new(job);
        let spawned = std::thread::Builder::new().name("mds-worker".into()).spawn(move || work(&shared, first));
        if let Err(e) = spawned {
            // The job is lost with the thread; its connection gets no reply and the client
            // times out. Only when the system is out of threads.
            tracing::error!(%e, "cannot start an MDS worker thread");
        }
    }
}

fn work(shared: &Shared, first: Job) {
    run_caught(first);
    let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if let Some(job) = q.jobs.pop_front() {
            drop(q);
            run_caught(job);
            q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            continue;
        }
        q.idle += 1;
        let (woken, timeout) = shared.ready.wait_timeout(q, IDLE_END).unwrap_or_else(|p| p.into_inner());
        q = woken;
        q.idle -= 1;
        if timeout.timed_out() && q.jobs.is_empty() {
            return;
        }
    }
}

/// A job that panics ends only itself (the store rolled its step back, `commit.rs`).
fn run_caught(job: Job) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
        tracing::error!("an MDS request panicked");
    }
}
