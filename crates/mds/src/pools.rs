//! [`Pools`]: per-OSD pools of precreated objects, kept filled ahead of need so a file create
//! is one local transaction. The ranges and their states live in the store
//! (`store/precreate.rs`, which explains why nothing leaks); this file decides when to make
//! more and sends the CREATEs.
//!
//! - A background thread tops up every OSD whose pool fell below `low_water`, one batch
//!   (one CREATE of `batch` objects) at a time. It fills every pool once at start.
//! - A create that finds a pool empty refills it itself ([`Pools::refill`]) and tries again;
//!   one refill per OSD runs at a time, and a refill finding the pool already filled by
//!   another does nothing.
//! - A range left not ready (an OSD that could not be reached, or a crash) is retried with the
//!   same ids before a new range is reserved, so an OSD that is down does not grow the store.
//!   If the OSD refuses the CREATE (e.g. because an earlier attempt did create the objects),
//!   the range is abandoned to the removal journal and drained. A new range that is refused
//!   is only set aside: its ids may belong to objects this store did not make.
//! - After a failed refill, creates needing that OSD fail fast (EIO) for `retry_after`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tessera_mds_proto::FsError;

use crate::journal;
use crate::namespace::Namespace;
use crate::objects::DataObjects;
use crate::store::files::object_id;
use crate::store::precreate::Range;

/// Sizes of the per-OSD pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrecreateConfig {
    /// Objects made by one CREATE.
    pub batch: u16,
    /// A pool below this many ready objects is topped up in the background.
    pub low_water: u32,
    /// How long creates needing an OSD whose refill just failed get EIO without another attempt.
    pub retry_after: Duration,
}

impl Default for PrecreateConfig {
    fn default() -> Self {
        PrecreateConfig { batch: 512, low_water: 512, retry_after: Duration::from_secs(1) }
    }
}

struct Osd {
    /// Ready objects, as last known (the store is the truth; this only decides refills).
    ready: AtomicU64,
    /// Held while refilling; the time of the last failed refill.
    refill: Mutex<Option<Instant>>,
}

enum Batch {
    Ready,
    /// The OSD refused the range; its ids went to the removal journal.
    Abandoned,
}

struct Wanted {
    osds: Vec<bool>,
    stop: bool,
}

struct Shared {
    ns: Arc<Namespace>,
    objects: Arc<dyn DataObjects>,
    config: PrecreateConfig,
    osds: Vec<Osd>,
    wanted: Mutex<Wanted>,
    wake: Condvar,
}

pub struct Pools {
    shared: Arc<Shared>,
    filler: Option<JoinHandle<()>>,
}

impl Pools {
    /// Starts the pools of `osd_count` OSDs and the background filler, which fills each once.
    pub fn start(ns: Arc<Namespace>, objects: Arc<dyn DataObjects>, osd_count: u32, config: PrecreateConfig) -> Result<Pools, FsError> {
        let counts = ns.read(|s| s.precreated_counts())?;
        let osds = (0..osd_count)
            .map(|i| Osd {
                ready: AtomicU64::new(counts.iter().find(|(o, _)| *o == i).map_or(0, |c| c.1)),
                refill: Mutex::new(None),
            })
            .collect();
        let wanted = Mutex::new(Wanted { osds: vec![true; osd_count as usize], stop: false });
        let shared = Arc::new(Shared { ns, objects, config, osds, wanted, wake: Condvar::new() });
        let filler_shared = shared.clone();
        let filler = std::thread::Builder::new()
            .name("mds-precreate".into())
            .spawn(move || filler_shared.fill_loop())
            .map_err(|e| {
                tracing::error!(%e, "cannot start the precreate thread");
                FsError::Io
            })?;
        Ok(Pools { shared, filler: Some(filler) })
    }

    /// Makes objects ready on `osd` unless some already are. Errors when the OSD could not
    /// make them (now or within the last `retry_after`).
    pub fn refill(&self, osd: u32) -> Result<(), FsError> {
        self.shared.refill(osd, 1)
    }

    /// Notes that a create took one object from each of `osds`; wakes the filler for a pool
    /// that fell below the low-water mark.
    pub fn took(&self, osds: impl IntoIterator<Item = u32>) {
        for osd in osds {
            let Some(o) = self.shared.osds.get(osd as usize) else { continue };
            let before = o.ready.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| Some(n.saturating_sub(1))).unwrap_or(0);
            if before.saturating_sub(1) < self.shared.config.low_water as u64 {
                self.shared.want(osd);
            }
        }
    }

    /// Ready objects per OSD, as last known.
    pub fn levels(&self) -> Vec<u64> {
        self.shared.osds.iter().map(|o| o.ready.load(Ordering::SeqCst)).collect()
    }
}

impl Drop for Pools {
    /// Stops the filler after the batch it is making, so nothing writes the store afterwards.
    fn drop(&mut self) {
        self.shared.wanted.lock().unwrap_or_else(|p| p.into_inner()).stop = true;
        self.shared.wake.notify_all();
        if let Some(h) = self.filler.take() {
            let _ = h.join();
        }
    }
}

impl Shared {
    fn want(&self, osd: u32) {
        let mut w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(flag) = w.osds.get_mut(osd as usize) {
            if !*flag {
                *flag = true;
                self.wake.notify_all();
            }
        }
    }

    fn fill_loop(&self) {
        loop {
            let todo: Vec<u32> = {
                let mut w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
                while !w.stop && !w.osds.contains(&true) {
                    w = self.wake.wait(w).unwrap_or_else(|p| p.into_inner());
                }
                if w.stop {
                    return;
                }
                let todo = w.osds.iter().enumerate().filter(|(_, f)| **f).map(|(i, _)| i as u32).collect();
                w.osds.iter_mut().for_each(|f| *f = false);
                todo
            };
            for osd in todo {
                if let Err(e) = self.refill(osd, self.config.low_water as u64) {
                    tracing::warn!(osd, %e, "could not precreate objects");
                }
            }
        }
    }

    /// Brings `osd` to at least `target` ready objects (one batch at a time).
    fn refill(&self, osd: u32, target: u64) -> Result<(), FsError> {
        let o = self.osds.get(osd as usize).ok_or(FsError::NoSpace)?;
        let mut last_failure = o.refill.lock().unwrap_or_else(|p| p.into_inner());
        let mut abandoned = false;
        loop {
            let ready = self.ns.read(|s| s.precreated_counts())?.iter().find(|(i, _)| *i == osd).map_or(0, |c| c.1);
            o.ready.store(ready, Ordering::SeqCst);
            if ready >= target.max(1) {
                return Ok(());
            }
            if last_failure.is_some_and(|t| t.elapsed() < self.config.retry_after) {
                return Err(FsError::Io);
            }
            match self.make_batch(osd) {
                Ok(Batch::Ready) => *last_failure = None,
                // A leftover range the OSD refused: try once more with fresh ids.
                Ok(Batch::Abandoned) if !abandoned => abandoned = true,
                Ok(Batch::Abandoned) => {
                    *last_failure = Some(Instant::now());
                    return Err(FsError::Io);
                }
                Err(e) => {
                    *last_failure = Some(Instant::now());
                    return Err(e);
                }
            }
        }
    }

    /// One range on `osd`: the unready one left by an earlier attempt, or a new one.
    fn make_batch(&self, osd: u32) -> Result<Batch, FsError> {
        let leftover = self.ns.read(|s| s.unready_precreates())?.into_iter().find(|r| r.osd == osd);
        let retried = leftover.is_some();
        let range = match leftover {
            Some(r) => r,
            None => self.ns.write(|s| s.reserve_precreate(osd, self.config.batch.max(1) as u64))?,
        };
        let first = object_id(self.ns.server(), range.first);
        // A range is made whole: only ready ranges are ever taken from.
        let count = (range.last - range.first + 1) as u16;
        match self.objects.create_range(osd, first, count, crate::store::INITIAL_POLICY_TAG) {
            // Relaxed: a create that takes from the range commits later, so its durability
            // implies this step's; lost alone, the range is retried and found to exist.
            Ok(()) => self.ns.write_relaxed(|s| s.precreate_ready(&range)).map(|()| Batch::Ready),
            // A range tried before may have been made by that try (its reply lost): its
            // objects are this store's to remove. A new range refused holds ids taken by
            // objects this store did not make (`fence.rs`): set aside, never removed.
            Err(e) if e.refused() && retried => {
                tracing::warn!(osd, ?range, %e, "OSD refused a precreate tried before; abandoning the range");
                self.abandon(&range)?;
                Ok(Batch::Abandoned)
            }
            Err(e) if e.refused() => {
                tracing::warn!(osd, ?range, %e, "OSD refused a new precreate; setting the range aside without removing anything");
                self.ns.write(|s| s.set_aside_precreate(&range))?;
                Ok(Batch::Abandoned)
            }
            Err(e) => {
                tracing::warn!(osd, ?range, %e, "precreate did not reach the OSD; the range will be retried");
                Err(FsError::Io)
            }
        }
    }

    fn abandon(&self, range: &Range) -> Result<(), FsError> {
        let journaled = self.ns.write(|s| s.abandon_precreate(range))?;
        journal::drain(&self.ns, self.objects.as_ref(), &journaled);
        Ok(())
    }
}
