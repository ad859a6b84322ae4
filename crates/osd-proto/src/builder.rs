//! Initiator side: a typed request in, the exact 236-byte CDB and the Data-Out gather list out
//! (the inverse of [`crate::decode_request`], with the same layout rules; see its module doc for
//! the per-command byte use).
//!
//! Data-Out is `[continuation][data][set list or value][get list]`. Write data is borrowed, never
//! copied: [`EncodedRequest::data_out`] returns the pieces as slices for a transport to send in
//! order. Offsets are encoded byte-exact below 256 MiB; beyond, they round up and a zero
//! padding piece fills the gap. The retrieved attributes go at the first 8-aligned Data-In
//! offset after the command's largest possible data (the single-buffer cost noted in
//! osd2-wire.md §4).
//!
//! Security: [`OsdRequestBuilder::security`] carries the capability, request ICV, nonce and
//! integrity offsets (all zero / unused = NOSEC). A signer fills them after [`encode`] because
//! the ICV covers the finished CDB.
//!
//! [`encode`]: OsdRequestBuilder::encode

use thiserror::Error;
use tessera_types::limits::{ATTR_ENTRIES_MAX, ATTR_LIST_LEN_MAX, ATTR_VALUE_LEN_MAX, CONTINUATION_LEN_MAX, TRANSFER_LEN_MAX};

use crate::atomics;
use crate::attr::{AttrId, Attribute, GetAttrs};
use crate::attr_list;
use crate::cdb::{self, put_u16, put_u32, put_u64, AttrFormat, SecurityFields, CDB_LEN};
use crate::command::{Command, DataLayout, Options, Request, ServiceAction, TimestampsControl};
use crate::continuation::{self, DataSpan, Descriptor, ICV_LEN};
use crate::error::DecodeError;
use crate::offset::{encode_offset_at_least, OFFSET_UNUSED};
use crate::reply::{ReplyPlacement, RetrievedListType, RetrievedPlacement};
use tessera_types::ObjectAddr;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BuildError {
    #[error("the command moves {expected} data bytes but {got} were given")]
    DataLength { expected: u64, got: u64 },
    #[error("page-format get allows one attribute to set, not {0}")]
    PageFormatSetCount(usize),
    #[error("attribute value of {0} bytes exceeds the 65534-byte limit")]
    ValueTooLong(usize),
    #[error("attribute list of {entries} entries / {bytes} bytes exceeds the limits")]
    ListTooLong { entries: usize, bytes: usize },
    #[error("field does not fit its wire width: {0}")]
    FieldTooWide(&'static str),
    #[error("Data-Out or Data-In would exceed the transfer limit")]
    TransferTooLarge,
    #[error("invalid data layout or criteria: {0}")]
    Invalid(#[from] DecodeError),
}

/// Everything one OSD command says, ready to encode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsdRequestBuilder<'a> {
    pub command: Command,
    pub options: Options,
    pub timestamps: TimestampsControl,
    pub set_attrs: Vec<Attribute>,
    pub get_attrs: GetAttrs,
    /// Write data (WRITE, APPEND, CREATE AND WRITE), exactly the command's length: `data`, or,
    /// when `data_pieces` is not empty, those slices end to end (a gather list the transport
    /// sends as they are, so scattered caller buffers need no packing copy).
    pub data: &'a [u8],
    pub data_pieces: &'a [&'a [u8]],
    pub security: SecurityFields,
    /// Continuation integrity check value (CAPKEY and above).
    pub continuation_icv: [u8; ICV_LEN],
}

enum Piece<'a> {
    Owned(Vec<u8>),
    Borrowed(&'a [u8]),
}

/// An encoded command: the CDB, the Data-Out pieces, and where Data-In will put things.
pub struct EncodedRequest<'a> {
    pub cdb: [u8; CDB_LEN],
    pieces: Vec<Piece<'a>>,
    /// `pieces[0]` is the continuation segment.
    has_continuation: bool,
    pub placement: ReplyPlacement,
    /// Expected Data-In length to announce to the transport.
    pub data_in_len: u32,
}

impl<'a> EncodedRequest<'a> {
    /// The Data-Out gather list, in order.
    pub fn data_out(&self) -> Vec<&[u8]> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Owned(v) => v.as_slice(),
                Piece::Borrowed(s) => *s,
            })
            .filter(|s| !s.is_empty())
            .collect()
    }

    pub fn data_out_len(&self) -> u64 {
        self.data_out().iter().map(|s| s.len() as u64).sum()
    }

    /// Data-Out in one buffer (tests and fuzzing; transports use [`Self::data_out`]).
    pub fn data_out_vec(&self) -> Vec<u8> {
        self.data_out().concat()
    }

    /// The continuation segment, for a signer to fill its integrity check value.
    pub fn continuation_mut(&mut self) -> Option<&mut [u8]> {
        match self.pieces.first_mut() {
            Some(Piece::Owned(segment)) if self.has_continuation => Some(segment.as_mut_slice()),
            _ => None,
        }
    }

    /// Appends bytes after everything else in Data-Out (a signer's Data-Out integrity check
    /// value; the caller put its offset in the CDB).
    pub fn push_data_out(&mut self, bytes: Vec<u8>) {
        self.pieces.push(Piece::Owned(bytes));
    }
}

impl<'a> OsdRequestBuilder<'a> {
    pub fn new(command: Command) -> Self {
        OsdRequestBuilder {
            command,
            options: Options::default(),
            timestamps: TimestampsControl::Update,
            set_attrs: Vec::new(),
            get_attrs: GetAttrs::None,
            data: &[],
            data_pieces: &[],
            security: SecurityFields::default(),
            continuation_icv: [0; ICV_LEN],
        }
    }

    /// The builder that encodes exactly `request` (the round-trip property:
    /// `decode_request(encode(from_request(r))) == r`).
    pub fn from_request(request: &Request<'a>) -> Self {
        OsdRequestBuilder {
            options: request.options,
            timestamps: request.timestamps,
            set_attrs: request.set_attrs.clone(),
            get_attrs: request.get_attrs.clone(),
            data: request.data,
            ..OsdRequestBuilder::new(request.command.clone())
        }
    }

    pub fn data(mut self, data: &'a [u8]) -> Self {
        self.data = data;
        self
    }

    /// Write data given as a gather list of slices, sent in order without being copied.
    pub fn data_pieces(mut self, pieces: &'a [&'a [u8]]) -> Self {
        self.data_pieces = pieces;
        self
    }

    pub fn fua(mut self, fua: bool) -> Self {
        self.options.fua = fua;
        self
    }

    pub fn dpo(mut self, dpo: bool) -> Self {
        self.options.dpo = dpo;
        self
    }

    pub fn timestamps(mut self, t: TimestampsControl) -> Self {
        self.timestamps = t;
        self
    }

    pub fn set_attr(mut self, id: AttrId, value: Vec<u8>) -> Self {
        self.set_attrs.push(Attribute { id, value });
        self
    }

    pub fn get_attrs(mut self, get: GetAttrs) -> Self {
        self.get_attrs = get;
        self
    }

    pub fn security(mut self, security: SecurityFields) -> Self {
        self.security = security;
        self
    }

    /// Builds the CDB and the Data-Out pieces.
    pub fn encode(&self) -> Result<EncodedRequest<'a>, BuildError> {
        let sa = self.command.service_action();
        let mut cdb = [0u8; CDB_LEN];
        cdb[cdb::OPCODE] = cdb::OPCODE_VARIABLE_LENGTH;
        cdb[cdb::ADDITIONAL_CDB_LEN] = cdb::ADDITIONAL_CDB_LEN_VALUE;
        put_u16(&mut cdb, cdb::SERVICE_ACTION, sa.code());
        cdb[cdb::TIMESTAMPS] = match self.timestamps {
            TimestampsControl::Update => cdb::TIMESTAMPS_UPDATE,
            TimestampsControl::DoNotUpdate => cdb::TIMESTAMPS_DO_NOT_UPDATE,
        };
        if !self.command.is_flush() {
            let mut b = 0;
            if self.options.fua {
                b |= cdb::OPTION_FUA;
            }
            if self.options.dpo {
                b |= cdb::OPTION_DPO;
            }
            cdb[cdb::OPTIONS] = b;
        }
        let fields = command_fields(&self.command, &mut cdb)?;

        let mut pieces = Vec::new();
        let mut at = 0u64;
        let mut has_continuation = false;
        if let Some(desc) = fields.descriptor {
            let seg = continuation::encode_continuation(sa.code(), &self.continuation_icv, std::slice::from_ref(&desc));
            if !seg.is_empty() {
                if seg.len() as u64 > CONTINUATION_LEN_MAX as u64 {
                    return Err(BuildError::FieldTooWide("continuation length"));
                }
                // Same rules as the target, so a bad layout fails here rather than on the wire.
                continuation::decode_continuation(&seg, sa.code(), fields.span)?;
                put_u32(&mut cdb, cdb::CONTINUATION_LEN, seg.len() as u32);
                at += seg.len() as u64;
                pieces.push(Piece::Owned(seg));
                has_continuation = true;
            }
        }
        match fields.data {
            DataSource::None => {}
            DataSource::Caller(len) => {
                let given: &[&'a [u8]] = if self.data_pieces.is_empty() { std::slice::from_ref(&self.data) } else { self.data_pieces };
                let got: u64 = given.iter().map(|d| d.len() as u64).sum();
                if got != len {
                    return Err(BuildError::DataLength { expected: len, got });
                }
                at += len;
                pieces.extend(given.iter().map(|d| Piece::Borrowed(d)));
            }
            DataSource::Params(block) => {
                at += block.len() as u64;
                pieces.push(Piece::Owned(block));
            }
        }

        let retrieved = self.encode_attrs(&mut cdb, &mut pieces, &mut at, fields.data_in_max, fields.list_type)?;
        if at > TRANSFER_LEN_MAX {
            return Err(BuildError::TransferTooLarge);
        }
        self.security.encode(&mut cdb);
        let placement = ReplyPlacement { data_len_max: fields.data_in_max, retrieved };
        let data_in_len = u32::try_from(placement.data_in_len()).map_err(|_| BuildError::TransferTooLarge)?;
        Ok(EncodedRequest { cdb, pieces, has_continuation, placement, data_in_len })
    }

    /// Places `bytes` at the first encodable offset >= `*at`, padding as needed; returns the
    /// encoded offset.
    fn place(pieces: &mut Vec<Piece<'a>>, at: &mut u64, bytes: Vec<u8>) -> Result<u32, BuildError> {
        let (raw, offset) = encode_offset_at_least(*at).ok_or(BuildError::TransferTooLarge)?;
        if offset > *at {
            pieces.push(Piece::Owned(vec![0; (offset - *at) as usize]));
        }
        *at = offset + bytes.len() as u64;
        pieces.push(Piece::Owned(bytes));
        Ok(raw)
    }

    /// The retrieved-attributes offset: the first 8-aligned byte after the command data. The
    /// target refuses an area ending past TRANSFER_LEN_MAX, so the builder does too.
    fn retrieved_offset(data_in_max: u64, allocation_len: u32) -> Result<(u32, u64), BuildError> {
        let (raw, offset) = encode_offset_at_least(data_in_max.div_ceil(8) * 8).ok_or(BuildError::TransferTooLarge)?;
        if offset + allocation_len as u64 > TRANSFER_LEN_MAX {
            return Err(BuildError::TransferTooLarge);
        }
        Ok((raw, offset))
    }

    fn encode_attrs(
        &self,
        cdb: &mut [u8; CDB_LEN],
        pieces: &mut Vec<Piece<'a>>,
        at: &mut u64,
        data_in_max: u64,
        list_type: RetrievedListType,
    ) -> Result<Option<RetrievedPlacement>, BuildError> {
        for a in &self.set_attrs {
            if a.value.len() > ATTR_VALUE_LEN_MAX {
                return Err(BuildError::ValueTooLong(a.value.len()));
            }
        }
        let placement = |format, offset, allocation_len| RetrievedPlacement { offset, allocation_len, format, list_type };
        match &self.get_attrs {
            GetAttrs::Page { page, allocation_len } => {
                use cdb::page::*;
                cdb[cdb::ATTR_FORMAT] |= AttrFormat::Page.bits();
                match self.set_attrs.as_slice() {
                    [] => put_u32(cdb, SET_VALUE_OFFSET, OFFSET_UNUSED),
                    [a] => {
                        put_u32(cdb, SET_PAGE, a.id.page);
                        put_u32(cdb, SET_NUMBER, a.id.number);
                        put_u32(cdb, SET_LEN, a.value.len() as u32);
                        let raw = Self::place(pieces, at, a.value.clone())?;
                        put_u32(cdb, SET_VALUE_OFFSET, raw);
                    }
                    many => return Err(BuildError::PageFormatSetCount(many.len())),
                }
                let (raw, offset) = Self::retrieved_offset(data_in_max, *allocation_len)?;
                put_u32(cdb, GET_PAGE, *page);
                put_u32(cdb, GET_ALLOCATION_LEN, *allocation_len);
                put_u32(cdb, RETRIEVED_OFFSET, raw);
                Ok(Some(placement(AttrFormat::Page, offset, *allocation_len)))
            }
            GetAttrs::None if self.set_attrs.is_empty() => Ok(None),
            get => {
                use cdb::list::*;
                cdb[cdb::ATTR_FORMAT] |= AttrFormat::List.bits();
                if !self.set_attrs.is_empty() {
                    let len = attr_list::set_list_len(&self.set_attrs);
                    check_list(self.set_attrs.len(), len)?;
                    let mut list = Vec::with_capacity(len);
                    attr_list::encode_set_list(&self.set_attrs, &mut list);
                    put_u32(cdb, SET_LIST_LEN, len as u32);
                    let raw = Self::place(pieces, at, list)?;
                    put_u32(cdb, SET_LIST_OFFSET, raw);
                }
                let GetAttrs::List { ids, allocation_len } = get else { return Ok(None) };
                let len = attr_list::get_list_len(ids);
                check_list(ids.len(), len)?;
                let mut list = Vec::with_capacity(len);
                attr_list::encode_get_list(ids, &mut list);
                put_u32(cdb, GET_LIST_LEN, len as u32);
                let raw = Self::place(pieces, at, list)?;
                put_u32(cdb, GET_LIST_OFFSET, raw);
                let (raw, offset) = Self::retrieved_offset(data_in_max, *allocation_len)?;
                put_u32(cdb, GET_ALLOCATION_LEN, *allocation_len);
                put_u32(cdb, RETRIEVED_OFFSET, raw);
                Ok(Some(placement(AttrFormat::List, offset, *allocation_len)))
            }
        }
    }
}

fn check_list(entries: usize, bytes: usize) -> Result<(), BuildError> {
    if entries > ATTR_ENTRIES_MAX as usize || bytes > ATTR_LIST_LEN_MAX as usize {
        return Err(BuildError::ListTooLong { entries, bytes });
    }
    Ok(())
}

enum DataSource {
    None,
    /// The caller's buffer, this many bytes.
    Caller(u64),
    /// A parameter block the builder makes (atomics).
    Params(Vec<u8>),
}

struct Fields {
    descriptor: Option<Descriptor>,
    span: DataSpan,
    data: DataSource,
    data_in_max: u64,
    list_type: RetrievedListType,
}

fn put_addr(cdb: &mut [u8; CDB_LEN], addr: &ObjectAddr) {
    put_u64(cdb, cdb::PARTITION_ID, addr.partition_id.0);
    put_u64(cdb, cdb::OBJECT_ID, addr.object_id.0);
}

/// Writes the command-specific CDB fields; says what Data-Out and Data-In carry.
fn command_fields(command: &Command, cdb: &mut [u8; CDB_LEN]) -> Result<Fields, BuildError> {
    let mut f = Fields {
        descriptor: None,
        span: DataSpan { start: 0, len: 0 },
        data: DataSource::None,
        data_in_max: 0,
        list_type: RetrievedListType::Single,
    };
    let range = |cdb: &mut [u8; CDB_LEN], offset: u64, len: u64| {
        put_u64(cdb, cdb::LENGTH, len);
        put_u64(cdb, cdb::START, offset);
    };
    let layout = |f: &mut Fields, layout: &DataLayout, offset: u64, len: u64| {
        f.descriptor = Some(Descriptor::Layout(layout.clone()));
        f.span = DataSpan { start: offset, len };
    };
    match command {
        Command::FormatOsd { capacity_bytes } => put_u64(cdb, cdb::LENGTH, *capacity_bytes),
        Command::Create { partition_id, requested, count } => {
            put_u64(cdb, cdb::PARTITION_ID, *partition_id);
            put_u64(cdb, cdb::OBJECT_ID, requested.unwrap_or(0));
            put_u16(cdb, cdb::CREATE_COUNT, *count);
        }
        Command::Remove { addr }
        | Command::GetAttributes { addr }
        | Command::SetAttributes { addr }
        | Command::SetMemberAttributes { addr }
        | Command::RemoveMemberObjects { addr } => put_addr(cdb, addr),
        Command::GetMemberAttributes { addr } => {
            put_addr(cdb, addr);
            f.list_type = RetrievedListType::MultiObject;
        }
        Command::CreatePartition { requested } => put_u64(cdb, cdb::PARTITION_ID, requested.unwrap_or(0)),
        Command::RemovePartition { partition_id } => put_u64(cdb, cdb::PARTITION_ID, *partition_id),
        Command::CreateCollection { partition_id, requested } => {
            put_u64(cdb, cdb::PARTITION_ID, *partition_id);
            put_u64(cdb, cdb::OBJECT_ID, requested.unwrap_or(0));
        }
        Command::RemoveCollection { addr, force } => {
            put_addr(cdb, addr);
            if *force {
                cdb[cdb::ATTR_FORMAT] |= cdb::REMOVE_COLLECTION_FORCE;
            }
        }
        Command::List { partition_id, list_id, initial_oid, allocation_len, with_attrs } => {
            put_u64(cdb, cdb::PARTITION_ID, *partition_id);
            list_fields(cdb, *list_id, *initial_oid, *allocation_len, *with_attrs);
            f.data_in_max = *allocation_len;
        }
        Command::ListCollection { addr, list_id, initial_oid, allocation_len, with_attrs } => {
            put_addr(cdb, addr);
            list_fields(cdb, *list_id, *initial_oid, *allocation_len, *with_attrs);
            f.data_in_max = *allocation_len;
        }
        Command::Read { addr, offset, len, layout: l } => {
            put_addr(cdb, addr);
            range(cdb, *offset, *len);
            layout(&mut f, l, *offset, *len);
            f.data_in_max = *len;
        }
        Command::Write { addr, offset, len, layout: l } => {
            put_addr(cdb, addr);
            range(cdb, *offset, *len);
            layout(&mut f, l, *offset, *len);
            f.data = DataSource::Caller(*len);
        }
        Command::CreateAndWrite { partition_id, requested, offset, len, layout: l } => {
            put_u64(cdb, cdb::PARTITION_ID, *partition_id);
            put_u64(cdb, cdb::OBJECT_ID, requested.unwrap_or(0));
            range(cdb, *offset, *len);
            layout(&mut f, l, *offset, *len);
            f.data = DataSource::Caller(*len);
        }
        Command::Append { addr, len } => {
            put_addr(cdb, addr);
            put_u64(cdb, cdb::LENGTH, *len);
            f.data = DataSource::Caller(*len);
        }
        Command::Punch { addr, offset, len } | Command::Clear { addr, offset, len } => {
            put_addr(cdb, addr);
            range(cdb, *offset, *len);
        }
        Command::Flush { addr, scope } | Command::FlushCollection { addr, scope } => {
            put_addr(cdb, addr);
            cdb[cdb::OPTIONS] = scope.code();
        }
        Command::FlushPartition { partition_id, scope } => {
            put_u64(cdb, cdb::PARTITION_ID, *partition_id);
            cdb[cdb::OPTIONS] = scope.code();
        }
        Command::FlushOsd { scope } => cdb[cdb::OPTIONS] = scope.code(),
        Command::Query { addr, allocation_len, criteria } => {
            put_addr(cdb, addr);
            put_u64(cdb, cdb::LENGTH, *allocation_len);
            f.descriptor = Some(Descriptor::Query(criteria.clone()));
            f.data_in_max = *allocation_len;
        }
        Command::ReadMap { addr, offset, len, map_type, allocation_len } => {
            put_addr(cdb, addr);
            range(cdb, *offset, *len);
            cdb[cdb::MAP_TYPE] = *map_type as u8;
            let alloc = u32::try_from(*allocation_len).map_err(|_| BuildError::FieldTooWide("READ MAP allocation length"))?;
            put_u32(cdb, cdb::READ_MAP_ALLOCATION_LEN, alloc);
            f.data_in_max = *allocation_len;
        }
        Command::CompareAndSwap { addr, attr, expected, new } => {
            put_addr(cdb, addr);
            put_u64(cdb, cdb::LENGTH, atomics::CAS_PARAM_LEN as u64);
            f.data = DataSource::Params(atomics::encode_cas(*attr, *expected, *new).to_vec());
            f.data_in_max = atomics::OLD_VALUE_LEN as u64;
        }
        Command::FetchAndAdd { addr, attr, addend } => {
            put_addr(cdb, addr);
            put_u64(cdb, cdb::LENGTH, atomics::FAA_PARAM_LEN as u64);
            f.data = DataSource::Params(atomics::encode_faa(*attr, *addend).to_vec());
            f.data_in_max = atomics::OLD_VALUE_LEN as u64;
        }
    }
    debug_assert_eq!(command.service_action() == ServiceAction::Query, matches!(f.descriptor, Some(Descriptor::Query(_))));
    Ok(f)
}

fn list_fields(cdb: &mut [u8; CDB_LEN], list_id: u32, initial_oid: u64, allocation_len: u64, with_attrs: bool) {
    put_u64(cdb, cdb::LENGTH, allocation_len);
    put_u64(cdb, cdb::START, initial_oid);
    put_u32(cdb, cdb::LIST_ID, list_id);
    if with_attrs {
        cdb[cdb::ATTR_FORMAT] |= cdb::LIST_WITH_ATTRS;
    }
}
