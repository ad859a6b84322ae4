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
//!   commits of the others; meanwhile that connection reads nothing more, so such threads
//!   never pile up, and a round that finds the socket taken queues its reply on one too.

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
    /// Replies being finished by threads of their own (the client is not reading): the
    /// connection reads no further request meanwhile, so there are at most two.
    slow: u32,
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
        self.start_sending();
        let sent = (&self.stream).write_all(bytes);
        self.done_sending();
        sent
    }

    /// Marks a reply as owed, before handing [`Outbox::deliver`] to another thread.
    pub fn owe(&self) {
        self.lock().owed = true;
    }

    /// Returns once no reply is owed or being finished slowly.
    pub fn wait_settled(&self) {
        let mut s = self.lock();
        while s.owed || s.slow > 0 {
            s = self.wait(s);
        }
    }

    /// Sends the owed reply without blocking; what does not fit is finished on its own thread.
    /// The debt is cleared before the bytes leave (the socket is held meanwhile, so whatever
    /// the connection sends next still follows them): a client that answers at once must not
    /// find its connection thread still waiting for this thread to be scheduled again.
    pub fn deliver(self: &Arc<Self>, bytes: Vec<u8>) {
        if !self.try_start_sending() {
            // A slow reply of this connection holds the socket: queue behind it.
            self.finish_slowly(bytes, 0, true);
            return;
        }
        match send_without_waiting(&self.stream, &bytes) {
            Ok(sent) if sent == bytes.len() => self.done_sending(),
            Ok(sent) => self.finish_slowly(bytes, sent, false),
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

    /// Takes the socket unless someone holds it; clears the debt either way.
    fn try_start_sending(&self) -> bool {
        let mut s = self.lock();
        let taken = !s.sending;
        s.sending = true;
        if s.owed {
            s.owed = false;
            self.wake(&s);
        }
        taken
    }

    /// Takes the socket, waiting for another sender (the connection thread's own replies).
    fn start_sending(&self) {
        let mut s = self.lock();
        while s.sending {
            s = self.wait(s);
        }
        s.sending = true;
    }

    fn done_sending(&self) {
        let mut s = self.lock();
        s.sending = false;
        self.wake(&s);
    }

    /// Sends `bytes[from..]` on a thread of its own, blocking under the write timeout; `take`
    /// when the socket must first be waited for. The connection reads nothing more meanwhile.
    fn finish_slowly(self: &Arc<Self>, bytes: Vec<u8>, from: usize, take: bool) {
        self.lock().slow += 1;
        let me = self.clone();
        let finish = move || {
            if take {
                me.start_sending();
            }
            if let Err(e) = (&me.stream).write_all(&bytes[from..]) {
                tracing::debug!(%e, "a client did not take its reply; closing the connection");
                let _ = me.stream.shutdown(Shutdown::Both);
            }
            let mut s = me.lock();
            s.sending = false;
            s.slow -= 1;
            me.wake(&s);
        };
        if let Err(e) = std::thread::Builder::new().name("mds-slow-reply".into()).spawn(finish) {
            tracing::warn!(%e, "cannot start a thread for a slow reply; closing the connection");
            let _ = self.stream.shutdown(Shutdown::Both);
            let mut s = self.lock();
            if !take {
                s.sending = false;
            }
            s.slow -= 1;
            self.wake(&s);
        }
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

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;
    use std::sync::mpsc;

    use super::*;

    fn shrink(stream: &TcpStream, option: libc::c_int) {
        let size: libc::c_int = 4096;
        // SAFETY: a valid socket and a c_int option value of the given size.
        let set = unsafe {
            libc::setsockopt(stream.as_raw_fd(), libc::SOL_SOCKET, option, (&size as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t)
        };
        assert_eq!(set, 0);
    }

    #[test]
    fn a_reply_that_does_not_fit_never_blocks_the_sender_and_keeps_its_order() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nodelay(true).unwrap();
        shrink(&server, libc::SO_SNDBUF);
        shrink(&client, libc::SO_RCVBUF);
        let out = Outbox::new(server).unwrap();
        let big: Vec<u8> = (0..64 << 10).map(|i: u32| (i % 251) as u8).collect();
        let small = b"after the big one".to_vec();
        // Both deliveries return while the client reads nothing: the first does not fit, the
        // second finds the socket taken by it; both go to threads of their own.
        let (done, returned) = mpsc::channel();
        let sender = out.clone();
        let (b, s) = (big.clone(), small.clone());
        std::thread::spawn(move || {
            sender.owe();
            sender.deliver(b);
            sender.owe();
            sender.deliver(s);
            done.send(()).unwrap();
        });
        returned.recv_timeout(Duration::from_secs(20)).expect("deliver blocked on a client that does not read");
        // The connection must not read on while those replies are unsent.
        let (settled_tx, settled) = mpsc::channel();
        let waiter = out.clone();
        std::thread::spawn(move || {
            waiter.wait_settled();
            settled_tx.send(()).unwrap();
        });
        assert!(settled.recv_timeout(Duration::from_millis(300)).is_err(), "settled before the client read its replies");
        let mut got = vec![0u8; big.len() + small.len()];
        (&client).read_exact(&mut got).unwrap();
        assert!(got[..big.len()] == big[..], "the big reply arrived whole and first");
        assert_eq!(&got[big.len()..], &small[..]);
        settled.recv_timeout(Duration::from_secs(20)).expect("settled once both were sent");
    }
}
