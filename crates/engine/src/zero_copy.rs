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
use tessera_scsi::Sense;
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
}
