//! Identifiers and limits shared by every Tessera crate. No I/O, no clocks.

pub mod ids;
pub mod limits;

pub use ids::{ObjectAddr, ObjectId, PartitionId};
