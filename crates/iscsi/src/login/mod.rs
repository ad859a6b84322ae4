//! Login-phase logic (RFC 7143 §6, §12, §13): the key table, negotiated parameters, the pure
//! negotiators both sides run, and the security stage ([`auth`]).

pub mod auth;
pub mod keys;
pub mod negotiate;
pub mod params;

pub use negotiate::{InitiatorNegotiator, NegotiationError, TargetNegotiator};
pub use params::{DigestKind, Offer, SessionParams, SessionType, DEFAULT_MAX_RECV_DATA_SEGMENT_LEN};
