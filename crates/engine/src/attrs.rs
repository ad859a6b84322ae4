//! Getting and setting attributes: values of the standard pages (computed from the object
//! row, or stored), application-defined pages, the Current Command page, "all attributes of a
//! page" expansion, and SET validation.
//!
//! Order inside a command (OSD-2 r05 §5.2.2): the command's function, then the set list, then
//! the get list, so a get sees both the set values and the Current Command page.

use rusqlite::Connection;
use tessera_osd_proto::{AttrId, Attribute, GetAttrs, RetrievedAttr};
use tessera_types::{limits, ObjectAddr};

use crate::db::{attrs as stored, objects};
use crate::error::{CommandError, StorageError};
use crate::object::{timestamp_bytes, ObjectKind, ObjectRow};
use crate::pages::{self, backing, current, info, times, PageClass, Settable, PAGE_IDENTIFICATION};
use crate::store::ObjectData;
use crate::quotas;

/// Identification strings of this device (root information page; space-padded ASCII, as in
/// SCSI INQUIRY).
pub const VENDOR_ID: &[u8; 8] = b"TESSERA ";
pub const PRODUCT_ID: &[u8; 16] = b"OSD ENGINE      ";
pub const PRODUCT_REVISION: &[u8; 4] = b"0001";
const PRODUCT_MODEL: &str = "Tessera OSD-2 r05 object engine";

/// Bytes of a set-list entry header before the value, and of the list header: the codec's,
/// used to point sense data at an entry.
const SET_ENTRY_HEADER_LEN: usize = tessera_osd_proto::attr_list::ENTRY_HEADER_LEN;
const LIST_HEADER_LEN: usize = tessera_osd_proto::attr_list::LIST_HEADER_LEN;

/// Device-wide facts some attributes report.
#[derive(Clone, Copy, Debug)]
pub struct DeviceFacts {
    pub system_id: [u8; 20],
    pub capacity_bytes: u64,
    pub now_ms: u64,
}

/// The Current Command page of the command being executed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CurrentCommand {
    pub object: Option<(ObjectKind, ObjectAddr)>,
    pub append_start: Option<u64>,
    pub used_change: Option<i64>,
}

impl CurrentCommand {
    pub(crate) fn value(&self, number: u32) -> Option<Vec<u8>> {
        match number {
            PAGE_IDENTIFICATION => pages::identification(ObjectKind::Root, PageClass::CurrentCommand).map(|v| v.to_vec()),
            current::OBJECT_TYPE => self.object.map(|(k, _)| vec![k.code()]),
            current::PARTITION_ID => self.object.map(|(_, a)| be8(a.partition_id.0)),
            current::OBJECT_ID => self.object.map(|(_, a)| be8(a.object_id.0)),
            current::APPEND_START => self.append_start.map(be8),
            current::USED_CAPACITY_CHANGE => self.used_change.map(|d| d.to_be_bytes().to_vec()),
            _ => None,
        }
    }
}

pub fn be8(v: u64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn space_padded(s: &str, len: usize) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.resize(len, b' ');
    v
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// Everything needed to read one object's attributes.
pub struct Reader<'a> {
    pub conn: &'a Connection,
    /// The object data store, for the root's backing page.
    pub data: &'a dyn ObjectData,
    pub facts: &'a DeviceFacts,
    pub current: &'a CurrentCommand,
}

impl Reader<'_> {
    /// One attribute's value; None is "undefined".
    pub fn value(&self, row: &ObjectRow, page: u32, number: u32) -> Result<Option<Vec<u8>>, StorageError> {
        let class = pages::classify(row.kind, page);
        if number == PAGE_IDENTIFICATION {
            if class == PageClass::Stored {
                return self.stored_page_identification(row, page);
            }
            return Ok(pages::identification(row.kind, class).map(|v| v.to_vec()));
        }
        match class {
            PageClass::CurrentCommand => Ok(self.current.value(number)),
            PageClass::Directory => self.directory_entry(row, number),
            PageClass::Information => self.information(row, page, number),
            PageClass::Quotas => {
                if pages::defined_numbers(row.kind, class).contains(&number) {
                    Ok(Some(be8(quotas::effective(self.conn, row.addr, row.kind, number)?)))
                } else {
                    Ok(None)
                }
            }
            PageClass::Timestamps => Ok(timestamp(row, number)),
            PageClass::Collections => Ok(stored::membership(self.conn, row.addr, number)?.map(be8)),
            PageClass::Stored => stored::get(self.conn, row.addr, page, number),
            PageClass::Backing => self.backing(number),
            PageClass::Unsupported => Ok(None),
        }
    }

    /// The root's backing page: the file system under the store now (store/space.rs).
    /// Undefined for a store with none.
    fn backing(&self, number: u32) -> Result<Option<Vec<u8>>, StorageError> {
        let Some(space) = self.data.backing_space()? else { return Ok(None) };
        Ok(match number {
            backing::FS_ID => Some(be8(space.fs_id)),
            backing::FS_SIZE => Some(be8(space.size_bytes)),
            backing::FS_AVAILABLE => Some(be8(space.avail_bytes)),
            _ => None,
        })
    }

    fn information(&self, row: &ObjectRow, page: u32, number: u32) -> Result<Option<Vec<u8>>, StorageError> {
        let (pid, oid) = (row.addr.partition_id.0, row.addr.object_id.0);
        let v = match (row.kind, number) {
            (_, info::NAME) => return stored::get(self.conn, row.addr, page, number),
            (ObjectKind::Root, info::SYSTEM_ID) => self.facts.system_id.to_vec(),
            (ObjectKind::Root, info::VENDOR_ID) => VENDOR_ID.to_vec(),
            (ObjectKind::Root, info::PRODUCT_ID) => PRODUCT_ID.to_vec(),
            (ObjectKind::Root, info::PRODUCT_MODEL) => space_padded(PRODUCT_MODEL, 32),
            (ObjectKind::Root, info::PRODUCT_REVISION) => PRODUCT_REVISION.to_vec(),
            (ObjectKind::Root, info::SERIAL_NUMBER) => hex(&self.facts.system_id).into_bytes(),
            (ObjectKind::Root, info::MAX_CONTINUATION_LEN) => limits::CONTINUATION_LEN_MAX.to_be_bytes().to_vec(),
            (ObjectKind::Root, info::TOTAL_CAPACITY) => be8(self.facts.capacity_bytes),
            (ObjectKind::Root, info::NUMBER_OF_PARTITIONS) => be8(objects::count(self.conn, 0, ObjectKind::Partition)?),
            (ObjectKind::Root, info::CLOCK) => timestamp_bytes(self.facts.now_ms),
            (ObjectKind::Partition, info::NUMBER_OF_COLLECTIONS) => be8(objects::count(self.conn, pid, ObjectKind::Collection)?),
            (ObjectKind::Partition, info::NUMBER_OF_USER_OBJECTS) => be8(objects::count(self.conn, pid, ObjectKind::User)?),
            (ObjectKind::Collection, info::COLLECTION_TYPE) => vec![0], // linked collection
            (ObjectKind::Collection, info::USED_CAPACITY) => be8(objects::collection_used(self.conn, pid, oid)?),
            (ObjectKind::Partition | ObjectKind::Collection | ObjectKind::User, info::PARTITION_ID) => be8(pid),
            (ObjectKind::Collection | ObjectKind::User, info::OBJECT_ID) => be8(oid),
            (_, info::USED_CAPACITY) => be8(row.used_bytes),
            (ObjectKind::User, info::LOGICAL_LENGTH) => be8(row.logical_len),
            _ => return Ok(None),
        };
        Ok(Some(v))
    }

    /// The pages an object has: its standard pages, then pages holding stored values.
    pub fn directory(&self, row: &ObjectRow) -> Result<Vec<u32>, StorageError> {
        let mut pages = pages::standard_pages(row.kind);
        for p in stored::pages(self.conn, row.addr)? {
            if pages::classify(row.kind, p) == PageClass::Stored {
                pages.push(p);
            }
        }
        Ok(pages)
    }

    fn directory_entry(&self, row: &ObjectRow, number: u32) -> Result<Option<Vec<u8>>, StorageError> {
        let class = pages::classify(row.kind, number);
        if class == PageClass::Stored {
            return self.stored_page_identification(row, number);
        }
        if pages::standard_pages(row.kind).contains(&number) {
            return Ok(pages::identification(row.kind, class).map(|v| v.to_vec()));
        }
        Ok(None)
    }

    /// Attribute 0 of an application-defined or any-type page: the stored value if set, else
    /// "TESSERA " + "Application page 0x........" while the page holds values (the directory
    /// lists it); undefined for a page holding nothing.
    fn stored_page_identification(&self, row: &ObjectRow, page: u32) -> Result<Option<Vec<u8>>, StorageError> {
        let values = stored::page(self.conn, row.addr, page)?;
        if values.is_empty() {
            return Ok(None);
        }
        let own = values.into_iter().find(|(n, _)| *n == PAGE_IDENTIFICATION).map(|(_, v)| v);
        Ok(Some(own.unwrap_or_else(|| {
            pages::pad_identification("TESSERA ", &format!("Application page {page:#010x}")).to_vec()
        })))
    }

    /// Every defined attribute of one page, by number. An application-defined or any-type
    /// page lists its stored values only (its attribute 0 when one was stored; the default
    /// identification is answered when asked for by number, not added to the listing).
    pub fn page(&self, row: &ObjectRow, page: u32) -> Result<Vec<RetrievedAttr>, StorageError> {
        let class = pages::classify(row.kind, page);
        let mut numbers: Vec<u32> =
            if class == PageClass::Stored { Vec::new() } else { pages::defined_numbers(row.kind, class).to_vec() };
        match class {
            PageClass::Directory => numbers.extend(self.directory(row)?),
            PageClass::Information | PageClass::Stored => {
                numbers.extend(stored::page(self.conn, row.addr, page)?.into_iter().map(|(n, _)| n))
            }
            PageClass::Collections => numbers.extend(stored::memberships(self.conn, row.addr)?.into_iter().map(|(n, _)| n)),
            _ => {}
        }
        numbers.sort_unstable();
        numbers.dedup();
        let mut out = Vec::with_capacity(numbers.len());
        for number in numbers {
            if let Some(value) = self.value(row, page, number)? {
                out.push(RetrievedAttr { id: AttrId::new(page, number), value: Some(value) });
            }
        }
        Ok(out)
    }

    fn expand(&self, row: &ObjectRow, page: u32, out: &mut Vec<RetrievedAttr>) -> Result<(), StorageError> {
        if page == pages::ALL_PAGES {
            for p in self.directory(row)? {
                out.extend(self.page(row, p)?);
            }
        } else {
            out.extend(self.page(row, page)?);
        }
        Ok(())
    }

    /// The attributes one get list names, in list order ("all of a page" expanded in place).
    pub fn list(&self, row: &ObjectRow, ids: &[AttrId]) -> Result<Vec<RetrievedAttr>, StorageError> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if id.is_all_in_page() {
                self.expand(row, id.page, &mut out)?;
            } else {
                out.push(RetrievedAttr { id: *id, value: self.value(row, id.page, id.number)? });
            }
        }
        Ok(out)
    }

    /// What a command's get parameters retrieve for `row`.
    pub fn retrieve(&self, row: &ObjectRow, get: &GetAttrs) -> Result<Vec<RetrievedAttr>, StorageError> {
        match get {
            GetAttrs::None => Ok(Vec::new()),
            GetAttrs::Page { page, .. } => {
                let mut out = Vec::new();
                self.expand(row, *page, &mut out)?;
                Ok(out)
            }
            GetAttrs::List { ids, .. } => self.list(row, ids),
        }
    }
}

fn timestamp(row: &ObjectRow, number: u32) -> Option<Vec<u8>> {
    let t = &row.times;
    let ms = match number {
        times::CREATED => t.created_ms,
        times::ATTR_ACCESSED => t.attr_accessed_ms,
        times::ATTR_MODIFIED => t.attr_modified_ms,
        times::DATA_ACCESSED => t.data_accessed_ms,
        times::DATA_MODIFIED => t.data_modified_ms,
        _ => return None,
    };
    Some(timestamp_bytes(ms))
}

/// Whether a get would read anything the "attributes accessed" timestamp should record.
pub fn gets_anything(get: &GetAttrs) -> bool {
    !matches!(get, GetAttrs::None)
}

/// Byte offset of set-list entry `index` from the start of the set list.
pub fn set_entry_offset(sets: &[Attribute], index: usize) -> u16 {
    let before: usize = sets[..index].iter().map(|a| (SET_ENTRY_HEADER_LEN + a.value.len()).div_ceil(8) * 8).sum();
    u16::try_from(LIST_HEADER_LEN + before).unwrap_or(u16::MAX)
}

fn read_only(sets: &[Attribute], index: usize) -> CommandError {
    let id = sets[index].id;
    CommandError::ReadOnlyAttribute { page: id.page, number: id.number, entry: index, list_byte: set_entry_offset(sets, index) }
}

fn invalid(sets: &[Attribute], index: usize) -> CommandError {
    let id = sets[index].id;
    CommandError::InvalidAttributeValue { page: id.page, number: id.number, entry: index, list_byte: set_entry_offset(sets, index) }
}

/// Checks a set list against an object type before the command does anything, so a bad
/// list leaves the object untouched.
pub fn validate_set(kind: ObjectKind, sets: &[Attribute]) -> Result<(), CommandError> {
    for (i, a) in sets.iter().enumerate() {
        let ok_len = match pages::settable(kind, a.id.page, a.id.number) {
            Settable::ReadOnly => return Err(read_only(sets, i)),
            Settable::Stored => a.value.len() <= limits::ATTR_VALUE_LEN_MAX && a.id.number != AttrId::ALL_IN_PAGE,
            Settable::StoredU64 | Settable::Membership => a.value.is_empty() || a.value.len() == 8,
            Settable::LogicalLength => a.value.len() == 8,
        };
        if !ok_len {
            return Err(invalid(sets, i));
        }
    }
    Ok(())
}

/// What applying a set list changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetOutcome {
    pub changed: bool,
    /// A logical length change (the data modified timestamp moves too).
    pub length_changed: bool,
    pub used_change: i64,
}

/// True when `sets` changes the logical length of an object of `kind`.
pub fn sets_logical_length(kind: ObjectKind, sets: &[Attribute]) -> bool {
    sets.iter().any(|a| matches!(pages::settable(kind, a.id.page, a.id.number), Settable::LogicalLength))
}

/// Applies a validated set list to `row` inside the caller's write transaction. Logical
/// length changes truncate or extend the data through `data`.
pub fn apply_set(
    c: &Connection,
    data: &dyn crate::store::ObjectData,
    row: &ObjectRow,
    sets: &[Attribute],
) -> Result<SetOutcome, CommandError> {
    let mut outcome = SetOutcome::default();
    let mut logical_len = row.logical_len;
    let mut used = row.used_bytes;
    for (i, a) in sets.iter().enumerate() {
        match pages::settable(row.kind, a.id.page, a.id.number) {
            Settable::ReadOnly => return Err(read_only(sets, i)),
            Settable::Stored | Settable::StoredU64 => stored::set(c, row.addr, a.id.page, a.id.number, &a.value)?,
            Settable::Membership => set_membership(c, row.addr, a, sets, i)?,
            Settable::LogicalLength => {
                let new_len = u64::from_be_bytes(a.value.as_slice().try_into().map_err(|_| invalid(sets, i))?);
                if new_len > quotas::max_object_length(c, row.addr)? || new_len > crate::object::ID_MAX {
                    return Err(CommandError::QuotaExceeded { addr: row.addr, quota: "maximum user object length" });
                }
                crate::data::trim_stale_tail(data, row.addr, logical_len)?;
                data.set_len(row.addr, new_len)?;
                objects::set_logical_len(c, row.addr, new_len)?;
                let new_used = data.used_bytes(row.addr)?;
                objects::set_used(c, row.addr, used, new_used)?;
                outcome.used_change += new_used as i64 - used as i64;
                outcome.length_changed |= new_len != logical_len;
                used = new_used;
                logical_len = new_len;
            }
        }
        outcome.changed = true;
    }
    Ok(outcome)
}

fn set_membership(c: &Connection, addr: ObjectAddr, a: &Attribute, sets: &[Attribute], i: usize) -> Result<(), CommandError> {
    if a.value.is_empty() {
        stored::set_membership(c, addr, a.id.number, None)?;
        return Ok(());
    }
    let cid = u64::from_be_bytes(a.value.as_slice().try_into().map_err(|_| invalid(sets, i))?);
    let collection = ObjectAddr::new(addr.partition_id.0, cid);
    let is_collection = cid <= crate::object::ID_MAX
        && matches!(objects::load(c, collection)?, Some(r) if r.kind == ObjectKind::Collection);
    if !is_collection {
        return Err(invalid(sets, i));
    }
    if stored::membership(c, addr, a.id.number)? == Some(cid) {
        return Ok(());
    }
    if stored::is_member(c, addr, cid)? {
        // Already listed under another attribute number: one object, one membership.
        return Err(invalid(sets, i));
    }
    stored::set_membership(c, addr, a.id.number, Some(cid))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_entry_offsets_follow_padded_entries() {
        let sets = vec![
            Attribute { id: AttrId::new(0x10000, 1), value: vec![1; 3] },
            Attribute { id: AttrId::new(0x10000, 2), value: vec![1; 8] },
            Attribute { id: AttrId::new(1, 1), value: vec![] },
        ];
        assert_eq!(set_entry_offset(&sets, 0), 8);
        assert_eq!(set_entry_offset(&sets, 1), 8 + 24);
        assert_eq!(set_entry_offset(&sets, 2), 8 + 24 + 24);
    }

    #[test]
    fn read_only_attribute_is_refused_with_its_entry() {
        let sets = vec![
            Attribute { id: AttrId::new(0x10000, 1), value: vec![1] },
            Attribute { id: AttrId::new(1, info::USED_CAPACITY), value: vec![0; 8] },
        ];
        let e = validate_set(ObjectKind::User, &sets).unwrap_err();
        assert!(matches!(e, CommandError::ReadOnlyAttribute { entry: 1, list_byte: 32, .. }), "{e:?}");
        assert_eq!(e.sense().asc_ascq(), 0x2600);
    }
}
