//! Reading a CHAP secret file (`--chap-secret-file`; format in docs/security.md, "CHAP at
//! login"): refused when group or others may open it, parsed by
//! `tessera_iscsi::login::auth::ChapSecrets::parse`. The OSD reads it to check initiators; an
//! initiator (a client, the metadata server) reads the same file to prove itself.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};
use tessera_initiator::iscsi::ChapSecrets;
use tessera_iscsi::login::auth::check_file_mode;

pub fn load_chap_secrets(path: &Path) -> Result<ChapSecrets> {
    let what = || format!("CHAP secret file {}", path.display());
    let meta = std::fs::metadata(path).with_context(|| format!("reading the {}", what()))?;
    check_file_mode(meta.permissions().mode()).with_context(what)?;
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the {}", what()))?;
    ChapSecrets::parse(&text).with_context(what)
}
