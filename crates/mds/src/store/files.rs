//! Regular files: creation in two transactions around the OSD step, unlink, layouts, default
//! striping, and the pending-removal journal the two share.
//!
//! Object ids: `((server + 1) << 48) | seq`, with `seq` counted per OSD from 1. The server in
//! the high bits keeps several metadata servers from ever picking the same id on one OSD without
//! talking to each other, and every id stays far above OSD-2's reserved range below 0x10000.

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use tessera_layout::StripeLayout;
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::{FileLayout, FileType, FsError, InodeId, ObjectRef, StripeHint, Timespec};

use super::{insert_inode, io, load_inode, new_row, Store};

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

/// A file whose ids are allocated and journaled, waiting for its objects to exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingFile {
    pub ino: InodeId,
    pub layout: FileLayout,
}

pub(crate) fn dir_stripe(conn: &Connection, dir: InodeId) -> Result<Option<StripeHint>, FsError> {
    conn.query_row("SELECT stripe_unit, stripe_count, start_osd FROM dir_stripe WHERE dir = ?1", [dir.0 as i64], |r| {
        Ok(StripeHint { stripe_unit: r.get::<_, i64>(0)? as u64, stripe_count: r.get(1)?, start_osd: r.get(2)? })
    })
    .optional()
    .map_err(io)
}

pub(crate) fn put_dir_stripe(tx: &Connection, dir: InodeId, hint: Option<StripeHint>) -> Result<(), FsError> {
    match hint {
        Some(h) => tx.execute(
            "INSERT OR REPLACE INTO dir_stripe (dir, stripe_unit, stripe_count, start_osd) VALUES (?1, ?2, ?3, ?4)",
            params![dir.0 as i64, h.stripe_unit as i64, h.stripe_count, h.start_osd],
        ),
        None => tx.execute("DELETE FROM dir_stripe WHERE dir = ?1", [dir.0 as i64]),
    }
    .map_err(io)?;
    Ok(())
}

/// Turns a hint into a layout over `osd_count` OSDs: count 0 means all of them; without a start
/// OSD, `spread` (the inode sequence) rotates the first OSD so files spread evenly.
pub fn resolve(hint: &StripeHint, osd_count: u32, spread: u64) -> Result<(StripeLayout, u32), FsError> {
    if osd_count == 0 {
        return Err(FsError::NoSpace);
    }
    let count = if hint.stripe_count == 0 { osd_count } else { hint.stripe_count };
    if count > osd_count {
        return Err(FsError::Invalid);
    }
    let layout = StripeLayout::new(hint.stripe_unit, count).map_err(|_| FsError::Invalid)?;
    let start = match hint.start_osd {
        Some(s) if s >= osd_count => return Err(FsError::Invalid),
        Some(s) => s,
        None => (spread % osd_count as u64) as u32,
    };
    Ok((layout, start))
}

fn journal_add(tx: &Transaction, objects: &[ObjectRef]) -> Result<(), FsError> {
    for o in objects {
        tx.execute("INSERT OR IGNORE INTO pending_removal (osd, object_id) VALUES (?1, ?2)", params![o.osd, o.object_id as i64])
            .map_err(io)?;
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
pub(crate) fn drop_file(tx: &Transaction, ino: InodeId) -> Result<Vec<ObjectRef>, FsError> {
    let objects = load_objects(tx, ino)?;
    journal_add(tx, &objects)?;
    tx.execute("DELETE FROM file_objects WHERE ino = ?1", [ino.0 as i64]).map_err(io)?;
    tx.execute("DELETE FROM inodes WHERE ino = ?1", [ino.0 as i64]).map_err(io)?;
    Ok(objects)
}

impl Store {
    /// Step 1 of create: checks the name, allocates the inode and one object id per slot, and
    /// journals the objects (so a crash before step 3 removes them on restart).
    pub fn begin_create(&mut self, parent: InodeId, name: &str, hint: Option<StripeHint>, default: &StripeHint, osd_count: u32) -> Result<PendingFile, FsError> {
        let tx = self.conn.unchecked_transaction().map_err(io)?;
        self.check_free(&tx, parent, name)?;
        let hint = match hint {
            Some(h) => h,
            None => dir_stripe(&tx, parent)?.unwrap_or(*default),
        };
        let ino = self.alloc_inode(&tx)?;
        let (stripe, start) = resolve(&hint, osd_count, ino.local())?;
        let mut objects = Vec::with_capacity(stripe.stripe_count() as usize);
        for slot in 0..stripe.stripe_count() {
            let osd = (start + slot) % osd_count;
            let seq: i64 = tx
                .query_row(
                    "INSERT INTO osd_alloc (osd, next_seq) VALUES (?1, 2)
                     ON CONFLICT (osd) DO UPDATE SET next_seq = next_seq + 1 RETURNING next_seq - 1",
                    [osd],
                    |r| r.get(0),
                )
                .map_err(io)?;
            if seq as u64 >= 1 << OBJECT_SEQ_BITS {
                return Err(FsError::NoSpace);
            }
            objects.push(ObjectRef { osd, object_id: object_id(self.server, seq as u64) });
        }
        journal_add(&tx, &objects)?;
        tx.commit().map_err(io)?;
        Ok(PendingFile { ino, layout: FileLayout { stripe, objects } })
    }

    /// Step 3 of create (after the objects exist): the inode, its entry and its object list,
    /// and the objects leave the journal. If the name was taken meanwhile, nothing changes and
    /// the objects stay journaled for the caller to remove.
    pub fn commit_create(&mut self, parent: InodeId, name: &str, new: &NewInode, file: &PendingFile, now: Timespec) -> Result<super::InodeRow, FsError> {
        let tx = self.conn.unchecked_transaction().map_err(io)?;
        self.check_free(&tx, parent, name)?;
        let row = new_row(file.ino, FileType::Regular, new, InodeId(0), now);
        insert_inode(&tx, &row, Some(file.layout.stripe.stripe_unit()))?;
        Self::add_entry(&tx, parent, name, file.ino, FileType::Regular, now)?;
        for (slot, o) in file.layout.objects.iter().enumerate() {
            tx.execute(
                "INSERT INTO file_objects (ino, slot, osd, object_id) VALUES (?1, ?2, ?3, ?4)",
                params![file.ino.0 as i64, slot as i64, o.osd, o.object_id as i64],
            )
            .map_err(io)?;
            tx.execute("DELETE FROM pending_removal WHERE osd = ?1 AND object_id = ?2", params![o.osd, o.object_id as i64]).map_err(io)?;
        }
        tx.commit().map_err(io)?;
        Ok(row)
    }

    /// unlink of a non-directory: entry, inode and object rows go, the objects are journaled
    /// and returned for the caller to remove from the OSDs.
    pub fn unlink(&mut self, parent: InodeId, name: &str, now: Timespec) -> Result<Vec<ObjectRef>, FsError> {
        let tx = self.conn.unchecked_transaction().map_err(io)?;
        self.load_dir(&tx, parent)?;
        let entry = Self::entry(&tx, parent, name)?.ok_or(FsError::NotFound)?;
        if entry.kind == FileType::Directory {
            return Err(FsError::IsDir);
        }
        // Files and symlinks always live on their directory's server.
        assert_eq!(entry.ino.server(), self.server, "non-directory {entry:?} homed away from its directory");
        let objects = drop_file(&tx, entry.ino)?;
        tx.execute("DELETE FROM dentries WHERE dir = ?1 AND name = ?2", params![parent.0 as i64, name]).map_err(io)?;
        Self::touch_dir(&tx, parent, now)?;
        tx.commit().map_err(io)?;
        Ok(objects)
    }

    /// A regular file's layout.
    pub fn layout(&self, ino: InodeId) -> Result<FileLayout, FsError> {
        let row = self.inode(ino)?;
        match row.kind {
            FileType::Regular => {}
            FileType::Directory => return Err(FsError::IsDir),
            FileType::Symlink => return Err(FsError::Invalid),
        }
        let unit: i64 = self.conn.query_row("SELECT stripe_unit FROM inodes WHERE ino = ?1", [ino.0 as i64], |r| r.get(0)).map_err(io)?;
        let objects = load_objects(&self.conn, ino)?;
        let stripe = StripeLayout::new(unit as u64, objects.len() as u32).map_err(|_| FsError::Io)?;
        Ok(FileLayout { stripe, objects })
    }

    /// Marks a truncate: mtime and ctime move (the lengths live on the objects).
    pub fn touch_file(&mut self, ino: InodeId, now: Timespec) -> Result<super::InodeRow, FsError> {
        self.check_local(ino)?;
        self.conn
            .execute("UPDATE inodes SET mtime_ns = ?2, ctime_ns = ?2 WHERE ino = ?1", params![ino.0 as i64, now.as_nanos()])
            .map_err(io)?;
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

    /// An object is gone from its OSD: it leaves the journal.
    pub fn clear_pending(&mut self, o: ObjectRef) -> Result<(), FsError> {
        self.conn
            .execute("DELETE FROM pending_removal WHERE osd = ?1 AND object_id = ?2", params![o.osd, o.object_id as i64])
            .map_err(io)?;
        Ok(())
    }

    /// Whether an object id on `osd` is accounted for: a file's object or journaled.
    pub fn knows_object(&self, o: ObjectRef) -> Result<bool, FsError> {
        let n: i64 = self
            .conn
            .query_row(
                "SELECT (SELECT COUNT(*) FROM file_objects WHERE osd = ?1 AND object_id = ?2)
                      + (SELECT COUNT(*) FROM pending_removal WHERE osd = ?1 AND object_id = ?2)",
                params![o.osd, o.object_id as i64],
                |r| r.get(0),
            )
            .map_err(io)?;
        Ok(n > 0)
    }
}
