//! Whether a metadata server reports an OSD down, asked before a login to that OSD.
//!
//! A stopped or cut-off OSD keeps its port open, so a login to it waits out the login timeout
//! (twice the liveness interval: 20 s by default), in every new client process. The metadata
//! servers probe every OSD (`health.rs` there) and find such an OSD within seconds. Their word
//! only shortens the wait, never skips the login: a server may be cut off from an OSD that this
//! client reaches, and a live OSD answers a login in milliseconds, well within
//! [`SUSPECT_LOGIN_TIMEOUT`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tessera_mds_proto::{Caller, Reply, Request};

use crate::config::ClusterConfig;
use crate::prover::Prover;

/// The login timeout for an OSD a metadata server reports down.
pub const SUSPECT_LOGIN_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one answer is used before the servers are asked again.
const FRESH_FOR: Duration = Duration::from_secs(2);
/// How long asking one server may take: a stopped server must not add the wait it saves.
const ASK_TIMEOUT: Duration = Duration::from_secs(1);

pub(crate) struct Suspects {
    /// Where the servers are, and how this process proves its user to them.
    config: ClusterConfig,
    /// When the servers were last asked, and the OSDs the first that answered cannot reach.
    last: Mutex<Option<(Instant, Vec<u32>)>>,
}

impl Suspects {
    pub fn new(config: &ClusterConfig) -> Suspects {
        Suspects { config: config.clone(), last: Mutex::new(None) }
    }

    /// True when the metadata servers last said they cannot reach OSD `osd`; false when none
    /// answered in time.
    pub fn reported_down(&self, osd: u32) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_ref().is_none_or(|(at, _)| at.elapsed() >= FRESH_FOR) {
            *last = Some((Instant::now(), self.ask()));
        }
        last.as_ref().is_some_and(|(_, down)| down.contains(&osd))
    }

    /// The first server that answers: every server probes every OSD.
    fn ask(&self) -> Vec<u32> {
        // One prover for every server asked: reading the key or asking the agent once.
        let Ok((prover, _)) = Prover::new(&self.config, Caller::of_process()) else { return Vec::new() };
        for (index, server) in self.config.mds.iter().enumerate() {
            let Ok(mut link) = prover.open(index as u32, &server.addr, Some(ASK_TIMEOUT)) else { continue };
            if let Ok(Ok(Reply::OsdsDown(down))) = link.call(&Request::OsdsDown) {
                return down;
            }
        }
        Vec::new()
    }
}
