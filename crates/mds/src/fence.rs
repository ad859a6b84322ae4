//! A metadata store older than its OSDs: restored from a backup, or lost and started afresh
//! while the OSDs kept their objects. Such a store would give out object ids again that the
//! OSDs already hold. Its precreates would then be refused and abandoned, and abandoning a range
//! removes its objects, so the files of the lost history would go. Or it would hand those
//! objects to new files with the old bytes still in them.
//!
//! So at start each server lists, on every OSD that answers, the object ids in its own range
//! from the next one its store would give out, and the lengths of its precreated objects. Any
//! id found past its allocation, or a precreated object with data in it, proves the store is
//! behind.
//! The server then moves its allocation past the highest such id, and sets aside every
//! precreated range on that OSD without removing the objects. It logs what it found. The files
//! the store does not know of are lost to the namespace, as with any restore. Their objects are
//! orphans, which `tessera repair` reports and removes only when asked.

use crate::namespace::Namespace;
use crate::objects::DataObjects;
use crate::store::files::{object_id, object_seq, object_server, OBJECT_SEQ_BITS};

/// Checks every OSD of `osd_count`; returns how many were found ahead of the store.
pub fn fence_older_store(ns: &Namespace, objects: &dyn DataObjects, osd_count: u32) -> u32 {
    let server = ns.server();
    let mut ahead = 0;
    for osd in 0..osd_count {
        let next = match ns.read(|s| s.next_seq(osd)) {
            Ok(next) if next < 1 << OBJECT_SEQ_BITS => next,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(osd, %e, "cannot read the object allocation to check it against the OSD");
                continue;
            }
        };
        let found = match objects.list_from(osd, object_id(server, next)) {
            Ok(ids) => ids.into_iter().filter(|&id| object_server(id) == Some(server)).map(object_seq).max(),
            Err(e) => {
                tracing::warn!(osd, %e, "cannot list the OSD's objects to check that this store is not older than it");
                continue;
            }
        };
        // A store restored from a copy may also hold precreated objects that its lost later
        // life handed to files: written ones are not empty any more.
        let pool_written = match ns.read(|s| s.precreated_ranges()) {
            Ok(ranges) => match ranges.iter().filter(|r| r.osd == osd && r.next <= r.last).map(|r| r.next).min() {
                Some(first) => match objects.written_from(osd, object_id(server, first)) {
                    Ok(ids) => ranges.iter().filter(|r| r.osd == osd).any(|r| ids.iter().any(|&id| object_server(id) == Some(server) && (r.next..=r.last).contains(&object_seq(id)))),
                    Err(e) => {
                        tracing::warn!(osd, %e, "cannot read the precreated objects' lengths to check that they are empty");
                        false
                    }
                },
                None => false,
            },
            Err(_) => false,
        };
        let highest = match (found, pool_written) {
            (Some(highest), _) => highest,
            (None, true) => next - 1,
            (None, false) => continue,
        };
        match ns.write(|s| s.fence_osd(osd, highest)) {
            Ok(set_aside) => {
                ahead += 1;
                tracing::error!(
                    osd,
                    next,
                    highest,
                    set_aside,
                    "this metadata store is older than the OSD: it holds object ids this store never gave out (the store was restored from a backup, or replaced). New ids now start after them and the precreated objects were set aside, so no file gets another's object; files the store does not know are lost to the namespace, and `tessera repair` reports their objects"
                );
            }
            Err(e) => tracing::error!(osd, %e, "this metadata store is older than the OSD, and moving its allocation failed"),
        }
    }
    ahead
}
