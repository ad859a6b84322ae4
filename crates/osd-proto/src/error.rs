//! Why a CDB or its Data-Out was refused, and the sense data each refusal carries.
//!
//! | variant | sense key | ASC/ASCQ | field pointer |
//! |---|---|---|---|
//! | `CdbLength` | ILLEGAL REQUEST | 24/00 invalid field in CDB | CDB byte 7 |
//! | `Opcode` | ILLEGAL REQUEST | 20/00 invalid command operation code | CDB byte 0 |
//! | `ServiceAction` | ILLEGAL REQUEST | 24/00 | CDB byte 8 |
//! | `InvalidCdbField` | ILLEGAL REQUEST | 24/00 | the field's CDB byte ([`CdbField::byte`]) |
//! | `ParameterListLength` | ILLEGAL REQUEST | 1A/00 parameter list length error | none |
//! | `InvalidParam` | ILLEGAL REQUEST | 26/00 invalid field in parameter list | Data-Out byte |
//!
//! CDB field pointers, by [`CdbField`]: 7 additional CDB length, 8 service action, 10 options /
//! flush scope, 11 attribute format, 12 timestamps control, 13 map type, 16 partition id, 24
//! object id, 32 length / allocation length / number of objects, 40 starting byte address /
//! initial object id, 48 continuation length / READ MAP allocation length, 52..76 the attribute
//! parameters (page format: 52 get page, 56 allocation, 60 retrieved offset, 64 set page, 68 set
//! number, 72 set length, 76 set value offset; list format: 52 get list length, 56 get list
//! offset, 60 allocation, 64 retrieved offset, 68 set list length, 72 set list offset).
//! Data-Out pointers are absolute offsets into Data-Out, saturated at 0xFFFF (the field is two
//! bytes, SPC-4 §4.5.2.4.2).

use tessera_scsi::{FieldPointer, Sense, SenseKey};
use thiserror::Error;

/// A CDB field, for the field pointer of INVALID FIELD IN CDB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CdbField {
    AdditionalCdbLength,
    Options,
    AttrFormat,
    Timestamps,
    MapType,
    PartitionId,
    ObjectId,
    /// Length, allocation length, formatted capacity or number of objects (bytes 32..39).
    Length,
    /// Starting byte address or LIST initial object id (bytes 40..47).
    Start,
    ContinuationLength,
    ReadMapAllocationLength,
    PageGetPage,
    PageGetAllocationLength,
    PageRetrievedOffset,
    PageSetPage,
    PageSetNumber,
    PageSetLength,
    PageSetValueOffset,
    GetListLength,
    GetListOffset,
    ListGetAllocationLength,
    ListRetrievedOffset,
    SetListLength,
    SetListOffset,
}

impl CdbField {
    pub fn byte(self) -> u16 {
        use crate::cdb::{self, list, page};
        let at = match self {
            CdbField::AdditionalCdbLength => cdb::ADDITIONAL_CDB_LEN,
            CdbField::Options => cdb::OPTIONS,
            CdbField::AttrFormat => cdb::ATTR_FORMAT,
            CdbField::Timestamps => cdb::TIMESTAMPS,
            CdbField::MapType => cdb::MAP_TYPE,
            CdbField::PartitionId => cdb::PARTITION_ID,
            CdbField::ObjectId => cdb::OBJECT_ID,
            CdbField::Length => cdb::LENGTH,
            CdbField::Start => cdb::START,
            CdbField::ContinuationLength => cdb::CONTINUATION_LEN,
            CdbField::ReadMapAllocationLength => cdb::READ_MAP_ALLOCATION_LEN,
            CdbField::PageGetPage => page::GET_PAGE,
            CdbField::PageGetAllocationLength => page::GET_ALLOCATION_LEN,
            CdbField::PageRetrievedOffset => page::RETRIEVED_OFFSET,
            CdbField::PageSetPage => page::SET_PAGE,
            CdbField::PageSetNumber => page::SET_NUMBER,
            CdbField::PageSetLength => page::SET_LEN,
            CdbField::PageSetValueOffset => page::SET_VALUE_OFFSET,
            CdbField::GetListLength => list::GET_LIST_LEN,
            CdbField::GetListOffset => list::GET_LIST_OFFSET,
            CdbField::ListGetAllocationLength => list::GET_ALLOCATION_LEN,
            CdbField::ListRetrievedOffset => list::RETRIEVED_OFFSET,
            CdbField::SetListLength => list::SET_LIST_LEN,
            CdbField::SetListOffset => list::SET_LIST_OFFSET,
        };
        at as u16
    }
}

/// A field of the Data-Out parameter data (attribute lists, continuation segment, atomics
/// parameters), for the field pointer of INVALID FIELD IN PARAMETER LIST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamField {
    /// Attribute list header type nibble.
    ListType,
    /// Attribute list header length, or a list that does not fill its CDB length.
    ListLength,
    /// An attribute entry's value length, or an entry running past its list.
    ValueLength,
    /// More entries than `limits::ATTR_ENTRIES_MAX`.
    EntryCount,
    /// An attribute page or number not allowed here.
    AttrId,
    ContinuationFormat,
    ContinuationServiceAction,
    DescriptorType,
    DescriptorPadLength,
    DescriptorLength,
    SglOffset,
    SglLength,
    Stride,
    BlockLength,
    LevelCount,
    LevelStride,
    QueryType,
    QueryEntryLength,
    /// The descriptors describe a different number of bytes than the CDB length.
    LayoutTotal,
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("CDB is {len} bytes; an OSD-2 CDB is 236")]
    CdbLength { len: usize },
    #[error("operation code {0:#04x} is not the variable-length CDB (0x7F)")]
    Opcode(u8),
    #[error("service action {0:#06x} is not an OSD-2 or Tessera command")]
    ServiceAction(u16),
    #[error("invalid {field:?} in CDB (byte {})", field.byte())]
    InvalidCdbField { field: CdbField },
    #[error("Data-Out holds {have} bytes where the CDB describes {need}")]
    ParameterListLength { need: u64, have: u64 },
    #[error("invalid {field:?} at Data-Out byte {byte}")]
    InvalidParam { field: ParamField, byte: u64 },
}

impl DecodeError {
    pub(crate) fn cdb(field: CdbField) -> Self {
        DecodeError::InvalidCdbField { field }
    }

    pub(crate) fn param(field: ParamField, byte: u64) -> Self {
        DecodeError::InvalidParam { field, byte }
    }

    /// The same error with Data-Out byte positions moved by `base` (for codecs that decode a
    /// piece of Data-Out relative to its own start).
    pub(crate) fn rebased(self, base: u64) -> Self {
        match self {
            DecodeError::InvalidParam { field, byte } => {
                DecodeError::InvalidParam { field, byte: byte.saturating_add(base) }
            }
            other => other,
        }
    }

    /// The sense data a target returns with CHECK CONDITION for this error.
    pub fn sense(&self) -> Sense {
        match self {
            DecodeError::CdbLength { .. } => Sense::invalid_cdb_field(CdbField::AdditionalCdbLength.byte()),
            DecodeError::Opcode(_) => Sense::invalid_opcode(),
            DecodeError::ServiceAction(_) => Sense::invalid_cdb_field(crate::cdb::SERVICE_ACTION as u16),
            DecodeError::InvalidCdbField { field } => Sense::invalid_cdb_field(field.byte()),
            DecodeError::ParameterListLength { .. } => Sense::new(SenseKey::IllegalRequest, 0x1A, 0x00),
            DecodeError::InvalidParam { byte, .. } => Sense::new(SenseKey::IllegalRequest, 0x26, 0x00)
                .with_field(FieldPointer::data(u16::try_from(*byte).unwrap_or(u16::MAX))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the mapping table of the module doc holds. Method: one case per row.
    #[test]
    fn sense_table() {
        let s = DecodeError::ServiceAction(0x1234).sense();
        assert_eq!((s.key, s.asc_ascq(), s.field_pointer), (SenseKey::IllegalRequest, 0x2400, Some(FieldPointer::cdb(8))));
        let s = DecodeError::cdb(CdbField::PartitionId).sense();
        assert_eq!(s.field_pointer, Some(FieldPointer::cdb(16)));
        let s = DecodeError::cdb(CdbField::ObjectId).sense();
        assert_eq!(s.field_pointer, Some(FieldPointer::cdb(24)));
        let s = DecodeError::cdb(CdbField::Start).sense();
        assert_eq!(s.field_pointer, Some(FieldPointer::cdb(40)));
        let s = DecodeError::ParameterListLength { need: 10, have: 5 }.sense();
        assert_eq!((s.asc_ascq(), s.field_pointer), (0x1A00, None));
        let s = DecodeError::param(ParamField::SglLength, 70_000).sense();
        assert_eq!((s.asc_ascq(), s.field_pointer), (0x2600, Some(FieldPointer::data(0xFFFF))));
        let s = DecodeError::Opcode(0x28).sense();
        assert_eq!(s.asc_ascq(), 0x2000);
    }
}
