//! SCSI-level types shared by the target and the initiator.
//!
//! The iSCSI layer moves [`ScsiTask`]s to a [`ScsiDevice`] on the target side, and a client
//! drives a [`ScsiTransport`] on the initiator side. Neither side knows OSD-2; the OSD command
//! set plugs in above these traits.

pub mod mapped_data_in;
pub mod placed;
pub mod sense;
pub mod status;
pub mod task;
pub mod transport;

pub use mapped_data_in::{MappedDataIn, MappedMemory, MappedSegment};
pub use placed::{Decided, Destination, PlacedDataOut, PlacedPiece, PlacedPieces};
pub use sense::{FieldPointer, OsdObjectSense, Sense, SenseDecodeError, SenseKey};
pub use status::ScsiStatus;
pub use task::{FileDataIn, Nexus, ScsiDevice, ScsiOutcome, ScsiTask, TmfResult};
pub use transport::{DirectTransport, LentResponse, ScsiRequest, ScsiResponse, ScsiTransport, TransportError};
