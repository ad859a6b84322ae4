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
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// A reply is owed: the connection reads no further request.
    owed: bool,
    /// Someone is writing to the socket; others wait, so frames never interleave.
    sending: bool,
    /// Threads waiting on `changed` (a notify without waiters would still cost a syscall).
    waiters: u32,
}

impl Outbox {
    /// The sending side of `stream` (a clone of the connection's socket).
    pub fn new(stream: TcpStream) -> io::Result<Arc<Outbox>> {
        stream.set_write_timeout(Some(REPLY_WRITE_TIMEOUT))?;
        Ok(Arc::new(Outbox { stream, state: Mutex::new(State::default()), changed: Condvar::new() }))
    }

    /// Sends a reply now (the connection thread, with nothing owed).
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        self.start_sending(false);
        let sent = (&self.stream).write_all(bytes);
        self.done_sending();
        sent
    }

    /// Marks a reply as owed, before handing [`Outbox::deliver`] to another thread.
    pub fn owe(&self) {
        self.lock().owed = true;
    }

    /// Returns once no reply is owed.
    pub fn wait_settled(&self) {
        let mut s = self.lock();
        while s.owed {
            s = self.wait(s);
        }
    }

    /// Sends the owed reply without blocking; what does not fit is finished on its own thread.
    /// The debt is cleared before the bytes leave (the socket is held meanwhile, so whatever
    /// the connection sends next still follows them): a client that answers at once must not
    /// find its connection thread still waiting for this thread to be scheduled again.
    pub fn deliver(self: &Arc<Self>, bytes: Vec<u8>) {
        self.start_sending(true);
        match send_without_waiting(&self.stream, &bytes) {
            Ok(sent) if sent == bytes.len() => self.done_sending(),
            Ok(sent) => {
                let me = self.clone();
                let spawned = std::thread::Builder::new().name("mds-slow-reply".into()).spawn(move || {
                    if let Err(e) = (&me.stream).write_all(&bytes[sent..]) {
                        tracing::debug!(%e, "a client did not take its reply; closing the connection");
                        let _ = me.stream.shutdown(Shutdown::Both);
                    }
                    me.done_sending();
                });
                if let Err(e) = spawned {
                    tracing::warn!(%e, "cannot start a thread for a slow reply; closing the connection");
                    let _ = self.stream.shutdown(Shutdown::Both);
                    self.done_sending();
                }
            }
            Err(e) => {
                // The client is gone; its connection thread sees the end of the stream.
                tracing::debug!(%e, "reply not sent");
                let _ = self.stream.shutdown(Shutdown::Both);
                self.done_sending();
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the socket (waiting for another sender); `settles` clears the debt too.
    fn start_sending(&self, settles: bool) {
        let mut s = self.lock();
        while s.sending {
            s = self.wait(s);
        }
        s.sending = true;
        if settles && s.owed {
            s.owed = false;
            self.wake(&s);
        }
    }

    fn done_sending(&self) {
        let mut s = self.lock();
        s.sending = false;
        self.wake(&s);
    }

    fn wait<'a>(&self, mut s: std::sync::MutexGuard<'a, State>) -> std::sync::MutexGuard<'a, State> {
        s.waiters += 1;
        let mut s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        s.waiters -= 1;
        s
    }

    fn wake(&self, s: &State) {
        if s.waiters > 0 {
            self.changed.notify_all();
        }
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
