//! READDIR with attributes: a page of entries, each with what a stat of it gives. A file's
//! size comes from its objects (one GET ATTRIBUTES each, `Mds::data_of`), so a page of 1,024
//! files striped over three OSDs is 3,072 commands. They go out from a few threads at once:
//! each OSD's connection then holds several, which its target runs back to back, instead of
//! paying a round trip for each one after another.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tessera_mds_proto::{Attr, DirEntry, FileType, FsError, InodeId, Reply};

use super::Mds;
use crate::store::Dentry;

/// Threads (this one included) asking for one page's attributes.
const FETCHERS_MAX: usize = 8;

/// Entries that need a call (an OSD's or a peer's) per fetcher: below this, starting another
/// thread costs more than its share of the round trips.
const CALLS_PER_FETCHER: usize = 16;

impl Mds {
    pub(super) fn readdir(&self, dir: InodeId, after: Option<&str>, max: u32) -> Result<Reply, FsError> {
        let mut after = after.map(str::to_owned);
        loop {
            let (entries, more) = self.ns.read(|s| s.readdir(dir, after.as_deref(), max))?;
            let last = entries.last().map(|e| e.name.clone());
            let attrs = self.attrs_of(&entries);
            let mut out = Vec::with_capacity(entries.len());
            for (e, attr) in entries.into_iter().zip(attrs) {
                match attr {
                    Ok(attr) => out.push(DirEntry { attr, name: e.name }),
                    // Removed since the page was read: POSIX lets readdir leave it out.
                    Err(FsError::Stale | FsError::NotFound) => {}
                    // Homed on a server that is down: still named, as what a listing needs
                    // most is the names (`ls` of the root when one server of four is down).
                    Err(FsError::PeerDown) => out.push(DirEntry { attr: Attr::unknown(e.ino, e.kind), name: e.name }),
                    Err(other) => return Err(other),
                }
            }
            // A page whose entries all went would read as the end to the client: go on.
            if !out.is_empty() || !more {
                return Ok(Reply::DirPage { entries: out, more });
            }
            after = last;
        }
    }

    /// Each entry's attributes, in order. A server found down is not asked again for this
    /// page's other entries (each try may wait out the peer timeout).
    fn attrs_of(&self, entries: &[Dentry]) -> Vec<Result<Attr, FsError>> {
        let down: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        let one = |e: &Dentry| {
            let server = e.ino.server();
            if down.lock().unwrap_or_else(|p| p.into_inner()).contains(&server) {
                return Err(FsError::PeerDown);
            }
            let attr = self.attr(e.ino);
            if attr == Err(FsError::PeerDown) {
                down.lock().unwrap_or_else(|p| p.into_inner()).push(server);
            }
            attr
        };
        let calls = entries.iter().filter(|e| e.kind == FileType::Regular || e.ino.server() != self.server_index()).count();
        let fetchers = (calls / CALLS_PER_FETCHER).clamp(1, FETCHERS_MAX);
        if fetchers == 1 {
            return entries.iter().map(one).collect();
        }
        let next = AtomicUsize::new(0);
        let fetch = || {
            let mut got = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(e) = entries.get(i) else { return got };
                got.push((i, one(e)));
            }
        };
        let mut got: Vec<(usize, Result<Attr, FsError>)> = std::thread::scope(|s| {
            // A thread that cannot start leaves its share to the others and to this one.
            let helpers: Vec<_> =
                (1..fetchers).filter_map(|_| std::thread::Builder::new().name("mds-readdir".into()).spawn_scoped(s, fetch).ok()).collect();
            let mut got = fetch();
            for h in helpers {
                got.extend(h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            }
            got
        });
        got.sort_unstable_by_key(|(i, _)| *i);
        got.into_iter().map(|(_, attr)| attr).collect()
    }
}
