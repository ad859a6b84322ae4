//! The SQLite attribute store: one writer connection behind a mutex, and a pool of reader
//! connections for read-only commands.
//!
//! WAL mode lets readers run beside the writer without blocking. Writers are serialised in
//! process by the mutex rather than by SQLite's busy handler (which sleeps milliseconds under
//! contention); every write is one `BEGIN IMMEDIATE` transaction. `synchronous=NORMAL`: a
//! committed transaction survives a process kill (it is in the WAL); FLUSH and FUA make it
//! survive power loss by committing with `synchronous=FULL`, which fsyncs the WAL.

pub mod attrs;
pub mod objects;
pub mod schema;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::error::StorageError;

/// Prepared statements kept per connection (`prepare_cached`); the engine uses fewer.
const STATEMENT_CACHE: usize = 128;

pub struct Db {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    readers_max: usize,
    /// Bumped after every write transaction ends: what read caches check their entries against.
    generation: AtomicU64,
}

fn configure(conn: &Connection) -> Result<(), rusqlite::Error> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(())
}

fn open_connection(path: &Path) -> Result<Connection, rusqlite::Error> {
    // NO_MUTEX: each connection is used by one thread at a time (the pool hands it out), so
    // SQLite's own per-connection mutex would be pure overhead.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    configure(&conn)?;
    Ok(conn)
}

impl Db {
    /// Opens (creating if needed) the store at `path` and brings its schema up to date.
    pub fn open(path: &Path, readers_max: usize) -> Result<Db, StorageError> {
        let writer = open_connection(path)?;
        writer.pragma_update(None, "journal_mode", "WAL")?;
        writer.execute_batch(schema::SCHEMA)?;
        let found: Option<i64> = writer
            .query_row("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'", [], |r| r.get(0))
            .optional()?;
        match found {
            Some(v) if v > schema::SCHEMA_VERSION => {
                return Err(StorageError::SchemaVersion { found: v, supported: schema::SCHEMA_VERSION })
            }
            Some(_) => {}
            None => {
                writer.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?1)", [schema::SCHEMA_VERSION])?;
            }
        }
        Ok(Db { path: path.to_path_buf(), writer: Mutex::new(writer), readers: Mutex::new(Vec::new()), readers_max, generation: AtomicU64::new(0) })
    }

    fn writer(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the writer leaves no transaction open (the Transaction guard
        // rolls back on unwind), so the connection is still usable.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on a reader connection, outside any explicit transaction: each statement sees
    /// the latest committed state.
    pub fn read<T, E>(&self, f: impl FnOnce(&Connection) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StorageError>,
    {
        let pooled = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match pooled {
            Some(c) => c,
            None => open_connection(&self.path).map_err(|e| E::from(StorageError::Sqlite(e)))?,
        };
        let result = f(&conn);
        let mut readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if readers.len() < self.readers_max {
            readers.push(conn);
        }
        result
    }

    /// Runs `f` inside one IMMEDIATE transaction on the writer, committing when it returns
    /// Ok and rolling back otherwise. `durable` commits with synchronous=FULL (WAL fsynced).
    pub fn write<T, E>(&self, durable: bool, f: impl FnOnce(&Connection) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StorageError>,
    {
        let sql = |e: rusqlite::Error| E::from(StorageError::Sqlite(e));
        let mut conn = self.writer();
        if durable {
            conn.pragma_update(None, "synchronous", "FULL").map_err(sql)?;
        }
        let result = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            let value = f(&tx)?;
            tx.commit().map_err(sql)?;
            Ok(value)
        })();
        // After the commit (or rollback): a reader that saw the old generation cannot have
        // cached anything that outlives this bump.
        self.generation.fetch_add(1, Ordering::Release);
        if durable {
            conn.pragma_update(None, "synchronous", "NORMAL").map_err(sql)?;
        }
        result
    }

    /// The current write generation (see [`crate::attr_cache`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Makes every committed transaction durable: a one-row durable commit fsyncs the WAL,
    /// which holds all earlier commits too.
    pub fn barrier(&self) -> Result<(), StorageError> {
        self.write(true, |c| {
            c.prepare_cached(
                "INSERT INTO meta (key, value) VALUES ('flush_count', 1)
                 ON CONFLICT (key) DO UPDATE SET value = value + 1",
            )?
            .execute([])?;
            Ok::<_, StorageError>(())
        })
    }
}

/// Reads a meta value.
pub fn meta_get(c: &Connection, key: &str) -> Result<Option<Vec<u8>>, rusqlite::Error> {
    c.prepare_cached("SELECT value FROM meta WHERE key = ?1")?.query_row([key], |r| r.get(0)).optional()
}

/// Writes a meta value.
pub fn meta_set(c: &Connection, key: &str, value: &[u8]) -> Result<(), rusqlite::Error> {
    c.prepare_cached("INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value")?
        .execute(rusqlite::params![key, value])?;
    Ok(())
}
