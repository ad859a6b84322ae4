//! Commands that make and unmake objects: FORMAT OSD, CREATE / REMOVE PARTITION, CREATE /
//! REMOVE COLLECTION, CREATE / REMOVE, and the GET / SET ATTRIBUTES commands (whose only
//! function is their attribute lists).
//!
//! Target-chosen ids come from `id_alloc`, which only grows within a format epoch, so a
//! removed id is never handed out again. A requested id also moves the counter past itself.

use std::sync::atomic::Ordering;

use rusqlite::Connection;
use tessera_osd_proto::Reply;
use tessera_types::ids::FIRST_ASSIGNABLE_ID;
use tessera_types::ObjectAddr;

use crate::db::{self, attrs as stored, objects as rows};
use crate::engine::{filesystem_bytes, reply, Cx, Engine};
use crate::error::{CommandError, CDB_LENGTH, CDB_OBJECT_ID, CDB_PARTITION_ID};
use crate::object::{sql_id, ObjectKind, ID_MAX};
use crate::{attrs, quotas};

impl Engine {
    pub(crate) fn format(&self, cx: &mut Cx<'_, '_>, capacity_bytes: u64) -> Result<Reply, CommandError> {
        let _epoch = self.epoch.write().unwrap_or_else(|p| p.into_inner());
        self.validate_set(cx, ObjectKind::Root)?;
        let capacity = if capacity_bytes == 0 { filesystem_bytes(self.dir())? } else { capacity_bytes };
        self.data.wipe()?;
        let retrieved = self.db.write(true, |c| {
            rows::wipe(c)?;
            rows::insert(c, ObjectAddr::ROOT, ObjectKind::Root, cx.now_ms)?;
            db::meta_set(c, "capacity_bytes", &capacity.to_be_bytes())?;
            self.capacity_bytes.store(capacity, Ordering::Relaxed);
            cx.current.object = Some((ObjectKind::Root, ObjectAddr::ROOT));
            self.finish_in(c, cx, ObjectAddr::ROOT, &[])
        })?;
        self.lists.changed();
        Ok(reply(retrieved))
    }

    pub(crate) fn create_partition(&self, cx: &mut Cx<'_, '_>, requested: Option<u64>) -> Result<Reply, CommandError> {
        self.validate_set(cx, ObjectKind::Partition)?;
        let retrieved = self.db.write(cx.durable, |c| {
            let pid = match requested {
                Some(pid) if pid < FIRST_ASSIGNABLE_ID => return Err(CommandError::InvalidField { byte: CDB_PARTITION_ID }),
                Some(pid) => pid,
                None => rows::next_id(c, 0, FIRST_ASSIGNABLE_ID)?,
            };
            if pid > ID_MAX {
                return Err(match requested {
                    Some(id) => CommandError::IdOutOfRange { id, field: CDB_PARTITION_ID },
                    None => CommandError::IdsExhausted { addr: ObjectAddr::ROOT },
                });
            }
            let addr = ObjectAddr::partition(pid);
            if rows::load(c, addr)?.is_some() {
                return Err(CommandError::ObjectExists { addr, field: CDB_PARTITION_ID });
            }
            let quota = quotas::partition_count(c)?;
            if quota != crate::pages::quota::UNLIMITED && rows::count(c, 0, ObjectKind::Partition)? >= quota {
                return Err(CommandError::QuotaExceeded { addr: ObjectAddr::ROOT, quota: "partition count" });
            }
            rows::insert(c, addr, ObjectKind::Partition, cx.now_ms)?;
            rows::advance_next_id(c, 0, pid.saturating_add(1))?;
            cx.current.object = Some((ObjectKind::Partition, addr));
            self.finish_in(c, cx, addr, &[])
        })?;
        self.lists.changed();
        Ok(reply(retrieved))
    }

    pub(crate) fn remove_partition(&self, cx: &mut Cx<'_, '_>, pid: u64) -> Result<Reply, CommandError> {
        let addr = ObjectAddr::partition(pid);
        self.db.write(cx.durable, |c| {
            self.require(c, addr, &[ObjectKind::Partition])?;
            if rows::partition_has_objects(c, pid)? {
                return Err(CommandError::NotEmpty { addr });
            }
            rows::delete(c, addr)?;
            Ok::<_, CommandError>(())
        })?;
        self.data.remove_partition(pid)?;
        self.lists.changed();
        cx.current.object = Some((ObjectKind::Partition, addr));
        Ok(reply(self.retrieve_current_only(cx)))
    }

    /// Allocates `count` consecutive ids in partition `pid` (requested or target-chosen) and
    /// inserts rows of `kind` for them. Returns the first id.
    fn allocate(&self, c: &Connection, cx: &Cx<'_, '_>, pid: u64, requested: Option<u64>, count: u64, kind: ObjectKind) -> Result<u64, CommandError> {
        let partition = ObjectAddr::partition(pid);
        self.require(c, partition, &[ObjectKind::Partition])?;
        let first = match requested {
            Some(id) if id < FIRST_ASSIGNABLE_ID => return Err(CommandError::InvalidField { byte: CDB_OBJECT_ID }),
            Some(id) => id,
            None => rows::next_id(c, pid, FIRST_ASSIGNABLE_ID)?,
        };
        let last = first.checked_add(count - 1).filter(|l| *l <= ID_MAX);
        let Some(last) = last else {
            return Err(match requested {
                Some(id) => CommandError::IdOutOfRange { id, field: CDB_OBJECT_ID },
                None => CommandError::IdsExhausted { addr: partition },
            });
        };
        sql_id(last, CDB_OBJECT_ID)?;
        if rows::any_in_range(c, pid, first, count)? {
            return Err(CommandError::ObjectExists { addr: ObjectAddr::new(pid, first), field: CDB_OBJECT_ID });
        }
        let quota = quotas::partition_object_count(c, pid)?;
        if quota != crate::pages::quota::UNLIMITED {
            let present = rows::count(c, pid, ObjectKind::User)? + rows::count(c, pid, ObjectKind::Collection)?;
            if present + count > quota {
                return Err(CommandError::QuotaExceeded { addr: partition, quota: "partition object count" });
            }
        }
        for id in first..=last {
            rows::insert(c, ObjectAddr::new(pid, id), kind, cx.now_ms)?;
        }
        rows::advance_next_id(c, pid, last + 1)?;
        Ok(first)
    }

    /// CREATE: `count` user objects with consecutive ids. The set list applies to every
    /// created object; the get list and the Current Command page describe the first.
    pub(crate) fn create(&self, cx: &mut Cx<'_, '_>, pid: u64, requested: Option<u64>, count: u16) -> Result<Reply, CommandError> {
        if count == 0 {
            return Err(CommandError::InvalidField { byte: CDB_LENGTH });
        }
        self.validate_set(cx, ObjectKind::User)?;
        let first = self.create_user_objects(cx, pid, requested, count as u64)?;
        Ok(reply(first.1))
    }

    /// Creates user objects and runs the set/get lists; returns (first id, retrieved).
    pub(crate) fn create_user_objects(
        &self,
        cx: &mut Cx<'_, '_>,
        pid: u64,
        requested: Option<u64>,
        count: u64,
    ) -> Result<(u64, Vec<tessera_osd_proto::RetrievedAttr>), CommandError> {
        let out = self.db.write(cx.durable, |c| {
            // Ids from the partition's high-water mark up were never used (it only rises).
            let never_used_from = rows::next_id(c, pid, FIRST_ASSIGNABLE_ID)?;
            let first = self.allocate(c, cx, pid, requested, count, ObjectKind::User)?;
            if requested.is_some() {
                // A requested id below the mark may have been used before (and removed): make
                // sure no data of an earlier incarnation survives, e.g. a file orphaned by a
                // crash during REMOVE. The rows were just checked absent, so nothing live is
                // touched. Batches of fresh ids (a metadata server's precreation) skip this.
                for oid in first..(first + count).min(never_used_from) {
                    self.data.remove(ObjectAddr::new(pid, oid))?;
                }
            }
            let addr = ObjectAddr::new(pid, first);
            cx.current.object = Some((ObjectKind::User, addr));
            for oid in first + 1..first + count {
                let row = rows::load(c, ObjectAddr::new(pid, oid))?.ok_or(CommandError::NoSuchObject { addr, field: CDB_OBJECT_ID })?;
                attrs::apply_set(c, &*self.data, &row, &cx.req.set_attrs)?;
            }
            let retrieved = self.finish_in(c, cx, addr, &[])?;
            Ok::<_, CommandError>((first, retrieved))
        })?;
        self.lists.changed();
        Ok(out)
    }

    pub(crate) fn create_collection(&self, cx: &mut Cx<'_, '_>, pid: u64, requested: Option<u64>) -> Result<Reply, CommandError> {
        self.validate_set(cx, ObjectKind::Collection)?;
        let retrieved = self.db.write(cx.durable, |c| {
            let cid = self.allocate(c, cx, pid, requested, 1, ObjectKind::Collection)?;
            let addr = ObjectAddr::new(pid, cid);
            cx.current.object = Some((ObjectKind::Collection, addr));
            self.finish_in(c, cx, addr, &[])
        })?;
        self.lists.changed();
        Ok(reply(retrieved))
    }

    pub(crate) fn remove(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr) -> Result<Reply, CommandError> {
        let _lock = self.locks.write(addr);
        let remove_row = |cx: &mut Cx<'_, '_>| {
            self.db.write(cx.durable, |c| {
                let row = self.require(c, addr, &[ObjectKind::User])?;
                self.remove_row(c, cx, &row)
            })
        };
        match remove_row(cx) {
            // The attribute store cannot grow on a full disk, not even to delete: the data
            // goes first to make room (the row, still there, reads as an object whose bytes
            // are zeros until the second try, or a later REMOVE, deletes it).
            Err(e) if e.is_disk_full() => {
                tracing::warn!(%addr, "the disk is full: removing the object's data before its row");
                self.data.remove(addr)?;
                remove_row(cx)?;
            }
            other => other?,
        }
        // The row is gone first, then the data: a crash in between leaves an orphan file
        // under an id that target-chosen creation never reuses (a requested re-creation
        // removes it).
        self.data.remove(addr)?;
        self.lists.changed();
        Ok(reply(self.retrieve_current_only(cx)))
    }

    /// Deletes a user object's row and gives its used capacity back to the partition.
    pub(crate) fn remove_row(&self, c: &Connection, cx: &mut Cx<'_, '_>, row: &crate::object::ObjectRow) -> Result<(), CommandError> {
        rows::set_used(c, row.addr, row.used_bytes, 0)?;
        rows::delete(c, row.addr)?;
        cx.current.object = Some((row.kind, row.addr));
        cx.current.used_change = Some(cx.current.used_change.unwrap_or(0) - row.used_bytes as i64);
        Ok(())
    }

    pub(crate) fn remove_collection(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, force: bool) -> Result<Reply, CommandError> {
        self.db.write(cx.durable, |c| {
            self.require(c, addr, &[ObjectKind::Collection])?;
            if stored::has_members(c, addr.partition_id.0, addr.object_id.0)? {
                if !force {
                    return Err(CommandError::NotEmpty { addr });
                }
                stored::clear_collection(c, addr.partition_id.0, addr.object_id.0)?;
            }
            rows::delete(c, addr)?;
            Ok::<_, CommandError>(())
        })?;
        cx.current.object = Some((ObjectKind::Collection, addr));
        self.lists.changed();
        Ok(reply(self.retrieve_current_only(cx)))
    }

    /// GET ATTRIBUTES without a set list: the hot path of a metadata workload, so one reader
    /// checkout, one row lookup, and a write only when the accessed time is stale.
    fn get_attributes(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr) -> Result<Reply, CommandError> {
        let all = [ObjectKind::Root, ObjectKind::Partition, ObjectKind::Collection, ObjectKind::User];
        let (row, retrieved) = self.retrieve(cx, addr, |c| self.require(c, addr, &all))?;
        if cx.update_ts && attrs::gets_anything(&cx.req.get_attrs) {
            self.touch_accessed(cx, &row, false)?;
        }
        Ok(reply(retrieved))
    }

    /// GET ATTRIBUTES and SET ATTRIBUTES: any object type; the lists are the whole command.
    pub(crate) fn attributes(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr) -> Result<Reply, CommandError> {
        let all = [ObjectKind::Root, ObjectKind::Partition, ObjectKind::Collection, ObjectKind::User];
        if cx.req.set_attrs.is_empty() {
            return self.get_attributes(cx, addr);
        }
        // Setting the logical length changes data: exclude other commands on the object.
        let _lock = (addr.object_id.0 != 0).then(|| self.locks.write(addr));
        let retrieved = self.db.write(cx.durable, |c| {
            let row = self.require(c, addr, &all)?;
            attrs::validate_set(row.kind, &cx.req.set_attrs)?;
            cx.current.object = Some((row.kind, addr));
            self.finish_in(c, cx, addr, &[])
        })?;
        if cx.durable && addr.object_id.0 != 0 {
            self.data.sync(addr)?;
        }
        if cx.req.set_attrs.iter().any(|a| a.id.page == crate::pages::rel::COLLECTIONS) {
            self.lists.changed();
        }
        Ok(reply(retrieved))
    }
}
