//! The OSD-2 standard attribute pages the engine maintains: which attributes each page
//! defines, which are computed from the object row, which are stored, and which a SET may
//! change. Numbers follow OSD-2 r05 §7.1.3 (cross-checked against the Linux osd_attributes.h
//! and the OSC target); where the brief and the older Linux header differ (partition
//! information 0xC1/0xC2), the r05 brief wins.

use crate::object::ObjectKind;

/// Relative standard pages (OSD-2 r05 §4.7.3, table 10).
pub mod rel {
    pub const DIRECTORY: u32 = 0;
    pub const INFORMATION: u32 = 1;
    pub const QUOTAS: u32 = 2;
    pub const TIMESTAMPS: u32 = 3;
    pub const COLLECTIONS: u32 = 4;
    /// Policy/security: stored as given (the policy/access tag; docs/security.md).
    pub const POLICY: u32 = 5;
    /// Tessera's page of the root in the vendor-specific range (relative 8000h..EFFFh): the
    /// file system under the store ([`super::backing`]).
    pub const BACKING: u32 = 0x8000;
    /// First application-defined page.
    pub const APPLICATION_FIRST: u32 = 0x1_0000;
    /// Size of each object type's page range.
    pub const RANGE: u32 = 0x3000_0000;
}

/// The Current Command page and its attributes (OSD-2 r05 §7.1.3.31).
pub mod current {
    pub const PAGE: u32 = 0xFFFF_FFFE;
    pub const OBJECT_TYPE: u32 = 0x2;
    pub const PARTITION_ID: u32 = 0x3;
    pub const OBJECT_ID: u32 = 0x4;
    pub const APPEND_START: u32 = 0x5;
    pub const USED_CAPACITY_CHANGE: u32 = 0x6;
    pub const NUMBERS: &[u32] = &[0, OBJECT_TYPE, PARTITION_ID, OBJECT_ID, APPEND_START, USED_CAPACITY_CHANGE];
}

/// "All pages" in a get list.
pub const ALL_PAGES: u32 = 0xFFFF_FFFF;
/// Pages any object type may hold (application-defined values shared across types).
pub const ANY_TYPE_FIRST: u32 = 0xF000_0000;
pub const ANY_TYPE_LAST: u32 = 0xFFFF_FFFD;

/// Attribute 0 of every page: its 40-byte identification.
pub const PAGE_IDENTIFICATION: u32 = 0;
pub const PAGE_IDENTIFICATION_LEN: usize = 40;

/// Information page numbers.
pub mod info {
    pub const PARTITION_ID: u32 = 0x1;
    pub const OBJECT_ID: u32 = 0x2;
    pub const SYSTEM_ID: u32 = 0x3;
    pub const VENDOR_ID: u32 = 0x4;
    pub const PRODUCT_ID: u32 = 0x5;
    pub const PRODUCT_MODEL: u32 = 0x6;
    pub const PRODUCT_REVISION: u32 = 0x7;
    pub const SERIAL_NUMBER: u32 = 0x8;
    /// Username (partition, collection, user object) or OSD name (root): settable, stored.
    pub const NAME: u32 = 0x9;
    pub const MAX_CONTINUATION_LEN: u32 = 0xA;
    pub const COLLECTION_TYPE: u32 = 0xA;
    pub const TOTAL_CAPACITY: u32 = 0x80;
    pub const USED_CAPACITY: u32 = 0x81;
    pub const LOGICAL_LENGTH: u32 = 0x82;
    pub const NUMBER_OF_PARTITIONS: u32 = 0xC0;
    pub const NUMBER_OF_COLLECTIONS: u32 = 0xC1;
    pub const NUMBER_OF_USER_OBJECTS: u32 = 0xC2;
    pub const CLOCK: u32 = 0x100;
}

/// The root's backing page (Tessera's, vendor-specific): the file system holding the store,
/// as it is when asked (store/space.rs). All 8-byte values, read-only.
pub mod backing {
    /// Equal for OSDs sharing one file system of one host.
    pub const FS_ID: u32 = 0x1;
    pub const FS_SIZE: u32 = 0x2;
    /// Bytes a write may still use on that file system (any user's files count against it).
    pub const FS_AVAILABLE: u32 = 0x3;
}

/// Quotas page numbers (all 8-byte values; all-ones = no limit).
pub mod quota {
    /// Root and partition: default maximum user object length; user object: its maximum.
    pub const MAX_USER_OBJECT_LENGTH: u32 = 0x1;
    /// Root: per-partition capacity quota default; partition: its capacity quota.
    pub const CAPACITY: u32 = 0x1_0001;
    /// Root: per-partition object count default; partition: its object count quota.
    pub const OBJECT_COUNT: u32 = 0x1_0002;
    /// Root: maximum number of partitions.
    pub const PARTITION_COUNT: u32 = 0x2_0002;
    pub const UNLIMITED: u64 = u64::MAX;
}

/// Timestamps page numbers (6-byte milliseconds).
pub mod times {
    pub const CREATED: u32 = 0x1;
    pub const ATTR_ACCESSED: u32 = 0x2;
    pub const ATTR_MODIFIED: u32 = 0x3;
    pub const DATA_ACCESSED: u32 = 0x4;
    pub const DATA_MODIFIED: u32 = 0x5;
}

/// What a page is, for one object type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageClass {
    Directory,
    Information,
    Quotas,
    Timestamps,
    /// User objects' collections page (membership).
    Collections,
    CurrentCommand,
    /// The root's backing page (Tessera's): the file system under the store.
    Backing,
    /// Application-defined or any-type page: values stored as given.
    Stored,
    /// A reserved standard page, or another object type's page: nothing there.
    Unsupported,
}

pub fn classify(kind: ObjectKind, page: u32) -> PageClass {
    if page == current::PAGE {
        return PageClass::CurrentCommand;
    }
    if (ANY_TYPE_FIRST..=ANY_TYPE_LAST).contains(&page) {
        return PageClass::Stored;
    }
    let base = kind.page_base();
    if page < base || page - base >= rel::RANGE {
        return PageClass::Unsupported;
    }
    match page - base {
        rel::DIRECTORY => PageClass::Directory,
        rel::INFORMATION => PageClass::Information,
        rel::QUOTAS if kind != ObjectKind::Collection => PageClass::Quotas,
        rel::TIMESTAMPS => PageClass::Timestamps,
        rel::COLLECTIONS if kind == ObjectKind::User => PageClass::Collections,
        rel::POLICY => PageClass::Stored,
        rel::BACKING if kind == ObjectKind::Root => PageClass::Backing,
        r if r >= rel::APPLICATION_FIRST => PageClass::Stored,
        _ => PageClass::Unsupported,
    }
}

/// The standard pages an object of `kind` always has, as absolute page numbers.
pub fn standard_pages(kind: ObjectKind) -> Vec<u32> {
    let base = kind.page_base();
    let mut rels = vec![rel::DIRECTORY, rel::INFORMATION];
    if kind != ObjectKind::Collection {
        rels.push(rel::QUOTAS);
    }
    rels.push(rel::TIMESTAMPS);
    if kind == ObjectKind::User {
        rels.push(rel::COLLECTIONS);
    }
    if kind == ObjectKind::Root {
        rels.push(rel::BACKING);
    }
    rels.into_iter().map(|r| base + r).collect()
}

/// The attribute numbers a standard page always defines (stored extras such as a username
/// are added by the caller).
pub fn defined_numbers(kind: ObjectKind, class: PageClass) -> &'static [u32] {
    use ObjectKind::*;
    match (class, kind) {
        (PageClass::Information, Root) => &[
            PAGE_IDENTIFICATION,
            info::SYSTEM_ID,
            info::VENDOR_ID,
            info::PRODUCT_ID,
            info::PRODUCT_MODEL,
            info::PRODUCT_REVISION,
            info::SERIAL_NUMBER,
            info::MAX_CONTINUATION_LEN,
            info::TOTAL_CAPACITY,
            info::USED_CAPACITY,
            info::NUMBER_OF_PARTITIONS,
            info::CLOCK,
        ],
        (PageClass::Information, Partition) => &[
            PAGE_IDENTIFICATION,
            info::PARTITION_ID,
            info::USED_CAPACITY,
            info::NUMBER_OF_COLLECTIONS,
            info::NUMBER_OF_USER_OBJECTS,
        ],
        (PageClass::Information, Collection) => &[
            PAGE_IDENTIFICATION,
            info::PARTITION_ID,
            info::OBJECT_ID,
            info::COLLECTION_TYPE,
            info::USED_CAPACITY,
        ],
        (PageClass::Information, User) => {
            &[PAGE_IDENTIFICATION, info::PARTITION_ID, info::OBJECT_ID, info::USED_CAPACITY, info::LOGICAL_LENGTH]
        }
        (PageClass::Quotas, Root) => &[
            PAGE_IDENTIFICATION,
            quota::MAX_USER_OBJECT_LENGTH,
            quota::CAPACITY,
            quota::OBJECT_COUNT,
            quota::PARTITION_COUNT,
        ],
        (PageClass::Quotas, Partition) => {
            &[PAGE_IDENTIFICATION, quota::MAX_USER_OBJECT_LENGTH, quota::CAPACITY, quota::OBJECT_COUNT]
        }
        (PageClass::Quotas, User) => &[PAGE_IDENTIFICATION, quota::MAX_USER_OBJECT_LENGTH],
        (PageClass::Timestamps, _) => &[
            PAGE_IDENTIFICATION,
            times::CREATED,
            times::ATTR_ACCESSED,
            times::ATTR_MODIFIED,
            times::DATA_ACCESSED,
            times::DATA_MODIFIED,
        ],
        (PageClass::CurrentCommand, _) => current::NUMBERS,
        (PageClass::Backing, Root) => &[PAGE_IDENTIFICATION, backing::FS_ID, backing::FS_SIZE, backing::FS_AVAILABLE],
        _ => &[PAGE_IDENTIFICATION],
    }
}

/// How a SET may change one attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settable {
    /// Maintained by the device.
    ReadOnly,
    /// Stored as given (any length up to the attribute value limit).
    Stored,
    /// Stored, must be exactly 8 bytes (quotas).
    StoredU64,
    /// User object logical length: truncates or extends the data.
    LogicalLength,
    /// User object collections page entry: joins or leaves a collection.
    Membership,
}

pub fn settable(kind: ObjectKind, page: u32, number: u32) -> Settable {
    // The policy/security page holds only the policy/access tag (docs/security.md).
    if page.checked_sub(kind.page_base()) == Some(rel::POLICY) {
        return if number == crate::security_store::POLICY_ACCESS_TAG { Settable::Stored } else { Settable::ReadOnly };
    }
    match classify(kind, page) {
        PageClass::Stored => Settable::Stored,
        PageClass::Information if number == info::NAME => Settable::Stored,
        PageClass::Information if kind == ObjectKind::User && number == info::LOGICAL_LENGTH => Settable::LogicalLength,
        PageClass::Quotas if number != PAGE_IDENTIFICATION && defined_numbers(kind, PageClass::Quotas).contains(&number) => {
            Settable::StoredU64
        }
        PageClass::Collections if number != PAGE_IDENTIFICATION && number != u32::MAX => Settable::Membership,
        _ => Settable::ReadOnly,
    }
}

/// The 40-byte identification (attribute 0) of a standard page: an 8-byte vendor field
/// ("INCITS  " for T10 pages) and a 32-byte name, both ASCII, NUL-padded.
pub fn identification(kind: ObjectKind, class: PageClass) -> Option<[u8; PAGE_IDENTIFICATION_LEN]> {
    let type_name = match kind {
        ObjectKind::Root => "Root",
        ObjectKind::Partition => "Partition",
        ObjectKind::Collection => "Collection",
        ObjectKind::User => "User Object",
    };
    let page_name = match class {
        PageClass::Directory => "Directory",
        PageClass::Information => "Information",
        PageClass::Quotas => "Quotas",
        PageClass::Timestamps => "Timestamps",
        PageClass::Collections => "Collections",
        PageClass::CurrentCommand => return Some(pad_identification("INCITS  ", "T10 Current Command")),
        PageClass::Backing => return Some(pad_identification("TESSERA ", "Tessera Root Backing File System")),
        PageClass::Stored | PageClass::Unsupported => return None,
    };
    Some(pad_identification("INCITS  ", &format!("T10 {type_name} {page_name}")))
}

pub fn pad_identification(vendor: &str, name: &str) -> [u8; PAGE_IDENTIFICATION_LEN] {
    let mut out = [0u8; PAGE_IDENTIFICATION_LEN];
    let v = vendor.as_bytes();
    out[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
    let n = name.as_bytes();
    out[8..8 + n.len().min(32)].copy_from_slice(&n[..n.len().min(32)]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_belong_to_their_type() {
        assert_eq!(classify(ObjectKind::User, 1), PageClass::Information);
        assert_eq!(classify(ObjectKind::User, 0x3000_0001), PageClass::Unsupported);
        assert_eq!(classify(ObjectKind::Partition, 0x3000_0001), PageClass::Information);
        assert_eq!(classify(ObjectKind::Root, 0x9000_0003), PageClass::Timestamps);
        assert_eq!(classify(ObjectKind::Collection, 0x6000_0004), PageClass::Unsupported);
        assert_eq!(classify(ObjectKind::User, 0x1_0000), PageClass::Stored);
        assert_eq!(classify(ObjectKind::Root, 0xF000_0000), PageClass::Stored);
        assert_eq!(classify(ObjectKind::User, 6), PageClass::Unsupported);
    }

    #[test]
    fn device_maintained_attributes_are_read_only() {
        assert_eq!(settable(ObjectKind::User, 1, info::USED_CAPACITY), Settable::ReadOnly);
        assert_eq!(settable(ObjectKind::User, 1, info::LOGICAL_LENGTH), Settable::LogicalLength);
        assert_eq!(settable(ObjectKind::User, 3, times::CREATED), Settable::ReadOnly);
        assert_eq!(settable(ObjectKind::Root, 0x9000_0001, info::NAME), Settable::Stored);
        assert_eq!(settable(ObjectKind::Partition, 0x3000_0002, quota::CAPACITY), Settable::StoredU64);
        assert_eq!(settable(ObjectKind::User, 4, 7), Settable::Membership);
        assert_eq!(settable(ObjectKind::User, 5, 1), Settable::Stored);
        assert_eq!(settable(ObjectKind::Partition, 0x3000_0005, 1), Settable::Stored);
        assert_eq!(settable(ObjectKind::User, 5, 2), Settable::ReadOnly);
    }

    #[test]
    fn identification_is_forty_bytes_of_ascii() {
        let id = identification(ObjectKind::User, PageClass::Information).unwrap();
        assert_eq!(&id[..8], b"INCITS  ");
        assert!(id[8..].starts_with(b"T10 User Object Information"));
    }
}
