//! OSD-2 (T10 OSD-2 r05) wire formats, sans-IO.
//!
//! The target decodes a CDB plus its Data-Out into a typed [`Request`] with
//! [`decode_request`]; the engine executes it and answers a [`Reply`]; [`encode_reply`] lays
//! the reply out in Data-In. The initiator builds CDBs with [`OsdRequestBuilder`] and takes
//! Data-In apart with [`parse_data_in`], so both directions share one codec. LIST, QUERY and
//! READ MAP results have one codec each ([`list`], [`read_map`]) used by both sides.
//!
//! Files: [`cdb`] byte map, [`offset`] encoded offsets, [`attr_list`] attribute lists,
//! [`continuation`] + [`query`] the continuation segment, [`atomics`] Tessera's vendor
//! commands, [`decode`] the target-side decoder, [`builder`] the initiator-side encoder,
//! [`reply`] Data-In, [`error`] errors and their sense data, [`fuzzing`] fuzz entry points.
//! docs/osd2-wire-format.md draws all of it.

pub mod atomics;
pub mod attr;
pub mod attr_list;
pub mod builder;
pub mod cdb;
pub mod command;
pub mod continuation;
pub mod decode;
pub mod error;
pub mod fuzzing;
pub mod layout;
pub mod list;
pub mod offset;
pub mod pages;
pub mod query;
pub mod read_map;
pub mod reply;

#[cfg(test)]
mod round_trip_tests;

pub use attr::{AttrId, Attribute, GetAttrs, MemberAttr, RetrievedAttr};
pub use builder::{BuildError, EncodedRequest, OsdRequestBuilder};
pub use cdb::{AttrFormat, SecurityFields};
pub use command::{
    Command, DataLayout, Extent, FlushScope, MapType, Options, QueryCondition, QueryCriteria, Reply, Request,
    ServiceAction, TimestampsControl,
};
pub use decode::{continuation_before_data, continuation_segment, decode_before_data, decode_before_data_with_continuation, decode_request};
pub use error::{CdbField, DecodeError, ParamField};
pub use list::{ListEntry, ListResult, QueryResult};
pub use read_map::{MapEntry, ReadMapResult};
pub use reply::{encode_reply, parse_data_in, DataIn, ReplyPlacement, RetrievedListType, RetrievedPlacement};
