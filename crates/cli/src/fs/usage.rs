//! `du`: how many bytes a tree's files hold, summed per directory as du(1) prints them. Sizes
//! are apparent sizes (file lengths, as `du --apparent-size --block-size=1`): a file's length
//! comes from its objects' logical lengths, which the metadata servers read from the OSDs.
//! Space actually used on the OSDs, holes excluded, is `df`'s.

use anyhow::{bail, Result};
use clap::Args;
use tessera_client::{Dir, DirEntry, FileType};

use super::{each_path, ClusterArg};
use crate::units::{count, human_size};

/// `-h` is du(1)'s human sizes, so help is `--help` alone.
#[derive(Args)]
#[command(disable_help_flag = true)]
pub struct DuArgs {
    /// Files or directories (default: the root).
    #[arg(default_value = "/")]
    paths: Vec<String>,
    /// Only a total for each path, not a line per directory.
    #[arg(short = 's', long = "summarize", conflicts_with = "all")]
    summarize: bool,
    /// A line for every file too, not only directories.
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Sizes as 1.5K, 200M, 3.1G.
    #[arg(short = 'h', long = "human-readable")]
    human: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    #[command(flatten)]
    cluster: ClusterArg,
}

/// What a walk could not count: files whose size is unknown, directories it could not read.
#[derive(Default)]
struct Missed {
    sizes: u64,
    directories: u64,
}

pub fn du(args: DuArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    each_path("du", &args.paths, |path| {
        let attr = client.lookup_followed(path)?;
        let mut missed = Missed::default();
        let total = if attr.file_type == FileType::Directory {
            let handle = client.open_dir(path)?;
            tree(path, &handle, handle.readdir().map_err(super::vanished)?, &args, &mut missed)
        } else {
            if attr.size_known() {
                attr.size
            } else {
                missed.sizes += 1;
                0
            }
        };
        if args.summarize || attr.file_type != FileType::Directory {
            print(&args, total, path);
        }
        if missed.directories > 0 {
            let them = if missed.directories == 1 { "it" } else { "them" };
            bail!("{} under {path} could not be read; the totals leave {them} out", count(missed.directories, "directory", "directories"));
        }
        if missed.sizes > 0 {
            let (files, have, them) = if missed.sizes == 1 { ("file", "has", "it") } else { ("files", "have", "them") };
            bail!("{} {files} under {path} {have} no known size (an OSD holding {them} did not answer); the totals leave {them} out", missed.sizes);
        }
        Ok(())
    })
}

/// Sums directory `dir` (whose entries are `entries`), printing each subdirectory's total
/// after its contents, as du(1) does. As du(1), a subdirectory that cannot be read (its
/// metadata server down, say) is reported and left out, and the rest is still counted.
/// Subdirectories are read through handles from their parent's listing (`Dir`), so a deep
/// tree costs no walk from the root per directory.
fn tree(dir: &str, handle: &Dir, entries: Vec<DirEntry>, args: &DuArgs, missed: &mut Missed) -> u64 {
    let mut total = 0;
    for entry in entries {
        let path = format!("{}/{}", dir.trim_end_matches('/'), entry.name);
        let size = match entry.attr.file_type {
            FileType::Directory => match handle.entered(&entry.name, &entry.attr).and_then(|h| Ok((h.readdir().map_err(super::vanished)?, h))) {
                Ok((below, h)) => tree(&path, &h, below, args, missed),
                Err(e) => {
                    eprintln!("tessera: du: cannot read directory {path}: {e}");
                    missed.directories += 1;
                    continue;
                }
            },
            _ if !entry.attr.size_known() => {
                missed.sizes += 1;
                continue;
            }
            _ => entry.attr.size,
        };
        if args.all && entry.attr.file_type != FileType::Directory {
            print(args, size, &path);
        }
        total += size;
    }
    if !args.summarize {
        print(args, total, dir);
    }
    total
}

fn print(args: &DuArgs, bytes: u64, path: &str) {
    if args.human {
        println!("{}\t{path}", human_size(bytes));
    } else {
        println!("{bytes}\t{path}");
    }
}
