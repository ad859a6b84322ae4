//! Reading a file that another client replaces meanwhile. `put`, `cp` and `mv` rename a new
//! file over the old one, and the old one's objects go with its last name (there is no
//! deferred removal for open files), so a reader that opened the old one gets ESTALE. What a
//! user of `get` or `cat` wants then is the file the name now holds: the read starts over from
//! the path, as long as nothing of the old file has left the process.

use std::cell::Cell;
use std::io::{self, Write};

use anyhow::Result;
use tessera_client::FsError;

/// Reads of one path, in all: a file replaced this often in a row is being rewritten
/// continually, and the error says so.
const ATTEMPTS: u32 = 3;

/// Whether `e` says the file that was open is gone from the namespace (replaced or removed).
pub fn was_replaced(e: &anyhow::Error) -> bool {
    super::fs_error_of(e) == Some(FsError::Stale)
}

/// Runs `read` (which opens `path` itself) again while it fails because the file it opened
/// was replaced, and `restartable()` says none of its output has been given away.
pub fn read_latest<T>(path: &str, restartable: impl Fn() -> bool, mut read: impl FnMut() -> Result<T>) -> Result<T> {
    let mut attempt = 1;
    loop {
        match read() {
            Err(e) if was_replaced(&e) && restartable() && attempt < ATTEMPTS => {
                tracing::debug!(path, attempt, "the file was replaced while being read; reading the new one");
                attempt += 1;
            }
            Err(e) if was_replaced(&e) => {
                return Err(e.context(format!("{path} was replaced or removed while being read ({attempt} tries)")));
            }
            result => return result,
        }
    }
}

/// A writer that counts the bytes it has passed on, so a reader knows whether it can start over.
pub struct Counted<'a, W> {
    pub inner: W,
    written: &'a Cell<u64>,
}

impl<'a, W> Counted<'a, W> {
    pub fn new(inner: W, written: &'a Cell<u64>) -> Self {
        Counted { inner, written }
    }
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written.set(self.written.get() + n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
