//! Data commands: READ, WRITE, APPEND, CREATE AND WRITE, PUNCH, CLEAR, READ MAP.
//!
//! The logical length lives in SQLite; the data store may hold more (a crash between a data
//! write and its metadata commit) or less (a sparse tail). Reads are clamped to the logical
//! length; before a command extends an object, any stale tail beyond the logical length is
//! trimmed, so it can never reappear as data.
//!
//! Data I/O runs outside the SQLite writer mutex, under the object's own lock, so writes to
//! different objects proceed in parallel; the metadata commit afterwards is short.

use tessera_osd_proto::{DataLayout, MapEntry, MapType, ReadMapResult, Reply};
use tessera_types::{limits, ObjectAddr};

use crate::db::objects::{self as rows, Touch};
use crate::engine::{Cx, Engine};
use crate::error::{read_past_end, CommandError, StorageError, CDB_LENGTH};
use crate::object::{ObjectKind, ObjectRow, ID_MAX};
use crate::pages::quota::UNLIMITED;
use crate::quotas;
use crate::store::{ObjectData, Piece};

/// Trims data stored beyond the logical length (see the module comment).
pub fn trim_stale_tail(data: &dyn ObjectData, addr: ObjectAddr, logical_len: u64) -> Result<(), StorageError> {
    if data.stored_len(addr)? > logical_len {
        data.set_len(addr, logical_len)?;
    }
    Ok(())
}

/// Room to reserve for a layout's piece list: its piece count, but no more than the longest
/// SGL, so a strided layout of one-byte blocks does not reserve gigabytes up front.
pub(crate) fn piece_capacity(layout: &DataLayout, len: u64) -> usize {
    layout.piece_count(len).min(limits::SGL_ENTRIES_MAX) as usize
}

/// Expands a layout into pieces with their buffer offsets, in list order.
pub(crate) fn pieces(layout: &DataLayout, offset: u64, len: u64) -> Vec<Piece> {
    let mut out = Vec::with_capacity(piece_capacity(layout, len));
    let mut buf_offset = 0usize;
    layout.for_each_extent(offset, len, |object_offset, n| {
        out.push(Piece { object_offset, buf_offset, len: n as usize });
        buf_offset += n as usize;
    });
    out
}

/// What a data-changing command did, for the metadata commit.
pub(crate) struct DataChange {
    pub new_len: u64,
    pub used_before: u64,
    pub used_after: u64,
}

impl Engine {
    pub(crate) fn user_row(&self, addr: ObjectAddr) -> Result<ObjectRow, CommandError> {
        self.db.read(|c| self.require(c, addr, &[ObjectKind::User]))
    }

    /// Trims data stored beyond the logical length, except bytes that WRITEs still receiving
    /// their data have placed there (placements.rs). The caller holds the object lock.
    pub(crate) fn trim_stale_tail(&self, addr: ObjectAddr, logical_len: u64) -> Result<(), StorageError> {
        trim_stale_tail(&*self.data, addr, self.placements.keep_up_to(addr, logical_len))
    }

    /// Commits a data change: length, used capacity (object, partition, root), data
    /// modified time, then the set and get lists.
    pub(crate) fn commit_change(&self, cx: &mut Cx<'_, '_>, row: &ObjectRow, change: DataChange) -> Result<Vec<tessera_osd_proto::RetrievedAttr>, CommandError> {
        let addr = row.addr;
        cx.current.object = Some((ObjectKind::User, addr));
        cx.current.used_change = Some(change.used_after as i64 - change.used_before as i64);
        self.db.write(cx.durable, |c| {
            if change.new_len != row.logical_len {
                rows::set_logical_len(c, addr, change.new_len)?;
            }
            rows::set_used(c, addr, change.used_before, change.used_after)?;
            self.finish_in(c, cx, addr, &[Touch::DataModified])
        })
    }

    /// Checks a write of `written` bytes ending at `end` against the object length quota, the
    /// partition capacity quota and the formatted capacity. Growth is counted as the bytes
    /// beyond the current logical length, but never more than the bytes written: a write past
    /// a hole allocates only its own data, so a sparse file may be larger than the device.
    pub(crate) fn check_quotas(&self, row: &ObjectRow, end: u64, written: u64) -> Result<(), CommandError> {
        let addr = row.addr;
        let pid = addr.partition_id.0;
        let exceeded = |quota| CommandError::QuotaExceeded { addr, quota };
        if end > ID_MAX {
            return Err(exceeded("maximum user object length"));
        }
        let growth = end.saturating_sub(row.logical_len).min(written);
        self.db.read(|c| {
            if end > quotas::max_object_length(c, addr)? {
                return Err(exceeded("maximum user object length"));
            }
            if growth == 0 {
                return Ok(());
            }
            let capacity_quota = quotas::partition_capacity(c, pid)?;
            if capacity_quota != UNLIMITED {
                let used = rows::load(c, ObjectAddr::partition(pid))?.map_or(0, |r| r.used_bytes);
                if used.saturating_add(growth) > capacity_quota {
                    return Err(exceeded("partition capacity"));
                }
            }
            let root_used = rows::load(c, ObjectAddr::ROOT)?.map_or(0, |r| r.used_bytes);
            if root_used.saturating_add(growth) > self.facts(0).capacity_bytes {
                return Err(exceeded("formatted capacity"));
            }
            Ok(())
        })
    }

    pub(crate) fn read(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, offset: u64, len: u64, layout: &DataLayout) -> Result<Reply, CommandError> {
        if len > limits::TRANSFER_LEN_MAX {
            return Err(CommandError::InvalidField { byte: CDB_LENGTH });
        }
        self.validate_set(cx, ObjectKind::User)?;
        let _lock = self.locks.read(addr);
        let row = self.user_row(addr)?;
        let mut buf = vec![0u8; len as usize];
        // One pass over the layout: each piece clamped to the logical length (what lies past
        // it stays zero), its buffer offset where the unclamped pieces would put it.
        let mut past_end = false;
        let mut clamped: Vec<Piece> = Vec::with_capacity(piece_capacity(layout, len));
        let mut buf_offset = 0usize;
        layout.for_each_extent(offset, len, |object_offset, n| {
            let readable = row.logical_len.saturating_sub(object_offset).min(n) as usize;
            past_end |= readable < n as usize;
            if readable > 0 {
                clamped.push(Piece { object_offset, buf_offset, len: readable });
            }
            buf_offset += n as usize;
        });
        self.data.read_pieces(addr, &clamped, &mut buf)?;
        cx.current.object = Some((ObjectKind::User, addr));
        let retrieved = self.finish_read(cx, addr, true)?;
        Ok(Reply { data_in: buf, retrieved, recovered: past_end.then(read_past_end), member_retrieved: Vec::new() })
    }

    /// Writes `data` at the pieces of `layout` and commits. The caller holds the object lock.
    fn write_locked(&self, cx: &mut Cx<'_, '_>, row: &ObjectRow, offset: u64, len: u64, layout: &DataLayout) -> Result<Reply, CommandError> {
        let addr = row.addr;
        let data = cx.req.data;
        assert_eq!(data.len() as u64, len, "the decoder guarantees data of the CDB length");
        let list = pieces(layout, offset, len);
        let end = list.iter().map(|p| p.object_offset + p.len as u64).max().unwrap_or(offset);
        self.check_quotas(row, end, len)?;
        if end > row.logical_len {
            self.trim_stale_tail(addr, row.logical_len)?;
        }
        self.data.write_pieces(addr, &list, data)?;
        if cx.durable {
            self.data.sync(addr)?;
        }
        let used_after = self.data.used_bytes(addr)?;
        let change = DataChange { new_len: row.logical_len.max(end), used_before: row.used_bytes, used_after };
        let retrieved = self.commit_change(cx, row, change)?;
        Ok(crate::engine::reply(retrieved))
    }

    pub(crate) fn write(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, offset: u64, len: u64, layout: &DataLayout) -> Result<Reply, CommandError> {
        self.validate_set(cx, ObjectKind::User)?;
        let _lock = self.locks.write(addr);
        let row = self.user_row(addr)?;
        self.write_locked(cx, &row, offset, len, layout)
    }

    pub(crate) fn append(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, len: u64) -> Result<Reply, CommandError> {
        self.validate_set(cx, ObjectKind::User)?;
        let _lock = self.locks.write(addr);
        let row = self.user_row(addr)?;
        cx.current.append_start = Some(row.logical_len);
        self.write_locked(cx, &row, row.logical_len, len, &DataLayout::Contiguous)
    }

    /// CREATE AND WRITE: one object (requested or target-chosen id) and its data. The create
    /// commits first; if the write then fails, the object exists, empty.
    pub(crate) fn create_and_write(
        &self,
        cx: &mut Cx<'_, '_>,
        pid: u64,
        requested: Option<u64>,
        offset: u64,
        len: u64,
        layout: &DataLayout,
    ) -> Result<Reply, CommandError> {
        self.validate_set(cx, ObjectKind::User)?;
        // The set and get lists run once, after the data is written: the create step sees a
        // copy of the request without them. Its commit need not be durable; the write's is,
        // and the WAL fsync covers both.
        let plain = tessera_osd_proto::Request { set_attrs: Vec::new(), get_attrs: Default::default(), ..cx.req.clone() };
        let mut create_cx = Cx { req: &plain, now_ms: cx.now_ms, update_ts: cx.update_ts, durable: false, current: Default::default() };
        let (oid, _) = self.create_user_objects(&mut create_cx, pid, requested, 1)?;
        let addr = ObjectAddr::new(pid, oid);
        let _lock = self.locks.write(addr);
        let row = self.user_row(addr)?;
        self.write_locked(cx, &row, offset, len, layout)
    }

    /// PUNCH (deallocate) or CLEAR (zero, keeping allocation) a range. Neither changes the
    /// logical length; the range is clamped to it (bytes past it already read as zeros).
    pub(crate) fn punch(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, offset: u64, len: u64, keep_allocation: bool) -> Result<Reply, CommandError> {
        self.validate_set(cx, ObjectKind::User)?;
        let _lock = self.locks.write(addr);
        let row = self.user_row(addr)?;
        let end = offset.saturating_add(len).min(row.logical_len);
        if end > offset {
            if keep_allocation {
                self.data.zero(addr, offset, end - offset)?;
            } else {
                self.data.punch(addr, offset, end - offset)?;
            }
            if cx.durable {
                self.data.sync(addr)?;
            }
        }
        let used_after = self.data.used_bytes(addr)?;
        let change = DataChange { new_len: row.logical_len, used_before: row.used_bytes, used_after };
        Ok(crate::engine::reply(self.commit_change(cx, &row, change)?))
    }

    pub(crate) fn read_map(
        &self,
        cx: &mut Cx<'_, '_>,
        addr: ObjectAddr,
        offset: u64,
        len: u64,
        map_type: MapType,
        allocation_len: u64,
    ) -> Result<Reply, CommandError> {
        self.validate_set(cx, ObjectKind::User)?;
        let _lock = self.locks.read(addr);
        let row = self.user_row(addr)?;
        let end = offset.saturating_add(len);
        let stored_end = end.min(row.logical_len);
        let mut extents = if stored_end > offset { self.data.map(addr, offset, stored_end - offset)? } else { Vec::new() };
        // Past the logical length everything is a hole, whatever the store still holds.
        let hole_start = offset.max(stored_end);
        if end > hole_start {
            extents.push(crate::store::MapExtent { offset: hole_start, len: end - hole_start, written: false });
        }
        let entries = extents
            .into_iter()
            .filter(|e| match map_type {
                MapType::All => true,
                MapType::Written => e.written,
                MapType::Holes => !e.written,
            })
            .map(|e| MapEntry { offset: e.offset, len: e.len, map_type: if e.written { MapType::Written } else { MapType::Holes } })
            .collect();
        let data_in = ReadMapResult { start: offset, entries }.encode_within(allocation_len);
        cx.current.object = Some((ObjectKind::User, addr));
        let retrieved = self.finish_read(cx, addr, false)?;
        Ok(Reply { data_in, retrieved, recovered: None, member_retrieved: Vec::new() })
    }
}
