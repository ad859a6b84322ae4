//! Attribute pages and numbers Tessera's codec and client refer to by name (OSD-2 r05 §7.1.2).
//! The engine owns the full catalogue; these are the ones that cross the codec.

use crate::attr::AttrId;

/// Current Command attributes page (§7.1.2.25): what the command just did.
pub const CURRENT_COMMAND_PAGE: u32 = 0xFFFF_FFFE;
/// Every page (get list only).
pub const ALL_PAGES: u32 = 0xFFFF_FFFF;

/// Partition id the command created or addressed.
pub const CURRENT_COMMAND_PARTITION_ID: AttrId = AttrId::new(CURRENT_COMMAND_PAGE, 0x3);
/// User object / collection id the command created. For a CREATE of several objects this is the
/// FIRST id of the consecutive run (Tessera's choice; the count is the CDB's).
pub const CURRENT_COMMAND_OBJECT_ID: AttrId = AttrId::new(CURRENT_COMMAND_PAGE, 0x4);
/// APPEND: the byte address the appended data starts at (8 bytes).
pub const CURRENT_COMMAND_APPEND_START: AttrId = AttrId::new(CURRENT_COMMAND_PAGE, 0x5);
/// Change in used capacity the command caused.
pub const CURRENT_COMMAND_USED_CAPACITY_CHANGE: AttrId = AttrId::new(CURRENT_COMMAND_PAGE, 0x6);

/// User object information page (page 1 of the user object range).
pub const USER_OBJECT_INFO_PAGE: u32 = 0x1;
pub const USER_OBJECT_LOGICAL_LENGTH: AttrId = AttrId::new(USER_OBJECT_INFO_PAGE, 0x82);
pub const USER_OBJECT_USED_CAPACITY: AttrId = AttrId::new(USER_OBJECT_INFO_PAGE, 0x81);

/// The user object timestamps page: 6-byte milliseconds since the epoch.
pub const USER_OBJECT_TIMESTAMPS_PAGE: u32 = 0x3;
/// When the object's data last changed (a WRITE, a truncate).
pub const USER_OBJECT_DATA_MODIFIED: AttrId = AttrId::new(USER_OBJECT_TIMESTAMPS_PAGE, 0x5);

/// Root information page.
pub const ROOT_INFO_PAGE: u32 = 0x9000_0001;
pub const ROOT_MAX_CONTINUATION_LEN: AttrId = AttrId::new(ROOT_INFO_PAGE, 0xA);
pub const ROOT_TOTAL_CAPACITY: AttrId = AttrId::new(ROOT_INFO_PAGE, 0x80);
pub const ROOT_USED_CAPACITY: AttrId = AttrId::new(ROOT_INFO_PAGE, 0x81);

/// Tessera's root backing page (vendor-specific): the file system under the OSD's store, as it
/// is now. Another vendor's OSD leaves these undefined.
pub const ROOT_BACKING_PAGE: u32 = 0x9000_8000;
/// Equal for OSDs that share one file system of one host.
pub const ROOT_BACKING_FS_ID: AttrId = AttrId::new(ROOT_BACKING_PAGE, 0x1);
pub const ROOT_BACKING_FS_SIZE: AttrId = AttrId::new(ROOT_BACKING_PAGE, 0x2);
pub const ROOT_BACKING_FS_AVAILABLE: AttrId = AttrId::new(ROOT_BACKING_PAGE, 0x3);

/// First page of the user object range (the policy/security page is page 5 of it).
pub const USER_OBJECT_PAGE_BASE: u32 = 0x0;

/// Reads a big-endian unsigned integer attribute value of 1..=8 bytes.
pub fn value_u64(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 8 {
        return None;
    }
    Some(value.iter().fold(0u64, |acc, &b| (acc << 8) | b as u64))
}
