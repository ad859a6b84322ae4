//! [`MdsConnection`]: the one blocking adapter over the codec. Frames over TCP, one request at
//! a time: the client library's connections to metadata servers, a server's connections to its
//! peers, and tools and tests all use it. The servers' own side is an event loop
//! (`tessera-mds`), which frames with the same functions.
//!
//! A connection kept idle between calls can die without anyone noticing, for instance when its
//! server restarts. [`MdsConnection::is_open`] tells, before a request is sent on it.
//!
//! A call whose reply is slow asks, after [`PROBE_AFTER`] of silence, whether the server still
//! answers a cheap request on a new connection. A server that is busy with this request (it
//! waits on an OSD, say) answers, and the call waits on, up to its timeout. A stopped or hung
//! server, or one whose host is cut off, does not, and the call fails then
//! ([`ConnectionError::Silent`]) instead of at its timeout.

use std::io::{self, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::identity::Challenge;
use crate::seal::{self, End, Seal, SessionKey};
use crate::{encode_request_frame, Caller, DecodeError, Frame, FsError, Message, Proof, Reply, Request, FRAME_HEADER_LEN};

/// How long a call waits for its reply by default before the connection is given up. Generous:
/// a create may wait for CREATE on every OSD of its stripe when a pool runs dry.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a request that [runs long](Request::runs_long) may take. The probe below still
/// ends the wait within seconds when the server stops answering; this bound only keeps a
/// server that answers probes but never replies from holding the caller for ever.
pub const LONG_REPLY_TIMEOUT: Duration = Duration::from_secs(3600);

/// Silence after which a waiting call asks the server whether it is still there.
pub const PROBE_AFTER: Duration = Duration::from_secs(5);
/// How long that question may take, connection included.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Bytes read from the socket at a time: a reply's header and body usually arrive in one read.
const READ_BUFFER: usize = 16 * 1024;

/// Why a call got no reply: the connection is then unusable and should be dropped.
#[derive(Debug, Error)]
pub enum ConnectionError {
    #[error("{}{}", .0, refused_hint(.0))]
    Io(#[from] io::Error),
    #[error("malformed frame: {0}")]
    Decode(#[from] DecodeError),
    #[error("answered request {got} while {expected} was outstanding")]
    Mismatch { expected: u64, got: u64 },
    #[error("sent a request where a reply was due")]
    NotAReply,
    /// Nothing answered within the connection's timeout: a stopped or hung server, or an
    /// address that is not a metadata server's.
    #[error("no reply within {secs} s (is the metadata server stopped or hung, or is this address another daemon's?)")]
    NoReply { secs: u64 },
    /// No reply for a while, and the server did not answer a new connection's request either.
    #[error("no reply for {secs} s, and no answer on a new connection either (is the metadata server stopped or hung, or its host cut off?)")]
    Silent { secs: u64 },
}

/// What to check when nothing listens at the address.
fn refused_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => " (is the metadata server running? `tessera status` shows every daemon)",
        // A server closes a new connection beyond the most it serves (its log says so).
        io::ErrorKind::ConnectionReset => " (the metadata server closed the connection: it may have stopped, or be serving all the connections it takes; its log says which)",
        _ => "",
    }
}

impl ConnectionError {
    /// True when the connection was closed or reset under the call, the case in which a
    /// request that changes nothing may be sent again on a new connection. A timeout is not
    /// one: the server is still there, only slow, and asking again would double the wait.
    pub fn is_lost(&self) -> bool {
        use io::ErrorKind as K;
        matches!(self, ConnectionError::Io(e) if matches!(e.kind(), K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::NotConnected))
    }
}

pub struct MdsConnection {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    next_id: u64,
    timeout: Duration,
    /// The user every request on this connection is sent for.
    caller: Caller,
    /// Every frame is sealed once the user is proven (`seal.rs`).
    seal: Option<Seal>,
}

impl MdsConnection {
    /// Connects with TCP_NODELAY; a call waits at most [`REPLY_TIMEOUT`] for its reply.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<MdsConnection> {
        Self::connect_with_timeout(addr, REPLY_TIMEOUT)
    }

    /// Connects with TCP_NODELAY; a call waits at most `timeout` for its reply.
    /// Connecting, too, gives up after `timeout` per address (an unreachable host would
    /// otherwise hold the caller for the kernel's SYN retries).
    pub fn connect_with_timeout(addr: impl ToSocketAddrs, timeout: Duration) -> io::Result<MdsConnection> {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to connect to");
        let mut connected = None;
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    connected = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let stream = connected.ok_or(last)?;
        stream.set_nodelay(true)?;
        // Reads wake at least every PROBE_AFTER, so a silence can be looked into (`read_reply`).
        stream.set_read_timeout(Some(timeout.min(PROBE_AFTER)))?;
        stream.set_write_timeout(Some(timeout))?;
        let reader = BufReader::with_capacity(READ_BUFFER, stream.try_clone()?);
        Ok(MdsConnection { stream, reader, next_id: 1, timeout, caller: Caller::of_process(), seal: None })
    }

    /// Sends every later request for `caller` instead of this process's own user (a server
    /// calling a peer sends for [`Caller::ROOT`]; a client may act for a user it names).
    pub fn with_caller(mut self, caller: Caller) -> MdsConnection {
        self.caller = caller;
        self
    }

    /// The first step of proving this connection's user (`identity.rs`): the server's
    /// challenge, which a proof sent with `Request::Authenticate` must answer.
    pub fn challenge(&mut self) -> Result<Result<Challenge, FsError>, ConnectionError> {
        Ok(match self.call(&Request::Challenge)? {
            Ok(Reply::Challenge(c)) => Ok(c),
            Ok(_) => Err(FsError::Protocol),
            Err(e) => Err(e),
        })
    }

    /// The second step: sends `proof` (made for this connection's challenge). When the server
    /// accepts it, every later frame both ways is sealed under `session`, the key the proof
    /// gives (`seal.rs`). A server that accepts it without sealing (one that believes its
    /// callers and so cannot derive the key) is refused here as `Protocol`: a client that
    /// proves its user talks only to a server that can seal, so nothing impersonates one.
    pub fn authenticate(&mut self, proof: Proof, session: &SessionKey) -> Result<Result<(), FsError>, ConnectionError> {
        Ok(match self.call(&Request::Authenticate { proof })? {
            Ok(Reply::Sealed) => {
                self.seal = Some(Seal::new(session, End::Client));
                Ok(())
            }
            Ok(_) => Err(FsError::Protocol),
            Err(e) => Err(e),
        })
    }

    /// Whether this connection's frames are sealed.
    pub fn is_sealed(&self) -> bool {
        self.seal.is_some()
    }

    /// Sends one request and waits for its answer: the server's result, or why none came.
    pub fn call(&mut self, request: &Request) -> Result<Result<Reply, FsError>, ConnectionError> {
        let request_id = self.next_id;
        self.next_id += 1;
        let timed_out = |e: io::Error| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ConnectionError::NoReply { secs: self.timeout.as_secs() },
            _ => ConnectionError::Io(e),
        };
        let mut frame = encode_request_frame(request_id, &self.caller, request);
        if let Some(seal) = &mut self.seal {
            seal.seal_frame(&mut frame);
        }
        self.stream.write_all(&frame).map_err(timed_out)?;
        let limit = if request.runs_long() { self.timeout.max(LONG_REPLY_TIMEOUT) } else { self.timeout };
        let since = Instant::now();
        let deadline = since + limit;
        let mut header = [0u8; FRAME_HEADER_LEN];
        self.read_reply(&mut header, deadline, since)?;
        // Checked before allocating, so a hostile length costs nothing.
        let mut body = vec![0u8; seal::body_len(self.seal.as_ref(), header)?];
        self.read_reply(&mut body, deadline, since)?;
        if let Some(seal) = &mut self.seal {
            seal.open_body(&mut body)?;
        }
        let frame = Frame::decode_body(&body)?;
        if frame.request_id != request_id {
            return Err(ConnectionError::Mismatch { expected: request_id, got: frame.request_id });
        }
        match frame.message {
            Message::Reply(r) => Ok(r),
            Message::Request(..) => Err(ConnectionError::NotAReply),
        }
    }

    /// Fills `buf` from the reply stream. Each read waits at most [`PROBE_AFTER`]; a silence
    /// that long is answered by [`server_answers`], and the call fails when the server does not
    /// answer that either, or when `deadline` has passed.
    fn read_reply(&mut self, buf: &mut [u8], deadline: Instant, since: Instant) -> Result<(), ConnectionError> {
        let mut got = 0;
        while got < buf.len() {
            match self.reader.read(&mut buf[got..]) {
                Ok(0) => return Err(ConnectionError::Io(io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    // Too little time left to ask (a probe's own connection never asks, as
                    // its timeout is the probe's): the timeout stands.
                    if Instant::now() + PROBE_TIMEOUT >= deadline {
                        return Err(ConnectionError::NoReply { secs: (deadline - since).as_secs() });
                    }
                    let Ok(peer) = self.stream.peer_addr() else { return Err(ConnectionError::Io(e)) };
                    if !server_answers(peer) {
                        return Err(ConnectionError::Silent { secs: since.elapsed().as_secs() });
                    }
                }
                Err(e) => return Err(ConnectionError::Io(e)),
            }
        }
        Ok(())
    }

    /// Whether an idle connection can carry a request: nothing is waiting to be read on it. No
    /// reply is due on an idle connection, so anything there is the server's end of stream, a
    /// reset, or bytes out of step. One non-blocking peek.
    pub fn is_open(&self) -> bool {
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
}

/// Whether the server at `peer` answers a request that needs nothing but its event loop
/// (the cluster map), on a new connection, within [`PROBE_TIMEOUT`].
fn server_answers(peer: std::net::SocketAddr) -> bool {
    MdsConnection::connect_with_timeout(peer, PROBE_TIMEOUT).map(|mut c| c.call(&Request::ClusterMap)).is_ok_and(|r| r.is_ok())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::{decode_frame, encode_frame, frame_body_len, InodeId};

    /// Goal: a connection reads as open while its server holds it, and as closed once the
    /// server has closed it, before any request is sent.
    #[test]
    fn a_connection_its_server_closed_reads_as_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let conn = MdsConnection::connect_with_timeout(addr, Duration::from_secs(5)).unwrap();
        let (server_side, _) = listener.accept().unwrap();
        assert!(conn.is_open());
        drop(server_side);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while conn.is_open() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!conn.is_open());
    }

    /// Goal: a connection closed under a call reads as lost (a request that changes nothing may
    /// go again); a reply that does not come in time does not (asking again would double the
    /// wait on a server that is only slow).
    #[test]
    fn a_closed_connection_is_lost_and_a_timeout_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut closed, _) = listener.accept().unwrap();
            let mut buf = [0u8; 64];
            let _ = closed.read(&mut buf);
            drop(closed);
            let (silent, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_millis(500));
            drop(silent);
        });
        let mut conn = MdsConnection::connect_with_timeout(addr, Duration::from_secs(5)).unwrap();
        let closed = conn.call(&Request::StatFs).unwrap_err();
        assert!(closed.is_lost(), "{closed:?}");
        let mut conn = MdsConnection::connect_with_timeout(addr, Duration::from_millis(100)).unwrap();
        let slow = conn.call(&Request::StatFs).unwrap_err();
        assert!(!slow.is_lost(), "{slow:?}");
        assert!(matches!(slow, ConnectionError::NoReply { .. }), "a silent server is named as such: {slow:?}");
        server.join().unwrap();
    }

    /// Goal: a reply to another request id is refused, not taken for this call's.
    #[test]
    fn a_reply_to_another_request_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            let frame = decode_frame(&buf[..n]).unwrap();
            let reply = Frame { request_id: frame.request_id + 1, message: Message::Reply(Err(FsError::NotFound)) };
            s.write_all(&encode_frame(&reply)).unwrap();
        });
        let mut conn = MdsConnection::connect_with_timeout(addr, Duration::from_secs(5)).unwrap();
        let got = conn.call(&Request::GetAttr { ino: InodeId::ROOT });
        assert!(matches!(got, Err(ConnectionError::Mismatch { expected: 1, got: 2 })), "{got:?}");
        server.join().unwrap();
    }

    /// A fake server: answers the probe's ClusterMap on new connections at once, and the
    /// first connection's request only after `delay`.
    fn slow_server(delay: Duration) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut first, _) = listener.accept().unwrap();
            let request = read_frame(&mut first);
            listener.set_nonblocking(true).unwrap();
            let started = Instant::now();
            while started.elapsed() < delay {
                match listener.accept() {
                    Ok((mut probe, _)) => {
                        probe.set_nonblocking(false).unwrap();
                        let frame = read_frame(&mut probe);
                        let answer = Frame { request_id: frame.request_id, message: Message::Reply(Err(FsError::NotFound)) };
                        let _ = probe.write_all(&encode_frame(&answer));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            let reply = Frame { request_id: request.request_id, message: Message::Reply(Err(FsError::NotFound)) };
            let _ = first.write_all(&encode_frame(&reply));
        });
        (addr, server)
    }

    fn read_frame(s: &mut std::net::TcpStream) -> Frame {
        let mut header = [0u8; FRAME_HEADER_LEN];
        s.read_exact(&mut header).unwrap();
        let mut body = vec![0u8; frame_body_len(header).unwrap()];
        s.read_exact(&mut body).unwrap();
        Frame::decode_body(&body).unwrap()
    }

    /// Goal: a request that walks whole stores (repair) waits past the connection's reply
    /// timeout for as long as its server answers the probe, where any other request gives up
    /// at the timeout. Method: a fake server that answers probes at once and the request after
    /// 6 s, against a connection whose timeout is 4 s.
    #[test]
    fn a_repair_outlasts_the_reply_timeout_while_its_server_answers() {
        let (addr, server) = slow_server(Duration::from_secs(6));
        let mut conn = MdsConnection::connect_with_timeout(addr, Duration::from_secs(4)).unwrap();
        let got = conn.call(&Request::Repair { remove: false, older_than_secs: 3600 });
        assert!(matches!(got, Ok(Err(FsError::NotFound))), "the repair got its answer: {got:?}");
        server.join().unwrap();

        let (addr, server) = slow_server(Duration::from_secs(6));
        let mut conn = MdsConnection::connect_with_timeout(addr, Duration::from_secs(4)).unwrap();
        let got = conn.call(&Request::StatFs);
        assert!(matches!(got, Err(ConnectionError::NoReply { secs: 4 })), "a stat gives up at the timeout: {got:?}");
        server.join().unwrap();
    }
}
