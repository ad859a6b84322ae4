//! Typed OSD-2 requests: what a CDB plus its Data-Out mean, with every field already validated.
//! The engine only ever sees these types, never raw bytes ("parse, don't validate").

use tessera_types::ObjectAddr;

use crate::attr::{Attribute, GetAttrs, RetrievedAttr};

/// OSD-2 r05 service actions (CDB bytes 8..10), plus Tessera's vendor-specific ones in the
/// 0x8F80..=0x8FFF range the standard reserves for vendors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ServiceAction {
    FormatOsd = 0x8881,
    Create = 0x8882,
    List = 0x8883,
    Punch = 0x8884,
    Read = 0x8885,
    Write = 0x8886,
    Append = 0x8887,
    Flush = 0x8888,
    Clear = 0x8889,
    Remove = 0x888A,
    CreatePartition = 0x888B,
    RemovePartition = 0x888C,
    GetAttributes = 0x888E,
    SetAttributes = 0x888F,
    CreateAndWrite = 0x8892,
    CreateCollection = 0x8895,
    RemoveCollection = 0x8896,
    ListCollection = 0x8897,
    SetKey = 0x8898,
    SetMasterKey = 0x8899,
    FlushCollection = 0x889A,
    FlushPartition = 0x889B,
    FlushOsd = 0x889C,
    Query = 0x88A0,
    RemoveMemberObjects = 0x88A1,
    GetMemberAttributes = 0x88A2,
    SetMemberAttributes = 0x88A3,
    ReadMap = 0x88B1,
    /// Tessera: compare-and-swap on an 8-byte attribute.
    CompareAndSwap = 0x8F81,
    /// Tessera: fetch-and-add on an 8-byte attribute.
    FetchAndAdd = 0x8F82,
}

/// CDB byte 10 options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Options {
    /// Force unit access: data and attributes durable before status.
    pub fua: bool,
    /// Disable page out: a hint not to cache.
    pub dpo: bool,
}

/// CDB byte 12.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampsControl {
    #[default]
    Update,
    /// 0x7F: do not update timestamps for this command.
    DoNotUpdate,
}

/// Scope of the FLUSH family (CDB byte 10 bits 1:0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushScope {
    /// 0: data and attributes.
    DataAndAttributes,
    /// 1: attributes only.
    AttributesOnly,
    /// 2: (FLUSH COLLECTION/PARTITION/OSD) every member object's data and attributes too.
    Everything,
}

/// READ MAP map types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    All = 0,
    Written = 1,
    Holes = 2,
}

/// A byte range relative to the CDB's starting byte address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
}

/// How the data of a READ / WRITE / CREATE AND WRITE maps onto the object. Offsets are
/// relative to the CDB's starting byte address. Every variant was validated by the decoder:
/// no zero lengths, no overflow, total length equal to the CDB length.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum DataLayout {
    /// One range: [start, start + length).
    #[default]
    Contiguous,
    /// Scatter/gather list (continuation descriptor 0x0001), applied in list order.
    List(Vec<Extent>),
    /// Tessera strided descriptor: blocks of `block_len` every `stride` bytes; the last block
    /// holds whatever is left of the CDB length, so it may be short.
    Strided { stride: u64, block_len: u64 },
    /// Tessera nested strided descriptor: `block_len` bytes, repeated by each level's
    /// (count, stride) from innermost to outermost (a 2-D or 3-D subarray).
    Nested { block_len: u64, levels: Vec<(u64, u64)> },
}

/// One decoded OSD command. Object addresses are already range-checked by the decoder
/// (e.g. a READ never names the root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    FormatOsd { capacity_bytes: u64 },
    /// `requested` is None when the target picks ids; `count` >= 1 objects are made with
    /// consecutive ids.
    Create { partition_id: u64, requested: Option<u64>, count: u16 },
    Remove { addr: ObjectAddr },
    CreatePartition { requested: Option<u64> },
    RemovePartition { partition_id: u64 },
    CreateCollection { partition_id: u64, requested: Option<u64> },
    RemoveCollection { addr: ObjectAddr, force: bool },
    /// LIST: partitions when `partition_id` is 0, else the partition's objects and collections.
    List { partition_id: u64, list_id: u32, initial_oid: u64, allocation_len: u64, with_attrs: bool },
    ListCollection { addr: ObjectAddr, list_id: u32, initial_oid: u64, allocation_len: u64, with_attrs: bool },
    Read { addr: ObjectAddr, offset: u64, len: u64, layout: DataLayout },
    Write { addr: ObjectAddr, offset: u64, len: u64, layout: DataLayout },
    CreateAndWrite { partition_id: u64, requested: Option<u64>, offset: u64, len: u64, layout: DataLayout },
    Append { addr: ObjectAddr, len: u64 },
    Punch { addr: ObjectAddr, offset: u64, len: u64 },
    Clear { addr: ObjectAddr, offset: u64, len: u64 },
    Flush { addr: ObjectAddr, scope: FlushScope },
    FlushCollection { addr: ObjectAddr, scope: FlushScope },
    FlushPartition { partition_id: u64, scope: FlushScope },
    FlushOsd { scope: FlushScope },
    /// Only the piggy-backed get/set lists do anything; the addressed object may be any type.
    GetAttributes { addr: ObjectAddr },
    SetAttributes { addr: ObjectAddr },
    /// QUERY: the members of collection `addr` whose attributes match `criteria`.
    Query { addr: ObjectAddr, allocation_len: u64, criteria: QueryCriteria },
    GetMemberAttributes { addr: ObjectAddr },
    SetMemberAttributes { addr: ObjectAddr },
    RemoveMemberObjects { addr: ObjectAddr },
    ReadMap { addr: ObjectAddr, offset: u64, len: u64, map_type: MapType, allocation_len: u64 },
    CompareAndSwap { addr: ObjectAddr, attr: crate::AttrId, expected: u64, new: u64 },
    FetchAndAdd { addr: ObjectAddr, attr: crate::AttrId, addend: u64 },
}

/// QUERY criteria (continuation descriptor 0x0002): match any or all of the conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryCriteria {
    pub match_all: bool,
    pub conditions: Vec<QueryCondition>,
}

/// One criterion: the attribute's value lies in [min, max] (byte-wise comparison, empty
/// bound = unbounded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryCondition {
    pub attr: crate::AttrId,
    pub min: Vec<u8>,
    pub max: Vec<u8>,
}

/// A decoded command with its piggy-backed attribute work and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub service_action: ServiceAction,
    pub options: Options,
    pub timestamps: TimestampsControl,
    pub command: Command,
    /// Attributes to set after the command's function, before the get (OSD-2 §5.2.2).
    pub set_attrs: Vec<Attribute>,
    pub get_attrs: GetAttrs,
    /// Write data (WRITE, APPEND, CREATE AND WRITE), exactly the CDB length long.
    pub data: &'a [u8],
}

/// The engine's answer to a [`Request`]. The codec places `data_in` at Data-In offset 0 and the
/// retrieved attributes at the CDB's retrieved-attributes offset.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Reply {
    /// READ data, LIST/QUERY/READ MAP results, the old value of an atomic.
    pub data_in: Vec<u8>,
    pub retrieved: Vec<RetrievedAttr>,
    /// Set when the command completed with a recovered error (e.g. RECOVERED ERROR 3B17 on a
    /// read past the end of the object: data is still returned, zero-filled).
    pub recovered: Option<tessera_scsi::Sense>,
    /// GET MEMBER ATTRIBUTES: the members' attributes, sent as a multi-object (0xE) list at the
    /// retrieved-attributes offset instead of `retrieved`.
    pub member_retrieved: Vec<crate::attr::MemberAttr>,
}

impl ServiceAction {
    /// Every service action Tessera decodes, in table order.
    pub const ALL: [ServiceAction; 30] = [
        ServiceAction::FormatOsd,
        ServiceAction::Create,
        ServiceAction::List,
        ServiceAction::Punch,
        ServiceAction::Read,
        ServiceAction::Write,
        ServiceAction::Append,
        ServiceAction::Flush,
        ServiceAction::Clear,
        ServiceAction::Remove,
        ServiceAction::CreatePartition,
        ServiceAction::RemovePartition,
        ServiceAction::GetAttributes,
        ServiceAction::SetAttributes,
        ServiceAction::CreateAndWrite,
        ServiceAction::CreateCollection,
        ServiceAction::RemoveCollection,
        ServiceAction::ListCollection,
        ServiceAction::SetKey,
        ServiceAction::SetMasterKey,
        ServiceAction::FlushCollection,
        ServiceAction::FlushPartition,
        ServiceAction::FlushOsd,
        ServiceAction::Query,
        ServiceAction::RemoveMemberObjects,
        ServiceAction::GetMemberAttributes,
        ServiceAction::SetMemberAttributes,
        ServiceAction::ReadMap,
        ServiceAction::CompareAndSwap,
        ServiceAction::FetchAndAdd,
    ];

    /// The service action with wire code `code`, if Tessera knows it.
    pub fn from_code(code: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|sa| *sa as u16 == code)
    }

    pub fn code(self) -> u16 {
        self as u16
    }
}

impl FlushScope {
    /// CDB byte 10 bits 1:0.
    pub fn code(self) -> u8 {
        match self {
            FlushScope::DataAndAttributes => 0,
            FlushScope::AttributesOnly => 1,
            FlushScope::Everything => 2,
        }
    }
}

impl MapType {
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(MapType::All),
            1 => Some(MapType::Written),
            2 => Some(MapType::Holes),
            _ => None,
        }
    }
}

impl Command {
    /// The service action that carries this command.
    pub fn service_action(&self) -> ServiceAction {
        match self {
            Command::FormatOsd { .. } => ServiceAction::FormatOsd,
            Command::Create { .. } => ServiceAction::Create,
            Command::Remove { .. } => ServiceAction::Remove,
            Command::CreatePartition { .. } => ServiceAction::CreatePartition,
            Command::RemovePartition { .. } => ServiceAction::RemovePartition,
            Command::CreateCollection { .. } => ServiceAction::CreateCollection,
            Command::RemoveCollection { .. } => ServiceAction::RemoveCollection,
            Command::List { .. } => ServiceAction::List,
            Command::ListCollection { .. } => ServiceAction::ListCollection,
            Command::Read { .. } => ServiceAction::Read,
            Command::Write { .. } => ServiceAction::Write,
            Command::CreateAndWrite { .. } => ServiceAction::CreateAndWrite,
            Command::Append { .. } => ServiceAction::Append,
            Command::Punch { .. } => ServiceAction::Punch,
            Command::Clear { .. } => ServiceAction::Clear,
            Command::Flush { .. } => ServiceAction::Flush,
            Command::FlushCollection { .. } => ServiceAction::FlushCollection,
            Command::FlushPartition { .. } => ServiceAction::FlushPartition,
            Command::FlushOsd { .. } => ServiceAction::FlushOsd,
            Command::GetAttributes { .. } => ServiceAction::GetAttributes,
            Command::SetAttributes { .. } => ServiceAction::SetAttributes,
            Command::Query { .. } => ServiceAction::Query,
            Command::GetMemberAttributes { .. } => ServiceAction::GetMemberAttributes,
            Command::SetMemberAttributes { .. } => ServiceAction::SetMemberAttributes,
            Command::RemoveMemberObjects { .. } => ServiceAction::RemoveMemberObjects,
            Command::ReadMap { .. } => ServiceAction::ReadMap,
            Command::CompareAndSwap { .. } => ServiceAction::CompareAndSwap,
            Command::FetchAndAdd { .. } => ServiceAction::FetchAndAdd,
        }
    }

    /// Bytes of data the command writes (WRITE, CREATE AND WRITE, APPEND); None for the others.
    pub fn write_len(&self) -> Option<u64> {
        match self {
            Command::Write { len, .. } | Command::CreateAndWrite { len, .. } | Command::Append { len, .. } => Some(*len),
            _ => None,
        }
    }

    /// True for the FLUSH family, whose byte 10 holds a scope instead of options.
    pub fn is_flush(&self) -> bool {
        matches!(
            self,
            Command::Flush { .. } | Command::FlushCollection { .. } | Command::FlushPartition { .. } | Command::FlushOsd { .. }
        )
    }
}
