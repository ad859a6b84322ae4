//! [`Client`]: the namespace operations. Each resolves its path by a lookup walk from the
//! root, then sends one request to the server that owns what it touches: entry operations to
//! the parent directory's home server, inode operations to the inode's (both are the high bits
//! of the id). Symbolic links are followed as POSIX resolves pathnames: always on the way,
//! and at the end for the calls that act on what a name points to (`stat`, `open`,
//! `readdir`, `chmod`, ...) but not for those that act on the name (`lstat`, `lookup`,
//! `unlink`, `rename`, `readlink`).

use std::sync::Arc;

use tessera_mds_proto::limits::{NAME_LEN_MAX, SYMLINK_LEN_MAX};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::{Attr, Caller, DirEntry, FileLayout, FileType, FsError, Grant, InodeId, OsdUsage, Reply, Request, SetAttrs, StatFs, StripeHint, Timespec};

use crate::config::ClusterConfig;
use crate::dir::Dir;
use crate::error::{ClientError, DataPlaces, MdsLinkError};
use crate::file::File;
use crate::mds_router::{reply_name, MdsRouter};
use crate::path::{components, names_dir, split_parent, Component};
use crate::pool::OsdPool;
use crate::prover::Prover;

/// Symlinks one walk follows before answering ELOOP (Linux's limit).
const SYMLINKS_FOLLOWED_MAX: usize = 40;

/// Walks a path operation makes when an inode it met goes before its request reaches it (a
/// directory on the path removed, a file replaced by a rename over its name): a path changed
/// under each of this many walks in a row is being rewritten continually, and ESTALE says so.
const PATH_ATTEMPTS: u32 = 8;

/// Entries asked for per READDIR page (the protocol's maximum).
const READDIR_PAGE: u32 = tessera_mds_proto::limits::READDIR_ENTRIES_MAX;

/// Runs `attempt`, a walk of a path and the requests on what the walk found, again while it
/// fails with ESTALE. ESTALE says an inode the walk met is gone, so the request was refused
/// and nothing was done; a new walk answers by what the path names now (ENOENT once it is
/// gone), as Linux walks again after ESTALE, and as a local file system answers a path
/// racing a removal.
fn again_if_stale<T>(mut attempt: impl FnMut() -> Result<T, ClientError>) -> Result<T, ClientError> {
    let mut walks = 1;
    loop {
        match attempt() {
            Err(e) if e.fs_error() == Some(FsError::Stale) && walks < PATH_ATTEMPTS => walks += 1,
            other => return other,
        }
    }
}

/// Striping as `getstripe` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stripe {
    /// A directory's default for new files; `None` when it has none of its own.
    Directory(Option<StripeHint>),
    /// A file's fixed layout.
    File(FileLayout),
}

/// What one metadata server's repair found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairReport {
    pub server: u32,
    /// The orphans (at most `limits::ORPHANS_LISTED_MAX` of them).
    pub orphans: Vec<tessera_mds_proto::ObjectRef>,
    /// How many there were in all.
    pub found: u64,
    /// Directory inodes homed on this server that no entry names (a cross-server mkdir cut
    /// short), at most `limits::FAULTS_LISTED_MAX`.
    pub unlinked: Vec<InodeId>,
    /// Entries on this server naming a directory its home server no longer has (a
    /// cross-server rmdir cut short), at most `limits::FAULTS_LISTED_MAX`.
    pub dangling: Vec<tessera_mds_proto::DanglingEntry>,
    /// Data objects this server's files name that their OSDs do not hold, at most
    /// `limits::FAULTS_LISTED_MAX`.
    pub missing: Vec<tessera_mds_proto::MissingObject>,
}

pub(crate) struct Inner {
    pub mds: MdsRouter,
    pub pool: OsdPool,
    /// The user every metadata request is sent for, and the owner of what this client makes.
    pub caller: Caller,
}

impl Inner {
    /// Sends `request` to the home server of `route` and returns the reply, or the namespace
    /// refusal labelled with `op` and `path`.
    pub fn call(&self, route: InodeId, op: &'static str, path: &str, request: Request) -> Result<Reply, ClientError> {
        match self.mds.call_for(route, path, request)? {
            Ok(reply) => Ok(reply),
            Err(FsError::PeerDown) => Err(self.peer_down(route.server(), op, path)),
            Err(source) => Err(ClientError::Fs { op, path: path.to_string(), source }),
        }
    }

    /// Server `asked` answered `PeerDown`: which peers it found silent, from its own record.
    fn peer_down(&self, asked: u32, op: &'static str, path: &str) -> ClientError {
        let down = match self.mds.call(asked, path, Request::PeersDown) {
            Ok(Ok(Reply::PeersDown(down))) => down.into_iter().map(|i| (i, self.mds.addr(i).to_string())).collect(),
            _ => Vec::new(),
        };
        ClientError::PeerDown { op, path: path.to_string(), asked, asked_addr: self.mds.addr(asked).to_string(), down }
    }

    pub fn unexpected(&self, route: InodeId, request: &'static str, reply: &Reply) -> ClientError {
        ClientError::Mds {
            server: route.server(),
            addr: self.mds.addr(route.server()).to_string(),
            source: MdsLinkError::UnexpectedReply { request, reply: reply_name(reply) },
        }
    }

    pub fn attr_of(&self, route: InodeId, op: &'static str, path: &str, request: Request) -> Result<Attr, ClientError> {
        match self.call(route, op, path, request)? {
            Reply::Attr(a) => Ok(a),
            other => Err(self.unexpected(route, op, &other)),
        }
    }

    pub fn done(&self, route: InodeId, op: &'static str, path: &str, request: Request) -> Result<(), ClientError> {
        match self.call(route, op, path, request)? {
            Reply::Done => Ok(()),
            other => Err(self.unexpected(route, op, &other)),
        }
    }

    /// Walks `path` from the root as lstat(2) does: symlinks met on the way are followed, the
    /// final component is not (unless the path ends in `/`). Every component but the last must
    /// be a directory, and the last too when the path ends in `/`.
    pub fn resolve(&self, op: &'static str, path: &str) -> Result<Attr, ClientError> {
        self.walk(op, path, names_dir(path))
    }

    /// Walks `path` as stat(2) does: a final symlink is followed too.
    pub fn resolve_followed(&self, op: &'static str, path: &str) -> Result<Attr, ClientError> {
        self.walk(op, path, true)
    }

    /// POSIX pathname resolution. A symlink's target is read from its home server and walked
    /// in place of the link: from the root when it is absolute, else from the directory that
    /// holds the link. `..` is the parent of the directory reached, not of the text before
    /// it, as in the kernel.
    fn walk(&self, op: &'static str, path: &str, follow_last: bool) -> Result<Attr, ClientError> {
        let refuse = |source| ClientError::Fs { op, path: path.to_string(), source };
        if path.is_empty() {
            return Err(refuse(FsError::NotFound)); // as POSIX has it for an empty pathname
        }
        let root = || self.attr_of(InodeId::ROOT, op, path, Request::GetAttr { ino: InodeId::ROOT });
        let mut at = root()?;
        // The components still to walk, last first; a followed link's target goes on top.
        let mut pending: Vec<Component> = components(path);
        let mut followed = 0;
        while let Some(step) = pending.pop() {
            if at.file_type != FileType::Directory {
                return Err(refuse(FsError::NotDir));
            }
            let dir = at;
            at = match step {
                Component::Name(name) if name.len() > NAME_LEN_MAX => return Err(refuse(FsError::NameTooLong)),
                Component::Name(name) => self.attr_of(dir.ino, op, path, Request::Lookup { parent: dir.ino, name })?,
                Component::Parent => self.attr_of(dir.parent, op, path, Request::GetAttr { ino: dir.parent })?,
            };
            if at.file_type != FileType::Symlink || (pending.is_empty() && !follow_last) {
                continue;
            }
            followed += 1;
            if followed > SYMLINKS_FOLLOWED_MAX {
                return Err(refuse(FsError::Loop));
            }
            let target = match self.call(at.ino, op, path, Request::ReadLink { ino: at.ino })? {
                Reply::Link(target) => target,
                other => return Err(self.unexpected(at.ino, op, &other)),
            };
            at = if target.starts_with('/') { root()? } else { dir };
            pending.extend(components(&target));
        }
        if names_dir(path) && at.file_type != FileType::Directory {
            return Err(refuse(FsError::NotDir));
        }
        Ok(at)
    }

    /// One SETATTR on inode `attr.ino` (labelled `path`). Under capability security a mode
    /// change on a regular file also revokes its capabilities on every OSD; EIO then can mean
    /// that the mode was recorded but an OSD could not be told, which the inode's attributes
    /// tell apart: that case is [`ClientError::RevocationPending`], naming the file's OSDs.
    pub fn set_attrs_of(&self, op: &'static str, path: &str, attr: &Attr, changes: SetAttrs) -> Result<Attr, ClientError> {
        let set = self.attr_of(attr.ino, op, path, Request::SetAttr { ino: attr.ino, changes });
        match (set, changes.mode) {
            (Err(e), Some(wanted)) if e.fs_error() == Some(FsError::Io) && attr.file_type == FileType::Regular => {
                match self.attr_of(attr.ino, op, path, Request::GetAttr { ino: attr.ino }) {
                    Ok(now) if now.mode & 0o7777 == wanted => {
                        Err(ClientError::RevocationPending { op, path: path.to_string(), places: self.places_of(attr.ino, op, path) })
                    }
                    _ => Err(e),
                }
            }
            (set, _) => set,
        }
    }

    /// `attr` as a stat answers it: a file whose size the metadata server could not learn (an
    /// OSD holding it did not answer) is EIO, as a local file system answers for a file on a
    /// failed disk. Walks, listings, chmod and unlink do without the size.
    pub fn sized(&self, op: &'static str, path: &str, attr: Attr) -> Result<Attr, ClientError> {
        if attr.size_known() {
            return Ok(attr);
        }
        Err(ClientError::SizeUnknown { op, path: path.to_string(), places: self.places_of(attr.ino, op, path) })
    }

    /// For messages: the distinct OSDs (index, portal) holding a file's data, from its
    /// layout, which needs no OSD, and which of them the file's metadata server last found
    /// down, from its own record. Either is empty when it cannot be had.
    pub fn places_of(&self, ino: InodeId, op: &'static str, path: &str) -> DataPlaces {
        let layout = self.layout(ino, op, path).ok().map(|(layout, _)| layout);
        let mut osds: Vec<(u32, String)> = match &layout {
            Some(layout) => layout.objects.iter().map(|o| (o.osd, self.pool.osd_addr(o.osd).unwrap_or("?").to_string())).collect(),
            None => Vec::new(),
        };
        osds.sort();
        osds.dedup();
        let down = match self.call(ino, op, path, Request::OsdsDown) {
            Ok(Reply::OsdsDown(down)) => down,
            _ => Vec::new(),
        };
        // Every OSD answers, so ask each object itself: one its OSD does not hold is lost.
        let lost = match &layout {
            Some(layout) if down.is_empty() => crate::objects::absent(&self.pool, layout, path),
            _ => Vec::new(),
        };
        DataPlaces { osds, down, lost }
    }

    /// The directory that holds `path`'s final name, and that name.
    pub fn parent_of<'p>(&self, op: &'static str, path: &'p str) -> Result<(Attr, &'p str), ClientError> {
        let (parent, name) = split_parent(op, path)?;
        // A refusal on the way names the path asked for, as coreutils do (`mkdir /x/y`: "/x/y:
        // no such file or directory"), not the parent, which reads as if it were being made.
        let dir = self.resolve_followed(op, if parent.is_empty() { "/" } else { parent }).map_err(|e| match e {
            ClientError::Fs { op, source, .. } => ClientError::Fs { op, path: path.to_string(), source },
            other => other,
        })?;
        if dir.file_type != FileType::Directory {
            return Err(ClientError::Fs { op, path: path.to_string(), source: FsError::NotDir });
        }
        Ok((dir, name))
    }

    /// Every entry of directory `ino` (labelled `path` in errors), in name order, page by page.
    pub fn readdir_of(&self, ino: InodeId, path: &str) -> Result<Vec<DirEntry>, ClientError> {
        let mut out: Vec<DirEntry> = Vec::new();
        loop {
            let after = out.last().map(|e| e.name.clone());
            let (entries, more) = self.readdir_page_of(ino, path, after.as_deref(), READDIR_PAGE)?;
            out.extend(entries);
            if !more {
                return Ok(out);
            }
        }
    }

    /// One page of directory `ino`'s entries after the name `after`, checked to keep the
    /// paging contract ([`page_fault`]); and whether more follow.
    pub fn readdir_page_of(&self, ino: InodeId, path: &str, after: Option<&str>, max: u32) -> Result<(Vec<DirEntry>, bool), ClientError> {
        let request = Request::ReadDir { dir: ino, after: after.map(str::to_string), max_entries: max };
        match self.call(ino, "readdir", path, request)? {
            Reply::DirPage { entries, more } => match page_fault(after, &entries, more) {
                Some(why) => Err(ClientError::Mds { server: ino.server(), addr: self.mds.addr(ino.server()).to_string(), source: MdsLinkError::BadPage(why) }),
                None => Ok((entries, more)),
            },
            other => Err(self.unexpected(ino, "readdir", &other)),
        }
    }

    pub fn new_inode(&self, mode: u32) -> NewInode {
        NewInode { mode: mode & 0o7777, uid: self.caller.uid, gid: self.caller.gid }
    }

    /// Creates regular file `name` in directory `dir` and opens it; `path` labels errors.
    pub fn create_in(self: &Arc<Self>, dir: InodeId, name: &str, path: &str, mode: u32, stripe: Option<StripeHint>) -> Result<File, ClientError> {
        let request = Request::Create { parent: dir, name: name.to_string(), new: self.new_inode(mode), stripe };
        match self.call(dir, "create", path, request)? {
            Reply::Created { attr, layout, grant } => File::new(self.clone(), path, attr.ino, attr.mode, layout, &grant),
            other => Err(self.unexpected(dir, "create", &other)),
        }
    }

    /// A file's layout and fresh credentials for its objects (empty without security).
    pub fn layout(&self, ino: InodeId, op: &'static str, path: &str) -> Result<(FileLayout, Grant), ClientError> {
        match self.call(ino, op, path, Request::GetLayout { ino })? {
            Reply::Layout { layout, grant } => Ok((layout, grant)),
            other => Err(self.unexpected(ino, op, &other)),
        }
    }
}

/// What is wrong with a readdir page asked for after the name `after`, if anything: its
/// names must rise strictly past `after` (byte order, the store's), and a page that says more
/// follow must hold some, or the next request would ask for the same page again.
fn page_fault(after: Option<&str>, entries: &[DirEntry], more: bool) -> Option<String> {
    let mut last = after;
    for e in entries {
        if let Some(l) = last.filter(|l| e.name.as_str() <= *l) {
            return Some(format!("puts {:?} after {l:?}", e.name));
        }
        last = Some(&e.name);
    }
    (more && entries.is_empty()).then(|| "is empty yet says more entries follow".to_string())
}

/// A connection to one Tessera cluster. Cheap to clone; every clone and every [`File`] shares
/// the metadata connections and the OSD sessions. All methods may be called from many threads.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Checks the configuration and that the root is reachable. OSD sessions log in on first
    /// use, so a client that only lists directories never opens one.
    ///
    /// The client acts for this process's user (its effective uid, gid and groups): the
    /// metadata servers check directory and file modes against it, and what it makes is owned
    /// by it, as on a local file system.
    pub fn connect(config: &ClusterConfig) -> Result<Client, ClientError> {
        Self::connect_for(config, Caller::of_process())
    }

    /// Like [`Client::connect`], acting for user `uid` with group `gid` and no other group.
    pub fn connect_as(config: &ClusterConfig, uid: u32, gid: u32) -> Result<Client, ClientError> {
        Self::connect_for(config, Caller::user(uid, gid))
    }

    /// Like [`Client::connect`], acting for `caller`. Where the cluster's servers ask for
    /// proof of users, only a process that can read the user key may act for another user
    /// than its own; elsewhere the servers believe the ids a client sends, as NFS servers
    /// believe AUTH_SYS (docs/security.md, "Users").
    pub fn connect_for(config: &ClusterConfig, caller: Caller) -> Result<Client, ClientError> {
        config.validate()?;
        let (prover, caller) = Prover::new(config, caller)?;
        let inner = Inner { mds: MdsRouter::new(&config.mds, prover), pool: OsdPool::new(config)?, caller };
        inner.resolve("connect", "/")?;
        Ok(Client { inner: Arc::new(inner) })
    }

    /// The user this client acts for.
    pub fn caller(&self) -> &Caller {
        &self.inner.caller
    }

    /// How the metadata servers know [`Client::caller`], in words.
    pub fn caller_proof(&self) -> String {
        self.inner.mds.prover().describe()
    }

    /// Requests this client has sent to the metadata servers: what a walk of the namespace
    /// costs, for tests and benchmarks.
    pub fn mds_requests(&self) -> u64 {
        self.inner.mds.sent()
    }

    /// Attributes of what `path` names, a final symlink followed, as stat(2); a file's size
    /// comes from its objects (EIO when one of its OSDs does not answer).
    pub fn stat(&self, path: &str) -> Result<Attr, ClientError> {
        again_if_stale(|| self.inner.sized("stat", path, self.inner.resolve_followed("stat", path)?))
    }

    /// Attributes of `path` itself, a final symlink not followed, as lstat(2).
    pub fn lstat(&self, path: &str) -> Result<Attr, ClientError> {
        again_if_stale(|| self.inner.sized("lstat", path, self.inner.resolve("lstat", path)?))
    }

    /// Attributes of `path` itself (a final symlink not followed, as lstat) as the namespace
    /// holds them, without insisting on the size: when
    /// an OSD holding the file does not answer, `size_known()` is false instead of the call
    /// failing. For callers that need the type, inode or mode only (rm, mv, `ls -l` printing
    /// `?`), so a file on a down OSD can still be listed, removed or replaced.
    pub fn lookup(&self, path: &str) -> Result<Attr, ClientError> {
        again_if_stale(|| self.inner.resolve("lookup", path))
    }

    /// As [`Client::lookup`], a final symlink followed: the type and mode of what `path`
    /// names, for a caller deciding whether to act inside a directory (`put`, `mv`, `ln`).
    pub fn lookup_followed(&self, path: &str) -> Result<Attr, ClientError> {
        again_if_stale(|| self.inner.resolve_followed("lookup", path))
    }

    pub fn mkdir(&self, path: &str, mode: u32) -> Result<Attr, ClientError> {
        self.mkdir_as(path, self.inner.new_inode(mode))
    }

    /// [`Client::mkdir`] owned by `uid`:`gid` from the start, in the one request (`tessera mv`
    /// remakes a directory on another metadata server with its owner).
    pub fn mkdir_owned(&self, path: &str, mode: u32, uid: u32, gid: u32) -> Result<Attr, ClientError> {
        self.mkdir_as(path, NewInode { mode: mode & 0o7777, uid, gid })
    }

    fn mkdir_as(&self, path: &str, new: NewInode) -> Result<Attr, ClientError> {
        if !path.is_empty() && crate::path::normalized(path).is_empty() {
            // The root (or a path that comes back to it) exists, as mkdir(2) answers.
            return Err(ClientError::Fs { op: "mkdir", path: path.to_string(), source: FsError::Exists });
        }
        if matches!(path.trim_end_matches('/').rsplit('/').next(), Some(".") | Some("..")) {
            // A directory's `.` and `..` always exist: EEXIST once the path leads somewhere.
            self.inner.resolve_followed("mkdir", path)?;
            return Err(ClientError::Fs { op: "mkdir", path: path.to_string(), source: FsError::Exists });
        }
        again_if_stale(|| {
            let (dir, name) = self.inner.parent_of("mkdir", path)?;
            let request = Request::Mkdir { parent: dir.ino, name: name.to_string(), new };
            self.inner.attr_of(dir.ino, "mkdir", path, request)
        })
    }

    pub fn rmdir(&self, path: &str) -> Result<(), ClientError> {
        again_if_stale(|| {
            let (dir, name) = self.inner.parent_of("rmdir", path)?;
            self.inner.done(dir.ino, "rmdir", path, Request::Rmdir { parent: dir.ino, name: name.to_string() })
        })
    }

    /// Creates a regular file (EEXIST if the name is taken) and opens it. `stripe` overrides
    /// the directory's default striping; its objects exist on the OSDs when this returns.
    pub fn create(&self, path: &str, mode: u32, stripe: Option<StripeHint>) -> Result<File, ClientError> {
        if names_dir(path) {
            return Err(ClientError::Fs { op: "create", path: path.to_string(), source: FsError::IsDir });
        }
        if let Some(h) = &stripe {
            check_stripe(path, h, self.inner.pool.osd_count())?;
        }
        again_if_stale(|| {
            let (dir, name) = self.inner.parent_of("create", path)?;
            self.inner.create_in(dir.ino, name, path, mode, stripe)
        })
    }

    /// Opens a directory for the `*at()` calls of [`Dir`]: one walk now, none per call.
    pub fn open_dir(&self, path: &str) -> Result<Dir, ClientError> {
        let attr = again_if_stale(|| self.inner.resolve_followed("opendir", path))?;
        if attr.file_type != FileType::Directory {
            return Err(ClientError::Fs { op: "opendir", path: path.to_string(), source: FsError::NotDir });
        }
        Ok(Dir::new(self.inner.clone(), path, attr.ino))
    }

    /// Opens an existing regular file: one lookup walk and one GetLayout; I/O then goes to the
    /// OSDs only.
    ///
    /// The inode found may be gone by the time its layout is asked for, when another client
    /// renames a new file over the name meanwhile (as `put` replaces a file). The name is then
    /// looked up again ([`again_if_stale`]), so an open of a name that always exists never
    /// fails for that.
    pub fn open(&self, path: &str) -> Result<File, ClientError> {
        let refuse = |source| ClientError::Fs { op: "open", path: path.to_string(), source };
        again_if_stale(|| {
            let attr = self.inner.resolve_followed("open", path)?;
            match attr.file_type {
                FileType::Regular => {}
                FileType::Directory => return Err(refuse(FsError::IsDir)),
                FileType::Symlink => return Err(refuse(FsError::Loop)),
            }
            match self.inner.layout(attr.ino, "open", path) {
                // The inode the walk found is gone: the name may have another by now.
                Err(e) if e.fs_error() == Some(FsError::NotFound) => Err(refuse(FsError::Stale)),
                Err(e) => Err(e),
                Ok((layout, grant)) => File::new(self.inner.clone(), path, attr.ino, attr.mode, layout, &grant),
            }
        })
    }

    pub fn unlink(&self, path: &str) -> Result<(), ClientError> {
        if names_dir(path) {
            // Only a directory can end in `/`, and unlink does not remove directories.
            self.inner.resolve("unlink", path)?;
            return Err(ClientError::Fs { op: "unlink", path: path.to_string(), source: FsError::IsDir });
        }
        again_if_stale(|| {
            let (dir, name) = self.inner.parent_of("unlink", path)?;
            self.inner.done(dir.ino, "unlink", path, Request::Unlink { parent: dir.ino, name: name.to_string() })
        })
    }

    /// Renames `from` to `to`, replacing a file at `to`. Between directories homed on different
    /// metadata servers the answer is EXDEV (copy and delete instead, as `mv` does).
    pub fn rename(&self, from: &str, to: &str) -> Result<(), ClientError> {
        if (names_dir(from) || names_dir(to)) && self.inner.resolve("rename", from)?.file_type != FileType::Directory {
            // A trailing `/` on either side is only allowed when a directory is moved.
            return Err(ClientError::Fs { op: "rename", path: from.to_string(), source: FsError::NotDir });
        }
        again_if_stale(|| {
            let (src, src_name) = self.inner.parent_of("rename", from)?;
            let (dst, dst_name) = self.inner.parent_of("rename", to)?;
            let request =
                Request::Rename { src_parent: src.ino, src_name: src_name.to_string(), dst_parent: dst.ino, dst_name: dst_name.to_string() };
            self.inner.done(src.ino, "rename", from, request)
        })
    }

    /// Makes `link` a symbolic link holding `target` (not checked to exist).
    pub fn symlink(&self, target: &str, link: &str) -> Result<Attr, ClientError> {
        let refuse = |source| ClientError::Fs { op: "symlink", path: link.to_string(), source };
        match target.len() {
            0 => return Err(refuse(FsError::NotFound)), // as Linux answers an empty target
            n if n > SYMLINK_LEN_MAX => return Err(refuse(FsError::NameTooLong)),
            _ if names_dir(link) => return Err(refuse(FsError::NotFound)), // as Linux: a link is not a directory
            _ => {}
        }
        again_if_stale(|| {
            let (dir, name) = self.inner.parent_of("symlink", link)?;
            let request =
                Request::Symlink { parent: dir.ino, name: name.to_string(), target: target.to_string(), new: self.inner.new_inode(0o777) };
            self.inner.attr_of(dir.ino, "symlink", link, request)
        })
    }

    pub fn readlink(&self, path: &str) -> Result<String, ClientError> {
        again_if_stale(|| {
            let attr = self.inner.resolve("readlink", path)?;
            match self.inner.call(attr.ino, "readlink", path, Request::ReadLink { ino: attr.ino })? {
                Reply::Link(target) => Ok(target),
                other => Err(self.inner.unexpected(attr.ino, "readlink", &other)),
            }
        })
    }

    /// Every entry of a directory in name order, with attributes (pages of up to 1024). A
    /// file one of whose OSDs did not answer is listed with size [`Attr::SIZE_UNKNOWN`].
    pub fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, ClientError> {
        again_if_stale(|| {
            let dir = self.inner.resolve_followed("readdir", path)?;
            self.inner.readdir_of(dir.ino, path)
        })
    }

    /// Sets the permission bits.
    pub fn chmod(&self, path: &str, mode: u32) -> Result<Attr, ClientError> {
        self.chmod_with(path, |_| mode)
    }

    /// chmod to the bits `mode` computes from the current attributes (a symbolic mode such as
    /// `u+x`). The size is not needed, so this works on a file whose OSD is down. Not atomic:
    /// a change between the lookup and the set is overwritten, as with chmod(1).
    ///
    /// On a regular file under capability security, EIO can mean that the mode was recorded but
    /// an OSD could not be told to revoke the old capabilities; that case is
    /// [`ClientError::RevocationPending`], which names the file's OSDs.
    pub fn chmod_with(&self, path: &str, mode: impl Fn(&Attr) -> u32) -> Result<Attr, ClientError> {
        again_if_stale(|| self.chmod_once(path, &mode))
    }

    fn chmod_once(&self, path: &str, mode: &impl Fn(&Attr) -> u32) -> Result<Attr, ClientError> {
        let attr = self.inner.resolve_followed("chmod", path)?;
        let changes = SetAttrs { mode: Some(mode(&attr) & 0o7777), ..SetAttrs::default() };
        self.inner.set_attrs_of("chmod", path, &attr, changes)
    }

    /// Sets the owner and group (`None` leaves one as it is), as chown(2). The metadata server
    /// trusts the client's word on ids (docs/metadata.md); capabilities follow the mode only.
    pub fn chown(&self, path: &str, uid: Option<u32>, gid: Option<u32>) -> Result<Attr, ClientError> {
        self.set_attrs("chown", path, SetAttrs { uid, gid, ..SetAttrs::default() })
    }

    /// Sets the access and modification times (`None` leaves one as it is), as utimes(2).
    pub fn set_times(&self, path: &str, atime: Option<Timespec>, mtime: Option<Timespec>) -> Result<Attr, ClientError> {
        if [atime, mtime].iter().flatten().any(|t| t.nanos >= 1_000_000_000) {
            return Err(ClientError::Fs { op: "utimes", path: path.to_string(), source: FsError::Invalid });
        }
        self.set_attrs("utimes", path, SetAttrs { atime, mtime, ..SetAttrs::default() })
    }

    /// Sets the access and modification times to the metadata server's clock, as utimensat(2)
    /// with UTIME_NOW, which `touch` uses: the owner may, and so may anyone with write
    /// permission (setting a time of one's choosing needs ownership).
    pub fn set_times_to_now(&self, path: &str) -> Result<Attr, ClientError> {
        self.set_attrs("utimes", path, SetAttrs { times_to_now: true, ..SetAttrs::default() })
    }

    /// One SETATTR on what `path` names, a final symlink followed.
    fn set_attrs(&self, op: &'static str, path: &str, changes: SetAttrs) -> Result<Attr, ClientError> {
        again_if_stale(|| {
            let attr = self.inner.resolve_followed(op, path)?;
            self.inner.attr_of(attr.ino, op, path, Request::SetAttr { ino: attr.ino, changes })
        })
    }

    /// Sets the size of the file at `path` (shrinking, or growing with a hole).
    pub fn truncate(&self, path: &str, size: u64) -> Result<Attr, ClientError> {
        again_if_stale(|| {
            let attr = self.inner.resolve_followed("truncate", path)?;
            self.inner.attr_of(attr.ino, "truncate", path, Request::Truncate { ino: attr.ino, size })
        })
    }

    /// Refuses, with the reason, a striping no file of this cluster could have (checked before
    /// anything is sent, as `create` and `setstripe` do).
    pub fn check_stripe(&self, path: &str, hint: &StripeHint) -> Result<(), ClientError> {
        check_stripe(path, hint, self.inner.pool.osd_count())
    }

    /// `lfs setstripe`: on a directory, sets (or with `None` clears) the default striping of
    /// files later created in it; on a path that does not exist, creates an empty file with
    /// that striping. An existing file's layout is fixed: EEXIST.
    pub fn setstripe(&self, path: &str, hint: Option<StripeHint>) -> Result<(), ClientError> {
        if let Some(h) = &hint {
            check_stripe(path, h, self.inner.pool.osd_count())?;
        }
        again_if_stale(|| match self.inner.resolve_followed("setstripe", path) {
            Ok(attr) if attr.file_type == FileType::Directory => {
                self.inner.done(attr.ino, "setstripe", path, Request::SetDirStripe { dir: attr.ino, hint })
            }
            Ok(_) => Err(ClientError::Fs { op: "setstripe", path: path.to_string(), source: FsError::Exists }),
            Err(e) if e.fs_error() == Some(FsError::NotFound) && hint.is_some() => self.create(path, 0o644, hint).map(drop),
            Err(e) => Err(e),
        })
    }

    /// `lfs getstripe`: a directory's default or a file's layout.
    pub fn getstripe(&self, path: &str) -> Result<Stripe, ClientError> {
        again_if_stale(|| {
            let attr = self.inner.resolve_followed("getstripe", path)?;
            match attr.file_type {
                FileType::Directory => match self.inner.call(attr.ino, "getstripe", path, Request::GetDirStripe { dir: attr.ino })? {
                    Reply::DirStripe(h) => Ok(Stripe::Directory(h)),
                    other => Err(self.inner.unexpected(attr.ino, "getstripe", &other)),
                },
                FileType::Regular => Ok(Stripe::File(self.inner.layout(attr.ino, "getstripe", path)?.0)),
                FileType::Symlink => Err(ClientError::Fs { op: "getstripe", path: path.to_string(), source: FsError::Invalid }),
            }
        })
    }

    /// Inode counts summed over every metadata server.
    pub fn statfs(&self) -> Result<StatFs, ClientError> {
        let mut total = StatFs::default();
        for server in 0..self.inner.mds.server_count() {
            match self.inner.mds.call(server, "/", Request::StatFs)? {
                Ok(Reply::StatFs(s)) => {
                    total.files += s.files;
                    total.directories += s.directories;
                    total.symlinks += s.symlinks;
                    total.pending_removals += s.pending_removals;
                }
                Ok(other) => return Err(self.inner.unexpected(InodeId::new(server, 1), "statfs", &other)),
                Err(source) => return Err(ClientError::Fs { op: "statfs", path: "/".into(), source }),
            }
        }
        Ok(total)
    }

    /// Asks every metadata server for the objects in its id range on the OSDs that no file,
    /// precreated range or removal journal accounts for (orphans, e.g. after a store was
    /// restored from an old backup), and for what cross-server mkdirs and rmdirs cut short
    /// left (directory inodes last changed more than `older_than_secs` ago that no entry
    /// names, entries naming a gone directory); with `remove`, each server also removes them.
    /// One report per server, in server order.
    pub fn repair(&self, remove: bool, older_than_secs: u64) -> Result<Vec<RepairReport>, ClientError> {
        (0..self.inner.mds.server_count())
            .map(|server| match self.inner.mds.call(server, "/", Request::Repair { remove, older_than_secs })? {
                Ok(Reply::Repair { orphans, found, unlinked, dangling, missing }) => Ok(RepairReport { server, orphans, found, unlinked, dangling, missing }),
                Ok(other) => Err(self.inner.unexpected(InodeId::new(server, 1), "repair", &other)),
                Err(source) => Err(ClientError::Fs { op: "repair", path: "/".into(), source }),
            })
            .collect()
    }

    /// Capacity and use of every OSD, in cluster-map order. Metadata server 0 reads them (under
    /// capability security a client holds no capability for an OSD's root object).
    pub fn osd_usage(&self) -> Result<Vec<OsdUsage>, ClientError> {
        match self.inner.mds.call(0, "/", Request::OsdUsage)? {
            Ok(Reply::OsdUsage(u)) => Ok(u),
            Ok(other) => Err(self.inner.unexpected(InodeId::ROOT, "df", &other)),
            Err(source) => Err(ClientError::Fs { op: "df", path: "/".into(), source }),
        }
    }
}

/// Refuses, with the reason, a striping no file of this cluster could have: the metadata
/// server would answer only EINVAL.
fn check_stripe(path: &str, h: &StripeHint, osds: usize) -> Result<(), ClientError> {
    let refuse = |reason: String| Err(ClientError::Stripe { path: path.to_string(), reason });
    if h.stripe_unit == 0 || h.stripe_unit > tessera_layout::STRIPE_UNIT_MAX {
        return refuse(format!("stripe size {} bytes is outside 1 byte to {} MiB", h.stripe_unit, tessera_layout::STRIPE_UNIT_MAX >> 20));
    }
    if h.stripe_count as usize > osds {
        return refuse(format!("stripe count {} is more than the cluster's {osds} OSDs (0 stripes over all of them)", h.stripe_count));
    }
    if let Some(i) = h.start_osd.filter(|&i| i as usize >= osds) {
        return refuse(format!("stripe index {i} names no OSD: the cluster's OSDs are 0 to {}", osds.saturating_sub(1)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(names: &[&str]) -> Vec<DirEntry> {
        names.iter().map(|n| DirEntry { name: n.to_string(), attr: Attr::unknown(InodeId(2), FileType::Regular) }).collect()
    }

    #[test]
    fn a_readdir_page_must_move_past_its_cursor_in_rising_order() {
        assert_eq!(page_fault(None, &page(&["a", "b"]), true), None);
        assert_eq!(page_fault(Some("b"), &page(&["c", "é"]), false), None, "byte order: é sorts after ASCII");
        assert_eq!(page_fault(Some("b"), &page(&[]), false), None, "the end");
        assert_eq!(page_fault(Some("b"), &page(&["b", "c"]), true).as_deref(), Some(r#"puts "b" after "b""#), "a repeat");
        assert_eq!(page_fault(Some("b"), &page(&["a"]), true).as_deref(), Some(r#"puts "a" after "b""#), "a step back");
        assert_eq!(page_fault(None, &page(&["c", "a"]), false).as_deref(), Some(r#"puts "a" after "c""#), "out of order within a page");
        assert_eq!(page_fault(Some("b"), &page(&[]), true).as_deref(), Some("is empty yet says more entries follow"));
    }
}
