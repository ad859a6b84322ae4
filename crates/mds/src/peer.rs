//! A blocking connection to one metadata server: frames over TCP, one request at a time. The
//! MDS uses it to reach its peers (cross-server mkdir and rmdir, attributes of remote
//! directories); tests and tools use it as a minimal client.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use tessera_mds_proto::{encode_frame, frame_body_len, DecodeError, Frame, FsError, Message, Reply, Request, FRAME_HEADER_LEN};
use thiserror::Error;

/// How long a peer may take to answer one request before the connection is given up.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Error)]
pub enum PeerError {
    #[error("MDS connection: {0}")]
    Io(#[from] io::Error),
    #[error("MDS sent a malformed frame: {0}")]
    Decode(#[from] DecodeError),
    #[error("MDS answered request {got} while {expected} was outstanding")]
    Mismatch { expected: u64, got: u64 },
    #[error("MDS sent a request where a reply was due")]
    NotAReply,
}

/// Reads one frame body; `Ok(None)` on a clean end of stream before a header. The announced
/// length is checked before the body buffer is allocated.
pub fn read_frame_body(r: &mut impl Read) -> Result<Option<Vec<u8>>, PeerError> {
    let mut header = [0u8; FRAME_HEADER_LEN];
    match r.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = frame_body_len(header)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

pub struct MdsConnection {
    stream: TcpStream,
    next_id: u64,
}

impl MdsConnection {
    pub fn connect(addr: impl ToSocketAddrs) -> Result<MdsConnection, PeerError> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(PEER_TIMEOUT))?;
        Ok(MdsConnection { stream, next_id: 1 })
    }

    /// Sends one request and waits for its answer.
    pub fn call(&mut self, request: Request) -> Result<Result<Reply, FsError>, PeerError> {
        let request_id = self.next_id;
        self.next_id += 1;
        self.stream.write_all(&encode_frame(&Frame { request_id, message: Message::Request(request) }))?;
        let body = read_frame_body(&mut self.stream)?.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let frame = Frame::decode_body(&body)?;
        if frame.request_id != request_id {
            return Err(PeerError::Mismatch { expected: request_id, got: frame.request_id });
        }
        match frame.message {
            Message::Reply(r) => Ok(r),
            Message::Request(_) => Err(PeerError::NotAReply),
        }
    }
}
