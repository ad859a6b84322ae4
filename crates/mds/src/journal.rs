//! Keeping objects from leaking. Every object the MDS allocates enters the `pending_removal`
//! journal in the same transaction that allocates it, and leaves it only in the transaction
//! that makes a file reference it; unlink (and a rename that replaces a file) moves a file's
//! objects back into the journal in the transaction that drops the inode. So at every instant
//! each allocated object is referenced by a file, or journaled, or already gone from its OSD.
//!
//! [`drain`] removes journaled objects from the OSDs and clears each row only after its REMOVE
//! succeeded; a failure leaves the row for the next drain (at start-up, or `resume`). REMOVE of
//! an absent object succeeds, so repeating a drain is harmless.
//!
//! [`orphans`] is the repair check for what the journal cannot cover (objects made by hand, or a
//! store restored from an old backup): ids on the OSDs that this server allocated and that no
//! file and no journal row accounts for.

use std::sync::Mutex;

use tessera_mds_proto::{FsError, ObjectRef};

use crate::objects::DataObjects;
use crate::store::files::object_server;
use crate::store::Store;

/// Removes `list` from the OSDs, clearing each journal row after its REMOVE succeeded. Returns
/// how many are still journaled.
pub fn drain(store: &Mutex<Store>, objects: &dyn DataObjects, list: &[ObjectRef]) -> usize {
    let mut left = 0;
    for &o in list {
        match objects.remove(o) {
            Ok(()) => {
                // Poisoning means another thread panicked mid-request; the store itself is
                // transactional, so carrying on is safe.
                let mut store = store.lock().unwrap_or_else(|p| p.into_inner());
                if let Err(e) = store.clear_pending(o) {
                    tracing::warn!(?o, %e, "removed object stays journaled");
                    left += 1;
                }
            }
            Err(e) => {
                tracing::warn!(?o, %e, "object removal deferred");
                left += 1;
            }
        }
    }
    left
}

/// Drains the whole journal (start-up, or on demand). Returns how many objects remain.
pub fn resume(store: &Mutex<Store>, objects: &dyn DataObjects) -> Result<usize, FsError> {
    let list = store.lock().unwrap_or_else(|p| p.into_inner()).pending_removals()?;
    Ok(drain(store, objects, &list))
}

/// Objects on OSDs `0..osd_count` that this server allocated and nothing references.
pub fn orphans(store: &Mutex<Store>, objects: &dyn DataObjects, osd_count: u32) -> Result<Vec<ObjectRef>, FsError> {
    let server = store.lock().unwrap_or_else(|p| p.into_inner()).server();
    let mut found = Vec::new();
    for osd in 0..osd_count {
        let ids = objects.list(osd).map_err(|e| {
            tracing::error!(osd, %e, "cannot list objects for repair");
            FsError::Io
        })?;
        for object_id in ids {
            if object_server(object_id) != Some(server) {
                continue;
            }
            let o = ObjectRef { osd, object_id };
            if !store.lock().unwrap_or_else(|p| p.into_inner()).knows_object(o)? {
                found.push(o);
            }
        }
    }
    Ok(found)
}
