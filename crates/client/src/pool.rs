//! [`OsdPool`]: a few iSCSI sessions per OSD, logged in on first use.
//!
//! One session already keeps many commands in flight, but they share one TCP connection and
//! the target executes one connection's commands in CmdSN order (docs/architecture.md). Several
//! sessions per OSD let the pipelined chunks of one large transfer, and concurrent callers,
//! execute on the target in parallel. Callers take sessions round robin.
//!
//! Each slot keeps one ISID for the pool's life, so every login of a slot after the first is a
//! session reinstatement (RFC 7143 §6.3.5): the target closes the slot's old session, if it
//! still holds it, and answers the login only once that session's commands have ended.
//!
//! A session that fails at the transport level (connection reset, target restarted) is
//! discarded; the next caller of its slot logs in again. A session idle for a while is looked at
//! before it is lent (a peek at its socket that never blocks): one whose target went away
//! meanwhile, e.g. an OSD restarted while this client was quiet, is replaced instead of failing
//! the next command. A striped READ or WRITE whose session dies under it (but not of the
//! OSD's silence) is sent once more on the same slot, logged in again ([`OsdPool::reinstate`],
//! `striped_io.rs`). After a login
//! to an OSD times out, its other slots fail at once for a liveness interval ([`LoginGate`])
//! instead of each waiting out the timeout: a read striped over a stopped OSD fails in one
//! login timeout, not one per session. And a login to an OSD that a metadata server reports
//! down waits [`SUSPECT_LOGIN_TIMEOUT`], not the full login timeout (`suspects.rs`): a new
//! process reading a file on a stopped OSD fails in seconds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tessera_initiator::iscsi::{next_isid, LoginGate, Session, SessionConfig};
use tessera_initiator::osd_client::{OsdClient, OsdError};
use tessera_types::ObjectAddr;

use crate::config::{ClusterConfig, ConfigError, OsdEntry};
use crate::credentials::CredentialBook;
use crate::error::ClientError;
use crate::suspects::{Suspects, SUSPECT_LOGIN_TIMEOUT};

pub type OsdConn = OsdClient<Session>;

/// How many times the negotiated MaxBurstLength one command may carry: the initiator moves a
/// larger command as several bursts (R2T sequences) anyway, so a few bursts per command keep
/// the per-command cost low without one command monopolising a connection.
const BURSTS_PER_COMMAND: u64 = 4;
/// A session unused for this long is checked for a closed connection before it is lent.
const IDLE_CHECK_AFTER: Duration = Duration::from_millis(500);

/// A logged-in session and when it was last lent.
struct Pooled {
    conn: Arc<OsdConn>,
    lent_at: Instant,
}

/// One place for a session to an OSD, and the initiator port its logins use.
struct Slot {
    isid: [u8; 6],
    session: Mutex<Option<Pooled>>,
}

struct Osd {
    entry: OsdEntry,
    /// Credentials of this OSD's objects that open files hold; every session signs with them.
    book: Arc<CredentialBook>,
    slots: Vec<Slot>,
    next: AtomicUsize,
    /// Shared by the slots: once a login times out, the other slots do not wait out their own.
    gate: LoginGate,
}

/// One handle on one OSD session, with what a caller needs to build commands and errors.
pub struct Lease {
    pub conn: Arc<OsdConn>,
    osd_index: u32,
    slot: usize,
}

pub struct OsdPool {
    osds: Vec<Osd>,
    /// How each OSD is logged in to: initiator name, target, CHAP credentials.
    logins: Vec<SessionConfig>,
    max_transfer_bytes: u64,
    suspects: Suspects,
}

impl OsdPool {
    /// The pool of `config`'s OSDs; fails only when its CHAP secret file cannot be used.
    pub fn new(config: &ClusterConfig) -> Result<OsdPool, ConfigError> {
        let logins = config.osds.iter().map(|o| config.session_config(o)).collect::<Result<Vec<_>, _>>()?;
        let osds = config
            .osds
            .iter()
            .zip(&logins)
            .map(|(entry, login)| Osd {
                entry: entry.clone(),
                book: Arc::new(CredentialBook::default()),
                slots: (0..config.sessions_per_osd).map(|_| Slot { isid: next_isid(), session: Mutex::new(None) }).collect(),
                next: AtomicUsize::new(0),
                gate: LoginGate::new(&entry.addr, login.liveness),
            })
            .collect();
        Ok(OsdPool { osds, logins, max_transfer_bytes: config.max_transfer_bytes, suspects: Suspects::new(config) })
    }

    pub fn osd_count(&self) -> usize {
        self.osds.len()
    }

    /// Each OSD's credential book, indexed like the cluster map.
    pub fn books(&self) -> Vec<Arc<CredentialBook>> {
        self.osds.iter().map(|o| o.book.clone()).collect()
    }

    fn osd(&self, osd_index: u32, path: &str) -> Result<&Osd, ClientError> {
        self.osds.get(osd_index as usize).ok_or_else(|| ClientError::UnknownIndex {
            path: path.to_string(),
            what: "OSD",
            index: osd_index,
            configured: self.osds.len(),
        })
    }

    /// The object address of `object_id` in OSD `osd_index`'s data partition.
    pub fn object_addr(&self, osd_index: u32, object_id: u64, path: &str) -> Result<ObjectAddr, ClientError> {
        Ok(ObjectAddr::new(self.osd(osd_index, path)?.entry.partition_id, object_id))
    }

    /// The next session of OSD `osd_index` in round-robin order, logging in if needed.
    /// `object_id` is the object the caller is about to address, named if login fails.
    pub fn lease(&self, osd_index: u32, object_id: u64, path: &str) -> Result<Lease, ClientError> {
        self.lease_checked(osd_index, object_id, path)
    }

    /// A session for resending the command that `failed` lost: the same slot, logged in again
    /// unless another caller already did so after the failure. Either way the slot's new
    /// session reinstated the dead one, so none of the dead session's commands can still run
    /// on the target when the resend arrives (a WRITE queued there would otherwise land after
    /// it).
    pub fn reinstate(&self, failed: &Lease, object_id: u64, path: &str) -> Result<Lease, ClientError> {
        let osd = self.osd(failed.osd_index, path)?;
        let slot = &osd.slots[failed.slot];
        let mut guard = slot.session.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pooled) = guard.as_mut().filter(|p| !Arc::ptr_eq(&p.conn, &failed.conn)) {
            pooled.lent_at = Instant::now();
            return Ok(Lease { conn: pooled.conn.clone(), osd_index: failed.osd_index, slot: failed.slot });
        }
        *guard = None;
        self.log_in(&mut guard, osd, failed.osd_index, failed.slot, object_id)
    }

    /// Lends the next session, replacing it if it was idle for `IDLE_CHECK_AFTER` and its peer
    /// is gone.
    fn lease_checked(&self, osd_index: u32, object_id: u64, path: &str) -> Result<Lease, ClientError> {
        let osd = self.osd(osd_index, path)?;
        let index = osd.next.fetch_add(1, Ordering::Relaxed) % osd.slots.len();
        let mut guard = osd.slots[index].session.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pooled) = guard.as_mut() {
            let now = Instant::now();
            let idle = now.duration_since(pooled.lent_at) >= IDLE_CHECK_AFTER;
            if !(idle && pooled.conn.transport().peer_gone()) {
                pooled.lent_at = now;
                return Ok(Lease { conn: pooled.conn.clone(), osd_index, slot: index });
            }
            tracing::debug!(osd_index, addr = %osd.entry.addr, "idle OSD session was closed by the target; logging in again");
            *guard = None;
        }
        self.log_in(&mut guard, osd, osd_index, index, object_id)
    }

    /// Logs slot `index` of `osd` in with its ISID and keeps the session in `guard`.
    fn log_in(&self, guard: &mut Option<Pooled>, osd: &Osd, osd_index: u32, index: usize, object_id: u64) -> Result<Lease, ClientError> {
        let mut config = self.logins[osd_index as usize].clone();
        config.isid = osd.slots[index].isid;
        if self.suspects.reported_down(osd_index) {
            config.login_timeout = Some(SUSPECT_LOGIN_TIMEOUT.min(config.login_timeout()));
        }
        let session = osd.gate.attempt(|| Session::login(osd.entry.addr.as_str(), config)).map_err(|e| ClientError::Osd {
            osd_index,
            addr: osd.entry.addr.clone(),
            object_id,
            source: Box::new(OsdError::Transport(e)),
        })?;
        let conn = Arc::new(OsdClient::with_credentials(session, osd.entry.lun, osd.book.clone()));
        *guard = Some(Pooled { conn: conn.clone(), lent_at: Instant::now() });
        Ok(Lease { conn, osd_index, slot: index })
    }

    /// OSD `osd_index`'s portal, as the cluster configuration gives it.
    pub fn osd_addr(&self, osd_index: u32) -> Option<&str> {
        self.osds.get(osd_index as usize).map(|o| o.entry.addr.as_str())
    }

    /// Turns a failed command into a [`ClientError::Osd`]; a transport failure also retires
    /// the session so the next caller logs in afresh.
    pub fn fail(&self, lease: &Lease, object_id: u64, source: OsdError) -> ClientError {
        if matches!(source, OsdError::Transport(_)) {
            self.retire(lease);
        }
        let osd = &self.osds[lease.osd_index as usize];
        ClientError::Osd { osd_index: lease.osd_index, addr: osd.entry.addr.clone(), object_id, source: Box::new(source) }
    }

    /// Drops the session `lease` used from the pool, unless another thread replaced it already.
    pub fn retire(&self, lease: &Lease) {
        let osd = &self.osds[lease.osd_index as usize];
        let mut guard = osd.slots[lease.slot].session.lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_some_and(|p| Arc::ptr_eq(&p.conn, &lease.conn)) {
            *guard = None;
        }
    }

    /// Largest data transfer of one command to this OSD: the configured cap, further bounded
    /// by a few negotiated bursts of the leased session.
    pub fn max_transfer(&self, lease: &Lease) -> u64 {
        let burst = lease.conn.transport().negotiated().max_burst_len as u64;
        let by_burst = burst.saturating_mul(BURSTS_PER_COMMAND).max(burst);
        self.max_transfer_bytes.min(by_burst).max(1)
    }

    /// The configured cap alone (for planning before any session exists).
    pub fn max_transfer_bytes(&self) -> u64 {
        self.max_transfer_bytes
    }
}
