//! Session reinstatement (RFC 7143 §6.3.5): a login whose initiator port (InitiatorName and
//! ISID) names a session that is still live here replaces it. The old session's connection is
//! closed and the new login is answered only once every task of the old one has ended: its
//! reader has stopped taking Data-Out, its queued commands are dropped and the one running has
//! returned. An initiator that resends a lost command on the reinstated session therefore never
//! races a copy of it still queued behind the dead connection (docs/architecture.md).

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a reinstating login waits for the old session's running command; past this the
/// login is refused (Service unavailable) rather than left hanging.
pub(crate) const REINSTATEMENT_WAIT: Duration = Duration::from_secs(10);

/// Live normal sessions by initiator port (`name,i,0xISID`).
#[derive(Default)]
pub(crate) struct PortSessions {
    live: Mutex<HashMap<String, Live>>,
}

struct Live {
    session_id: u64,
    /// A clone of the session's socket, to close it from the reinstating login's thread.
    socket: TcpStream,
    ended: Arc<Ended>,
}

/// Set once a session's connection threads have both returned.
#[derive(Default)]
struct Ended {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Ended {
    fn wait_until(&self, deadline: Instant) -> bool {
        let mut done = self.done.lock().expect("ended lock poisoned");
        while !*done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            done = self.cv.wait_timeout(done, left).expect("ended lock poisoned").0;
        }
        true
    }

    fn set(&self) {
        *self.done.lock().expect("ended lock poisoned") = true;
        self.cv.notify_all();
    }
}

/// The old session did not end within the wait.
#[derive(Debug)]
pub(crate) struct StillEnding;

/// A session's hold on its initiator port. Dropped when the connection has fully ended: the
/// port is free again and a login waiting to reinstate it goes on.
pub(crate) struct PortClaim {
    ports: Arc<PortSessions>,
    port: String,
    session_id: u64,
    ended: Arc<Ended>,
    /// This login replaced a live session.
    pub reinstated: bool,
}

impl Drop for PortClaim {
    fn drop(&mut self) {
        let mut live = self.ports.live.lock().expect("port sessions lock poisoned");
        if live.get(&self.port).is_some_and(|l| l.session_id == self.session_id) {
            live.remove(&self.port);
        }
        drop(live);
        self.ended.set();
    }
}

impl PortSessions {
    /// Claims `port` for the new session `session_id`, first ending any live session that
    /// holds it (closing its socket and waiting up to `wait` for its threads).
    pub fn claim(self: &Arc<Self>, port: &str, session_id: u64, socket: TcpStream, wait: Duration) -> Result<PortClaim, StillEnding> {
        let deadline = Instant::now() + wait;
        let mut reinstated = false;
        loop {
            let mut live = self.live.lock().expect("port sessions lock poisoned");
            let Some(old) = live.get(port) else {
                let ended = Arc::new(Ended::default());
                live.insert(port.to_string(), Live { session_id, socket, ended: ended.clone() });
                return Ok(PortClaim { ports: self.clone(), port: port.to_string(), session_id, ended, reinstated });
            };
            let ended = old.ended.clone();
            // Wakes the old reader (its read ends) and fails the old executor's next send.
            let _ = old.socket.shutdown(Shutdown::Both);
            drop(live);
            if !ended.wait_until(deadline) {
                return Err(StillEnding);
            }
            reinstated = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn socket_pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn a_free_port_is_claimed_at_once_and_freed_on_drop() {
        let ports = Arc::new(PortSessions::default());
        let (s, _peer) = socket_pair();
        let claim = ports.claim("i,0x1", 1, s, Duration::ZERO).unwrap();
        assert!(!claim.reinstated);
        drop(claim);
        let (s2, _peer2) = socket_pair();
        assert!(!ports.claim("i,0x1", 2, s2, Duration::ZERO).unwrap().reinstated, "the port was freed");
    }

    #[test]
    fn a_claim_on_a_live_port_closes_it_and_waits_for_its_end() {
        let ports = Arc::new(PortSessions::default());
        let (s, mut peer) = socket_pair();
        let old = ports.claim("i,0x1", 1, s, Duration::ZERO).unwrap();
        let (s2, _peer2) = socket_pair();
        let ports2 = ports.clone();
        let waiting = std::thread::spawn(move || ports2.claim("i,0x1", 2, s2, Duration::from_secs(10)).map(|c| c.reinstated));
        // The old connection's peer sees it closed while the new claim waits.
        let mut buf = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut peer, &mut buf).unwrap(), 0);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiting.is_finished(), "the new claim waits for the old session to end");
        drop(old);
        assert!(waiting.join().unwrap().unwrap(), "then it goes on, as a reinstatement");
    }

    #[test]
    fn a_session_that_does_not_end_in_time_refuses_the_claim() {
        let ports = Arc::new(PortSessions::default());
        let (s, _peer) = socket_pair();
        let _old = ports.claim("i,0x1", 1, s, Duration::ZERO).unwrap();
        let (s2, _peer2) = socket_pair();
        assert!(ports.claim("i,0x1", 2, s2, Duration::from_millis(20)).is_err());
        let (s3, _peer3) = socket_pair();
        assert!(ports.claim("i,0x2", 3, s3, Duration::ZERO).is_ok(), "other ports are not affected");
    }
}
