//! Data commands: READ, WRITE, APPEND, CREATE AND WRITE (contiguous or with a
//! [`DataLayout`]), PUNCH, CLEAR, the FLUSH family and READ MAP.

use std::sync::atomic::{AtomicUsize, Ordering};

use tessera_osd_proto::pages::{CURRENT_COMMAND_APPEND_START, CURRENT_COMMAND_OBJECT_ID};
use tessera_osd_proto::{BuildError, Command, DataLayout, FlushScope, GetAttrs, MapType, OsdRequestBuilder, ReadMapResult, ServiceAction};
use tessera_scsi::{ScsiTransport, Sense};
use tessera_types::ObjectAddr;

use super::{OsdClient, OsdError};

/// ASC/ASCQ 3B17: READ PAST END OF USER OBJECT (OSD-2 r05 §4.14.3), under RECOVERED ERROR.
pub const READ_PAST_END: u16 = 0x3B17;

/// Contiguous writes larger than this are pipelined (see [`OsdClient::write`]).
pub const PIPELINE_THRESHOLD_BYTES: usize = 2 << 20;
/// Size of one pipelined WRITE piece.
pub const PIPELINE_PIECE_BYTES: usize = 1 << 20;
/// Pipelined pieces in flight at once.
pub const PIPELINE_DEPTH: usize = 4;

/// Mean slice length from which [`OsdClient::write_scattered`] gathers the caller's slices
/// straight into the socket instead of packing them into one buffer first. Below it, the
/// copy costs less than the kernel's per-slice work in the vectored send. Set from
/// `tessera bench noncontig` experiment 5 (seed 003's pack/gather test); the measurement is in
/// docs/noncontiguous.md, "pack or gather".
pub const GATHER_MIN_PIECE_BYTES: usize = 1024;

/// What a READ returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadResult {
    /// The bytes read, in layout order. Past the end of the object the target returns fewer
    /// bytes (contiguous) or zero-filled ones (a layout), with `past_end` set.
    pub data: Vec<u8>,
    /// The read reached past the end of the object (RECOVERED ERROR 3B17).
    pub past_end: bool,
    /// The recovered-error sense, if any.
    pub recovered: Option<Sense>,
}

/// What a READ into the caller's memory ([`OsdClient::read_into`]) returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadInto {
    /// Bytes the OSD sent; the rest of the memory was zero-filled (a contiguous READ past the
    /// end of the object returns fewer bytes).
    pub received: u64,
    /// The read reached past the end of the object (RECOVERED ERROR 3B17).
    pub past_end: bool,
    pub recovered: Option<Sense>,
}

impl<T: ScsiTransport> OsdClient<T> {
    /// READ with `layout` (offsets relative to `offset`) straight into `dest`: the bytes in
    /// layout order land in the slices end to end, which must hold exactly `len` bytes, with no
    /// copy on the way (the session writes each Data-In PDU in place). Bytes the OSD did not
    /// send (past the end of the object) read as zeros. On an error `dest` holds whatever
    /// arrived and must not be used.
    pub fn read_into(&self, addr: ObjectAddr, offset: u64, len: u64, layout: DataLayout, dest: &mut [&mut [u8]]) -> Result<ReadInto, OsdError> {
        self.read_into_meanwhile(addr, offset, len, layout, dest, &mut || {})
    }

    /// [`OsdClient::read_into`] running `meanwhile` while the READ is in flight (as
    /// [`OsdClient::execute_meanwhile`]): the data waits in the socket until it is read.
    pub fn read_into_meanwhile(
        &self,
        addr: ObjectAddr,
        offset: u64,
        len: u64,
        layout: DataLayout,
        dest: &mut [&mut [u8]],
        meanwhile: &mut dyn FnMut(),
    ) -> Result<ReadInto, OsdError> {
        let total: u64 = dest.iter().map(|d| d.len() as u64).sum();
        if total != len {
            return Err(BuildError::DataLength { expected: len, got: total }.into());
        }
        let (reply, received) = self.execute_lent_meanwhile(&OsdRequestBuilder::new(Command::Read { addr, offset, len, layout }), dest, meanwhile)?;
        debug_assert!(reply.data.is_empty(), "all command data was lent");
        zero_from(dest, received);
        let past_end = reply.recovered.as_ref().is_some_and(|s| s.asc_ascq() == READ_PAST_END);
        Ok(ReadInto { received: received as u64, past_end, recovered: reply.recovered })
    }

    /// READ `len` bytes at `offset`.
    pub fn read(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<ReadResult, OsdError> {
        self.read_layout(addr, offset, len, DataLayout::Contiguous)
    }

    /// READ into `buffer` (typically the `data` of the previous [`ReadResult`]), which is
    /// reused instead of allocating `len` bytes again: the way to stream large reads.
    pub fn read_reusing(&self, addr: ObjectAddr, offset: u64, len: u64, buffer: Vec<u8>) -> Result<ReadResult, OsdError> {
        let builder = OsdRequestBuilder::new(Command::Read { addr, offset, len, layout: DataLayout::Contiguous });
        let reply = self.execute_with_buffer(&builder, buffer)?;
        let past_end = reply.recovered.as_ref().is_some_and(|s| s.asc_ascq() == READ_PAST_END);
        Ok(ReadResult { data: reply.data, past_end, recovered: reply.recovered })
    }

    /// READ with a scatter/gather, strided or nested layout (offsets relative to `offset`);
    /// `len` is the total number of bytes the layout covers.
    pub fn read_layout(&self, addr: ObjectAddr, offset: u64, len: u64, layout: DataLayout) -> Result<ReadResult, OsdError> {
        let reply = self.execute(&OsdRequestBuilder::new(Command::Read { addr, offset, len, layout }))?;
        let past_end = reply.recovered.as_ref().is_some_and(|s| s.asc_ascq() == READ_PAST_END);
        Ok(ReadResult { data: reply.data, past_end, recovered: reply.recovered })
    }

    /// WRITE `data` at `offset`. `fua` makes it durable before the status returns.
    ///
    /// Above [`PIPELINE_THRESHOLD_BYTES`] the write goes out as pieces of
    /// [`PIPELINE_PIECE_BYTES`], up to [`PIPELINE_DEPTH`] in flight on the session. Why: a
    /// target executes one command only once all of its data has arrived, so one huge WRITE
    /// leaves the network idle while the target copies into its page cache; with several in
    /// flight it receives one piece while it stores the previous one. Like any WRITE that
    /// fails, a failed piece leaves the range partly written; the first error is returned.
    pub fn write(&self, addr: ObjectAddr, offset: u64, data: &[u8], fua: bool) -> Result<(), OsdError> {
        if data.len() <= PIPELINE_THRESHOLD_BYTES {
            return self.write_layout(addr, offset, data, DataLayout::Contiguous, fua);
        }
        let pieces: Vec<(u64, &[u8])> =
            data.chunks(PIPELINE_PIECE_BYTES).scan(offset, |at, piece| {
                let start = *at;
                *at += piece.len() as u64;
                Some((start, piece))
            }).collect();
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..PIPELINE_DEPTH.min(pieces.len()))
                .map(|_| {
                    scope.spawn(|| -> Result<(), OsdError> {
                        while let Some((at, piece)) = pieces.get(next.fetch_add(1, Ordering::Relaxed)) {
                            self.write_layout(addr, *at, piece, DataLayout::Contiguous, fua)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().expect("write piece thread panicked")).collect::<Result<Vec<()>, _>>()
        })?;
        Ok(())
    }

    /// WRITE with a layout: `data` holds the pieces back to back, in layout order.
    pub fn write_layout(&self, addr: ObjectAddr, offset: u64, data: &[u8], layout: DataLayout, fua: bool) -> Result<(), OsdError> {
        self.write_gather(addr, offset, std::slice::from_ref(&data), layout, fua)
    }

    /// WRITE whose data is the slices of `data` end to end (in layout order), gathered straight
    /// from the caller's buffers into the socket: one vectored send of the PDU header and the
    /// slices, no packing copy. Worth it when the slices are large; for many small ones a copy
    /// into one buffer is cheaper than the per-slice cost of the vectored send (see
    /// docs/noncontiguous.md, "pack or gather").
    pub fn write_gather(&self, addr: ObjectAddr, offset: u64, data: &[&[u8]], layout: DataLayout, fua: bool) -> Result<(), OsdError> {
        self.write_gather_meanwhile(addr, offset, data, layout, fua, &mut || {})
    }

    /// [`OsdClient::write_gather`] running `meanwhile` once the command and its unsolicited
    /// data have left (as [`OsdClient::execute_meanwhile`]).
    fn write_gather_meanwhile(
        &self,
        addr: ObjectAddr,
        offset: u64,
        data: &[&[u8]],
        layout: DataLayout,
        fua: bool,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(), OsdError> {
        let len = data.iter().map(|d| d.len() as u64).sum();
        let command = Command::Write { addr, offset, len, layout };
        self.execute_meanwhile(&OsdRequestBuilder::new(command).data_pieces(data).fua(fua), meanwhile).map(drop)
    }

    /// WRITE whose data lies scattered in the caller's memory (`data` end to end, in layout
    /// order), moved the cheaper way for its size: gathered in place when the mean slice is at
    /// least [`GATHER_MIN_PIECE_BYTES`], else packed into one buffer (seed 003's hybrid).
    pub fn write_scattered(&self, addr: ObjectAddr, offset: u64, data: &[&[u8]], layout: DataLayout, fua: bool) -> Result<(), OsdError> {
        self.write_scattered_meanwhile(addr, offset, data, layout, fua, &mut || {})
    }

    /// [`OsdClient::write_scattered`] running `meanwhile` once the command and its unsolicited
    /// data have left (as [`OsdClient::execute_meanwhile`]); data the target asks for with R2Ts
    /// goes after `meanwhile` returns.
    pub fn write_scattered_meanwhile(
        &self,
        addr: ObjectAddr,
        offset: u64,
        data: &[&[u8]],
        layout: DataLayout,
        fua: bool,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(), OsdError> {
        if data.len() <= 1 || gathers(data) {
            return self.write_gather_meanwhile(addr, offset, data, layout, fua, meanwhile);
        }
        self.write_gather_meanwhile(addr, offset, &[&data.concat()], layout, fua, meanwhile)
    }

    /// APPEND `data`; returns the byte address it landed at (Current Command attribute 5).
    pub fn append(&self, addr: ObjectAddr, data: &[u8]) -> Result<u64, OsdError> {
        let b = OsdRequestBuilder::new(Command::Append { addr, len: data.len() as u64 })
            .data(data)
            .get_attrs(GetAttrs::List { ids: vec![CURRENT_COMMAND_APPEND_START], allocation_len: 64 });
        let reply = self.execute(&b)?;
        self.attr_u64(&reply, CURRENT_COMMAND_APPEND_START, ServiceAction::Append, "the append start address")
    }

    /// CREATE AND WRITE: a new user object holding `data` at `offset` (with a layout, if not
    /// contiguous); returns its id.
    pub fn create_and_write(
        &self,
        partition_id: u64,
        requested: Option<u64>,
        offset: u64,
        data: &[u8],
        layout: DataLayout,
    ) -> Result<u64, OsdError> {
        let command = Command::CreateAndWrite { partition_id, requested, offset, len: data.len() as u64, layout };
        let b = OsdRequestBuilder::new(command)
            .data(data)
            .get_attrs(GetAttrs::List { ids: vec![CURRENT_COMMAND_OBJECT_ID], allocation_len: 64 });
        let reply = self.execute(&b)?;
        match requested {
            Some(oid) => Ok(oid),
            None => self.attr_u64(&reply, CURRENT_COMMAND_OBJECT_ID, ServiceAction::CreateAndWrite, "the new object id"),
        }
    }

    /// PUNCH: deallocate [offset, offset + len) (reads back as zeros).
    pub fn punch(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::Punch { addr, offset, len })).map(drop)
    }

    /// CLEAR: write zeros over [offset, offset + len).
    pub fn clear(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::Clear { addr, offset, len })).map(drop)
    }

    /// FLUSH one user object (scope: data and attributes, or attributes only).
    pub fn flush(&self, addr: ObjectAddr, scope: FlushScope) -> Result<(), OsdError> {
        self.flush_meanwhile(addr, scope, &mut || {})
    }

    /// [`OsdClient::flush`] running `meanwhile` while it is in flight.
    pub fn flush_meanwhile(&self, addr: ObjectAddr, scope: FlushScope, meanwhile: &mut dyn FnMut()) -> Result<(), OsdError> {
        self.execute_meanwhile(&OsdRequestBuilder::new(Command::Flush { addr, scope }), meanwhile).map(drop)
    }

    pub fn flush_collection(&self, addr: ObjectAddr, scope: FlushScope) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::FlushCollection { addr, scope })).map(drop)
    }

    pub fn flush_partition(&self, partition_id: u64, scope: FlushScope) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::FlushPartition { partition_id, scope })).map(drop)
    }

    pub fn flush_osd(&self, scope: FlushScope) -> Result<(), OsdError> {
        self.execute(&OsdRequestBuilder::new(Command::FlushOsd { scope })).map(drop)
    }

    /// READ MAP: the written ranges or holes of [offset, offset + len).
    pub fn read_map(
        &self,
        addr: ObjectAddr,
        offset: u64,
        len: u64,
        map_type: MapType,
        allocation_len: u32,
    ) -> Result<ReadMapResult, OsdError> {
        let command = Command::ReadMap { addr, offset, len, map_type, allocation_len: allocation_len as u64 };
        let reply = self.execute(&OsdRequestBuilder::new(command))?;
        ReadMapResult::decode(&reply.data).map_err(|e| self.reply_error(ServiceAction::ReadMap, e))
    }
}

/// Zeroes `parts` (end to end) from byte `from` on.
fn zero_from(parts: &mut [&mut [u8]], mut from: usize) {
    for p in parts.iter_mut() {
        let k = from.min(p.len());
        p[k..].fill(0);
        from -= k;
    }
}

/// The hybrid rule of [`OsdClient::write_scattered`]: gather when the mean slice is large.
pub fn gathers(data: &[&[u8]]) -> bool {
    let total: usize = data.iter().map(|d| d.len()).sum();
    total >= GATHER_MIN_PIECE_BYTES * data.len()
}
