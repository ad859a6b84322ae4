//! Data-Out received straight into its final place: a device that can say, from the CDB alone
//! (or from the CDB and the first bytes of the Data-Out, such as a list WRITE's continuation
//! segment), where a command's data belongs lets the transport put the bytes there as they
//! arrive, instead of assembling them in memory and copying them again
//! ([`crate::ScsiDevice::place_data_out`]).

use std::fs::File;

use crate::{MappedMemory, ScsiOutcome};

/// Where a placed command's Data-Out goes.
#[derive(Clone, Copy)]
pub enum Destination<'a> {
    /// Data-Out byte `i` goes to `file` at `offset + i`.
    File { file: &'a File, offset: u64 },
    /// Data-Out bytes go to pieces of a file, in list order.
    Pieces(PlacedPieces<'a>),
    /// The device needs Data-Out bytes `[0, len)` before it can say where the rest goes: the
    /// transport receives them into memory and hands them to [`PlacedDataOut::take_prefix`].
    Prefix { len: usize },
    /// The outcome is already decided (e.g. the command was refused): read and drop the data.
    Discard,
}

/// One piece of a placed list: Data-Out bytes `[at, at + len)` go to the file from `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacedPiece {
    pub at: u64,
    pub offset: u64,
    pub len: usize,
}

/// A list of pieces of one file that receive a command's Data-Out.
#[derive(Clone, Copy)]
pub struct PlacedPieces<'a> {
    pub file: &'a File,
    /// The file mapped from offset 0 (so a piece's offset is its offset in the memory too),
    /// when the device could map it: the transport receives the bytes straight into it.
    /// Without it, or where the memory cannot take them, each piece is written with `pwrite`.
    /// The file is at least as long as the end of every piece, so no piece lies past its end.
    pub memory: Option<&'a dyn MappedMemory>,
    /// In Data-Out order, end to end: each piece's `at` is where the one before it ended.
    pub pieces: &'a [PlacedPiece],
}

/// A command whose Data-Out the transport receives into [`PlacedDataOut::destination`]. Once
/// every byte is there the transport calls [`PlacedDataOut::finish`]; dropping it unfinished
/// (ABORT TASK, a lost connection, a Data-Out error) abandons the command, and the device
/// undoes what it must.
pub trait PlacedDataOut: Send {
    fn destination(&self) -> Destination<'_>;

    /// Takes Data-Out `[0, len)` after [`Destination::Prefix`] asked for it. `false`: the
    /// command is not placed after all; the transport receives its whole Data-Out (the prefix
    /// included) into memory and runs it the ordinary way, and drops this unfinished.
    fn take_prefix(&mut self, _prefix: &[u8]) -> bool {
        false
    }

    /// Runs the command now that its Data-Out is in place.
    fn finish(self: Box<Self>) -> ScsiOutcome;
}

/// A placed command whose answer was decided before its data arrived.
pub struct Decided(pub ScsiOutcome);

impl PlacedDataOut for Decided {
    fn destination(&self) -> Destination<'_> {
        Destination::Discard
    }

    fn finish(self: Box<Self>) -> ScsiOutcome {
        self.0
    }
}
