//! The permission check every request passes before it runs, for the [`Caller`] its frame
//! names (`access.rs` has the rules). The superuser's requests skip it, so the benchmarks' and
//! the servers' own paths cost nothing more.
//!
//! The rows are read in a snapshot just before the operation's own step (a create is checked
//! inside its step, `store/files.rs`): an operation that races a chmod of the same directory
//! is ordered before it, as it would be had it arrived a moment sooner.

use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::{Caller, FileType, FsError, InodeId, Request};

use super::Mds;
use crate::access::{self, READ, SEARCH, WRITE};
use crate::store::{InodeRow, Store};

impl Mds {
    /// EACCES or EPERM when `caller` may not make `request`; Ok otherwise, including when
    /// the request will fail for another reason (the operation then answers that).
    pub(super) fn authorize(&self, caller: &Caller, request: &Request) -> Result<(), FsError> {
        if caller.is_root() {
            return Ok(());
        }
        use Request as R;
        match request {
            R::Lookup { parent, .. } => self.ns.read(|s| in_dir(s, caller, *parent, SEARCH).map(drop)),
            R::ReadDir { dir, .. } => self.ns.read(|s| in_dir(s, caller, *dir, READ).map(drop)),
            R::Mkdir { parent, name, new } | R::Symlink { parent, name, new, .. } => self.ns.read(|s| may_add(s, caller, *parent, name, new)),
            // Checked inside its step, against the parent's facts creates keep in memory
            // (`store/files.rs`): a create is the one request whose cost is a goal.
            R::Create { .. } => Ok(()),
            R::Unlink { parent, name } | R::Rmdir { parent, name } => self.may_remove(caller, *parent, name),
            R::Rename { src_parent, src_name, dst_parent, dst_name } => self.may_rename(caller, *src_parent, src_name, *dst_parent, dst_name),
            R::SetAttr { ino, changes } => self.ns.read(|s| access::setattr(caller, &s.inode(*ino)?, changes)),
            R::SetDirStripe { dir, .. } => self.ns.read(|s| access::owns(caller, &s.inode(*dir)?)),
            // Repair removes what it judges orphaned; the Peer requests are the servers' own
            // steps, each checked where it began.
            R::Repair { .. } | R::PeerCreateDir { .. } | R::PeerRemoveDir { .. } | R::PeerRenameLock { .. } | R::PeerHasEntry { .. } => {
                Err(FsError::NotPermitted)
            }
            // A stat or readlink needs only the walk to it (each Lookup searched a directory);
            // an open (GetLayout) is granted what the file's mode allows the caller, and a
            // truncate checks the same in its own read (`Mds::truncate`).
            R::Truncate { .. }
            | R::GetAttr { .. }
            | R::ReadLink { .. }
            | R::GetLayout { .. }
            | R::GetDirStripe { .. }
            | R::StatFs
            | R::ClusterMap
            | R::OsdUsage
            | R::OsdsDown
            | R::PeersDown
            | R::Authenticate { .. }
            | R::Challenge => Ok(()),
        }
    }

    /// Write and search permission on `parent`, and the sticky rule for the entry `name`. A
    /// directory entry may name an inode on another server (a subdirectory), whose owner is
    /// then asked of that server.
    fn may_remove(&self, caller: &Caller, parent: InodeId, name: &str) -> Result<(), FsError> {
        match self.ns.read(|s| removal_here(s, caller, parent, name, self.server_index()))? {
            Removal::Allowed => Ok(()),
            Removal::OwnerElsewhere { dir, ino } => match access::sticky_allows(caller, &dir, self.peer_attr(ino)?.uid) {
                true => Ok(()),
                false => Err(FsError::NotPermitted),
            },
        }
    }

    /// rename(2)'s checks: removing the source's entry and adding the destination's (both
    /// directories are on this server, or the rename answers EXDEV), replacing what the
    /// destination names under its directory's sticky rule, and, for a directory moving to
    /// another parent, write permission on the directory itself (its `..` changes).
    fn may_rename(&self, caller: &Caller, src_parent: InodeId, src_name: &str, dst_parent: InodeId, dst_name: &str) -> Result<(), FsError> {
        if src_parent.server() != dst_parent.server() {
            return Ok(());
        }
        self.may_remove(caller, src_parent, src_name)?;
        let replaces = self.ns.read(|s| {
            in_dir(s, caller, dst_parent, WRITE | SEARCH)?;
            Ok(s.lookup(dst_parent, dst_name).is_ok())
        })?;
        if replaces {
            self.may_remove(caller, dst_parent, dst_name)?;
        }
        if src_parent != dst_parent {
            let moved = self.ns.read(|s| s.lookup(src_parent, src_name))?;
            if moved.kind == FileType::Directory {
                match moved.ino.server() == self.server_index() {
                    true => access::check(caller, &self.ns.read(|s| s.inode(moved.ino))?, WRITE)?,
                    false => access::check(caller, &self.peer_attr(moved.ino)?, WRITE)?,
                }
            }
        }
        Ok(())
    }
}

/// The directory `dir`'s row once `caller` is found to have `want` on it; ENOTDIR before
/// EACCES, as a walk meets them.
/// What this server's store says of removing entry `name` from `parent`.
enum Removal {
    Allowed,
    /// Under the sticky rule, the entry names an inode on another server (a subdirectory),
    /// whose owner only that server knows.
    OwnerElsewhere { dir: InodeRow, ino: InodeId },
}

/// Write and search permission on `parent`, and the sticky rule for the entry `name`, by what
/// this server (`me`) holds; EACCES, EPERM or ENOENT when it can tell.
fn removal_here(s: &Store, caller: &Caller, parent: InodeId, name: &str, me: u32) -> Result<Removal, FsError> {
    let dir = in_dir(s, caller, parent, WRITE | SEARCH)?;
    if !access::sticky_applies(caller, &dir) {
        return Ok(Removal::Allowed);
    }
    let entry = s.lookup(parent, name)?;
    if entry.ino.server() != me {
        return Ok(Removal::OwnerElsewhere { dir, ino: entry.ino });
    }
    match access::sticky_allows(caller, &dir, s.inode(entry.ino)?.uid) {
        true => Ok(Removal::Allowed),
        false => Err(FsError::NotPermitted),
    }
}

/// [`Mds::may_remove`]'s checks for an unlink, made inside the unlink's own step on this
/// server's store (the event loop runs it and must not wait for a snapshot's flush). Ok(false)
/// when they need another server; the unlink then goes to a worker.
pub(super) fn may_unlink_in_step(s: &Store, caller: &Caller, parent: InodeId, name: &str, me: u32) -> Result<bool, FsError> {
    if caller.is_root() {
        return Ok(true);
    }
    Ok(matches!(removal_here(s, caller, parent, name, me)?, Removal::Allowed))
}

fn in_dir(s: &Store, caller: &Caller, dir: InodeId, want: u32) -> Result<InodeRow, FsError> {
    let row = s.inode(dir)?;
    if row.kind != FileType::Directory {
        return Err(FsError::NotDir);
    }
    access::check(caller, &row, want)?;
    Ok(row)
}

/// A new entry `name` in `parent`: write and search permission, and an owner the caller may
/// give it. Without write permission, a name already taken is EEXIST, answered here (the
/// operation does not run): Linux answers that before it asks for write permission (search
/// permission still comes first), so `mkdir -p` goes on through directories that exist but
/// are not the caller's to change.
fn may_add(s: &Store, caller: &Caller, parent: InodeId, name: &str, new: &NewInode) -> Result<(), FsError> {
    match in_dir(s, caller, parent, WRITE | SEARCH) {
        Err(FsError::Access) if in_dir(s, caller, parent, SEARCH).is_ok() && s.lookup(parent, name).is_ok() => Err(FsError::Exists),
        Err(e) => Err(e),
        Ok(_) => access::new_owner(caller, new),
    }
}
