//! What the engine knows about one OSD object: its type, lengths and timestamps, as stored in
//! one row of the `objects` table.

use tessera_types::ObjectAddr;

use crate::error::CommandError;

/// OSD-2 object type codes (r05 §4.6; also the Current Command page's object type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    Root = 0x01,
    Partition = 0x02,
    Collection = 0x40,
    User = 0x80,
}

impl ObjectKind {
    pub fn from_code(code: i64) -> Option<ObjectKind> {
        Some(match code {
            0x01 => ObjectKind::Root,
            0x02 => ObjectKind::Partition,
            0x40 => ObjectKind::Collection,
            0x80 => ObjectKind::User,
            _ => return None,
        })
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    /// First page of this type's page range (OSD-2 r05 §4.7.3).
    pub fn page_base(self) -> u32 {
        match self {
            ObjectKind::User => 0x0000_0000,
            ObjectKind::Partition => 0x3000_0000,
            ObjectKind::Collection => 0x6000_0000,
            ObjectKind::Root => 0x9000_0000,
        }
    }
}

/// The five OSD timestamps, milliseconds since the epoch (stored, never taken from file
/// times).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Timestamps {
    pub created_ms: u64,
    pub attr_accessed_ms: u64,
    pub attr_modified_ms: u64,
    pub data_accessed_ms: u64,
    pub data_modified_ms: u64,
}

impl Timestamps {
    pub fn all(now_ms: u64) -> Self {
        Timestamps {
            created_ms: now_ms,
            attr_accessed_ms: now_ms,
            attr_modified_ms: now_ms,
            data_accessed_ms: now_ms,
            data_modified_ms: now_ms,
        }
    }
}

/// One row of `objects`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectRow {
    pub addr: ObjectAddr,
    pub kind: ObjectKind,
    /// User objects: logical length (information page 0x82). Others: 0.
    pub logical_len: u64,
    /// Bytes allocated: for a user object its blocks; for a partition the sum over its
    /// objects; for the root the sum over partitions.
    pub used_bytes: u64,
    pub times: Timestamps,
}

/// Largest id the store keys can hold (SQLite integers are signed 64-bit).
pub const ID_MAX: u64 = i64::MAX as u64;

/// An id as an SQLite key, refused when it does not fit (`field` is the CDB byte to blame).
pub fn sql_id(id: u64, field: u16) -> Result<i64, CommandError> {
    i64::try_from(id).map_err(|_| CommandError::IdOutOfRange { id, field })
}

/// Milliseconds as the 6-byte big-endian OSD timestamp.
pub fn timestamp_bytes(ms: u64) -> Vec<u8> {
    ms.to_be_bytes()[2..].to_vec()
}
