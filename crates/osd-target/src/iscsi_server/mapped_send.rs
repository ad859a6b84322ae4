//! Sending a list READ's Data-In from an object's mapping (`MappedDataIn`): by reference,
//! the pages handed to the socket through the connection's pipe (`vmsplice` + `splice`, no
//! copy on the target, as `sendfile` for a contiguous READ), when the pieces are large enough;
//! else with one vectored write, the kernel copying each piece into the socket.
//!
//! Both ways send what the page cache holds when the socket takes it, after the object lock
//! was released: a WRITE racing the READ may be seen partly, as with `sendfile` (SCSI leaves
//! overlapping SIMPLE tasks unordered). By reference the socket keeps the pages themselves
//! until the initiator has read them, so a WRITE landing after the send may show through too,
//! again as with `sendfile`. An object truncated below a piece makes the kernel's access fail
//! (EFAULT; the kernel takes or copies pages without a user-space fault, so the SIGBUS guard
//! is not involved): the connection closes and the initiator sees an error, never wrong bytes.
//! Pages already in the pipe or the socket when the file shrinks stay valid memory (they hold
//! the bytes they had), so a truncate cannot crash the target either way.

use std::io;

use tessera_iscsi::pdu::Pdu;
use tessera_scsi::{MappedDataIn, MappedSegment};
use tracing::warn;

use super::conn::Tx;
use super::splice::SplicePipe;

/// Mean length of a PDU's mapped pieces from which they are sent by reference. Below it the
/// pipe's per-page work (one pipe slot and one socket fragment per piece, however short)
/// costs more than the copy it saves. Measured with `tessera bench noncontig` experiment 3
/// (docs/noncontiguous.md, "how the target moves the pieces").
pub(crate) const SPLICE_MIN_PIECE_BYTES: usize = 4096;

/// Zeros for the parts of a Data-In past the object's end: never written, so they may be
/// handed to the socket by reference too.
static ZEROS: [u8; 64 * 1024] = [0u8; 64 * 1024];

/// Data-In bytes `[at, at + len)` of mapped pieces as slices, zeros included.
pub(crate) fn slices(mapped: &MappedDataIn, at: u64, len: usize) -> Vec<&[u8]> {
    let base = mapped.memory().as_ptr();
    let mut out = Vec::new();
    for s in mapped.slices(at, len) {
        match s {
            // SAFETY: MappedDataIn::new checked every segment lies inside the memory, which the
            // outcome keeps alive while the slices are sent; they are only handed to the kernel.
            MappedSegment::Memory { offset, len } => out.push(unsafe { std::slice::from_raw_parts(base.add(offset), len) }),
            MappedSegment::Zeros(mut n) => {
                while n > 0 {
                    let k = n.min(ZEROS.len());
                    out.push(&ZEROS[..k]);
                    n -= k;
                }
            }
        }
    }
    out
}

/// Whether `slices` are worth sending by reference (see [`SPLICE_MIN_PIECE_BYTES`]).
pub(crate) fn worth_splicing(slices: &[&[u8]]) -> bool {
    let bytes: usize = slices.iter().map(|s| s.len()).sum();
    !slices.is_empty() && bytes / slices.len() >= SPLICE_MIN_PIECE_BYTES
}

/// Sends `pdu` with `slices` (of `mapped`) as its data segment by reference. `Ok(false)`: the
/// connection has no pipe (none could be made); nothing was sent, send the slices by copy.
/// `Err`: the connection must close (the stream lost its framing; the pipe, which may still
/// hold bytes, has been dropped so nothing can reuse it).
pub(crate) fn send_pdu(tx: &mut Tx, pdu: &Pdu, mapped: &MappedDataIn, slices: &[&[u8]]) -> io::Result<bool> {
    if tx.send_pipe.is_none() {
        tx.send_pipe = Some(SplicePipe::new().map_err(|e| warn!(error = %e, "no pipe for Data-In; list READs are copied")));
    }
    let Some(Ok(pipe)) = &tx.send_pipe else { return Ok(false) };
    let len = slices.iter().map(|s| s.len()).sum();
    let memory = mapped.memory();
    let sent = tx.writer.write_pdu_streamed(pdu, len, |socket| pipe.send_slices(socket, slices, || !memory.is_damaged()));
    if sent.is_err() {
        tx.send_pipe = None;
    }
    sent.map(|()| true)
}
