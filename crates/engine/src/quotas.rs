//! Quota resolution: a quota attribute that is not set on an object inherits from its
//! partition's defaults, then from the root's, and is otherwise unlimited.

use rusqlite::Connection;
use tessera_types::ObjectAddr;

use crate::db::attrs;
use crate::error::StorageError;
use crate::object::ObjectKind;
use crate::pages::{quota, rel};

const USER_QUOTAS: u32 = rel::QUOTAS;
const PARTITION_QUOTAS: u32 = 0x3000_0000 + rel::QUOTAS;
const ROOT_QUOTAS: u32 = 0x9000_0000 + rel::QUOTAS;

fn stored_u64(c: &Connection, addr: ObjectAddr, page: u32, number: u32) -> Result<Option<u64>, StorageError> {
    Ok(attrs::get(c, addr, page, number)?.and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok()).map(u64::from_be_bytes))
}

/// The value a quota attribute reads as on an object of `kind` (stored or inherited).
pub fn effective(c: &Connection, addr: ObjectAddr, kind: ObjectKind, number: u32) -> Result<u64, StorageError> {
    let partition = ObjectAddr::partition(addr.partition_id.0);
    let chain: Vec<(ObjectAddr, u32)> = match kind {
        ObjectKind::User => vec![(addr, USER_QUOTAS), (partition, PARTITION_QUOTAS), (ObjectAddr::ROOT, ROOT_QUOTAS)],
        ObjectKind::Partition => vec![(addr, PARTITION_QUOTAS), (ObjectAddr::ROOT, ROOT_QUOTAS)],
        ObjectKind::Root => vec![(ObjectAddr::ROOT, ROOT_QUOTAS)],
        ObjectKind::Collection => vec![],
    };
    for (holder, page) in chain {
        if let Some(v) = stored_u64(c, holder, page, number)? {
            return Ok(v);
        }
    }
    Ok(quota::UNLIMITED)
}

/// Largest logical length user object `addr` may reach.
pub fn max_object_length(c: &Connection, addr: ObjectAddr) -> Result<u64, StorageError> {
    effective(c, addr, ObjectKind::User, quota::MAX_USER_OBJECT_LENGTH)
}

/// Capacity quota of partition `pid`, in bytes of used capacity.
pub fn partition_capacity(c: &Connection, pid: u64) -> Result<u64, StorageError> {
    effective(c, ObjectAddr::partition(pid), ObjectKind::Partition, quota::CAPACITY)
}

/// Maximum number of collections and user objects in partition `pid`.
pub fn partition_object_count(c: &Connection, pid: u64) -> Result<u64, StorageError> {
    effective(c, ObjectAddr::partition(pid), ObjectKind::Partition, quota::OBJECT_COUNT)
}

/// Maximum number of partitions.
pub fn partition_count(c: &Connection) -> Result<u64, StorageError> {
    effective(c, ObjectAddr::ROOT, ObjectKind::Root, quota::PARTITION_COUNT)
}
