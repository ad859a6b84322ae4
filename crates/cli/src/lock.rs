//! An exclusive advisory lock on a directory: `flock(2)` on `DIR/tessera.lock`, which also holds
//! the locking process's pid for messages. A daemon holds its store's lock for its whole life and
//! `tessera up` holds the cluster directory's lock while it starts daemons, so two processes
//! never run on one store. The kernel drops the lock when its holder exits, however it exits,
//! so a crash leaves no stale lock behind.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{bail, Context, Result};

pub const LOCK_FILE: &str = "tessera.lock";

/// A held lock; released when dropped (or when this process ends).
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Makes store directory `dir` if it is missing (refusing a path that is something else),
    /// then takes its lock as [`DirLock::acquire`] does.
    pub fn create_and_acquire(dir: &Path, what: &str) -> Result<DirLock> {
        if dir.exists() && !dir.is_dir() {
            bail!("{} is not a directory; give the directory that holds (or will hold) {what}", dir.display());
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Self::acquire(dir, what)
    }

    /// Takes `dir`'s lock without waiting; if another process holds it, fails with a message
    /// naming `dir` and, when known, that process's pid. `what` says what `dir` is.
    pub fn acquire(dir: &Path, what: &str) -> Result<DirLock> {
        match Self::try_acquire(dir)? {
            Ok(lock) => Ok(lock),
            Err(holder) => bail!("{what} {} is in use by {holder}; only one process may run on it", dir.display()),
        }
    }

    /// Takes `dir`'s lock without waiting, or says who holds it.
    pub fn try_acquire(dir: &Path) -> Result<Result<DirLock, Holder>> {
        let path = dir.join(LOCK_FILE);
        let mut file = open(&path)?;
        if !try_flock(&file).with_context(|| format!("locking {}", path.display()))? {
            return Ok(Err(Holder { pid: read_pid(&mut file) }));
        }
        // Our pid for the next one who finds it locked. Open files are close-on-exec, so a
        // daemon this process starts does not inherit the lock.
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Ok(DirLock { _file: file }))
    }
}

/// Whether a process holds `dir`'s lock, and its pid when recorded. Takes and drops the lock
/// to find out, so it is for a directory nobody should be starting on right now.
pub fn holder(dir: &Path) -> Option<Holder> {
    let mut file = File::options().read(true).write(true).open(dir.join(LOCK_FILE)).ok()?;
    if try_flock(&file).unwrap_or(true) {
        return None;
    }
    // A holder writes its pid right after locking: give one that is just starting a moment.
    for _ in 0..10 {
        if let Some(pid) = read_pid(&mut file) {
            return Some(Holder { pid: Some(pid) });
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Some(Holder { pid: None })
}

/// A process that holds a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// `None` in the instant between its lock and its pid being written.
    pub pid: Option<u32>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(self.pid))
    }
}

fn describe(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("pid {pid}"),
        None => "another process".to_string(),
    }
}

fn open(path: &Path) -> Result<File> {
    File::options().read(true).write(true).create(true).truncate(false).open(path).with_context(|| format!("opening {}", path.display()))
}

/// `flock(LOCK_EX | LOCK_NB)`: true when taken, false when another open file holds it.
fn try_flock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a file descriptor this File owns; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path(), "store").unwrap();
        // flock locks belong to an open file, so a second open in this process conflicts too.
        let err = DirLock::acquire(dir.path(), "store").err().expect("second lock refused").to_string();
        assert!(err.contains(&format!("in use by pid {}", std::process::id())), "{err}");
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
        assert_eq!(holder(dir.path()), Some(Holder { pid: Some(std::process::id()) }));
        drop(first);
        // Another test of this binary forking meanwhile holds a copy of the lock's descriptor
        // until its child execs (close-on-exec): the lock is released within moments.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while holder(dir.path()).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(holder(dir.path()), None);
        DirLock::acquire(dir.path(), "store").unwrap();
    }
}
