//! A bounded cache of open object files, so a hot object costs no open(2) per command.
//!
//! Sharded by object address to keep connection threads off one lock; each shard evicts its
//! least recently used entry when full. Entries are `Arc<File>`: an evicted file stays open
//! until the command using it finishes. An entry also keeps the object's mapping, if list I/O
//! made one ([`super::mapped`]), so the two leave together (a removed object's mapping would
//! otherwise keep its blocks allocated).

use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tessera_types::ObjectAddr;

use super::mapped::Mapping;

const SHARDS: usize = 16;

struct Entry {
    file: Arc<File>,
    mapping: Option<Arc<Mapping>>,
    last_use: u64,
}

pub struct FileCache {
    shards: Vec<Mutex<HashMap<ObjectAddr, Entry>>>,
    per_shard_max: usize,
    clock: AtomicU64,
    hasher: BuildHasherDefault<DefaultHasher>,
}

impl FileCache {
    pub fn new(capacity: usize) -> Self {
        FileCache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard_max: capacity.div_ceil(SHARDS).max(1),
            clock: AtomicU64::new(0),
            hasher: BuildHasherDefault::default(),
        }
    }

    fn shard(&self, addr: &ObjectAddr) -> MutexGuard<'_, HashMap<ObjectAddr, Entry>> {
        let index = (self.hasher.hash_one(addr) as usize) % SHARDS;
        // A poisoned shard only means another thread panicked mid-insert; the map is still a
        // valid map, so keep using it.
        self.shards[index].lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, addr: &ObjectAddr) -> Option<Arc<File>> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut shard = self.shard(addr);
        let entry = shard.get_mut(addr)?;
        entry.last_use = tick;
        Some(entry.file.clone())
    }

    pub fn insert(&self, addr: ObjectAddr, file: Arc<File>) {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut shard = self.shard(&addr);
        if shard.len() >= self.per_shard_max && !shard.contains_key(&addr) {
            if let Some(oldest) = shard.iter().min_by_key(|(_, e)| e.last_use).map(|(k, _)| *k) {
                shard.remove(&oldest);
            }
        }
        shard.insert(addr, Entry { file, mapping: None, last_use: tick });
    }

    pub fn mapping(&self, addr: &ObjectAddr) -> Option<Arc<Mapping>> {
        self.shard(addr).get(addr)?.mapping.clone()
    }

    /// Keeps (or, with `None`, drops) the object's mapping; nothing if its file is not cached,
    /// so a mapping never outlives its entry.
    pub fn set_mapping(&self, addr: &ObjectAddr, mapping: Option<Arc<Mapping>>) {
        if let Some(entry) = self.shard(addr).get_mut(addr) {
            entry.mapping = mapping;
        }
    }

    pub fn evict(&self, addr: &ObjectAddr) {
        self.shard(addr).remove(addr);
    }

    pub fn evict_partition(&self, partition_id: u64) {
        for shard in &self.shards {
            shard.lock().unwrap_or_else(|p| p.into_inner()).retain(|k, _| k.partition_id.0 != partition_id);
        }
    }

    pub fn clear(&self) {
        for shard in &self.shards {
            shard.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(File::create(dir.path().join("f")).unwrap());
        let cache = FileCache::new(32);
        for oid in 0..1000 {
            cache.insert(ObjectAddr::new(0x10000, 0x10000 + oid), file.clone());
        }
        assert!(cache.len() <= 32, "{} entries", cache.len());
        cache.clear();
        assert!(cache.is_empty());
    }
}
