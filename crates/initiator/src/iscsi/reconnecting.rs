//! [`ReconnectingSession`]: a session that logs in on first use and again after the connection
//! fails, with the same ISID (a reinstatement), retrying the failed command once on the new
//! session.
//!
//! Only for callers whose commands are idempotent (the metadata server's CREATE of given ids,
//! REMOVE, attribute reads and sets): a command whose connection broke may or may not have
//! executed, and the retry runs it again. File data writes go through the client's pool,
//! which reports such failures instead.

use std::net::ToSocketAddrs;
use std::sync::{Arc, Mutex};

use tessera_scsi::{ScsiRequest, ScsiResponse, ScsiTransport, TransportError};
use tracing::warn;

use super::{LoginGate, Session, SessionConfig};

pub struct ReconnectingSession {
    addr: String,
    config: SessionConfig,
    current: Mutex<Option<Arc<Session>>>,
    /// Shut for a liveness interval after a login that timed out.
    gate: LoginGate,
}

impl ReconnectingSession {
    /// Does not connect yet: the target may still be starting.
    pub fn new(addr: &str, config: SessionConfig) -> ReconnectingSession {
        let gate = LoginGate::new(addr, config.liveness);
        ReconnectingSession { addr: addr.to_string(), config, current: Mutex::new(None), gate }
    }

    fn session(&self) -> Result<Arc<Session>, TransportError> {
        let mut guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = guard.as_ref() {
            return Ok(s.clone());
        }
        // The same ISID every time: a login after a failure reinstates the failed session, so
        // the target has ended its commands before the retry can run.
        let session = Arc::new(self.gate.attempt(|| {
            let addrs: Vec<_> = self.addr.to_socket_addrs().map_err(|e| TransportError::Io { peer: self.addr.clone(), source: e })?.collect();
            Session::login(&addrs[..], self.config.clone())
        })?);
        *guard = Some(session.clone());
        Ok(session)
    }

    /// Forgets `failed` if it is still the current session.
    fn retire(&self, failed: &Arc<Session>) {
        let mut guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_some_and(|s| Arc::ptr_eq(s, failed)) {
            *guard = None;
        }
    }
}

/// Failures of the connection rather than answers from the target.
fn connection_lost(e: &TransportError) -> bool {
    matches!(e, TransportError::Io { .. } | TransportError::SessionClosed { .. } | TransportError::Protocol { .. })
}

impl ScsiTransport for ReconnectingSession {
    fn execute(&self, request: &ScsiRequest<'_>) -> Result<ScsiResponse, TransportError> {
        let session = self.session()?;
        match session.execute(request) {
            Err(e) if connection_lost(&e) => {
                warn!(peer = %self.addr, error = %e, "OSD connection lost; logging in again");
                self.retire(&session);
                self.session()?.execute(request)
            }
            other => other,
        }
    }

    /// `meanwhile` runs at most once: on the first attempt's command, or if that one failed
    /// before it left, on the retry's.
    fn execute_into_meanwhile(&self, request: &ScsiRequest<'_>, buffer: Vec<u8>, meanwhile: &mut dyn FnMut()) -> Result<ScsiResponse, TransportError> {
        let session = self.session()?;
        let mut ran = false;
        let mut once = || {
            if !std::mem::replace(&mut ran, true) {
                meanwhile();
            }
        };
        match session.execute_into_meanwhile(request, buffer, &mut once) {
            Err(e) if connection_lost(&e) => {
                warn!(peer = %self.addr, error = %e, "OSD connection lost; logging in again");
                self.retire(&session);
                self.session()?.execute_into_meanwhile(request, Vec::new(), &mut once)
            }
            other => other,
        }
    }

    fn peer(&self) -> String {
        self.addr.clone()
    }
}
