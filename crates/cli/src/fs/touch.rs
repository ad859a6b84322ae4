//! `touch`: make empty files, or set existing ones' access and modification times to now, as
//! coreutils does. "Now" is the metadata server's clock, the one that stamps every other
//! change, and a user with write permission may touch a file it does not own.

use anyhow::Result;
use clap::Args;
use tessera_client::FsError;

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
        match client.set_times_to_now(path) {
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
