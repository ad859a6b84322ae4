//! A cache of GET ATTRIBUTES answers in front of SQLite. Why: a lookup costs ~4 us in a tight
//! loop but ~15 us inside a round trip, where it runs on a core that just woke up with cold
//! caches; a hash lookup touches a few cache lines instead of SQLite's pager and VM.
//!
//! Validity: every write transaction bumps the database generation after it commits
//! ([`crate::db::Db::generation`]); an entry answers only while the generation it was read
//! under is still current, so any change anywhere invalidates everything. Reading the
//! generation before the SQL read makes a race conservative: a commit landing in between
//! leaves an entry stamped with the old generation, which never matches again.
//! Only objects inside a partition are cached, and never a get of the Current Command page or
//! of root attributes (the clock), whose values do not come from the database.

use std::collections::HashMap;
use std::sync::Mutex;

use tessera_osd_proto::{GetAttrs, RetrievedAttr};
use tessera_types::ObjectAddr;

use crate::object::ObjectRow;

/// Entries kept; the cache is emptied when full (a GET ATTRIBUTES working set is small, and a
/// miss only costs the SQL read).
const ENTRIES_MAX: usize = 4096;

/// Pages from this one up (Current Command, all pages) carry values that are not stored.
const FIRST_UNCACHED_PAGE: u32 = 0xFFFF_FFFE;

struct Entry {
    generation: u64,
    row: ObjectRow,
    retrieved: Vec<RetrievedAttr>,
}

#[derive(Default)]
pub(crate) struct AttrCache {
    map: Mutex<HashMap<(ObjectAddr, GetAttrs), Entry>>,
}

impl AttrCache {
    pub fn cacheable(addr: ObjectAddr, get: &GetAttrs) -> bool {
        let stored_pages = match get {
            GetAttrs::None => return false,
            GetAttrs::Page { page, .. } => *page < FIRST_UNCACHED_PAGE,
            GetAttrs::List { ids, .. } => ids.iter().all(|id| id.page < FIRST_UNCACHED_PAGE),
        };
        addr.partition_id.0 != 0 && addr.object_id.0 != 0 && stored_pages
    }

    pub fn get(&self, addr: ObjectAddr, get: &GetAttrs, generation: u64) -> Option<(ObjectRow, Vec<RetrievedAttr>)> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let e = map.get(&(addr, get.clone()))?;
        (e.generation == generation).then(|| (e.row, e.retrieved.clone()))
    }

    pub fn put(&self, addr: ObjectAddr, get: &GetAttrs, generation: u64, row: ObjectRow, retrieved: &[RetrievedAttr]) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= ENTRIES_MAX {
            map.clear();
        }
        map.insert((addr, get.clone()), Entry { generation, row, retrieved: retrieved.to_vec() });
    }
}
