//! Group commit with the flush outside the writer: many requests share one COMMIT and one
//! fdatasync of the WAL, the next requests' steps run while it flushes, and no request is
//! answered before its step is on disk.
//!
//! - Steps run on their callers' threads, one at a time under the writer lock, each in a
//!   SAVEPOINT of the open transaction (one is begun when none is open), so a failing step rolls
//!   back only itself. A step does not commit: it joins the open group.
//! - A flush round commits the open group (with `synchronous=NORMAL`, COMMIT appends the frames
//!   to the WAL without syncing), releases the writer, syncs the WAL (fdatasync), and then
//!   answers everyone the group covers. Steps that arrive meanwhile form the next group. So a
//!   group is every step since the last round began, pages several steps touch are written
//!   once per group, and the disk's flush overlaps the next group's work.
//! - Two ways to wait for a step: a caller that needs the outcome runs it and blocks
//!   ([`GroupCommit::write`]). A create runs its step and returns at once
//!   ([`GroupCommit::start_write`]); the event loop (`tcp.rs`) runs the steps of every ready
//!   connection, then waits for all of them with one round ([`GroupCommit::wait`]), which it
//!   runs itself unless one is running. Whoever waits runs the round: there is no hand-off to
//!   another thread.
//! - Creates leave hot rows unsettled in memory (`store/hot.rs`); the round settles them into
//!   the group just before its COMMIT, and every other step settles them before it runs.
//! - SQLite's recovery keeps every transaction whose frames reached the WAL intact (frames are
//!   checksummed in a chain), so a group committed before a completed flush survives a crash.
//! - Readers see a group as soon as it is committed, before it is flushed; so a read waits,
//!   before answering, until every group that had begun committing when it ended is durable
//!   ([`GroupCommit::wait_visible_durable`]). Nothing answered is ever taken back by a crash.
//! - A failed step still waits for its group: it may have judged by another step of the group
//!   (EEXIST from a name created in it) and must not answer by state a failure takes back.
//! - A failed COMMIT answers the whole group EIO (ENOSPC when the store's disk is full) and
//!   reloads the hot rows from the store; reads go on, since no one saw the group. A
//!   failed fdatasync leaves the WAL's state on disk unknown: every later write is refused
//!   with EIO until the server restarts and SQLite recovers from what is on disk.

use std::collections::VecDeque;
use std::fs::File;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use tessera_mds_proto::FsError;

use crate::store::{exec, Store};

/// Failed groups remembered for waiters that have not woken yet.
const FAILED_KEPT: usize = 64;
/// Less room than this on the store's file system counts as full: a group's WAL frames and a
/// checkpoint's growth of the database need about that much.
const ROOM_MIN: u64 = 1 << 20;

/// A step that has run in a group not yet known durable.
#[derive(Debug)]
pub struct Pending {
    group: u64,
}

struct Writer {
    store: Store,
    /// The group whose transaction is open.
    open: Option<u64>,
    last_group: u64,
    /// A create failed part-way in the open group (it runs without a savepoint): the group
    /// must be rolled back, not committed.
    lost: bool,
}

/// How a step runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StepKind {
    /// Settles the hot rows first, then runs in a savepoint.
    Guarded,
    /// A create: leaves the hot rows unsettled and runs without a savepoint. Its failures
    /// before its first write leave nothing; after it, it marks the store partial
    /// ([`Store::take_partial`]) and the whole group is lost. A SAVEPOINT makes SQLite copy
    /// every page the step is first to touch into a statement journal, a cost paid per create
    /// for a rollback that almost never happens.
    Create,
}

struct Flush {
    /// Every group up to this one has been committed (or failed to).
    committed: u64,
    /// Every group up to this one is on disk.
    durable: u64,
    flushing: bool,
    /// Groups whose COMMIT failed, with what their requests are answered.
    failed: VecDeque<(u64, FsError)>,
}

impl Flush {
    fn failure(&self, group: u64) -> Option<FsError> {
        self.failed.iter().find(|(g, _)| *g == group).map(|(_, e)| *e)
    }

    /// How a request whose step ran in `group` ends, once known.
    fn outcome(&self, group: u64, broken: bool) -> Option<Result<(), FsError>> {
        if let Some(e) = self.failure(group) {
            Some(Err(e))
        } else if self.durable >= group {
            Some(Ok(()))
        } else if broken {
            Some(Err(FsError::Io))
        } else {
            None
        }
    }

    /// How a read that may have seen groups up to `group` ends, once known. A failed group
    /// was rolled back, so no read saw it: only durability matters (a round marks even a
    /// failed group's number durable once the groups before it are).
    fn read_outcome(&self, group: u64, broken: bool) -> Option<Result<(), FsError>> {
        if self.durable >= group {
            Some(Ok(()))
        } else if broken {
            Some(Err(FsError::Io))
        } else {
            None
        }
    }
}

/// The writer connection of one store, with group commit.
pub struct GroupCommit {
    writer: Mutex<Writer>,
    /// The WAL file, flushed outside the writer lock.
    wal: File,
    /// The last group whose COMMIT has begun: a reader may have seen it.
    begun: AtomicU64,
    broken: AtomicBool,
    flush: Mutex<Flush>,
    changed: Condvar,
    /// Counters for tests and statistics: steps run, groups committed, WAL flushes done.
    steps: AtomicU64,
    commits: AtomicU64,
    flushes: AtomicU64,
}

impl GroupCommit {
    /// `store` is the writer connection (with `synchronous=NORMAL`), `wal` its open WAL file.
    pub fn new(store: Store, wal: File) -> GroupCommit {
        GroupCommit {
            writer: Mutex::new(Writer { store, open: None, last_group: 0, lost: false }),
            wal,
            begun: AtomicU64::new(0),
            broken: AtomicBool::new(false),
            flush: Mutex::new(Flush { committed: 0, durable: 0, flushing: false, failed: VecDeque::new() }),
            changed: Condvar::new(),
            steps: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        }
    }

    /// Runs `step` atomically (an error rolls it back) and returns its result once the step
    /// is durable.
    pub fn write<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>) -> Result<R, E> {
        let (group, result) = self.run_step(step, StepKind::Guarded)?;
        self.wait_durable(group, Flush::outcome)?;
        result
    }

    /// Runs a create's `step` atomically (an error rolls it back) without settling the hot
    /// rows first, and returns at once: its result, and the [`Pending`] durability that must be
    /// waited for ([`GroupCommit::wait`]) before anyone is told the result, failure included.
    pub fn start_write<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>) -> Result<(Pending, Result<R, E>), FsError> {
        let (group, result) = self.run_step(step, StepKind::Create)?;
        Ok((Pending { group }, result))
    }

    /// Runs `step` as [`GroupCommit::write`] does (hot rows settled, a savepoint of its own)
    /// but returns at once, as [`GroupCommit::start_write`] does: for a step the event loop
    /// runs (an unlink) that must not settle its failures by hand.
    pub fn start_guarded<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>) -> Result<(Pending, Result<R, E>), FsError> {
        let (group, result) = self.run_step(step, StepKind::Guarded)?;
        Ok((Pending { group }, result))
    }

    /// Returns once `pending` is durable; EIO if its group was lost.
    pub fn wait(&self, pending: Pending) -> Result<(), FsError> {
        self.wait_durable(pending.group, Flush::outcome)
    }

    /// Runs `step` atomically and returns once it is committed, without waiting for the
    /// flush: only for steps whose loss in a crash is harmless (it leaves a state that start-up
    /// repairs, such as a journal row for an object already removed). Durability follows
    /// commit order, so any later durable step makes this one durable too.
    pub fn write_relaxed<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>) -> Result<R, E> {
        let (group, result) = self.run_step(step, StepKind::Guarded)?;
        {
            let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            if w.open == Some(group) {
                self.commit_open(&mut w);
            }
        }
        self.check_committed(group)?;
        result
    }

    /// Waits until every group that may be visible to a read that has just ended is durable.
    pub fn wait_visible_durable(&self) -> Result<(), FsError> {
        self.wait_durable(self.begun.load(Ordering::SeqCst), Flush::read_outcome)
    }

    /// Copies the WAL into the database on `conn` (another connection to the store): a
    /// PASSIVE pass without holding anything, then one holding the writer, which only has the
    /// frames committed meanwhile to copy and so completes; the next group then restarts the
    /// WAL from its start. Returns the frames the WAL held.
    pub fn checkpoint(&self, conn: &rusqlite::Connection) -> rusqlite::Result<i64> {
        let passive = |c: &rusqlite::Connection| c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1));
        passive(conn)?;
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        passive(conn)
    }

    /// Whether the store refuses every request until restart: a flush failed (or a round
    /// panicked part-way), so what is on disk is not known, or the counters could not be
    /// reloaded after a failed COMMIT.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }

    /// (steps run, groups committed, WAL flushes done) since start.
    pub fn counters(&self) -> (u64, u64, u64) {
        (self.steps.load(Ordering::Relaxed), self.commits.load(Ordering::Relaxed), self.flushes.load(Ordering::Relaxed))
    }

    /// Runs `step` in the open group (opening one if needed) as `kind` says; returns the group
    /// and the step's result. Nothing is committed yet.
    fn run_step<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>, kind: StepKind) -> Result<(u64, Result<R, E>), FsError> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(FsError::Io);
        }
        // Poisoning: a step panicked; its savepoint was rolled back (or its group marked
        // lost), so carrying on is safe.
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let group = match w.open {
            Some(group) => group,
            None => {
                exec(w.store.conn(), "BEGIN IMMEDIATE", [])?;
                w.last_group += 1;
                w.open = Some(w.last_group);
                w.last_group
            }
        };
        self.steps.fetch_add(1, Ordering::Relaxed);
        let outcome = match kind {
            StepKind::Guarded => {
                // Outside the step's savepoint: a failing step must not take the settled rows
                // back.
                if let Err(e) = w.store.settle() {
                    return Ok((group, Err(e.into())));
                }
                // The step may change any directory's times, type or default striping.
                w.store.forget_directories();
                let outcome = in_savepoint(&mut w.store, step);
                w.store.take_partial();
                outcome
            }
            StepKind::Create => {
                let outcome = catch_unwind(AssertUnwindSafe(|| step(&mut w.store)));
                if w.store.take_partial() || outcome.is_err() {
                    w.lost = true;
                }
                outcome
            }
        };
        drop(w);
        // A panicking step leaves its group to the next flush and unwinds at once.
        Ok((group, outcome.unwrap_or_else(|p| resume_unwind(p))))
    }

    /// Commits the open group, if any (the caller holds the writer).
    fn commit_open(&self, w: &mut Writer) {
        let Some(group) = w.open.take() else { return };
        self.begun.store(group, Ordering::SeqCst);
        let committed = !std::mem::take(&mut w.lost) && w.store.settle().is_ok() && exec(w.store.conn(), "COMMIT", []).is_ok();
        if !committed {
            // A failed COMMIT may leave the transaction open; the next group must start clean,
            // and memory must forget the group's hot rows.
            let _ = w.store.conn().execute_batch("ROLLBACK");
            if let Err(e) = w.store.reload_hot() {
                tracing::error!(%e, "cannot reload the metadata counters; refusing writes until restart");
                self.broken.store(true, Ordering::SeqCst);
            }
        }
        self.commits.fetch_add(1, Ordering::Relaxed);
        let mut f = self.flush.lock().unwrap_or_else(|p| p.into_inner());
        f.committed = group;
        if !committed {
            let answer = if self.out_of_space() { FsError::NoSpace } else { FsError::Io };
            tracing::error!(group, %answer, "group commit failed or a step failed part-way; its requests get this answer");
            f.failed.push_back((group, answer));
            if f.failed.len() > FAILED_KEPT {
                f.failed.pop_front();
            }
        }
        self.changed.notify_all();
    }

    fn check_committed(&self, group: u64) -> Result<(), FsError> {
        match self.flush.lock().unwrap_or_else(|p| p.into_inner()).failure(group) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether the store's file system has no room left (checked when a COMMIT fails, so its
    /// requests get ENOSPC rather than EIO): under [`ROOM_MIN`] available.
    fn out_of_space(&self) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: fstatvfs fills one statvfs through a valid pointer; the WAL's descriptor is open.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::fstatvfs(self.wal.as_raw_fd(), &mut st) };
        rc == 0 && (st.f_bavail as u64).saturating_mul(st.f_frsize as u64) < ROOM_MIN
    }

    /// Returns once `group`'s outcome (as `outcome` judges) is known: runs a round unless one
    /// is running, then waits for the round that covers it.
    fn wait_durable(&self, group: u64, outcome: fn(&Flush, u64, bool) -> Option<Result<(), FsError>>) -> Result<(), FsError> {
        let mut f = self.flush.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(outcome) = outcome(&f, group, self.broken.load(Ordering::SeqCst)) {
                return outcome;
            }
            if !f.flushing {
                f.flushing = true;
                drop(f);
                self.flush_round();
                f = self.flush.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            f = self.changed.wait(f).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// One round (the caller has set `flushing`): commits the open group, syncs the WAL and
    /// wakes the waiters. A round that panics part-way (a write error met where none was
    /// expected) must not leave `flushing` set, or every waiter would wait forever: it breaks
    /// the store instead, and the panic goes on to the caller.
    fn flush_round(&self) {
        self.guarded_round(|| self.flush_round_unguarded());
    }

    /// Runs `round` as [`Self::flush_round`] guards it (apart so a test can give it a round
    /// that panics).
    fn guarded_round(&self, round: impl FnOnce()) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(round)) {
            tracing::error!("a metadata flush round panicked; refusing every request until restart");
            self.broken.store(true, Ordering::SeqCst);
            self.flush.lock().unwrap_or_else(|p| p.into_inner()).flushing = false;
            self.changed.notify_all();
            resume_unwind(panic);
        }
    }

    fn flush_round_unguarded(&self) {
        {
            let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            self.commit_open(&mut w);
        }
        let target = self.flush.lock().unwrap_or_else(|p| p.into_inner()).committed;
        let synced = self.wal.sync_data();
        self.flushes.fetch_add(1, Ordering::Relaxed);
        let mut f = self.flush.lock().unwrap_or_else(|p| p.into_inner());
        f.flushing = false;
        match synced {
            Ok(()) => f.durable = f.durable.max(target),
            Err(e) => {
                tracing::error!(%e, "flushing the metadata WAL failed; refusing writes until restart");
                self.broken.store(true, Ordering::SeqCst);
            }
        }
        self.changed.notify_all();
    }
}

/// Runs `step` in a savepoint: released when it succeeds, rolled back when it fails or panics
/// (the panic is returned for the caller to resume).
fn in_savepoint<R, E: From<FsError>>(store: &mut Store, step: impl FnOnce(&mut Store) -> Result<R, E>) -> std::thread::Result<Result<R, E>> {
    if let Err(e) = exec(store.conn(), "SAVEPOINT step", []) {
        return Ok(Err(e.into()));
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| step(store)));
    let closed = if matches!(outcome, Ok(Ok(_))) {
        exec(store.conn(), "RELEASE step", [])
    } else {
        exec(store.conn(), "ROLLBACK TO step", []).and_then(|_| exec(store.conn(), "RELEASE step", []))
    };
    outcome.map(|result| match closed {
        Ok(_) => result,
        Err(e) => Err(e.into()),
    })
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

    fn mkdir_step(name: &'static str) -> impl FnOnce(&mut Store) -> Result<InodeId, FsError> {
        move |s| s.mkdir(InodeId::ROOT, name, &DIR, Timespec::default()).map(|r| r.ino)
    }

    fn names(gc: &GroupCommit) -> Vec<String> {
        gc.write(|s| Ok::<_, FsError>(s.readdir(InodeId::ROOT, None, 1000)?.0.into_iter().map(|e| e.name).collect())).unwrap()
    }

    #[test]
    fn steps_before_a_flush_share_one_commit_and_one_flush() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = open(tmp.path());
        // Two steps run before anyone flushes: one group.
        let (g1, a) = gc.run_step(mkdir_step("a"), StepKind::Guarded).unwrap();
        let (g2, b) = gc.run_step(mkdir_step("b"), StepKind::Guarded).unwrap();
        assert!(a.is_ok() && b.is_ok());
        assert_eq!(g1, g2);
        gc.wait_durable(g2, Flush::outcome).unwrap();
        gc.wait_durable(g1, Flush::outcome).unwrap();
        assert_eq!(gc.counters(), (2, 1, 1), "two steps, one commit, one WAL flush");
        // A lone step commits and flushes at once.
        gc.write(mkdir_step("c")).unwrap();
        assert_eq!(gc.counters(), (3, 2, 2));
    }

    #[test]
    fn groups_in_a_preallocated_wal_survive_a_crash() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("mds.db");
        let store = Store::new(db::open(&path, 0).unwrap(), 0, Timespec::default()).unwrap();
        let wal = db::open_wal(&path).unwrap();
        db::preallocate_wal(&wal).unwrap();
        let gc = GroupCommit::new(store, wal);
        for name in ["a", "b", "c"] {
            gc.write(mkdir_step(name)).unwrap();
        }
        // A crash image: the files as they stand with the store still open (nothing was
        // checkpointed: the groups are only in the WAL, followed by the preallocated zeros).
        let image = tempfile::tempdir().unwrap();
        for file in ["mds.db", "mds.db-wal"] {
            std::fs::copy(tmp.path().join(file), image.path().join(file)).unwrap();
        }
        let wal_len = std::fs::metadata(image.path().join("mds.db-wal")).unwrap().len();
        assert!(wal_len >= db::WAL_PREALLOCATED, "{wal_len}");
        drop(gc);
        let recovered = open(image.path());
        assert_eq!(names(&recovered), vec!["a".to_string(), "b".to_string(), "c".to_string()]);
    }

    #[test]
    fn a_failing_step_rolls_back_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = open(tmp.path());
        gc.write(mkdir_step("taken")).unwrap();
        let (g1, a) = gc
            .run_step(|s| {
                // Writes, then fails: the savepoint takes the write back.
                s.mkdir(InodeId::ROOT, "half", &DIR, Timespec::default())?;
                s.mkdir(InodeId::ROOT, "taken", &DIR, Timespec::default())
            }, StepKind::Guarded)
            .unwrap();
        let (g2, b) = gc.run_step(mkdir_step("b"), StepKind::Guarded).unwrap();
        assert_eq!(g1, g2);
        assert_eq!(a.map(drop), Err(FsError::Exists));
        assert!(b.is_ok());
        gc.wait_durable(g2, Flush::outcome).unwrap();
        assert_eq!(names(&gc), vec!["b".to_string(), "taken".to_string()]);
    }

    /// Goal: a flush round that panics part-way leaves no waiter waiting for ever: the store
    /// breaks, every waiter of the open group is answered EIO, later requests are refused, and
    /// the panic reaches the thread that ran the round.
    #[test]
    fn a_panicking_flush_round_wakes_every_waiter_and_breaks_the_store() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = Arc::new(open(tmp.path()));
        let (pending, made) = gc.start_write(mkdir_step("a")).unwrap();
        made.unwrap();
        // As when a round is under way: the waiter waits for it instead of running its own.
        gc.flush.lock().unwrap().flushing = true;
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let gc = gc.clone();
            std::thread::spawn(move || tx.send(gc.wait(pending)).unwrap())
        };
        assert!(rx.recv_timeout(std::time::Duration::from_millis(200)).is_err(), "the waiter waits for the round");
        let panicked = catch_unwind(AssertUnwindSafe(|| gc.guarded_round(|| panic!("round bug"))));
        assert!(panicked.is_err(), "the panic goes on to the round's caller");
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the waiter was woken"), Err(FsError::Io));
        waiter.join().unwrap();
        assert!(gc.is_broken());
        assert!(!gc.flush.lock().unwrap().flushing, "no round is left marked as running");
        assert_eq!(gc.write(mkdir_step("b")), Err(FsError::Io), "refused until restart");
    }

    #[test]
    fn a_panicking_step_rolls_back_and_the_writer_carries_on() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = open(tmp.path());
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            gc.write::<(), FsError>(|s| {
                s.mkdir(InodeId::ROOT, "ghost", &DIR, Timespec::default())?;
                panic!("step bug")
            })
        }));
        assert!(panicked.is_err());
        gc.write(mkdir_step("after")).unwrap();
        assert_eq!(names(&gc), vec!["after".to_string()]);
    }

    fn ready_pool(gc: &GroupCommit, objects: u64) {
        gc.write(|s| {
            let range = s.reserve_precreate(0, objects)?;
            s.precreate_ready(&range)
        })
        .unwrap();
    }

    const POLICY: crate::store::files::StripePolicy = crate::store::files::StripePolicy {
        default: tessera_mds_proto::StripeHint { stripe_unit: 65536, stripe_count: 1, start_osd: None },
        osd_count: 1,
        avoid: Vec::new(),
        unusable: Vec::new(),
    };

    fn create_step(name: &'static str, now: Timespec) -> impl FnOnce(&mut Store) -> Result<crate::store::NewFile, crate::store::files::CreateError> {
        move |s| s.create_file(&tessera_mds_proto::Caller::ROOT, InodeId::ROOT, name, &DIR, None, &POLICY, now)
    }

    #[test]
    fn hot_rows_settle_before_other_steps_and_at_commit() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let gc = open(tmp.path());
            ready_pool(&gc, 8);
            let created_at = Timespec { secs: 100, nanos: 0 };
            let set_at = Timespec { secs: 50, nanos: 0 };
            // Creates leave the root's times unsettled; a utimes later in the same group must
            // see them written first, or the commit's settle would overwrite its time.
            let (p1, f1) = gc.start_write(create_step("f1", created_at)).unwrap();
            let (p2, f2) = gc.start_write(create_step("f2", created_at)).unwrap();
            let changes = tessera_mds_proto::SetAttrs { mtime: Some(set_at), ..Default::default() };
            let changed_at = Timespec { secs: 70, nanos: 0 };
            let (g3, _) = gc.run_step(move |s| s.setattr(&tessera_mds_proto::Caller::ROOT, InodeId::ROOT, &changes, changed_at), StepKind::Guarded).unwrap();
            assert_eq!(p1.group, p2.group);
            assert_eq!(p2.group, g3);
            let (f1, f2) = (f1.unwrap(), f2.unwrap());
            assert_ne!(f1.row.ino, f2.row.ino);
            assert_ne!(f1.layout.objects, f2.layout.objects);
            gc.wait(p2).unwrap();
            let root = gc.write(|s| s.inode(InodeId::ROOT)).unwrap();
            assert_eq!((root.mtime, root.ctime), (set_at, changed_at), "the utimes came last");
        }
        // Reopened: two of eight objects taken, and the next inode is new.
        let gc = open(tmp.path());
        let counts = gc.write(|s| s.precreated_counts()).unwrap();
        assert_eq!(counts, vec![(0, 6)]);
        let f3 = gc.write(create_step("f3", Timespec::default())).unwrap();
        let names = names(&gc);
        assert_eq!(names, vec!["f1".to_string(), "f2".to_string(), "f3".to_string()]);
        for n in ["f1", "f2"] {
            assert!(gc.write(|s| s.lookup(InodeId::ROOT, n)).unwrap().ino.local() < f3.row.ino.local());
        }
    }

    #[test]
    fn a_create_failing_part_way_loses_its_whole_group() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = open(tmp.path());
        ready_pool(&gc, 8);
        let (p1, a) = gc.start_write(create_step("kept-out", Timespec::default())).unwrap();
        let (p2, b) = gc
            .start_write(|s| {
                s.mkdir(InodeId::ROOT, "half", &DIR, Timespec::default())?;
                s.mark_partial();
                Err::<(), FsError>(FsError::Io)
            })
            .unwrap();
        assert!(a.is_ok());
        assert_eq!(b, Err(FsError::Io));
        assert_eq!(gc.wait(p1), Err(FsError::Io), "a group with a partial step is rolled back, not committed");
        assert_eq!(gc.wait(p2), Err(FsError::Io));
        // The writer carries on from the stored state: the object the lost create took is
        // still in the pool.
        gc.write(mkdir_step("after")).unwrap();
        assert_eq!(names(&gc), vec!["after".to_string()]);
        assert_eq!(gc.write(|s| s.precreated_counts()).unwrap(), vec![(0, 8)]);
    }

    /// Rows the writer connection changed since it opened.
    fn changes(gc: &GroupCommit) -> u64 {
        gc.writer.lock().unwrap().store.conn().total_changes()
    }

    /// A create as the event loop runs it: no savepoint, hot rows left to the round.
    fn create(gc: &GroupCommit, name: &'static str, now: Timespec) {
        let (pending, made) = gc.start_write(create_step(name, now)).unwrap();
        made.unwrap();
        gc.wait(pending).unwrap();
    }

    #[test]
    fn creates_in_one_tick_write_their_directory_once_and_other_steps_are_not_overwritten() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = open(tmp.path());
        ready_pool(&gc, 8);
        let tick = Timespec { secs: 100, nanos: 3_000_000 };
        let at = |micros: u32| Timespec { secs: 100, nanos: tick.nanos + micros * 1000 };
        let root_times = |gc: &GroupCommit| {
            let r = gc.write(|s| s.inode(InodeId::ROOT)).unwrap();
            (r.mtime, r.ctime)
        };
        create(&gc, "a", at(250));
        // Same tick, next group: entry, inode and object row; no directory row.
        let before = changes(&gc);
        create(&gc, "b", at(900));
        assert_eq!(changes(&gc) - before, 3 + 1, "entry, inode, object and the pool's cursor; the directory already holds the tick");
        // (A read through the writer is a step of its own: it forgets the stored times.)
        assert_eq!(root_times(&gc), (tick, tick), "a create stamps its directory at the grain, truncated");
        let before = changes(&gc);
        create(&gc, "b2", at(910));
        assert_eq!(changes(&gc) - before, 3 + 1 + 1, "after another step, the directory is written again");
        // A utimes in between changes the stored time: the next create in the tick writes it.
        let set_at = Timespec { secs: 50, nanos: 0 };
        let changes_ = tessera_mds_proto::SetAttrs { mtime: Some(set_at), ..Default::default() };
        gc.write(move |s| s.setattr(&tessera_mds_proto::Caller::ROOT, InodeId::ROOT, &changes_, Timespec { secs: 60, nanos: 0 })).unwrap();
        create(&gc, "c", at(950));
        assert_eq!(root_times(&gc), (tick, tick), "the create after the utimes is written, not skipped");
        // The next tick is written too, and survives a reopen.
        let next = Timespec { secs: 100, nanos: 4_000_000 };
        create(&gc, "d", Timespec { secs: 100, nanos: 4_500_000 });
        assert_eq!(root_times(&gc), (next, next));
        drop(gc);
        assert_eq!(root_times(&open(tmp.path())), (next, next));
    }

    #[test]
    fn relaxed_steps_commit_without_a_flush() {
        let tmp = tempfile::tempdir().unwrap();
        let gc = open(tmp.path());
        gc.write_relaxed(mkdir_step("r")).unwrap();
        assert_eq!(gc.counters(), (1, 1, 0));
        gc.wait_visible_durable().unwrap();
        assert_eq!(gc.counters(), (1, 1, 1), "a read that may have seen it waits for the flush");
    }

    #[test]
    fn concurrent_writers_are_all_acknowledged_and_kept_after_reopening() {
        let tmp = tempfile::tempdir().unwrap();
        let acked: Vec<String> = {
            let gc = Arc::new(open(tmp.path()));
            let acked = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|t| {
                        let gc = &gc;
                        s.spawn(move || {
                            (0..50)
                                .filter_map(|i| {
                                    let name = format!("d{t}-{i}");
                                    gc.write(|s| s.mkdir(InodeId::ROOT, &name, &DIR, Timespec::default())).ok().map(|_| name)
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
            });
            let (steps, commits, flushes) = gc.counters();
            assert_eq!(steps, 200);
            assert!(commits <= steps && flushes <= commits, "{commits} commits, {flushes} flushes");
            acked
        };
        assert_eq!(acked.len(), 200);
        let gc = open(tmp.path());
        let mut found = names(&gc);
        found.sort();
        let mut expected = acked;
        expected.sort();
        assert_eq!(found, expected);
    }
}
