//! tessera-mds-proto: the messages clients and metadata servers exchange, and their framing.
//! The codec is sans-IO: encoders append to a `Vec<u8>`, decoders read a byte slice. The one
//! blocking adapter over it, [`connection`], is what clients and servers call each other with;
//! the servers' event loop lives in `tessera-mds`.
//!
//! - [`limits`]: every bound a decoder enforces, with their relations checked when compiling.
//! - [`wire`]: the bounded reader/writer every message codec is built from.
//! - [`types`]: inode ids (home server in the high bits), attributes, layouts, directory entries.
//! - [`caller`]: [`Caller`], the user a request is sent for (uid, gid, groups).
//! - [`error`]: [`FsError`], the errno-like result of a namespace operation, and [`DecodeError`].
//! - [`grant`]: the capabilities and capability keys a layout comes with.
//! - [`usage`]: each OSD's capacity, use and backing file system, for `df`.
//! - [`request`] / [`reply`]: one variant per operation, hand-written encode/decode each.
//! - [`frame`]: length-prefixed frames carrying a request id and one message.
//! - [`identity`] / [`seal`]: proof of the user a connection acts for, and the sealing of
//!   every frame after it.
//! - [`connection`]: [`MdsConnection`], frames over TCP, one request at a time.
//! - [`fuzzing`]: the fuzz entry point, a plain function `cargo test` also runs.

pub mod caller;
pub mod connection;
pub mod error;
pub mod frame;
pub mod grant;
pub mod identity;
pub mod fuzzing;
pub mod limits;
pub mod mode;
pub mod reply;
pub mod request;
pub mod seal;
pub mod types;
pub mod usage;
pub mod wire;

pub use caller::Caller;
pub use connection::{ConnectionError, MdsConnection};
pub use error::{DecodeError, FsError};
pub use grant::{Grant, ObjectCredential};
pub use identity::{Proof, ProofError, UserKey};
pub use seal::{Seal, SessionKey};
pub use usage::{FsSpace, OsdUsage};
pub use frame::{decode_frame, encode_frame, encode_request_frame, frame_body_len, Frame, Message, FRAME_HEADER_LEN};
pub use reply::Reply;
pub use request::Request;
pub use types::*;
