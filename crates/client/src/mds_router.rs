//! Talking to the metadata servers: [`MdsRouter`] sends each request to the server that owns
//! what it touches (docs/metadata.md) — entry operations to the directory's home server,
//! inode operations to the inode's — which is the top bits of the inode id, so routing needs no
//! lookup table and no round trip.
//!
//! A server answers one request at a time per connection, so the router keeps a small stack of
//! idle connections per server: a thread takes one (or opens a new one), calls, and gives it
//! back. Concurrent threads therefore never queue behind each other's metadata calls.
//!
//! Servers restart, and the connections a client keeps idle then die with them. An idle
//! connection is checked before it is used (the peer's end of stream is waiting on it), so a
//! request after a restart goes out on a new connection. A connection that fails during a call
//! is dropped, not returned; the request is sent once more, on a new connection, only when it
//! changes nothing ([`Request::is_read_only`]): a create or rename may have taken effect before
//! the failure, and a second one would answer EEXIST or ENOENT for what succeeded.

use std::sync::Mutex;

use tessera_mds_proto::{FsError, InodeId, MdsConnection, Reply, Request};

use crate::config::MdsEntry;
use crate::error::{ClientError, MdsLinkError};
use crate::prover::Prover;

/// Idle connections kept per server; more concurrent callers open (and then close) extra ones.
const IDLE_MAX: usize = 8;

struct Server {
    addr: String,
    idle: Mutex<Vec<MdsConnection>>,
}

impl Server {
    /// An idle connection that is still open, dropping those the server has closed.
    fn take_idle(&self) -> Option<MdsConnection> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(link) = idle.pop() {
            if link.is_open() {
                return Some(link);
            }
        }
        None
    }
}

/// Connections to every metadata server, routed by inode id.
pub struct MdsRouter {
    servers: Vec<Server>,
    /// Requests sent, for [`crate::Client::mds_requests`].
    sent: std::sync::atomic::AtomicU64,
    /// Opens connections for the user every request is sent for, proven when the servers ask.
    prover: Prover,
}

impl MdsRouter {
    /// Prepares the router; connections open on first use.
    pub fn new(entries: &[MdsEntry], prover: Prover) -> MdsRouter {
        let servers = entries.iter().map(|e| Server { addr: e.addr.clone(), idle: Mutex::new(Vec::new()) }).collect();
        MdsRouter { servers, sent: std::sync::atomic::AtomicU64::new(0), prover }
    }

    fn connect(&self, addr: &str, index: u32) -> Result<MdsConnection, ClientError> {
        self.prover.open(index, addr, None)
    }

    /// How this router's connections prove their user.
    pub fn prover(&self) -> &Prover {
        &self.prover
    }

    /// Requests sent so far (a resend after a lost connection counts once).
    pub fn sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn server_count(&self) -> u32 {
        self.servers.len() as u32
    }

    /// Sends `request` to the home server of `ino` (the directory for entry operations, the
    /// inode itself otherwise). `path` only labels errors.
    pub fn call_for(&self, ino: InodeId, path: &str, request: Request) -> Result<Result<Reply, FsError>, ClientError> {
        self.call(ino.server(), path, request)
    }

    /// Sends `request` to server `index`.
    pub fn call(&self, index: u32, path: &str, request: Request) -> Result<Result<Reply, FsError>, ClientError> {
        let server = self.servers.get(index as usize).ok_or_else(|| ClientError::UnknownIndex {
            path: path.to_string(),
            what: "metadata server",
            index,
            configured: self.servers.len(),
        })?;
        let link_error = |source: MdsLinkError| ClientError::Mds { server: index, addr: server.addr.clone(), source };
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut link = match server.take_idle() {
            Some(link) => link,
            None => self.connect(&server.addr, index)?,
        };
        let result = match link.call(&request) {
            Ok(result) => result,
            Err(e) if e.is_lost() && request.is_read_only() => {
                link = self.connect(&server.addr, index)?;
                link.call(&request).map_err(|e| link_error(e.into()))?
            }
            Err(e) => return Err(link_error(e.into())),
        };
        let mut idle = server.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE_MAX {
            idle.push(link);
        }
        Ok(result)
    }

    /// The address of server `index`, for messages.
    pub fn addr(&self, index: u32) -> &str {
        self.servers.get(index as usize).map_or("?", |s| s.addr.as_str())
    }
}

/// The name of a reply variant, for [`MdsLinkError::UnexpectedReply`].
pub fn reply_name(reply: &Reply) -> &'static str {
    match reply {
        Reply::Done => "Done",
        Reply::Attr(_) => "Attr",
        Reply::Created { .. } => "Created",
        Reply::Link(_) => "Link",
        Reply::DirPage { .. } => "DirPage",
        Reply::Layout { .. } => "Layout",
        Reply::DirStripe(_) => "DirStripe",
        Reply::StatFs(_) => "StatFs",
        Reply::ClusterMap(_) => "ClusterMap",
        Reply::OsdUsage(_) => "OsdUsage",
        Reply::Repair { .. } => "Repair",
        Reply::OsdsDown(_) => "OsdsDown",
        Reply::PeersDown(_) => "PeersDown",
        Reply::Challenge(_) => "Challenge",
        Reply::Sealed => "Sealed",
    }
}
