//! A metadata store older than its OSDs: restored from a backup, or lost and started afresh
//! while the OSDs kept their objects. Such a store would give out object ids again that the
//! OSDs already hold. Its precreates would then be refused and abandoned, and abandoning a range
//! removes its objects, so the files of the lost history would go. Or it would hand those
//! objects to new files with the old bytes still in them.
//!
//! So at start each server lists, on every OSD that answers, the object ids in its own range
//! from the next one its store would give out, and the lengths of its precreated objects. Any
//! id found past its allocation, or a precreated object with data in it, proves the store is
//! behind. An OSD that does not answer then is checked when it does; until then new files
//! avoid it and nothing is precreated on it (`health.rs`, "unchecked").
//! The server then moves its allocation past the highest such id, and sets aside every
//! precreated range on that OSD without removing the objects. It logs what it found. The files
//! the store does not know of are lost to the namespace, as with any restore. Their objects are
//! orphans, which `tessera repair` reports and removes only when asked.

use tessera_mds_proto::FsError;

use crate::health::OsdHealth;
use crate::namespace::Namespace;
use crate::objects::{DataObjects, ListedObject, ObjectsError};
use crate::store::files::{object_id, object_seq, OBJECT_SEQ_BITS};
use crate::store::precreate::Range;

/// Checks every OSD `health` marks unchecked that is not known to be down, and marks those it
/// could check as checked; returns how many were found ahead of the store. At start every
/// OSD is unchecked; one that cannot be listed stays so (new files avoid it and nothing is
/// precreated on it) and is checked once it answers, by the journals' background thread.
pub fn fence_unchecked(ns: &Namespace, objects: &dyn DataObjects, health: &OsdHealth) -> u32 {
    let mut ahead = 0;
    for osd in health.unchecked().into_iter().filter(|&osd| !health.is_down(osd)) {
        match check(ns, objects, health, osd) {
            Ok(found_ahead) => ahead += found_ahead as u32,
            Err(e) => tracing::warn!(osd, %e, "cannot check the OSD's objects against this metadata store yet; new files avoid it until then"),
        }
    }
    ahead
}

/// Checks `osd` now and marks it checked; whether it was found ahead of the store. One check
/// at a time (the journals' thread and a create may both want one): a second would judge by a
/// listing older than the first one's fence, and could set aside a range made since.
pub fn check(ns: &Namespace, objects: &dyn DataObjects, health: &OsdHealth, osd: u32) -> Result<bool, FenceError> {
    let _one = health.one_check_at_a_time();
    if !health.is_unchecked(osd) {
        return Ok(false);
    }
    let found_ahead = fence_osd(ns, objects, osd)?;
    health.checked(osd);
    tracing::info!(osd, "OSD checked against this metadata store: new files may be placed on it");
    Ok(found_ahead)
}

/// Why an OSD could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    #[error("reading the object allocation: {0}")]
    Store(#[from] FsError),
    #[error("listing the OSD's objects: {0}")]
    Osd(#[from] ObjectsError),
}

/// Checks one OSD; whether it was found ahead of the store (and fenced).
fn fence_osd(ns: &Namespace, objects: &dyn DataObjects, osd: u32) -> Result<bool, FenceError> {
    let server = ns.server();
    let (next, ranges) = ns.read(|s| Ok((s.next_seq(osd)?, s.precreated_ranges()?)))?;
    if next >= 1 << OBJECT_SEQ_BITS {
        return Ok(false);
    }
    let known = Known { next, pools: ranges.into_iter().filter(|r| r.osd == osd).collect() };
    // One listing covers both checks: from the first precreated id (they lie below the
    // allocation) to the end of this server's own ids.
    let listed = objects.lengths_in(osd, object_id(server, known.first_to_list())..server_ids_end(server))?;
    let Some(highest) = known.highest_unknown_to_store(&listed) else { return Ok(false) };
    let set_aside = ns.write(|s| s.fence_osd(osd, highest))?;
    tracing::error!(
        osd,
        next,
        highest,
        set_aside,
        "this metadata store is older than the OSD: it holds object ids this store never gave out (the store was restored from a backup, or replaced). New ids now start after them and the precreated objects were set aside, so no file gets another's object; files the store does not know are lost to the namespace, and `tessera repair` reports their objects"
    );
    Ok(true)
}

/// The first id past server `server`'s own (ids carry their server above the sequence bits).
fn server_ids_end(server: u32) -> u64 {
    (server as u64 + 2) << OBJECT_SEQ_BITS
}

/// What the store says of one OSD: the next sequence it would give out, and its precreated
/// ranges there.
struct Known {
    next: u64,
    pools: Vec<Range>,
}

impl Known {
    fn first_to_list(&self) -> u64 {
        self.pools.iter().filter(|r| r.next <= r.last).map(|r| r.next).fold(self.next, u64::min)
    }

    /// Whether `seq` is precreated and not yet handed out, so it should still be empty.
    fn is_unused_precreate(&self, seq: u64) -> bool {
        self.pools.iter().any(|r| (r.next..=r.last).contains(&seq))
    }

    /// The highest sequence the OSD proves the store lost, if any: an id past the allocation,
    /// or else (a written precreated object: a lost later life handed it to a file) the
    /// allocation's last.
    fn highest_unknown_to_store(&self, listed: &[ListedObject]) -> Option<u64> {
        let past = listed.iter().map(|o| object_seq(o.id)).filter(|&seq| seq >= self.next).max();
        let written_pool = listed.iter().any(|o| o.logical_len != Some(0) && self.is_unused_precreate(object_seq(o.id)));
        past.or(written_pool.then(|| self.next.saturating_sub(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::files::object_server;

    fn listed(seq: u64, len: u64) -> ListedObject {
        ListedObject { id: object_id(0, seq), logical_len: Some(len) }
    }

    /// Goal: the listing stops exactly where the next server's ids begin, so server 0 never
    /// reads server 1's objects as its own lost history.
    #[test]
    fn a_servers_ids_end_where_the_next_servers_begin() {
        for server in 0..4 {
            let end = server_ids_end(server);
            assert_eq!(end, object_id(server + 1, 1) - 1);
            assert_eq!(object_server(end - 1), Some(server));
            assert_eq!(object_server(end), Some(server + 1));
        }
    }

    /// Goal: the store is judged behind by an id past its allocation or a written precreated
    /// object, and by nothing else. Method: each case against a store at next = 100 with
    /// precreated 50..=59, of which 50..=52 were handed out.
    #[test]
    fn only_ids_past_the_allocation_or_written_precreates_prove_a_lost_history() {
        let known = Known { next: 100, pools: vec![Range { osd: 0, first: 50, next: 53, last: 59 }] };
        assert_eq!(known.first_to_list(), 53);
        assert_eq!(known.highest_unknown_to_store(&[]), None);
        // Files' objects (handed out, written) and empty precreates are what the store knows.
        assert_eq!(known.highest_unknown_to_store(&[listed(10, 4096), listed(51, 7), listed(53, 0), listed(59, 0)]), None);
        // An id at or past the allocation: the highest one.
        assert_eq!(known.highest_unknown_to_store(&[listed(100, 0), listed(140, 0), listed(120, 5)]), Some(140));
        // A precreated object not handed out, with data: the allocation's last.
        assert_eq!(known.highest_unknown_to_store(&[listed(55, 1)]), Some(99));
        // A length the OSD did not report counts as written.
        assert_eq!(known.highest_unknown_to_store(&[ListedObject { id: object_id(0, 58), logical_len: None }]), Some(99));
        // Without pools the listing starts at the allocation.
        assert_eq!(Known { next: 7, pools: vec![] }.first_to_list(), 7);
    }
}
