//! Target side: one CDB plus its Data-Out in, a validated [`Request`] and its
//! [`ReplyPlacement`] out (OSD-2 r05 §5.2, §6). Nothing the engine receives has unchecked
//! bounds: object addressing, lengths, buffer offsets, attribute lists and continuation
//! descriptors are all checked here, and every refusal is a [`DecodeError`] that knows its sense
//! data (table in [`crate::error`]).
//!
//! Per-command CDB use (Tessera's reading of r05; see docs/osd2-wire-format.md):
//!
//! | command | 16 pid | 24 oid | 32 | 40 | 48 |
//! |---|---|---|---|---|---|
//! | FORMAT OSD | 0 | 0 | formatted capacity | - | 0 |
//! | CREATE | >= 0x10000 | requested (0: target picks) | number of objects (2 bytes, 0 = 1) | - | 0 |
//! | REMOVE | >= 0x10000 | >= 0x10000 | - | - | 0 |
//! | CREATE PARTITION | requested (0: target picks) | 0 | - | - | 0 |
//! | REMOVE PARTITION, FLUSH PARTITION | >= 0x10000 | 0 | - | - | 0 |
//! | CREATE COLLECTION | >= 0x10000 | requested (0: target picks) | - | - | 0 |
//! | REMOVE / FLUSH / LIST COLLECTION, QUERY, *MEMBER* | >= 0x10000 | >= 0x10000 | LIST COLLECTION, QUERY: allocation length | LIST COLLECTION: initial oid | LIST COLLECTION: list id; QUERY: continuation length |
//! | LIST | 0 (partitions) or >= 0x10000 | 0 | allocation length | initial oid | list identifier |
//! | READ, WRITE | >= 0x10000 | >= 0x10000 | length | starting address | continuation length |
//! | CREATE AND WRITE | >= 0x10000 | requested | length | starting address | continuation length |
//! | APPEND | >= 0x10000 | >= 0x10000 | length | - | 0 |
//! | PUNCH, CLEAR | >= 0x10000 | >= 0x10000 | length | starting address | 0 |
//! | FLUSH | >= 0x10000 | >= 0x10000 | - | - | 0 |
//! | FLUSH OSD | 0 | 0 | - | - | 0 |
//! | GET / SET ATTRIBUTES | any object | any object | - | - | 0 |
//! | READ MAP | >= 0x10000 | >= 0x10000 | range length | starting address | allocation length (4) |
//! | COMPARE AND SWAP, FETCH AND ADD | any object | any object | 24 / 16 | - | 0 |
//!
//! "Any object" is the root (0, 0), a partition (>= 0x10000, 0) or a collection / user object
//! (>= 0x10000, >= 0x10000). SET KEY and SET MASTER KEY are not decoded yet (24/00 at byte 8).
//!
//! Data-Out is laid out `[continuation][data][set list or value][get list]`: data starts at the
//! continuation length, and each later piece must start at or after the end of the one before
//! (gaps are allowed because encoded offsets may round up). Anything reaching past Data-Out is a
//! PARAMETER LIST LENGTH ERROR.

use tessera_types::limits::{ATTR_LIST_LEN_MAX, ATTR_VALUE_LEN_MAX, CONTINUATION_LEN_MAX, CREATE_COUNT_MAX, TRANSFER_LEN_MAX};
use tessera_types::ids::FIRST_ASSIGNABLE_ID;
use tessera_types::ObjectAddr;

use crate::atomics;
use crate::attr::{AttrId, Attribute, GetAttrs};
use crate::attr_list;
use crate::cdb::{self, AttrFormat, RawCdb};
use crate::command::{Command, DataLayout, FlushScope, MapType, Options, QueryCriteria, Request, ServiceAction, TimestampsControl};
use crate::continuation::{self, Continuation, DataSpan, Descriptor};
use crate::error::{CdbField, DecodeError, ParamField};
use crate::offset::decode_offset;
use crate::reply::{ReplyPlacement, RetrievedListType, RetrievedPlacement};

const _: () = assert!(CREATE_COUNT_MAX as u32 <= u16::MAX as u32);

/// Decodes and validates one OSD-2 command.
pub fn decode_request<'a>(cdb: &[u8], data_out: &'a [u8]) -> Result<(Request<'a>, ReplyPlacement), DecodeError> {
    decode(cdb, data_out, data_out.len() as u64)
}

/// Decodes a command before its Data-Out has arrived, given only the Data-Out length, for a
/// target that wants to put the data straight where it belongs. Answers only for commands whose
/// Data-Out is their data and nothing else (no continuation segment, no set or get list, no
/// bytes after the data), with the same checks as [`decode_request`] and `data` empty; `None`
/// for anything else, including commands that do not decode (the caller receives their
/// Data-Out as usual and [`decode_request`] reports the error).
pub fn decode_before_data(cdb: &[u8], data_out_len: u64) -> Option<(Request<'static>, ReplyPlacement)> {
    // With no Data-Out bytes, whatever needs them (a continuation, an attribute list, an
    // atomic's operands) fails to decode.
    let (request, placement) = decode(cdb, &[], data_out_len).ok()?;
    let data_only = request.set_attrs.is_empty()
        && request.get_attrs == GetAttrs::None
        && request.command.write_len() == Some(data_out_len);
    data_only.then_some((request, placement))
}

/// The continuation length of a WRITE whose Data-Out may be the continuation segment and then
/// its data, decided from the CDB alone: a target that wants to put such a WRITE's data where
/// it belongs receives this many bytes first and hands them to
/// [`decode_before_data_with_continuation`]. `None` for every other command (including a
/// WRITE without continuation, which [`decode_before_data`] answers).
pub fn continuation_before_data(cdb: &[u8], data_out_len: u64) -> Option<u32> {
    let raw = RawCdb::new(cdb)?;
    let sa = ServiceAction::from_code(raw.u16(cdb::SERVICE_ACTION))?;
    let len = raw.u32(cdb::CONTINUATION_LEN);
    let fits = len > 0 && len <= CONTINUATION_LEN_MAX && (len as u64) < data_out_len;
    (cdb.first() == Some(&cdb::OPCODE_VARIABLE_LENGTH) && sa == ServiceAction::Write && fits).then_some(len)
}

/// [`decode_before_data`] for a command whose Data-Out starts with a continuation segment:
/// `segment` is Data-Out `[0, continuation length)`, and the data behind it has not arrived.
/// Answers only for commands whose Data-Out is the segment and then their data, nothing else,
/// with the same checks as [`decode_request`] and `data` empty; `None` otherwise, including a
/// segment that does not decode (the caller receives the whole Data-Out as usual and
/// [`decode_request`] reports the error with its field pointer).
pub fn decode_before_data_with_continuation(cdb: &[u8], segment: &[u8], data_out_len: u64) -> Option<(Request<'static>, ReplyPlacement)> {
    let raw = RawCdb::new(cdb)?;
    if raw.u32(cdb::CONTINUATION_LEN) as usize != segment.len() || segment.is_empty() {
        return None;
    }
    let (request, placement) = decode(cdb, segment, data_out_len).ok()?;
    let data_only = request.set_attrs.is_empty()
        && request.get_attrs == GetAttrs::None
        && request.command.write_len().map(|len| len + segment.len() as u64) == Some(data_out_len);
    let request = Request {
        service_action: request.service_action,
        options: request.options,
        timestamps: request.timestamps,
        command: request.command,
        set_attrs: request.set_attrs,
        get_attrs: request.get_attrs,
        data: &[],
    };
    data_only.then_some((request, placement))
}

/// [`decode_request`] over `data_out_len` bytes of Data-Out of which `data_out` (all of them,
/// the continuation segment, or none) are at hand.
fn decode<'a>(cdb: &[u8], data_out: &'a [u8], data_out_len: u64) -> Result<(Request<'a>, ReplyPlacement), DecodeError> {
    if let Some(&op) = cdb.first() {
        if op != cdb::OPCODE_VARIABLE_LENGTH {
            return Err(DecodeError::Opcode(op));
        }
    }
    let raw = RawCdb::new(cdb).ok_or(DecodeError::CdbLength { len: cdb.len() })?;
    if raw.u8(cdb::ADDITIONAL_CDB_LEN) != cdb::ADDITIONAL_CDB_LEN_VALUE {
        return Err(DecodeError::cdb(CdbField::AdditionalCdbLength));
    }
    let code = raw.u16(cdb::SERVICE_ACTION);
    let sa = ServiceAction::from_code(code)
        .filter(|sa| !matches!(sa, ServiceAction::SetKey | ServiceAction::SetMasterKey))
        .ok_or(DecodeError::ServiceAction(code))?;
    let timestamps = match raw.u8(cdb::TIMESTAMPS) {
        cdb::TIMESTAMPS_UPDATE => TimestampsControl::Update,
        cdb::TIMESTAMPS_DO_NOT_UPDATE => TimestampsControl::DoNotUpdate,
        _ => return Err(DecodeError::cdb(CdbField::Timestamps)),
    };
    let format = AttrFormat::from_byte(raw.u8(cdb::ATTR_FORMAT)).ok_or(DecodeError::cdb(CdbField::AttrFormat))?;

    let cont = continuation(raw, sa, data_out)?;
    let cont_len = cont.as_ref().map_or(0, |(len, _)| *len);
    let shape = command(raw, sa, cont.map(|(_, c)| c))?;

    let data_start = cont_len;
    let data_end = data_start + shape.data_len;
    if data_end > data_out_len {
        return Err(DecodeError::ParameterListLength { need: data_end, have: data_out_len });
    }
    // Both ends are within Data-Out, so they fit in usize; empty when the bytes are not at hand.
    let data = data_out.get(data_start as usize..data_end as usize).unwrap_or_default();
    let command = match shape.command {
        Pending::Done(c) => c,
        Pending::Atomic(addr) => atomic(sa, addr, data).map_err(|e| e.rebased(data_start))?,
    };

    let attrs = attributes(raw, format, data_out, data_end, shape.data_in_max, shape.list_type)?;
    let options = if command.is_flush() {
        Options::default()
    } else {
        let b = raw.u8(cdb::OPTIONS);
        Options { fua: b & cdb::OPTION_FUA != 0, dpo: b & cdb::OPTION_DPO != 0 }
    };
    let request = Request {
        service_action: sa,
        options,
        timestamps,
        command,
        set_attrs: attrs.set,
        get_attrs: attrs.get,
        data: if shape.has_write_data { data } else { &[] },
    };
    let placement = ReplyPlacement { data_len_max: shape.data_in_max, retrieved: attrs.retrieved };
    Ok((request, placement))
}

/// The continuation segment (Data-Out bytes 0..CDB continuation length) of a command that
/// [`decode_request`] accepted, if it has one: what a security checker verifies the
/// continuation integrity check value over.
pub fn continuation_segment<'a>(sa: ServiceAction, cdb: &[u8], data_out: &'a [u8]) -> Option<&'a [u8]> {
    let raw = RawCdb::new(cdb)?;
    let len = raw.u32(cdb::CONTINUATION_LEN) as usize;
    if !uses_continuation(sa) || len == 0 {
        return None;
    }
    data_out.get(..len)
}

fn uses_continuation(sa: ServiceAction) -> bool {
    matches!(sa, ServiceAction::Read | ServiceAction::Write | ServiceAction::CreateAndWrite | ServiceAction::Query)
}

/// Bytes 48..51 mean something else for these commands.
fn reuses_byte_48(sa: ServiceAction) -> bool {
    matches!(sa, ServiceAction::List | ServiceAction::ListCollection | ServiceAction::ReadMap)
}

/// Decodes the continuation segment when the command takes one: (its length, the segment).
fn continuation(raw: RawCdb<'_>, sa: ServiceAction, data_out: &[u8]) -> Result<Option<(u64, Continuation)>, DecodeError> {
    let len = raw.u32(cdb::CONTINUATION_LEN);
    if !uses_continuation(sa) {
        if len != 0 && !reuses_byte_48(sa) {
            return Err(DecodeError::cdb(CdbField::ContinuationLength));
        }
        return Ok(None);
    }
    if len == 0 {
        return Ok(None);
    }
    if len > CONTINUATION_LEN_MAX {
        return Err(DecodeError::cdb(CdbField::ContinuationLength));
    }
    let bytes = data_out
        .get(..len as usize)
        .ok_or(DecodeError::ParameterListLength { need: len as u64, have: data_out.len() as u64 })?;
    let span = DataSpan { start: raw.u64(cdb::START), len: raw.u64(cdb::LENGTH) };
    Ok(Some((len as u64, continuation::decode_continuation(bytes, sa.code(), span)?)))
}

/// The data layout of READ / WRITE / CREATE AND WRITE: at most one layout descriptor.
fn layout(cont: Option<Continuation>) -> Result<DataLayout, DecodeError> {
    let mut layout = DataLayout::Contiguous;
    for (pos, d) in cont.map(|c| c.descriptors).unwrap_or_default() {
        match d {
            Descriptor::Layout(l) if layout == DataLayout::Contiguous => layout = l,
            _ => return Err(DecodeError::param(ParamField::DescriptorType, pos)),
        }
    }
    Ok(layout)
}

/// QUERY's criteria: exactly one query descriptor.
fn criteria(cont: Option<Continuation>) -> Result<QueryCriteria, DecodeError> {
    let mut found = None;
    for (pos, d) in cont.map(|c| c.descriptors).unwrap_or_default() {
        match d {
            Descriptor::Query(q) if found.is_none() => found = Some(q),
            _ => return Err(DecodeError::param(ParamField::DescriptorType, pos)),
        }
    }
    found.ok_or(DecodeError::cdb(CdbField::ContinuationLength))
}

enum Pending {
    Done(Command),
    /// Compare-and-swap / fetch-and-add: the parameters are in Data-Out.
    Atomic(ObjectAddr),
}

struct Shape {
    command: Pending,
    /// Data-Out bytes after the continuation segment that belong to the command.
    data_len: u64,
    has_write_data: bool,
    data_in_max: u64,
    list_type: RetrievedListType,
}

impl Shape {
    fn plain(command: Command) -> Self {
        Shape { command: Pending::Done(command), data_len: 0, has_write_data: false, data_in_max: 0, list_type: RetrievedListType::Single }
    }

    fn writing(command: Command, len: u64) -> Self {
        Shape { data_len: len, has_write_data: true, ..Shape::plain(command) }
    }

    fn returning(command: Command, len: u64) -> Self {
        Shape { data_in_max: len, ..Shape::plain(command) }
    }
}

fn assignable(v: u64, field: CdbField) -> Result<u64, DecodeError> {
    if v >= FIRST_ASSIGNABLE_ID {
        Ok(v)
    } else {
        Err(DecodeError::cdb(field))
    }
}

fn requested(v: u64, field: CdbField) -> Result<Option<u64>, DecodeError> {
    match v {
        0 => Ok(None),
        v => assignable(v, field).map(Some),
    }
}

fn zero(v: u64, field: CdbField) -> Result<(), DecodeError> {
    if v == 0 {
        Ok(())
    } else {
        Err(DecodeError::cdb(field))
    }
}

fn pid(raw: RawCdb<'_>) -> u64 {
    raw.u64(cdb::PARTITION_ID)
}

fn oid(raw: RawCdb<'_>) -> u64 {
    raw.u64(cdb::OBJECT_ID)
}

/// A user object or collection: both ids assignable.
fn member(raw: RawCdb<'_>) -> Result<ObjectAddr, DecodeError> {
    Ok(ObjectAddr::new(assignable(pid(raw), CdbField::PartitionId)?, assignable(oid(raw), CdbField::ObjectId)?))
}

fn partition(raw: RawCdb<'_>) -> Result<u64, DecodeError> {
    zero(oid(raw), CdbField::ObjectId)?;
    assignable(pid(raw), CdbField::PartitionId)
}

fn root(raw: RawCdb<'_>) -> Result<(), DecodeError> {
    zero(pid(raw), CdbField::PartitionId)?;
    zero(oid(raw), CdbField::ObjectId)
}

/// Root, partition, collection or user object.
fn any_object(raw: RawCdb<'_>) -> Result<ObjectAddr, DecodeError> {
    let (p, o) = (pid(raw), oid(raw));
    if p == 0 {
        zero(o, CdbField::ObjectId)?;
        return Ok(ObjectAddr::ROOT);
    }
    assignable(p, CdbField::PartitionId)?;
    if o != 0 {
        assignable(o, CdbField::ObjectId)?;
    }
    Ok(ObjectAddr::new(p, o))
}

/// A length whose bytes cross the wire: at most TRANSFER_LEN_MAX.
fn transfer_len(v: u64, field: CdbField) -> Result<u64, DecodeError> {
    if v <= TRANSFER_LEN_MAX {
        Ok(v)
    } else {
        Err(DecodeError::cdb(field))
    }
}

/// [start, start + len) must not wrap.
fn range(raw: RawCdb<'_>) -> Result<(u64, u64), DecodeError> {
    let (start, len) = (raw.u64(cdb::START), raw.u64(cdb::LENGTH));
    start.checked_add(len).ok_or(DecodeError::cdb(CdbField::Start))?;
    Ok((start, len))
}

fn flush_scope(raw: RawCdb<'_>, allow_everything: bool) -> Result<FlushScope, DecodeError> {
    match raw.u8(cdb::OPTIONS) & cdb::FLUSH_SCOPE_MASK {
        0 => Ok(FlushScope::DataAndAttributes),
        1 => Ok(FlushScope::AttributesOnly),
        2 if allow_everything => Ok(FlushScope::Everything),
        _ => Err(DecodeError::cdb(CdbField::Options)),
    }
}

fn command(raw: RawCdb<'_>, sa: ServiceAction, cont: Option<Continuation>) -> Result<Shape, DecodeError> {
    use ServiceAction as S;
    let byte11 = raw.u8(cdb::ATTR_FORMAT);
    Ok(match sa {
        S::FormatOsd => {
            root(raw)?;
            Shape::plain(Command::FormatOsd { capacity_bytes: raw.u64(cdb::LENGTH) })
        }
        S::Create => {
            let partition_id = assignable(pid(raw), CdbField::PartitionId)?;
            let requested = requested(oid(raw), CdbField::ObjectId)?;
            let count = raw.u16(cdb::CREATE_COUNT).max(1);
            if let Some(first) = requested {
                first.checked_add(count as u64 - 1).ok_or(DecodeError::cdb(CdbField::ObjectId))?;
            }
            Shape::plain(Command::Create { partition_id, requested, count })
        }
        S::Remove => Shape::plain(Command::Remove { addr: member(raw)? }),
        S::CreatePartition => {
            zero(oid(raw), CdbField::ObjectId)?;
            Shape::plain(Command::CreatePartition { requested: requested(pid(raw), CdbField::PartitionId)? })
        }
        S::RemovePartition => Shape::plain(Command::RemovePartition { partition_id: partition(raw)? }),
        S::CreateCollection => {
            let partition_id = assignable(pid(raw), CdbField::PartitionId)?;
            Shape::plain(Command::CreateCollection { partition_id, requested: requested(oid(raw), CdbField::ObjectId)? })
        }
        S::RemoveCollection => Shape::plain(Command::RemoveCollection {
            addr: member(raw)?,
            force: byte11 & cdb::REMOVE_COLLECTION_FORCE != 0,
        }),
        S::List => {
            let p = pid(raw);
            if p != 0 {
                assignable(p, CdbField::PartitionId)?;
            }
            zero(oid(raw), CdbField::ObjectId)?;
            let allocation_len = transfer_len(raw.u64(cdb::LENGTH), CdbField::Length)?;
            Shape::returning(
                Command::List {
                    partition_id: p,
                    list_id: raw.u32(cdb::LIST_ID),
                    initial_oid: raw.u64(cdb::START),
                    allocation_len,
                    with_attrs: byte11 & cdb::LIST_WITH_ATTRS != 0,
                },
                allocation_len,
            )
        }
        S::ListCollection => {
            let allocation_len = transfer_len(raw.u64(cdb::LENGTH), CdbField::Length)?;
            Shape::returning(
                Command::ListCollection {
                    addr: member(raw)?,
                    list_id: raw.u32(cdb::LIST_ID),
                    initial_oid: raw.u64(cdb::START),
                    allocation_len,
                    with_attrs: byte11 & cdb::LIST_WITH_ATTRS != 0,
                },
                allocation_len,
            )
        }
        S::Read => {
            let addr = member(raw)?;
            let (offset, len) = range(raw)?;
            transfer_len(len, CdbField::Length)?;
            Shape::returning(Command::Read { addr, offset, len, layout: layout(cont)? }, len)
        }
        S::Write => {
            let addr = member(raw)?;
            let (offset, len) = range(raw)?;
            transfer_len(len, CdbField::Length)?;
            Shape::writing(Command::Write { addr, offset, len, layout: layout(cont)? }, len)
        }
        S::CreateAndWrite => {
            let partition_id = assignable(pid(raw), CdbField::PartitionId)?;
            let requested = requested(oid(raw), CdbField::ObjectId)?;
            let (offset, len) = range(raw)?;
            transfer_len(len, CdbField::Length)?;
            Shape::writing(Command::CreateAndWrite { partition_id, requested, offset, len, layout: layout(cont)? }, len)
        }
        S::Append => {
            let addr = member(raw)?;
            let len = transfer_len(raw.u64(cdb::LENGTH), CdbField::Length)?;
            Shape::writing(Command::Append { addr, len }, len)
        }
        S::Punch => {
            let addr = member(raw)?;
            let (offset, len) = range(raw)?;
            Shape::plain(Command::Punch { addr, offset, len })
        }
        S::Clear => {
            let addr = member(raw)?;
            let (offset, len) = range(raw)?;
            Shape::plain(Command::Clear { addr, offset, len })
        }
        S::Flush => Shape::plain(Command::Flush { addr: member(raw)?, scope: flush_scope(raw, false)? }),
        S::FlushCollection => Shape::plain(Command::FlushCollection { addr: member(raw)?, scope: flush_scope(raw, true)? }),
        S::FlushPartition => Shape::plain(Command::FlushPartition { partition_id: partition(raw)?, scope: flush_scope(raw, true)? }),
        S::FlushOsd => {
            root(raw)?;
            Shape::plain(Command::FlushOsd { scope: flush_scope(raw, true)? })
        }
        S::GetAttributes => Shape::plain(Command::GetAttributes { addr: any_object(raw)? }),
        S::SetAttributes => Shape::plain(Command::SetAttributes { addr: any_object(raw)? }),
        S::Query => {
            let addr = member(raw)?;
            let allocation_len = transfer_len(raw.u64(cdb::LENGTH), CdbField::Length)?;
            Shape::returning(Command::Query { addr, allocation_len, criteria: criteria(cont)? }, allocation_len)
        }
        S::GetMemberAttributes => Shape {
            list_type: RetrievedListType::MultiObject,
            ..Shape::plain(Command::GetMemberAttributes { addr: member(raw)? })
        },
        S::SetMemberAttributes => Shape::plain(Command::SetMemberAttributes { addr: member(raw)? }),
        S::RemoveMemberObjects => Shape::plain(Command::RemoveMemberObjects { addr: member(raw)? }),
        S::ReadMap => {
            let addr = member(raw)?;
            let (offset, len) = range(raw)?;
            let map_type = MapType::from_code(raw.u8(cdb::MAP_TYPE)).ok_or(DecodeError::cdb(CdbField::MapType))?;
            let allocation_len =
                transfer_len(raw.u32(cdb::READ_MAP_ALLOCATION_LEN) as u64, CdbField::ReadMapAllocationLength)?;
            Shape::returning(Command::ReadMap { addr, offset, len, map_type, allocation_len }, allocation_len)
        }
        S::CompareAndSwap | S::FetchAndAdd => {
            let addr = any_object(raw)?;
            let want = if sa == S::CompareAndSwap { atomics::CAS_PARAM_LEN } else { atomics::FAA_PARAM_LEN };
            if raw.u64(cdb::LENGTH) != want as u64 {
                return Err(DecodeError::cdb(CdbField::Length));
            }
            Shape {
                command: Pending::Atomic(addr),
                data_len: want as u64,
                has_write_data: false,
                data_in_max: atomics::OLD_VALUE_LEN as u64,
                list_type: RetrievedListType::Single,
            }
        }
        // Filtered out by the caller.
        S::SetKey | S::SetMasterKey => return Err(DecodeError::ServiceAction(sa.code())),
    })
}

/// Decodes an atomic's parameter block (exactly its length, checked by the caller).
fn atomic(sa: ServiceAction, addr: ObjectAddr, params: &[u8]) -> Result<Command, DecodeError> {
    let wrong_len = || DecodeError::cdb(CdbField::Length);
    if sa == ServiceAction::CompareAndSwap {
        let block = <&[u8; atomics::CAS_PARAM_LEN]>::try_from(params).map_err(|_| wrong_len())?;
        let (attr, expected, new) = atomics::decode_cas(block)?;
        Ok(Command::CompareAndSwap { addr, attr, expected, new })
    } else {
        let block = <&[u8; atomics::FAA_PARAM_LEN]>::try_from(params).map_err(|_| wrong_len())?;
        let (attr, addend) = atomics::decode_faa(block)?;
        Ok(Command::FetchAndAdd { addr, attr, addend })
    }
}

struct Attrs {
    set: Vec<Attribute>,
    get: GetAttrs,
    retrieved: Option<RetrievedPlacement>,
}

/// Locates `len` bytes at an encoded Data-Out offset that must not start before `not_before`.
fn data_out_region(raw_offset: u32, len: u64, not_before: u64, field: CdbField, data_out: &[u8]) -> Result<(u64, u64), DecodeError> {
    let start = decode_offset(raw_offset).ok_or(DecodeError::cdb(field))?;
    if start < not_before {
        return Err(DecodeError::cdb(field));
    }
    // start <= OFFSET_MAX (43 bits) and len < 2^32: no overflow.
    let end = start + len;
    if end > data_out.len() as u64 {
        return Err(DecodeError::ParameterListLength { need: end, have: data_out.len() as u64 });
    }
    Ok((start, end))
}

fn retrieved_placement(
    raw_offset: u32,
    allocation_len: u32,
    data_in_max: u64,
    fields: (CdbField, CdbField),
    format: AttrFormat,
    list_type: RetrievedListType,
) -> Result<RetrievedPlacement, DecodeError> {
    let (offset_field, allocation_field) = fields;
    let offset = decode_offset(raw_offset).ok_or(DecodeError::cdb(offset_field))?;
    if offset < data_in_max {
        return Err(DecodeError::cdb(offset_field));
    }
    if offset + allocation_len as u64 > TRANSFER_LEN_MAX {
        return Err(DecodeError::cdb(allocation_field));
    }
    Ok(RetrievedPlacement { offset, allocation_len, format, list_type })
}

fn attributes(
    raw: RawCdb<'_>,
    format: AttrFormat,
    data_out: &[u8],
    data_end: u64,
    data_in_max: u64,
    list_type: RetrievedListType,
) -> Result<Attrs, DecodeError> {
    let mut attrs = Attrs { set: Vec::new(), get: GetAttrs::None, retrieved: None };
    match format {
        AttrFormat::None => {}
        AttrFormat::Page => {
            use cdb::page::*;
            let set_offset = raw.u32(SET_VALUE_OFFSET);
            if set_offset != crate::offset::OFFSET_UNUSED {
                let len = raw.u32(SET_LEN);
                if len as usize > ATTR_VALUE_LEN_MAX {
                    return Err(DecodeError::cdb(CdbField::PageSetLength));
                }
                let (start, end) = data_out_region(set_offset, len as u64, data_end, CdbField::PageSetValueOffset, data_out)?;
                attrs.set.push(Attribute {
                    id: AttrId::new(raw.u32(SET_PAGE), raw.u32(SET_NUMBER)),
                    value: data_out[start as usize..end as usize].to_vec(),
                });
            }
            let retrieved_offset = raw.u32(RETRIEVED_OFFSET);
            if retrieved_offset != crate::offset::OFFSET_UNUSED {
                let allocation_len = raw.u32(GET_ALLOCATION_LEN);
                attrs.retrieved = Some(retrieved_placement(
                    retrieved_offset,
                    allocation_len,
                    data_in_max,
                    (CdbField::PageRetrievedOffset, CdbField::PageGetAllocationLength),
                    format,
                    list_type,
                )?);
                attrs.get = GetAttrs::Page { page: raw.u32(GET_PAGE), allocation_len };
            }
        }
        AttrFormat::List => {
            use cdb::list::*;
            let mut next = data_end;
            let set_len = raw.u32(SET_LIST_LEN);
            if set_len > 0 {
                if set_len > ATTR_LIST_LEN_MAX {
                    return Err(DecodeError::cdb(CdbField::SetListLength));
                }
                let (start, end) = data_out_region(raw.u32(SET_LIST_OFFSET), set_len as u64, next, CdbField::SetListOffset, data_out)?;
                attrs.set = attr_list::decode_set_list(&data_out[start as usize..end as usize]).map_err(|e| e.rebased(start))?;
                next = end;
            }
            let get_len = raw.u32(GET_LIST_LEN);
            if get_len > 0 {
                if get_len > ATTR_LIST_LEN_MAX {
                    return Err(DecodeError::cdb(CdbField::GetListLength));
                }
                let (start, end) = data_out_region(raw.u32(GET_LIST_OFFSET), get_len as u64, next, CdbField::GetListOffset, data_out)?;
                let ids = attr_list::decode_get_list(&data_out[start as usize..end as usize]).map_err(|e| e.rebased(start))?;
                let allocation_len = raw.u32(GET_ALLOCATION_LEN);
                attrs.retrieved = Some(retrieved_placement(
                    raw.u32(RETRIEVED_OFFSET),
                    allocation_len,
                    data_in_max,
                    (CdbField::ListRetrievedOffset, CdbField::ListGetAllocationLength),
                    format,
                    list_type,
                )?);
                attrs.get = GetAttrs::List { ids, allocation_len };
            }
        }
    }
    Ok(attrs)
}
