//! Who reads the socket: the threads that wait for it, in turn ("leader/follower"). A caller
//! waiting for its response, an R2T or an open CmdSN window becomes the reader when nobody else
//! is reading, handles every PDU that arrives (routing others' to their slots) until its own
//! condition holds, then hands the role on. Why: a dedicated reader thread costs one thread
//! wake-up per round trip, which on a loaded 2-core node is a large part of a GET ATTRIBUTES
//! round trip (`tessera bench attr`); with one command in flight the caller now reads its own
//! answer. Followers sleep on one condition variable and are woken only when one exists.

use std::net::TcpStream;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use tessera_iscsi::PduReader;
use tessera_scsi::TransportError;

use super::login::proto;
use super::session::Inner;

#[derive(Default)]
struct RxState {
    leader: bool,
    followers: usize,
}

pub(crate) struct Receiver {
    reader: Mutex<PduReader<TcpStream>>,
    state: Mutex<RxState>,
    progress: Condvar,
}

impl Receiver {
    pub fn new(reader: PduReader<TcpStream>) -> Self {
        Receiver { reader: Mutex::new(reader), state: Mutex::new(RxState::default()), progress: Condvar::new() }
    }

    /// Wakes followers after something they may wait for changed (a PDU was handled, a slot
    /// was completed from outside, the session died).
    pub fn wake(&self) {
        let st = self.state.lock().expect("rx state poisoned");
        if st.followers > 0 {
            self.progress.notify_all();
        }
    }
}

impl Inner {
    /// Returns once `done()` holds, reading and dispatching PDUs meanwhile whenever no other
    /// thread is. `done` may lock slot or window state but must not lock the receiver.
    pub(crate) fn drive_until(&self, deadline: Option<Instant>, mut done: impl FnMut() -> bool) -> Result<(), TransportError> {
        loop {
            if done() {
                return Ok(());
            }
            if self.closed.load(std::sync::atomic::Ordering::Acquire) {
                return Err(self.closed_error());
            }
            {
                let mut st = self.rx.state.lock().expect("rx state poisoned");
                if st.leader {
                    // Checked again under the lock the leader takes to wake us: no lost wake-up.
                    if done() {
                        return Ok(());
                    }
                    st.followers += 1;
                    st = match deadline {
                        None => self.rx.progress.wait(st).expect("rx state poisoned"),
                        Some(d) => self.rx.progress.wait_timeout(st, d.saturating_duration_since(Instant::now())).expect("rx state poisoned").0,
                    };
                    st.followers -= 1;
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(proto(&self.peer, "timed out waiting for the target"));
                    }
                    continue;
                }
                st.leader = true;
            }
            let result = self.lead(deadline, &mut done);
            self.rx.state.lock().expect("rx state poisoned").leader = false;
            // Someone may be waiting to take over the reading.
            self.rx.progress.notify_all();
            return result;
        }
    }

    fn lead(&self, deadline: Option<Instant>, done: &mut impl FnMut() -> bool) -> Result<(), TransportError> {
        let mut reader = self.rx.reader.lock().expect("reader poisoned");
        loop {
            if done() {
                return Ok(());
            }
            if self.closed.load(std::sync::atomic::Ordering::Acquire) {
                return Err(self.closed_error());
            }
            if let Some(d) = deadline {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(proto(&self.peer, "timed out waiting for the target"));
                }
                let _ = self.socket.set_read_timeout(Some(left));
            }
            let handled = super::rx::read_one(self, &mut reader);
            if deadline.is_some() {
                let _ = self.socket.set_read_timeout(None);
            }
            if let Err(e) = handled {
                let _ = self.socket.shutdown(std::net::Shutdown::Both);
                self.fail_all();
                return Err(e);
            }
            self.rx.wake();
        }
    }
}
