//! Running a tree command's per-file work on a few threads at once. One file at a time leaves
//! the metadata server committing one request per flush and each OSD one command deep; a few
//! at once let the server's group commit take them together, as it does for many clients.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::Result;

/// Files handled at once by `put -r`, `get -r`, `cp -r` and `rm -r` (`tessera bench tree`
/// measures 1 to 8).
pub const TREE_WORKERS: usize = 8;

/// Runs `job` on every item, `workers` at a time, in list order as far as threads allow.
/// After the first failure no new item starts; that failure is returned once the items
/// already started have ended.
pub fn for_each<T: Sync>(workers: usize, items: &[T], job: impl Fn(&T) -> Result<()> + Sync) -> Result<()> {
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let stopped = || failed.lock().unwrap_or_else(|p| p.into_inner()).is_some();
    std::thread::scope(|scope| {
        for _ in 0..workers.max(1).min(items.len()) {
            scope.spawn(|| {
                while !stopped() {
                    let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) else { return };
                    if let Err(e) = job(item) {
                        failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                    }
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn every_item_runs_once_and_a_failure_stops_new_ones() {
        let seen: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
        for_each(8, &(0..100).collect::<Vec<usize>>(), |&i| {
            seen[i].fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
        assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));

        let ran = AtomicUsize::new(0);
        let items: Vec<usize> = (0..10_000).collect();
        let err = for_each(8, &items, |&i| {
            ran.fetch_add(1, Ordering::Relaxed);
            if i == 5 {
                anyhow::bail!("item {i} failed");
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
            Ok(())
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "item 5 failed");
        assert!(ran.load(Ordering::Relaxed) < 1000, "new items stopped after the failure");
    }
}
