//! [`Conn`]: one client connection of the event loop (`tcp.rs`), on a non-blocking socket:
//! the bytes read but not yet parsed, and the reply bytes the socket has not taken yet.
//!
//! - A frame's announced length is checked ([`frame_body_len`]) before any room is made for
//!   its body, so a connection holds at most one frame's worth of unparsed bytes plus one read.
//! - Sending never blocks: what the socket does not take waits here, and the loop asks to be
//!   told when the socket is writable again. A client that takes none of it for
//!   [`REPLY_WRITE_TIMEOUT`] is cut off.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tessera_mds_proto::{frame_body_len, DecodeError, FRAME_HEADER_LEN};

/// Bytes read from a connection at a time.
const READ_CHUNK: usize = 16 * 1024;
/// How long a reply may wait for a client to make room for it before the connection is closed.
pub const REPLY_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What reading a connection found.
pub enum Input {
    /// One whole frame body.
    Frame(Vec<u8>),
    /// Nothing more to read now.
    WouldBlock,
    /// The peer closed the connection (cleanly, between frames or not).
    Closed,
}

pub struct Conn {
    pub stream: TcpStream,
    /// Read but not yet parsed: `inbox[taken..]`.
    inbox: Vec<u8>,
    taken: usize,
    /// Reply bytes not yet taken by the socket: `outbox[sent..]`.
    outbox: Vec<u8>,
    sent: usize,
    /// When the socket last took reply bytes, while some still wait.
    stalled_since: Option<Instant>,
}

impl Conn {
    pub fn new(stream: TcpStream) -> io::Result<Conn> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, inbox: Vec::new(), taken: 0, outbox: Vec::new(), sent: 0, stalled_since: None })
    }

    /// The next whole frame, from what was read before or from the socket.
    pub fn next_frame(&mut self) -> Result<Input, DecodeError> {
        loop {
            if let Some(body) = self.parsed_frame()? {
                return Ok(Input::Frame(body));
            }
            match self.read_more() {
                Ok(0) => return Ok(Input::Closed),
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Input::WouldBlock),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!(%e, "MDS connection read failed");
                    return Ok(Input::Closed);
                }
            }
        }
    }

    /// A whole frame already read, if there is one.
    fn parsed_frame(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        let held = &self.inbox[self.taken..];
        if held.len() < FRAME_HEADER_LEN {
            return Ok(None);
        }
        let mut header = [0u8; FRAME_HEADER_LEN];
        header.copy_from_slice(&held[..FRAME_HEADER_LEN]);
        let len = frame_body_len(header)?;
        if held.len() < FRAME_HEADER_LEN + len {
            return Ok(None);
        }
        let start = self.taken + FRAME_HEADER_LEN;
        let body = self.inbox[start..start + len].to_vec();
        self.taken = start + len;
        Ok(Some(body))
    }

    fn read_more(&mut self) -> io::Result<usize> {
        if self.taken == self.inbox.len() {
            self.inbox.clear();
            self.taken = 0;
        } else if self.taken > 0 {
            self.inbox.drain(..self.taken);
            self.taken = 0;
        }
        let held = self.inbox.len();
        self.inbox.resize(held + READ_CHUNK, 0);
        let read = (&self.stream).read(&mut self.inbox[held..]);
        self.inbox.truncate(held + *read.as_ref().unwrap_or(&0));
        read
    }

    /// Queues `bytes` and sends what the socket takes now. Err: the connection is broken.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.outbox.is_empty() {
            // The common case: straight from the caller's buffer, nothing copied.
            let sent = self.write_some(bytes)?;
            if sent < bytes.len() {
                self.outbox.extend_from_slice(&bytes[sent..]);
                self.stalled_since = Some(Instant::now());
            }
            return Ok(());
        }
        self.outbox.extend_from_slice(bytes);
        self.flush()
    }

    /// Sends what waits, as far as the socket takes it. Err: the connection is broken.
    pub fn flush(&mut self) -> io::Result<()> {
        let rest = &self.outbox[self.sent..];
        let sent = {
            let stream = &self.stream;
            write_some(stream, rest)?
        };
        if sent > 0 {
            self.sent += sent;
            self.stalled_since = Some(Instant::now());
        }
        if self.sent == self.outbox.len() {
            self.outbox.clear();
            self.sent = 0;
            self.stalled_since = None;
        }
        Ok(())
    }

    fn write_some(&self, bytes: &[u8]) -> io::Result<usize> {
        write_some(&self.stream, bytes)
    }

    /// Reply bytes still wait for the socket.
    pub fn sending(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// When the waiting reply bytes time out, if any wait.
    pub fn send_deadline(&self) -> Option<Instant> {
        self.stalled_since.map(|t| t + REPLY_WRITE_TIMEOUT)
    }
}

/// Writes as much of `bytes` as the socket takes without waiting.
fn write_some(mut stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < bytes.len() {
        match stream.write(&bytes[sent..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}
