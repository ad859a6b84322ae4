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
use crate::objects::DataObjects;
use crate::store::files::object_server;

/// Removes `list` from the OSDs, then clears the rows of those removed in one step (a row left
/// by a crash before that step only costs a harmless second REMOVE). Returns how many are
/// still journaled.
pub fn drain(ns: &Namespace, objects: &dyn DataObjects, list: &[ObjectRef]) -> usize {
    let mut removed = Vec::with_capacity(list.len());
    for &o in list {
        match objects.remove(o) {
            Ok(()) => removed.push(o),
            Err(e) => tracing::warn!(?o, %e, "object removal deferred"),
        }
    }
    let mut left = list.len() - removed.len();
    if !removed.is_empty() {
        // Relaxed: losing this step in a crash only repeats REMOVEs that find nothing.
        if let Err(e) = ns.write_relaxed(|s| s.clear_pending(&removed)) {
            tracing::warn!(%e, count = removed.len(), "removed objects stay journaled");
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
