//! One server's share of the namespace in SQLite. A mutating method is one atomic step but
//! opens no transaction itself: the caller runs it inside one ([`crate::namespace`] wraps every
//! call in a savepoint of a group commit, or a read transaction), so a failed step leaves
//! nothing and a crash leaves either all of a step or none of it. No OSD or network calls
//! happen here: [`crate::server::Mds`] sequences those around these steps.
//!
//! `files.rs` holds regular files (create, unlink, layouts, the removal journal);
//! `precreate.rs` the precreated object ranges; `rename.rs` the rename rules. This file holds
//! inodes, directories and symlinks; `hot.rs` the rows the writer keeps in memory between
//! commits. Hot statements go through `prepare_cached`.

pub mod files;
mod hot;
pub mod precreate;
mod rename;
mod split;

use rusqlite::{params, Connection, OptionalExtension};
use tessera_mds_proto::limits::{NAME_LEN_MAX, READDIR_ENTRIES_MAX};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::{Attr, Caller, FileType, FsError, InodeId, SetAttrs, StatFs, StripeHint, Timespec};

pub use files::NewFile;
pub use precreate::INITIAL_POLICY_TAG;

/// Permission bits kept in `mode`; type bits come from the inode's kind.
const MODE_MASK: u32 = 0o7777;

/// An SQLite failure is an I/O error to the client; the detail goes to the log.
pub(crate) fn io(e: rusqlite::Error) -> FsError {
    tracing::error!(error = %e, "metadata store");
    FsError::Io
}

/// Runs one statement, prepared once per connection.
pub(crate) fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Result<usize, FsError> {
    conn.prepare_cached(sql).and_then(|mut s| s.execute(params)).map_err(io)
}

/// The first row of a query prepared once per connection, if any.
pub(crate) fn query_opt<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    row: impl FnOnce(&rusqlite::Row) -> rusqlite::Result<T>,
) -> Result<Option<T>, FsError> {
    conn.prepare_cached(sql).and_then(|mut s| s.query_row(params, row).optional()).map_err(io)
}

fn kind_of(code: i64) -> FileType {
    // Only this module writes the column, always from a FileType.
    FileType::from_code(code as u8).expect("inodes.kind holds a FileType code")
}

/// A name a directory may hold: 1..=NAME_LEN_MAX bytes, no '/' or NUL, not "." or "..".
pub fn check_name(name: &str) -> Result<(), FsError> {
    if name.len() > NAME_LEN_MAX {
        return Err(FsError::NameTooLong);
    }
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(FsError::Invalid);
    }
    Ok(())
}

/// An inode as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeRow {
    pub ino: InodeId,
    pub kind: FileType,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub parent: InodeId,
    pub symlink: Option<String>,
    /// Directories: how many entries are directories (kept by triggers in the schema).
    pub subdirs: u32,
}

impl InodeRow {
    /// The attributes, given the size (regular files: from the objects).
    pub fn attr(&self, size: u64) -> Attr {
        let size = match self.kind {
            FileType::Symlink => self.symlink.as_ref().map_or(0, |t| t.len() as u64),
            FileType::Directory => 0,
            FileType::Regular => size,
        };
        Attr {
            ino: self.ino,
            file_type: self.kind,
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            // As POSIX file systems count them: a directory's entry in its parent, its own `.`,
            // and each subdirectory's `..` (find(1) relies on this).
            nlink: if self.kind == FileType::Directory { 2u32.saturating_add(self.subdirs) } else { 1 },
            size,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            parent: if self.kind == FileType::Directory { self.parent } else { InodeId(0) },
        }
    }
}

/// One directory entry as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dentry {
    pub name: String,
    pub ino: InodeId,
    pub kind: FileType,
}

/// The namespace held by server `server`, on one connection: the writer's, or a reader's
/// (which only ever runs the `&self` methods).
pub struct Store {
    conn: Connection,
    server: u32,
    hot: hot::Hot,
    /// A create failed after its first write (see [`Store::take_partial`]).
    partial: std::cell::Cell<bool>,
}


fn row_to_inode(r: &rusqlite::Row) -> rusqlite::Result<InodeRow> {
    Ok(InodeRow {
        ino: InodeId(r.get::<_, i64>(0)? as u64),
        kind: kind_of(r.get(1)?),
        mode: r.get(2)?,
        uid: r.get(3)?,
        gid: r.get(4)?,
        atime: Timespec::from_nanos(r.get(5)?),
        mtime: Timespec::from_nanos(r.get(6)?),
        ctime: Timespec::from_nanos(r.get(7)?),
        parent: InodeId(r.get::<_, i64>(8)? as u64),
        symlink: r.get(9)?,
        subdirs: r.get::<_, i64>(10)?.clamp(0, u32::MAX as i64) as u32,
    })
}

pub(crate) fn load_inode(tx: &Connection, ino: InodeId) -> Result<InodeRow, FsError> {
    tx.prepare_cached("SELECT ino, kind, mode, uid, gid, atime_ns, mtime_ns, ctime_ns, parent, symlink, subdirs FROM inodes WHERE ino = ?1")
        .and_then(|mut s| s.query_row([ino.0 as i64], row_to_inode).optional())
        .map_err(io)?
        .ok_or(FsError::Stale)
}

pub(crate) fn insert_inode(tx: &Connection, row: &InodeRow, stripe_unit: Option<u64>) -> Result<(), FsError> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO inodes (ino, kind, mode, uid, gid, atime_ns, mtime_ns, ctime_ns, parent, symlink, stripe_unit)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .map_err(io)?;
    stmt.execute(params![
            row.ino.0 as i64,
            row.kind.code() as i64,
            row.mode,
            row.uid,
            row.gid,
            row.atime.as_nanos(),
            row.mtime.as_nanos(),
            row.ctime.as_nanos(),
            row.parent.0 as i64,
            row.symlink,
            stripe_unit.map(|u| u as i64)
    ])
    .map_err(io)?;
    Ok(())
}

fn new_row(ino: InodeId, kind: FileType, new: &NewInode, parent: InodeId, now: Timespec) -> InodeRow {
    InodeRow {
        ino,
        kind,
        mode: new.mode & MODE_MASK,
        uid: new.uid,
        gid: new.gid,
        atime: now,
        mtime: now,
        ctime: now,
        parent,
        symlink: None,
        subdirs: 0,
    }
}

impl Store {
    /// Wraps the writer connection of an opened store ([`crate::db::open`]); server 0 makes the
    /// root if it is missing, owned by the user the server runs as (mode 0755): a cluster a
    /// user starts for themselves is theirs to write in, one started by root is root's, as
    /// mke2fs made a root directory before its `root_owner` option.
    pub fn new(mut conn: Connection, server: u32, now: Timespec) -> Result<Store, FsError> {
        if server == 0 {
            let tx = conn.transaction().map_err(io)?;
            if load_inode(&tx, InodeId::ROOT) == Err(FsError::Stale) {
                let me = tessera_mds_proto::Caller::of_process();
                let root = new_row(InodeId::ROOT, FileType::Directory, &NewInode { mode: 0o755, uid: me.uid, gid: me.gid }, InodeId::ROOT, now);
                insert_inode(&tx, &root, None)?;
            }
            tx.commit().map_err(io)?;
        }
        let hot = hot::Hot::load(&conn)?;
        Ok(Store { conn, server, hot, partial: Default::default() })
    }

    /// Wraps a reader connection ([`crate::db::open_reader`]).
    pub fn reader(conn: Connection, server: u32) -> Store {
        Store { conn, server, hot: hot::Hot::default(), partial: Default::default() }
    }

    /// Writes the rows creates keep in memory (`hot.rs`) into the open transaction: before
    /// its COMMIT, and before any step other than a create.
    pub(crate) fn settle(&self) -> Result<(), FsError> {
        self.hot.settle(&self.conn)
    }

    /// A step other than a create has run: what the hot rows know of directories (stored
    /// times, type, default striping) may be stale.
    pub(crate) fn forget_directories(&self) {
        self.hot.forget_directories()
    }

    /// Whether the last step failed after writing part of its change (creates run without a
    /// savepoint: `commit.rs` then rolls back the whole group); clears the flag.
    pub(crate) fn take_partial(&self) -> bool {
        self.partial.replace(false)
    }

    /// Marks the running step as failed part-way (tests of the group's rollback).
    #[cfg(test)]
    pub(crate) fn mark_partial(&self) {
        self.partial.set(true);
    }

    /// Forgets what memory held ahead of the store, after the group's transaction was rolled
    /// back.
    pub(crate) fn reload_hot(&self) -> Result<(), FsError> {
        self.hot.reload(&self.conn)
    }

    /// The connection, for the transaction statements of [`crate::namespace`].
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn server(&self) -> u32 {
        self.server
    }

    /// Refuses an inode homed on another server.
    pub fn check_local(&self, ino: InodeId) -> Result<(), FsError> {
        if ino.server() == self.server {
            Ok(())
        } else {
            Err(FsError::Misdirected)
        }
    }

    /// Allocates the next inode id from memory (`hot.rs`: stored once per block).
    fn alloc_inode(&self) -> Result<InodeId, FsError> {
        let local = self.hot.alloc_inode();
        if local > InodeId::LOCAL_MAX {
            return Err(FsError::NoSpace);
        }
        Ok(InodeId::new(self.server, local))
    }

    /// A local directory, or NotDir / Stale / Misdirected.
    fn load_dir(&self, conn: &Connection, dir: InodeId) -> Result<InodeRow, FsError> {
        self.check_local(dir)?;
        let row = load_inode(conn, dir)?;
        if row.kind != FileType::Directory {
            return Err(FsError::NotDir);
        }
        Ok(row)
    }

    fn entry(conn: &Connection, dir: InodeId, name: &str) -> Result<Option<Dentry>, FsError> {
        query_opt(conn, "SELECT ino, kind FROM dentries WHERE dir = ?1 AND name = ?2", params![dir.0 as i64, name], |r| {
            Ok(Dentry { name: name.to_string(), ino: InodeId(r.get::<_, i64>(0)? as u64), kind: kind_of(r.get(1)?) })
        })
    }

    /// Checks `dir` is a local directory without `name`, inside an open transaction.
    /// The directory's row, once `name` is found free in it.
    fn check_free(&self, conn: &Connection, dir: InodeId, name: &str) -> Result<InodeRow, FsError> {
        check_name(name)?;
        let row = self.load_dir(conn, dir)?;
        match Self::entry(conn, dir, name)? {
            Some(_) => Err(FsError::Exists),
            None => Ok(row),
        }
    }

    /// Adds an entry and moves the directory's times.
    fn add_entry(tx: &Connection, dir: InodeId, name: &str, ino: InodeId, kind: FileType, now: Timespec) -> Result<(), FsError> {
        Self::insert_entry(tx, dir, name, ino, kind)?;
        Self::touch_dir(tx, dir, now)
    }

    /// Adds an entry; a name already there is EEXIST (the primary key refuses it).
    fn insert_entry(tx: &Connection, dir: InodeId, name: &str, ino: InodeId, kind: FileType) -> Result<(), FsError> {
        let inserted = tx
            .prepare_cached("INSERT INTO dentries (dir, name, ino, kind) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut s| s.execute(params![dir.0 as i64, name, ino.0 as i64, kind.code() as i64]));
        match inserted {
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                return Err(FsError::Exists)
            }
            other => other.map_err(io)?,
        };
        Ok(())
    }

    fn touch_dir(tx: &Connection, dir: InodeId, now: Timespec) -> Result<(), FsError> {
        exec(tx, "UPDATE inodes SET mtime_ns = ?2, ctime_ns = ?2 WHERE ino = ?1", params![dir.0 as i64, now.as_nanos()])?;
        Ok(())
    }

    pub fn inode(&self, ino: InodeId) -> Result<InodeRow, FsError> {
        self.check_local(ino)?;
        load_inode(&self.conn, ino)
    }

    pub fn lookup(&self, dir: InodeId, name: &str) -> Result<Dentry, FsError> {
        check_name(name)?;
        self.load_dir(&self.conn, dir)?;
        Self::entry(&self.conn, dir, name)?.ok_or(FsError::NotFound)
    }

    /// Fails unless `dir` could take a new entry `name` now (a pre-check before remote steps);
    /// the directory's row otherwise.
    pub fn check_can_add(&self, dir: InodeId, name: &str) -> Result<InodeRow, FsError> {
        self.check_free(&self.conn, dir, name)
    }

    /// mkdir with the new directory homed here; the new directory copies the parent's default
    /// striping, as `lfs setstripe` directories do.
    pub fn mkdir(&mut self, parent: InodeId, name: &str, new: &NewInode, now: Timespec) -> Result<InodeRow, FsError> {
        let tx = &self.conn;
        let new = crate::access::inherited(&self.check_free(tx, parent, name)?, new, FileType::Directory);
        let ino = self.alloc_inode()?;
        let row = new_row(ino, FileType::Directory, &new, parent, now);
        insert_inode(tx, &row, None)?;
        Self::add_entry(tx, parent, name, ino, FileType::Directory, now)?;
        if let Some(hint) = files::dir_stripe(tx, parent)? {
            files::put_dir_stripe(tx, ino, Some(hint))?;
        }
        Ok(row)
    }

    /// The inode half of a mkdir whose entry lives on another server (`PeerCreateDir`).
    pub fn create_dir_inode(&mut self, parent: InodeId, new: &NewInode, stripe: Option<StripeHint>, now: Timespec) -> Result<InodeRow, FsError> {
        let tx = &self.conn;
        let ino = self.alloc_inode()?;
        let row = new_row(ino, FileType::Directory, new, parent, now);
        insert_inode(tx, &row, None)?;
        files::put_dir_stripe(tx, ino, stripe)?;
        Ok(row)
    }

    /// The entry half of a cross-server mkdir: links an inode homed elsewhere.
    pub fn link_entry(&mut self, dir: InodeId, name: &str, ino: InodeId, kind: FileType, now: Timespec) -> Result<(), FsError> {
        let tx = &self.conn;
        self.check_free(tx, dir, name)?;
        Self::add_entry(tx, dir, name, ino, kind, now)?;
        Ok(())
    }

    /// Removes an entry that names `ino` (the last step of a cross-server rmdir).
    pub fn drop_entry(&mut self, dir: InodeId, name: &str, ino: InodeId, now: Timespec) -> Result<(), FsError> {
        let tx = &self.conn;
        let n = tx
            .execute("DELETE FROM dentries WHERE dir = ?1 AND name = ?2 AND ino = ?3", params![dir.0 as i64, name, ino.0 as i64])
            .map_err(io)?;
        if n == 0 {
            return Err(FsError::NotFound);
        }
        Self::touch_dir(tx, dir, now)?;
        Ok(())
    }

    fn is_empty_dir(conn: &Connection, dir: InodeId) -> Result<bool, FsError> {
        Ok(query_opt(conn, "SELECT 1 FROM dentries WHERE dir = ?1 LIMIT 1", [dir.0 as i64], |_| Ok(()))?.is_none())
    }

    fn delete_dir_inode(tx: &Connection, ino: InodeId) -> Result<(), FsError> {
        if !Self::is_empty_dir(tx, ino)? {
            return Err(FsError::NotEmpty);
        }
        exec(tx, "DELETE FROM inodes WHERE ino = ?1", [ino.0 as i64])?;
        exec(tx, "DELETE FROM dir_stripe WHERE dir = ?1", [ino.0 as i64])?;
        Ok(())
    }

    /// rmdir. `Ok(None)`: done. `Ok(Some(ino))`: the directory's inode is homed on another
    /// server; remove it there (`PeerRemoveDir`), then [`Store::drop_entry`].
    pub fn rmdir(&mut self, parent: InodeId, name: &str, now: Timespec) -> Result<Option<InodeId>, FsError> {
        let tx = &self.conn;
        self.load_dir(tx, parent)?;
        let entry = Self::entry(tx, parent, name)?.ok_or(FsError::NotFound)?;
        if entry.kind != FileType::Directory {
            return Err(FsError::NotDir);
        }
        if entry.ino.server() != self.server {
            return Ok(Some(entry.ino));
        }
        Self::delete_dir_inode(tx, entry.ino)?;
        exec(tx, "DELETE FROM dentries WHERE dir = ?1 AND name = ?2", params![parent.0 as i64, name])?;
        Self::touch_dir(tx, parent, now)?;
        Ok(None)
    }

    /// `PeerRemoveDir`: removes an empty directory inode homed here.
    pub fn remove_dir_inode(&mut self, ino: InodeId) -> Result<(), FsError> {
        let tx = &self.conn;
        if self.load_dir(tx, ino)?.ino == InodeId::ROOT {
            return Err(FsError::Busy);
        }
        Self::delete_dir_inode(tx, ino)?;
        Ok(())
    }

    pub fn symlink(&mut self, parent: InodeId, name: &str, target: &str, new: &NewInode, now: Timespec) -> Result<InodeRow, FsError> {
        if target.is_empty() {
            return Err(FsError::Invalid);
        }
        let tx = &self.conn;
        let new = crate::access::inherited(&self.check_free(tx, parent, name)?, new, FileType::Symlink);
        let ino = self.alloc_inode()?;
        let mut row = new_row(ino, FileType::Symlink, &NewInode { mode: 0o777, ..new }, InodeId(0), now);
        row.symlink = Some(target.to_string());
        insert_inode(tx, &row, None)?;
        Self::add_entry(tx, parent, name, ino, FileType::Symlink, now)?;
        Ok(row)
    }

    pub fn readlink(&self, ino: InodeId) -> Result<String, FsError> {
        let row = self.inode(ino)?;
        row.symlink.ok_or(FsError::Invalid)
    }

    /// Entries of `dir` in name order after `after`, at most `max` (bounded by the page size);
    /// the flag says whether more follow.
    pub fn readdir(&self, dir: InodeId, after: Option<&str>, max: u32) -> Result<(Vec<Dentry>, bool), FsError> {
        self.load_dir(&self.conn, dir)?;
        let max = max.clamp(1, READDIR_ENTRIES_MAX) as i64;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT name, ino, kind FROM dentries WHERE dir = ?1 AND name > ?2 ORDER BY name LIMIT ?3")
            .map_err(io)?;
        let rows = stmt
            .query_map(params![dir.0 as i64, after.unwrap_or(""), max + 1], |r| {
                Ok(Dentry { name: r.get(0)?, ino: InodeId(r.get::<_, i64>(1)? as u64), kind: kind_of(r.get(2)?) })
            })
            .map_err(io)?;
        let mut entries = rows.collect::<Result<Vec<_>, _>>().map_err(io)?;
        let more = entries.len() as i64 > max;
        entries.truncate(max as usize);
        Ok((entries, more))
    }

    /// chmod / chown / utimes by `caller`, already authorized (the caller decides only which
    /// privilege bits survive: `access::mode_after`); ctime always moves.
    pub fn setattr(&mut self, caller: &Caller, ino: InodeId, c: &SetAttrs, now: Timespec) -> Result<InodeRow, FsError> {
        self.setattr_after_writes(caller, ino, c, now, None)
    }

    /// [`Store::setattr`] for a regular file whose data last changed at `data_changed` (on its
    /// OSDs, where this store does not see it): a change that leaves the mtime alone keeps
    /// that later time as the stored mtime, since the new ctime would hide it (`server.rs`,
    /// `with_data`).
    pub fn setattr_after_writes(&mut self, caller: &Caller, ino: InodeId, c: &SetAttrs, now: Timespec, data_changed: Option<Timespec>) -> Result<InodeRow, FsError> {
        let tx = &self.conn;
        self.check_local(ino)?;
        let mut row = load_inode(tx, ino)?;
        if let Some(t) = data_changed {
            row.mtime = row.mtime.max(t);
        }
        row.mode = crate::access::mode_after(caller, &row, row.kind, c) & MODE_MASK;
        row.uid = c.uid.unwrap_or(row.uid);
        row.gid = c.gid.unwrap_or(row.gid);
        let stamp = c.times_to_now.then_some(now);
        row.atime = c.atime.or(stamp).unwrap_or(row.atime);
        row.mtime = c.mtime.or(stamp).unwrap_or(row.mtime);
        row.ctime = now;
        exec(tx, 
            "UPDATE inodes SET mode = ?2, uid = ?3, gid = ?4, atime_ns = ?5, mtime_ns = ?6, ctime_ns = ?7 WHERE ino = ?1",
            params![ino.0 as i64, row.mode, row.uid, row.gid, row.atime.as_nanos(), row.mtime.as_nanos(), row.ctime.as_nanos()],
        )?;
        Ok(row)
    }

    /// Counts of what this server holds.
    pub fn stat_fs(&self) -> Result<StatFs, FsError> {
        let count = |kind: FileType| -> Result<u64, FsError> {
            self.conn.query_row("SELECT COUNT(*) FROM inodes WHERE kind = ?1", [kind.code() as i64], |r| r.get::<_, i64>(0)).map(|n| n as u64).map_err(io)
        };
        let pending: i64 = self.conn.query_row("SELECT COUNT(*) FROM pending_removal", [], |r| r.get(0)).map_err(io)?;
        Ok(StatFs {
            files: count(FileType::Regular)?,
            directories: count(FileType::Directory)?,
            symlinks: count(FileType::Symlink)?,
            pending_removals: pending as u64,
        })
    }
}
