//! `ln -s` and `readlink`: symbolic links, as coreutils makes and reads them. A link holds a
//! path, absolute or relative to the directory holding the link; the client follows it where
//! POSIX does (`cat`, `get`, `stat`, a directory on the way) and acts on the link itself where
//! POSIX does (`rm`, `mv`, `ls -l`, `stat` without `-L`).

use anyhow::{bail, Result};
use clap::Args;
use tessera_client::{Client, ClientError, FileType, FsError};

use super::{each_path, ClusterArg};

#[derive(Args)]
pub struct LnArgs {
    /// Make a symbolic link (required: Tessera has no hard links, every file has one name).
    #[arg(short = 's', long = "symbolic")]
    symbolic: bool,
    /// Replace LINK if it exists and is not a directory.
    #[arg(short = 'f', long = "force")]
    force: bool,
    /// What the link points to: an absolute path, or one relative to LINK's directory. It
    /// need not exist.
    target: String,
    /// The link to make; when it is a directory (or a link to one), the link is made inside
    /// it under TARGET's last name.
    link: String,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct ReadlinkArgs {
    /// Symbolic links whose targets to print, one per line.
    #[arg(required = true)]
    paths: Vec<String>,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn ln(args: LnArgs) -> Result<()> {
    if !args.symbolic {
        bail!("hard links are not supported: a Tessera file has exactly one name (use `ln -s` for a symbolic link)");
    }
    let (client, _) = args.cluster.connect()?;
    let link = match client.lookup_followed(&args.link) {
        Ok(a) if a.file_type == FileType::Directory => {
            let name = args.target.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
            if name.is_empty() || name == "." || name == ".." {
                bail!("{} is a directory, and target {} has no name to give the link inside it", args.link, args.target);
            }
            format!("{}/{name}", args.link.trim_end_matches('/'))
        }
        _ => args.link.clone(),
    };
    if args.force {
        match client.lookup(&link) {
            Ok(a) if a.file_type == FileType::Directory => bail!("{link} is a directory; not replaced"),
            Ok(_) => client.unlink(&link)?,
            Err(e) if e.fs_error() == Some(FsError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    client.symlink(&args.target, &link)?;
    Ok(())
}

pub fn readlink(args: ReadlinkArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    each_path("readlink", &args.paths, |path| {
        match client.lookup(path)? {
            a if a.file_type != FileType::Symlink => bail!("{path} is not a symbolic link"),
            _ => println!("{}", client.readlink(path)?),
        }
        Ok(())
    })
}

/// The path that `path` names once every final symlink is followed, as text: what a command
/// that writes or creates "through" a link (`put`, `touch`, `truncate`, as cp(1), touch(1)
/// and truncate(1) do) acts on. A dangling link gives the path its target would have.
pub fn through_links(client: &Client, path: &str) -> Result<String, ClientError> {
    let mut at = path.to_string();
    for _ in 0..SYMLINKS_FOLLOWED_MAX {
        match client.lookup(&at) {
            Ok(a) if a.file_type == FileType::Symlink => {
                let target = client.readlink(&at)?;
                at = match (target.starts_with('/'), at.trim_end_matches('/').rsplit_once('/')) {
                    (true, _) | (false, None) => target,
                    (false, Some((dir, _))) => format!("{dir}/{target}"),
                };
            }
            Err(e) if e.fs_error() != Some(FsError::NotFound) => return Err(e),
            _ => return Ok(at),
        }
    }
    Err(ClientError::Fs { op: "open", path: path.to_string(), source: FsError::Loop })
}

/// As the client library's walk (Linux's limit).
const SYMLINKS_FOLLOWED_MAX: usize = 40;
