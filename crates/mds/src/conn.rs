//! [`Conn`]: one client connection of the event loop (`tcp.rs`), on a non-blocking socket:
//! the bytes read but not yet parsed, and the reply bytes the socket has not taken yet.
//!
//! - A frame's announced length is checked ([`frame_body_len`]) before any room is made for
//!   its body, so a connection holds at most one frame's worth of unparsed bytes plus one read.
//! - Sending never blocks: what the socket does not take waits here, and the loop asks to be
//!   told when the socket is writable again. A client that takes none of it for
//!   [`REPLY_WRITE_TIMEOUT`] is cut off.
//! - Once its user is proven the connection is sealed ([`Conn::start_sealing`]): frames are
//!   opened as they are parsed and sealed as they are sent, so the loop and the workers see
//!   plain frames only.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tessera_mds_proto::seal::{self, End, Seal};
use tessera_mds_proto::{DecodeError, SessionKey, FRAME_HEADER_LEN};

/// Bytes read from a connection at a time.
const READ_CHUNK: usize = 16 * 1024;
/// Room kept for a connection's unparsed bytes once empty.
const INBOX_KEPT: usize = 4 * READ_CHUNK;
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
    /// Read but not yet parsed: `inbox[taken..filled]`.
    inbox: Vec<u8>,
    taken: usize,
    filled: usize,
    /// Reply bytes not yet taken by the socket: `outbox[sent..]`.
    outbox: Vec<u8>,
    sent: usize,
    /// When the socket last took reply bytes, while some still wait.
    stalled_since: Option<Instant>,
    /// What this connection has shown of its user (`proven.rs`).
    pub identity: crate::proven::Identity,
    /// Frames both ways are sealed from here on (`tessera_mds_proto::seal`).
    seal: Option<Seal>,
}

impl Conn {
    pub fn new(stream: TcpStream) -> io::Result<Conn> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, inbox: Vec::new(), taken: 0, filled: 0, outbox: Vec::new(), sent: 0, stalled_since: None, identity: Default::default(), seal: None })
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

    /// Whether a whole frame has been read and not yet taken (a client that pipelines).
    pub fn holds_frame(&self) -> bool {
        let held = &self.inbox[self.taken..self.filled];
        held.len() >= FRAME_HEADER_LEN && {
            let mut header = [0u8; FRAME_HEADER_LEN];
            header.copy_from_slice(&held[..FRAME_HEADER_LEN]);
            seal::body_len(self.seal.as_ref(), header).map_or(true, |len| held.len() >= FRAME_HEADER_LEN + len)
        }
    }

    /// A whole frame already read, if there is one.
    fn parsed_frame(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        let held = &self.inbox[self.taken..self.filled];
        if held.len() < FRAME_HEADER_LEN {
            return Ok(None);
        }
        let mut header = [0u8; FRAME_HEADER_LEN];
        header.copy_from_slice(&held[..FRAME_HEADER_LEN]);
        let len = seal::body_len(self.seal.as_ref(), header)?;
        if held.len() < FRAME_HEADER_LEN + len {
            return Ok(None);
        }
        let start = self.taken + FRAME_HEADER_LEN;
        let mut body = self.inbox[start..start + len].to_vec();
        self.taken = start + len;
        if let Some(seal) = &mut self.seal {
            seal.open_body(&mut body)?;
        }
        Ok(Some(body))
    }

    /// Reads into the room after what is held; the buffer keeps its length (zeroed once), so
    /// a read costs no clearing of memory.
    fn read_more(&mut self) -> io::Result<usize> {
        if self.taken == self.filled {
            self.taken = 0;
            self.filled = 0;
            if self.inbox.len() > INBOX_KEPT {
                // A large frame has gone: do not keep its room for the connection's life.
                self.inbox = Vec::new();
            }
        } else if self.taken > 0 && self.inbox.len() - self.filled < READ_CHUNK {
            self.inbox.copy_within(self.taken..self.filled, 0);
            self.filled -= self.taken;
            self.taken = 0;
        }
        if self.inbox.len() - self.filled < READ_CHUNK {
            self.inbox.resize(self.filled + READ_CHUNK, 0);
        }
        let read = (&self.stream).read(&mut self.inbox[self.filled..]);
        if let Ok(n) = read {
            self.filled += n;
        }
        read
    }

    /// Seals every frame from here on, both ways, under `key`: frames already read but not yet
    /// parsed included, since the client seals everything after its proof.
    pub fn start_sealing(&mut self, key: &SessionKey) {
        self.seal = Some(Seal::new(key, End::Server));
    }

    /// Queues the encoded frame `frame` (sealed first, on a sealed connection) and sends what
    /// the socket takes now. Err: the connection is broken.
    pub fn send(&mut self, mut frame: Vec<u8>) -> io::Result<()> {
        if let Some(seal) = &mut self.seal {
            seal.seal_frame(&mut frame);
        }
        let bytes = &frame[..];
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

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use proptest::prelude::*;

    use super::*;

    /// A real loopback connection: the client's end, and the server's as a [`Conn`].
    fn pair() -> (TcpStream, Conn) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, Conn::new(server).unwrap())
    }

    /// Everything the connection yields until the client's bytes are used up: the frames,
    /// and whether it stopped at a bad header.
    fn drain(conn: &mut Conn, client: TcpStream) -> (Vec<Vec<u8>>, bool) {
        drop(client);
        let mut frames = Vec::new();
        loop {
            match conn.next_frame() {
                Ok(Input::Frame(f)) => frames.push(f),
                Ok(Input::WouldBlock) => std::thread::sleep(Duration::from_millis(1)),
                Ok(Input::Closed) => return (frames, false),
                Err(_) => return (frames, true),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Frames sent in pieces of any size come out whole and in order.
        #[test]
        fn frames_come_out_whole_however_the_bytes_arrive(
            bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 9..3000), 1..8),
            piece in 1usize..5000,
        ) {
            let (mut client, mut conn) = pair();
            let mut bytes = Vec::new();
            for b in &bodies {
                bytes.extend_from_slice(&(b.len() as u32).to_be_bytes());
                bytes.extend_from_slice(b);
            }
            for chunk in bytes.chunks(piece) {
                client.write_all(chunk).unwrap();
            }
            let (frames, bad) = drain(&mut conn, client);
            prop_assert!(!bad);
            prop_assert_eq!(frames, bodies);
        }

        /// Any bytes at all: never a panic, and nothing past a bad header is parsed.
        #[test]
        fn any_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
            let (mut client, mut conn) = pair();
            client.write_all(&bytes).unwrap();
            let (frames, _) = drain(&mut conn, client);
            prop_assert!(frames.iter().map(|f| f.len() + FRAME_HEADER_LEN).sum::<usize>() <= bytes.len());
        }
    }
}
