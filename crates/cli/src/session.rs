//! Connecting a client to one OSD: log in to the target over iSCSI and wrap the session in the
//! typed OSD client. One function so every command and bench connects the same way.

use anyhow::{Context, Result};
use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_initiator::osd_client::OsdClient;

/// The initiator name Tessera's tools log in with.
pub const INITIATOR_NAME: &str = "iqn.2026-11.org.tessera:client";

pub fn connect(addr: &str, target_name: &str) -> Result<OsdClient<Session>> {
    let config = SessionConfig::new(INITIATOR_NAME, target_name);
    let session = Session::login(addr, config).with_context(|| format!("logging in to {target_name} at {addr}"))?;
    Ok(OsdClient::new(session, 0))
}
