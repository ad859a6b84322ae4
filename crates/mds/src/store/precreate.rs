//! Precreated objects (PVFS-style): ranges of object ids this server made on an OSD ahead of
//! need with one multi-object CREATE, so a file create takes its objects from a pool instead of
//! waiting for the OSDs.
//!
//! A range's life, each step one atomic store step:
//! 1. [`Store::reserve_precreate`]: ids allocated from `osd_alloc`, range recorded not ready.
//! 2. The caller sends CREATE for the range (durable on the OSD before it answers).
//! 3. [`Store::precreate_ready`]: the ids may be handed out; a create takes the lowest one
//!    in the same step that makes a file reference it (through the writer's cursor, `hot.rs`,
//!    stored in the same COMMIT).
//!
//! A range that is not ready after a failure or a crash may or may not exist on its OSD:
//! [`Store::abandon_precreate`] moves its ids into the removal journal, whose drain removes
//! whatever exists. So every id this server allocated is, at every instant, in a range, a file
//! or the journal, and repair ([`Store::accounting`]) accounts for all three.

use rusqlite::params;
use tessera_mds_proto::{FsError, ObjectRef};

use super::files::{object_id, OBJECT_SEQ_BITS};
use super::{exec, query_opt, Store};

/// A range of object sequences on one OSD: reserved as `first..=last` (its identity), of
/// which `next..=last` are not handed out yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub osd: u32,
    pub first: u64,
    pub next: u64,
    pub last: u64,
}

impl Range {
    /// Objects not handed out yet.
    pub fn count(&self) -> u64 {
        self.last - self.next + 1
    }

    /// Whether `seq` is one not handed out yet.
    pub fn holds(&self, seq: u64) -> bool {
        (self.next..=self.last).contains(&seq)
    }
}

/// The policy/access tag the pools' CREATE sets on every new object (docs/security.md): never 0,
/// which in a capability means "not checked", so that changing it later revokes capabilities.
pub const INITIAL_POLICY_TAG: u32 = 1;

/// One object sequence taken from a pool, and the policy tag its CREATE set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectSeq {
    pub seq: u64,
    pub policy_tag: u32,
}

impl Store {
    /// Allocates `count` consecutive sequences on `osd` and records them as a range that is
    /// not ready yet.
    pub fn reserve_precreate(&mut self, osd: u32, count: u64) -> Result<Range, FsError> {
        let first: i64 = query_opt(
            &self.conn,
            "INSERT INTO osd_alloc (osd, next_seq) VALUES (?1, 1 + ?2)
             ON CONFLICT (osd) DO UPDATE SET next_seq = next_seq + ?2 RETURNING next_seq - ?2",
            params![osd, count as i64],
            |r| r.get(0),
        )?
        .ok_or(FsError::Io)?;
        let range = Range { osd, first: first as u64, next: first as u64, last: first as u64 + count - 1 };
        if range.last >= 1 << OBJECT_SEQ_BITS {
            return Err(FsError::NoSpace);
        }
        exec(
            &self.conn,
            "INSERT INTO precreated (osd, first_seq, next_seq, last_seq, ready, policy_tag) VALUES (?1, ?2, ?2, ?3, 0, ?4)",
            params![osd, range.first as i64, range.last as i64, INITIAL_POLICY_TAG],
        )?;
        Ok(range)
    }

    /// The next sequence `reserve_precreate` would give out on `osd`.
    pub fn next_seq(&self, osd: u32) -> Result<u64, FsError> {
        let next: Option<i64> = query_opt(&self.conn, "SELECT next_seq FROM osd_alloc WHERE osd = ?1", params![osd], |r| r.get(0))?;
        Ok(next.map_or(1, |n| n as u64))
    }

    /// For a store found older than `osd` (`fence.rs`): sequences up to `past` are taken, and
    /// every precreated range on it is set aside without removing its objects (they may hold
    /// the data of files this store never heard of). Returns how many objects were set aside.
    pub fn fence_osd(&mut self, osd: u32, past: u64) -> Result<u64, FsError> {
        let set_aside: u64 = self.ranges_of(osd)?.iter().map(|r| r.count()).sum();
        exec(&self.conn, "DELETE FROM precreated WHERE osd = ?1", params![osd])?;
        exec(
            &self.conn,
            "INSERT INTO osd_alloc (osd, next_seq) VALUES (?1, ?2) ON CONFLICT (osd) DO UPDATE SET next_seq = max(next_seq, ?2)",
            params![osd, past as i64 + 1],
        )?;
        Ok(set_aside)
    }

    fn ranges_of(&self, osd: u32) -> Result<Vec<Range>, FsError> {
        Ok(self.precreated_ranges()?.into_iter().filter(|r| r.osd == osd).collect())
    }

    /// The range's objects exist on its OSD: they may be handed out.
    pub fn precreate_ready(&mut self, range: &Range) -> Result<(), FsError> {
        let n = exec(
            &self.conn,
            "UPDATE precreated SET ready = 1 WHERE osd = ?1 AND first_seq = ?2 AND last_seq = ?3 AND ready = 0",
            params![range.osd, range.first as i64, range.last as i64],
        )?;
        if n == 1 {
            Ok(())
        } else {
            Err(FsError::Io)
        }
    }

    /// A range whose CREATE failed or may not have happened: its ids move into the removal
    /// journal (returned, for the caller to drain).
    pub fn abandon_precreate(&mut self, range: &Range) -> Result<Vec<ObjectRef>, FsError> {
        exec(&self.conn, "DELETE FROM precreated WHERE osd = ?1 AND first_seq = ?2", params![range.osd, range.first as i64])?;
        let objects: Vec<ObjectRef> =
            (range.next..=range.last).map(|seq| ObjectRef { osd: range.osd, object_id: object_id(self.server, seq) }).collect();
        super::files::journal_add(&self.conn, &objects)?;
        Ok(objects)
    }

    /// A new range whose CREATE was refused: forgotten, its ids not reused and its objects (if
    /// any are someone else's) left alone.
    pub fn set_aside_precreate(&mut self, range: &Range) -> Result<(), FsError> {
        exec(&self.conn, "DELETE FROM precreated WHERE osd = ?1 AND first_seq = ?2", params![range.osd, range.first as i64])?;
        Ok(())
    }

    /// Ranges reserved but never marked ready (a crash or failure between the steps).
    pub fn unready_precreates(&self) -> Result<Vec<Range>, FsError> {
        self.ranges("SELECT osd, first_seq, next_seq, last_seq FROM precreated WHERE ready = 0 ORDER BY osd, first_seq")
    }

    /// Every precreated range, ready or not.
    pub fn precreated_ranges(&self) -> Result<Vec<Range>, FsError> {
        self.ranges("SELECT osd, first_seq, next_seq, last_seq FROM precreated ORDER BY osd, first_seq")
    }

    /// Ready objects per OSD, for OSDs that have any.
    pub fn precreated_counts(&self) -> Result<Vec<(u32, u64)>, FsError> {
        let mut counts: Vec<(u32, u64)> = Vec::new();
        for r in self.ranges("SELECT osd, first_seq, next_seq, last_seq FROM precreated WHERE ready = 1 ORDER BY osd, first_seq")? {
            match counts.last_mut() {
                Some((osd, n)) if *osd == r.osd => *n += r.count(),
                _ => counts.push((r.osd, r.count())),
            }
        }
        Ok(counts)
    }

    fn ranges(&self, sql: &str) -> Result<Vec<Range>, FsError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(super::io)?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Range { osd: r.get(0)?, first: r.get::<_, i64>(1)? as u64, next: r.get::<_, i64>(2)? as u64, last: r.get::<_, i64>(3)? as u64 })
            })
            .map_err(super::io)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(super::io)
    }
}
