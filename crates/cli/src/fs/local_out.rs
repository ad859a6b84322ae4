//! The local file `get` (and `get -r`) writes. A regular file, new or existing, is written
//! under a temporary name beside it and renamed over it only once it is whole, so a get that
//! fails or is interrupted leaves the destination as it was, as `put` leaves a Tessera file.
//! Runs of zeros stay holes. Anything else found under the name (a device such as /dev/null,
//! a fifo) is written in place, as cp(1) writes to it. A link to a file is followed and the
//! file it names is replaced; a dangling link is refused, as cp(1) refuses it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};

use super::sparse::SparseWriter;

/// A local destination being written; dropped without [`LocalOut::finish`], it removes its
/// temporary and leaves the destination untouched.
pub struct LocalOut {
    writer: Writer,
    /// The temporary, until it is renamed over `path`; `None` when writing in place.
    temp: Option<PathBuf>,
    path: PathBuf,
    mode: u32,
}

enum Writer {
    Sparse(SparseWriter),
    /// A device or fifo cannot seek over holes.
    Plain(File),
}

/// Numbers the temporaries of one process (a tree's files are written several at once).
static TEMPORARIES: AtomicU64 = AtomicU64::new(0);

impl LocalOut {
    /// Starts writing `path`. A new file gets `new_mode`; an existing one keeps its own, and
    /// must be writable, as cp(1) requires.
    pub fn create(path: &Path, new_mode: u32) -> Result<LocalOut> {
        let shown = path.display();
        let (path, mode, existed) = match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => bail!("{shown} is a directory"),
            Ok(meta) if !meta.is_file() => {
                let file = OpenOptions::new().write(true).truncate(true).open(path).with_context(|| format!("opening {shown}"))?;
                return Ok(LocalOut { writer: Writer::Plain(file), temp: None, path: path.to_path_buf(), mode: 0 });
            }
            Ok(meta) => {
                // Opened without truncating, only to be refused where cp(1) would be.
                OpenOptions::new().write(true).open(path).with_context(|| format!("cannot write {shown}"))?;
                let real = fs::canonicalize(path).with_context(|| format!("resolving {shown}"))?;
                (real, meta.permissions().mode() & 0o7777, true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
                    bail!("cannot make file {shown}: not a directory");
                }
                if fs::symlink_metadata(path).is_ok() {
                    bail!("not writing through dangling symbolic link {shown}");
                }
                (path.to_path_buf(), new_mode, false)
            }
            Err(e) => return Err(e).with_context(|| format!("looking at {shown}")),
        };
        let temp = temporary_beside(&path)?;
        let file = match OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp) {
            Ok(file) => file,
            // What is wrong with the directory is wrong for the destination too: name that, as
            // cp(1) does, not the hidden temporary the user never asked for.
            Err(e) if told_by_destination(&e) && !existed => bail!("cannot create {shown}: {e}"),
            // cp(1) would write an existing file in place; this needs its directory too.
            Err(e) if told_by_destination(&e) => {
                bail!("cannot get over {shown}: its directory refuses new files ({e}); the copy is written beside the file, then renamed over it")
            }
            Err(e) => return Err(e).with_context(|| format!("creating {} (the temporary for {})", temp.display(), path.display())),
        };
        Ok(LocalOut { writer: Writer::Sparse(SparseWriter::new(file)), temp: Some(temp), path, mode })
    }

    /// Completes the file: its length, its mode, and its name.
    pub fn finish(mut self) -> Result<()> {
        self.flush().with_context(|| format!("writing {}", self.path.display()))?;
        if let Some(temp) = &self.temp {
            fs::set_permissions(temp, fs::Permissions::from_mode(self.mode)).with_context(|| format!("setting the mode of {}", temp.display()))?;
            fs::rename(temp, &self.path).with_context(|| format!("renaming {} to {}", temp.display(), self.path.display()))?;
            self.temp = None;
        }
        Ok(())
    }
}

/// Whether a failure to create a file in a directory says the same of any file created there.
fn told_by_destination(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory | io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
    )
}

/// `.<name>.get-<pid>-<n>` in `path`'s directory.
fn temporary_beside(path: &Path) -> Result<PathBuf> {
    let name = path.file_name().with_context(|| format!("{} names no file", path.display()))?;
    let n = TEMPORARIES.fetch_add(1, Ordering::Relaxed);
    let temp = super::temporary::hidden_name(&name.to_string_lossy(), &format!("get-{}-{n}", std::process::id()));
    Ok(path.with_file_name(temp))
}

impl Write for LocalOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.writer {
            Writer::Sparse(w) => w.write(buf),
            Writer::Plain(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.writer {
            Writer::Sparse(w) => w.flush(),
            Writer::Plain(w) => w.flush(),
        }
    }
}

impl Drop for LocalOut {
    fn drop(&mut self) {
        if let Some(temp) = &self.temp {
            let _ = fs::remove_file(temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{symlink, FileTypeExt};

    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_new_file_appears_only_when_finished_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new");
        let mut out = LocalOut::create(&path, 0o750).unwrap();
        out.write_all(b"contents").unwrap();
        assert!(!path.exists(), "visible before it is whole");
        out.finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"contents");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o750);
        assert_eq!(leftovers(dir.path()), ["new"]);
    }

    #[test]
    fn an_abandoned_write_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old");
        fs::write(&path, b"old contents").unwrap();
        let mut out = LocalOut::create(&path, 0o644).unwrap();
        out.write_all(b"half").unwrap();
        drop(out);
        assert_eq!(fs::read(&path).unwrap(), b"old contents");
        assert_eq!(leftovers(dir.path()), ["old"]);
    }

    #[test]
    fn an_existing_file_keeps_its_mode_and_a_link_to_it_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        fs::write(&path, b"old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o604)).unwrap();
        symlink("file", dir.path().join("link")).unwrap();
        let mut out = LocalOut::create(&dir.path().join("link"), 0o777).unwrap();
        out.write_all(b"new").unwrap();
        out.finish().unwrap();
        assert!(fs::symlink_metadata(dir.path().join("link")).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o604);
    }

    #[test]
    fn a_dangling_link_and_a_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        symlink("nowhere", dir.path().join("dangling")).unwrap();
        let e = LocalOut::create(&dir.path().join("dangling"), 0o644).err().unwrap();
        assert!(e.to_string().contains("dangling"), "{e}");
        let e = LocalOut::create(dir.path(), 0o644).err().unwrap();
        assert!(e.to_string().contains("is a directory"), "{e}");
        assert!(!dir.path().join("nowhere").exists());
    }

    #[test]
    fn a_fifo_is_written_in_place_with_no_holes() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        let mut data = vec![0u8; 1 << 18];
        data[1 << 17] = 7;
        let mut out = LocalOut::create(&fifo, 0o644).unwrap();
        out.write_all(&data).unwrap();
        out.finish().unwrap();
        assert_eq!(reader.join().unwrap(), data);
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo(), "the fifo was replaced");
        assert_eq!(leftovers(dir.path()), ["fifo"]);
    }
}
