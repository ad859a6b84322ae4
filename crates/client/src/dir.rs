//! [`Dir`]: an open directory, for the `*at()` family (openat, fstatat, unlinkat, mkdirat).
//! The directory was resolved once; each call on it is one request to the directory's home
//! server, with no walk from the root. That is what a kernel or FUSE client does with a warm
//! dentry cache, and it stays correct when the directory is renamed meanwhile, because the
//! handle names the inode, not the path.

use std::sync::Arc;

use tessera_mds_proto::{Attr, DirEntry, FileType, FsError, InodeId, Request, SetAttrs, StripeHint};

use crate::client::Inner;
use crate::error::ClientError;
use crate::file::File;
use crate::path::check_name;

/// An open directory. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Dir {
    inner: Arc<Inner>,
    path: String,
    ino: InodeId,
}

impl std::fmt::Debug for Dir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dir").field("path", &self.path).field("ino", &self.ino).finish()
    }
}

impl Dir {
    pub(crate) fn new(inner: Arc<Inner>, path: &str, ino: InodeId) -> Dir {
        Dir { inner, path: path.to_string(), ino }
    }

    pub fn ino(&self) -> InodeId {
        self.ino
    }

    /// The path the directory was opened by (labels errors; the directory may since have moved).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `dir/name` for error messages.
    fn label(&self, name: &str) -> String {
        format!("{}/{name}", self.path.trim_end_matches('/'))
    }

    /// Checks `name` is one component, as [`crate::Client`]'s path calls do.
    fn checked<'n>(&self, op: &'static str, name: &'n str) -> Result<&'n str, ClientError> {
        check_name(op, &self.label(name), name)?;
        Ok(name)
    }

    /// openat(O_CREAT | O_EXCL): creates a regular file in this directory and opens it.
    pub fn create(&self, name: &str, mode: u32, stripe: Option<StripeHint>) -> Result<File, ClientError> {
        let name = self.checked("create", name)?;
        self.inner.create_in(self.ino, name, &self.label(name), mode, stripe)
    }

    /// fstatat(AT_SYMLINK_NOFOLLOW): attributes of the entry `name`; a file's size comes from
    /// its objects.
    pub fn stat(&self, name: &str) -> Result<Attr, ClientError> {
        let name = self.checked("stat", name)?;
        let request = Request::Lookup { parent: self.ino, name: name.to_string() };
        let label = self.label(name);
        self.inner.sized("stat", &label, self.inner.attr_of(self.ino, "stat", &label, request)?)
    }

    /// unlinkat: removes a non-directory entry.
    pub fn unlink(&self, name: &str) -> Result<(), ClientError> {
        let name = self.checked("unlink", name)?;
        let request = Request::Unlink { parent: self.ino, name: name.to_string() };
        self.inner.done(self.ino, "unlink", &self.label(name), request)
    }

    /// mkdirat.
    pub fn mkdir(&self, name: &str, mode: u32) -> Result<Attr, ClientError> {
        let name = self.checked("mkdir", name)?;
        let request = Request::Mkdir { parent: self.ino, name: name.to_string(), new: self.inner.new_inode(mode) };
        self.inner.attr_of(self.ino, "mkdir", &self.label(name), request)
    }

    /// rmdirat (unlinkat with AT_REMOVEDIR): removes the empty directory `name`.
    pub fn rmdir(&self, name: &str) -> Result<(), ClientError> {
        let name = self.checked("rmdir", name)?;
        let request = Request::Rmdir { parent: self.ino, name: name.to_string() };
        self.inner.done(self.ino, "rmdir", &self.label(name), request)
    }

    /// fchmodat / fchownat with AT_SYMLINK_NOFOLLOW: sets attributes of the entry `name`, whose
    /// attributes a listing of this directory gave as `attr`, by its inode, with no lookup (a
    /// recursive chmod or chown of a tree costs one request per entry). A mode change on a
    /// regular file revokes its capabilities, as [`crate::Client::chmod`] does.
    pub fn set_attrs(&self, name: &str, attr: &Attr, changes: SetAttrs) -> Result<Attr, ClientError> {
        let op = if changes.mode.is_some() { "chmod" } else { "chown" };
        let name = self.checked(op, name)?;
        self.inner.set_attrs_of(op, &self.label(name), attr, changes)
    }

    /// One page of entries: at most `max` (the server bounds it too) whose names sort after
    /// `after` (byte order), with attributes; and whether more follow.
    pub fn readdir_page(&self, after: Option<&str>, max: u32) -> Result<(Vec<DirEntry>, bool), ClientError> {
        self.inner.readdir_page_of(self.ino, &self.path, after, max)
    }

    /// Every entry, in name order, with attributes (fdopendir and readdir).
    pub fn readdir(&self) -> Result<Vec<DirEntry>, ClientError> {
        self.inner.readdir_of(self.ino, &self.path)
    }

    /// The subdirectory `name`, opened without a symlink followed (openat with O_DIRECTORY |
    /// O_NOFOLLOW): ENOTDIR for anything else, a symlink included.
    pub fn open_dir(&self, name: &str) -> Result<Dir, ClientError> {
        let name = self.checked("opendir", name)?;
        let label = self.label(name);
        let attr = self.inner.attr_of(self.ino, "opendir", &label, Request::Lookup { parent: self.ino, name: name.to_string() })?;
        self.entered(name, &attr)
    }

    /// The subdirectory that a listing or a mkdir of this directory returned as `name` with
    /// `attr`, with no request: later calls on it fail with ESTALE or ENOENT if it went meanwhile.
    pub fn entered(&self, name: &str, attr: &Attr) -> Result<Dir, ClientError> {
        let label = self.label(name);
        if attr.file_type != FileType::Directory {
            return Err(ClientError::Fs { op: "opendir", path: label, source: FsError::NotDir });
        }
        Ok(Dir::new(self.inner.clone(), &label, attr.ino))
    }
}
