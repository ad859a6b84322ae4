//! Hot rows the writer keeps in memory between commits, so a create runs four statements
//! instead of eight: the inode counter, the precreated ranges creates take from, and the times
//! of directories that gained entries. Each is written to SQLite once per group, by
//! [`Store::settle`], inside the group's transaction just before its COMMIT
//! ([`crate::commit`]), so what a COMMIT makes durable is always consistent.
//!
//! Rules that keep this exactly as correct as writing each row per create:
//! - Only creates leave rows unsettled ([`crate::commit::GroupCommit::start_write`]); every
//!   other step settles first, so it reads and writes the rows as they stand (a `utimes` on a
//!   directory is never overwritten by a create's earlier time).
//! - A create changes memory only after all its statements succeeded, so a step rolled back to
//!   its savepoint leaves nothing behind in memory either.
//! - Settling writes absolute values (idempotent), so a settle that fails part-way is simply
//!   repeated; a group whose COMMIT fails is rolled back and memory reloaded from the store.
//! - Inode numbers are reserved in blocks ([`INODE_BLOCK`]): the stored counter stays above
//!   every number handed out in a committed group, so a restart never reuses one (it may skip
//!   up to a block). Precreated ranges are written exactly: an object id is, at every commit,
//!   either in a range's untaken part or in a file (see `precreate.rs`).
//! - A create stamps its directory's mtime/ctime at [`DIR_TIME_GRAIN`] (truncated, as the
//!   kernel's coarse clock stamps them), and the settle skips a directory whose stored times
//!   it knows to be that already: a group whose creates fall in the tick the last group wrote
//!   writes no directory page to the WAL. Any other step may change a directory's times, so
//!   it forgets what it knows ([`Hot::forget_directories`]).
//! - A create reads its parent's type and default striping; the writer remembers them for the
//!   few directories creates go into, so the next create in one skips that lookup. Only other
//!   steps (rmdir, setstripe, a rename over it, a peer's request) can change them, and each
//!   makes the writer forget, as for the times; a rolled-back group reloads.

use std::cell::{Cell, RefCell};

use rusqlite::{params, Connection};
use tessera_mds_proto::{FsError, InodeId, StripeHint, Timespec};

use super::exec;
use super::precreate::ObjectSeq;

/// Inode numbers reserved by one write of the stored counter.
pub const INODE_BLOCK: u64 = 4096;
/// The granularity of the times a create gives its directory, in ns.
pub const DIR_TIME_GRAIN: u32 = 1_000_000;
/// Directories whose stored times, and whose type and default striping, the writer remembers
/// (the busiest are the few that many clients create in).
const STORED_DIR_TIMES_MAX: usize = 16;

/// What a create reads of its parent: the stored type, owner, group and mode (for the
/// permission check), and the directory's default striping.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ParentFacts {
    pub kind: i64,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    pub dir_hint: Option<StripeHint>,
}

impl crate::access::Owned for ParentFacts {
    fn owner(&self) -> (u32, u32, u32) {
        (self.uid, self.gid, self.mode)
    }
}

/// A precreated range creates are taking from; `next` runs ahead of the stored `next_seq`.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    osd: u32,
    first: u64,
    next: u64,
    last: u64,
    policy_tag: u32,
    stored_next: u64,
}

impl Cursor {
    fn exhausted(&self) -> bool {
        self.next > self.last
    }
}

/// The writer's unsettled state (readers keep an unused one).
#[derive(Default)]
pub(crate) struct Hot {
    /// The next inode sequence to hand out.
    next_inode: Cell<u64>,
    /// The counter as stored: above every sequence a committed group handed out.
    stored_inode: Cell<u64>,
    /// Ranges taken from since the last settle, per OSD in range order.
    cursors: RefCell<Vec<Cursor>>,
    /// Directories that gained entries since the last settle, with their newest time.
    dir_times: RefCell<Vec<(InodeId, Timespec)>>,
    /// Directories whose times, as stored, a settle wrote and no step changed since.
    stored_dir_times: RefCell<Vec<(InodeId, Timespec)>>,
    /// Parents of recent creates, as stored, unchanged since by any other step.
    parents: RefCell<Vec<(InodeId, ParentFacts)>>,
    /// Files placed since the server started: where the round-robin rotation stands. Not the
    /// inode number, which has gaps (a create that finds a pool empty gives its number up and
    /// is retried with the next), so that retried creates all landed on one OSD.
    placed: Cell<u64>,
}

/// The stored inode counter.
fn stored_inode(conn: &Connection) -> Result<u64, FsError> {
    super::query_opt(conn, "SELECT value FROM meta WHERE key = 'next_inode'", [], |r| r.get::<_, i64>(0))?
        .map(|v| v as u64)
        .ok_or(FsError::Io)
}

/// A slot's object peeked from a pool: taken only once the create's statements succeeded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peeked {
    cursor: usize,
    pub object: ObjectSeq,
}

impl Hot {
    /// State as stored (at open, and after a failed COMMIT rolled the group back).
    pub(crate) fn load(conn: &Connection) -> Result<Hot, FsError> {
        let hot = Hot::default();
        hot.reload(conn)?;
        Ok(hot)
    }

    pub(crate) fn reload(&self, conn: &Connection) -> Result<(), FsError> {
        let stored = stored_inode(conn)?;
        self.next_inode.set(stored);
        self.stored_inode.set(stored);
        self.cursors.borrow_mut().clear();
        self.dir_times.borrow_mut().clear();
        self.stored_dir_times.borrow_mut().clear();
        self.parents.borrow_mut().clear();
        Ok(())
    }

    /// A step other than a create ran: it may have changed any directory's times, type,
    /// owner, mode or default striping.
    pub(crate) fn forget_directories(&self) {
        self.stored_dir_times.borrow_mut().clear();
        self.parents.borrow_mut().clear();
    }

    /// What the store holds for `dir` as a parent, if a create looked it up since the last
    /// other step.
    pub(crate) fn parent(&self, dir: InodeId) -> Option<ParentFacts> {
        self.parents.borrow().iter().find(|(d, _)| *d == dir).map(|(_, f)| *f)
    }

    /// Remembers what a create read of its parent, dropping the oldest past the limit.
    pub(crate) fn remember_parent(&self, dir: InodeId, facts: ParentFacts) {
        let mut parents = self.parents.borrow_mut();
        if parents.len() >= STORED_DIR_TIMES_MAX {
            parents.remove(0);
        }
        parents.push((dir, facts));
    }

    /// Where the next file's stripe starts in the rotation over the OSDs.
    pub(crate) fn spread(&self) -> u64 {
        self.placed.get()
    }

    /// Hands out the next inode sequence (a step that fails after this leaves a gap, never a
    /// reuse).
    pub(crate) fn alloc_inode(&self) -> u64 {
        let seq = self.next_inode.get();
        self.next_inode.set(seq + 1);
        seq
    }

    /// The lowest untaken ready object of `osd`, without taking it; `None` when the pool is
    /// empty.
    pub(crate) fn peek_object(&self, conn: &Connection, osd: u32) -> Result<Option<Peeked>, FsError> {
        let mut cursors = self.cursors.borrow_mut();
        let mut after = None;
        for (i, c) in cursors.iter().enumerate().filter(|(_, c)| c.osd == osd) {
            if !c.exhausted() {
                return Ok(Some(Peeked { cursor: i, object: ObjectSeq { seq: c.next, policy_tag: c.policy_tag } }));
            }
            after = Some(c.first);
        }
        // Ranges used up in this group are still stored until the settle deletes them.
        let Some(c) = super::query_opt(
            conn,
            "SELECT first_seq, next_seq, last_seq, policy_tag FROM precreated
             WHERE osd = ?1 AND ready = 1 AND first_seq > ?2 ORDER BY first_seq LIMIT 1",
            params![osd, after.map_or(-1, |a| a as i64)],
            |r| {
                let next = r.get::<_, i64>(1)? as u64;
                Ok(Cursor {
                    osd,
                    first: r.get::<_, i64>(0)? as u64,
                    next,
                    last: r.get::<_, i64>(2)? as u64,
                    policy_tag: r.get::<_, i64>(3)? as u32,
                    stored_next: next,
                })
            },
        )?
        else {
            return Ok(None);
        };
        cursors.push(c);
        Ok(Some(Peeked { cursor: cursors.len() - 1, object: ObjectSeq { seq: c.next, policy_tag: c.policy_tag } }))
    }

    /// Takes objects peeked by one create, after its statements succeeded; the rotation
    /// moves on.
    pub(crate) fn take(&self, peeked: &[Peeked]) {
        self.placed.set(self.placed.get().wrapping_add(1));
        let mut cursors = self.cursors.borrow_mut();
        for p in peeked {
            cursors[p.cursor].next += 1;
        }
    }

    /// Notes that `dir` gained an entry at `now`; its times are written at the settle.
    pub(crate) fn touch_dir(&self, dir: InodeId, now: Timespec) {
        let now = Timespec { secs: now.secs, nanos: now.nanos - now.nanos % DIR_TIME_GRAIN };
        let mut times = self.dir_times.borrow_mut();
        match times.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, t)) => *t = now,
            None => times.push((dir, now)),
        }
    }

    /// Writes what memory holds ahead of the store into the open transaction; on success the
    /// store and memory agree. Idempotent, so a failure part-way is repaired by the next call.
    pub(crate) fn settle(&self, conn: &Connection) -> Result<(), FsError> {
        let next = self.next_inode.get();
        if next > self.stored_inode.get() {
            let stored = next + INODE_BLOCK;
            exec(conn, "UPDATE meta SET value = ?1 WHERE key = 'next_inode'", [stored as i64])?;
            self.stored_inode.set(stored);
        }
        let mut cursors = self.cursors.borrow_mut();
        for c in cursors.iter() {
            if c.exhausted() {
                exec(conn, "DELETE FROM precreated WHERE osd = ?1 AND first_seq = ?2", params![c.osd, c.first as i64])?;
            } else if c.next != c.stored_next {
                exec(conn, "UPDATE precreated SET next_seq = ?3 WHERE osd = ?1 AND first_seq = ?2", params![c.osd, c.first as i64, c.next as i64])?;
            }
        }
        cursors.clear();
        let mut times = self.dir_times.borrow_mut();
        let mut stored = self.stored_dir_times.borrow_mut();
        for &(dir, t) in times.iter() {
            let known = stored.iter().position(|(d, _)| *d == dir);
            if known.is_some_and(|i| stored[i].1 == t) {
                continue;
            }
            exec(conn, "UPDATE inodes SET mtime_ns = ?2, ctime_ns = ?2 WHERE ino = ?1", params![dir.0 as i64, t.as_nanos()])?;
            match known {
                Some(i) => stored[i].1 = t,
                None => {
                    if stored.len() == STORED_DIR_TIMES_MAX {
                        stored.remove(0);
                    }
                    stored.push((dir, t));
                }
            }
        }
        times.clear();
        Ok(())
    }
}
