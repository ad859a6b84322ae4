//! The SQLite schema of the attribute store, created on first open.
//!
//! Ids are stored as SQLite integers (signed 64-bit); the engine refuses ids above 2^63 - 1.
//! Tables are WITHOUT ROWID: every lookup is by its primary key, so the table is the index.

/// Bumped when the schema changes; a store with a newer version is refused.
pub const SCHEMA_VERSION: i64 = 1;

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value BLOB NOT NULL
) WITHOUT ROWID;

-- One row per object of any type: root (0,0), partitions (pid,0), collections and user objects.
CREATE TABLE IF NOT EXISTS objects (
    pid              INTEGER NOT NULL,
    oid              INTEGER NOT NULL,
    kind             INTEGER NOT NULL,          -- OSD object type code: 1, 2, 0x40, 0x80
    logical_len      INTEGER NOT NULL DEFAULT 0,
    used_bytes       INTEGER NOT NULL DEFAULT 0,
    created_ms       INTEGER NOT NULL,
    attr_accessed_ms INTEGER NOT NULL,
    attr_modified_ms INTEGER NOT NULL,
    data_accessed_ms INTEGER NOT NULL,
    data_modified_ms INTEGER NOT NULL,
    PRIMARY KEY (pid, oid)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS objects_by_kind ON objects (pid, kind, oid);

-- Stored attribute values: application-defined pages, settable standard attributes (quotas,
-- username, OSD name). Computed attributes (lengths, counts, timestamps) are never here.
CREATE TABLE IF NOT EXISTS attrs (
    pid    INTEGER NOT NULL,
    oid    INTEGER NOT NULL,
    page   INTEGER NOT NULL,
    number INTEGER NOT NULL,
    value  BLOB NOT NULL,
    PRIMARY KEY (pid, oid, page, number)
) WITHOUT ROWID;

-- Collection membership: user object (pid, oid) lists collection cid as attribute `number`
-- of its collections page (page 4).
CREATE TABLE IF NOT EXISTS members (
    pid    INTEGER NOT NULL,
    oid    INTEGER NOT NULL,
    number INTEGER NOT NULL,
    cid    INTEGER NOT NULL,
    PRIMARY KEY (pid, oid, number)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS members_by_collection ON members (pid, cid, oid);

-- Next target-chosen id per partition (pid 0: the next partition id). Only ever grows within
-- a format epoch, so a removed id is never handed out again.
-- The OSD's security keys (docs/security.md): kind 0 master, 1 root, 2 partition, 3 working;
-- pid and version are 0 where they do not apply. Added without a schema version bump: older
-- binaries never read it.
CREATE TABLE IF NOT EXISTS security_keys (
    kind    INTEGER NOT NULL,
    pid     INTEGER NOT NULL,
    version INTEGER NOT NULL,
    key     BLOB NOT NULL,
    key_id  BLOB NOT NULL,
    PRIMARY KEY (kind, pid, version)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS id_alloc (
    pid     INTEGER PRIMARY KEY,
    next_id INTEGER NOT NULL
);
";
