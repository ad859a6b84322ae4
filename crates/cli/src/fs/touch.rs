//! `touch`: make empty files, or set existing ones' access and modification times to now, as
//! coreutils does.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use clap::Args;
use tessera_client::{FsError, Timespec};

use super::links::through_links;
use super::mode::process_umask;
use super::{each_path, ClusterArg};

#[derive(Args)]
pub struct TouchArgs {
    /// Files to make or stamp (a symbolic link is followed to the file it names).
    #[arg(required = true)]
    paths: Vec<String>,
    /// Do not create files that do not exist.
    #[arg(short = 'c', long = "no-create")]
    no_create: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn touch(args: TouchArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    each_path("touch", &args.paths, |path| {
        let now = now();
        match client.set_times(path, Some(now), Some(now)) {
            Err(e) if e.fs_error() == Some(FsError::NotFound) && !args.no_create => {
                // Through a dangling symlink, the file is made where it points, as touch(1).
                client.create(&through_links(&client, path)?, 0o666 & !process_umask(), None)?;
                Ok(())
            }
            Err(e) if e.fs_error() == Some(FsError::NotFound) => Ok(()),
            other => Ok(other.map(drop)?),
        }
    })
}

fn now() -> Timespec {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    Timespec { secs: since.as_secs() as i64, nanos: since.subsec_nanos() }
}
