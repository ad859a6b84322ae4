//! Data-Out received straight into its final place: a device that can say, from the CDB alone,
//! where a command's data belongs (an object's file) lets the transport put the bytes there as
//! they arrive, instead of assembling them in memory and copying them again
//! ([`crate::ScsiDevice::place_data_out`]).

use std::fs::File;

use crate::ScsiOutcome;

/// Where a placed command's Data-Out goes.
#[derive(Debug, Clone, Copy)]
pub enum Destination<'a> {
    /// Data-Out byte `i` goes to `file` at `offset + i`.
    File { file: &'a File, offset: u64 },
    /// The outcome is already decided (e.g. the command was refused): read and drop the data.
    Discard,
}

/// A command whose Data-Out the transport receives into [`PlacedDataOut::destination`]. Once
/// every byte is there the transport calls [`PlacedDataOut::finish`]; dropping it unfinished
/// (ABORT TASK, a lost connection, a Data-Out error) abandons the command, and the device
/// undoes what it must.
pub trait PlacedDataOut: Send {
    fn destination(&self) -> Destination<'_>;

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
