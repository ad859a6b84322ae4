//! LIST (partitions of the root, or the objects and collections of a partition) and LIST
//! COLLECTION, with allocation length, continuation and list identifiers.
//!
//! Continuation is stateless: a cut list returns the first id it could not hold, and the
//! next LIST passes it as the initial oid. A list identifier is still handed out, so an
//! initiator can learn (LSTCHG) that objects were created or removed since its first
//! LIST; identifiers live in memory and are forgotten on restart (then LSTCHG is set).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use rusqlite::Connection;
use tessera_osd_proto::list::LIST_HEADER_LEN;
use tessera_osd_proto::{ListEntry, ListResult, Reply, RetrievedAttr};
use tessera_types::{limits, ObjectAddr};

use crate::attrs::Reader;
use crate::db::{attrs as stored, objects as rows};
use crate::engine::{Cx, Engine};
use crate::error::CommandError;
use crate::object::ObjectKind;

/// List identifiers remembered at once; beyond it the table is reset (LSTCHG then reports a
/// change, which is always a safe answer).
const LIST_IDS_MAX: usize = 4096;
/// Ids fetched from SQLite per round while filling a list.
const BATCH: u64 = 512;

/// Issued list identifiers and the change generation each was issued at.
#[derive(Default)]
pub struct ListIds {
    generation: AtomicU64,
    next: AtomicU32,
    issued: Mutex<HashMap<u32, u64>>,
}

impl ListIds {
    /// Records that the set of objects, partitions or memberships changed.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The identifier to return and whether the list changed since it was issued.
    fn resolve(&self, requested: u32) -> (u32, bool) {
        let now = self.generation.load(Ordering::Relaxed);
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        if requested != 0 {
            return (requested, !matches!(issued.get(&requested), Some(g) if *g == now));
        }
        if issued.len() >= LIST_IDS_MAX {
            issued.clear();
        }
        let id = loop {
            let id = self.next.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
            if id != 0 {
                break id;
            }
        };
        issued.insert(id, now);
        (id, false)
    }
}

/// Where a list's ids come from.
#[derive(Clone, Copy)]
enum Source {
    Partitions,
    Partition(u64),
    Collection(u64, u64),
}

impl Source {
    fn fetch(self, c: &Connection, from: u64, limit: u64) -> Result<Vec<u64>, CommandError> {
        Ok(match self {
            Source::Partitions => rows::list_partitions(c, from, limit)?,
            Source::Partition(pid) => rows::list_objects(c, pid, from, limit)?,
            Source::Collection(pid, cid) => stored::members(c, pid, cid, from, limit)?,
        })
    }

    fn addr(self, id: u64) -> ObjectAddr {
        match self {
            Source::Partitions => ObjectAddr::partition(id),
            Source::Partition(pid) | Source::Collection(pid, _) => ObjectAddr::new(pid, id),
        }
    }
}

impl Engine {
    pub(crate) fn list(
        &self,
        cx: &mut Cx<'_, '_>,
        pid: u64,
        list_id: u32,
        initial_oid: u64,
        allocation_len: u64,
        with_attrs: bool,
    ) -> Result<Reply, CommandError> {
        let (addr, source) =
            if pid == 0 { (ObjectAddr::ROOT, Source::Partitions) } else { (ObjectAddr::partition(pid), Source::Partition(pid)) };
        let kinds = [ObjectKind::Root, ObjectKind::Partition];
        self.list_common(cx, addr, &kinds, source, list_id, initial_oid, allocation_len, with_attrs)
    }

    pub(crate) fn list_collection(
        &self,
        cx: &mut Cx<'_, '_>,
        addr: ObjectAddr,
        list_id: u32,
        initial_oid: u64,
        allocation_len: u64,
        with_attrs: bool,
    ) -> Result<Reply, CommandError> {
        let source = Source::Collection(addr.partition_id.0, addr.object_id.0);
        self.list_common(cx, addr, &[ObjectKind::Collection], source, list_id, initial_oid, allocation_len, with_attrs)
    }

    /// Fills a list with whole entries up to the allocation length. Entries are fetched in
    /// batches and one entry past the room is kept, so the codec's `encode_within` cuts the
    /// list there and names it as the continuation.
    #[allow(clippy::too_many_arguments)]
    fn list_common(
        &self,
        cx: &mut Cx<'_, '_>,
        addr: ObjectAddr,
        kinds: &[ObjectKind],
        source: Source,
        list_id: u32,
        initial_oid: u64,
        allocation_len: u64,
        with_attrs: bool,
    ) -> Result<Reply, CommandError> {
        let room = allocation_len.min(limits::TRANSFER_LEN_MAX);
        let facts = self.facts(cx.now_ms);
        let current = cx.current;
        let (kind, entries) = self.db.read(|c| {
            let kind = self.require(c, addr, kinds)?.kind;
            let reader = Reader { conn: c, data: &*self.data, facts: &facts, current: &current };
            let mut entries = Vec::new();
            let mut size = LIST_HEADER_LEN as u64;
            let mut from = initial_oid;
            loop {
                let ids = source.fetch(c, from, BATCH)?;
                for id in &ids {
                    let attrs = if with_attrs {
                        match rows::load(c, source.addr(*id))? {
                            Some(row) => reader.retrieve(&row, &cx.req.get_attrs)?,
                            None => Vec::new(),
                        }
                    } else {
                        Vec::new()
                    };
                    size += entry_len(&attrs, with_attrs);
                    entries.push(ListEntry { object_id: *id, attrs });
                    if size > room {
                        return Ok::<_, CommandError>((kind, entries));
                    }
                }
                match ids.last() {
                    Some(last) if ids.len() as u64 == BATCH => from = last + 1,
                    _ => return Ok((kind, entries)),
                }
            }
        })?;
        let (list_id, list_changed) = self.lists.resolve(list_id);
        let result = ListResult {
            continuation_oid: 0,
            list_id,
            list_changed,
            root: matches!(source, Source::Partitions),
            with_attrs,
            entries,
        };
        let data_in = result.encode_within(room);
        cx.current.object = Some((kind, addr));
        // With attributes, the get list was answered per listed object, not for the
        // addressed container.
        let retrieved = if with_attrs { Vec::new() } else { self.finish_read(cx, addr, false)? };
        Ok(Reply { data_in, retrieved, recovered: None, member_retrieved: Vec::new() })
    }
}

/// Bytes one entry takes in a LIST result (as the codec lays it out).
fn entry_len(attrs: &[RetrievedAttr], with_attrs: bool) -> u64 {
    if !with_attrs {
        return 8;
    }
    let header = tessera_osd_proto::attr_list::ENTRY_HEADER_LEN;
    let body: usize = attrs.iter().map(|a| (header + a.value.as_ref().map_or(0, Vec::len)).div_ceil(8) * 8).sum();
    16 + body as u64
}
