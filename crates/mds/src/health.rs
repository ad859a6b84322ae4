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
//! - An OSD that answers but is full ([`OsdUsage::is_full`]: under 1% of its space free, its file
//!   system's free space counted: a disk filled by other files is full too) is avoided by new
//!   files as well, as Lustre's allocator passes over a full OST: they would fail with ENOSPC
//!   there while other OSDs have room. Its usage comes with each probe, and every OSD's usage
//!   is read at least every [`USAGE_EVERY`], however busy it is.
//! - Creates read the set ([`OsdHealth::avoid`]); the placement rule is in
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

use crate::objects::{DataObjects, ListedObject, ObjectData, ObjectsError};
use crate::periodic::Periodic;

/// How often OSDs not heard from meanwhile are probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How old an OSD's last usage may grow before it is probed although it is busy: how long a
/// newly full OSD may still be given new files.
pub const USAGE_EVERY: Duration = Duration::from_secs(5);

struct OsdState {
    down: AtomicBool,
    /// Down because it did not answer in time (see the module comment).
    silent: AtomicBool,
    /// When an operation on the OSD last ended, in ms since the health record began.
    heard_ms: AtomicU64,
    full: AtomicBool,
    /// When its usage was last read, as `heard_ms`.
    usage_ms: AtomicU64,
    /// Its objects have not yet been checked against this server's store (`fence.rs`): new
    /// files avoid it and no objects are precreated on it until they have.
    unchecked: AtomicBool,
}

/// Up or down, per OSD of the cluster map, as last heard.
pub struct OsdHealth {
    osds: Vec<OsdState>,
    down_count: AtomicUsize,
    unchecked_count: AtomicUsize,
    /// Held by the one check of an OSD against the store under way (`fence::check`).
    checking: std::sync::Mutex<()>,
    began: Instant,
}

impl OsdHealth {
    /// Every OSD starts up: a create before the first probe places as before.
    pub fn new(osd_count: u32) -> OsdHealth {
        let osds = (0..osd_count)
            .map(|_| OsdState {
                down: AtomicBool::new(false),
                silent: AtomicBool::new(false),
                heard_ms: AtomicU64::new(0),
                full: AtomicBool::new(false),
                usage_ms: AtomicU64::new(0),
                unchecked: AtomicBool::new(false),
            })
            .collect();
        OsdHealth { osds, down_count: AtomicUsize::new(0), unchecked_count: AtomicUsize::new(0), checking: std::sync::Mutex::new(()), began: Instant::now() }
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

    /// Records an OSD's usage: full or not (see the module comment).
    pub fn measured(&self, osd: u32, usage: &OsdUsage) {
        let Some(state) = self.osds.get(osd as usize) else { return };
        state.usage_ms.store(self.now_ms(), Ordering::Relaxed);
        let full = usage.is_full();
        if state.full.swap(full, Ordering::AcqRel) != full {
            let (avail, size) = (usage.avail_bytes(), usage.space_bytes());
            if full {
                tracing::warn!(osd, avail, size, "OSD full: new files are placed on the other OSDs until it has room");
            } else {
                tracing::info!(osd, avail, size, "OSD has room again: new files may be placed on it");
            }
        }
    }

    pub fn is_full(&self, osd: u32) -> bool {
        self.osds.get(osd as usize).is_some_and(|s| s.full.load(Ordering::Acquire))
    }

    /// The OSDs new files avoid: down, full, or not yet checked, in index order.
    pub fn avoid(&self) -> Vec<u32> {
        (0..self.osds.len() as u32).filter(|&osd| self.is_down(osd) || self.is_full(osd) || self.is_unchecked(osd)).collect()
    }

    /// Marks every OSD as not yet checked against the store (at a server's start).
    pub fn uncheck_all(&self) {
        for s in &self.osds {
            if !s.unchecked.swap(true, Ordering::AcqRel) {
                self.unchecked_count.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// `osd`'s objects were checked against the store.
    pub fn checked(&self, osd: u32) {
        if let Some(s) = self.osds.get(osd as usize) {
            if s.unchecked.swap(false, Ordering::AcqRel) {
                self.unchecked_count.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Taken for a check of an OSD against the store, so that checks of one server run one at
    /// a time (`fence::check` says why).
    pub fn one_check_at_a_time(&self) -> std::sync::MutexGuard<'_, ()> {
        self.checking.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_unchecked(&self, osd: u32) -> bool {
        self.osds.get(osd as usize).is_some_and(|s| s.unchecked.load(Ordering::Acquire))
    }

    /// The OSDs not yet checked, in index order (empty, without allocating, when none: every
    /// create asks).
    pub fn unchecked(&self) -> Vec<u32> {
        if self.unchecked_count.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        (0..self.osds.len() as u32).filter(|&osd| self.is_unchecked(osd)).collect()
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

    /// OSDs to probe: not heard from within `quiet`, or with a usage older than `usage_every`.
    /// Silent ones last: a probe of one of those may wait out its timeout, and the others
    /// should not wait behind it.
    fn to_probe(&self, quiet: Duration, usage_every: Duration) -> Vec<u32> {
        let now = self.now_ms();
        let older = |at: &AtomicU64, than: Duration| {
            let at = at.load(Ordering::Relaxed);
            at == 0 || now.saturating_sub(at) >= than.as_millis() as u64
        };
        let mut osds: Vec<u32> = (0..self.osds.len() as u32)
            .filter(|&osd| {
                let state = &self.osds[osd as usize];
                older(&state.heard_ms, quiet) || older(&state.usage_ms, usage_every)
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

    /// `op` on the items (objects, or objects with a value) whose OSDs are not silent, all at
    /// once, each outcome recorded; the silent OSDs' items fail at once, as in
    /// [`Watched::on`]. Outcomes in `items`' order.
    fn together<I: Copy, T>(
        &self,
        items: &[I],
        object: impl Fn(&I) -> ObjectRef,
        op: impl FnOnce(&[I]) -> Vec<Result<T, ObjectsError>>,
    ) -> Vec<Result<T, ObjectsError>> {
        let silent: Vec<bool> = items.iter().map(|i| self.health.is_silent(object(i).osd)).collect();
        let asked: Vec<I> = items.iter().zip(&silent).filter(|(_, s)| !**s).map(|(i, _)| *i).collect();
        let mut answers = op(&asked).into_iter();
        items
            .iter()
            .zip(silent)
            .map(|(i, silent)| {
                let osd = object(i).osd;
                match if silent { None } else { answers.next() } {
                    Some(answer) => self.note(osd, answer),
                    None => Err(ObjectsError::Unavailable { osd }),
                }
            })
            .collect()
    }

    /// Asks `osd` for its usage whatever its state, on the probe's path, and records the
    /// outcome.
    pub fn probe(&self, osd: u32) -> Result<OsdUsage, ObjectsError> {
        self.measure(osd, self.note(osd, self.inner.probe_usage(osd)))
    }

    fn measure(&self, osd: u32, usage: Result<OsdUsage, ObjectsError>) -> Result<OsdUsage, ObjectsError> {
        if let Ok(u) = &usage {
            self.health.measured(osd, u);
        }
        usage
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

    /// Refused while the OSD is unchecked: ids this store would precreate there may be ones
    /// the OSD already holds for files this store does not know (`fence.rs`).
    fn create_range(&self, osd: u32, first: u64, count: u16, policy_tag: u32) -> Result<(), ObjectsError> {
        if self.health.is_unchecked(osd) {
            return Err(ObjectsError::Unavailable { osd });
        }
        self.on(osd, |o| o.create_range(osd, first, count, policy_tag))
    }

    fn set_policy_tag(&self, object: ObjectRef, tag: u32) -> Result<(), ObjectsError> {
        self.on(object.osd, |o| o.set_policy_tag(object, tag))
    }

    fn usage(&self, osd: u32) -> Result<OsdUsage, ObjectsError> {
        self.measure(osd, self.on(osd, |o| o.usage(osd)))
    }

    /// Through the probe's own session, whose short liveness bounds the wait on an OSD that
    /// has just stopped answering (`df` asks here: the operations' session would hold it for
    /// twice the cluster's liveness interval); at once while the OSD is known to be silent.
    fn probe_usage(&self, osd: u32) -> Result<OsdUsage, ObjectsError> {
        self.measure(osd, self.on(osd, |o| o.probe_usage(osd)))
    }

    fn remove(&self, object: ObjectRef) -> Result<(), ObjectsError> {
        self.on(object.osd, |o| o.remove(object))
    }

    /// Silent OSDs' objects fail at once; the others' are removed together.
    fn remove_all(&self, objects: &[ObjectRef]) -> Vec<Result<(), ObjectsError>> {
        self.together(objects, |o| *o, |asked| self.inner.remove_all(asked))
    }

    fn logical_len(&self, object: ObjectRef) -> Result<u64, ObjectsError> {
        self.on(object.osd, |o| o.logical_len(object))
    }

    fn data_state(&self, object: ObjectRef) -> Result<ObjectData, ObjectsError> {
        self.on(object.osd, |o| o.data_state(object))
    }

    /// Silent OSDs' objects fail at once; the others' are asked together.
    fn data_states(&self, objects: &[ObjectRef]) -> Vec<Result<ObjectData, ObjectsError>> {
        self.together(objects, |o| *o, |asked| self.inner.data_states(asked))
    }

    fn set_logical_len(&self, object: ObjectRef, len: u64) -> Result<(), ObjectsError> {
        self.on(object.osd, |o| o.set_logical_len(object, len))
    }

    /// Silent OSDs' objects fail at once; the others' are set together.
    fn set_logical_lens(&self, lengths: &[(ObjectRef, u64)]) -> Vec<Result<(), ObjectsError>> {
        self.together(lengths, |(o, _)| *o, |asked| self.inner.set_logical_lens(asked))
    }

    fn list(&self, osd: u32) -> Result<Vec<u64>, ObjectsError> {
        self.on(osd, |o| o.list(osd))
    }

    fn lengths_in(&self, osd: u32, ids: std::ops::Range<u64>) -> Result<Vec<ListedObject>, ObjectsError> {
        self.on(osd, |o| o.lengths_in(osd, ids))
    }

    fn data_states_in(&self, osd: u32, ids: std::ops::Range<u64>) -> Result<Vec<(u64, Option<ObjectData>)>, ObjectsError> {
        self.on(osd, |o| o.data_states_in(osd, ids))
    }
}

/// The thread that probes every OSD not heard from within [`PROBE_EVERY`], or whose usage is
/// older than [`USAGE_EVERY`]; stopped and joined on drop.
pub struct Prober {
    _thread: Periodic,
}

impl Prober {
    /// `objects` must report to `health`.
    pub fn start(objects: Arc<Watched>, health: Arc<OsdHealth>) -> std::io::Result<Prober> {
        let thread = Periodic::start("mds-osd-health", PROBE_EVERY, move |stop| {
            for osd in health.to_probe(PROBE_EVERY, USAGE_EVERY) {
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
        assert_eq!(h.to_probe(Duration::ZERO, Duration::ZERO), vec![1, 2, 0]);
        // Refusing a connection is quick: down, but no longer worth failing at once.
        h.heard_as(0, Reach::Refused);
        assert!(!h.is_silent(0) && h.is_down(0));
        h.heard_as(0, Reach::Silent);
        h.heard_as(0, Reach::Answered);
        assert!(!h.is_silent(0) && !h.is_down(0));
        assert_eq!(h.to_probe(Duration::ZERO, Duration::ZERO), vec![0, 1, 2]);
    }

    #[test]
    fn unheard_osds_and_stale_usage_are_the_ones_to_probe() {
        let h = OsdHealth::new(3);
        let (minute, hour) = (Duration::from_secs(60), Duration::from_secs(3600));
        assert_eq!(h.to_probe(minute, hour), vec![0, 1, 2], "never heard from");
        h.heard(1, true);
        assert_eq!(h.to_probe(minute, hour), vec![0, 1, 2], "heard from, but its usage never read");
        h.measured(1, &usage(100, 0));
        assert_eq!(h.to_probe(minute, hour), vec![0, 2]);
        assert_eq!(h.to_probe(minute, Duration::ZERO), vec![0, 1, 2], "a busy OSD's usage goes stale too");
        assert_eq!(h.to_probe(Duration::ZERO, hour), vec![0, 1, 2]);
    }

    fn usage(total: u64, used: u64) -> OsdUsage {
        OsdUsage { total_bytes: total, used_bytes: used, fs: None }
    }

    #[test]
    fn a_full_osd_is_avoided_until_it_has_room_and_a_full_disk_counts() {
        let h = OsdHealth::new(3);
        h.measured(1, &usage(1000, 995));
        assert_eq!(h.avoid(), vec![1], "under 1% free");
        assert!(h.down().is_empty(), "full is not down");
        h.heard(2, false);
        assert_eq!(h.avoid(), vec![1, 2]);
        h.measured(1, &usage(1000, 900));
        assert_eq!(h.avoid(), vec![2]);
        // Its capacity barely used, but the file system under it is full.
        let disk = tessera_mds_proto::FsSpace { id: 1, size_bytes: 1000, avail_bytes: 3 };
        h.measured(0, &OsdUsage { fs: Some(disk), ..usage(1000, 10) });
        assert_eq!(h.avoid(), vec![0, 2]);
        h.measured(9, &usage(1000, 1000));
        assert_eq!(h.avoid(), vec![0, 2], "an index outside the map is ignored");
    }
}
