//! tessera-layout: where a file's bytes live on its data objects, and how a file-level list of
//! extents becomes one object-local command per storage node. Pure: no I/O, no clock.
//!
//! - [`stripe`]: [`StripeLayout`] and the round-robin math in both directions (seed 002: file
//!   byte f lives on object (f / S) mod C at object offset (f / (S*C)) * S + f mod S).
//! - [`plan`]: a file-level extent list -> one ordered object-local piece list per slot, each
//!   piece knowing where its bytes sit in the caller's linear buffer.
//! - [`descriptor`]: the cheapest OSD data layout (contiguous, strided, nested, SGL) that
//!   expands to exactly a given piece list.

pub mod descriptor;
pub mod plan;
pub mod stripe;

pub use descriptor::{choose_descriptor, DescriptorError};
pub use plan::{plan, Piece, PerOsdPlan, PlanError};
pub use stripe::{LayoutError, StripeLayout, StripePos, STRIPE_COUNT_MAX, STRIPE_UNIT_MAX};
pub use tessera_osd_proto::Extent;
