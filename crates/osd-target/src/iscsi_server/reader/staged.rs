//! Data-Out of a command placed in two steps (a list WRITE): Data-Out `[0, prefix)` (its
//! continuation segment) is received into memory and handed to the device, which then says
//! where the rest goes: pieces of the object's file (placed_pieces.rs), nowhere (a refusal
//! already decided), or, when it declines, the task's buffer as for any buffered command. One
//! data segment may hold the end of the prefix and the first data bytes, so the split happens
//! inside it, and the destination of the bytes after the split is asked again.
//!
//! Data-Out arrives in offset order: unsolicited data is checked to continue where it left
//! off, and the target offers MaxOutstandingR2T=1, so each burst is solicited only once the
//! one before it is complete. Overlapping pieces therefore resolve "later wins" by arrival,
//! as in list order. Should more R2Ts ever be outstanding, a segment that does not continue
//! the prefix sends the command the buffered way (which takes bytes at any offset) rather than
//! misplace them.

use std::io::{self, Read};
use std::net::TcpStream;

use tessera_iscsi::PlaceData;
use tessera_scsi::Destination;

use super::super::conn::{Connection, RECYCLED_BUFFER_MIN};
use super::super::placed_pieces;
use super::super::r2t::Receiving;
use super::super::splice::SplicePipe;

/// Where the next bytes of a staged task go.
enum Stage {
    /// Into the prefix, which ends at this Data-Out offset.
    Prefix(u64),
    Pieces,
    Discard,
    Buffer,
}

/// One data segment of a staged task, segment byte `i` at Data-Out offset `base + i`.
pub(crate) struct Staged<'a> {
    pub conn: &'a Connection,
    pub task: &'a mut Receiving,
    pub base: u64,
    /// The connection's pipe, when it has one: pieces are then received through it.
    pub pipe: Option<&'a SplicePipe>,
    /// The file failed: the rest is consumed and dropped, and this becomes the answer.
    pub failed: Option<io::Error>,
}

impl Staged<'_> {
    fn stage(&self) -> Stage {
        match self.task.placed.as_ref().map(|p| p.destination()) {
            None => Stage::Buffer,
            Some(Destination::Prefix { len }) => Stage::Prefix(len as u64),
            Some(Destination::Pieces(_)) if self.failed.is_none() => Stage::Pieces,
            // A contiguous file destination is never staged; drop rather than misplace.
            Some(Destination::Pieces(_) | Destination::Discard | Destination::File { .. }) => Stage::Discard,
        }
    }

    /// The prefix is complete: the device decides; if it declines, the task is received into
    /// a buffer after all, prefix first.
    fn resolve_prefix(&mut self) {
        let prefix = std::mem::take(&mut self.task.prefix);
        let placed = self.task.placed.as_mut().expect("a staged task is placed");
        if !placed.take_prefix(&prefix) {
            self.buffer_instead(prefix);
        }
    }

    /// Receives the task into a buffer from now on, starting with the `received` bytes of
    /// Data-Out from offset 0.
    fn buffer_instead(&mut self, received: Vec<u8>) {
        self.task.placed = None; // dropped unfinished: nothing was placed yet
        let write_len = self.task.write_len() as usize;
        if write_len >= RECYCLED_BUFFER_MIN {
            self.task.use_buffer(self.conn.take_buffer(write_len));
        }
        self.task.grow(0, received.len()).copy_from_slice(&received);
    }

    /// The stage for bytes from Data-Out offset `from`: a prefix not continued in order is
    /// given up for the buffered way (after which any order is fine).
    fn stage_at(&mut self, from: u64) -> Stage {
        let stage = self.stage();
        if matches!(stage, Stage::Prefix(_)) && from != self.task.prefix.len() as u64 {
            let received = std::mem::take(&mut self.task.prefix);
            self.buffer_instead(received);
            return Stage::Buffer;
        }
        stage
    }

    /// Bytes of `[from, from + n)` that go to the current stage (at least one: a prefix stage
    /// starts at the prefix's current length, below its end).
    fn take(&self, stage: &Stage, from: u64, n: usize) -> usize {
        match *stage {
            Stage::Prefix(end) => (end.saturating_sub(from) as usize).min(n),
            _ => n,
        }
    }

    fn prefix_done(&mut self, end: u64) {
        if self.task.prefix.len() as u64 == end {
            self.resolve_prefix();
        }
    }

    fn pieces_write(&mut self, from: u64, bytes: &[u8]) {
        let Some(Destination::Pieces(target)) = self.task.placed.as_ref().map(|p| p.destination()) else { return };
        if let Err(e) = placed_pieces::write_by_calls(&target, from, bytes) {
            self.failed = Some(e);
        }
    }
}

impl PlaceData<TcpStream> for Staged<'_> {
    fn put(&mut self, at: usize, mut bytes: &[u8]) {
        let mut from = self.base + at as u64;
        while !bytes.is_empty() {
            let stage = self.stage_at(from);
            let n = self.take(&stage, from, bytes.len());
            match stage {
                Stage::Prefix(end) => {
                    self.task.prefix.extend_from_slice(&bytes[..n]);
                    self.prefix_done(end);
                }
                Stage::Pieces => self.pieces_write(from, &bytes[..n]),
                Stage::Discard => {}
                Stage::Buffer => self.task.grow(from as u32, n).copy_from_slice(&bytes[..n]),
            }
            from += n as u64;
            bytes = &bytes[n..];
        }
    }

    fn transfer(&mut self, stream: &mut TcpStream, at: usize, len: usize) -> io::Result<()> {
        let mut from = self.base + at as u64;
        let end = from + len as u64;
        while from < end {
            let stage = self.stage_at(from);
            let n = self.take(&stage, from, (end - from) as usize);
            match stage {
                Stage::Prefix(prefix_end) => {
                    let have = self.task.prefix.len();
                    self.task.prefix.resize(have + n, 0);
                    stream.read_exact(&mut self.task.prefix[have..])?;
                    self.prefix_done(prefix_end);
                }
                Stage::Pieces => match self.task.placed.as_ref().map(|p| p.destination()) {
                    Some(Destination::Pieces(target)) => placed_pieces::receive(stream, &target, from, n, &mut self.failed, self.pipe)?,
                    _ => drain(stream, n)?,
                },
                Stage::Discard => drain(stream, n)?,
                Stage::Buffer => stream.read_exact(self.task.grow(from as u32, n))?,
            }
            from += n as u64;
        }
        Ok(())
    }
}

fn drain(stream: &mut TcpStream, n: usize) -> io::Result<()> {
    let copied = io::copy(&mut stream.take(n as u64), &mut io::sink())?;
    if copied != n as u64 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}
