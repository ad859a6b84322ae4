//! The CHAP secret file of `--chap-secret-file` (format in docs/security.md, "CHAP at login"),
//! read by `tessera_initiator::iscsi::load_chap_secrets`, the one place that checks its mode and
//! parses it.

use std::path::Path;

use anyhow::Result;
use tessera_initiator::iscsi::ChapSecrets;

pub fn load_chap_secrets(path: &Path) -> Result<ChapSecrets> {
    Ok(tessera_initiator::iscsi::load_chap_secrets(path)?)
}
