//! Group commit with the flush outside the writer: many requests share one fdatasync of the
//! WAL, the next requests' steps run while it flushes, and no request is answered before its
//! step is on disk.
//!
//! - Steps run on their callers' threads, one at a time under the writer lock, each in a
//!   SAVEPOINT of the open transaction, so a failing step rolls back only itself. After its
//!   step the holder commits unless other threads already wait for the lock (then the last of
//!   them commits for all, at most [`GROUP_MAX`] steps a group).
//! - COMMIT runs with `synchronous=NORMAL`: it appends the group's frames to the WAL and
//!   returns without syncing. Each group gets a sequence number; whoever then needs a group
//!   durable and finds no flush running flushes the WAL (fdatasync) for every group committed
//!   so far, then wakes everyone. So one flush covers all groups committed while the previous
//!   one ran, and steps never wait behind the disk while holding the writer lock.
//! - SQLite's recovery keeps every transaction whose frames reached the WAL intact (frames are
//!   checksummed in a chain), so a group committed before a completed flush survives a crash.
//!   Checkpoints (run by SQLite inside a COMMIT) sync the WAL and the database themselves.
//! - Readers see a commit as soon as COMMIT returns, before it is flushed; so a read waits,
//!   before answering, until every group that had begun committing when it ended is durable
//!   ([`GroupCommit::wait_visible_durable`]). Nothing answered is ever taken back by a crash.
//! - A failed step still waits for its group: it may have judged by another step of the group
//!   (EEXIST from a name created in it) and must not answer by state a failure takes back.
//! - A failed fdatasync leaves the WAL's state on disk unknown: every later write is refused
//!   with EIO until the server restarts and SQLite recovers from what is on disk.

use std::collections::VecDeque;
use std::fs::File;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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

struct Flush {
    /// Every group up to this one has finished committing (or failed to).
    committed: u64,
    /// Every group up to this one is on disk.
    durable: u64,
    flushing: bool,
    failed: VecDeque<u64>,
}

/// The writer connection of one store, with group commit.
pub struct GroupCommit {
    writer: Mutex<Writer>,
    /// Threads waiting for `writer`.
    arriving: AtomicUsize,
    /// The WAL file, flushed outside the writer lock.
    wal: File,
    /// The last group whose COMMIT has begun: a reader may have seen it.
    begun: AtomicU64,
    broken: AtomicBool,
    flush: Mutex<Flush>,
    changed: Condvar,
    /// Counters for tests and statistics: steps run and WAL flushes done.
    steps: AtomicU64,
    flushes: AtomicU64,
}

impl GroupCommit {
    /// `store` is the writer connection (with `synchronous=NORMAL`), `wal` its open WAL file.
    pub fn new(store: Store, wal: File) -> GroupCommit {
        GroupCommit {
            writer: Mutex::new(Writer { store, open: None, last_group: 0 }),
            arriving: AtomicUsize::new(0),
            wal,
            begun: AtomicU64::new(0),
            broken: AtomicBool::new(false),
            flush: Mutex::new(Flush { committed: 0, durable: 0, flushing: false, failed: VecDeque::new() }),
            changed: Condvar::new(),
            steps: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        }
    }

    /// Runs `step` atomically and returns its result once the step is durable.
    pub fn write<R>(&self, step: impl FnOnce(&mut Store) -> Result<R, FsError>) -> Result<R, FsError> {
        let (group, result) = self.commit(step)?;
        self.wait_durable(group)?;
        result
    }

    /// Runs `step` atomically and returns once it is committed, without waiting for the
    /// flush: only for steps whose loss in a crash is harmless (it leaves a state that start-up
    /// repairs, such as a journal row for an object already removed). Durability follows
    /// commit order, so any later durable step makes this one durable too.
    pub fn write_relaxed<R>(&self, step: impl FnOnce(&mut Store) -> Result<R, FsError>) -> Result<R, FsError> {
        self.commit(step)?.1
    }

    /// Waits until every group that may be visible to a read that has just ended is durable.
    pub fn wait_visible_durable(&self) -> Result<(), FsError> {
        self.wait_durable(self.begun.load(Ordering::SeqCst))
    }

    /// (steps run, WAL flushes done) since start.
    pub fn counters(&self) -> (u64, u64) {
        (self.steps.load(Ordering::Relaxed), self.flushes.load(Ordering::Relaxed))
    }

    /// Runs `step` in the open group (opening one if needed) and returns the group once it has
    /// committed, with the step's result.
    fn commit<R>(&self, step: impl FnOnce(&mut Store) -> Result<R, FsError>) -> Result<(u64, Result<R, FsError>), FsError> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(FsError::Io);
        }
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
        self.steps.fetch_add(1, Ordering::Relaxed);
        let outcome = in_savepoint(&mut w.store, step);
        // A panicking step commits the group at once, so nobody waits on a group left open.
        if outcome.is_ok() && self.arriving.load(Ordering::SeqCst) > 0 && steps + 1 < GROUP_MAX {
            drop(w);
            self.wait_committed(group)?;
            return Ok((group, outcome.unwrap_or_else(|p| resume_unwind(p))));
        }
        self.begun.store(group, Ordering::SeqCst);
        let committed = exec(w.store.conn(), "COMMIT", []).map(drop);
        if committed.is_err() {
            // A failed COMMIT may leave the transaction open; the next group must start clean.
            let _ = w.store.conn().execute_batch("ROLLBACK");
        }
        w.open = None;
        self.finish(group, committed.is_ok());
        drop(w);
        let result = outcome.unwrap_or_else(|p| resume_unwind(p));
        committed.map(|()| (group, result))
    }

    fn finish(&self, group: u64, ok: bool) {
        let mut f = self.flush.lock().unwrap_or_else(|p| p.into_inner());
        f.committed = group;
        if !ok {
            tracing::error!(group, "group commit failed; its requests get EIO");
            f.failed.push_back(group);
            if f.failed.len() > FAILED_KEPT {
                f.failed.pop_front();
            }
        }
        self.changed.notify_all();
    }

    fn wait_committed(&self, group: u64) -> Result<(), FsError> {
        let mut f = self.flush.lock().unwrap_or_else(|p| p.into_inner());
        while f.committed < group {
            f = self.changed.wait(f).unwrap_or_else(|p| p.into_inner());
        }
        if f.failed.contains(&group) {
            Err(FsError::Io)
        } else {
            Ok(())
        }
    }

    /// Returns once `group` is on disk, flushing the WAL if no flush that covers it is running.
    fn wait_durable(&self, group: u64) -> Result<(), FsError> {
        let mut f = self.flush.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if f.durable >= group {
                return Ok(());
            }
            if self.broken.load(Ordering::SeqCst) {
                return Err(FsError::Io);
            }
            if !f.flushing && f.committed > f.durable {
                f.flushing = true;
                let target = f.committed;
                drop(f);
                let synced = self.wal.sync_data();
                self.flushes.fetch_add(1, Ordering::Relaxed);
                f = self.flush.lock().unwrap_or_else(|p| p.into_inner());
                f.flushing = false;
                match synced {
                    Ok(()) => f.durable = f.durable.max(target),
                    Err(e) => {
                        tracing::error!(%e, "flushing the metadata WAL failed; refusing writes until restart");
                        self.broken.store(true, Ordering::SeqCst);
                    }
                }
                self.changed.notify_all();
                continue;
            }
            f = self.changed.wait(f).unwrap_or_else(|p| p.into_inner());
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tessera_mds_proto::request::NewInode;
    use tessera_mds_proto::{InodeId, Timespec};

    use super::*;
    use crate::db;

    const DIR: NewInode = NewInode { mode: 0o755, uid: 0, gid: 0 };

    fn open(dir: &std::path::Path) -> GroupCommit {
        let path = dir.join("mds.db");
        let store = Store::new(db::open(&path, 0).unwrap(), 0, Timespec::default()).unwrap();
        GroupCommit::new(store, db::open_wal(&path).unwrap())
    }

    fn mkdir(gc: &GroupCommit, name: &str) -> Result<InodeId, FsError> {
        gc.write(|s| s.mkdir(InodeId::ROOT, name, &DIR, Timespec::default()).map(|r| r.ino))
    }

    /// Runs `first` (a step that returns only once another thread waits for the writer) and
    /// `second` concurrently; both land in one group.
    fn in_one_group<A: Send, B: Send>(
        gc: &Arc<GroupCommit>,
        first: impl FnOnce(&mut Store) -> Result<A, FsError> + Send,
        second: impl FnOnce(&mut Store) -> Result<B, FsError> + Send,
    ) -> (Result<A, FsError>, Result<B, FsError>) {
        std::thread::scope(|s| {
            let a = s.spawn(|| {
                gc.write(|store| {
                    while gc.arriving.load(Ordering::SeqCst) == 0 {
                        std::thread::yield_now();
                    }
                    first(store)
                })
            });
            while gc.steps.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            let b = s.spawn(|| gc.write(second));
            (a.join().unwrap(), b.join().unwrap())
        })
    }

    #[test]
    fn steps_that_overlap_share_one_commit_and_one_flush() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = Arc::new(open(tmp.path()));
        let (a, b) = in_one_group(
            &gc,
            |s| s.mkdir(InodeId::ROOT, "a", &DIR, Timespec::default()),
            |s| s.mkdir(InodeId::ROOT, "b", &DIR, Timespec::default()),
        );
        assert!(a.is_ok() && b.is_ok());
        assert_eq!(gc.counters(), (2, 1), "two steps, one WAL flush");
        // A lone step commits and flushes at once.
        mkdir(&gc, "c").unwrap();
        assert_eq!(gc.counters(), (3, 2));
    }

    #[test]
    fn a_failing_step_rolls_back_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = Arc::new(open(tmp.path()));
        mkdir(&gc, "taken").unwrap();
        let (a, b) = in_one_group(
            &gc,
            |s| {
                // Writes, then fails: the savepoint takes the write back.
                s.mkdir(InodeId::ROOT, "half", &DIR, Timespec::default())?;
                s.mkdir(InodeId::ROOT, "taken", &DIR, Timespec::default())
            },
            |s| s.mkdir(InodeId::ROOT, "b", &DIR, Timespec::default()),
        );
        assert_eq!(a.map(drop), Err(FsError::Exists));
        assert!(b.is_ok());
        let names = gc.write(|s| Ok(s.readdir(InodeId::ROOT, None, 100)?.0.into_iter().map(|e| e.name).collect::<Vec<_>>())).unwrap();
        assert_eq!(names, vec!["b".to_string(), "taken".to_string()]);
    }

    #[test]
    fn a_panicking_step_rolls_back_and_the_writer_carries_on() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = open(tmp.path());
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            gc.write::<()>(|s| {
                s.mkdir(InodeId::ROOT, "ghost", &DIR, Timespec::default())?;
                panic!("step bug")
            })
        }));
        assert!(panicked.is_err());
        mkdir(&gc, "after").unwrap();
        assert_eq!(gc.write(|s| s.lookup(InodeId::ROOT, "ghost").map(drop)), Err(FsError::NotFound));
    }

    #[test]
    fn what_was_acknowledged_is_there_after_reopening() {
        let tmp = tempfile::tempdir().unwrap();
        let acked: Vec<String> = {
            let gc = Arc::new(open(tmp.path()));
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|t| {
                        let gc = &gc;
                        s.spawn(move || (0..50).filter_map(|i| mkdir(gc, &format!("d{t}-{i}")).ok().map(|_| format!("d{t}-{i}"))).collect::<Vec<_>>())
                    })
                    .collect();
                handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
            })
        };
        assert_eq!(acked.len(), 200);
        let gc = open(tmp.path());
        for name in &acked {
            gc.write(|s| s.lookup(InodeId::ROOT, name).map(drop)).unwrap();
        }
    }
}
