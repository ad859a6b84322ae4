//! The blocking TCP front of an [`Mds`]: one thread per connection, like the OSD target. A
//! connection reads a frame, answers it, and reads the next; requests on one connection are
//! answered in order. A create's reply is sent by the group commit round that makes it
//! durable (`outbox.rs`), so the connection thread goes straight back to its socket. A frame
//! whose header is bad ends the connection (the stream can no longer be trusted to be in
//! step); a body that does not decode gets an error reply with its request id when the id is
//! readable.

use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tessera_mds_proto::{encode_frame, Frame, FsError, Message};

use crate::outbox::Outbox;
use crate::peer::read_frame_body;
use crate::server::{Answer, Mds};

/// Bytes read from a connection at a time.
const READ_BUFFER: usize = 16 * 1024;
/// Connections served at once; further ones are closed at accept. Bounds threads and memory
/// (at most one frame buffer each).
pub const CONNECTIONS_MAX: usize = 1024;

/// Accepts connections on `listener` forever on a new thread.
pub fn spawn(listener: TcpListener, mds: Arc<Mds>) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let addr = listener.local_addr()?;
    let handle = std::thread::Builder::new().name(format!("mds-accept-{addr}")).spawn(move || accept_loop(listener, mds))?;
    Ok((addr, handle))
}

fn accept_loop(listener: TcpListener, mds: Arc<Mds>) {
    let live = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%e, "accept failed");
                continue;
            }
        };
        if live.fetch_add(1, Ordering::SeqCst) >= CONNECTIONS_MAX {
            live.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!("too many MDS connections; closing a new one");
            continue;
        }
        let (mds, live) = (mds.clone(), live.clone());
        let spawned = std::thread::Builder::new().name("mds-conn".into()).spawn(move || {
            if let Err(e) = serve_connection(stream, &mds) {
                tracing::debug!(%e, "MDS connection ended");
            }
            live.fetch_sub(1, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            tracing::warn!(%e, "cannot start a connection thread");
        }
    }
}

/// Serves one connection until the peer closes it or sends a bad header.
pub fn serve_connection(stream: TcpStream, mds: &Mds) -> Result<(), crate::peer::PeerError> {
    stream.set_nodelay(true)?;
    let out = Outbox::new(stream.try_clone()?)?;
    // Buffered: a small frame's header and body arrive in one read.
    let mut reader = BufReader::with_capacity(READ_BUFFER, stream);
    while let Some(body) = read_frame_body(&mut reader)? {
        // A reply still owed to this connection leaves first.
        out.wait_settled();
        let (request_id, answer) = match Frame::decode_body(&body) {
            Ok(Frame { request_id, message: Message::Request(request) }) => (request_id, mds.answer(request)),
            Ok(Frame { request_id, message: Message::Reply(_) }) => (request_id, Answer::Now(Err(FsError::Protocol))),
            Err(e) => match Frame::request_id_of(&body) {
                Some(id) => (id, Answer::Now(Err(e.fs_error()))),
                None => return Err(e.into()),
            },
        };
        let encode = move |result| encode_frame(&Frame { request_id, message: Message::Reply(result) });
        match answer {
            Answer::Now(result) => out.send(&encode(result))?,
            Answer::WhenDurable(pending, result) => {
                let ready = encode(result);
                out.owe();
                let out = out.clone();
                let asker = Arc::as_ptr(&out) as usize;
                mds.when_durable(
                    pending,
                    asker,
                    Box::new(move |durable| {
                        out.deliver(match durable {
                            Ok(()) => ready,
                            Err(e) => encode(Err(e)),
                        })
                    }),
                );
            }
        }
    }
    Ok(())
}
