//! READDIR with attributes: a page of entries, each with what a stat of it gives. A file's
//! size and data time come from its objects, so a page of 1,024 files striped over three OSDs
//! needs 3,072 objects' lengths. Two things keep that from being 3,072 round trips, one after
//! another:
//!
//! - Objects close together on one OSD (files made one after another take neighbouring ids
//!   from its pool) are read with one LIST per run of ids, with the attributes bit set (CDB
//!   byte 11, 0x40): one command answers up to a thousand objects.
//! - The rest (scattered ids, entries homed on another metadata server, anything a LIST did not
//!   answer) go out from up to eight threads at once, so each OSD's connection holds several
//!   GET ATTRIBUTES, which its target runs back to back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tessera_mds_proto::{Attr, DirEntry, FileLayout, FsError, InodeId, ObjectRef, Reply};

use super::{inode_and_layout, with_data, FileData, Mds};
use crate::objects::ObjectData;
use crate::store::{Dentry, InodeRow};

/// Threads (this one included) asking for one page's attributes.
const FETCHERS_MAX: usize = 8;

/// Entries that need a call (an OSD's or a peer's) per fetcher: below this, starting another
/// thread costs more than its share of the round trips.
const CALLS_PER_FETCHER: usize = 16;

/// A run of wanted ids on one OSD goes on while the next is at most this far past the last:
/// a LIST answers the ids between too (other files' objects, unused pool objects), each far
/// cheaper than a command of its own.
const RUN_GAP_MAX: u64 = 8;

/// Wanted ids a run needs for one LIST to be worth it over a GET ATTRIBUTES each.
const RUN_MIN: usize = 8;

/// A local entry's inode and layout, read in one snapshot with the page's others.
type Local = Result<(InodeRow, Option<FileLayout>), FsError>;

impl Mds {
    pub(super) fn readdir(&self, dir: InodeId, after: Option<&str>, max: u32) -> Result<Reply, FsError> {
        let mut after = after.map(str::to_owned);
        loop {
            let (entries, more) = self.ns.read(|s| s.readdir(dir, after.as_deref(), max))?;
            let last = entries.last().map(|e| e.name.clone());
            let attrs = self.attrs_of(&entries)?;
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

    /// Each entry's attributes, in order.
    fn attrs_of(&self, entries: &[Dentry]) -> Result<Vec<Result<Attr, FsError>>, FsError> {
        let here = self.server_index();
        let local: Vec<Option<Local>> =
            self.ns.read(|s| Ok(entries.iter().map(|e| (e.ino.server() == here).then(|| inode_and_layout(s, e.ino))).collect()))?;
        let layouts = local.iter().filter_map(|l| match l {
            Some(Ok((_, Some(layout)))) => Some(layout),
            _ => None,
        });
        let listed = self.listed_states(layouts);
        // What the lists answered whole; the rest need calls of their own.
        let known: Vec<Option<Result<Attr, FsError>>> = local
            .iter()
            .map(|l| match l {
                Some(Ok((row, None))) => Some(Ok(row.attr(0))),
                Some(Ok((row, Some(layout)))) => {
                    let states: Option<Vec<&ObjectData>> = layout.objects.iter().map(|o| listed.get(o)).collect();
                    states.map(|s| FileData::of(layout, s.into_iter()).map(|data| with_data(row.clone(), data)))
                }
                Some(Err(e)) => Some(Err(*e)),
                None => None,
            })
            .collect();
        let calls: Vec<usize> = (0..entries.len()).filter(|&i| known[i].is_none()).collect();
        // A server found down is not asked again for this page's other entries (each try may
        // wait out the peer timeout).
        let down: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        let called = fan_out(calls.len(), |k| {
            let i = calls[k];
            match &local[i] {
                Some(Ok((row, layout))) => self.attr_from(row.clone(), layout.as_ref()),
                _ => {
                    let server = entries[i].ino.server();
                    if down.lock().unwrap_or_else(|p| p.into_inner()).contains(&server) {
                        return Err(FsError::PeerDown);
                    }
                    let attr = self.attr(entries[i].ino);
                    if attr == Err(FsError::PeerDown) {
                        down.lock().unwrap_or_else(|p| p.into_inner()).push(server);
                    }
                    attr
                }
            }
        });
        let mut called = calls.into_iter().zip(called).collect::<HashMap<usize, _>>();
        Ok(known.into_iter().enumerate().map(|(i, k)| k.unwrap_or_else(|| called.remove(&i).unwrap_or(Err(FsError::Io)))).collect())
    }

    /// The states of those of `layouts`' objects that lie in dense runs of ids, one LIST per
    /// run (runs on different OSDs at once). An OSD that does not answer is left out: its
    /// objects are then asked one by one, which reports it.
    fn listed_states<'a>(&self, layouts: impl Iterator<Item = &'a FileLayout>) -> HashMap<ObjectRef, ObjectData> {
        let mut wanted: HashMap<u32, Vec<u64>> = HashMap::new();
        for o in layouts.flat_map(|l| &l.objects) {
            wanted.entry(o.osd).or_default().push(o.object_id);
        }
        let runs: Vec<(u32, std::ops::Range<u64>)> =
            wanted.into_iter().flat_map(|(osd, mut ids)| dense_runs(&mut ids).into_iter().map(move |r| (osd, r))).collect();
        let answered = fan_out_each(runs.len(), |k| {
            let (osd, ids) = &runs[k];
            self.objects.data_states_in(*osd, ids.clone()).map(|states| (*osd, states)).ok()
        });
        let mut out = HashMap::new();
        for (osd, states) in answered.into_iter().flatten() {
            out.extend(states.into_iter().filter_map(|(object_id, s)| Some((ObjectRef { osd, object_id }, s?))));
        }
        out
    }
}

/// The ranges of `ids` (sorted here) that hold at least [`RUN_MIN`] of them with no gap wider
/// than [`RUN_GAP_MAX`].
fn dense_runs(ids: &mut [u64]) -> Vec<std::ops::Range<u64>> {
    ids.sort_unstable();
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=ids.len() {
        if i == ids.len() || ids[i] - ids[i - 1] > RUN_GAP_MAX {
            if i - start >= RUN_MIN {
                runs.push(ids[start]..ids[i - 1] + 1);
            }
            start = i;
        }
    }
    runs
}

/// `f(0..n)`, in order, from as many threads as `n` calls are worth (at most
/// [`FETCHERS_MAX`], this one included).
fn fan_out<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    run_spread(n, (n / CALLS_PER_FETCHER).clamp(1, FETCHERS_MAX), f)
}

/// `f(0..n)`, in order, each from a thread of its own (up to [`FETCHERS_MAX`]): for a few
/// calls that each take long.
fn fan_out_each<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    run_spread(n, n.clamp(1, FETCHERS_MAX), f)
}

fn run_spread<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    if threads <= 1 {
        return (0..n).map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let take = || {
        let mut got = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return got;
            }
            got.push((i, f(i)));
        }
    };
    let mut got: Vec<(usize, T)> = std::thread::scope(|s| {
        // A thread that cannot start leaves its share to the others and to this one.
        let helpers: Vec<_> =
            (1..threads).filter_map(|_| std::thread::Builder::new().name("mds-readdir".into()).spawn_scoped(s, take).ok()).collect();
        let mut got = take();
        for h in helpers {
            got.extend(h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        got
    });
    got.sort_unstable_by_key(|(i, _)| *i);
    got.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_dense_stretches_of_enough_ids() {
        let mut ids: Vec<u64> = (100..110).chain([5, 7]).chain((200..230).step_by(8)).chain((300..340).step_by(9)).collect();
        // 100..110: ten ids one apart; 5 and 7: too few; 200, 208, 216, 224: gaps of 8 but
        // only four; 300..340 by 9: gaps past the limit.
        assert_eq!(dense_runs(&mut ids), vec![100..110]);
        let mut ids: Vec<u64> = (0..64).map(|i| 1000 + i * 8).collect();
        assert_eq!(dense_runs(&mut ids), vec![1000..1505]);
        assert!(dense_runs(&mut []).is_empty());
    }
}
