//! [`LoginGate`]: after a login to a target timed out, new logins to it fail at once for a
//! while instead of each waiting out the login timeout again.
//!
//! A stopped (SIGSTOP) or cut-off target still completes the TCP handshake from the kernel's
//! backlog, or never answers it, so every login holds its caller for the whole timeout (twice
//! the liveness interval). One caller pays that; the others, until the gate opens again, get
//! [`TransportError::Silent`] straight away and can report the OSD as down.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tessera_scsi::TransportError;

pub struct LoginGate {
    peer: String,
    hold: Duration,
    closed_until: Mutex<Option<Instant>>,
}

impl LoginGate {
    /// A gate for logins to `peer` that stays shut for `hold` after a login that timed out.
    pub fn new(peer: &str, hold: Duration) -> LoginGate {
        LoginGate { peer: peer.to_string(), hold, closed_until: Mutex::new(None) }
    }

    /// Runs `login` unless a recent login timed out; records how this one ended.
    pub fn attempt<T>(&self, login: impl FnOnce() -> Result<T, TransportError>) -> Result<T, TransportError> {
        if let Some(until) = *self.closed_until.lock().unwrap_or_else(|p| p.into_inner()) {
            let now = Instant::now();
            if now < until {
                let secs = (until - now).as_secs_f64().ceil() as u64;
                return Err(TransportError::Silent { peer: self.peer.clone(), secs });
            }
        }
        let outcome = login();
        let mut closed = self.closed_until.lock().unwrap_or_else(|p| p.into_inner());
        match &outcome {
            Err(e) if e.timed_out() => *closed = Some(Instant::now() + self.hold),
            // A refusal is quick, and an answer of any kind shows the target is there.
            _ => *closed = None,
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout() -> TransportError {
        TransportError::Unresponsive { peer: "p".into(), secs: 2 }
    }

    #[test]
    fn a_timed_out_login_shuts_the_gate_until_its_hold_has_passed() {
        let gate = LoginGate::new("p", Duration::from_secs(60));
        assert!(gate.attempt(|| Err::<(), _>(timeout())).is_err());
        let mut ran = false;
        let second = gate.attempt(|| {
            ran = true;
            Ok(())
        });
        assert!(!ran, "a login was tried while the gate was shut");
        assert!(matches!(second, Err(TransportError::Silent { secs, .. }) if secs > 0 && secs <= 60));

        let brief = LoginGate::new("p", Duration::ZERO);
        assert!(brief.attempt(|| Err::<(), _>(timeout())).is_err());
        assert!(brief.attempt(|| Ok(())).is_ok(), "the gate did not open once its hold had passed");
    }

    #[test]
    fn a_refused_login_leaves_the_gate_open() {
        let gate = LoginGate::new("p", Duration::from_secs(60));
        let refused = || Err::<(), _>(TransportError::LoginRefused { peer: "p".into(), reason: "no".into() });
        assert!(matches!(gate.attempt(refused), Err(TransportError::LoginRefused { .. })));
        assert!(gate.attempt(|| Ok(())).is_ok());
    }
}
