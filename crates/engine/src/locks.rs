//! Per-object locks, striped: commands on one user object are serialised (an APPEND reads
//! the logical length and writes after it; a truncate must not interleave with a write),
//! while commands on different objects run in parallel. Reads share, mutations exclude.
//!
//! Lock order, everywhere: the FORMAT epoch lock, then object stripes (ascending stripe
//! index when several are held), then the SQLite writer mutex. Never the other way round.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use tessera_types::ObjectAddr;

const STRIPES: usize = 1024;

pub struct ObjectLocks {
    stripes: Vec<RwLock<()>>,
    hasher: BuildHasherDefault<DefaultHasher>,
}

impl Default for ObjectLocks {
    fn default() -> Self {
        ObjectLocks { stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(), hasher: BuildHasherDefault::default() }
    }
}

impl ObjectLocks {
    fn index(&self, addr: &ObjectAddr) -> usize {
        (self.hasher.hash_one(addr) as usize) % STRIPES
    }

    // The lock guards nothing but ordering (the data is elsewhere), so a poisoned stripe is
    // still a valid lock.
    pub fn read(&self, addr: ObjectAddr) -> RwLockReadGuard<'_, ()> {
        self.stripes[self.index(&addr)].read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn write(&self, addr: ObjectAddr) -> RwLockWriteGuard<'_, ()> {
        self.stripes[self.index(&addr)].write().unwrap_or_else(|p| p.into_inner())
    }

    /// Exclusive locks on many objects, taken in stripe order so two callers never deadlock.
    pub fn write_many(&self, addrs: &[ObjectAddr]) -> Vec<RwLockWriteGuard<'_, ()>> {
        let mut indexes: Vec<usize> = addrs.iter().map(|a| self.index(a)).collect();
        indexes.sort_unstable();
        indexes.dedup();
        indexes.into_iter().map(|i| self.stripes[i].write().unwrap_or_else(|p| p.into_inner())).collect()
    }
}
