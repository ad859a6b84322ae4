//! Truncates that survive an unreachable OSD. A truncate sets every object of a file to its
//! length for the new size (the commands in flight together), so an OSD failing part-way would leave
//! some objects cut and others not: neither the old file nor the new one. So the step that
//! records the truncate also journals, per object, the length it must have
//! (`pending_length`); a row leaves the journal once its OSD holds the length (and only if no
//! later truncate replaced it). What an OSD could not be told is retried in the background
//! with the other journals (`revocation::Retrier`) and at start-up, so the truncate completes
//! once the OSD is back. An OSD that answers with a refusal (the length is past what the
//! object may hold) has given its final word: that row leaves the journal too, and the
//! refusal is the truncate's answer. Removing a file drops its rows.

use std::cell::Cell;

use tessera_mds_proto::{FsError, ObjectRef};

use crate::journal;
use crate::namespace::Namespace;
use crate::objects::{DataObjects, ObjectsError};

/// Sets each object's length on its OSD, then clears the rows of those that answered.
/// Returns the first failure (EFBIG or ENOSPC for a refusal, EIO for an OSD that did not
/// answer, whose row stays).
pub fn set_lengths(ns: &Namespace, objects: &dyn DataObjects, list: &[(ObjectRef, u64)]) -> Result<(), FsError> {
    let first_failure = Cell::new(None);
    // The lengths are set together; then each row goes by its own outcome.
    let mut outcomes = objects.set_logical_lens(list).into_iter();
    journal::apply_then_clear(
        ns,
        list,
        "truncate (object length)",
        |(o, len)| {
            outcomes.next().unwrap_or(Err(ObjectsError::Unavailable { osd: o.osd })).or_else(|e| {
                let refusal = e.length_refusal();
                first_failure.set(first_failure.get().or(Some(refusal)));
                if refusal == FsError::Io {
                    return Err(e);
                }
                // The OSD answered: its refusal is final, and the row leaves the journal.
                tracing::warn!(?o, len, %e, "truncate of an object refused");
                Ok(())
            })
        },
        |s, done| s.clear_lengths(done),
    );
    first_failure.get().map_or(Ok(()), Err)
}

/// Retries every journaled truncate. Returns how many object lengths are still owed.
pub fn resume(ns: &Namespace, objects: &dyn DataObjects) -> Result<usize, FsError> {
    let list = ns.read(|s| s.pending_lengths())?;
    if list.is_empty() {
        return Ok(0);
    }
    let _ = set_lengths(ns, objects, &list);
    Ok(ns.read(|s| s.pending_lengths())?.len())
}
