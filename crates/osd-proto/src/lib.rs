//! OSD-2 (T10 OSD-2 r05) wire formats, sans-IO.
//!
//! The target decodes a CDB plus its Data-Out into a typed [`Request`]; the engine executes it
//! and answers a [`Reply`]; this crate encodes the reply into Data-In. The initiator side uses the
//! same crate to build CDBs and parse Data-In, so both directions share one codec.

pub mod attr;
pub mod command;
pub mod layout;

pub use attr::{AttrId, Attribute, GetAttrs, RetrievedAttr};
pub use command::{
    Command, DataLayout, Extent, FlushScope, MapType, Options, Reply, Request, ServiceAction,
    TimestampsControl,
};
