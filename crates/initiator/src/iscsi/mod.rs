//! The iSCSI initiator (RFC 7143): [`Session`] logs in to a target and carries SCSI commands for
//! many threads at once over one connection; [`Session::discover`] asks a portal for its
//! targets; [`RawConnection`] sends hand-built PDUs for tests of a target's error handling.

mod chap_file;
mod driver;
mod lent;
mod login;
mod login_gate;
mod raw;
mod reconnecting;
mod rx;
mod session;

pub use chap_file::{load_chap_secrets, ChapFileError};
pub use login::LoginResult;
pub use login_gate::LoginGate;
/// The credentials a session authenticates with; the same type configures the target.
pub use tessera_iscsi::login::auth::{ChapCredential, ChapSecrets, SecretsError};
pub use raw::{RawConnection, RawReply};
pub use reconnecting::ReconnectingSession;
pub use session::Session;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tessera_iscsi::login::{DigestKind, Offer};
use tessera_types::limits::{BURST_LEN_MAX, DATA_SEGMENT_LEN_MAX};

/// The default [`SessionConfig::liveness`]: a target silent for 10 s is pinged, and one that
/// leaves the ping unanswered for 10 s more is given up (Linux's open-iscsi pings every 5 s
/// and gives up after 5 more; twice that here, because the target answers pings from the same
/// reader that may run a short command inline on a loaded node).
pub const DEFAULT_LIVENESS: Duration = Duration::from_secs(10);

/// What the initiator asks for at login.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub initiator_name: String,
    pub target_name: String,
    /// The digest we insist on for headers (offered alone, so the target must accept it).
    pub header_digest: DigestKind,
    pub data_digest: DigestKind,
    pub max_recv_data_segment_len: u32,
    pub max_burst_len: u32,
    pub first_burst_len: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    /// Initiator session id; by default a random-format ISID unique within this process.
    pub isid: [u8; 6],
    /// CHAP credentials for the security stage (docs/security.md, "CHAP at login"): with
    /// only the initiator's, one-way CHAP; with the target's too, mutual CHAP, and a target
    /// that cannot prove itself is refused. `None`: AuthMethod=None.
    pub chap: Option<ChapSecrets>,
    /// How long a session waits on a silent target before it pings it (NOP-Out, RFC 7143
    /// §11.18); a ping unanswered for as long again closes the connection, so a stopped or
    /// cut-off target fails its commands with `Unresponsive` instead of hanging them. Also
    /// bounds connect and each login exchange (twice this, unless `login_timeout` says
    /// otherwise), and a send that makes no progress.
    pub liveness: Duration,
    /// How long connect and each login exchange may take; `None`: twice `liveness`. Shorter
    /// for a target believed down (a live one answers a login in milliseconds), so that
    /// trying it costs seconds, while its session, once logged in, keeps the full interval.
    pub login_timeout: Option<Duration>,
}

impl SessionConfig {
    /// Defaults: no digests, ImmediateData=Yes, InitialR2T=No, the largest bursts and segments
    /// the limits allow, so that a write costs no R2T round trip.
    pub fn new(initiator_name: &str, target_name: &str) -> Self {
        SessionConfig {
            initiator_name: initiator_name.to_string(),
            target_name: target_name.to_string(),
            header_digest: DigestKind::None,
            data_digest: DigestKind::None,
            max_recv_data_segment_len: DATA_SEGMENT_LEN_MAX,
            max_burst_len: BURST_LEN_MAX,
            first_burst_len: BURST_LEN_MAX,
            immediate_data: true,
            initial_r2t: false,
            max_outstanding_r2t: 1,
            isid: next_isid(),
            chap: None,
            liveness: DEFAULT_LIVENESS,
            login_timeout: None,
        }
    }

    /// How long connect and each login exchange may take.
    pub fn login_timeout(&self) -> Duration {
        self.login_timeout.unwrap_or(self.liveness * 2)
    }

    /// The same configuration, authenticating with `chap`.
    pub fn with_chap(mut self, chap: ChapSecrets) -> Self {
        self.chap = Some(chap);
        self
    }

    pub fn offer(&self) -> Offer {
        Offer {
            header_digests: vec![self.header_digest],
            data_digests: vec![self.data_digest],
            max_recv_data_segment_len: self.max_recv_data_segment_len,
            max_burst_len: self.max_burst_len,
            first_burst_len: self.first_burst_len,
            immediate_data: self.immediate_data,
            initial_r2t: self.initial_r2t,
            max_outstanding_r2t: self.max_outstanding_r2t,
            ..Offer::default()
        }
    }
}

/// A fresh ISID of the "random" format (RFC 7143 §11.12.5: type 10b in the top two bits, A
/// reserved, B and C random, D a qualifier). B and C start from 24 random bits drawn once per
/// process and D counts this process's sessions (carrying into C and B), so no two sessions of
/// one process share an ISID and two processes, on one host or many, almost never do. That
/// matters because a login that reuses a live session's ISID reinstates it: the target closes
/// the old session (docs/architecture.md, "Lost connections").
pub fn next_isid() -> [u8; 6] {
    static BASE: OnceLock<u32> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = *BASE.get_or_init(|| {
        let mut b = [0u8; 4];
        // Without randomness the process id still separates this host's processes.
        if getrandom::fill(&mut b).is_err() {
            b = std::process::id().to_be_bytes();
        }
        u32::from_be_bytes(b) & 0x00FF_FFFF
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let high = (base as u64 + (n >> 16)) & 0x00FF_FFFF;
    let mut isid = [0u8; 6];
    isid[0] = 0x80;
    isid[1..4].copy_from_slice(&(high as u32).to_be_bytes()[1..]);
    isid[4..6].copy_from_slice(&(n as u16).to_be_bytes());
    isid
}

/// One target a portal reported (SendTargets, RFC 7143 Appendix C).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredTarget {
    pub name: String,
    /// `address:port,portal-group-tag` entries.
    pub addresses: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::next_isid;

    #[test]
    fn isids_are_random_format_and_distinct_across_the_qualifier_carry() {
        let many: Vec<[u8; 6]> = (0..70_000).map(|_| next_isid()).collect();
        assert!(many.iter().all(|i| i[0] == 0x80), "type 10b (random), A reserved");
        let distinct: std::collections::HashSet<_> = many.iter().collect();
        assert_eq!(distinct.len(), many.len(), "no two sessions of a process share an ISID, past 65,536 of them too");
    }
}
