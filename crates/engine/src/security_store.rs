//! What an OSD's security checks need from the store: the key hierarchy (kept in SQLite so a
//! restart keeps the keys the security manager set), and each object's type, created time and
//! policy/access tag. The engine knows nothing of capabilities; the target's security gate
//! interprets these values.

use rusqlite::params;
use tessera_types::ObjectAddr;

use crate::db::{attrs, objects};
use crate::error::StorageError;
use crate::object::ObjectKind;
use crate::Engine;

/// Relative page of the policy/security attributes, and the policy/access tag on it (4 bytes).
pub const POLICY_PAGE_REL: u32 = 5;
pub const POLICY_ACCESS_TAG: u32 = 0x1;

/// One stored key: `kind` 0 master, 1 root, 2 partition, 3 working key.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredKey {
    pub kind: u8,
    pub partition_id: u64,
    pub version: u8,
    pub key: [u8; 32],
    pub key_id: [u8; 7],
}

impl std::fmt::Debug for StoredKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredKey {{ kind: {}, partition_id: {:#x}, version: {} }}", self.kind, self.partition_id, self.version)
    }
}

/// An object's security-relevant facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectSecurity {
    pub kind: ObjectKind,
    pub created_ms: u64,
    /// 0 when none is set.
    pub policy_tag: u32,
}

impl Engine {
    pub fn security_keys(&self) -> Result<Vec<StoredKey>, StorageError> {
        self.db.read(|c| {
            let mut stmt = c.prepare_cached("SELECT kind, pid, version, key, key_id FROM security_keys")?;
            let rows = stmt.query_map([], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, Vec<u8>>(3)?, r.get::<_, Vec<u8>>(4)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (kind, pid, version, key, key_id) = row?;
                let corrupt = || StorageError::Corrupt { table: "security_keys", reason: "malformed key row" };
                out.push(StoredKey {
                    kind: u8::try_from(kind).map_err(|_| corrupt())?,
                    partition_id: u64::try_from(pid).map_err(|_| corrupt())?,
                    version: u8::try_from(version).map_err(|_| corrupt())?,
                    key: key.as_slice().try_into().map_err(|_| corrupt())?,
                    key_id: key_id.as_slice().try_into().map_err(|_| corrupt())?,
                });
            }
            Ok(out)
        })
    }

    /// Stores (or replaces) a key, durably: a SET KEY that returned GOOD survives power loss.
    pub fn put_security_key(&self, k: &StoredKey) -> Result<(), StorageError> {
        self.db.write(true, |c| {
            c.prepare_cached(
                "INSERT INTO security_keys (kind, pid, version, key, key_id) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (kind, pid, version) DO UPDATE SET key = excluded.key, key_id = excluded.key_id",
            )?
            .execute(params![k.kind as i64, k.partition_id as i64, k.version as i64, &k.key[..], &k.key_id[..]])?;
            Ok(())
        })
    }

    /// Deletes the partition and working keys of `partition_id` (0: of every partition).
    pub fn delete_partition_keys(&self, partition_id: u64) -> Result<(), StorageError> {
        self.db.write(true, |c| {
            let sql = if partition_id == 0 {
                "DELETE FROM security_keys WHERE kind >= 2 AND ?1 = 0"
            } else {
                "DELETE FROM security_keys WHERE kind >= 2 AND pid = ?1"
            };
            c.prepare_cached(sql)?.execute([partition_id as i64])?;
            Ok(())
        })
    }

    /// The type, created time and policy/access tag of `addr`, if it exists.
    pub fn object_security(&self, addr: ObjectAddr) -> Result<Option<ObjectSecurity>, StorageError> {
        // Ids above i64::MAX are never stored, so no such object exists.
        if i64::try_from(addr.partition_id.0).is_err() || i64::try_from(addr.object_id.0).is_err() {
            return Ok(None);
        }
        if let Some(facts) = self.security_facts.get(addr) {
            return Ok(Some(facts));
        }
        let epoch = self.security_facts.epoch();
        let facts = self.db.read(|c| -> Result<Option<ObjectSecurity>, StorageError> {
            let Some(row) = objects::load(c, addr)? else { return Ok(None) };
            let page = row.kind.page_base() + POLICY_PAGE_REL;
            let tag = attrs::get(c, addr, page, POLICY_ACCESS_TAG)?
                .and_then(|v| <[u8; 4]>::try_from(v.as_slice()).ok())
                .map_or(0, u32::from_be_bytes);
            Ok(Some(ObjectSecurity { kind: row.kind, created_ms: row.times.created_ms, policy_tag: tag }))
        })?;
        if let Some(f) = facts {
            self.security_facts.put(addr, epoch, f);
        }
        Ok(facts)
    }
}
