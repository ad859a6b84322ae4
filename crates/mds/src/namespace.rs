//! [`Namespace`]: how the server reaches its SQLite store. Writes go through one connection
//! with group commit ([`crate::commit`]); reads go through a pool of reader connections,
//! each call in one read transaction (a consistent snapshot of committed state). In WAL mode
//! readers never wait for the writer; a read answers once what it saw is durable.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tessera_mds_proto::{FsError, Timespec};

use crate::checkpoint::Checkpointer;
use crate::commit::{GroupCommit, Pending};
use crate::db::{self, DbError};
use crate::store::{exec, Store};

/// Idle reader connections kept; more concurrent readers open (and then close) extra ones.
const READERS_IDLE_MAX: usize = 16;

pub struct Namespace {
    writer: Arc<GroupCommit>,
    _checkpointer: Checkpointer,
    path: PathBuf,
    server: u32,
    readers: Mutex<Vec<Store>>,
}

impl Namespace {
    /// Opens (creating if needed) the store at `path` for server `server`.
    pub fn open(path: &Path, server: u32, now: Timespec) -> Result<Namespace, NamespaceError> {
        let conn = db::open(path, server)?;
        let store = Store::new(conn, server, now).map_err(NamespaceError::Store)?;
        let wal = db::open_wal(path)?;
        // What opening wrote (schema, root) is durable before anything is answered; the
        // preallocation's sync makes it so.
        db::preallocate_wal(&wal).map_err(|source| DbError::Wal { path: path.to_path_buf(), source })?;
        let writer = Arc::new(GroupCommit::new(store, wal));
        let checkpointer = Checkpointer::start(path, writer.clone())?;
        Ok(Namespace { writer, _checkpointer: checkpointer, path: path.to_path_buf(), server, readers: Mutex::new(Vec::new()) })
    }

    pub fn server(&self) -> u32 {
        self.server
    }

    /// Whether the store refuses every request until restart ([`GroupCommit::is_broken`]).
    pub fn is_broken(&self) -> bool {
        self.writer.is_broken()
    }

    /// Runs one mutating step atomically (an error rolls it back); returns once it is durable.
    pub fn write<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>) -> Result<R, E> {
        self.writer.write(step)
    }

    /// Runs a create's step atomically; returns its result at once, with the durability to wait
    /// for before anyone is told it ([`GroupCommit::start_write`]).
    pub fn start_write<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>) -> Result<(Pending, Result<R, E>), FsError> {
        self.writer.start_write(step)
    }

    /// Runs one mutating step atomically, as [`Namespace::write`], and returns at once, with
    /// the durability to wait for ([`GroupCommit::start_guarded`]).
    pub fn start_guarded<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>) -> Result<(Pending, Result<R, E>), FsError> {
        self.writer.start_guarded(step)
    }

    /// Returns once `pending` is durable; EIO if it was lost.
    pub fn wait(&self, pending: Pending) -> Result<(), FsError> {
        self.writer.wait(pending)
    }

    /// Runs one mutating step atomically; returns once committed, before it is durable. Only
    /// for steps whose loss in a crash is harmless ([`GroupCommit::write_relaxed`]).
    pub fn write_relaxed<R, E: From<FsError>>(&self, step: impl FnOnce(&mut Store) -> Result<R, E>) -> Result<R, E> {
        self.writer.write_relaxed(step)
    }

    /// (steps written, groups committed, WAL flushes) since open.
    pub fn commit_counters(&self) -> (u64, u64, u64) {
        self.writer.counters()
    }

    /// Runs `read` on a snapshot of the committed state.
    pub fn read<R>(&self, read: impl FnOnce(&Store) -> Result<R, FsError>) -> Result<R, FsError> {
        let pooled = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let store = match pooled {
            Some(s) => s,
            None => Store::reader(
                db::open_reader(&self.path).map_err(|e| {
                    tracing::error!(%e, "cannot open a reader connection");
                    FsError::Io
                })?,
                self.server,
            ),
        };
        exec(store.conn(), "BEGIN", [])?;
        let result = read(&store);
        // Ending a read transaction cannot lose anything; a connection that cannot end one is
        // dropped rather than reused.
        if exec(store.conn(), "COMMIT", []).is_ok() {
            let mut idle = self.readers.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < READERS_IDLE_MAX {
                idle.push(store);
            }
        }
        // The snapshot may hold commits not yet flushed: answer only once they are durable.
        self.writer.wait_visible_durable()?;
        result
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("metadata store: {0}")]
    Store(FsError),
}
