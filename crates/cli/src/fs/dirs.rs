//! Making directories through handles on their parents ([`Dir`]), for the commands that make
//! many or deep ones (`mkdir -p`, `cp -r`, `put -r`). Each directory then costs one request
//! or two, where a path would be walked from the root every time (d²/2 lookups for a chain
//! of depth d: 6.8 s at depth 400).

use std::collections::HashMap;

use anyhow::{bail, Result};
use tessera_client::{Client, Dir, FsError};

/// Makes `name` in `parent` (labelled `path`) with `mode`, or takes the directory there, a
/// symlink to one included, as mkdir(1) -p does; anything else there refuses.
pub fn make_in(client: &Client, parent: &Dir, name: &str, path: &str, mode: u32) -> Result<Dir> {
    match parent.mkdir(name, mode) {
        Ok(made) => Ok(parent.entered(name, &made)?),
        Err(e) if e.fs_error() == Some(FsError::Exists) => match parent.open_dir(name) {
            Ok(dir) => Ok(dir),
            // A symlink, followed by the walk of the whole path, or no directory at all.
            Err(e) if e.fs_error() == Some(FsError::NotDir) => match client.open_dir(path) {
                Err(e) if e.fs_error() == Some(FsError::NotDir) => bail!("{path} exists and is not a directory"),
                other => Ok(other?),
            },
            Err(e) => Err(e.into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// Makes directory `path` by its path, or takes the one there (a file there refuses): the top
/// of a tree, which has no parent's handle yet.
fn make_by_path(client: &Client, path: &str, mode: u32) -> Result<Dir> {
    match client.mkdir(path, mode) {
        Err(e) if e.fs_error() == Some(FsError::Exists) => match client.open_dir(path) {
            Err(e) if e.fs_error() == Some(FsError::NotDir) => bail!("{path} exists and is not a directory"),
            other => Ok(other?),
        },
        other => {
            other?;
            Ok(client.open_dir(path)?)
        }
    }
}

/// Makes (or takes) each directory of a walk, given parents first, each by its path and
/// mode: the first by its path, the others in their parent's handle.
pub struct TreeMaker<'c> {
    client: &'c Client,
    /// Handles on the directories made so far, by path without a trailing `/`.
    made: HashMap<String, Dir>,
}

impl<'c> TreeMaker<'c> {
    pub fn new(client: &'c Client) -> Self {
        TreeMaker { client, made: HashMap::new() }
    }

    pub fn make(&mut self, path: &str, mode: u32) -> Result<()> {
        let key = path.trim_end_matches('/');
        let dir = match key.rsplit_once('/').and_then(|(parent, name)| Some((self.made.get(parent)?, name))) {
            Some((parent, name)) => make_in(self.client, parent, name, path, mode)?,
            None => make_by_path(self.client, path, mode)?,
        };
        self.made.insert(key.to_string(), dir);
        Ok(())
    }
}
