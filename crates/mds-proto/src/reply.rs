//! Replies, MDS -> client: a status byte (0 success, else the [`FsError`] errno as u16 after a
//! 1), then for success a reply tag and its fields. Which reply a request gets is fixed by the
//! request (documented on each variant), but the tag makes every reply decodable on its own,
//! which the fuzzer and packet captures rely on.

use crate::error::{DecodeError, FsError};
use crate::grant::{decode_grant, encode_grant, Grant};
use crate::usage::{decode_usage, encode_usage, OsdUsage};
use crate::limits::{FAULTS_LISTED_MAX, ORPHANS_LISTED_MAX, OSDS_MAX, READDIR_ENTRIES_MAX, SERVERS_MAX, SYMLINK_LEN_MAX};
use crate::types::{Attr, ClusterMap, DanglingEntry, DirEntry, FileLayout, InodeId, MissingObject, ObjectRef, StatFs, StripeHint};
use crate::wire::{Reader, Writer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Rmdir, Unlink, Rename, SetDirStripe, PeerRemoveDir.
    Done,
    /// Lookup, GetAttr, SetAttr, Mkdir, Symlink, Truncate, PeerCreateDir.
    Attr(Attr),
    /// Create: the new file, where its data goes, and the credentials for its objects.
    Created { attr: Attr, layout: FileLayout, grant: Grant },
    /// ReadLink.
    Link(String),
    /// ReadDir: entries in name order; `more` when entries after the last remain.
    DirPage { entries: Vec<DirEntry>, more: bool },
    /// GetLayout: the layout and fresh credentials for its objects.
    Layout { layout: FileLayout, grant: Grant },
    /// GetDirStripe: `None` when the directory has no default of its own.
    DirStripe(Option<StripeHint>),
    StatFs(StatFs),
    ClusterMap(ClusterMap),
    /// OsdUsage: one entry per OSD of the cluster map.
    OsdUsage(Vec<OsdUsage>),
    /// Repair: the orphans found (the first [`ORPHANS_LISTED_MAX`] of them) and how many there
    /// were in all; directory inodes homed here that no entry names (`unlinked`) and entries
    /// here naming a directory its home server no longer has (`dangling`), the first
    /// [`FAULTS_LISTED_MAX`] of each; and the data objects files here name that their OSDs do
    /// not hold (`missing`, the first [`FAULTS_LISTED_MAX`]).
    Repair { orphans: Vec<ObjectRef>, found: u64, unlinked: Vec<InodeId>, dangling: Vec<DanglingEntry>, missing: Vec<MissingObject> },
    /// OsdsDown: OSD indices in ascending order.
    OsdsDown(Vec<u32>),
    /// PeersDown: metadata server indices in ascending order.
    PeersDown(Vec<u32>),
    /// Challenge: the bytes this connection's proof of its user must answer.
    Challenge(crate::identity::Challenge),
    /// Sealed: the proof is accepted, and every later frame on the connection, both ways, is
    /// sealed under the session key the proof gives (`seal.rs`).
    Sealed,
}

mod tag {
    pub const DONE: u8 = 0;
    pub const ATTR: u8 = 1;
    pub const CREATED: u8 = 2;
    pub const LINK: u8 = 3;
    pub const DIR_PAGE: u8 = 4;
    pub const LAYOUT: u8 = 5;
    pub const DIR_STRIPE: u8 = 6;
    pub const STAT_FS: u8 = 7;
    pub const CLUSTER_MAP: u8 = 8;
    pub const OSD_USAGE: u8 = 9;
    pub const REPAIR: u8 = 10;
    pub const OSDS_DOWN: u8 = 11;
    pub const PEERS_DOWN: u8 = 12;
    pub const CHALLENGE: u8 = 13;
    pub const SEALED: u8 = 14;
}

/// A set of daemon indices below `max`, ascending.
fn encode_indices(indices: &[u32], max: u32, w: &mut Writer) {
    w.count(indices.len(), max);
    for &i in indices {
        w.u32(i);
    }
}

fn decode_indices(r: &mut Reader, max: u32, what: &'static str, invalid: &'static str) -> Result<Vec<u32>, DecodeError> {
    let n = r.count(what, max, 4)?;
    let mut indices: Vec<u32> = Vec::with_capacity(n);
    for _ in 0..n {
        let at = r.position();
        let i = r.u32()?;
        if i >= max || indices.last().is_some_and(|&last| last >= i) {
            return Err(DecodeError::Invalid { what: invalid, at });
        }
        indices.push(i);
    }
    Ok(indices)
}

const STATUS_OK: u8 = 0;
const STATUS_ERROR: u8 = 1;

/// Encodes the outcome of one request.
pub fn encode_result(result: &Result<Reply, FsError>, w: &mut Writer) {
    match result {
        Ok(reply) => {
            w.u8(STATUS_OK);
            reply.encode(w);
        }
        Err(e) => {
            w.u8(STATUS_ERROR);
            w.u16(e.errno() as u16);
        }
    }
}

/// Decodes the outcome of one request that fills `bytes` exactly.
pub fn decode_result(bytes: &[u8]) -> Result<Result<Reply, FsError>, DecodeError> {
    let mut r = Reader::new(bytes);
    let result = match r.u8()? {
        STATUS_OK => Ok(Reply::decode_fields(&mut r)?),
        STATUS_ERROR => {
            let at = r.position();
            let errno = r.u16()?;
            Err(FsError::from_errno(errno as i32).ok_or(DecodeError::UnknownTag { what: "errno", value: errno as u32, at })?)
        }
        status => return Err(DecodeError::UnknownTag { what: "status", value: status as u32, at: 0 }),
    };
    r.finish()?;
    Ok(result)
}

impl Reply {
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Reply::Done => w.u8(tag::DONE),
            Reply::Attr(a) => {
                w.u8(tag::ATTR);
                a.encode(w);
            }
            Reply::Created { attr, layout, grant } => {
                w.u8(tag::CREATED);
                attr.encode(w);
                layout.encode(w);
                encode_grant(grant, w);
            }
            Reply::Link(target) => {
                w.u8(tag::LINK);
                w.str(target, SYMLINK_LEN_MAX);
            }
            Reply::DirPage { entries, more } => {
                w.u8(tag::DIR_PAGE);
                w.count(entries.len(), READDIR_ENTRIES_MAX);
                for e in entries {
                    e.encode(w);
                }
                w.bool(*more);
            }
            Reply::Layout { layout, grant } => {
                w.u8(tag::LAYOUT);
                layout.encode(w);
                encode_grant(grant, w);
            }
            Reply::DirStripe(h) => {
                w.u8(tag::DIR_STRIPE);
                w.option(h, |w, h| h.encode(w));
            }
            Reply::StatFs(s) => {
                w.u8(tag::STAT_FS);
                s.encode(w);
            }
            Reply::ClusterMap(m) => {
                w.u8(tag::CLUSTER_MAP);
                m.encode(w);
            }
            Reply::OsdUsage(u) => {
                w.u8(tag::OSD_USAGE);
                encode_usage(u, w);
            }
            Reply::Repair { orphans, found, unlinked, dangling, missing } => {
                w.u8(tag::REPAIR);
                w.count(orphans.len(), ORPHANS_LISTED_MAX);
                for o in orphans {
                    w.u32(o.osd);
                    w.u64(o.object_id);
                }
                w.u64(*found);
                w.count(unlinked.len(), FAULTS_LISTED_MAX);
                for ino in unlinked {
                    w.u64(ino.0);
                }
                w.count(dangling.len(), FAULTS_LISTED_MAX);
                for d in dangling {
                    d.encode(w);
                }
                w.count(missing.len(), FAULTS_LISTED_MAX);
                for m in missing {
                    m.encode(w);
                }
            }
            Reply::OsdsDown(osds) => {
                w.u8(tag::OSDS_DOWN);
                encode_indices(osds, OSDS_MAX, w);
            }
            Reply::PeersDown(servers) => {
                w.u8(tag::PEERS_DOWN);
                encode_indices(servers, SERVERS_MAX, w);
            }
            Reply::Challenge(bytes) => {
                w.u8(tag::CHALLENGE);
                w.bytes(bytes);
            }
            Reply::Sealed => w.u8(tag::SEALED),
        }
    }

    fn decode_fields(r: &mut Reader) -> Result<Reply, DecodeError> {
        let at = r.position();
        Ok(match r.u8()? {
            tag::DONE => Reply::Done,
            tag::ATTR => Reply::Attr(Attr::decode(r)?),
            tag::CREATED => {
                let attr = Attr::decode(r)?;
                let layout = FileLayout::decode(r)?;
                let grant = decode_grant(r, layout.objects.len())?;
                Reply::Created { attr, layout, grant }
            }
            tag::LINK => Reply::Link(r.str("symlink target", SYMLINK_LEN_MAX)?),
            tag::DIR_PAGE => {
                let n = r.count("readdir entries", READDIR_ENTRIES_MAX, DirEntry::MIN_WIRE_LEN)?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    entries.push(DirEntry::decode(r)?);
                }
                Reply::DirPage { entries, more: r.bool()? }
            }
            tag::LAYOUT => {
                let layout = FileLayout::decode(r)?;
                let grant = decode_grant(r, layout.objects.len())?;
                Reply::Layout { layout, grant }
            }
            tag::DIR_STRIPE => Reply::DirStripe(r.option(StripeHint::decode)?),
            tag::STAT_FS => Reply::StatFs(StatFs::decode(r)?),
            tag::CLUSTER_MAP => Reply::ClusterMap(ClusterMap::decode(r)?),
            tag::OSD_USAGE => Reply::OsdUsage(decode_usage(r)?),
            tag::REPAIR => {
                let n = r.count("orphans", ORPHANS_LISTED_MAX, 12)?;
                let mut orphans = Vec::with_capacity(n);
                for _ in 0..n {
                    orphans.push(ObjectRef { osd: r.u32()?, object_id: r.u64()? });
                }
                let at = r.position();
                let found = r.u64()?;
                if found < n as u64 {
                    // More listed than found: the counts contradict each other.
                    return Err(DecodeError::Invalid { what: "orphan count", at });
                }
                let n = r.count("unlinked directories", FAULTS_LISTED_MAX, 8)?;
                let mut unlinked = Vec::with_capacity(n);
                for _ in 0..n {
                    unlinked.push(InodeId(r.u64()?));
                }
                let n = r.count("dangling entries", FAULTS_LISTED_MAX, DanglingEntry::MIN_WIRE_LEN)?;
                let mut dangling = Vec::with_capacity(n);
                for _ in 0..n {
                    dangling.push(DanglingEntry::decode(r)?);
                }
                let n = r.count("missing objects", FAULTS_LISTED_MAX, MissingObject::WIRE_LEN)?;
                let mut missing = Vec::with_capacity(n);
                for _ in 0..n {
                    missing.push(MissingObject::decode(r)?);
                }
                Reply::Repair { orphans, found, unlinked, dangling, missing }
            }
            tag::OSDS_DOWN => Reply::OsdsDown(decode_indices(r, OSDS_MAX, "down OSDs", "down OSD index (ascending, below the OSD limit)")?),
            tag::PEERS_DOWN => Reply::PeersDown(decode_indices(r, SERVERS_MAX, "down servers", "down server index (ascending, below the server limit)")?),
            tag::CHALLENGE => Reply::Challenge(r.array()?),
            tag::SEALED => Reply::Sealed,
            t => return Err(DecodeError::UnknownTag { what: "reply tag", value: t as u32, at }),
        })
    }
}
