//! Checkpoints off the request path. SQLite normally checkpoints inside the COMMIT that takes
//! the WAL past 1000 pages, copying pages into the database and syncing both files while that
//! commit holds the writer. Here the writer never checkpoints (`wal_autocheckpoint=0`); a
//! thread with its own connection does, every [`INTERVAL`] while commits happen
//! ([`GroupCommit::checkpoint`]): first without holding anything (PASSIVE never blocks the
//! writer or readers), then a short second pass holding the writer so that the checkpoint
//! completes. A complete checkpoint lets the next transaction restart the WAL from its start,
//! so the WAL stays the same few megabytes and a flush (fdatasync) only overwrites blocks it
//! already has: appending would also make the file system commit its journal, on every flush.
//! The server starts the WAL at that length already, in zeros ([`db::preallocate_wal`]).
//! SQLite syncs the WAL before and the database after each checkpoint.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::commit::GroupCommit;
use crate::db::{self, DbError};

/// Time between checkpoints while the store changes.
pub const INTERVAL: Duration = Duration::from_millis(100);

pub struct Checkpointer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the store at `path`, written through `writer`.
    pub fn start(path: &Path, writer: Arc<GroupCommit>) -> Result<Checkpointer, DbError> {
        let conn = db::open_checkpointer(path)?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mds-checkpoint".into())
            .spawn(move || run(&conn, &thread_stop, &writer))
            .map_err(|source| DbError::Thread { source })?;
        Ok(Checkpointer { stop, thread: Some(thread) })
    }
}

/// How often a checkpoint that keeps failing is logged again.
const FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Checkpoints failing in a row: when last logged, and how many.
struct Failing {
    logged: Instant,
    count: u64,
}

fn run(conn: &Connection, stop: &(Mutex<bool>, Condvar), writer: &GroupCommit) {
    let mut seen = writer.counters().1;
    let mut failing: Option<Failing> = None;
    let mut stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        stopped = stop.1.wait_timeout(stopped, INTERVAL).unwrap_or_else(|p| p.into_inner()).0;
        if *stopped {
            return;
        }
        let commits = writer.counters().1;
        if commits == seen {
            continue;
        }
        seen = commits;
        drop(stopped);
        match writer.checkpoint(conn) {
            Ok(_) => {
                if let Some(failing) = failing.take() {
                    tracing::info!(failures = failing.count, "metadata store checkpoints work again");
                }
            }
            // Once, then once a minute: a full disk fails every pass, ten a second.
            Err(e) => match &mut failing {
                Some(failing) if failing.logged.elapsed() < FAILURE_LOG_EVERY => failing.count += 1,
                _ => {
                    let count = failing.as_ref().map_or(1, |f| f.count + 1);
                    tracing::warn!(%e, failures = count, "metadata store checkpoint failed; retrying");
                    failing = Some(Failing { logged: Instant::now(), count });
                }
            },
        }
        stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        *self.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
