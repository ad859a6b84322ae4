//! The values messages carry, each with its encoder and decoder.
//!
//! Inode ids name their home metadata server: bits 58..64 hold the server index, bits 0..58 a
//! per-server sequence. Any client or server can route a request from the id alone, and two
//! servers never hand out the same id without coordinating.
//!
//! `Attr` on the wire (77 bytes, [`crate::limits::ATTR_WIRE_LEN`]):
//! ```text
//! 0   ino (8)        8  file type (1)   9  mode (4)   13 uid (4)   17 gid (4)   21 nlink (4)
//! 25  size (8)       33 atime (12)      45 mtime (12) 57 ctime (12)            69 parent (8)
//! ```
//! A time is seconds (i64) then nanoseconds (u32).

use tessera_layout::{StripeLayout, STRIPE_COUNT_MAX};

use crate::error::DecodeError;
use crate::limits::{ADDR_LEN_MAX, ATTR_WIRE_LEN, NAME_LEN_MAX, OSDS_MAX, SERVERS_MAX};
use crate::wire::{Reader, Writer};

/// Bits of an inode id that hold the per-server sequence.
pub const INODE_LOCAL_BITS: u32 = 58;
const _: () = assert!(1u64 << (64 - INODE_LOCAL_BITS) == SERVERS_MAX as u64);

/// An inode id: home server index in the top 6 bits, per-server sequence below.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InodeId(pub u64);

impl InodeId {
    /// The root directory: server 0, sequence 1 (0 is never an inode, so it can mean "none").
    pub const ROOT: InodeId = InodeId(1);
    pub const LOCAL_MAX: u64 = (1 << INODE_LOCAL_BITS) - 1;

    pub fn new(server: u32, local: u64) -> InodeId {
        assert!(server < SERVERS_MAX && local <= Self::LOCAL_MAX, "inode id ({server}, {local}) out of range");
        InodeId(((server as u64) << INODE_LOCAL_BITS) | local)
    }

    /// Index of the metadata server that owns this inode.
    pub fn server(self) -> u32 {
        (self.0 >> INODE_LOCAL_BITS) as u32
    }

    pub fn local(self) -> u64 {
        self.0 & Self::LOCAL_MAX
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    Regular = 1,
    Directory = 2,
    Symlink = 3,
}

impl FileType {
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<FileType> {
        match code {
            1 => Some(FileType::Regular),
            2 => Some(FileType::Directory),
            3 => Some(FileType::Symlink),
            _ => None,
        }
    }

    fn decode(r: &mut Reader) -> Result<FileType, DecodeError> {
        let at = r.position();
        let code = r.u8()?;
        FileType::from_code(code).ok_or(DecodeError::UnknownTag { what: "file type", value: code as u32, at })
    }
}

/// A time since the Unix epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    pub secs: i64,
    pub nanos: u32,
}

impl Timespec {
    pub fn encode(&self, w: &mut Writer) {
        w.i64(self.secs);
        w.u32(self.nanos);
    }

    pub fn decode(r: &mut Reader) -> Result<Timespec, DecodeError> {
        let secs = r.i64()?;
        let at = r.position();
        let nanos = r.u32()?;
        if nanos >= 1_000_000_000 {
            return Err(DecodeError::Invalid { what: "nanoseconds", at });
        }
        Ok(Timespec { secs, nanos })
    }

    /// Nanoseconds since the epoch, the form the MDS stores.
    pub fn as_nanos(&self) -> i64 {
        self.secs.saturating_mul(1_000_000_000).saturating_add(self.nanos as i64)
    }

    pub fn from_nanos(ns: i64) -> Timespec {
        Timespec { secs: ns.div_euclid(1_000_000_000), nanos: ns.rem_euclid(1_000_000_000) as u32 }
    }
}

/// The attributes `stat` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: InodeId,
    pub file_type: FileType,
    /// Permission bits (0o7777); the type is `file_type`.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    /// Regular files: from the data objects' logical lengths, or [`Attr::SIZE_UNKNOWN`] when
    /// an OSD holding one did not answer. Symlinks: target length. Directories: 0.
    pub size: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    /// Directories: the parent directory (the root is its own parent). Others: 0.
    pub parent: InodeId,
}

impl Attr {
    /// The size of a regular file one of whose OSDs did not answer: the metadata server still
    /// names the file (a lookup, a listing) so that what does not need the size goes on. No
    /// file can be this long (the size is one past the last byte).
    pub const SIZE_UNKNOWN: u64 = u64::MAX;

    pub fn size_known(&self) -> bool {
        self.size != Self::SIZE_UNKNOWN
    }

    /// A listed entry whose inode lives on a metadata server that did not answer: the listing
    /// still names it, with its type (kept with the name) and nothing else. Every inode that
    /// has a name has a link count of at least 1, so a count of 0 marks these.
    pub fn unknown(ino: InodeId, file_type: FileType) -> Attr {
        let never = Timespec { secs: 0, nanos: 0 };
        Attr { ino, file_type, mode: 0, uid: 0, gid: 0, nlink: 0, size: Self::SIZE_UNKNOWN, atime: never, mtime: never, ctime: never, parent: InodeId(0) }
    }

    /// False for [`Attr::unknown`]'s entries.
    pub fn known(&self) -> bool {
        self.nlink != 0
    }

    pub fn encode(&self, w: &mut Writer) {
        let start = w.buf.len();
        w.u64(self.ino.0);
        w.u8(self.file_type.code());
        for v in [self.mode, self.uid, self.gid, self.nlink] {
            w.u32(v);
        }
        w.u64(self.size);
        for t in [self.atime, self.mtime, self.ctime] {
            t.encode(w);
        }
        w.u64(self.parent.0);
        debug_assert_eq!(w.buf.len() - start, ATTR_WIRE_LEN);
    }

    pub fn decode(r: &mut Reader) -> Result<Attr, DecodeError> {
        Ok(Attr {
            ino: InodeId(r.u64()?),
            file_type: FileType::decode(r)?,
            mode: r.u32()?,
            uid: r.u32()?,
            gid: r.u32()?,
            nlink: r.u32()?,
            size: r.u64()?,
            atime: Timespec::decode(r)?,
            mtime: Timespec::decode(r)?,
            ctime: Timespec::decode(r)?,
            parent: InodeId(r.u64()?),
        })
    }
}

/// chmod / chown / utimes in one message: only the `Some` fields change, and the two flags
/// ask for what a caller without ownership may still do to a file it can write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttrs {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub atime: Option<Timespec>,
    pub mtime: Option<Timespec>,
    /// Both times become the server's clock, as utimensat(2) with UTIME_NOW (what `touch`
    /// does): allowed to the owner and to anyone with write permission. Exclusive with
    /// `atime` and `mtime`.
    pub times_to_now: bool,
    /// Clear the set-user-ID bit, and the set-group-ID bit where group execute is set, as a
    /// write by anyone but the superuser does on Linux; the client sends it before its first
    /// write to such a file, since writes go to the OSDs. Allowed to anyone with write
    /// permission.
    pub drop_privileges: bool,
}

/// Bits of the flags byte that ends an encoded [`SetAttrs`].
const TIMES_TO_NOW: u8 = 1;
const DROP_PRIVILEGES: u8 = 2;

impl SetAttrs {
    pub fn encode(&self, w: &mut Writer) {
        for v in [self.mode, self.uid, self.gid] {
            w.option(&v, |w, v| w.u32(*v));
        }
        for t in [self.atime, self.mtime] {
            w.option(&t, |w, t| t.encode(w));
        }
        w.u8(if self.times_to_now { TIMES_TO_NOW } else { 0 } | if self.drop_privileges { DROP_PRIVILEGES } else { 0 });
    }

    pub fn decode(r: &mut Reader) -> Result<SetAttrs, DecodeError> {
        let mut changes = SetAttrs {
            mode: r.option(|r| r.u32())?,
            uid: r.option(|r| r.u32())?,
            gid: r.option(|r| r.u32())?,
            atime: r.option(Timespec::decode)?,
            mtime: r.option(Timespec::decode)?,
            ..SetAttrs::default()
        };
        let at = r.position();
        let flags = r.u8()?;
        if flags & !(TIMES_TO_NOW | DROP_PRIVILEGES) != 0 {
            return Err(DecodeError::UnknownTag { what: "setattr flag", value: flags as u32, at });
        }
        changes.times_to_now = flags & TIMES_TO_NOW != 0;
        changes.drop_privileges = flags & DROP_PRIVILEGES != 0;
        if changes.times_to_now && (changes.atime.is_some() || changes.mtime.is_some()) {
            return Err(DecodeError::Invalid { what: "setattr asking for both given times and the server's", at });
        }
        Ok(changes)
    }
}

/// A directory's default striping, inherited by files created in it (`lfs setstripe` on a
/// directory). Checked by the server when used, not by the decoder: a bad hint is an
/// [`crate::FsError::Invalid`] answer, not a malformed frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripeHint {
    pub stripe_unit: u64,
    /// 0: every OSD in the cluster.
    pub stripe_count: u32,
    /// First OSD of the file's object list; `None` lets the server spread files.
    pub start_osd: Option<u32>,
}

impl StripeHint {
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.stripe_unit);
        w.u32(self.stripe_count);
        w.option(&self.start_osd, |w, v| w.u32(*v));
    }

    pub fn decode(r: &mut Reader) -> Result<StripeHint, DecodeError> {
        Ok(StripeHint { stripe_unit: r.u64()?, stripe_count: r.u32()?, start_osd: r.option(|r| r.u32())? })
    }
}

/// One data object of a file: the OSD (index into the cluster map) and the object id on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub osd: u32,
    pub object_id: u64,
}

/// A file's layout: striping and the ordered object list (slot i is `objects[i]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileLayout {
    pub stripe: StripeLayout,
    pub objects: Vec<ObjectRef>,
}

impl FileLayout {
    pub fn encode(&self, w: &mut Writer) {
        assert_eq!(self.objects.len(), self.stripe.stripe_count() as usize, "one object per slot");
        w.u64(self.stripe.stripe_unit());
        w.u32(self.stripe.stripe_count());
        for o in &self.objects {
            w.u32(o.osd);
            w.u64(o.object_id);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<FileLayout, DecodeError> {
        let at = r.position();
        let unit = r.u64()?;
        let count = r.u32()?;
        let stripe = StripeLayout::new(unit, count).map_err(|_| DecodeError::Invalid { what: "stripe layout", at })?;
        const _: () = assert!(STRIPE_COUNT_MAX <= OSDS_MAX);
        if (count as usize).saturating_mul(12) > r.remaining() {
            return Err(DecodeError::Truncated { at: r.position() + r.remaining() });
        }
        let mut objects = Vec::with_capacity(count as usize);
        for _ in 0..count {
            objects.push(ObjectRef { osd: r.u32()?, object_id: r.u64()? });
        }
        Ok(FileLayout { stripe, objects })
    }
}

/// One READDIR entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub attr: Attr,
}

impl DirEntry {
    pub const MIN_WIRE_LEN: usize = 2 + ATTR_WIRE_LEN;

    pub fn encode(&self, w: &mut Writer) {
        w.str(&self.name, NAME_LEN_MAX);
        self.attr.encode(w);
    }

    pub fn decode(r: &mut Reader) -> Result<DirEntry, DecodeError> {
        Ok(DirEntry { name: r.str("name", NAME_LEN_MAX)?, attr: Attr::decode(r)? })
    }
}

/// One storage node: its iSCSI portal and the partition holding file data objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsdInfo {
    pub addr: String,
    pub partition_id: u64,
}

/// Who serves what: metadata servers by index (an inode id's high bits) and OSDs by index
/// (an [`ObjectRef::osd`]). Every server holds the same map.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ClusterMap {
    pub servers: Vec<String>,
    pub osds: Vec<OsdInfo>,
}

impl ClusterMap {
    pub fn encode(&self, w: &mut Writer) {
        w.count(self.servers.len(), SERVERS_MAX);
        for s in &self.servers {
            w.str(s, ADDR_LEN_MAX);
        }
        w.count(self.osds.len(), OSDS_MAX);
        for o in &self.osds {
            w.str(&o.addr, ADDR_LEN_MAX);
            w.u64(o.partition_id);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<ClusterMap, DecodeError> {
        let n = r.count("server count", SERVERS_MAX, 2)?;
        let mut servers = Vec::with_capacity(n);
        for _ in 0..n {
            servers.push(r.str("address", ADDR_LEN_MAX)?);
        }
        let n = r.count("OSD count", OSDS_MAX, 10)?;
        let mut osds = Vec::with_capacity(n);
        for _ in 0..n {
            osds.push(OsdInfo { addr: r.str("address", ADDR_LEN_MAX)?, partition_id: r.u64()? });
        }
        Ok(ClusterMap { servers, osds })
    }
}

/// What one metadata server holds (a client sums over servers for `df -i`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    pub files: u64,
    pub directories: u64,
    pub symlinks: u64,
    /// Data objects waiting in the removal journal.
    pub pending_removals: u64,
}

impl StatFs {
    pub fn encode(&self, w: &mut Writer) {
        for v in [self.files, self.directories, self.symlinks, self.pending_removals] {
            w.u64(v);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<StatFs, DecodeError> {
        Ok(StatFs { files: r.u64()?, directories: r.u64()?, symlinks: r.u64()?, pending_removals: r.u64()? })
    }
}

/// A data object a file's layout names that its OSD does not hold (the OSD's store was lost or
/// replaced): that part of the file's data is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingObject {
    pub ino: InodeId,
    pub object: ObjectRef,
}

impl MissingObject {
    pub const WIRE_LEN: usize = 8 + 4 + 8;

    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.ino.0);
        w.u32(self.object.osd);
        w.u64(self.object.object_id);
    }

    pub fn decode(r: &mut Reader) -> Result<MissingObject, DecodeError> {
        Ok(MissingObject { ino: InodeId(r.u64()?), object: ObjectRef { osd: r.u32()?, object_id: r.u64()? } })
    }
}

/// An entry naming a directory inode that the inode's home server no longer has: what a
/// cross-server rmdir leaves when it stops between removing the inode and dropping the entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DanglingEntry {
    pub dir: InodeId,
    pub name: String,
    pub ino: InodeId,
}

impl DanglingEntry {
    pub const MIN_WIRE_LEN: usize = 8 + 2 + 8;

    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.dir.0);
        w.str(&self.name, NAME_LEN_MAX);
        w.u64(self.ino.0);
    }

    pub fn decode(r: &mut Reader) -> Result<DanglingEntry, DecodeError> {
        Ok(DanglingEntry { dir: InodeId(r.u64()?), name: r.str("name", NAME_LEN_MAX)?, ino: InodeId(r.u64()?) })
    }
}
