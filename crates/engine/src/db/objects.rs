//! Queries on the `objects` and `id_alloc` tables. Every function takes a plain connection so
//! it runs the same inside a write transaction or on a reader.

use rusqlite::{params, Connection, OptionalExtension, Row};
use tessera_types::ObjectAddr;

use crate::error::StorageError;
use crate::object::{ObjectKind, ObjectRow, Timestamps};

macro_rules! columns {
    () => {
        "pid, oid, kind, logical_len, used_bytes, created_ms, attr_accessed_ms, attr_modified_ms, data_accessed_ms, data_modified_ms"
    };
}
// The SQL is built at compile time: `prepare_cached` looks statements up by their text, and
// the hot path should not format a string per call.
const SELECT_ROW: &str = concat!("SELECT ", columns!(), " FROM objects WHERE pid = ?1 AND oid = ?2");
const INSERT_ROW: &str = concat!("INSERT INTO objects (", columns!(), ") VALUES (?1, ?2, ?3, 0, 0, ?4, ?4, ?4, ?4, ?4)");

fn u(v: i64, reason: &'static str) -> Result<u64, StorageError> {
    u64::try_from(v).map_err(|_| StorageError::Corrupt { table: "objects", reason })
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<[i64; 10]> {
    let mut v = [0i64; 10];
    for (i, slot) in v.iter_mut().enumerate() {
        *slot = r.get(i)?;
    }
    Ok(v)
}

fn decode(v: [i64; 10]) -> Result<ObjectRow, StorageError> {
    Ok(ObjectRow {
        addr: ObjectAddr::new(u(v[0], "negative pid")?, u(v[1], "negative oid")?),
        kind: ObjectKind::from_code(v[2]).ok_or(StorageError::Corrupt { table: "objects", reason: "unknown kind" })?,
        logical_len: u(v[3], "negative length")?,
        used_bytes: u(v[4], "negative used capacity")?,
        times: Timestamps {
            created_ms: u(v[5], "negative time")?,
            attr_accessed_ms: u(v[6], "negative time")?,
            attr_modified_ms: u(v[7], "negative time")?,
            data_accessed_ms: u(v[8], "negative time")?,
            data_modified_ms: u(v[9], "negative time")?,
        },
    })
}

/// The row of `addr`, if the object exists.
pub fn load(c: &Connection, addr: ObjectAddr) -> Result<Option<ObjectRow>, StorageError> {
    let raw = c
        .prepare_cached(SELECT_ROW)?
        .query_row(params![addr.partition_id.0 as i64, addr.object_id.0 as i64], from_row)
        .optional()?;
    raw.map(decode).transpose()
}

pub fn insert(c: &Connection, addr: ObjectAddr, kind: ObjectKind, now_ms: u64) -> Result<(), StorageError> {
    let now = now_ms as i64;
    c.prepare_cached(INSERT_ROW)?
        .execute(params![addr.partition_id.0 as i64, addr.object_id.0 as i64, kind.code() as i64, now])?;
    Ok(())
}

/// Deletes an object's row, its stored attributes and its memberships (as a member and, for
/// a collection, of its members).
pub fn delete(c: &Connection, addr: ObjectAddr) -> Result<(), StorageError> {
    let (pid, oid) = (addr.partition_id.0 as i64, addr.object_id.0 as i64);
    c.prepare_cached("DELETE FROM objects WHERE pid = ?1 AND oid = ?2")?.execute(params![pid, oid])?;
    c.prepare_cached("DELETE FROM attrs WHERE pid = ?1 AND oid = ?2")?.execute(params![pid, oid])?;
    c.prepare_cached("DELETE FROM members WHERE pid = ?1 AND oid = ?2")?.execute(params![pid, oid])?;
    c.prepare_cached("DELETE FROM members WHERE pid = ?1 AND cid = ?2")?.execute(params![pid, oid])?;
    Ok(())
}

pub fn set_logical_len(c: &Connection, addr: ObjectAddr, len: u64) -> Result<(), StorageError> {
    c.prepare_cached("UPDATE objects SET logical_len = ?3 WHERE pid = ?1 AND oid = ?2")?
        .execute(params![addr.partition_id.0 as i64, addr.object_id.0 as i64, len as i64])?;
    Ok(())
}

/// Sets a user object's used capacity and adds the change to its partition and the root.
pub fn set_used(c: &Connection, addr: ObjectAddr, old: u64, new: u64) -> Result<(), StorageError> {
    if old == new {
        return Ok(());
    }
    let delta = new as i64 - old as i64;
    let pid = addr.partition_id.0 as i64;
    c.prepare_cached("UPDATE objects SET used_bytes = ?3 WHERE pid = ?1 AND oid = ?2")?
        .execute(params![pid, addr.object_id.0 as i64, new as i64])?;
    c.prepare_cached(
        "UPDATE objects SET used_bytes = MAX(used_bytes + ?2, 0) WHERE (pid = ?1 AND oid = 0) OR (pid = 0 AND oid = 0)",
    )?
    .execute(params![pid, delta])?;
    Ok(())
}

/// Which timestamps a command updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    AttrAccessed,
    AttrModified,
    DataAccessed,
    DataModified,
    /// A data change that also changed an attribute (logical length, membership).
    DataAndAttrModified,
}

pub fn touch(c: &Connection, addr: ObjectAddr, what: Touch, now_ms: u64) -> Result<(), StorageError> {
    let sql = match what {
        Touch::AttrAccessed => "UPDATE objects SET attr_accessed_ms = ?3 WHERE pid = ?1 AND oid = ?2",
        Touch::AttrModified => "UPDATE objects SET attr_modified_ms = ?3 WHERE pid = ?1 AND oid = ?2",
        Touch::DataAccessed => "UPDATE objects SET data_accessed_ms = ?3 WHERE pid = ?1 AND oid = ?2",
        Touch::DataModified => "UPDATE objects SET data_modified_ms = ?3 WHERE pid = ?1 AND oid = ?2",
        Touch::DataAndAttrModified => {
            "UPDATE objects SET data_modified_ms = ?3, attr_modified_ms = ?3 WHERE pid = ?1 AND oid = ?2"
        }
    };
    c.prepare_cached(sql)?.execute(params![addr.partition_id.0 as i64, addr.object_id.0 as i64, now_ms as i64])?;
    Ok(())
}

/// Objects of `kind` in partition `pid`; for `ObjectKind::Partition`, all partitions (`pid`
/// is ignored).
pub fn count(c: &Connection, pid: u64, kind: ObjectKind) -> Result<u64, StorageError> {
    let n: i64 = if kind == ObjectKind::Partition {
        c.prepare_cached("SELECT COUNT(*) FROM objects WHERE oid = 0 AND kind = ?1")?.query_row([kind.code() as i64], |r| r.get(0))?
    } else {
        c.prepare_cached("SELECT COUNT(*) FROM objects WHERE pid = ?1 AND kind = ?2")?
            .query_row(params![pid as i64, kind.code() as i64], |r| r.get(0))?
    };
    Ok(n as u64)
}

/// Partitions (pid, 0) with pid >= `from`, at most `limit`, ascending.
pub fn list_partitions(c: &Connection, from: u64, limit: u64) -> Result<Vec<u64>, StorageError> {
    let mut stmt = c.prepare_cached("SELECT pid FROM objects WHERE oid = 0 AND pid > 0 AND pid >= ?1 ORDER BY pid LIMIT ?2")?;
    let rows = stmt.query_map(params![from.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64], |r| r.get::<_, i64>(0))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?.into_iter().map(|v| v as u64).collect())
}

/// Collections and user objects of partition `pid` with oid >= `from`, at most `limit`.
pub fn list_objects(c: &Connection, pid: u64, from: u64, limit: u64) -> Result<Vec<u64>, StorageError> {
    let mut stmt = c.prepare_cached("SELECT oid FROM objects WHERE pid = ?1 AND oid > 0 AND oid >= ?2 ORDER BY oid LIMIT ?3")?;
    let rows = stmt.query_map(
        params![pid as i64, from.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64],
        |r| r.get::<_, i64>(0),
    )?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?.into_iter().map(|v| v as u64).collect())
}

/// Whether partition `pid` holds any collection or user object.
pub fn partition_has_objects(c: &Connection, pid: u64) -> Result<bool, StorageError> {
    Ok(c.prepare_cached("SELECT 1 FROM objects WHERE pid = ?1 AND oid > 0 LIMIT 1")?
        .query_row([pid as i64], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether any object in [first, first + count) exists in partition `pid` (pid 0: partitions).
pub fn any_in_range(c: &Connection, pid: u64, first: u64, count: u64) -> Result<bool, StorageError> {
    let last = first.saturating_add(count - 1).min(i64::MAX as u64);
    let sql = if pid == 0 {
        "SELECT 1 FROM objects WHERE oid = 0 AND pid BETWEEN ?2 AND ?3 LIMIT 1"
    } else {
        "SELECT 1 FROM objects WHERE pid = ?1 AND oid BETWEEN ?2 AND ?3 LIMIT 1"
    };
    Ok(c.prepare_cached(sql)?.query_row(params![pid as i64, first as i64, last as i64], |_| Ok(())).optional()?.is_some())
}

/// The next target-chosen id of partition `pid` (pid 0: partitions).
pub fn next_id(c: &Connection, pid: u64, first_assignable: u64) -> Result<u64, StorageError> {
    let v: Option<i64> =
        c.prepare_cached("SELECT next_id FROM id_alloc WHERE pid = ?1")?.query_row([pid as i64], |r| r.get(0)).optional()?;
    Ok(v.map_or(first_assignable, |v| v as u64).max(first_assignable))
}

/// Records that ids below `next` are used in partition `pid`; never moves backwards.
pub fn advance_next_id(c: &Connection, pid: u64, next: u64) -> Result<(), StorageError> {
    c.prepare_cached(
        "INSERT INTO id_alloc (pid, next_id) VALUES (?1, ?2)
         ON CONFLICT (pid) DO UPDATE SET next_id = MAX(next_id, excluded.next_id)",
    )?
    .execute(params![pid as i64, next.min(i64::MAX as u64) as i64])?;
    Ok(())
}

/// Sum of used capacity over a collection's members.
pub fn collection_used(c: &Connection, pid: u64, cid: u64) -> Result<u64, StorageError> {
    let v: i64 = c
        .prepare_cached(
            "SELECT COALESCE(SUM(o.used_bytes), 0) FROM members m JOIN objects o ON o.pid = m.pid AND o.oid = m.oid
             WHERE m.pid = ?1 AND m.cid = ?2",
        )?
        .query_row(params![pid as i64, cid as i64], |r| r.get(0))?;
    Ok(v.max(0) as u64)
}

/// Forgets everything (FORMAT OSD).
pub fn wipe(c: &Connection) -> Result<(), StorageError> {
    c.execute_batch("DELETE FROM objects; DELETE FROM attrs; DELETE FROM members; DELETE FROM id_alloc;")?;
    Ok(())
}
