//! Queries on the `attrs` (stored attribute values) and `members` (collection membership)
//! tables.

use rusqlite::{params, Connection, OptionalExtension};
use tessera_types::ObjectAddr;

use crate::error::StorageError;

fn key(addr: ObjectAddr) -> (i64, i64) {
    (addr.partition_id.0 as i64, addr.object_id.0 as i64)
}

pub fn get(c: &Connection, addr: ObjectAddr, page: u32, number: u32) -> Result<Option<Vec<u8>>, StorageError> {
    let (pid, oid) = key(addr);
    Ok(c.prepare_cached("SELECT value FROM attrs WHERE pid = ?1 AND oid = ?2 AND page = ?3 AND number = ?4")?
        .query_row(params![pid, oid, page as i64, number as i64], |r| r.get(0))
        .optional()?)
}

/// Stores a value; an empty value deletes (OSD-2 §5.2.2.3).
pub fn set(c: &Connection, addr: ObjectAddr, page: u32, number: u32, value: &[u8]) -> Result<(), StorageError> {
    let (pid, oid) = key(addr);
    if value.is_empty() {
        c.prepare_cached("DELETE FROM attrs WHERE pid = ?1 AND oid = ?2 AND page = ?3 AND number = ?4")?
            .execute(params![pid, oid, page as i64, number as i64])?;
    } else {
        c.prepare_cached(
            "INSERT INTO attrs (pid, oid, page, number, value) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (pid, oid, page, number) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![pid, oid, page as i64, number as i64, value])?;
    }
    Ok(())
}

/// Every stored (number, value) of one page, by number.
pub fn page(c: &Connection, addr: ObjectAddr, page: u32) -> Result<Vec<(u32, Vec<u8>)>, StorageError> {
    let (pid, oid) = key(addr);
    let mut stmt = c.prepare_cached("SELECT number, value FROM attrs WHERE pid = ?1 AND oid = ?2 AND page = ?3 ORDER BY number")?;
    let rows = stmt.query_map(params![pid, oid, page as i64], |r| Ok((r.get::<_, i64>(0)? as u32, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The pages holding stored values, ascending.
pub fn pages(c: &Connection, addr: ObjectAddr) -> Result<Vec<u32>, StorageError> {
    let (pid, oid) = key(addr);
    let mut stmt = c.prepare_cached("SELECT DISTINCT page FROM attrs WHERE pid = ?1 AND oid = ?2 ORDER BY page")?;
    let rows = stmt.query_map(params![pid, oid], |r| Ok(r.get::<_, i64>(0)? as u32))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The collections page of a user object: (attribute number, collection id), by number.
pub fn memberships(c: &Connection, addr: ObjectAddr) -> Result<Vec<(u32, u64)>, StorageError> {
    let (pid, oid) = key(addr);
    let mut stmt = c.prepare_cached("SELECT number, cid FROM members WHERE pid = ?1 AND oid = ?2 ORDER BY number")?;
    let rows = stmt.query_map(params![pid, oid], |r| Ok((r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u64)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn membership(c: &Connection, addr: ObjectAddr, number: u32) -> Result<Option<u64>, StorageError> {
    let (pid, oid) = key(addr);
    Ok(c.prepare_cached("SELECT cid FROM members WHERE pid = ?1 AND oid = ?2 AND number = ?3")?
        .query_row(params![pid, oid, number as i64], |r| r.get::<_, i64>(0))
        .optional()?
        .map(|v| v as u64))
}

/// Whether user object `addr` is already a member of `cid` (under any attribute number).
pub fn is_member(c: &Connection, addr: ObjectAddr, cid: u64) -> Result<bool, StorageError> {
    let (pid, oid) = key(addr);
    Ok(c.prepare_cached("SELECT 1 FROM members WHERE pid = ?1 AND cid = ?2 AND oid = ?3")?
        .query_row(params![pid, cid as i64, oid], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Puts `addr` into collection `cid` as attribute `number` of its collections page; `None`
/// removes that attribute.
pub fn set_membership(c: &Connection, addr: ObjectAddr, number: u32, cid: Option<u64>) -> Result<(), StorageError> {
    let (pid, oid) = key(addr);
    c.prepare_cached("DELETE FROM members WHERE pid = ?1 AND oid = ?2 AND number = ?3")?.execute(params![pid, oid, number as i64])?;
    if let Some(cid) = cid {
        c.prepare_cached("INSERT INTO members (pid, oid, number, cid) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![pid, oid, number as i64, cid as i64])?;
    }
    Ok(())
}

/// Members of collection (pid, cid) with oid >= `from`, at most `limit`, ascending.
pub fn members(c: &Connection, pid: u64, cid: u64, from: u64, limit: u64) -> Result<Vec<u64>, StorageError> {
    let mut stmt = c.prepare_cached("SELECT oid FROM members WHERE pid = ?1 AND cid = ?2 AND oid >= ?3 ORDER BY oid LIMIT ?4")?;
    let rows = stmt.query_map(
        params![pid as i64, cid as i64, from.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64],
        |r| r.get::<_, i64>(0),
    )?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?.into_iter().map(|v| v as u64).collect())
}

pub fn has_members(c: &Connection, pid: u64, cid: u64) -> Result<bool, StorageError> {
    Ok(c.prepare_cached("SELECT 1 FROM members WHERE pid = ?1 AND cid = ?2 LIMIT 1")?
        .query_row(params![pid as i64, cid as i64], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Drops every membership of collection (pid, cid) (REMOVE COLLECTION with force).
pub fn clear_collection(c: &Connection, pid: u64, cid: u64) -> Result<(), StorageError> {
    c.prepare_cached("DELETE FROM members WHERE pid = ?1 AND cid = ?2")?.execute(params![pid as i64, cid as i64])?;
    Ok(())
}
