//! `cp [-r] SOURCE... DEST`: copy files inside Tessera, as cp(1) does, through this client
//! with no local file in between. Each file is read with striped reads and
//! written as `put` writes (temporary name, then renamed over the destination), so an
//! interrupted or failed copy leaves the destination as it was. A new file takes its
//! directory's default striping, as a new file does under Lustre; a file copied over keeps
//! its own. Holes stay holes.

use std::io::{self, Read};

use anyhow::{bail, Context, Result};
use clap::Args;
use tessera_client::{Attr, Client, File, FileType};

use super::interrupt::Interrupt;
use super::mode::process_umask;
use super::parallel;
use super::replaced::read_latest;
use super::transfer::{store, Share, Source};
use super::trees::{left_out, permission_denied, replace_remote_link, walk_remote, Plan};
use super::{each_path, ClusterArg};

#[derive(Args)]
pub struct CpArgs {
    /// Files to copy, then the destination: a file path, or an existing directory that
    /// receives each source by its name (required with several sources).
    #[arg(required = true, num_args = 2.., value_name = "PATH")]
    paths: Vec<String>,
    /// Copy directories and their contents; symbolic links inside are copied as links.
    #[arg(short = 'r', short_alias = 'R', long = "recursive")]
    recursive: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn cp(args: CpArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let (dest, sources) = args.paths.split_last().context("give a source and a destination")?;
    let into_dir = matches!(client.lookup_followed(dest), Ok(a) if a.file_type == FileType::Directory);
    if sources.len() > 1 && !into_dir {
        bail!("copying several files needs an existing directory as destination; {dest} is not one");
    }
    each_path("cp", sources, |source| {
        let to = if into_dir {
            let name = source.trim_end_matches('/').rsplit('/').next().filter(|n| !n.is_empty() && *n != "." && *n != "..");
            format!("{}/{}", dest.trim_end_matches('/'), name.with_context(|| format!("{source} has no name to copy into {dest} under"))?)
        } else {
            dest.clone()
        };
        // As cp(1), a source named on the command line is followed if it is a link.
        let attr = client.lookup_followed(source)?;
        if attr.file_type == FileType::Directory {
            if !args.recursive {
                bail!("{source} is a directory (use -r to copy it and its contents)");
            }
            if matches!(super::mv::inside(&client, &to, attr.ino), Ok(true)) {
                bail!("cannot copy directory {source} into itself ({to})");
            }
        }
        copy(&client, source, &to, &attr)
    })
}

/// Copies what `from` names (`attr`) to `to`.
fn copy(client: &Client, from: &str, to: &str, attr: &Attr) -> Result<()> {
    match attr.file_type {
        FileType::Directory => copy_tree(client, from, to, attr.mode, parallel::TREE_WORKERS),
        _ => copy_file(client, from, to, attr.mode, Share::Alone),
    }
}

/// Copies directory `from` (mode `mode`) to `to`: its directories and links in walk order,
/// then its files `workers` at a time.
pub fn copy_tree(client: &Client, from: &str, to: &str, mode: u32, workers: usize) -> Result<()> {
    let mut plan = Plan::default();
    walk_remote(client, from.to_string(), to.to_string(), mode, &|dir: &String, name: &str| child(dir, name), &mut plan)?;
    let unreadable = std::sync::atomic::AtomicU64::new(plan.unreadable);
    let mut dirs = super::dirs::TreeMaker::new(client);
    for (_, dir, mode) in &plan.dirs {
        dirs.make(dir, mode & !process_umask())?;
    }
    for (target, link) in &plan.links {
        replace_remote_link(client, link)?;
        client.symlink(target, link)?;
    }
    let bar = plan.bar("cp", from);
    let interrupt = Interrupt::catch()?;
    let result = parallel::for_each(workers, &plan.files, |(src, dst, mode, size)| {
        interrupt.check()?;
        match copy_file(client, src, dst, *mode, Share::InTree) {
            Err(e) if permission_denied(&e) => {
                left_out(&format!("file {src}"));
                unreadable.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            other => other.with_context(|| format!("copying {from} to {to} stopped at {src}"))?,
        }
        bar.inc(*size);
        Ok(())
    });
    bar.finish_and_clear();
    result?;
    match unreadable.into_inner() {
        0 => Ok(()),
        n => bail!("cp -r {from} -> {to}: {n} entries you may not read were left out (each named above)"),
    }
}

/// Copies `from` to `to`, starting over if another client replaces `from` meanwhile (the
/// destination is only replaced once a copy is whole, so a restart leaves nothing behind).
fn copy_file(client: &Client, from: &str, to: &str, mode: u32, share: Share) -> Result<()> {
    read_latest(from, || true, || copy_file_once(client, from, to, mode, share))
}

fn copy_file_once(client: &Client, from: &str, to: &str, mode: u32, share: Share) -> Result<()> {
    let file = client.open(from)?;
    if let Ok(existing) = client.lookup_followed(to) {
        if existing.ino == file.ino() {
            bail!("{from} and {to} are the same file");
        }
        if existing.file_type == FileType::Directory {
            bail!("cannot copy file {from} over directory {to}");
        }
    }
    let size = file.size()?;
    let to = super::links::through_links(client, to)?;
    let input = Box::new(RemoteReader { file: &file, offset: 0, size });
    store(client, Source { input, total: size, name: from, verb: "cp", share }, &to, mode & 0o7777 & !process_umask(), None)?;
    Ok(())
}

fn child(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// A Tessera file read from the start, as a stream of large striped reads.
struct RemoteReader<'a> {
    file: &'a File,
    offset: u64,
    size: u64,
}

impl Read for RemoteReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.size - self.offset).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let got = self.file.pread(self.offset, &mut buf[..want]).map_err(io::Error::other)?;
        if got == 0 {
            return Err(io::Error::other(format!("the file shrank while being copied ({} of {} bytes)", self.offset, self.size)));
        }
        self.offset += got as u64;
        Ok(got)
    }
}
