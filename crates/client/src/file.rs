//! [`File`]: an open regular file. It holds the layout the metadata server gave at open or
//! create, so reads and writes go straight to the OSDs with no metadata round trip; only
//! `stat` and `set_len` talk to the MDS.
//!
//! End of file (POSIX): the size is one past the highest byte any data object holds. A read
//! of a hole returns zeros; a read that reaches past the size returns short. The client learns
//! the size only when some object reported a read past its end (then it asks every object for
//! its length, in parallel), so a read wholly inside the file costs one command per OSD.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tessera_layout::Extent;
use tessera_mds_proto::{Attr, FileLayout, FsError, InodeId, ObjectCredential, Request, SetAttrs};
use tessera_osd_proto::{AttrId, Attribute, RetrievedAttr};
use tessera_security::clock::now_ms;

use crate::client::Inner;
use crate::command_plan::Mode;
use crate::credentials::{decode_grant, is_capability_refusal, is_missing_object, is_permission_refusal, FileGrant};
use crate::error::ClientError;
use crate::objects;
use crate::striped_io::StripedFile;

/// Fresh grants an operation asks for while the OSDs keep refusing its capability: a file
/// whose mode changes more often than this in a row is being changed continually, and the
/// refusal says so.
const GRANT_REFRESHES: u32 = 8;
/// The wait before the second refresh, doubled before each later one (127 times this in all):
/// long enough for a chmod's revocation to reach the OSDs.
const GRANT_RETRY_WAIT: std::time::Duration = std::time::Duration::from_micros(500);

/// An open regular file. `Send + Sync`: many threads may read and write through one handle.
pub struct File {
    inner: Arc<Inner>,
    path: String,
    ino: InodeId,
    layout: FileLayout,
    write_through: bool,
    /// The capabilities for this file's objects, while it is open.
    grant: Mutex<FileGrant>,
    /// The file had setuid or setgid bits that a write by this client's user takes away
    /// ([`File::writing`]), and none has been written through this handle yet.
    drops_privileges: AtomicBool,
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File").field("path", &self.path).field("ino", &self.ino).field("layout", &self.layout).finish()
    }
}

impl File {
    /// `mode` is the file's mode when it was looked up or made.
    pub(crate) fn new(inner: Arc<Inner>, path: &str, ino: InodeId, mode: u32, layout: FileLayout, grant: &[ObjectCredential]) -> Result<File, ClientError> {
        let credentials = decode_grant(&layout, grant, path)?;
        let grant = Mutex::new(FileGrant::hold(&inner.pool.books(), &layout, credentials));
        let drops_privileges = AtomicBool::new(inner.caller.write_drops_privileges(mode));
        Ok(File { inner, path: path.to_string(), ino, layout, write_through: false, grant, drops_privileges })
    }

    /// Runs `op`, a write of this file's data, as [`File::authorized`] does. Before the first
    /// write through this handle to a file with setuid or setgid bits, the metadata server is
    /// asked to clear them, as a write on Linux clears them: the OSDs that take the write
    /// never see the mode. Other files pay one atomic load.
    pub(crate) fn writing<R>(&self, op: impl FnMut() -> Result<R, ClientError>) -> Result<R, ClientError> {
        if self.drops_privileges.load(Ordering::Acquire) {
            let changes = SetAttrs { drop_privileges: true, ..SetAttrs::default() };
            self.inner.attr_of(self.ino, "write", &self.path, Request::SetAttr { ino: self.ino, changes })?;
            self.drops_privileges.store(false, Ordering::Release);
        }
        self.authorized("write", op)
    }

    /// Runs `op`, an OSD operation on this file's objects, with valid credentials: a grant
    /// near its end is refreshed first, and a capability the OSD refuses (revoked, or its key
    /// rotated out) is refreshed and the operation repeated ([`File::with_fresh_grants`]).
    /// Repeating is safe: every operation here reads, or writes the same bytes to the same
    /// place. A capability still refused after a refresh, for lack of permission bits, becomes
    /// `op`'s EACCES.
    pub(crate) fn authorized<R>(&self, name: &'static str, mut op: impl FnMut() -> Result<R, ClientError>) -> Result<R, ClientError> {
        let (secure, due) = {
            let grant = self.grant.lock().unwrap_or_else(|p| p.into_inner());
            (grant.is_secure(), grant.due(now_ms()))
        };
        if due {
            self.refresh_grant()?;
        }
        match op() {
            Err(e) if is_missing_object(&e) => Err(self.removed_or(name, e)),
            Err(e) if secure && is_capability_refusal(&e) => self.with_fresh_grants(name, e, op),
            result => result,
        }
    }

    /// Refreshes the grant and repeats `op`, the capability of whose last try the OSD refused
    /// (`refusal`), up to [`GRANT_REFRESHES`] times, waiting a little longer before each after
    /// the first. A chmod revokes a file's capabilities by giving each object a new policy
    /// tag, and the grants the metadata server hands out carry the new tag before every OSD
    /// holds it; so a refresh during a chmod gets a grant the OSD still refuses, and a chmod
    /// that lands between a refresh and the repeat revokes the fresh grant too. One refresh
    /// was not enough: reads through one handle during a loop of chmods failed 101 times in
    /// 3,274, and eight refreshes with no wait 2 times in 3,000. A refusal for lack of
    /// permission bits is final: EACCES.
    fn with_fresh_grants<R>(&self, name: &'static str, mut refusal: ClientError, mut op: impl FnMut() -> Result<R, ClientError>) -> Result<R, ClientError> {
        for refresh in 0..GRANT_REFRESHES {
            if refresh > 0 {
                std::thread::sleep(GRANT_RETRY_WAIT * (1 << (refresh - 1)));
            }
            tracing::debug!(path = %self.path, %refusal, "capability refused; asking for a fresh one");
            self.refresh_grant()?;
            match op() {
                Err(e) if is_permission_refusal(&e) => return Err(ClientError::Fs { op: name, path: self.path.clone(), source: FsError::Access }),
                Err(e) if is_capability_refusal(&e) => refusal = e,
                Err(e) if is_missing_object(&e) => return Err(self.removed_or(name, e)),
                result => return result,
            }
        }
        Err(refusal)
    }

    /// An object of this file is missing on its OSD. Tessera removes a file's objects when
    /// its last name goes (there is no deferred removal for open files, as in PVFS), so if the
    /// metadata server no longer has the inode, or gives it another layout, `op` answers
    /// ESTALE; otherwise the object was lost and the OSD's refusal stands.
    fn removed_or(&self, op: &'static str, refusal: ClientError) -> ClientError {
        match self.refresh_grant() {
            Err(e) if matches!(e.fs_error(), Some(FsError::Stale | FsError::NotFound)) => {
                ClientError::Fs { op, path: self.path.clone(), source: FsError::Stale }
            }
            _ => refusal,
        }
    }

    /// Asks the metadata server for fresh credentials (a new GetLayout).
    fn refresh_grant(&self) -> Result<(), ClientError> {
        let (layout, grant) = self.inner.layout(self.ino, "refresh credentials", &self.path)?;
        if layout != self.layout {
            // Layouts never change after create; a different one means the inode was replaced.
            return Err(ClientError::Fs { op: "refresh credentials", path: self.path.clone(), source: FsError::Stale });
        }
        let credentials = decode_grant(&layout, &grant, &self.path)?;
        self.grant.lock().unwrap_or_else(|p| p.into_inner()).renew(credentials);
        Ok(())
    }

    pub fn ino(&self) -> InodeId {
        self.ino
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn layout(&self) -> &FileLayout {
        &self.layout
    }

    /// With `true`, every WRITE carries FUA: it is durable on the OSD before it is acknowledged
    /// (O_DSYNC). Otherwise an acknowledged write survives an OSD daemon crash but not a power
    /// loss until [`File::fsync`].
    pub fn set_write_through(&mut self, on: bool) {
        self.write_through = on;
    }

    pub(crate) fn striped(&self) -> StripedFile<'_> {
        StripedFile { pool: &self.inner.pool, layout: &self.layout, path: &self.path }
    }

    pub(crate) fn write_through(&self) -> bool {
        self.write_through
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns how many lie before end of file.
    /// Bytes of `buf` past that count are zeroed.
    pub fn pread(&self, offset: u64, buf: &mut [u8]) -> Result<usize, ClientError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let extent = [Extent { offset, len: buf.len() as u64 }];
        if !self.authorized("read", || self.striped().read(&extent, buf, Mode::Auto))? {
            // No object ended inside the range, so its last byte is below the size.
            return Ok(buf.len());
        }
        let size = self.size()?;
        Ok(size.saturating_sub(offset).min(buf.len() as u64) as usize)
    }

    /// Writes all of `buf` at `offset` (extending the file if it ends past the size).
    pub fn pwrite(&self, offset: u64, buf: &[u8]) -> Result<usize, ClientError> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.writing(|| self.striped().write(&[Extent { offset, len: buf.len() as u64 }], buf, Mode::Auto, self.write_through))?;
        Ok(buf.len())
    }

    /// Reads a list of file extents into `buf`, which holds them end to end in the order given
    /// (the MPI-IO / lio convention); `buf.len()` must equal their total. Each OSD gets one
    /// command (more only past the transfer cap), described as `mode` allows. Bytes past end
    /// of file read as zeros. [`crate::list_io`] has the forms with many memory regions,
    /// offset vectors, strided and subarray patterns.
    pub fn read_extents(&self, extents: &[Extent], buf: &mut [u8], mode: Mode) -> Result<(), ClientError> {
        self.authorized("read", || self.striped().read(extents, buf, mode)).map(drop)
    }

    /// Writes `buf` (the extents' bytes end to end) to a list of file extents. Overlapping
    /// extents resolve as on a plain file: the later one wins.
    pub fn write_extents(&self, extents: &[Extent], buf: &[u8], mode: Mode) -> Result<(), ClientError> {
        self.writing(|| self.striped().write(extents, buf, mode, self.write_through))
    }

    /// The whole file.
    pub fn read_to_end(&self) -> Result<Vec<u8>, ClientError> {
        let size = self.size()?;
        let len = usize::try_from(size).map_err(|_| ClientError::TooLarge { path: self.path.clone(), size })?;
        let mut buf = vec![0u8; len];
        let n = self.pread(0, &mut buf)?;
        // Another client may have truncated the file since the size was read.
        buf.truncate(n);
        Ok(buf)
    }

    /// The size, from the data objects' logical lengths read directly off the OSDs.
    pub fn size(&self) -> Result<u64, ClientError> {
        self.authorized("stat", || objects::file_size(&self.inner.pool, &self.layout, &self.path))
    }

    /// OSD-2 attributes `ids` of each data object, in slot order.
    pub fn object_attributes(&self, ids: &[AttrId]) -> Result<Vec<Vec<RetrievedAttr>>, ClientError> {
        self.authorized("attr get", || objects::get_attributes(&self.inner.pool, &self.layout, &self.path, ids))
    }

    /// Every attribute of `page` of each data object, in slot order.
    pub fn object_attribute_page(&self, page: u32) -> Result<Vec<Vec<RetrievedAttr>>, ClientError> {
        self.authorized("attr list", || objects::get_attribute_page(&self.inner.pool, &self.layout, &self.path, page))
    }

    /// Sets OSD-2 attributes object by object: `attrs[i]` on the object in slot `i` of the
    /// layout (so one list per object; an empty one leaves its object alone).
    pub fn set_object_attributes_each(&self, attrs: &[Vec<Attribute>]) -> Result<(), ClientError> {
        if attrs.len() != self.layout.objects.len() {
            return Err(ClientError::AttributeLists { path: self.path.clone(), lists: attrs.len(), objects: self.layout.objects.len() });
        }
        self.authorized("attr set", || objects::set_attributes_each(&self.inner.pool, &self.layout, &self.path, attrs))
    }

    /// Sets OSD-2 attributes on every data object.
    pub fn set_object_attributes(&self, attrs: &[Attribute]) -> Result<(), ClientError> {
        self.authorized("attr set", || objects::set_attributes(&self.inner.pool, &self.layout, &self.path, attrs))
    }

    /// Attributes from the metadata server (its size also comes from the objects).
    pub fn stat(&self) -> Result<Attr, ClientError> {
        let attr = self.inner.attr_of(self.ino, "stat", &self.path, Request::GetAttr { ino: self.ino })?;
        self.inner.sized("stat", &self.path, attr)
    }

    /// Sets the size: the MDS sets each object's logical length, so bytes past the new size
    /// are gone and a grown file reads zeros there.
    pub fn set_len(&self, size: u64) -> Result<(), ClientError> {
        self.inner.attr_of(self.ino, "truncate", &self.path, Request::Truncate { ino: self.ino, size }).map(drop)
    }

    /// Alias of [`File::set_len`] under the POSIX name.
    pub fn truncate(&self, size: u64) -> Result<(), ClientError> {
        self.set_len(size)
    }

    /// FLUSH on every data object, in parallel: every write acknowledged before this call is
    /// durable when it returns. Metadata operations are durable at the MDS when answered
    /// (SQLite synchronous=FULL), so nothing else needs flushing.
    pub fn fsync(&self) -> Result<(), ClientError> {
        self.authorized("fsync", || objects::flush_all(&self.inner.pool, &self.layout, &self.path))
    }
}
