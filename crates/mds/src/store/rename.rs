//! rename within one server. The rules follow POSIX rename(2): a directory may only replace an
//! empty directory, a non-directory only a non-directory, and a directory may not move below
//! itself. The caller has already refused renames between parents on different servers.

use rusqlite::params;
use tessera_mds_proto::{FileType, FsError, InodeId, ObjectRef, Timespec};

use super::{check_name, exec, files, load_inode, Store};
use crate::server::DEPTH_MAX;

impl Store {
    /// Moves `src_parent/src_name` to `dst_parent/dst_name`. `dst_ancestors` are the
    /// directories from `dst_parent` up to the root (gathered by the caller, possibly from other
    /// servers), used with this server's own rows to refuse moving a directory below itself. Returns the objects of a
    /// replaced regular file, now journaled for removal.
    pub fn rename(
        &mut self,
        src_parent: InodeId,
        src_name: &str,
        dst_parent: InodeId,
        dst_name: &str,
        dst_ancestors: &[InodeId],
        now: Timespec,
    ) -> Result<Vec<ObjectRef>, FsError> {
        check_name(src_name)?;
        check_name(dst_name)?;
        let tx = &self.conn;
        self.load_dir(tx, src_parent)?;
        self.load_dir(tx, dst_parent)?;
        let src = Self::entry(tx, src_parent, src_name)?.ok_or(FsError::NotFound)?;
        let dst = Self::entry(tx, dst_parent, dst_name)?;
        if dst.as_ref().is_some_and(|d| d.ino == src.ino) {
            return Ok(Vec::new()); // same file: POSIX says do nothing
        }
        let is_dir = src.kind == FileType::Directory;
        if is_dir {
            if self.is_above(src.ino, dst_parent, dst_ancestors)? {
                return Err(FsError::Invalid);
            }
            // A directory's parent pointer lives with its inode; moving one homed elsewhere
            // to a new parent would need a two-server transaction.
            if src.ino.server() != self.server && src_parent != dst_parent {
                return Err(FsError::CrossServer);
            }
        }
        let mut replaced = Vec::new();
        if let Some(d) = &dst {
            match (is_dir, d.kind == FileType::Directory) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) if d.ino.server() != self.server => return Err(FsError::CrossServer),
                (true, true) => Self::delete_dir_inode(tx, d.ino)?,
                (false, false) => replaced = files::drop_file(tx, d.ino)?,
            }
            exec(tx, "DELETE FROM dentries WHERE dir = ?1 AND name = ?2", params![dst_parent.0 as i64, dst_name])?;
        }
        exec(tx, "DELETE FROM dentries WHERE dir = ?1 AND name = ?2", params![src_parent.0 as i64, src_name])?;
        Self::add_entry(tx, dst_parent, dst_name, src.ino, src.kind, now)?;
        Self::touch_dir(tx, src_parent, now)?;
        if src.ino.server() == self.server {
            exec(tx, "UPDATE inodes SET ctime_ns = ?2 WHERE ino = ?1", params![src.ino.0 as i64, now.as_nanos()])?;
            if is_dir {
                exec(tx, "UPDATE inodes SET parent = ?2 WHERE ino = ?1", params![src.ino.0 as i64, dst_parent.0 as i64])?;
            }
        }
        Ok(replaced)
    }

    /// Whether directory `dir` is `dst_parent` or one of its ancestors. This server's part of
    /// the chain is read inside the rename's transaction, where every rename before it on this
    /// server shows, so two crossing renames (`a` into `b`, `b` into `a`) cannot both pass.
    /// Another server's directory takes its parent from `gathered`, the chain as the caller
    /// found it; a chain that no longer passes where it was gathered is [`FsError::Busy`], for
    /// the caller to gather again.
    fn is_above(&self, dir: InodeId, dst_parent: InodeId, gathered: &[InodeId]) -> Result<bool, FsError> {
        let mut at = dst_parent;
        for _ in 0..=DEPTH_MAX {
            if at == dir {
                return Ok(true);
            }
            if at == InodeId::ROOT {
                return Ok(false);
            }
            at = if at.server() == self.server {
                load_inode(&self.conn, at)?.parent
            } else {
                match gathered.iter().position(|g| *g == at) {
                    Some(i) => gathered.get(i + 1).copied().unwrap_or(InodeId::ROOT),
                    None => return Err(FsError::Busy),
                }
            };
        }
        Err(FsError::Io)
    }
}
