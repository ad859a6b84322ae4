//! Reading a CHAP secret file (format in docs/security.md, "CHAP at login"): refused when group
//! or others may open it, parsed by [`ChapSecrets::parse`]. The OSD reads it to check initiators;
//! an initiator (a client, the metadata server) reads the same file to prove itself.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tessera_iscsi::login::auth::{check_file_mode, ChapSecrets, SecretsError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ChapFileError {
    #[error("cannot read the CHAP secret file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("CHAP secret file {path}: {source}")]
    Invalid { path: PathBuf, source: SecretsError },
}

pub fn load_chap_secrets(path: &Path) -> Result<ChapSecrets, ChapFileError> {
    let read = |source| ChapFileError::Read { path: path.to_path_buf(), source };
    let invalid = |source| ChapFileError::Invalid { path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(read)?;
    check_file_mode(meta.permissions().mode()).map_err(invalid)?;
    let text = std::fs::read_to_string(path).map_err(read)?;
    ChapSecrets::parse(&text).map_err(invalid)
}
