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
//! [`orphans`] is the repair check for what the journal cannot cover (objects made by hand, or a
//! store restored from an old backup): ids on the OSDs that this server allocated and that no
//! file and no journal row accounts for.

use tessera_mds_proto::{FsError, ObjectRef};

use crate::namespace::Namespace;
use crate::objects::{DataObjects, ObjectsError};
use crate::store::Store;
use crate::store::files::object_server;

/// Removes `list` from the OSDs, then clears the rows of those removed in one step (a row left
/// by a crash before that step only costs a harmless second REMOVE). Returns how many are
/// still journaled.
pub fn drain(ns: &Namespace, objects: &dyn DataObjects, list: &[ObjectRef]) -> usize {
    apply_then_clear(ns, list, "object removal", |o| objects.remove(o), |s, done| s.clear_pending(done))
}

/// The shape of every journal here: apply each row's action, then clear the rows whose action
/// succeeded in one relaxed step (losing it in a crash only repeats idempotent actions). A
/// failure leaves its row for the next pass. Returns how many rows remain.
pub(crate) fn apply_then_clear<T: Copy + std::fmt::Debug>(
    ns: &Namespace,
    list: &[T],
    what: &str,
    act: impl Fn(T) -> Result<(), ObjectsError>,
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

/// Objects on OSDs `0..osd_count` that this server allocated and nothing references.
pub fn orphans(ns: &Namespace, objects: &dyn DataObjects, osd_count: u32) -> Result<Vec<ObjectRef>, FsError> {
    let server = ns.server();
    let mut found = Vec::new();
    let mut lists = Vec::new();
    for osd in 0..osd_count {
        let ids = objects.list(osd).map_err(|e| {
            tracing::error!(osd, %e, "cannot list objects for repair");
            FsError::Io
        })?;
        lists.push((osd, ids));
    }
    // Read after listing: an object created meanwhile is already accounted for.
    let accounting = ns.read(|s| s.accounting())?;
    for (osd, ids) in lists {
        let mine = ids.into_iter().filter(|id| object_server(*id) == Some(server)).map(|object_id| ObjectRef { osd, object_id });
        found.extend(mine.filter(|o| !accounting.knows(*o)));
    }
    Ok(found)
}
