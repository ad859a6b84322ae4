//! Receiving a data segment into a placed command's file ([`tessera_scsi::PlacedDataOut`]): what
//! the PDU reader had already buffered is written with `pwrite`, the rest is spliced from the
//! socket. A file failure does not break the stream: the bytes are still consumed, and the
//! failure becomes the command's answer.

use std::fs::File;
use std::io;
use std::net::TcpStream;
use std::os::unix::fs::FileExt;

use tessera_engine::{IoOp, StorageError};
use tessera_iscsi::PlaceData;
use tessera_scsi::Sense;

use super::splice::SplicePipe;

/// Smallest WRITE whose Data-Out is placed: one the reader would not run inline anyway (a
/// placed WRITE commits on the executor thread). Smaller ones run inline, and there the thread
/// wake-up costs more than the copy a placement saves (measured at 64 KiB: 1.1 CPU s/GiB
/// buffered, 1.2 to 2.3 placed, `tessera bench io --target-only`).
pub(crate) const PLACED_WRITE_MIN: u32 = super::executor::INLINE_BYTES_MAX as u32 + 1;

/// One data segment going to `file`, segment byte `i` at `base + i`.
pub(crate) struct FilePlacement<'a> {
    pub pipe: &'a SplicePipe,
    pub file: &'a File,
    pub base: u64,
    pub failed: Option<io::Error>,
}

impl FilePlacement<'_> {
    /// The command's answer when the file failed: MEDIUM ERROR or, when full, DATA PROTECT.
    pub fn failure_sense(self) -> Option<Sense> {
        self.failed.map(|source| StorageError::Io { op: IoOp::Write, source }.sense())
    }
}

impl PlaceData<TcpStream> for FilePlacement<'_> {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        if self.failed.is_none() {
            if let Err(e) = self.file.write_all_at(bytes, self.base + at as u64) {
                self.failed = Some(e);
            }
        }
    }

    fn transfer(&mut self, stream: &mut TcpStream, at: usize, len: usize) -> io::Result<()> {
        if self.failed.is_some() {
            let copied = io::copy(&mut io::Read::take(stream, len as u64), &mut io::sink())?;
            return if copied == len as u64 { Ok(()) } else { Err(io::ErrorKind::UnexpectedEof.into()) };
        }
        if let Err(e) = self.pipe.socket_to_file(stream, self.file, self.base + at as u64, len)? {
            self.failed = Some(e);
        }
        Ok(())
    }
}
