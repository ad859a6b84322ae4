//! The engine's two error layers and their wire form.
//!
//! [`StorageError`] is a failure of the medium underneath (object files, SQLite); the engine
//! cannot tell the initiator more than MEDIUM ERROR or HARDWARE ERROR about it.
//! [`CommandError`] is everything a command can fail with; each variant knows its sense data
//! (key, ASC/ASCQ, field pointer, OSD object identification), the way an HTTP error knows its
//! status code.

use std::io;

use tessera_scsi::{FieldPointer, OsdObjectSense, Sense, SenseKey};
use tessera_types::ObjectAddr;
use thiserror::Error;

/// CDB byte of the partition id (OSD-2 r05 §5.2.1), the field pointer of a missing partition.
pub const CDB_PARTITION_ID: u16 = 16;
/// CDB byte of the user object / collection id, the field pointer of a missing object.
pub const CDB_OBJECT_ID: u16 = 24;
/// CDB byte of the length field (number of objects for CREATE, allocation length for LIST).
pub const CDB_LENGTH: u16 = 32;
/// CDB byte of the starting byte address.
pub const CDB_STARTING_ADDRESS: u16 = 40;

/// Command function bits of the OSD object identification descriptor (OSD-2 r05 §4.14.2.2).
pub mod functions {
    /// Command validation (object existence, fields).
    pub const VALIDATION: u32 = 1 << 7;
    /// The command's own function (e.g. REMOVE PARTITION).
    pub const COMMAND: u32 = 1 << 4;
    /// Setting the piggy-backed attributes.
    pub const SET_ATTRIBUTES: u32 = 1 << 13;
    /// Getting the piggy-backed attributes.
    pub const GET_ATTRIBUTES: u32 = 1 << 16;
}

/// Which I/O operation failed; decides MEDIUM ERROR's ASC (read 11/00, write 0C/00).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOp {
    Open,
    Read,
    Write,
    Truncate,
    Deallocate,
    Map,
    Sync,
    Remove,
    Stat,
}

/// A failure of the storage underneath the engine.
#[derive(Debug, Error)]
pub enum StorageError {
    #[error("{op:?} of object data failed: {source}")]
    Io { op: IoOp, source: io::Error },
    #[error("attribute store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A row holds something the engine never writes (e.g. a negative length).
    #[error("attribute store row {table}: {reason}")]
    Corrupt { table: &'static str, reason: &'static str },
    /// The store was written by a newer engine.
    #[error("store schema version {found} is newer than this engine's {supported}")]
    SchemaVersion { found: i64, supported: i64 },
    /// A command the caller issued for housekeeping (e.g. FLUSH OSD at shutdown) was refused.
    #[error("command refused: {0}")]
    Refused(Box<CommandError>),
}

impl StorageError {
    pub fn io(op: IoOp) -> impl FnOnce(io::Error) -> StorageError {
        move |source| StorageError::Io { op, source }
    }

    pub fn sense(&self) -> Sense {
        match self {
            StorageError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC) => {
                // SPACE ALLOCATION FAILED WRITE PROTECT (27/07): the file system is full.
                Sense::new(SenseKey::DataProtect, 0x27, 0x07)
            }
            StorageError::Io { source, .. } if source.raw_os_error() == Some(libc::EFBIG) => {
                // The file system under the OSD holds no object this long: a limit on the
                // object's length, reported as QUOTA ERROR (55/07) as the length quota is.
                Sense::new(SenseKey::DataProtect, 0x55, 0x07)
            }
            StorageError::Sqlite(e) if is_sqlite_full(e) => {
                // The attribute store could not grow: the file system is full, as above.
                Sense::new(SenseKey::DataProtect, 0x27, 0x07)
            }
            StorageError::Io { op: IoOp::Read | IoOp::Map, .. } => Sense::new(SenseKey::MediumError, 0x11, 0x00),
            StorageError::Io { .. } => Sense::new(SenseKey::MediumError, 0x0C, 0x00),
            // INTERNAL TARGET FAILURE (44/00): the attribute store is not the medium.
            StorageError::Sqlite(_) | StorageError::Corrupt { .. } | StorageError::SchemaVersion { .. } => {
                Sense::new(SenseKey::HardwareError, 0x44, 0x00)
            }
            StorageError::Refused(e) => e.sense(),
        }
    }
}

fn is_sqlite_full(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
}

impl StorageError {
    /// The file system under the store is full (an object file or the attribute store could
    /// not grow).
    pub fn is_disk_full(&self) -> bool {
        match self {
            StorageError::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            StorageError::Sqlite(e) => is_sqlite_full(e),
            StorageError::Refused(e) => e.is_disk_full(),
            _ => false,
        }
    }
}

impl From<CommandError> for StorageError {
    fn from(e: CommandError) -> Self {
        match e {
            CommandError::Storage(s) => s,
            other => StorageError::Refused(Box::new(other)),
        }
    }
}

/// Why a command failed. [`CommandError::sense`] is its CHECK CONDITION.
#[derive(Debug, Error)]
pub enum CommandError {
    /// The addressed partition or object does not exist (or has the wrong type for the
    /// command); `field` is the CDB byte to point at (16 partition id, 24 object id).
    #[error("no such object {addr} (CDB byte {field})")]
    NoSuchObject { addr: ObjectAddr, field: u16 },
    /// CREATE with a requested id that is taken.
    #[error("object {addr} already exists")]
    ObjectExists { addr: ObjectAddr, field: u16 },
    /// An id above 2^63 - 1: the attribute store keys are signed 64-bit integers.
    #[error("id {id:#x} is beyond the supported id space (CDB byte {field})")]
    IdOutOfRange { id: u64, field: u16 },
    /// REMOVE PARTITION / REMOVE COLLECTION of a non-empty container (2C0A).
    #[error("{addr} still holds objects")]
    NotEmpty { addr: ObjectAddr },
    /// A write, create or length change beyond a quota or the formatted capacity (5507).
    #[error("quota exceeded on {addr}: {quota}")]
    QuotaExceeded { addr: ObjectAddr, quota: &'static str },
    /// SET of an attribute the device maintains; `entry` is the set-list index and
    /// `list_byte` its byte offset from the start of the set list.
    #[error("attribute {page:#x}/{number:#x} is read-only (set-list entry {entry})")]
    ReadOnlyAttribute { page: u32, number: u32, entry: usize, list_byte: u16 },
    /// SET of a settable attribute with a value of the wrong size or meaning.
    #[error("invalid value for attribute {page:#x}/{number:#x} (set-list entry {entry})")]
    InvalidAttributeValue { page: u32, number: u32, entry: usize, list_byte: u16 },
    /// A vendor atomic on an attribute that is not an application-defined 8-byte value.
    #[error("attribute {page:#x}/{number:#x} cannot be used atomically")]
    NotAtomic { page: u32, number: u32 },
    /// A field of the command the engine refuses (e.g. a zero object count).
    #[error("invalid field at CDB byte {byte}")]
    InvalidField { byte: u16 },
    /// The target id space of a partition (or of partitions) is used up.
    #[error("no ids left in {addr}")]
    IdsExhausted { addr: ObjectAddr },
    /// Service actions the engine does not implement (SET KEY, SET MASTER KEY live in the
    /// security layer).
    #[error("service action {0:#06x} is not executed by the engine")]
    Unsupported(u16),
    /// A WRITE whose data went straight into the object's file lost some of it before it
    /// could commit: a concurrent logical-length change cut it, or the object was removed and
    /// created again meanwhile (placed_write.rs).
    #[error("the data written to {addr} was cut or discarded by a concurrent command")]
    WriteOvertaken { addr: ObjectAddr },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<rusqlite::Error> for CommandError {
    fn from(e: rusqlite::Error) -> Self {
        CommandError::Storage(StorageError::Sqlite(e))
    }
}

impl CommandError {
    pub fn is_disk_full(&self) -> bool {
        matches!(self, CommandError::Storage(s) if s.is_disk_full())
    }

    pub fn sense(&self) -> Sense {
        match self {
            CommandError::NoSuchObject { field, .. }
            | CommandError::ObjectExists { field, .. }
            | CommandError::IdOutOfRange { field, .. } => Sense::invalid_cdb_field(*field),
            CommandError::NotEmpty { addr } => Sense::new(SenseKey::IllegalRequest, 0x2C, 0x0A).with_object(
                OsdObjectSense {
                    not_initiated_functions: functions::COMMAND
                        | functions::SET_ATTRIBUTES
                        | functions::GET_ATTRIBUTES,
                    completed_functions: functions::VALIDATION,
                    partition_id: addr.partition_id.0,
                    object_id: addr.object_id.0,
                },
            ),
            CommandError::QuotaExceeded { addr, .. } => {
                Sense::new(SenseKey::DataProtect, 0x55, 0x07).with_object(OsdObjectSense {
                    not_initiated_functions: functions::COMMAND
                        | functions::SET_ATTRIBUTES
                        | functions::GET_ATTRIBUTES,
                    completed_functions: functions::VALIDATION,
                    partition_id: addr.partition_id.0,
                    object_id: addr.object_id.0,
                })
            }
            CommandError::ReadOnlyAttribute { list_byte, .. }
            | CommandError::InvalidAttributeValue { list_byte, .. } => Sense::invalid_param_field(*list_byte),
            CommandError::NotAtomic { .. } => Sense::new(SenseKey::IllegalRequest, 0x24, 0x00),
            CommandError::InvalidField { byte } => Sense::invalid_cdb_field(*byte),
            // INSUFFICIENT RESOURCES (55/03).
            CommandError::IdsExhausted { .. } => Sense::new(SenseKey::IllegalRequest, 0x55, 0x03),
            CommandError::Unsupported(_) => Sense::invalid_opcode().with_field(FieldPointer::cdb(8)),
            // ABORTED COMMAND, COMMANDS CLEARED BY ANOTHER INITIATOR (2F/00): another command
            // undid part of this one; sending it again completes it.
            CommandError::WriteOvertaken { .. } => Sense::new(SenseKey::AbortedCommand, 0x2F, 0x00),
            CommandError::Storage(s) => s.sense(),
        }
    }
}

/// RECOVERED ERROR, READ PAST END OF USER OBJECT (3B/17): a read ran past the logical length
/// and the missing bytes were zero-filled.
pub fn read_past_end() -> Sense {
    Sense::new(SenseKey::RecoveredError, 0x3B, 0x17)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_object_points_at_the_id_field() {
        let s = CommandError::NoSuchObject { addr: ObjectAddr::new(0x10000, 0x10001), field: CDB_OBJECT_ID }.sense();
        assert_eq!((s.key, s.asc_ascq()), (SenseKey::IllegalRequest, 0x2400));
        assert_eq!(s.field_pointer, Some(FieldPointer::cdb(24)));
    }

    #[test]
    fn not_empty_names_the_container() {
        let s = CommandError::NotEmpty { addr: ObjectAddr::partition(0x10000) }.sense();
        assert_eq!(s.asc_ascq(), 0x2C0A);
        let o = s.osd_object.expect("object descriptor");
        assert_eq!((o.partition_id, o.object_id), (0x10000, 0));
        assert_ne!(o.not_initiated_functions & functions::COMMAND, 0);
    }

    #[test]
    fn storage_errors_map_to_medium_and_hardware() {
        let read = StorageError::Io { op: IoOp::Read, source: io::Error::from_raw_os_error(libc::EIO) };
        assert_eq!((read.sense().key, read.sense().asc_ascq()), (SenseKey::MediumError, 0x1100));
        let write = StorageError::Io { op: IoOp::Write, source: io::Error::from_raw_os_error(libc::EIO) };
        assert_eq!(write.sense().asc_ascq(), 0x0C00);
        let full = StorageError::Io { op: IoOp::Write, source: io::Error::from_raw_os_error(libc::ENOSPC) };
        assert_eq!(full.sense().key, SenseKey::DataProtect);
        let db = StorageError::Sqlite(rusqlite::Error::InvalidQuery);
        assert_eq!((db.sense().key, db.sense().asc_ascq()), (SenseKey::HardwareError, 0x4400));
    }
}
