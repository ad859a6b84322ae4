//! `truncate -s SIZE`: set files' sizes, as coreutils does. Shrinking drops the data past the
//! new end on every OSD; growing leaves a hole that reads as zeros and takes no space.

use anyhow::{bail, Result};
use clap::Args;
use tessera_client::{FileType, FsError};

use super::links::through_links;
use super::mode::process_umask;
use super::{each_path, ClusterArg};
use crate::units::parse_size;

#[derive(Args)]
pub struct TruncateArgs {
    /// The new size (4096, 64K, 1M, 1.5G; K, M, G, T are powers of 1024, KB, MB, GB, TB powers
    /// of 1000, as GNU truncate reads them). Relative forms (+1M, -1M, <, >, /, %) are not
    /// taken: give the size the files should have.
    #[arg(short = 's', long = "size", value_parser = absolute_size, allow_hyphen_values = true)]
    size: u64,
    /// Do not create files that do not exist.
    #[arg(short = 'c', long = "no-create")]
    no_create: bool,
    /// Files to size (a symbolic link is followed to the file it names).
    #[arg(required = true)]
    paths: Vec<String>,
    #[command(flatten)]
    cluster: ClusterArg,
}

fn absolute_size(text: &str) -> Result<u64, String> {
    if text.starts_with(['+', '-', '<', '>', '/', '%']) {
        return Err(format!("`{text}`: relative sizes are not supported; give the new size itself (e.g. 1M)"));
    }
    parse_size(text)
}

pub fn truncate(args: TruncateArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    each_path("truncate", &args.paths, |path| {
        match client.lookup_followed(path) {
            Ok(a) if a.file_type == FileType::Directory => bail!("{path} is a directory"),
            Ok(_) => {}
            Err(e) if e.fs_error() == Some(FsError::NotFound) && !args.no_create => {
                // As truncate(1): a missing file is made, mode 0666 less the umask.
                client.create(&through_links(&client, path)?, 0o666 & !process_umask(), None)?;
            }
            Err(e) if e.fs_error() == Some(FsError::NotFound) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        client.truncate(path, args.size)?;
        Ok(())
    })
}
