//! `chmod -R` and `chown -R`: every entry below a directory changed through a handle on its
//! parent ([`Dir::set_attrs`]), one request per entry and no walk from the root, parents
//! before their contents as chmod(1) and chown(1) walk a tree.

use anyhow::{bail, Result};
use tessera_client::{Attr, Client, Dir, FileType, SetAttrs};

use crate::units::count;

/// How a recursive change treats the symbolic links it meets inside the tree: chmod(1) -R
/// leaves them alone (a link has no mode of its own), chown(1) -R changes the link itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Links {
    Skip,
    Change,
}

/// Applies `changes` to everything below directory `path` (the operand itself is the caller's).
/// Goes on past an entry it may not change or a directory it may not read, naming each on
/// stderr as coreutils does, and fails at the end saying how many there were.
pub fn below(client: &Client, path: &str, links: Links, changes: &impl Fn(&Attr) -> SetAttrs) -> Result<()> {
    let dir = client.open_dir(path)?;
    let failed = walk(path, &dir, links, changes);
    if failed > 0 {
        bail!("{path}: {} below it could not be changed (each named above)", count(failed, "entry", "entries"));
    }
    Ok(())
}

/// The entries of `dir` (labelled `path`) and everything below them; returns the failures.
fn walk(path: &str, dir: &Dir, links: Links, changes: &impl Fn(&Attr) -> SetAttrs) -> u64 {
    let entries = match dir.readdir().map_err(super::vanished) {
        Ok(entries) => entries,
        Err(e) => {
            eprintln!("tessera: cannot read directory {path}: {e}");
            return 1;
        }
    };
    let mut failed = 0;
    for entry in entries {
        if entry.attr.file_type == FileType::Symlink && links == Links::Skip {
            continue;
        }
        if let Err(e) = dir.set_attrs(&entry.name, &entry.attr, changes(&entry.attr)) {
            eprintln!("tessera: {}", super::vanished(e));
            failed += 1;
        }
        // A directory whose change failed is still walked, as chmod(1) walks it.
        if entry.attr.file_type == FileType::Directory {
            let below = format!("{}/{}", path.trim_end_matches('/'), entry.name);
            match dir.entered(&entry.name, &entry.attr) {
                Ok(sub) => failed += walk(&below, &sub, links, changes),
                Err(e) => {
                    eprintln!("tessera: {e}");
                    failed += 1;
                }
            }
        }
    }
    failed
}
