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

use std::io::{self, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::Duration;

use tessera_mds_proto::{encode_frame, frame_body_len, Frame, FsError, InodeId, Message, Reply, Request, FRAME_HEADER_LEN};

use crate::config::MdsEntry;
use crate::error::{ClientError, MdsLinkError};

/// How long one metadata request may take before the connection is given up. Generous: a
/// create waits for CREATE on every OSD of the stripe.
pub const MDS_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle connections kept per server; more concurrent callers open (and then close) extra ones.
const IDLE_MAX: usize = 8;

/// Bytes read from a connection at a time: a reply's header and body usually arrive in one read.
const READ_BUFFER: usize = 16 * 1024;

/// One blocking connection: frames over TCP, one request at a time.
struct MdsLink {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    next_id: u64,
}

impl MdsLink {
    fn connect(addr: &str) -> io::Result<MdsLink> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(MDS_TIMEOUT))?;
        let reader = BufReader::with_capacity(READ_BUFFER, stream.try_clone()?);
        Ok(MdsLink { stream, reader, next_id: 1 })
    }

    /// Whether an idle connection can carry a request: nothing is waiting to be read on it (an
    /// idle connection has no reply due, so anything there is the server's end of stream, a
    /// reset, or bytes out of step). One non-blocking peek.
    fn is_open(&self) -> bool {
        if !self.reader.buffer().is_empty() {
            return false;
        }
        let mut byte = 0u8;
        // SAFETY: a one-byte buffer on the stack, valid for the call; MSG_PEEK leaves the
        // socket's data where it is and MSG_DONTWAIT keeps the call from blocking.
        let n = unsafe {
            libc::recv(self.stream.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
        };
        n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
    }

    fn call(&mut self, request: Request) -> Result<Result<Reply, FsError>, MdsLinkError> {
        let request_id = self.next_id;
        self.next_id += 1;
        self.stream.write_all(&encode_frame(&Frame { request_id, message: Message::Request(request) }))?;
        let mut header = [0u8; FRAME_HEADER_LEN];
        self.reader.read_exact(&mut header)?;
        // Checked before allocating, so a hostile length costs nothing.
        let mut body = vec![0u8; frame_body_len(header)?];
        self.reader.read_exact(&mut body)?;
        let frame = Frame::decode_body(&body)?;
        if frame.request_id != request_id {
            return Err(MdsLinkError::Mismatch { expected: request_id, got: frame.request_id });
        }
        match frame.message {
            Message::Reply(r) => Ok(r),
            Message::Request(_) => Err(MdsLinkError::NotAReply),
        }
    }
}

struct Server {
    addr: String,
    idle: Mutex<Vec<MdsLink>>,
}

impl Server {
    /// An idle connection that is still open, dropping those the server has closed.
    fn take_idle(&self) -> Option<MdsLink> {
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
}

impl MdsRouter {
    /// Prepares the router; connections open on first use.
    pub fn new(entries: &[MdsEntry]) -> MdsRouter {
        MdsRouter { servers: entries.iter().map(|e| Server { addr: e.addr.clone(), idle: Mutex::new(Vec::new()) }).collect() }
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
        let mut link = match server.take_idle() {
            Some(link) => link,
            None => MdsLink::connect(&server.addr).map_err(|e| link_error(e.into()))?,
        };
        let again = request.is_read_only().then(|| request.clone());
        let result = match (link.call(request), again) {
            (Ok(result), _) => result,
            (Err(MdsLinkError::Io(_)), Some(request)) => {
                link = MdsLink::connect(&server.addr).map_err(|e| link_error(e.into()))?;
                link.call(request).map_err(link_error)?
            }
            (Err(e), _) => return Err(link_error(e)),
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
    }
}
