//! Requests, client -> MDS and MDS -> MDS. One opcode byte, then the fields in declaration
//! order (integers big-endian, strings with a 2-byte length, options as 0 / 1 + value).
//!
//! Routing: an operation on a directory's entries (lookup, mkdir, create, symlink, unlink,
//! rmdir, rename, readdir) goes to the directory's home server; an operation on one inode
//! (getattr, setattr, truncate, readlink, getlayout, dir stripe) to the inode's home server.
//! Both are the high bits of the id ([`InodeId::server`]). `Peer*` requests are only sent by
//! one metadata server to another.

use crate::error::DecodeError;
use crate::limits::{NAME_LEN_MAX, READDIR_ENTRIES_MAX, SYMLINK_LEN_MAX};
use crate::types::{InodeId, SetAttrs, StripeHint};
use crate::wire::{Reader, Writer};

/// Owner and permission bits of a new inode. The MDS trusts the client's uid / gid (no
/// authentication yet; capabilities are a later issue).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewInode {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl NewInode {
    fn encode(&self, w: &mut Writer) {
        w.u32(self.mode);
        w.u32(self.uid);
        w.u32(self.gid);
    }
    fn decode(r: &mut Reader) -> Result<NewInode, DecodeError> {
        Ok(NewInode { mode: r.u32()?, uid: r.u32()?, gid: r.u32()? })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Lookup { parent: InodeId, name: String },
    GetAttr { ino: InodeId },
    SetAttr { ino: InodeId, changes: SetAttrs },
    Mkdir { parent: InodeId, name: String, new: NewInode },
    Rmdir { parent: InodeId, name: String },
    /// A regular file with its data objects; `stripe` overrides the directory's default.
    Create { parent: InodeId, name: String, new: NewInode, stripe: Option<StripeHint> },
    Unlink { parent: InodeId, name: String },
    Rename { src_parent: InodeId, src_name: String, dst_parent: InodeId, dst_name: String },
    Symlink { parent: InodeId, name: String, target: String, new: NewInode },
    ReadLink { ino: InodeId },
    /// Entries in name order after `after` (exclusive), at most `max_entries`.
    ReadDir { dir: InodeId, after: Option<String>, max_entries: u32 },
    Truncate { ino: InodeId, size: u64 },
    GetLayout { ino: InodeId },
    /// Set (or with `None` clear) a directory's default striping.
    SetDirStripe { dir: InodeId, hint: Option<StripeHint> },
    GetDirStripe { dir: InodeId },
    StatFs,
    ClusterMap,
    /// Capacity and use of every OSD (the MDS reads the root information pages, which a
    /// client may not read itself under capability security).
    OsdUsage,
    /// Lists every OSD's data partition and reports the objects in this server's id range
    /// that no file, precreated range or removal journal accounts for (orphans), and the
    /// halves cross-server mkdirs and rmdirs left (directory inodes made or changed more than
    /// `older_than_secs` ago that no entry names; entries naming a gone directory); with
    /// `remove`, journals the orphans for removal and removes the halves.
    Repair { remove: bool, older_than_secs: u64 },
    /// The OSDs this server last found unreachable, from its own record (no OSD is asked):
    /// what a client names when the server could not learn a file's size.
    OsdsDown,
    /// The other metadata servers this server last failed to reach, from its own record (no
    /// server is asked): what a client names when an operation failed with `PeerDown`.
    PeersDown,
    /// The first request on a connection to a server that proves users: answers
    /// `Challenge`, the bytes the connection's proof must answer (`identity.rs`). Asking again
    /// replaces them.
    Challenge,
    /// The second: from now on the connection's requests are answered only for the caller the
    /// proof names. Answers `Done`, or EPERM for a proof the server does not accept (the
    /// challenge is then spent: a new proof needs a new one).
    Authenticate { proof: crate::identity::Proof },
    /// MDS -> MDS: make a directory inode here whose entry the sender (the parent's server)
    /// will hold, with the parent's default striping copied in; answers its attributes.
    PeerCreateDir { parent: InodeId, new: NewInode, stripe: Option<StripeHint> },
    /// MDS -> MDS: remove an empty directory inode homed here (the sender removes the entry).
    PeerRemoveDir { ino: InodeId },
    /// MDS -> metadata server 0: take (`take`) or give back the cluster's rename lock under
    /// `token`, chosen by the sender. Held while a directory moves to another parent, so no
    /// two such moves run at once anywhere; taking a held lock answers `Busy`.
    PeerRenameLock { token: u64, take: bool },
    /// MDS -> MDS: whether directory `dir`, homed on the receiver, has an entry naming `ino`
    /// (`Done`, else `NotFound`): how `Repair` tells a directory inode nobody names.
    PeerHasEntry { dir: InodeId, ino: InodeId },
}

mod op {
    pub const LOOKUP: u8 = 1;
    pub const GET_ATTR: u8 = 2;
    pub const SET_ATTR: u8 = 3;
    pub const MKDIR: u8 = 4;
    pub const RMDIR: u8 = 5;
    pub const CREATE: u8 = 6;
    pub const UNLINK: u8 = 7;
    pub const RENAME: u8 = 8;
    pub const SYMLINK: u8 = 9;
    pub const READ_LINK: u8 = 10;
    pub const READ_DIR: u8 = 11;
    pub const TRUNCATE: u8 = 12;
    pub const GET_LAYOUT: u8 = 13;
    pub const SET_DIR_STRIPE: u8 = 14;
    pub const GET_DIR_STRIPE: u8 = 15;
    pub const STAT_FS: u8 = 16;
    pub const CLUSTER_MAP: u8 = 17;
    pub const OSD_USAGE: u8 = 18;
    pub const REPAIR: u8 = 19;
    pub const OSDS_DOWN: u8 = 20;
    pub const PEERS_DOWN: u8 = 21;
    pub const AUTHENTICATE: u8 = 22;
    pub const CHALLENGE: u8 = 23;
    pub const PEER_CREATE_DIR: u8 = 32;
    pub const PEER_REMOVE_DIR: u8 = 33;
    pub const PEER_RENAME_LOCK: u8 = 34;
    pub const PEER_HAS_ENTRY: u8 = 35;
}

fn name(w: &mut Writer, s: &str) {
    w.str(s, NAME_LEN_MAX)
}

fn read_name(r: &mut Reader) -> Result<String, DecodeError> {
    r.str("name", NAME_LEN_MAX)
}

fn ino(r: &mut Reader) -> Result<InodeId, DecodeError> {
    r.u64().map(InodeId)
}

impl Request {
    /// True when the request changes nothing on the server, so sending it twice is the same as
    /// sending it once: a client may resend it on a new connection after losing the first.
    pub fn is_read_only(&self) -> bool {
        matches!(
            self,
            Request::Lookup { .. }
                | Request::GetAttr { .. }
                | Request::ReadLink { .. }
                | Request::ReadDir { .. }
                | Request::GetLayout { .. }
                | Request::GetDirStripe { .. }
                | Request::StatFs
                | Request::ClusterMap
                | Request::OsdUsage
                | Request::Repair { remove: false, .. }
                | Request::OsdsDown
                | Request::PeersDown
                | Request::PeerHasEntry { .. }
        )
    }

    /// Whether the request walks whole stores and may outlast [`crate::connection::REPLY_TIMEOUT`]:
    /// `Repair` lists every object of every OSD.
    pub fn runs_long(&self) -> bool {
        matches!(self, Request::Repair { .. })
    }

    pub fn encode(&self, w: &mut Writer) {
        use Request as R;
        match self {
            R::Lookup { parent, name: n } | R::Rmdir { parent, name: n } | R::Unlink { parent, name: n } => {
                w.u8(match self {
                    R::Lookup { .. } => op::LOOKUP,
                    R::Rmdir { .. } => op::RMDIR,
                    _ => op::UNLINK,
                });
                w.u64(parent.0);
                name(w, n);
            }
            R::GetAttr { ino } | R::ReadLink { ino } | R::GetLayout { ino } | R::GetDirStripe { dir: ino } | R::PeerRemoveDir { ino } => {
                w.u8(match self {
                    R::GetAttr { .. } => op::GET_ATTR,
                    R::ReadLink { .. } => op::READ_LINK,
                    R::GetLayout { .. } => op::GET_LAYOUT,
                    R::GetDirStripe { .. } => op::GET_DIR_STRIPE,
                    _ => op::PEER_REMOVE_DIR,
                });
                w.u64(ino.0);
            }
            R::SetAttr { ino, changes } => {
                w.u8(op::SET_ATTR);
                w.u64(ino.0);
                changes.encode(w);
            }
            R::Mkdir { parent, name: n, new } => {
                w.u8(op::MKDIR);
                w.u64(parent.0);
                name(w, n);
                new.encode(w);
            }
            R::Create { parent, name: n, new, stripe } => {
                w.u8(op::CREATE);
                w.u64(parent.0);
                name(w, n);
                new.encode(w);
                w.option(stripe, |w, h| h.encode(w));
            }
            R::Rename { src_parent, src_name, dst_parent, dst_name } => {
                w.u8(op::RENAME);
                w.u64(src_parent.0);
                name(w, src_name);
                w.u64(dst_parent.0);
                name(w, dst_name);
            }
            R::Symlink { parent, name: n, target, new } => {
                w.u8(op::SYMLINK);
                w.u64(parent.0);
                name(w, n);
                w.str(target, SYMLINK_LEN_MAX);
                new.encode(w);
            }
            R::ReadDir { dir, after, max_entries } => {
                w.u8(op::READ_DIR);
                w.u64(dir.0);
                w.option(after, |w, a| name(w, a));
                w.u32(*max_entries);
            }
            R::Truncate { ino, size } => {
                w.u8(op::TRUNCATE);
                w.u64(ino.0);
                w.u64(*size);
            }
            R::SetDirStripe { dir, hint } => {
                w.u8(op::SET_DIR_STRIPE);
                w.u64(dir.0);
                w.option(hint, |w, h| h.encode(w));
            }
            R::StatFs => w.u8(op::STAT_FS),
            R::ClusterMap => w.u8(op::CLUSTER_MAP),
            R::OsdUsage => w.u8(op::OSD_USAGE),
            R::OsdsDown => w.u8(op::OSDS_DOWN),
            R::PeersDown => w.u8(op::PEERS_DOWN),
            R::Challenge => w.u8(op::CHALLENGE),
            R::Authenticate { proof } => {
                w.u8(op::AUTHENTICATE);
                proof.encode(w);
            }
            R::Repair { remove, older_than_secs } => {
                w.u8(op::REPAIR);
                w.bool(*remove);
                w.u64(*older_than_secs);
            }
            R::PeerHasEntry { dir, ino } => {
                w.u8(op::PEER_HAS_ENTRY);
                w.u64(dir.0);
                w.u64(ino.0);
            }
            R::PeerCreateDir { parent, new, stripe } => {
                w.u8(op::PEER_CREATE_DIR);
                w.u64(parent.0);
                new.encode(w);
                w.option(stripe, |w, h| h.encode(w));
            }
            R::PeerRenameLock { token, take } => {
                w.u8(op::PEER_RENAME_LOCK);
                w.u64(*token);
                w.bool(*take);
            }
        }
    }

    /// Decodes one request that fills `bytes` exactly.
    pub fn decode(bytes: &[u8]) -> Result<Request, DecodeError> {
        let mut r = Reader::new(bytes);
        let request = Self::decode_fields(&mut r)?;
        r.finish()?;
        Ok(request)
    }

    fn decode_fields(r: &mut Reader) -> Result<Request, DecodeError> {
        use Request as R;
        let code = r.u8()?;
        Ok(match code {
            op::LOOKUP => R::Lookup { parent: ino(r)?, name: read_name(r)? },
            op::RMDIR => R::Rmdir { parent: ino(r)?, name: read_name(r)? },
            op::UNLINK => R::Unlink { parent: ino(r)?, name: read_name(r)? },
            op::GET_ATTR => R::GetAttr { ino: ino(r)? },
            op::READ_LINK => R::ReadLink { ino: ino(r)? },
            op::GET_LAYOUT => R::GetLayout { ino: ino(r)? },
            op::GET_DIR_STRIPE => R::GetDirStripe { dir: ino(r)? },
            op::PEER_REMOVE_DIR => R::PeerRemoveDir { ino: ino(r)? },
            op::SET_ATTR => R::SetAttr { ino: ino(r)?, changes: SetAttrs::decode(r)? },
            op::MKDIR => R::Mkdir { parent: ino(r)?, name: read_name(r)?, new: NewInode::decode(r)? },
            op::CREATE => R::Create {
                parent: ino(r)?,
                name: read_name(r)?,
                new: NewInode::decode(r)?,
                stripe: r.option(StripeHint::decode)?,
            },
            op::RENAME => R::Rename { src_parent: ino(r)?, src_name: read_name(r)?, dst_parent: ino(r)?, dst_name: read_name(r)? },
            op::SYMLINK => R::Symlink {
                parent: ino(r)?,
                name: read_name(r)?,
                target: r.str("symlink target", SYMLINK_LEN_MAX)?,
                new: NewInode::decode(r)?,
            },
            op::READ_DIR => {
                let dir = ino(r)?;
                let after = r.option(read_name)?;
                let at = r.position();
                let max_entries = r.u32()?;
                if max_entries > READDIR_ENTRIES_MAX {
                    return Err(DecodeError::TooLong { what: "readdir entries", value: max_entries as u64, max: READDIR_ENTRIES_MAX as u64, at });
                }
                R::ReadDir { dir, after, max_entries }
            }
            op::TRUNCATE => R::Truncate { ino: ino(r)?, size: r.u64()? },
            op::SET_DIR_STRIPE => R::SetDirStripe { dir: ino(r)?, hint: r.option(StripeHint::decode)? },
            op::STAT_FS => R::StatFs,
            op::CLUSTER_MAP => R::ClusterMap,
            op::OSD_USAGE => R::OsdUsage,
            op::OSDS_DOWN => R::OsdsDown,
            op::PEERS_DOWN => R::PeersDown,
            op::AUTHENTICATE => R::Authenticate { proof: crate::identity::Proof::decode(r)? },
            op::CHALLENGE => R::Challenge,
            op::REPAIR => R::Repair { remove: r.bool()?, older_than_secs: r.u64()? },
            op::PEER_CREATE_DIR => R::PeerCreateDir { parent: ino(r)?, new: NewInode::decode(r)?, stripe: r.option(StripeHint::decode)? },
            op::PEER_RENAME_LOCK => R::PeerRenameLock { token: r.u64()?, take: r.bool()? },
            op::PEER_HAS_ENTRY => R::PeerHasEntry { dir: ino(r)?, ino: ino(r)? },
            _ => return Err(DecodeError::UnknownTag { what: "request opcode", value: code as u32, at: 0 }),
        })
    }
}
