//! The client commands (`put`, `get`, `ls`, `setstripe`, ...), on the conventions users know
//! from Lustre's `lfs` and coreutils. Each finds the cluster from `--cluster FILE` or
//! `TESSERA_CLUSTER` and talks to the metadata servers and OSDs directly.

pub mod copy;
pub mod df;
pub mod dirs;
pub mod interrupt;
pub mod links;
pub mod local_out;
pub mod mode;
pub mod mv;
pub mod namespace;
pub mod objects;
pub mod owner;
pub mod parallel;
pub mod repair;
pub mod replaced;
pub mod sparse;
pub mod stripe;
pub mod temporary;
pub mod touch;
pub mod transfer;
pub mod tree_attrs;
pub mod trees;
pub mod usage;
pub mod truncate;
pub mod whoami;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use tessera_client::{Client, ClusterConfig};

/// Where the cluster is.
#[derive(Args, Clone, Debug)]
pub struct ClusterArg {
    /// The cluster file (`tessera up` prints it); default: $TESSERA_CLUSTER.
    #[arg(long, env = "TESSERA_CLUSTER", global = true, value_parser = cluster_path)]
    pub cluster: Option<PathBuf>,
}

/// The namespace error a command's failure comes from, if a Tessera call failed. A read
/// behind `io::Read` carries the client's error inside an `io::Error`, whose `source()`
/// skips it, so that wrapper is looked into too.
pub fn fs_error_of(e: &anyhow::Error) -> Option<tessera_client::FsError> {
    use tessera_client::ClientError;
    e.chain().find_map(|c| {
        c.downcast_ref::<ClientError>()
            .or_else(|| c.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()).and_then(|inner| inner.downcast_ref::<ClientError>()))
            .and_then(ClientError::fs_error)
    })
}

/// A directory handle's ESTALE as a command that works by paths says it: the directory it
/// opened by path, or found in a listing, was removed meanwhile, which by path is ENOENT, as
/// ls(1), du(1) and rm(1) report a directory that vanishes under them.
pub fn vanished(e: tessera_client::ClientError) -> tessera_client::ClientError {
    use tessera_client::{ClientError, FsError};
    match e {
        ClientError::Fs { op, path, source: FsError::Stale } => ClientError::Fs { op, path, source: FsError::NotFound },
        other => other,
    }
}

/// A cluster file's path as given, empty included: an empty `TESSERA_CLUSTER` (as `export
/// TESSERA_CLUSTER=` leaves it) means none was given, not a missing value.
pub fn cluster_path(text: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(text))
}

/// The cluster file given, if any (an empty one is none).
pub fn given(path: &Option<PathBuf>) -> Option<&PathBuf> {
    path.as_ref().filter(|p| !p.as_os_str().is_empty())
}

impl ClusterArg {
    pub fn load(&self) -> Result<ClusterConfig> {
        let path = given(&self.cluster).context("which cluster? give --cluster FILE or set TESSERA_CLUSTER (`tessera up` prints it)")?;
        Ok(ClusterConfig::load(path)?)
    }

    pub fn connect(&self) -> Result<(Client, ClusterConfig)> {
        let config = self.load()?;
        let client = Client::connect(&config).context("connecting to the cluster")?;
        Ok((client, config))
    }
}

/// Runs `op` on every path, as coreutils do: a path that fails is reported and the others are
/// still done, and the command then fails. With one path its error is the command's.
pub fn each_path(command: &str, paths: &[String], mut op: impl FnMut(&str) -> Result<()>) -> Result<()> {
    if let [path] = paths {
        return op(path);
    }
    let mut failed = 0;
    for path in paths {
        if let Err(e) = op(path) {
            eprintln!("tessera: {command}: {}", crate::report::error_chain(&e));
            failed += 1;
        }
    }
    if failed > 0 {
        anyhow::bail!("{command}: {failed} of {} paths failed", paths.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tessera_client::{ClientError, FsError};

    use super::vanished;

    #[test]
    fn a_vanished_directory_reads_as_missing_and_other_errors_pass_unchanged() {
        let stale = ClientError::Fs { op: "readdir", path: "/a/b".into(), source: FsError::Stale };
        assert_eq!(vanished(stale).to_string(), "readdir /a/b: no such file or directory");
        let denied = ClientError::Fs { op: "readdir", path: "/a/b".into(), source: FsError::Access };
        assert_eq!(vanished(denied).fs_error(), Some(FsError::Access));
    }
}
