//! [`Reaper`]: removes the data objects of unlinked and replaced files after the namespace
//! change is answered, as Lustre's MDS destroys OST objects and CephFS purges: an `rm` costs
//! one durable step, not a round trip to every OSD the file touched.
//!
//! - What makes it safe is the removal journal (`journal.rs`): the step that drops a file
//!   journals its objects, durably, before the unlink is answered. The reaper only does the
//!   REMOVEs and clears the rows; a crash, a stop or an OSD that does not answer leaves rows
//!   for the next drain (the background retrier, or start-up), so nothing leaks and nothing
//!   acknowledged is undone.
//! - One thread takes everything queued at once (up to [`BATCH_MAX`]) and has those REMOVEs in
//!   flight together, then clears their rows in one step: removals from many `rm`s share
//!   their round trips and their store write. Woken by a first object, it waits up to
//!   [`LINGER`] for [`GATHER`] of them, so an `rm -r` does not pay a pass per file.
//! - Back-pressure: past [`QUEUED_MAX`] queued objects (`MdsConfig::removal_queue_max`), an
//!   unlink removes its own objects before it answers, as it did before the reaper, so a fast
//!   `rm -r` cannot run ahead of the OSDs without bound. The event loop never waits on an OSD:
//!   while the queue is that full it leaves unlinks to the workers ([`Reaper::backed_up`]),
//!   and what it hands over itself is only queued ([`Reaper::queue`]).
//! - What a user sees: `df` gives back the space a moment after `rm`, and counts the objects
//!   still awaiting removal meanwhile (`tessera df`, the namespace line).

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tessera_mds_proto::ObjectRef;

use crate::journal;
use crate::namespace::Namespace;
use crate::objects::DataObjects;

/// The most objects one pass removes (their REMOVEs in flight together, their rows cleared in
/// one step).
pub const BATCH_MAX: usize = 4096;
/// Queued objects past which an unlink removes its own objects before it answers (the
/// default of `MdsConfig::removal_queue_max`).
pub const QUEUED_MAX: usize = 65_536;
/// Objects a pass waits for, at most [`LINGER`], before it starts.
pub const GATHER: usize = 64;
pub const LINGER: Duration = Duration::from_millis(2);

#[derive(Default)]
struct Queue {
    objects: Vec<ObjectRef>,
    /// A pass is removing objects taken off the queue.
    busy: bool,
    stop: bool,
}

struct Shared {
    ns: Arc<Namespace>,
    /// [`QUEUED_MAX`], or what the server was configured with.
    queued_max: usize,
    objects: Arc<dyn DataObjects>,
    queue: Mutex<Queue>,
    /// Wakes the thread: objects queued, or a stop asked.
    wake: Condvar,
    /// Wakes those waiting for the queue to empty.
    idle: Condvar,
}

pub struct Reaper {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Reaper {
    pub fn start(ns: Arc<Namespace>, objects: Arc<dyn DataObjects>, queued_max: usize) -> std::io::Result<Reaper> {
        let shared = Arc::new(Shared { ns, queued_max, objects, queue: Mutex::default(), wake: Condvar::new(), idle: Condvar::new() });
        let worker = shared.clone();
        let thread = std::thread::Builder::new().name("mds-reaper".into()).spawn(move || worker.run())?;
        Ok(Reaper { shared, thread: Some(thread) })
    }

    /// Removes `journaled` (objects whose rows the removal journal holds, durably) from their
    /// OSDs: in the background, or now when the queue is full. May wait on the OSDs.
    pub fn remove(&self, journaled: &[ObjectRef]) {
        if !journaled.is_empty() && !self.enqueue(journaled, false) {
            journal::drain(&self.shared.ns, self.shared.objects.as_ref(), journaled);
        }
    }

    /// Queues `journaled` for removal however full the queue is: for the event loop, which
    /// must not wait on an OSD and takes no unlink while [`Reaper::backed_up`].
    pub fn queue(&self, journaled: &[ObjectRef]) {
        if !journaled.is_empty() && !self.enqueue(journaled, true) {
            tracing::debug!(count = journaled.len(), "the reaper has stopped: objects stay journaled for the next start");
        }
    }

    /// Whether the queue is full ([`QUEUED_MAX`] objects by default): unlinks should then
    /// remove their own objects.
    pub fn backed_up(&self) -> bool {
        self.shared.lock().objects.len() >= self.shared.queued_max
    }

    /// Queues `journaled` unless the reaper stopped, or the queue is full and `always` is not
    /// set; whether it did.
    fn enqueue(&self, journaled: &[ObjectRef], always: bool) -> bool {
        let mut q = self.shared.lock();
        if q.stop || (q.objects.len() >= self.shared.queued_max && !always) {
            return false;
        }
        let first = q.objects.is_empty();
        q.objects.extend_from_slice(journaled);
        if first || q.objects.len() >= GATHER {
            self.shared.wake.notify_one();
        }
        true
    }

    /// Waits until every object queued so far has had its removal tried, or until `limit`
    /// passes; true when the queue emptied. (A removal that failed stays journaled: this does
    /// not wait for an OSD to come back.)
    pub fn settle(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut q = self.shared.lock();
        while !q.objects.is_empty() || q.busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            q = self.shared.idle.wait_timeout(q, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        true
    }
}

impl Drop for Reaper {
    /// Stops after the pass under way; what is still queued stays journaled for the next start.
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self) {
        loop {
            let batch = {
                let mut q = self.lock();
                q.busy = false;
                while q.objects.is_empty() && !q.stop {
                    self.idle.notify_all();
                    q = self.wake.wait(q).unwrap_or_else(|p| p.into_inner());
                }
                let linger_until = Instant::now() + LINGER;
                while q.objects.len() < GATHER && !q.stop {
                    let left = linger_until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    q = self.wake.wait_timeout(q, left).unwrap_or_else(|p| p.into_inner()).0;
                }
                if q.stop {
                    self.idle.notify_all();
                    return;
                }
                let take = q.objects.len().min(BATCH_MAX);
                q.busy = true;
                q.objects.drain(..take).collect::<Vec<_>>()
            };
            let left = journal::drain(&self.ns, self.objects.as_ref(), &batch);
            if left > 0 {
                tracing::debug!(left, "objects stay journaled until their OSDs answer");
            }
        }
    }
}
