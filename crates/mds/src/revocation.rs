//! Revocation that survives an unreachable OSD. A `chmod` under security gives the file a
//! fresh policy tag: the step that records it also journals, per object, the tag its OSD must
//! hold (`pending_retag`). Then each OSD is told; a row leaves the journal only once its OSD
//! holds the tag (and only if no later revocation replaced it). What an OSD could not be told
//! is retried in the background every [`RETRY_EVERY`] and at start-up, so a revocation always
//! completes once the OSD is back, without anyone repeating the `chmod`. Meanwhile the
//! capabilities the server hands out carry the new tag: that OSD refuses them until it holds
//! it, so the file's data there is unreachable rather than reachable under the old rights.
//! Removing a file drops its rows (its objects are going away).

use std::sync::Arc;
use std::time::Duration;

use tessera_mds_proto::{FsError, ObjectRef};

use crate::health::OsdHealth;
use crate::journal;
use crate::namespace::Namespace;
use crate::objects::DataObjects;
use crate::periodic::Periodic;

/// How often journaled revocations are retried while any remain.
pub const RETRY_EVERY: Duration = Duration::from_secs(2);

/// Sets each object's tag on its OSD, then clears the rows of those set (unless a later
/// revocation replaced them). A failure, whatever its cause, keeps the row: a row whose object
/// was removed meanwhile already left the journal in the removing step, so nothing stays owed
/// forever. Returns how many are still owed.
pub fn retag(ns: &Namespace, objects: &dyn DataObjects, list: &[(ObjectRef, u32)]) -> usize {
    journal::apply_then_clear(ns, list, "revocation (policy tag)", |(o, tag)| objects.set_policy_tag(o, tag), |s, done| s.clear_retags(done))
}

/// Retries every journaled revocation. Returns how many remain.
pub fn resume(ns: &Namespace, objects: &dyn DataObjects) -> Result<usize, FsError> {
    let list = ns.read(|s| s.pending_retags())?;
    if list.is_empty() {
        return Ok(0);
    }
    Ok(retag(ns, objects, &list))
}

/// The background retry of every journal: a thread that checks OSDs not yet checked against
/// the store (`fence.rs`), runs [`resume`], then drains the
/// removal journal ([`journal::resume`]) and the truncate journal
/// ([`crate::truncation::resume`]), once at start and then every [`RETRY_EVERY`], so a revocation or truncate
/// completes and a removed file's space comes back once its OSD is reachable again, without a
/// restart of this server; stopped and joined on drop.
pub struct Retrier {
    _thread: Periodic,
}

impl Retrier {
    pub fn start(ns: Arc<Namespace>, objects: Arc<dyn DataObjects>, health: Arc<OsdHealth>) -> std::io::Result<Retrier> {
        let thread = Periodic::start("mds-journals", RETRY_EVERY, move |_| {
            // An OSD that was down at start is checked against the store once it answers.
            crate::fence::fence_unchecked(&ns, objects.as_ref(), &health);
            match resume(&ns, objects.as_ref()) {
                Ok(0) => {}
                Ok(left) => tracing::debug!(left, "revocations still owed"),
                Err(e) => tracing::warn!(%e, "revocation journal not read"),
            }
            match journal::resume(&ns, objects.as_ref()) {
                Ok(0) => {}
                Ok(left) => tracing::debug!(left, "objects still await removal"),
                Err(e) => tracing::warn!(%e, "removal journal not read"),
            }
            match crate::truncation::resume(&ns, objects.as_ref()) {
                Ok(0) => {}
                Ok(left) => tracing::debug!(left, "truncates still owed"),
                Err(e) => tracing::warn!(%e, "truncate journal not read"),
            }
        })?;
        Ok(Retrier { _thread: thread })
    }
}
