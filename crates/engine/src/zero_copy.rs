//! READ by reference: the same checks, timestamps and sense as [`Engine::execute`] for a READ,
//! but instead of copying the bytes into a buffer the engine answers which file and range hold
//! them, so the target can move them from the page cache to the socket with `sendfile` (one copy
//! instead of two on the target's core: the difference between half and nearly all of a raw TCP
//! stream on a 2-core node, see docs/benchmarks.md).
//!
//! Only the plain case qualifies: a contiguous READ with no piggy-backed attributes, of an object
//! whose data lives in a file. Everything else returns `Ok(None)` and goes through `execute`.
//! The object lock is released before the bytes are sent, so a WRITE racing the READ may be seen
//! partly: SCSI leaves overlapping SIMPLE tasks unordered, and a buffered READ racing the same
//! WRITE from another connection has the same freedom. The sender pads with zeros if the file
//! shrank meanwhile.

use std::fs::File;
use std::sync::Arc;

use tessera_osd_proto::{Command, DataLayout, GetAttrs, Request};
use tessera_scsi::{MappedDataIn, MappedSegment, Sense};
use tessera_types::limits;

use crate::engine::Cx;
use crate::error::{read_past_end, CommandError};
use crate::object::ObjectKind;
use crate::Engine;

/// Where a READ's bytes are: `len` bytes of `file` from `offset`, then `zeros` zero bytes.
#[derive(Debug)]
pub struct FileRead {
    pub file: Arc<File>,
    pub offset: u64,
    pub len: u64,
    pub zeros: u64,
    /// RECOVERED ERROR 3B17 when the READ reached past the logical length.
    pub recovered: Option<Sense>,
}

/// Mean piece length from which a list READ is sent from the mapping by reference. Below it a
/// copy into one buffer is cheaper than the kernel's per-iovec work in the vectored send (the
/// same trade as the initiator's pack or gather, `GATHER_MIN_PIECE_BYTES`); measured with
/// `tessera bench noncontig` experiment 3, docs/noncontiguous.md "how the target moves the
/// pieces".
pub const MAPPED_SEND_MIN_PIECE_BYTES: u64 = 1024;

/// Where a list READ's bytes are: pieces of the object's mapping and zeros, in list order.
#[derive(Debug)]
pub struct MappedRead {
    pub data_in: MappedDataIn,
    /// RECOVERED ERROR 3B17 when a piece reached past the logical length.
    pub recovered: Option<Sense>,
}

impl Engine {
    /// Executes a plain READ by reference (see the module doc); `Ok(None)` means "use
    /// [`Engine::execute`]", and nothing has been done in that case.
    pub fn read_by_reference(&self, request: &Request<'_>, now_ms: u64) -> Result<Option<FileRead>, CommandError> {
        let Command::Read { addr, offset, len, layout: DataLayout::Contiguous } = request.command else {
            return Ok(None);
        };
        if !request.set_attrs.is_empty() || request.get_attrs != GetAttrs::None || len > limits::TRANSFER_LEN_MAX {
            return Ok(None);
        }
        let _epoch = self.epoch.read().unwrap_or_else(|p| p.into_inner());
        let _lock = self.locks.read(addr);
        let row = self.user_row(addr)?;
        let Some(file) = self.data.file(addr)? else {
            return Ok(None);
        };
        let readable = row.logical_len.saturating_sub(offset).min(len);
        let mut cx = Cx::new(request, now_ms);
        cx.current.object = Some((ObjectKind::User, addr));
        self.finish_read(&mut cx, addr, true)?;
        Ok(Some(FileRead { file, offset, len: readable, zeros: len - readable, recovered: (readable < len).then(read_past_end) }))
    }

    /// Executes a plain list READ (any non-contiguous layout) by reference: the pieces are
    /// answered as ranges of the object's mapping, which the transport sends with one vectored
    /// write per PDU, so the bytes go from the page cache to the socket without first being
    /// copied into a buffer. The same conditions and races as [`Engine::read_by_reference`];
    /// `Ok(None)` when the store cannot map the object.
    pub fn read_mapped_by_reference(&self, request: &Request<'_>, now_ms: u64) -> Result<Option<MappedRead>, CommandError> {
        let Command::Read { addr, offset, len, ref layout } = request.command else {
            return Ok(None);
        };
        let plain = request.set_attrs.is_empty() && request.get_attrs == GetAttrs::None;
        if !plain || len > limits::TRANSFER_LEN_MAX || mean_piece(layout, len) < MAPPED_SEND_MIN_PIECE_BYTES {
            return Ok(None);
        }
        let _epoch = self.epoch.read().unwrap_or_else(|p| p.into_inner());
        let _lock = self.locks.read(addr);
        let row = self.user_row(addr)?;
        let Some((mapping, stored)) = self.data.mapped(addr)? else {
            return Ok(None);
        };
        let readable_end = row.logical_len.min(stored);
        let mut past_end = false;
        let mut segments: Vec<MappedSegment> = Vec::with_capacity(crate::data::piece_capacity(layout, len));
        layout.for_each_extent(offset, len, |object_offset, n| {
            past_end |= object_offset + n > row.logical_len;
            let from_memory = readable_end.saturating_sub(object_offset).min(n) as usize;
            push_merged(&mut segments, MappedSegment::Memory { offset: object_offset as usize, len: from_memory });
            push_merged(&mut segments, MappedSegment::Zeros(n as usize - from_memory));
        });
        let Some(data_in) = MappedDataIn::new(mapping, segments) else {
            return Ok(None);
        };
        let mut cx = Cx::new(request, now_ms);
        cx.current.object = Some((ObjectKind::User, addr));
        self.finish_read(&mut cx, addr, true)?;
        Ok(Some(MappedRead { data_in, recovered: past_end.then(read_past_end) }))
    }
}

/// The mean piece length of a list layout (contiguous: 0, it has its own path).
fn mean_piece(layout: &DataLayout, len: u64) -> u64 {
    match layout {
        DataLayout::Contiguous => 0,
        DataLayout::List(extents) => len / extents.len().max(1) as u64,
        DataLayout::Strided { block_len, .. } | DataLayout::Nested { block_len, .. } => (*block_len).min(len),
    }
}

/// Appends a segment, joining it to the last one where they are adjacent (fewer iovecs).
fn push_merged(segments: &mut Vec<MappedSegment>, next: MappedSegment) {
    if next.is_empty() {
        return;
    }
    match (segments.last_mut(), next) {
        (Some(MappedSegment::Memory { offset, len }), MappedSegment::Memory { offset: o, len: n }) if *offset + *len == o => *len += n,
        (Some(MappedSegment::Zeros(len)), MappedSegment::Zeros(n)) => *len += n,
        _ => segments.push(next),
    }
}
