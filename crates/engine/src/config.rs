//! Engine configuration: the few knobs a deployment or a simulator sets.

/// How an [`crate::Engine`] is opened.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Capacity reported by the root information page when the store is first created (and by
    /// FORMAT OSD with a capacity of 0). `None`: the size of the file system under the store.
    pub capacity_bytes: Option<u64>,
    /// OSD system id for a new store. `None`: 20 random bytes from getrandom(2). A simulator
    /// passes a fixed id so runs replay exactly.
    pub system_id: Option<[u8; 20]>,
    /// Open object files kept in the cache; beyond it the least recently used are closed.
    pub open_files_max: usize,
    /// SQLite read connections kept for concurrent read-only commands.
    pub readers_max: usize,
    /// An "accessed" timestamp (attributes or data) is rewritten only when the stored one is
    /// at least this old, like relatime: a GET ATTRIBUTES loop would otherwise turn every read
    /// into an SQLite write. 0 updates on every access.
    pub access_time_granularity_ms: u64,
    /// Gaps up to this many bytes between the pieces of a list READ are read and discarded
    /// (one system call for the window, see store/plan.rs) rather than split into two system
    /// calls. 4 KiB: beyond it, per-piece preads win (`tessera bench noncontig`, experiment 6).
    pub read_gap_max_bytes: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            capacity_bytes: None,
            system_id: None,
            open_files_max: 1024,
            readers_max: 64,
            access_time_granularity_ms: 1000,
            read_gap_max_bytes: 4 * 1024,
        }
    }
}
