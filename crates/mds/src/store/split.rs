//! What `repair` checks of the namespace's split across servers. A mkdir or rmdir whose entry
//! and inode live on different servers is two steps on two servers, each durable on its own;
//! a server that stops between them leaves one half: a directory inode that no entry names
//! (mkdir: the inode is made first), or an entry naming a directory inode that is gone
//! (rmdir: the inode goes first).

use rusqlite::params;
use tessera_mds_proto::{DanglingEntry, FileType, FsError, InodeId, Timespec};

use super::{io, query_opt, Store};

impl Store {
    /// Directory inodes homed here whose entry lives on another server (their parent is
    /// homed there), last changed before `before`: those a cut-short mkdir may have left.
    pub fn remotely_named_dirs(&self, before: Timespec) -> Result<Vec<(InodeId, InodeId)>, FsError> {
        let mut stmt = self.conn.prepare_cached("SELECT ino, parent FROM inodes WHERE kind = ?1 AND ctime_ns < ?2").map_err(io)?;
        let rows = stmt
            .query_map(params![FileType::Directory.code() as i64, before.as_nanos()], |r| Ok((InodeId(r.get::<_, i64>(0)? as u64), InodeId(r.get::<_, i64>(1)? as u64))))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(io)?;
        Ok(rows.into_iter().filter(|(_, parent)| parent.server() != self.server).collect())
    }

    /// Whether directory `dir` has an entry naming `ino` (whatever its name).
    pub fn names(&self, dir: InodeId, ino: InodeId) -> Result<bool, FsError> {
        let found = query_opt(&self.conn, "SELECT 1 FROM dentries WHERE dir = ?1 AND ino = ?2 LIMIT 1", params![dir.0 as i64, ino.0 as i64], |_| Ok(()))?;
        Ok(found.is_some())
    }

    /// Entries here naming directories homed on other servers: those a cut-short rmdir may
    /// have left pointing at nothing.
    pub fn entries_of_remote_dirs(&self) -> Result<Vec<DanglingEntry>, FsError> {
        let mut stmt = self.conn.prepare_cached("SELECT dir, name, ino FROM dentries WHERE kind = ?1").map_err(io)?;
        let rows = stmt
            .query_map([FileType::Directory.code() as i64], |r| {
                Ok(DanglingEntry { dir: InodeId(r.get::<_, i64>(0)? as u64), name: r.get(1)?, ino: InodeId(r.get::<_, i64>(2)? as u64) })
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(io)?;
        Ok(rows.into_iter().filter(|e| e.ino.server() != self.server).collect())
    }
}
