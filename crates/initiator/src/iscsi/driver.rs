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

use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::pdu::{NopOut, Pdu};

use super::login::{io_err, proto};
use super::rx::Activity;
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
            // Checked between reads: a read waits at most the liveness interval.
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(proto(&self.peer, "timed out waiting for the target"));
            }
            let activity = super::rx::read_one(self, &mut reader).and_then(|a| match a {
                Activity::Handled => Ok(()),
                Activity::Idle => self.ping_or_give_up(),
            });
            if let Err(e) = activity {
                let _ = self.socket.shutdown(std::net::Shutdown::Both);
                match &e {
                    TransportError::Unresponsive { secs, .. } => self.fail_all_with(|| TransportError::Unresponsive { peer: self.peer.clone(), secs: *secs }),
                    _ => self.fail_all(),
                }
                return Err(e);
            }
            self.rx.wake();
        }
    }

    /// The target said nothing for a liveness interval while someone waits on it. If the
    /// ping sent at the last such silence is still unanswered, the target is gone; otherwise
    /// ping it now (NOP-Out, RFC 7143 §11.18), unless another thread is writing (a write that
    /// makes no progress fails by itself, through the socket's write timeout).
    fn ping_or_give_up(&self) -> Result<(), TransportError> {
        let mut ping = self.ping.lock().expect("ping lock poisoned");
        if let Some((itt, slot)) = ping.take() {
            let answered = slot.state.lock().expect("slot lock poisoned").done.is_some();
            self.unregister(itt);
            if !answered {
                return Err(TransportError::Unresponsive { peer: self.peer.clone(), secs: self.liveness.as_secs() * 2 });
            }
        }
        let Ok(mut tx) = self.tx.try_lock() else { return Ok(()) };
        let (itt, slot) = self.register(0, 0);
        let cmd_sn = self.window.lock().expect("window lock poisoned").next_cmd_sn;
        let exp_stat_sn = self.exp_stat_sn.load(std::sync::atomic::Ordering::Acquire);
        let nop = Pdu::NopOut(NopOut { immediate: true, lun: 0, itt, ttt: RESERVED_TAG, cmd_sn, exp_stat_sn });
        tx.write_pdu(&nop, &[]).map_err(|e| io_err(&self.peer, e))?;
        *ping = Some((itt, slot));
        Ok(())
    }
}
