//! The SQLite schema of one metadata server, and opening it.
//!
//! Tables (ids are stored as i64 with the same bits as the u64 they hold):
//!
//! | table | row | why |
//! |---|---|---|
//! | `meta` | (key, value) | this server's index, the next inode sequence |
//! | `inodes` | every inode homed here: type, mode, uid, gid, times (ns), parent (dirs), symlink target, stripe unit (files), subdirectory count (dirs, kept by triggers on `dentries`) | stat without joins |
//! | `dentries` | (dir, name) -> (ino, type) for directories homed here | a directory's entries live on its server |
//! | `file_objects` | (ino, slot) -> (osd, object id, policy tag) | the file's ordered object list; the tag each object holds (capabilities carry it) |
//! | `dir_stripe` | dir -> default stripe unit / count / start OSD | inherited by new files |
//! | `osd_alloc` | osd -> next object sequence | per-OSD object id allocation |
//! | `pending_removal` | (osd, object id) | objects that must be removed from the OSDs |
//! | `pending_retag` | (osd, object id) -> policy tag | revocations not yet on the OSDs: the tag each object must be set to |
//! | `pending_length` | (osd, object id) -> logical length | truncates not yet on the OSDs: the length each object must be set to |
//! | `precreated` | (osd, first seq) -> next seq, last seq, ready, policy tag | object ranges made ahead of need; `ready` once they exist; `next..=last` not handed out yet; the tag their CREATE set |

use std::path::Path;

use rusqlite::Connection;

/// Schema version stored in `PRAGMA user_version`; a store written by a newer version is
/// refused. Version 1 lacked `precreated` and is upgraded in place (the table starts empty).
/// Version 2 lacked the policy tag columns; they are added in place with tag 0 (objects created
/// before then hold no tag, and capabilities for them carry 0, "not checked"). Version 3
/// lacked `pending_retag`; version 4 lacked `pending_length`; both start empty. Version 5
/// lacked `inodes.subdirs` and the triggers that keep it; the column is added and counted in
/// place.
pub const SCHEMA_VERSION: i64 = 6;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS inodes (
    ino INTEGER PRIMARY KEY,
    kind INTEGER NOT NULL,
    mode INTEGER NOT NULL,
    uid INTEGER NOT NULL,
    gid INTEGER NOT NULL,
    atime_ns INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    parent INTEGER NOT NULL,
    symlink TEXT,
    stripe_unit INTEGER,
    subdirs INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS dentries (
    dir INTEGER NOT NULL,
    name TEXT NOT NULL,
    ino INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    PRIMARY KEY (dir, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS file_objects (
    ino INTEGER NOT NULL,
    slot INTEGER NOT NULL,
    osd INTEGER NOT NULL,
    object_id INTEGER NOT NULL,
    policy_tag INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ino, slot)
) WITHOUT ROWID;
-- Version 1 indexed objects for repair; repair now reads the table once, and every create
-- and unlink saves the index update.
DROP INDEX IF EXISTS file_objects_by_object;
CREATE TABLE IF NOT EXISTS dir_stripe (
    dir INTEGER PRIMARY KEY,
    stripe_unit INTEGER NOT NULL,
    stripe_count INTEGER NOT NULL,
    start_osd INTEGER
);
CREATE TABLE IF NOT EXISTS osd_alloc (osd INTEGER PRIMARY KEY, next_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS pending_removal (
    osd INTEGER NOT NULL,
    object_id INTEGER NOT NULL,
    PRIMARY KEY (osd, object_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending_retag (
    osd INTEGER NOT NULL,
    object_id INTEGER NOT NULL,
    policy_tag INTEGER NOT NULL,
    PRIMARY KEY (osd, object_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending_length (
    osd INTEGER NOT NULL,
    object_id INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (osd, object_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS precreated (
    osd INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    ready INTEGER NOT NULL,
    policy_tag INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (osd, first_seq)
) WITHOUT ROWID;
";

/// Columns later versions added to tables an older store already has.
const ADDED_COLUMNS: [(&str, &str, &str); 3] = [
    ("file_objects", "policy_tag", "INTEGER NOT NULL DEFAULT 0"),
    ("precreated", "policy_tag", "INTEGER NOT NULL DEFAULT 0"),
    ("inodes", "subdirs", "INTEGER NOT NULL DEFAULT 0"),
];

/// A directory's link count is 2 plus its subdirectories (`InodeRow::attr`). Every change of a
/// directory entry keeps the count, whichever step makes it (mkdir, rmdir, rename, the halves
/// of a cross-server mkdir or rmdir): a directory's entries live on its own server, so its row
/// is always here. Regular files' entries (kind 1) do not fire them.
const SUBDIR_TRIGGERS: &str = "
CREATE TRIGGER IF NOT EXISTS subdir_added AFTER INSERT ON dentries WHEN NEW.kind = 2
BEGIN UPDATE inodes SET subdirs = subdirs + 1 WHERE ino = NEW.dir; END;
CREATE TRIGGER IF NOT EXISTS subdir_removed AFTER DELETE ON dentries WHEN OLD.kind = 2
BEGIN UPDATE inodes SET subdirs = subdirs - 1 WHERE ino = OLD.dir; END;
";

/// Counts every directory's subdirectories afresh (a store from before `subdirs`).
const COUNT_SUBDIRS: &str = "
UPDATE inodes SET subdirs = (SELECT COUNT(*) FROM dentries d WHERE d.dir = inodes.ino AND d.kind = 2) WHERE kind = 2;
";

fn add_missing_columns(conn: &Connection) -> Result<(), DbError> {
    for (table, column, decl) in ADDED_COLUMNS {
        let present: bool = conn.query_row(
            &format!("SELECT COUNT(*) > 0 FROM pragma_table_info('{table}') WHERE name = ?1"),
            [column],
            |r| r.get(0),
        )?;
        if !present {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
            if column == "subdirs" {
                conn.execute_batch(COUNT_SUBDIRS)?;
            }
        }
    }
    Ok(())
}

/// Page size of new stores. Rows here are tens of bytes and a create touches about six
/// b-tree pages (entry, inode, parent, object list, allocators), each written whole to the WAL
/// at commit: with 1 KiB pages a create writes 3.5x fewer bytes than with SQLite's 4 KiB, and
/// the flush that makes it durable moves that much less.
pub const PAGE_SIZE: i64 = 1024;
/// Pages the writer caches (16 MiB): its own commits never invalidate them.
const WRITER_CACHE_KIB: i64 = 16 * 1024;
/// Pages a reader caches (256 KiB). In WAL mode a connection drops its whole page cache at the
/// first read after any other connection committed, walking every slot of a hash table that
/// has grown to what the cache once held: under writes a reader's cache lives for one lookup,
/// so a large one buys nothing and makes each drop dear. On 240,000 files a lookup after a
/// commit took 44-52 us with 16 MiB and 15-24 us with 256 KiB; with no commit between, 6-10 us
/// with either (`examples/reader_cache.rs`; docs/metadata.md, "Reader caches"). Readers are
/// one per concurrent read, so this also bounds their memory.
const READER_CACHE_KIB: i64 = 256;
/// Statements each connection keeps prepared: the create and lookup paths use about twenty,
/// more than rusqlite's default of sixteen.
const STATEMENTS_CACHED: usize = 64;

fn tune(conn: &Connection, cache_kib: i64) -> Result<(), DbError> {
    conn.pragma_update(None, "cache_size", -cache_kib)?;
    conn.set_prepared_statement_cache_capacity(STATEMENTS_CACHED);
    Ok(())
}

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("metadata store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("metadata store has schema version {found}, this build understands up to {SCHEMA_VERSION}")]
    Version { found: i64 },
    #[error("metadata store belongs to server {found}, not {expected}")]
    WrongServer { found: i64, expected: u32 },
    #[error("metadata store: cannot open its WAL {}: {source}", path.display())]
    Wal { path: std::path::PathBuf, source: std::io::Error },
    #[error("metadata store: cannot start a thread: {source}")]
    Thread { source: std::io::Error },
}

/// Opens (creating if needed) the store at `path` for server `server_index`: the writer
/// connection. COMMIT does not make a transaction durable; [`crate::commit`] flushes the WAL
/// itself (fdatasync) before anything is acknowledged, so a namespace change acknowledged to a
/// client survives power loss. The writer opens through [`crate::wal_vfs`], which writes each
/// commit's WAL frames in one call: there `synchronous=FULL` ends each COMMIT with the sync
/// that writes them out (without syncing), and `checkpoint_fullfsync` marks the syncs that
/// must reach the disk. Without that VFS, `synchronous=NORMAL`: COMMIT writes and does not sync.
pub fn open(path: &Path, server_index: u32) -> Result<Connection, DbError> {
    let gathered = crate::wal_vfs::register();
    let conn = if gathered {
        let vfs = crate::wal_vfs::NAME.to_str().expect("the VFS name is ASCII");
        Connection::open_with_flags_and_vfs(path, rusqlite::OpenFlags::default(), vfs)?
    } else {
        Connection::open(path)?
    };
    // Only takes effect while the file is new (before WAL mode): see PAGE_SIZE.
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    if gathered {
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "checkpoint_fullfsync", true)?;
    } else {
        conn.pragma_update(None, "synchronous", "NORMAL")?;
    }
    // Checkpoints run on their own connection (crate::checkpoint), never inside a COMMIT.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    tune(&conn, WRITER_CACHE_KIB)?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if !(0..=SCHEMA_VERSION).contains(&version) {
        return Err(DbError::Version { found: version });
    }
    conn.execute_batch(SCHEMA)?;
    add_missing_columns(&conn)?;
    conn.execute_batch(SUBDIR_TRIGGERS)?;
    conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('server_index', ?1)", [server_index as i64])?;
    let found: i64 = conn.query_row("SELECT value FROM meta WHERE key = 'server_index'", [], |r| r.get(0))?;
    if found != server_index as i64 {
        return Err(DbError::WrongServer { found, expected: server_index });
    }
    // Sequence 1 on server 0 is the root; every server starts after it so ids never repeat.
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('next_inode', 2)", [])?;
    Ok(conn)
}

/// A connection for checkpoints only ([`crate::checkpoint`]).
pub fn open_checkpointer(path: &Path) -> Result<Connection, DbError> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

/// The WAL file of the store at `path` (it exists once a connection has read the store), for
/// flushing it.
pub fn open_wal(path: &Path) -> Result<std::fs::File, DbError> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::OpenOptions::new().read(true).write(true).open(&wal).map_err(|source| DbError::Wal { path: wal.into(), source })
}

/// The length the WAL is extended to, with zeros, when the server opens its store. Group
/// commit flushes the WAL after every group; a flush of blocks written before changes no
/// file-system metadata, while a WAL growing into new blocks makes each flush commit the
/// file system's journal too (block allocation and file size). SQLite reuses the WAL from its
/// start after each complete checkpoint, so once it has reached the length it needs between
/// checkpoints it stops growing; this lets a freshly started server begin there.
pub const WAL_PREALLOCATED: u64 = 8 << 20;

/// Appends zeros to `wal` up to [`WAL_PREALLOCATED`], then syncs the WAL (always, so what it
/// held before is durable too). Only bytes after the WAL's end are written: SQLite's recovery
/// reads frames in order and stops at the first whose checksum fails, which a zeroed frame
/// does.
pub fn preallocate_wal(wal: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut at = wal.metadata()?.len();
    if at >= WAL_PREALLOCATED {
        return wal.sync_data();
    }
    let zeros = vec![0u8; 1 << 20];
    while at < WAL_PREALLOCATED {
        let n = zeros.len().min((WAL_PREALLOCATED - at) as usize);
        wal.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    wal.sync_all()
}

/// A second connection to an opened store, for reads only: in WAL mode it reads the last
/// committed state while the writer commits, so a lookup never waits behind an fsync.
pub fn open_reader(path: &Path) -> Result<Connection, DbError> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "query_only", true)?;
    tune(&conn, READER_CACHE_KIB)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}
