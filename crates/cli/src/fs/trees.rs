//! `put -r` and `get -r`: a whole directory tree between the local file system and Tessera,
//! as `cp -r` copies one: directories made (or merged into), each file copied as `put` and
//! `get` copy one (holes kept, a replaced Tessera file swapped in whole), symbolic links
//! copied as links. Files are copied one after another, each striped over its OSDs.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use anyhow::{bail, Context, Result};
use tessera_client::{Client, FileType, FsError};

use super::interrupt::Interrupt;
use super::mode::process_umask;
use super::transfer::{copy_out, store, Source};

/// What a tree copy did.
#[derive(Default, Debug)]
pub struct Copied {
    pub files: u64,
    pub bytes: u64,
    pub links: u64,
    pub directories: u64,
    /// Local entries that are neither file, directory nor link (fifos, sockets, devices).
    pub skipped: u64,
}

/// Copies local directory `local` to `remote` (made if missing, merged into if a directory).
pub fn put_tree(client: &Client, local: &Path, remote: &str, done: &mut Copied) -> Result<()> {
    Interrupt::catch()?.check()?;
    let meta = fs::metadata(local).with_context(|| format!("reading {}", local.display()))?;
    make_remote_dir(client, remote, meta.permissions().mode() & 0o7777 & !process_umask())?;
    done.directories += 1;
    let mut entries: Vec<_> = fs::read_dir(local)
        .with_context(|| format!("listing {}", local.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("listing {}", local.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            bail!("{}: the name is not UTF-8, which Tessera names must be", path.display());
        };
        let to = format!("{}/{name}", remote.trim_end_matches('/'));
        let kind = entry.file_type().with_context(|| format!("reading {}", path.display()))?;
        if kind.is_dir() {
            put_tree(client, &path, &to, done)?;
        } else if kind.is_file() {
            let file = fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
            let meta = file.metadata()?;
            let name = path.display().to_string();
            let source = Source { input: Box::new(file), total: meta.len(), name: &name, verb: "put" };
            done.bytes += store(client, source, &to, meta.permissions().mode() & 0o7777 & !process_umask(), None)?;
            done.files += 1;
        } else if kind.is_symlink() {
            let target = fs::read_link(&path).with_context(|| format!("reading link {}", path.display()))?;
            let target = target.to_str().with_context(|| format!("{}: the link's target is not UTF-8", path.display()))?;
            replace_remote_link(client, &to)?;
            client.symlink(target, &to)?;
            done.links += 1;
        } else {
            eprintln!("tessera: put: skipping {}: not a file, directory or symbolic link", path.display());
            done.skipped += 1;
        }
    }
    Ok(())
}

fn make_remote_dir(client: &Client, remote: &str, mode: u32) -> Result<()> {
    match client.mkdir(remote, mode) {
        Err(e) if e.fs_error() == Some(FsError::Exists) => match client.lookup_followed(remote)?.file_type {
            FileType::Directory => Ok(()),
            _ => bail!("{remote} exists and is not a directory"),
        },
        other => Ok(other.map(drop)?),
    }
}

/// Clears the way for a link at `to`: a file or link there goes, a directory stays and refuses.
fn replace_remote_link(client: &Client, to: &str) -> Result<()> {
    match client.lookup(to) {
        Ok(a) if a.file_type == FileType::Directory => bail!("cannot replace directory {to} with a link"),
        Ok(_) => Ok(client.unlink(to)?),
        Err(e) if e.fs_error() == Some(FsError::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Copies Tessera directory `remote` to local `local` (made if missing, merged into if a
/// directory).
pub fn get_tree(client: &Client, remote: &str, local: &Path, done: &mut Copied) -> Result<()> {
    Interrupt::catch()?.check()?;
    let attr = client.lookup_followed(remote)?;
    match fs::create_dir(local) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && local.is_dir() => {}
        other => other.with_context(|| format!("making directory {}", local.display()))?,
    }
    done.directories += 1;
    for entry in client.readdir(remote)? {
        let from = format!("{}/{}", remote.trim_end_matches('/'), entry.name);
        let to = local.join(&entry.name);
        match entry.attr.file_type {
            FileType::Directory => get_tree(client, &from, &to, done)?,
            FileType::Regular => {
                let file = client.open(&from)?;
                let created = fs::File::create(&to).with_context(|| format!("creating {}", to.display()))?;
                let mut out = super::sparse::SparseWriter::new(created);
                done.bytes += copy_out(&file, &mut out, true).and_then(|n| Ok(std::io::Write::flush(&mut out).map(|()| n)?)).with_context(|| format!("get {from} -> {}", to.display()))?;
                fs::set_permissions(&to, fs::Permissions::from_mode(entry.attr.mode & 0o7777 & !process_umask()))?;
                done.files += 1;
            }
            FileType::Symlink => {
                let target = client.readlink(&from)?;
                if let Ok(meta) = fs::symlink_metadata(&to) {
                    if meta.is_dir() {
                        bail!("cannot replace directory {} with a link", to.display());
                    }
                    fs::remove_file(&to).with_context(|| format!("replacing {}", to.display()))?;
                }
                symlink(&target, &to).with_context(|| format!("making link {}", to.display()))?;
                done.links += 1;
            }
        }
    }
    // Last, so a read-only directory's contents could still be written.
    fs::set_permissions(local, fs::Permissions::from_mode(attr.mode & 0o7777 & !process_umask()))?;
    Ok(())
}
