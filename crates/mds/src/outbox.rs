//! [`Outbox`]: the sending side of one client connection, shared by its connection thread
//! (replies ready at once) and whichever thread finishes the group commit round that makes a
//! create durable (the create's reply, `commit.rs`).
//!
//! - At most one reply is owed at a time: the connection thread reads no further request while
//!   one is owed ([`Outbox::wait_settled`]), so replies leave in request order. A client that
//!   waits for each reply before its next request never waits here.
//! - The round's thread never blocks on a client: it sends without waiting. A reply that does
//!   not fit in the socket's buffer (a client that stopped reading) is finished by a thread of
//!   its own under the connection's write timeout, so one slow client never holds up the
//!   commits of the others.

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How long a reply may wait for a client to make room for it before the connection is closed.
pub const REPLY_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Outbox {
    stream: TcpStream,
    owed: Mutex<bool>,
    settled: Condvar,
}

impl Outbox {
    /// The sending side of `stream` (a clone of the connection's socket).
    pub fn new(stream: TcpStream) -> io::Result<Arc<Outbox>> {
        stream.set_write_timeout(Some(REPLY_WRITE_TIMEOUT))?;
        Ok(Arc::new(Outbox { stream, owed: Mutex::new(false), settled: Condvar::new() }))
    }

    /// Sends a reply now (the connection thread, with nothing owed).
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        (&self.stream).write_all(bytes)
    }

    /// Marks a reply as owed, before handing [`Outbox::deliver`] to another thread.
    pub fn owe(&self) {
        *self.owed.lock().unwrap_or_else(|p| p.into_inner()) = true;
    }

    /// Returns once no reply is owed.
    pub fn wait_settled(&self) {
        let mut owed = self.owed.lock().unwrap_or_else(|p| p.into_inner());
        while *owed {
            owed = self.settled.wait(owed).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Sends the owed reply without blocking; what does not fit is finished on its own thread.
    pub fn deliver(self: &Arc<Self>, bytes: Vec<u8>) {
        match send_without_waiting(&self.stream, &bytes) {
            Ok(sent) if sent == bytes.len() => self.settle(),
            Ok(sent) => {
                let me = self.clone();
                let spawned = std::thread::Builder::new().name("mds-slow-reply".into()).spawn(move || {
                    if let Err(e) = (&me.stream).write_all(&bytes[sent..]) {
                        tracing::debug!(%e, "a client did not take its reply; closing the connection");
                        let _ = me.stream.shutdown(Shutdown::Both);
                    }
                    me.settle();
                });
                if let Err(e) = spawned {
                    tracing::warn!(%e, "cannot start a thread for a slow reply; closing the connection");
                    let _ = self.stream.shutdown(Shutdown::Both);
                    self.settle();
                }
            }
            Err(e) => {
                // The client is gone; its connection thread sees the end of the stream.
                tracing::debug!(%e, "reply not sent");
                let _ = self.stream.shutdown(Shutdown::Both);
                self.settle();
            }
        }
    }

    fn settle(&self) {
        *self.owed.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.settled.notify_all();
    }
}

/// Writes as much of `bytes` as the socket takes now; returns how much that was.
fn send_without_waiting(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        // SAFETY: `rest` is a live buffer of `rest.len()` bytes and the descriptor is open for
        // as long as `stream` lives.
        let n = unsafe {
            libc::send(stream.as_raw_fd(), rest.as_ptr().cast(), rest.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if n >= 0 {
            sent += n as usize;
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(sent),
            _ => return Err(e),
        }
    }
    Ok(sent)
}
