//! Group commit: many requests' steps share one durable SQLite commit, so the disk's flush
//! (`synchronous=FULL`: an fsync of the WAL per COMMIT) is paid once per group, not per
//! request, and no request is answered before its step is durable.
//!
//! Each step runs on its caller's thread, under the writer lock, inside a SAVEPOINT of the open
//! transaction: a failing step rolls back only itself. After its step, the holder commits
//! unless other threads are already waiting for the lock; then it leaves the transaction open
//! for them and waits for the commit of its group. The last of a group to run finds nobody
//! waiting and commits for all. A group is therefore exactly the requests that arrived while
//! the previous commit was flushing, and a lone request commits at once, as without grouping.
//!
//! A step that fails also waits for its group's commit before answering: it may have judged by
//! another step of the group (EEXIST from a name created in the same group), and must not
//! answer by state that a failed commit then takes back.

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use tessera_mds_proto::FsError;

use crate::store::{exec, Store};

/// Steps in one group at most: past this the holder commits even with threads waiting, so a
/// stream of arrivals cannot hold a commit back indefinitely.
pub const GROUP_MAX: usize = 64;
/// Failed groups remembered for waiters that have not woken yet.
const FAILED_KEPT: usize = 64;

struct Writer {
    store: Store,
    /// The group whose transaction is open, and how many steps it holds.
    open: Option<(u64, usize)>,
    last_group: u64,
}

struct Groups {
    /// Every group up to this one has committed or failed.
    finished: u64,
    failed: VecDeque<u64>,
}

/// The writer connection of one store, with group commit.
pub struct GroupCommit {
    writer: Mutex<Writer>,
    /// Threads waiting for `writer`.
    arriving: AtomicUsize,
    groups: Mutex<Groups>,
    finished: Condvar,
}

impl GroupCommit {
    pub fn new(store: Store) -> GroupCommit {
        GroupCommit {
            writer: Mutex::new(Writer { store, open: None, last_group: 0 }),
            arriving: AtomicUsize::new(0),
            groups: Mutex::new(Groups { finished: 0, failed: VecDeque::new() }),
            finished: Condvar::new(),
        }
    }

    /// Runs `step` atomically and returns its result once the step is durable.
    pub fn write<R>(&self, step: impl FnOnce(&mut Store) -> Result<R, FsError>) -> Result<R, FsError> {
        self.arriving.fetch_add(1, Ordering::SeqCst);
        // Poisoning: a step panicked; its savepoint was rolled back, so carrying on is safe.
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.arriving.fetch_sub(1, Ordering::SeqCst);
        let (group, steps) = match w.open {
            Some(open) => open,
            None => {
                exec(w.store.conn(), "BEGIN IMMEDIATE", [])?;
                w.last_group += 1;
                (w.last_group, 0)
            }
        };
        w.open = Some((group, steps + 1));
        let outcome = in_savepoint(&mut w.store, step);
        // A panicking step commits the group at once, so nobody waits on a group left open.
        if outcome.is_ok() && self.arriving.load(Ordering::SeqCst) > 0 && steps + 1 < GROUP_MAX {
            drop(w);
            return self.wait(group).and_then(|()| outcome.unwrap_or_else(|p| resume_unwind(p)));
        }
        let committed = exec(w.store.conn(), "COMMIT", []).map(drop);
        if committed.is_err() {
            // A failed COMMIT may leave the transaction open; the next group must start clean.
            let _ = w.store.conn().execute_batch("ROLLBACK");
        }
        w.open = None;
        self.finish(group, committed.is_ok());
        drop(w);
        let result = outcome.unwrap_or_else(|p| resume_unwind(p));
        committed.and(result)
    }

    fn finish(&self, group: u64, ok: bool) {
        let mut g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        g.finished = group;
        if !ok {
            tracing::error!(group, "group commit failed; its requests get EIO");
            g.failed.push_back(group);
            if g.failed.len() > FAILED_KEPT {
                g.failed.pop_front();
            }
        }
        self.finished.notify_all();
    }

    fn wait(&self, group: u64) -> Result<(), FsError> {
        let mut g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        while g.finished < group {
            g = self.finished.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        if g.failed.contains(&group) {
            Err(FsError::Io)
        } else {
            Ok(())
        }
    }
}

/// Runs `step` in a savepoint: released when it succeeds, rolled back when it fails or panics
/// (the panic is returned for the caller to resume once the group is safe).
fn in_savepoint<R>(store: &mut Store, step: impl FnOnce(&mut Store) -> Result<R, FsError>) -> std::thread::Result<Result<R, FsError>> {
    if let Err(e) = exec(store.conn(), "SAVEPOINT step", []) {
        return Ok(Err(e));
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| step(store)));
    let closed = if matches!(outcome, Ok(Ok(_))) {
        exec(store.conn(), "RELEASE step", [])
    } else {
        exec(store.conn(), "ROLLBACK TO step", []).and_then(|_| exec(store.conn(), "RELEASE step", []))
    };
    outcome.map(|result| closed.and(result))
}
