//! `repair`'s check of the namespace's split across servers (`store/split.rs` says what a
//! cut-short cross-server mkdir or rmdir leaves). What it finds is reported; with `remove` it
//! goes: a directory inode that no entry names is removed (it is empty, since no client could
//! ever reach it to fill it), and an entry naming a gone directory is dropped, as the rmdir
//! would have dropped it.

use tessera_mds_proto::{DanglingEntry, FsError, InodeId, Request, Timespec};

use super::{now, Mds};

impl Mds {
    /// Directory inodes homed here, last changed more than `older_than_secs` ago, that no
    /// entry names; and entries here naming a directory its home server no longer has. The
    /// age keeps a mkdir still between its two steps out of the first list.
    pub(super) fn split_faults(&self, remove: bool, older_than_secs: u64) -> Result<(Vec<InodeId>, Vec<DanglingEntry>), FsError> {
        let t = now();
        let before = Timespec { secs: t.secs.saturating_sub(older_than_secs.min(i64::MAX as u64) as i64), nanos: t.nanos };
        let mut unlinked = Vec::new();
        for (ino, parent) in self.ns.read(|s| s.remotely_named_dirs(before))? {
            match self.peer(parent.server(), Request::PeerHasEntry { dir: parent, ino }) {
                Ok(_) => {}
                // No such entry, or its parent is gone too.
                Err(FsError::NotFound | FsError::Stale) => unlinked.push(ino),
                Err(e) => return Err(e),
            }
        }
        let mut dangling = Vec::new();
        for entry in self.ns.read(|s| s.entries_of_remote_dirs())? {
            match self.peer_attr(entry.ino) {
                Ok(_) => {}
                Err(FsError::NotFound | FsError::Stale) => dangling.push(entry),
                Err(e) => return Err(e),
            }
        }
        if !unlinked.is_empty() || !dangling.is_empty() {
            tracing::warn!(unlinked = unlinked.len(), dangling = dangling.len(), remove, "repair found halves of cross-server mkdirs and rmdirs");
        }
        if remove {
            for &ino in &unlinked {
                match self.ns.write(|s| s.remove_dir_inode(ino)) {
                    Ok(()) | Err(FsError::Stale) => {}
                    Err(e) => return Err(e),
                }
            }
            for e in &dangling {
                // An rmdir finishing meanwhile dropped it already.
                match self.ns.write(|s| s.drop_entry(e.dir, &e.name, e.ino, now())) {
                    Ok(()) | Err(FsError::NotFound) => {}
                    Err(err) => return Err(err),
                }
            }
        }
        Ok((unlinked, dangling))
    }

    /// `PeerHasEntry`: `Done` when directory `dir` (homed here) names `ino`, else `NotFound`.
    pub(super) fn has_entry(&self, dir: InodeId, ino: InodeId) -> Result<(), FsError> {
        match self.ns.read(|s| {
            s.check_local(dir)?;
            s.names(dir, ino)
        })? {
            true => Ok(()),
            false => Err(FsError::NotFound),
        }
    }
}
