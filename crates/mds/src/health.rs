//! Which OSDs this server can reach, so that new files are not placed on one that is down
//! (as a Lustre MDS stops allocating on an OST it lost): a file created there could be
//! neither written nor read until the OSD returns, although the other OSDs had room.
//!
//! - Every object operation this server makes is watched ([`Watched`]): an OSD that answered,
//!   even with a refusal, is up; one that could not be reached (refused connection, no answer
//!   within the session's liveness interval) is down.
//! - The clients' I/O goes straight to the OSDs, so this server may not hear of a failure by
//!   itself: a thread ([`Prober`]) asks every OSD it has not heard from lately for its usage
//!   (one GET ATTRIBUTES of the root), which also notices a down OSD coming back.
//! - Creates read the set ([`OsdHealth::down`]); the placement rule is in
//!   `store/files.rs` ([`crate::store::files::place`]).
//! - An OSD that went down by not answering in time (stopped, or cut off) rather than by
//!   refusing the connection is *silent*: every operation on it would wait out the session's
//!   liveness timeout (20 s by default) and hold its caller, a client's `stat` say, that long.
//!   Operations on a silent OSD fail at once ([`ObjectsError::Unavailable`]: a file's size is
//!   unknown, a removal stays journaled) and only the prober keeps trying it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_initiator::osd_client::OsdError;
use tessera_mds_proto::{ObjectRef, OsdUsage};

use crate::objects::{DataObjects, ObjectData, ObjectsError};
use crate::periodic::Periodic;

/// How often OSDs not heard from meanwhile are probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

struct OsdState {
    down: AtomicBool,
    /// Down because it did not answer in time (see the module comment).
    silent: AtomicBool,
    /// When an operation on the OSD last ended, in ms since the health record began.
    heard_ms: AtomicU64,
}

/// Up or down, per OSD of the cluster map, as last heard.
pub struct OsdHealth {
    osds: Vec<OsdState>,
    down_count: AtomicUsize,
    began: Instant,
}

impl OsdHealth {
    /// Every OSD starts up: a create before the first probe places as before.
    pub fn new(osd_count: u32) -> OsdHealth {
        let osds = (0..osd_count).map(|_| OsdState { down: AtomicBool::new(false), silent: AtomicBool::new(false), heard_ms: AtomicU64::new(0) }).collect();
        OsdHealth { osds, down_count: AtomicUsize::new(0), began: Instant::now() }
    }

    /// Records that an operation on `osd` reached it (`true`) or could not (`false`).
    pub fn heard(&self, osd: u32, reached: bool) {
        self.heard_as(osd, if reached { Reach::Answered } else { Reach::Refused });
    }

    fn heard_as(&self, osd: u32, reach: Reach) {
        let Some(state) = self.osds.get(osd as usize) else { return };
        state.heard_ms.store(self.now_ms(), Ordering::Relaxed);
        state.silent.store(reach == Reach::Silent, Ordering::Release);
        let reached = reach == Reach::Answered;
        let was_down = state.down.swap(!reached, Ordering::AcqRel);
        match (was_down, reached) {
            (false, false) => {
                self.down_count.fetch_add(1, Ordering::AcqRel);
                tracing::warn!(osd, "OSD unreachable: new files are placed on the other OSDs until it answers again");
            }
            (true, true) => {
                self.down_count.fetch_sub(1, Ordering::AcqRel);
                tracing::info!(osd, "OSD answers again: new files may be placed on it");
            }
            _ => {}
        }
    }

    /// Down because it did not answer in time: operations on it fail at once.
    pub fn is_silent(&self, osd: u32) -> bool {
        self.osds.get(osd as usize).is_some_and(|s| s.silent.load(Ordering::Acquire))
    }

    pub fn is_down(&self, osd: u32) -> bool {
        self.osds.get(osd as usize).is_some_and(|s| s.down.load(Ordering::Acquire))
    }

    /// The OSDs last found unreachable, in index order (empty, without allocating, when none).
    pub fn down(&self) -> Vec<u32> {
        if self.down_count.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        (0..self.osds.len() as u32).filter(|&osd| self.is_down(osd)).collect()
    }

    /// Milliseconds since the record began, plus one: 0 stays "never heard from".
    fn now_ms(&self) -> u64 {
        self.began.elapsed().as_millis() as u64 + 1
    }

    /// OSDs not heard from within `quiet`, silent ones last: a probe of one of those may
    /// wait out its timeout, and the others should not wait behind it.
    fn unheard_for(&self, quiet: Duration) -> Vec<u32> {
        let now = self.now_ms();
        let quiet = quiet.as_millis() as u64;
        let mut osds: Vec<u32> = (0..self.osds.len() as u32)
            .filter(|&osd| {
                let heard = self.osds[osd as usize].heard_ms.load(Ordering::Relaxed);
                heard == 0 || now.saturating_sub(heard) >= quiet
            })
            .collect();
        osds.sort_by_key(|&osd| self.is_silent(osd));
        osds
    }
}

/// What an operation's outcome says of its OSD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// It answered, even if only to refuse the command.
    Answered,
    /// Not reached at once: connection refused, a login refused, a session closed under us.
    Refused,
    /// Not reached in time: it may be stopped or cut off, and the next try would wait as long.
    Silent,
}

/// `None`: the outcome says nothing of the OSD (an index outside the cluster map, a failure
/// before anything was sent).
fn reached<T>(outcome: &Result<T, ObjectsError>) -> Option<Reach> {
    match outcome {
        Ok(_) => Some(Reach::Answered),
        Err(ObjectsError::UnknownOsd(_)) => None,
        Err(ObjectsError::Unavailable { .. }) => Some(Reach::Refused),
        Err(ObjectsError::Osd(e)) => match &**e {
            OsdError::Transport(t) if t.timed_out() => Some(Reach::Silent),
            // No usable session (a login it refused counts as down too).
            OsdError::Transport(_) => Some(Reach::Refused),
            // Refused, or answered with something it should not have: either way it answered.
            OsdError::Sense { .. } | OsdError::Status { .. } | OsdError::Reply { .. } | OsdError::Missing { .. } | OsdError::Integrity { .. } => Some(Reach::Answered),
            // Failed here before anything was sent.
            OsdError::Build(_) | OsdError::Sign(_) | OsdError::Keys(_) => None,
        },
    }
}

/// [`DataObjects`] that records every operation's outcome in an [`OsdHealth`].
pub struct Watched {
    inner: Arc<dyn DataObjects>,
    health: Arc<OsdHealth>,
}

impl Watched {
    pub fn new(inner: Arc<dyn DataObjects>, health: Arc<OsdHealth>) -> Watched {
        Watched { inner, health }
    }

    fn note<T>(&self, osd: u32, outcome: Result<T, ObjectsError>) -> Result<T, ObjectsError> {
        if let Some(reach) = reached(&outcome) {
            self.health.heard_as(osd, reach);
        }
        outcome
    }

    /// Runs `op` on `osd` and records its outcome; fails at once, recording nothing, while
    /// the OSD is silent (only [`Watched::probe`] tries it then).
    fn on<T>(&self, osd: u32, op: impl FnOnce(&dyn DataObjects) -> Result<T, ObjectsError>) -> Result<T, ObjectsError> {
        if self.health.is_silent(osd) {
            return Err(ObjectsError::Unavailable { osd });
        }
        self.note(osd, op(self.inner.as_ref()))
    }

    /// Asks `osd` for its usage whatever its state, on the probe's path, and records the
    /// outcome.
    pub fn probe(&self, osd: u32) -> Result<OsdUsage, ObjectsError> {
        self.note(osd, self.inner.probe_usage(osd))
    }
}

impl DataObjects for Watched {
    fn create(&self, objects: &[ObjectRef]) -> Result<(), ObjectsError> {
        // Which of several OSDs failed is not known: only a list on one OSD says anything.
        match objects.first() {
            Some(first) if objects.iter().all(|o| o.osd == first.osd) => self.on(first.osd, |o| o.create(objects)),
            _ => match objects.iter().find(|o| self.health.is_silent(o.osd)) {
                Some(silent) => Err(ObjectsError::Unavailable { osd: silent.osd }),
                None => self.inner.create(objects),
            },
        }
    }

    fn create_range(&self, osd: u32, first: u64, count: u16, policy_tag: u32) -> Result<(), ObjectsError> {
        self.on(osd, |o| o.create_range(osd, first, count, policy_tag))
    }

    fn set_policy_tag(&self, object: ObjectRef, tag: u32) -> Result<(), ObjectsError> {
        self.on(object.osd, |o| o.set_policy_tag(object, tag))
    }

    fn usage(&self, osd: u32) -> Result<OsdUsage, ObjectsError> {
        self.on(osd, |o| o.usage(osd))
    }

    fn remove(&self, object: ObjectRef) -> Result<(), ObjectsError> {
        self.on(object.osd, |o| o.remove(object))
    }

    fn logical_len(&self, object: ObjectRef) -> Result<u64, ObjectsError> {
        self.on(object.osd, |o| o.logical_len(object))
    }

    fn data_state(&self, object: ObjectRef) -> Result<ObjectData, ObjectsError> {
        self.on(object.osd, |o| o.data_state(object))
    }

    fn set_logical_len(&self, object: ObjectRef, len: u64) -> Result<(), ObjectsError> {
        self.on(object.osd, |o| o.set_logical_len(object, len))
    }

    fn list(&self, osd: u32) -> Result<Vec<u64>, ObjectsError> {
        self.on(osd, |o| o.list(osd))
    }
}

/// The thread that probes every OSD not heard from within [`PROBE_EVERY`]; stopped and joined
/// on drop.
pub struct Prober {
    _thread: Periodic,
}

impl Prober {
    /// `objects` must report to `health`.
    pub fn start(objects: Arc<Watched>, health: Arc<OsdHealth>) -> std::io::Result<Prober> {
        let thread = Periodic::start("mds-osd-health", PROBE_EVERY, move |stop| {
            for osd in health.unheard_for(PROBE_EVERY) {
                // The outcome lands in `health` through `Watched`; a usage error is only news.
                let _ = objects.probe(osd);
                if stop.requested() {
                    return;
                }
            }
        })?;
        Ok(Prober { _thread: thread })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_are_counted_once_and_listed_in_order() {
        let h = OsdHealth::new(4);
        assert!(h.down().is_empty());
        h.heard(2, false);
        h.heard(2, false);
        h.heard(0, false);
        assert_eq!(h.down(), vec![0, 2]);
        h.heard(2, true);
        h.heard(2, true);
        assert_eq!(h.down(), vec![0]);
        h.heard(0, true);
        assert!(h.down().is_empty());
        // An index outside the map is ignored.
        h.heard(9, false);
        assert!(h.down().is_empty() && !h.is_down(9));
    }

    #[test]
    fn a_silent_osd_is_probed_last_until_it_answers() {
        let h = OsdHealth::new(3);
        h.heard_as(0, Reach::Silent);
        assert!(h.is_silent(0) && h.is_down(0));
        assert_eq!(h.unheard_for(Duration::ZERO), vec![1, 2, 0]);
        // Refusing a connection is quick: down, but no longer worth failing at once.
        h.heard_as(0, Reach::Refused);
        assert!(!h.is_silent(0) && h.is_down(0));
        h.heard_as(0, Reach::Silent);
        h.heard_as(0, Reach::Answered);
        assert!(!h.is_silent(0) && !h.is_down(0));
        assert_eq!(h.unheard_for(Duration::ZERO), vec![0, 1, 2]);
    }

    #[test]
    fn unheard_osds_are_the_ones_to_probe() {
        let h = OsdHealth::new(3);
        assert_eq!(h.unheard_for(Duration::from_secs(60)), vec![0, 1, 2], "never heard from");
        h.heard(1, true);
        assert_eq!(h.unheard_for(Duration::from_secs(60)), vec![0, 2]);
        assert_eq!(h.unheard_for(Duration::ZERO), vec![0, 1, 2]);
    }
}
