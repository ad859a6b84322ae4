//! [`ClientError`]: what can go wrong in a client call, each variant naming what to look at —
//! the path and operation for a namespace refusal, the OSD (index and portal) and object for a
//! storage failure, the metadata server for a metadata transport failure.

use tessera_initiator::osd_client::OsdError;
use tessera_layout::{DescriptorError, PlanError};
use tessera_mds_proto::{ConnectionError, FsError, ObjectRef};
use tessera_scsi::SenseKey;
use thiserror::Error;

use crate::config::ConfigError;

/// Why talking to a metadata server failed below the namespace level.
#[derive(Debug, Error)]
pub enum MdsLinkError {
    /// The connection failed, or its reply could not be read.
    #[error("{0}")]
    Connection(#[from] ConnectionError),
    #[error("answered {request} with an unexpected {reply} reply")]
    UnexpectedReply { request: &'static str, reply: &'static str },
    /// A directory page that breaks the paging contract (names rising strictly past the
    /// cursor; no empty page while more follow): read on, a listing would repeat entries,
    /// skip them, or never end.
    #[error("answered readdir with a page that {0}; the listing stops rather than repeat or miss entries")]
    BadPage(String),
    /// The server proves users and did not accept this client's proof (its log says why).
    #[error("refused this client's proof of user {uid}: the user key the server holds is not the one the client or its agent used (its log says why)")]
    ProofRefused { uid: u32 },
    /// The server accepted a proof without sealing the connection: it holds no user key, so
    /// it could not derive the session key, and a client that proves its user sends nothing
    /// in the clear to a server that cannot show it holds the key.
    #[error("accepted this client's proof without sealing the connection: the server holds no user key (is its cluster file the client's?), or it is not the cluster's metadata server")]
    NotSealed,
}

#[derive(Debug, Error)]
pub enum ClientError {
    /// The namespace refused the operation (the errno is `source.errno()`).
    #[error("{op} {}: {source}", shown(path))]
    Fs {
        op: &'static str,
        path: String,
        #[source]
        source: FsError,
    },
    /// The metadata server that holds the operation's inode needed another one, which did not
    /// answer it (the errno is EHOSTDOWN, as [`FsError::PeerDown`]). `down` names the servers
    /// it found silent, by index and address; empty when it could not say.
    #[error("{op} {path}: metadata server {asked} ({asked_addr}) needed {}; `tessera status` shows which daemon is down", silent_peers(down))]
    PeerDown { op: &'static str, path: String, asked: u32, asked_addr: String, down: Vec<(u32, String)> },
    /// A file's size needs the length of each of its data objects, and an OSD holding one did
    /// not answer the metadata server (the errno is EIO).
    #[error("{op} {path}: input/output error: the size is unknown because {}", places.why_unknown())]
    SizeUnknown { op: &'static str, path: String, places: DataPlaces },
    /// A chmod of a file was recorded, but revoking the capabilities issued before it could
    /// not reach every OSD holding the file's data (the errno is EIO). Until those OSDs answer
    /// (the metadata server retries in the background), capabilities from before still work
    /// on them.
    #[error("{op} {path}: the mode is changed, but the old capabilities are not yet revoked on every OSD: {}; it retries until they do", places.unanswered())]
    RevocationPending { op: &'static str, path: String, places: DataPlaces },
    /// A metadata server could not be reached or spoke nonsense.
    #[error("metadata server {server} ({addr}): {source}")]
    Mds {
        server: u32,
        addr: String,
        #[source]
        source: MdsLinkError,
    },
    /// An OSD command failed: the OSD by index and portal, and the object it addressed.
    #[error("OSD {osd_index} ({addr}), object {object_id:#x}: {source}")]
    Osd {
        osd_index: u32,
        addr: String,
        object_id: u64,
        /// Boxed: OSD errors carry sense data and would make every client result large.
        #[source]
        source: Box<OsdError>,
    },
    /// The metadata server sent credentials this client cannot use.
    #[error("{path}: unusable credentials from the metadata server: {reason}")]
    Grant { path: String, reason: String },
    /// This client cannot prove which user it acts for, on a cluster whose metadata servers
    /// ask for proof (docs/security.md, "Users").
    #[error("cannot prove which user this client acts for: {reason}")]
    UserProof { reason: String },
    #[error("cluster configuration: {0}")]
    Config(#[from] ConfigError),
    /// A layout or inode names a server or OSD this client's configuration lacks: the
    /// cluster.toml is out of date with the metadata servers' cluster map.
    #[error("{path}: refers to {what} {index}, but the cluster configuration has {configured}")]
    UnknownIndex { path: String, what: &'static str, index: u32, configured: usize },
    #[error("{path}: invalid extent list: {source}")]
    Extents {
        path: String,
        #[source]
        source: PlanError,
    },
    #[error("{path}: cannot describe one command's extents: {source}")]
    Descriptor {
        path: String,
        #[source]
        source: DescriptorError,
    },
    /// The memory passed with an extent list or pattern (one buffer, or a list of regions)
    /// does not hold exactly the file extents' bytes.
    #[error("{path}: the file extents total {extents_len} bytes but the memory holds {buffer_len}")]
    BufferLength { path: String, extents_len: u64, buffer_len: u64 },
    /// A striping the cluster cannot give (checked before the request is sent).
    #[error("{path}: {reason}")]
    Stripe { path: String, reason: String },
    /// Attributes given object by object, for a file with another number of objects.
    #[error("{path}: {lists} attribute lists given for the file's {objects} objects")]
    AttributeLists { path: String, lists: usize, objects: usize },
    /// An OSD reported an object length that puts the file past 2^64 bytes.
    #[error("{path}: the data objects' lengths give a size past 2^64 bytes")]
    SizeOverflow { path: String },
    /// The file is larger than this platform's memory can address (read_to_end).
    #[error("{path}: {size} bytes do not fit in memory on this platform")]
    TooLarge { path: String, size: u64 },
}

impl ClientError {
    /// The errno a POSIX front end (FUSE, the C ABI) reports for this error.
    pub fn errno(&self) -> i32 {
        const EIO: i32 = 5;
        const EINVAL: i32 = 22;
        const EFBIG: i32 = 27;
        match self {
            ClientError::Fs { source, .. } => source.errno(),
            ClientError::PeerDown { .. } => FsError::PeerDown.errno(),
            ClientError::SizeUnknown { .. } | ClientError::RevocationPending { .. } => EIO,
            ClientError::Extents { .. }
            | ClientError::Descriptor { .. }
            | ClientError::BufferLength { .. }
            | ClientError::Config(_)
            | ClientError::Stripe { .. }
            | ClientError::AttributeLists { .. } => EINVAL,
            ClientError::SizeOverflow { .. } | ClientError::TooLarge { .. } => EFBIG,
            ClientError::Osd { source, .. } => osd_errno(source),
            ClientError::Mds { .. } | ClientError::UnknownIndex { .. } | ClientError::Grant { .. } => EIO,
            ClientError::UserProof { .. } => FsError::NotPermitted.errno(),
        }
    }

    /// The namespace refusal, when this is one.
    pub fn fs_error(&self) -> Option<FsError> {
        match self {
            ClientError::Fs { source, .. } => Some(*source),
            ClientError::PeerDown { .. } => Some(FsError::PeerDown),
            ClientError::SizeUnknown { .. } | ClientError::RevocationPending { .. } => Some(FsError::Io),
            _ => None,
        }
    }
}

/// A path as an error names it: `''` for the empty one, which would otherwise vanish.
fn shown(path: &str) -> &str {
    if path.is_empty() { "''" } else { path }
}

/// "metadata server 1 (HOST:PORT), which did not answer it", or without a name "another
/// metadata server, which did not answer it".
fn silent_peers(down: &[(u32, String)]) -> String {
    match down {
        [] => "another metadata server, which did not answer it".to_string(),
        _ => {
            let named: Vec<String> = down.iter().map(|(i, addr)| format!("metadata server {i} ({addr})")).collect();
            format!("{}, which did not answer it", named.join(" and "))
        }
    }
}

/// Where a file's data is, for the messages of errors its metadata server met there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataPlaces {
    /// The file's OSDs, by index and portal, from its layout (empty when that could not be
    /// read either).
    pub osds: Vec<(u32, String)>,
    /// Those of them the file's metadata server last found unreachable (empty when it knows
    /// of none, e.g. the OSD answered again meanwhile).
    pub down: Vec<u32>,
    /// The file's objects whose OSDs answered that they do not hold them (looked for only
    /// when no OSD is known to be down).
    pub lost: Vec<ObjectRef>,
}

impl DataPlaces {
    /// "the metadata server cannot reach OSD 2 at HOST:PORT (the file's data is on OSD 0 at
    /// ..., OSD 2 at ...)", or without a known culprit "an OSD holding the file's data did not
    /// answer the metadata server (...)".
    /// Why a size could not be read: [`DataPlaces::unanswered`] with where to look, or the
    /// objects an OSD answered it does not hold.
    pub fn why_unknown(&self) -> String {
        if self.lost.is_empty() {
            return format!("{}; `tessera status` shows which daemon is down", self.unanswered());
        }
        let lost: Vec<String> = self
            .lost
            .iter()
            .map(|o| format!("OSD {} at {} does not hold the file's object {:#x}", o.osd, self.addr_of(o.osd), o.object_id))
            .collect();
        format!("{}: that part of the file's data is lost (the OSD's store was lost or replaced; `tessera repair` lists every such file)", lost.join(", "))
    }

    fn addr_of(&self, osd: u32) -> &str {
        self.osds.iter().find(|(i, _)| *i == osd).map_or("?", |(_, addr)| addr.as_str())
    }

    pub fn unanswered(&self) -> String {
        let named = |osds: &mut dyn Iterator<Item = &(u32, String)>| osds.map(|(i, addr)| format!("OSD {i} at {addr}")).collect::<Vec<_>>().join(", ");
        let all = if self.osds.is_empty() { String::new() } else { format!(" (the file's data is on {})", named(&mut self.osds.iter())) };
        let down = named(&mut self.osds.iter().filter(|(i, _)| self.down.contains(i)));
        if down.is_empty() {
            format!("an OSD holding the file's data did not answer the metadata server{all}")
        } else {
            format!("the metadata server cannot reach {down}{all}")
        }
    }
}

/// The errno of an OSD refusal: the two space refusals keep their meaning, everything else
/// is EIO.
fn osd_errno(e: &OsdError) -> i32 {
    const EIO: i32 = 5;
    const EFBIG: i32 = 27;
    const ENOSPC: i32 = 28;
    match e.sense().map(|s| (s.key, s.asc, s.ascq)) {
        // QUOTA ERROR: past the object length limit (or a capacity quota).
        Some((SenseKey::DataProtect, 0x55, 0x07)) => EFBIG,
        // SPACE ALLOCATION FAILED WRITE PROTECT: the OSD's file system is full.
        Some((SenseKey::DataProtect, 0x27, 0x07)) => ENOSPC,
        _ => EIO,
    }
}
