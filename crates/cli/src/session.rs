//! Connecting a client to one OSD: log in to the target over iSCSI and wrap the session in the
//! typed OSD client. One function so every command and bench connects the same way.

use anyhow::{Context, Result};
use tessera_initiator::iscsi::{ChapSecrets, Session, SessionConfig};
use tessera_initiator::osd_client::OsdClient;

/// The initiator name Tessera's tools log in with.
pub const INITIATOR_NAME: &str = "iqn.2026-11.org.tessera:client";

pub fn connect(addr: &str, target_name: &str) -> Result<OsdClient<Session>> {
    connect_with(addr, target_name, None)
}

/// [`connect`], authenticating with CHAP when `chap` is given (an OSD started with
/// `--chap-secret-file` refuses any other login).
pub fn connect_with(addr: &str, target_name: &str, chap: Option<ChapSecrets>) -> Result<OsdClient<Session>> {
    let mut config = SessionConfig::new(INITIATOR_NAME, target_name);
    config.chap = chap;
    let session = Session::login(addr, config).with_context(|| format!("logging in to {target_name} at {addr}"))?;
    Ok(OsdClient::new(session, 0))
}
