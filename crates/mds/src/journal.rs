//! Keeping objects from leaking. Every object the MDS allocates belongs to a precreated range
//! from the step that allocates it, and leaves the range only in the step that makes a file
//! reference it; unlink (and a rename that replaces a file) moves a file's objects into the
//! `pending_removal` journal in the step that drops the inode. So at every instant each
//! allocated object is in a range, referenced by a file, journaled, or already gone from its
//! OSD.
//!
//! [`drain`] removes journaled objects from the OSDs and clears a row only after its REMOVE
//! succeeded; a failure leaves the row for the next drain (at start-up, or `resume`). REMOVE of
//! an absent object succeeds, so repeating a drain is harmless. Precreated objects are
//! accounted for by their ranges instead (`store/precreate.rs`), and enter the journal only
//! when a range is abandoned.
//!
//! [`audit`] is the repair check for what the journal cannot cover: orphans (objects made by
//! hand, or a store restored from an old backup: ids on the OSDs that this server allocated and
//! that no file and no journal row accounts for), and, the other way round, files' objects
//! that their OSD no longer holds (an OSD store lost or replaced).

use std::collections::HashSet;

use tessera_mds_proto::{FsError, MissingObject, ObjectRef};

use crate::namespace::Namespace;
use crate::objects::{DataObjects, ObjectsError};
use crate::store::Store;
use crate::store::files::object_server;

/// Removes `list` from the OSDs, then clears the rows of those removed in one step (a row left
/// by a crash before that step only costs a harmless second REMOVE). Returns how many are
/// still journaled.
pub fn drain(ns: &Namespace, objects: &dyn DataObjects, list: &[ObjectRef]) -> usize {
    // The removes in flight together; then each row is cleared as its own outcome says.
    let mut outcomes = objects.remove_all(list).into_iter();
    // (An outcome missing, against the contract, keeps its row: a removal is never assumed.)
    let mut next = |o: ObjectRef| outcomes.next().unwrap_or(Err(ObjectsError::Unavailable { osd: o.osd }));
    apply_then_clear(ns, list, "object removal", &mut next, |s, done| s.clear_pending(done))
}

/// The shape of every journal here: apply each row's action, then clear the rows whose action
/// succeeded in one relaxed step (losing it in a crash only repeats idempotent actions). A
/// failure leaves its row for the next pass. Returns how many rows remain.
pub(crate) fn apply_then_clear<T: Copy + std::fmt::Debug>(
    ns: &Namespace,
    list: &[T],
    what: &str,
    mut act: impl FnMut(T) -> Result<(), ObjectsError>,
    clear: impl FnOnce(&mut Store, &[T]) -> Result<(), FsError>,
) -> usize {
    let mut done = Vec::with_capacity(list.len());
    for &row in list {
        match act(row) {
            Ok(()) => done.push(row),
            Err(e) => tracing::warn!(?row, %e, "{what} deferred"),
        }
    }
    let mut left = list.len() - done.len();
    if !done.is_empty() {
        if let Err(e) = ns.write_relaxed(|s| clear(s, &done)) {
            tracing::warn!(%e, count = done.len(), "{what}: rows done stay journaled");
            left = list.len();
        }
    }
    left
}

/// Drains the whole journal (start-up, or on demand). Returns how many objects remain.
pub fn resume(ns: &Namespace, objects: &dyn DataObjects) -> Result<usize, FsError> {
    let list = ns.read(|s| s.pending_removals())?;
    Ok(drain(ns, objects, &list))
}

/// What repair finds comparing the OSDs' objects with this server's records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Objects on the OSDs that this server allocated and nothing references.
    pub orphans: Vec<ObjectRef>,
    /// Objects this server's files name that their OSDs do not hold, with the file's inode.
    pub missing: Vec<MissingObject>,
}

/// Lists OSDs `0..osd_count` and compares them with what this server accounts for. The
/// records are read before and after the listing: an object is an orphan only if neither read
/// knows it (one created meanwhile is known by the later read; one the reaper removed after
/// the listing saw it, clearing its journal row, by the earlier), and missing only if both
/// name it as a file's (one whose file went meanwhile may be removed already). Object ids are
/// never reused, so an object named by both reads was named throughout the listing.
pub fn audit(ns: &Namespace, objects: &dyn DataObjects, osd_count: u32) -> Result<Audit, FsError> {
    let server = ns.server();
    let before = ns.read(|s| s.accounting())?;
    let mut lists = Vec::new();
    for osd in 0..osd_count {
        let ids = objects.list(osd).map_err(|e| {
            tracing::error!(osd, %e, "cannot list objects for repair");
            FsError::Io
        })?;
        lists.push(ids.into_iter().map(|object_id| ObjectRef { osd, object_id }).collect::<HashSet<_>>());
    }
    let after = ns.read(|s| s.accounting())?;
    let mut audit = Audit::default();
    for on_osd in &lists {
        audit.orphans.extend(on_osd.iter().filter(|o| object_server(o.object_id) == Some(server) && !before.knows(**o) && !after.knows(**o)));
    }
    audit.orphans.sort_unstable_by_key(|o| (o.osd, o.object_id));
    audit.missing = before
        .files()
        .filter(|(o, ino)| after.file_of(**o) == Some(**ino) && lists.get(o.osd as usize).is_some_and(|l| !l.contains(o)))
        .map(|(&object, &ino)| MissingObject { ino, object })
        .collect();
    audit.missing.sort_unstable_by_key(|m| (m.ino.0, m.object.osd, m.object.object_id));
    Ok(audit)
}
