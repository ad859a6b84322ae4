//! `put -r` and `get -r`: a whole directory tree between the local file system and Tessera,
//! as `cp -r` copies one: directories made (or merged into), each file copied as `put` and
//! `get` copy one (holes kept, a replaced Tessera file swapped in whole), symbolic links
//! copied as links. The tree is walked first; directories and links are then made in walk
//! order, and the files copied [`TREE_WORKERS`](super::parallel::TREE_WORKERS) at a time.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use tessera_client::{Attr, Client, Dir, FileType, FsError};

use super::interrupt::Interrupt;
use super::local_out::LocalOut;
use super::mode::process_umask;
use super::parallel;
use super::replaced::read_latest;
use super::transfer::{copy_out, progress, store, Share, Source};

/// What a tree copy did (files and bytes counted as they complete).
#[derive(Default, Debug)]
pub struct Copied {
    pub files: AtomicU64,
    pub bytes: AtomicU64,
    pub links: u64,
    pub directories: u64,
    /// Local entries that are neither file, directory nor link (fifos, sockets, devices).
    pub skipped: u64,
    /// Directories and files below the top that the user may not read (Tessera's for `get`,
    /// this host's for `put`), left out as cp -r leaves them (each said on stderr).
    pub unreadable: AtomicU64,
}

/// A tree to copy, walked: `L` is where entries are read, `R` where they are written.
pub(super) struct Plan<L, R> {
    /// Directories in walk order (parents first), with their modes.
    pub dirs: Vec<(L, R, u32)>,
    /// Regular files, with their modes and sizes.
    pub files: Vec<(L, R, u32, u64)>,
    /// Symbolic links: the target, and where the link goes.
    pub links: Vec<(String, R)>,
    pub skipped: u64,
    /// Directories below the top that could not be listed (permission denied), left out.
    pub unreadable: u64,
}

impl<L, R> Default for Plan<L, R> {
    fn default() -> Self {
        Plan { dirs: Vec::new(), files: Vec::new(), links: Vec::new(), skipped: 0, unreadable: 0 }
    }
}

/// Whether `e` is a refusal for lack of permission: what a tree copy reports and goes on
/// past, as cp -r does.
/// Only the cluster's refusals count (a Tessera file read through `io::Read` carries its
/// error inside an `io::Error`); a local file's EACCES is not the source's and stops the copy.
pub(super) fn permission_denied(e: &anyhow::Error) -> bool {
    super::fs_error_of(e) == Some(FsError::Access)
}

/// Whether `e` is this host refusing to let the user read a local file or directory.
fn local_denied(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied))
}

/// Says that `what` is left out of a tree copy for lack of permission.
pub(super) fn left_out(what: &str) {
    eprintln!("tessera: cannot read {what}: permission denied; left out of the copy");
}

impl<L, R> Plan<L, R> {
    pub fn bar(&self, verb: &str, from: &str) -> ProgressBar {
        // A file whose OSD did not answer has no known size; it counts as empty here and its
        // copy fails with the OSD named.
        let bytes = self.files.iter().filter(|f| f.3 != Attr::SIZE_UNKNOWN).fold(0u64, |sum, f| sum.saturating_add(f.3));
        progress(bytes, &format!("{verb} -r {from} ({} files)", self.files.len()))
    }
}

/// Copies local directory `local` to `remote` (made if missing, merged into if a directory),
/// `workers` files at a time.
pub fn put_tree(client: &Client, local: &Path, remote: &str, workers: usize, done: &mut Copied) -> Result<()> {
    let mut plan = Plan::default();
    walk_local(local, remote.to_string(), &mut plan)?;
    done.skipped = plan.skipped;
    done.unreadable.fetch_add(plan.unreadable, Ordering::Relaxed);
    let mut dirs = super::dirs::TreeMaker::new(client);
    for (_, dir, mode) in &plan.dirs {
        dirs.make(dir, *mode)?;
        done.directories += 1;
    }
    for (target, to) in &plan.links {
        replace_remote_link(client, to)?;
        client.symlink(target, to)?;
        done.links += 1;
    }
    let bar = plan.bar("put", &local.display().to_string());
    let interrupt = Interrupt::catch()?;
    let result = parallel::for_each(workers, &plan.files, |(path, to, mode, _)| {
        interrupt.check()?;
        let file = match fs::File::open(path) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                left_out(&format!("file {}", path.display()));
                done.unreadable.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            other => other.with_context(|| format!("opening {}", path.display()))?,
        };
        let total = file.metadata()?.len();
        let name = path.display().to_string();
        let source = Source { input: Box::new(file), total, name: &name, verb: "put", share: Share::InTree };
        let n = store(client, source, to, *mode, None)?;
        done.bytes.fetch_add(n, Ordering::Relaxed);
        done.files.fetch_add(1, Ordering::Relaxed);
        bar.inc(n);
        Ok(())
    });
    bar.finish_and_clear();
    result
}

fn walk_local(local: &Path, remote: String, plan: &mut Plan<PathBuf, String>) -> Result<()> {
    let meta = fs::metadata(local).with_context(|| format!("reading {}", local.display()))?;
    let mut entries: Vec<_> = fs::read_dir(local)
        .and_then(|list| list.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("listing {}", local.display()))?;
    plan.dirs.push((local.to_path_buf(), remote.clone(), meta.permissions().mode() & 0o7777 & !process_umask()));
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            bail!("{}: the name is not UTF-8, which Tessera names must be", path.display());
        };
        let to = format!("{}/{name}", remote.trim_end_matches('/'));
        let meta = fs::symlink_metadata(&path).with_context(|| format!("reading {}", path.display()))?;
        if meta.is_dir() {
            // Only this directory's own listing can be refused here (deeper ones are handled
            // at their level).
            match walk_local(&path, to, plan) {
                Err(e) if local_denied(&e) => {
                    left_out(&format!("directory {}", path.display()));
                    plan.unreadable += 1;
                }
                other => other?,
            }
        } else if meta.is_file() {
            plan.files.push((path, to, meta.permissions().mode() & 0o7777 & !process_umask(), meta.len()));
        } else if meta.file_type().is_symlink() {
            let target = fs::read_link(&path).with_context(|| format!("reading link {}", path.display()))?;
            let target = target.to_str().with_context(|| format!("{}: the link's target is not UTF-8", path.display()))?;
            plan.links.push((target.to_string(), to));
        } else {
            eprintln!("tessera: put: skipping {}: not a file, directory or symbolic link", path.display());
            plan.skipped += 1;
        }
    }
    Ok(())
}

/// Clears the way for a link at `to`: a file or link there goes, a directory stays and refuses.
pub(super) fn replace_remote_link(client: &Client, to: &str) -> Result<()> {
    match client.lookup(to) {
        Ok(a) if a.file_type == FileType::Directory => bail!("cannot replace directory {to} with a link"),
        Ok(_) => Ok(client.unlink(to)?),
        Err(e) if e.fs_error() == Some(FsError::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Copies Tessera directory `remote` to local `local` (made if missing, merged into if a
/// directory), `workers` files at a time.
pub fn get_tree(client: &Client, remote: &str, local: &Path, workers: usize, done: &mut Copied) -> Result<()> {
    let mut plan = Plan::default();
    let mode = client.lookup_followed(remote)?.mode;
    walk_remote(client, remote.to_string(), local.to_path_buf(), mode, &|dir: &PathBuf, name: &str| dir.join(name), &mut plan)?;
    done.unreadable.fetch_add(plan.unreadable, Ordering::Relaxed);
    for (_, dir, _) in &plan.dirs {
        match fs::create_dir(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            other => other.with_context(|| format!("making directory {}", dir.display()))?,
        }
        done.directories += 1;
    }
    for (target, to) in &plan.links {
        if let Ok(meta) = fs::symlink_metadata(to) {
            if meta.is_dir() {
                bail!("cannot replace directory {} with a link", to.display());
            }
            fs::remove_file(to).with_context(|| format!("replacing {}", to.display()))?;
        }
        symlink(target, to).with_context(|| format!("making link {}", to.display()))?;
        done.links += 1;
    }
    let bar = plan.bar("get", remote);
    let interrupt = Interrupt::catch()?;
    let result = parallel::for_each(workers, &plan.files, |(from, to, mode, _)| {
        interrupt.check()?;
        // Started over on the new file if another client replaces this one meanwhile.
        let got = read_latest(from, || true, || {
            let file = client.open(from)?;
            let mut out = LocalOut::create(to, mode & !process_umask())?;
            let n = copy_out(&file, &mut out, Share::InTree, false, Some(interrupt))?;
            out.finish()?;
            Ok(n)
        });
        let n = match got {
            Err(e) if permission_denied(&e) => {
                left_out(&format!("file {from}"));
                done.unreadable.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            other => other.with_context(|| format!("get {from} -> {}", to.display()))?,
        };
        done.bytes.fetch_add(n, Ordering::Relaxed);
        done.files.fetch_add(1, Ordering::Relaxed);
        bar.inc(n);
        Ok(())
    });
    bar.finish_and_clear();
    result?;
    // Modes last and deepest first, so a read-only directory's contents could still be made.
    for (_, dir, mode) in plan.dirs.iter().rev() {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode & !process_umask()))?;
    }
    Ok(())
}

/// Walks Tessera directory `remote` (mode `mode`) into `plan`, its copy going to `dest`;
/// `join` names an entry of a destination directory.
pub(super) fn walk_remote<R: Clone>(
    client: &Client,
    remote: String,
    dest: R,
    mode: u32,
    join: &impl Fn(&R, &str) -> R,
    plan: &mut Plan<String, R>,
) -> Result<()> {
    walk_remote_in(client, &client.open_dir(&remote)?, remote, dest, mode, join, plan)
}

/// [`walk_remote`] through a handle on each directory, so each is listed with one request
/// (or a few pages), not after a walk from the root.
fn walk_remote_in<R: Clone>(
    client: &Client,
    dir: &Dir,
    remote: String,
    dest: R,
    mode: u32,
    join: &impl Fn(&R, &str) -> R,
    plan: &mut Plan<String, R>,
) -> Result<()> {
    Interrupt::catch()?.check()?;
    let entries = dir.readdir().map_err(super::vanished)?;
    plan.dirs.push((remote.clone(), dest.clone(), mode & 0o7777));
    for entry in entries {
        let from = format!("{}/{}", remote.trim_end_matches('/'), entry.name);
        let to = join(&dest, &entry.name);
        match entry.attr.file_type {
            // Only this directory's own listing can be refused here: deeper ones are handled
            // at their level.
            FileType::Directory => match walk_remote_in(client, &dir.entered(&entry.name, &entry.attr)?, from.clone(), to, entry.attr.mode, join, plan) {
                Err(e) if permission_denied(&e) => {
                    left_out(&format!("directory {from}"));
                    plan.unreadable += 1;
                }
                other => other?,
            },
            FileType::Regular => plan.files.push((from, to, entry.attr.mode & 0o7777, entry.attr.size)),
            FileType::Symlink => plan.links.push((client.readlink(&from)?, to)),
        }
    }
    Ok(())
}
