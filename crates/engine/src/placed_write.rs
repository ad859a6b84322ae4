//! WRITE by reference, the counterpart of READ by reference (zero_copy.rs): a plain WRITE is
//! checked and its file prepared before its data arrives ([`Engine::begin_placed_write`]); the
//! target then receives the bytes straight into the object's file (one copy, socket to page
//! cache, instead of socket to buffer to page cache) and the engine commits length, used
//! capacity and timestamps afterwards ([`Engine::finish_placed_write`]).
//!
//! Only the plain case qualifies ([`Engine::placeable`]): a WRITE with no piggy-backed
//! attributes, on a store that keeps object data in files; contiguous, or a list (SGL, strided,
//! nested) whose pieces are large enough ([`PLACED_LIST_PIECE_MIN`]) on a store that maps list
//! writes. A list's file is extended to the end of its pieces before the data arrives and
//! handed out with its mapping ([`PlacedList`]): the target receives each piece straight into
//! the object's pages. Everything else goes through `execute`.
//!
//! The object lock is not held while the data arrives: it comes at the network's pace, and the
//! data of several commands may interleave on one connection. What keeps the object consistent
//! meanwhile:
//! - Placed bytes may lie past the logical length. Reads are clamped to it, and the stale-tail
//!   trim before every extension keeps bytes still in flight (placements.rs).
//! - The commit checks again, under the object lock: the object exists, its file is the one the
//!   bytes went to (REMOVE, FORMAT and re-creation give another), no logical-length set ran
//!   meanwhile (it may have cut placed bytes), the quotas. A failure answers an error rather
//!   than acknowledge bytes that are not there.
//! - A placement that never commits (ABORT TASK, connection lost, a data error, a failed
//!   commit) is abandoned: bytes past the logical length are trimmed and the used capacity
//!   recounted, so the length and capacity attributes describe the file. Bytes it placed inside
//!   the logical length stay: a WRITE that was not acknowledged may be partly applied.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use tessera_osd_proto::{Command, DataLayout, GetAttrs, Reply, Request};
use tessera_types::{limits, ObjectAddr};
use tracing::warn;

use crate::data::DataChange;
use crate::db::objects as rows;
use crate::engine::Cx;
use crate::error::{CommandError, IoOp, StorageError};
use crate::placements::Ticket;
use crate::store::mapped::Mapping;
use crate::store::Piece;
use crate::Engine;

/// Smallest mean piece of a list WRITE received straight into the object's pages; smaller
/// pieces are received into a buffer and copied (docs/noncontiguous.md, "How the target moves
/// the pieces").
pub const PLACED_LIST_PIECE_MIN: u64 = 1024;

/// A WRITE whose `len` data bytes go to `file` from `offset` (data byte `i` at `offset + i`),
/// or for a list to the pieces of [`PlacedWrite::list`], before
/// [`Engine::finish_placed_write`] commits them. Hand it back to the engine either way: to
/// finish, or to [`Engine::abandon_placed_write`].
#[derive(Debug)]
pub struct PlacedWrite {
    pub file: Arc<File>,
    pub offset: u64,
    pub len: u64,
    /// Where a list WRITE's data goes; `None` for a contiguous one.
    pub list: Option<PlacedList>,
    /// End of the bytes the WRITE puts in the file (the file is at least this long for a list).
    end: u64,
    addr: ObjectAddr,
    /// (device, inode) of `file`: the commit checks the object still lives there.
    identity: (u64, u64),
    ticket: Ticket,
}

/// A list WRITE's pieces in data order (`buf_offset` is the data byte of the piece's first
/// byte) and, when the store could map the file, its mapping; all pieces lie below the file's
/// length.
pub struct PlacedList {
    pub pieces: Vec<Piece>,
    pub mapping: Option<Arc<Mapping>>,
}

impl std::fmt::Debug for PlacedList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlacedList").field("pieces", &self.pieces.len()).field("mapped", &self.mapping.is_some()).finish()
    }
}

fn identity(file: &File) -> Result<(u64, u64), StorageError> {
    let m = file.metadata().map_err(StorageError::io(IoOp::Stat))?;
    Ok((m.dev(), m.ino()))
}

/// End of the farthest piece of a layout.
fn layout_end(layout: &DataLayout, offset: u64, len: u64) -> u64 {
    let mut end = offset;
    layout.for_each_extent(offset, len, |o, n| end = end.max(o.saturating_add(n)));
    end
}

impl Engine {
    /// True when `request` can be a placed WRITE (see the module doc): a contiguous WRITE
    /// without attribute lists, on a store that keeps object data in files. Checks nothing
    /// about the object.
    pub fn placeable(&self, request: &Request<'_>) -> bool {
        let plain = request.set_attrs.is_empty() && request.get_attrs == GetAttrs::None && self.data.places_writes();
        match &request.command {
            Command::Write { len, .. } if !plain || *len > limits::TRANSFER_LEN_MAX => false,
            Command::Write { layout: DataLayout::Contiguous, .. } => true,
            Command::Write { layout, len, offset, .. } => {
                let count = layout.piece_count(*len).max(1);
                // Placed without a mapping, each piece would cost a bounce copy and a `pwrite`:
                // worse than the buffered plan.
                *len / count >= PLACED_LIST_PIECE_MIN && self.data.maps_list_writes(layout_end(layout, *offset, *len))
            }
            _ => false,
        }
    }

    /// True when some list WRITEs can be placed: the store keeps files and maps list writes.
    /// Which ones, [`placeable`](Engine::placeable) says once the layout is known.
    pub fn places_list_writes(&self) -> bool {
        self.data.places_writes() && self.data.maps_list_writes(0)
    }

    /// Checks a [`placeable`](Engine::placeable) WRITE and prepares its file. Errors are the
    /// command's answer, as from `execute` (a request that is not placeable is refused as an
    /// unsupported service action).
    pub fn begin_placed_write(&self, request: &Request<'_>) -> Result<PlacedWrite, CommandError> {
        let Command::Write { addr, offset, len, ref layout } = request.command else {
            return Err(CommandError::Unsupported(request.service_action.code()));
        };
        if !self.placeable(request) {
            return Err(CommandError::Unsupported(request.service_action.code()));
        }
        let pieces = (*layout != DataLayout::Contiguous).then(|| crate::data::pieces(layout, offset, len));
        let end = match &pieces {
            Some(list) => list.iter().map(|p| p.object_offset + p.len as u64).max().unwrap_or(offset),
            None => offset.saturating_add(len),
        };
        let _epoch = self.epoch.read().unwrap_or_else(|p| p.into_inner());
        let _lock = self.locks.write(addr);
        let row = self.user_row(addr)?;
        self.check_quotas(&row, end, len)?;
        let file = self.data.file_for_write(addr)?;
        if end > row.logical_len {
            self.trim_stale_tail(addr, row.logical_len)?;
        }
        let identity = identity(&file)?;
        let ticket = self.placements.register(addr, end);
        let mut write = PlacedWrite { file, offset, len, list: None, end, addr, identity, ticket };
        if let Some(pieces) = pieces {
            // Registered first: from here an abandon trims the extension again.
            let mapping = self.data.prepare_list_write(addr, &write.file, end)?;
            write.list = Some(PlacedList { pieces, mapping });
        }
        Ok(write)
    }

    /// Commits a placed WRITE whose data has all been put in place; `request` is the one it
    /// began with. On an error the placement is abandoned.
    pub fn finish_placed_write(&self, write: PlacedWrite, request: &Request<'_>, now_ms: u64) -> Result<Reply, CommandError> {
        let result = self.commit_placed(&write, request, now_ms);
        if result.is_err() {
            self.abandon_placed_write(write);
        }
        result
    }

    fn commit_placed(&self, w: &PlacedWrite, request: &Request<'_>, now_ms: u64) -> Result<Reply, CommandError> {
        let addr = w.addr;
        let mut cx = Cx::new(request, now_ms);
        let _epoch = self.epoch.read().unwrap_or_else(|p| p.into_inner());
        let _lock = self.locks.write(addr);
        let row = self.user_row(addr)?;
        if w.ticket.disturbed() || !self.still_stored_in(w)? {
            return Err(CommandError::WriteOvertaken { addr });
        }
        // A page of the mapping replaced after a fault (fault_guard.rs) may have taken bytes
        // meant for the file.
        if w.list.as_ref().and_then(|l| l.mapping.as_ref()).is_some_and(|m| m.is_damaged()) {
            let source = std::io::Error::other("a mapped page of the object was lost while its data arrived");
            return Err(StorageError::Io { op: IoOp::Write, source }.into());
        }
        self.check_quotas(&row, w.end, w.len)?;
        if cx.durable {
            self.data.sync(addr)?;
        }
        let used_after = self.data.used_bytes(addr)?;
        let change = DataChange { new_len: row.logical_len.max(w.end), used_before: row.used_bytes, used_after };
        let retrieved = self.commit_change(&mut cx, &row, change)?;
        Ok(crate::engine::reply(retrieved))
    }

    /// Forgets a placed WRITE that will not commit: trims what it put past the logical length
    /// (keeping other placements' bytes) and recounts the object's used capacity. Failures are
    /// logged; the next extension trims again.
    pub fn abandon_placed_write(&self, write: PlacedWrite) {
        let addr = write.addr;
        if let Err(e) = self.clean_up_placed(write) {
            warn!(partition = addr.partition_id.0, object = addr.object_id.0, error = %e, "cleaning up an abandoned WRITE failed");
        }
    }

    fn clean_up_placed(&self, w: PlacedWrite) -> Result<(), CommandError> {
        let addr = w.addr;
        let _epoch = self.epoch.read().unwrap_or_else(|p| p.into_inner());
        let _lock = self.locks.write(addr);
        let still_here = self.still_stored_in(&w)?;
        drop(w); // its bytes are no longer in flight: the trim below may cut them
        let Some(row) = self.db.read(|c| rows::load(c, addr))? else {
            return Ok(()); // removed meanwhile, with its data
        };
        if !still_here {
            return Ok(());
        }
        self.trim_stale_tail(addr, row.logical_len)?;
        let used_after = self.data.used_bytes(addr)?;
        if used_after != row.used_bytes {
            self.db.write(false, |c| rows::set_used(c, addr, row.used_bytes, used_after).map_err(CommandError::from))?;
        }
        Ok(())
    }

    /// True when the object's data still lives in the file the placement wrote to.
    fn still_stored_in(&self, w: &PlacedWrite) -> Result<bool, StorageError> {
        match self.data.file(w.addr)? {
            Some(current) if Arc::ptr_eq(&current, &w.file) => Ok(true),
            Some(current) => Ok(identity(&current)? == w.identity),
            None => Ok(false),
        }
    }
}
