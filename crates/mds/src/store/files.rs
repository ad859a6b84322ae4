//! Regular files: create (objects taken from the precreated pool, so one step with no OSD
//! call), unlink, layouts, default striping, and the pending-removal journal.
//!
//! Object ids: `((server + 1) << 48) | seq`, with `seq` counted per OSD from 1. The server in
//! the high bits keeps several metadata servers from ever picking the same id on one OSD without
//! talking to each other, and every id stays far above OSD-2's reserved range below 0x10000.

use std::collections::{HashMap, HashSet};

use rusqlite::{params, Connection};
use tessera_layout::StripeLayout;
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::{Caller, FileLayout, FileType, FsError, InodeId, ObjectRef, StripeHint, Timespec};

use super::hot::ParentFacts;
use super::precreate::Range;
use super::{exec, insert_inode, io, load_inode, new_row, query_opt, InodeRow, Store};

/// Bits of an object id that hold the per-OSD sequence.
pub const OBJECT_SEQ_BITS: u32 = 48;
const _: () = assert!((tessera_mds_proto::limits::SERVERS_MAX as u64) << OBJECT_SEQ_BITS < (1u64 << 63));

/// Object id `seq` allocated by server `server`.
pub fn object_id(server: u32, seq: u64) -> u64 {
    assert!(seq > 0 && seq < 1 << OBJECT_SEQ_BITS);
    ((server as u64 + 1) << OBJECT_SEQ_BITS) | seq
}

/// The server that allocated an object id (for repair, which only judges its own ids).
pub fn object_server(object_id: u64) -> Option<u32> {
    (object_id >> OBJECT_SEQ_BITS).checked_sub(1).map(|s| s as u32)
}

/// The per-OSD sequence inside an object id.
pub fn object_seq(object_id: u64) -> u64 {
    object_id & ((1 << OBJECT_SEQ_BITS) - 1)
}

/// The server's striping: the default for directories without their own, over how many OSDs,
/// and which of them new files avoid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripePolicy {
    pub default: StripeHint,
    pub osd_count: u32,
    /// OSDs last found unreachable or full (`health.rs`), in index order.
    pub avoid: Vec<u32>,
    /// OSDs no new file may use at all, even one wider than the others: not yet checked
    /// against this store (`fence.rs`), so their precreated objects may hold a lost life's
    /// data. A create that needs one checks it first ([`CreateError::Unchecked`]).
    pub unusable: Vec<u32>,
}

/// A created file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewFile {
    pub row: InodeRow,
    pub layout: FileLayout,
    /// The policy tag each object holds, slot by slot.
    pub policy_tags: Vec<u32>,
}

/// Why a create step did not make a file. Either way the step is rolled back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateError {
    Fs(FsError),
    /// These OSDs have no precreated object ready: refill, then try again.
    PoolEmpty(Vec<u32>),
    /// These OSDs are not yet checked against the store (`fence.rs`): check, then try again.
    Unchecked(Vec<u32>),
}

impl From<FsError> for CreateError {
    fn from(e: FsError) -> Self {
        CreateError::Fs(e)
    }
}

pub(crate) fn dir_stripe(conn: &Connection, dir: InodeId) -> Result<Option<StripeHint>, FsError> {
    query_opt(conn, "SELECT stripe_unit, stripe_count, start_osd FROM dir_stripe WHERE dir = ?1", [dir.0 as i64], |r| {
        Ok(StripeHint { stripe_unit: r.get::<_, i64>(0)? as u64, stripe_count: r.get(1)?, start_osd: r.get(2)? })
    })
}

pub(crate) fn put_dir_stripe(tx: &Connection, dir: InodeId, hint: Option<StripeHint>) -> Result<(), FsError> {
    match hint {
        Some(h) => exec(
            tx,
            "INSERT OR REPLACE INTO dir_stripe (dir, stripe_unit, stripe_count, start_osd) VALUES (?1, ?2, ?3, ?4)",
            params![dir.0 as i64, h.stripe_unit as i64, h.stripe_count, h.start_osd],
        )?,
        None => exec(tx, "DELETE FROM dir_stripe WHERE dir = ?1", [dir.0 as i64])?,
    };
    Ok(())
}

/// Turns a hint into a layout over `osd_count` OSDs and the OSD of each slot: count 0 means
/// all of them; a start OSD fixes the first slot and the rest follow it; without one,
/// [`place`] chooses, avoiding the OSDs in `avoid` (down or full).
pub fn resolve(hint: &StripeHint, osd_count: u32, avoid: &[u32], spread: u64) -> Result<(StripeLayout, Vec<u32>), FsError> {
    if osd_count == 0 {
        return Err(FsError::NoSpace);
    }
    let all = hint.stripe_count == 0;
    let count = if all { osd_count } else { hint.stripe_count };
    if count > osd_count {
        return Err(FsError::Invalid);
    }
    let osds = match hint.start_osd {
        Some(s) if s >= osd_count => return Err(FsError::Invalid),
        Some(s) => (0..count).map(|i| (s + i) % osd_count).collect(),
        None => place(count, all, osd_count, avoid, spread),
    };
    let layout = StripeLayout::new(hint.stripe_unit, osds.len() as u32).map_err(|_| FsError::Invalid)?;
    Ok((layout, osds))
}

/// The OSDs of a new file's slots when its stripe names no start OSD. `spread` (the inode
/// sequence) rotates the first slot so files spread evenly, and the others follow it.
/// With OSDs to avoid (down, or full: `health.rs`), the rotation runs over the others: a
/// stripe over all OSDs (`all`, count 0) takes every one of them, as Lustre's `-c -1` does,
/// and a narrower one its `count` of them when there are that many. A stripe wider than the
/// OSDs left is placed as if none were avoided: the file is made, and I/O on a down OSD's
/// slots waits for it (on a full one's, fails with ENOSPC).
pub fn place(count: u32, all: bool, osd_count: u32, avoid: &[u32], spread: u64) -> Vec<u32> {
    let mut up: Vec<u32> = (0..osd_count).collect();
    if !avoid.is_empty() {
        let mut avoided = vec![false; osd_count as usize];
        for &d in avoid.iter().filter(|&&d| d < osd_count) {
            avoided[d as usize] = true;
        }
        up.retain(|&o| !avoided[o as usize]);
    }
    let count = match up.len() as u32 {
        0 => {
            up = (0..osd_count).collect();
            count
        }
        answering if all => answering,
        answering if answering < count => {
            up = (0..osd_count).collect();
            count
        }
        _ => count,
    };
    let first = (spread % up.len() as u64) as usize;
    (0..count as usize).map(|i| up[(first + i) % up.len()]).collect()
}

/// Journals `objects` for removal; a revocation or truncate still owed to them is moot once
/// they go.
pub(crate) fn journal_add(tx: &Connection, objects: &[ObjectRef]) -> Result<(), FsError> {
    for o in objects {
        exec(tx, "INSERT OR IGNORE INTO pending_removal (osd, object_id) VALUES (?1, ?2)", params![o.osd, o.object_id as i64])?;
        exec(tx, "DELETE FROM pending_retag WHERE osd = ?1 AND object_id = ?2", params![o.osd, o.object_id as i64])?;
        exec(tx, "DELETE FROM pending_length WHERE osd = ?1 AND object_id = ?2", params![o.osd, o.object_id as i64])?;
    }
    Ok(())
}

fn load_objects(conn: &Connection, ino: InodeId) -> Result<Vec<ObjectRef>, FsError> {
    let mut stmt = conn.prepare_cached("SELECT osd, object_id FROM file_objects WHERE ino = ?1 ORDER BY slot").map_err(io)?;
    let rows = stmt
        .query_map([ino.0 as i64], |r| Ok(ObjectRef { osd: r.get(0)?, object_id: r.get::<_, i64>(1)? as u64 }))
        .map_err(io)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(io)
}

/// Deletes a regular file's inode and object rows, journaling its objects; returns them.
pub(crate) fn drop_file(tx: &Connection, ino: InodeId) -> Result<Vec<ObjectRef>, FsError> {
    let objects = load_objects(tx, ino)?;
    journal_add(tx, &objects)?;
    exec(tx, "DELETE FROM file_objects WHERE ino = ?1", [ino.0 as i64])?;
    exec(tx, "DELETE FROM inodes WHERE ino = ?1", [ino.0 as i64])?;
    Ok(objects)
}

impl Store {
    /// create: takes one precreated object per slot and writes the inode, its entry and its
    /// object list. The objects already exist on their OSDs and were accounted for by their
    /// precreated range, so nothing is journaled and no OSD is called. Any refusal (a name
    /// taken, an empty pool) happens before the first write. The inode counter, the pools' cursors and the parent's times are
    /// hot rows (`hot.rs`), written once per group: the common path is four statements (the
    /// parent, the entry, the inode, one object row per slot), and memory changes only once
    /// they all succeeded.
    pub fn create_file(
        &mut self,
        caller: &Caller,
        parent: InodeId,
        name: &str,
        new: &NewInode,
        hint: Option<StripeHint>,
        policy: &StripePolicy,
        now: Timespec,
    ) -> Result<NewFile, CreateError> {
        let tx = &self.conn;
        super::check_name(name)?;
        self.check_local(parent)?;
        // The parent's type, owner, mode and default striping: remembered from the last
        // create in it, or one lookup (hot.rs).
        let facts = match self.hot.parent(parent) {
            Some(facts) => facts,
            None => {
                let facts = query_opt(
                    tx,
                    "SELECT i.kind, d.stripe_unit, d.stripe_count, d.start_osd, i.uid, i.gid, i.mode FROM inodes i LEFT JOIN dir_stripe d ON d.dir = i.ino WHERE i.ino = ?1",
                    [parent.0 as i64],
                    |r| {
                        let dir_hint = match r.get::<_, Option<i64>>(1)? {
                            Some(unit) => Some(StripeHint { stripe_unit: unit as u64, stripe_count: r.get(2)?, start_osd: r.get(3)? }),
                            None => None,
                        };
                        Ok(ParentFacts { kind: r.get::<_, i64>(0)?, uid: r.get(4)?, gid: r.get(5)?, mode: r.get(6)?, dir_hint })
                    },
                )?
                .ok_or(FsError::Stale)?;
                self.hot.remember_parent(parent, facts);
                facts
            }
        };
        let ParentFacts { kind, dir_hint, .. } = facts;
        if super::kind_of(kind) != FileType::Directory {
            return Err(FsError::NotDir.into());
        }
        // Checked here, not in a read before the step (`server/authorize.rs`), so a create
        // costs its caller no more than its parent's facts, which creates keep in memory.
        if let Err(e) = crate::access::check(caller, &facts, crate::access::WRITE | crate::access::SEARCH) {
            // A name already taken is EEXIST before write permission is asked, as on Linux
            // (search permission still first); looked up only on this refusal's path.
            let searchable = crate::access::check(caller, &facts, crate::access::SEARCH).is_ok();
            return Err(if searchable && Self::entry(tx, parent, name)?.is_some() { FsError::Exists } else { e }.into());
        }
        crate::access::new_owner(caller, new)?;
        let new = &crate::access::inherited(&facts, new, FileType::Regular);
        let ino = self.alloc_inode()?;
        let (stripe, osds) = resolve(&hint.or(dir_hint).unwrap_or(policy.default), policy.osd_count, &policy.avoid, self.hot.spread())?;
        let unchecked: Vec<u32> = osds.iter().copied().filter(|o| policy.unusable.contains(o)).collect();
        if !unchecked.is_empty() {
            return Err(CreateError::Unchecked(unchecked));
        }
        // The objects are chosen before any write, so an empty pool fails with nothing to undo.
        // Slots are on distinct OSDs, so each OSD is peeked once.
        let mut peeked = Vec::with_capacity(osds.len());
        let mut empty = Vec::new();
        for osd in osds {
            match self.hot.peek_object(tx, osd)? {
                Some(p) => peeked.push((osd, p)),
                None => empty.push(osd),
            }
        }
        if !empty.is_empty() {
            return Err(CreateError::PoolEmpty(empty));
        }
        let row = new_row(ino, FileType::Regular, new, InodeId(0), now);
        // The entry first: a taken name fails here, before any write (SQLite backs out a
        // failing statement). The step runs without a savepoint, so a failure after this
        // write marks the store partial and the group is rolled back (`commit.rs`).
        Self::insert_entry(tx, parent, name, ino, FileType::Regular)?;
        let server = self.server;
        let written = (|| -> Result<(Vec<ObjectRef>, Vec<u32>), FsError> {
            insert_inode(tx, &row, Some(stripe.stripe_unit()))?;
            let mut objects = Vec::with_capacity(peeked.len());
            let mut policy_tags = Vec::with_capacity(peeked.len());
            for (slot, (osd, p)) in peeked.iter().enumerate() {
                let o = ObjectRef { osd: *osd, object_id: object_id(server, p.object.seq) };
                exec(
                    tx,
                    "INSERT INTO file_objects (ino, slot, osd, object_id, policy_tag) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![ino.0 as i64, slot as i64, o.osd, o.object_id as i64, p.object.policy_tag],
                )?;
                objects.push(o);
                policy_tags.push(p.object.policy_tag);
            }
            Ok((objects, policy_tags))
        })();
        let (objects, policy_tags) = written.inspect_err(|_| self.partial.set(true))?;
        let taken: Vec<_> = peeked.iter().map(|(_, p)| *p).collect();
        self.hot.take(&taken);
        self.hot.touch_dir(parent, now);
        Ok(NewFile { row, layout: FileLayout { stripe, objects }, policy_tags })
    }

    /// unlink of a non-directory: entry, inode and object rows go, the objects are journaled
    /// and returned for the caller to remove from the OSDs.
    pub fn unlink(&mut self, parent: InodeId, name: &str, now: Timespec) -> Result<Vec<ObjectRef>, FsError> {
        let tx = &self.conn;
        self.load_dir(tx, parent)?;
        let entry = Self::entry(tx, parent, name)?.ok_or(FsError::NotFound)?;
        if entry.kind == FileType::Directory {
            return Err(FsError::IsDir);
        }
        // Files and symlinks always live on their directory's server.
        assert_eq!(entry.ino.server(), self.server, "non-directory {entry:?} homed away from its directory");
        let objects = drop_file(tx, entry.ino)?;
        exec(tx, "DELETE FROM dentries WHERE dir = ?1 AND name = ?2", params![parent.0 as i64, name])?;
        Self::touch_dir(tx, parent, now)?;
        Ok(objects)
    }

    /// A regular file's layout.
    pub fn layout(&self, ino: InodeId) -> Result<FileLayout, FsError> {
        self.check_local(ino)?;
        let (kind, unit) = query_opt(&self.conn, "SELECT kind, stripe_unit FROM inodes WHERE ino = ?1", [ino.0 as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
        })?
        .ok_or(FsError::Stale)?;
        match super::kind_of(kind) {
            FileType::Regular => {}
            FileType::Directory => return Err(FsError::IsDir),
            FileType::Symlink => return Err(FsError::Invalid),
        }
        let objects = load_objects(&self.conn, ino)?;
        let stripe = StripeLayout::new(unit.ok_or(FsError::Io)? as u64, objects.len() as u32).map_err(|_| FsError::Io)?;
        Ok(FileLayout { stripe, objects })
    }

    /// The policy tag each of a regular file's objects holds, slot by slot.
    pub fn policy_tags(&self, ino: InodeId) -> Result<Vec<u32>, FsError> {
        self.check_local(ino)?;
        let mut stmt = self.conn.prepare_cached("SELECT policy_tag FROM file_objects WHERE ino = ?1 ORDER BY slot").map_err(io)?;
        let rows = stmt.query_map([ino.0 as i64], |r| Ok(r.get::<_, i64>(0)? as u32)).map_err(io)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(io)
    }

    /// Records that every object of `ino` now holds policy tag `tag` (after a revocation).
    pub fn set_policy_tag(&mut self, ino: InodeId, tag: u32) -> Result<(), FsError> {
        self.check_local(ino)?;
        exec(&self.conn, "UPDATE file_objects SET policy_tag = ?2 WHERE ino = ?1", params![ino.0 as i64, tag])?;
        Ok(())
    }

    /// Journals a revocation: every object of `ino` must be set to `tag` on its OSD (a later
    /// revocation replaces an earlier one still owed). Returns what to set.
    pub fn journal_retag(&mut self, ino: InodeId, tag: u32) -> Result<Vec<(ObjectRef, u32)>, FsError> {
        self.check_local(ino)?;
        let objects = load_objects(&self.conn, ino)?;
        for o in &objects {
            exec(&self.conn, "INSERT OR REPLACE INTO pending_retag (osd, object_id, policy_tag) VALUES (?1, ?2, ?3)", params![o.osd, o.object_id as i64, tag])?;
        }
        Ok(objects.into_iter().map(|o| (o, tag)).collect())
    }

    /// Revocations not yet on the OSDs: each object with the tag it must hold.
    pub fn pending_retags(&self) -> Result<Vec<(ObjectRef, u32)>, FsError> {
        let mut stmt = self.conn.prepare_cached("SELECT osd, object_id, policy_tag FROM pending_retag ORDER BY osd, object_id").map_err(io)?;
        let rows = stmt
            .query_map([], |r| Ok((ObjectRef { osd: r.get(0)?, object_id: r.get::<_, i64>(1)? as u64 }, r.get::<_, i64>(2)? as u32)))
            .map_err(io)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(io)
    }

    /// Revocations now on their OSDs leave the journal, unless a later one replaced them.
    pub fn clear_retags(&mut self, done: &[(ObjectRef, u32)]) -> Result<(), FsError> {
        for (o, tag) in done {
            exec(&self.conn, "DELETE FROM pending_retag WHERE osd = ?1 AND object_id = ?2 AND policy_tag = ?3", params![o.osd, o.object_id as i64, tag])?;
        }
        Ok(())
    }

    /// Journals a truncate: each object of `ino` must be set to its length for `size` (a
    /// later truncate replaces an earlier one still owed). Returns what to set.
    pub fn journal_truncate(&mut self, ino: InodeId, size: u64) -> Result<Vec<(ObjectRef, u64)>, FsError> {
        self.check_local(ino)?;
        let layout = self.layout(ino)?;
        let mut owed = Vec::with_capacity(layout.objects.len());
        for (slot, o) in layout.objects.iter().enumerate() {
            let len = layout.stripe.object_len(size, slot as u32);
            exec(&self.conn, "INSERT OR REPLACE INTO pending_length (osd, object_id, length) VALUES (?1, ?2, ?3)", params![o.osd, o.object_id as i64, len as i64])?;
            owed.push((*o, len));
        }
        Ok(owed)
    }

    /// Truncates not yet on the OSDs: each object with the length it must have.
    pub fn pending_lengths(&self) -> Result<Vec<(ObjectRef, u64)>, FsError> {
        let mut stmt = self.conn.prepare_cached("SELECT osd, object_id, length FROM pending_length ORDER BY osd, object_id").map_err(io)?;
        let rows = stmt
            .query_map([], |r| Ok((ObjectRef { osd: r.get(0)?, object_id: r.get::<_, i64>(1)? as u64 }, r.get::<_, i64>(2)? as u64)))
            .map_err(io)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(io)
    }

    /// Lengths now on their OSDs leave the journal, unless a later truncate replaced them.
    pub fn clear_lengths(&mut self, done: &[(ObjectRef, u64)]) -> Result<(), FsError> {
        for (o, len) in done {
            exec(&self.conn, "DELETE FROM pending_length WHERE osd = ?1 AND object_id = ?2 AND length = ?3", params![o.osd, o.object_id as i64, *len as i64])?;
        }
        Ok(())
    }

    /// Marks a truncate: mtime and ctime move (the lengths live on the objects).
    pub fn touch_file(&mut self, ino: InodeId, now: Timespec) -> Result<super::InodeRow, FsError> {
        self.check_local(ino)?;
        exec(&self.conn, "UPDATE inodes SET mtime_ns = ?2, ctime_ns = ?2 WHERE ino = ?1", params![ino.0 as i64, now.as_nanos()])?;
        load_inode(&self.conn, ino)
    }

    pub fn set_dir_stripe(&mut self, dir: InodeId, hint: Option<StripeHint>) -> Result<(), FsError> {
        self.load_dir(&self.conn, dir)?;
        put_dir_stripe(&self.conn, dir, hint)
    }

    pub fn dir_stripe(&self, dir: InodeId) -> Result<Option<StripeHint>, FsError> {
        self.load_dir(&self.conn, dir)?;
        dir_stripe(&self.conn, dir)
    }

    /// Objects waiting in the removal journal.
    pub fn pending_removals(&self) -> Result<Vec<ObjectRef>, FsError> {
        let mut stmt = self.conn.prepare_cached("SELECT osd, object_id FROM pending_removal ORDER BY osd, object_id").map_err(io)?;
        let rows = stmt
            .query_map([], |r| Ok(ObjectRef { osd: r.get(0)?, object_id: r.get::<_, i64>(1)? as u64 }))
            .map_err(io)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(io)
    }

    /// Objects gone from their OSDs leave the journal.
    pub fn clear_pending(&mut self, done: &[ObjectRef]) -> Result<(), FsError> {
        for o in done {
            exec(&self.conn, "DELETE FROM pending_removal WHERE osd = ?1 AND object_id = ?2", params![o.osd, o.object_id as i64])?;
        }
        Ok(())
    }

    /// Journals for removal objects that nothing accounted for (what repair found).
    pub fn journal_orphans(&mut self, objects: &[ObjectRef]) -> Result<(), FsError> {
        journal_add(&self.conn, objects)
    }

    /// Everything that accounts for an object this server allocated, for repair.
    pub fn accounting(&self) -> Result<Accounting, FsError> {
        let refs = |sql: &str| -> Result<HashSet<ObjectRef>, FsError> {
            let mut stmt = self.conn.prepare_cached(sql).map_err(io)?;
            let rows = stmt.query_map([], |r| Ok(ObjectRef { osd: r.get(0)?, object_id: r.get::<_, i64>(1)? as u64 })).map_err(io)?;
            rows.collect::<Result<_, _>>().map_err(io)
        };
        let mut stmt = self.conn.prepare_cached("SELECT osd, object_id, ino FROM file_objects").map_err(io)?;
        let rows = stmt
            .query_map([], |r| Ok((ObjectRef { osd: r.get(0)?, object_id: r.get::<_, i64>(1)? as u64 }, InodeId(r.get::<_, i64>(2)? as u64))))
            .map_err(io)?;
        let files = rows.collect::<Result<_, _>>().map_err(io)?;
        Ok(Accounting {
            files,
            journal: refs("SELECT osd, object_id FROM pending_removal")?,
            ranges: self.precreated_ranges()?,
        })
    }
}

/// What accounts for this server's objects: files, the removal journal, precreated ranges.
pub struct Accounting {
    /// Each file's objects, with the file.
    files: HashMap<ObjectRef, InodeId>,
    journal: HashSet<ObjectRef>,
    ranges: Vec<Range>,
}

impl Accounting {
    /// Whether `o` is a file's object, journaled, or in a precreated range.
    pub fn knows(&self, o: ObjectRef) -> bool {
        let seq = object_seq(o.object_id);
        self.files.contains_key(&o) || self.journal.contains(&o) || self.ranges.iter().any(|r| r.osd == o.osd && r.holds(seq))
    }

    /// Every file's object, with its file.
    pub fn files(&self) -> impl Iterator<Item = (&ObjectRef, &InodeId)> {
        self.files.iter()
    }

    /// The file whose object `o` is.
    pub fn file_of(&self, o: ObjectRef) -> Option<InodeId> {
        self.files.get(&o).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::place;

    /// How many of `files` consecutive new files have a slot on each OSD, and their widths.
    fn slots(count: u32, all: bool, osds: u32, down: &[u32], files: u64) -> (Vec<u32>, Vec<usize>) {
        let mut on = vec![0; osds as usize];
        let mut widths = Vec::new();
        for spread in 0..files {
            let chosen = place(count, all, osds, down, spread);
            let mut distinct = chosen.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), chosen.len(), "slots on distinct OSDs: {chosen:?}");
            for o in &chosen {
                on[*o as usize] += 1;
            }
            widths.push(chosen.len());
        }
        widths.dedup();
        (on, widths)
    }

    #[test]
    fn with_all_up_files_rotate_over_every_osd() {
        assert_eq!(place(2, false, 4, &[], 3), vec![3, 0]);
        assert_eq!(slots(1, false, 4, &[], 8), (vec![2, 2, 2, 2], vec![1]));
        assert_eq!(slots(4, true, 4, &[], 8), (vec![8, 8, 8, 8], vec![4]));
    }

    #[test]
    fn a_down_osd_gets_no_new_slot_and_the_rest_share_evenly() {
        assert_eq!(slots(1, false, 4, &[2], 9), (vec![3, 3, 0, 3], vec![1]));
        assert_eq!(slots(2, false, 5, &[2], 8), (vec![4, 4, 0, 4, 4], vec![2]));
        // Over all OSDs: every OSD that answers, one slot fewer.
        assert_eq!(slots(4, true, 4, &[1], 6), (vec![6, 0, 6, 6], vec![3]));
        assert_eq!(slots(4, true, 4, &[0, 2], 2), (vec![0, 2, 0, 2], vec![2]));
    }

    #[test]
    fn a_stripe_wider_than_what_answers_is_placed_as_if_all_were_up() {
        assert_eq!(slots(4, false, 4, &[1], 4), (vec![4, 4, 4, 4], vec![4]));
        assert_eq!(slots(3, false, 4, &[0, 2], 4), (vec![3, 3, 3, 3], vec![3]));
        assert_eq!(slots(2, true, 2, &[0, 1], 2), (vec![2, 2], vec![2]), "none answers");
        // Indexes outside the map are ignored.
        assert_eq!(slots(1, false, 2, &[7], 4), (vec![2, 2], vec![1]));
    }
}
