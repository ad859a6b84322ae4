//! OSD-2 object identifiers (OSD-2 r05 §4.6).
//!
//! The root is (0, 0); partitions have (pid, 0); collections and user objects have (pid, oid).
//! Ids 1..=0xFFFF are reserved by the standard, so every id a target assigns is at least
//! [`FIRST_ASSIGNABLE_ID`].

use std::fmt;

/// Lowest partition, collection or user object id a target may assign (OSD-2 §4.6.2).
pub const FIRST_ASSIGNABLE_ID: u64 = 0x10000;

/// A partition id (`partition_id` in the CDB, bytes 16..24).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PartitionId(pub u64);

/// A user object or collection id (`user_object_id` / `collection_id`, CDB bytes 24..32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ObjectId(pub u64);

/// The address of any OSD object: root (0,0), partition (pid,0), collection or user object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ObjectAddr {
    pub partition_id: PartitionId,
    pub object_id: ObjectId,
}

impl ObjectAddr {
    pub const ROOT: ObjectAddr = ObjectAddr { partition_id: PartitionId(0), object_id: ObjectId(0) };

    pub fn new(partition_id: u64, object_id: u64) -> Self {
        ObjectAddr { partition_id: PartitionId(partition_id), object_id: ObjectId(object_id) }
    }

    pub fn partition(partition_id: u64) -> Self {
        Self::new(partition_id, 0)
    }

    pub fn is_root(&self) -> bool {
        self.partition_id.0 == 0 && self.object_id.0 == 0
    }

    pub fn is_partition(&self) -> bool {
        self.partition_id.0 != 0 && self.object_id.0 == 0
    }
}

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for ObjectAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.partition_id, self.object_id)
    }
}
