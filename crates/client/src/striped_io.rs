//! Striped reads and writes: a file-level extent list over the caller's memory (one buffer, or a
//! list of regions seen end to end, [`crate::memory`]) becomes one command list per slot
//! ([`crate::command_plan`]), and the slots run at once, so all OSDs work together. When every
//! slot is one command of at most [`CHAIN_BYTES_MAX`] (a strided or list request of a few
//! pieces per OSD, the common non-contiguous case), the commands are in flight together from
//! the caller's thread (`tessera_initiator::chain`); otherwise each slot has a thread of its
//! own (the caller's serving one), and within a slot up to [`PIPELINE_DEPTH`] commands are in
//! flight over the OSD's sessions. Reads scatter each reply into the caller's memory; writes
//! send the caller's bytes.
//!
//! Write gather: each command's bytes are its runs of the caller's buffer (one run for a
//! contiguous request; several non-adjacent ones for a strided or list request), handed to
//! `OsdClient::write_scattered`, which sends them in place as a gather list when the runs are
//! large and packs them into one buffer first when they are small (seed 003's hybrid; the
//! threshold is `GATHER_MIN_PIECE_BYTES`, measured in docs/noncontiguous.md).
//!
//! Read scatter: each command lends its runs of the caller's memory to the session
//! (`OsdClient::read_into`), which writes every Data-In PDU's bytes straight into them: no
//! receive buffer, no copy afterwards.
//!
//! A command whose session dies under it (the connection reset, the OSD restarted) is sent
//! once more on its pool slot logged in again ([`OsdPool::reinstate`]). Sending a READ or WRITE
//! twice is safe: a READ fills the same memory again, a WRITE puts the same bytes at the same
//! offsets, so the object ends the same whether or not the first one executed. The new login
//! reinstates the dead session (same ISID), and the target answers it only once the dead
//! session's commands have ended, so no first copy of a WRITE can land after the resend or
//! after a later overlapping WRITE.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tessera_initiator::chain::chained;
use tessera_initiator::osd_client::OsdError;
use tessera_layout::{plan, Extent, PerOsdPlan};
use tessera_mds_proto::FileLayout;
use tessera_types::ObjectAddr;

use crate::command_plan::{buffer_runs, piece_starts, slot_commands, Mode, SlotCommand};
use crate::error::ClientError;
use crate::memory::{self, Carver, Source};
use crate::pool::{Lease, OsdPool};

/// Commands in flight per slot. The slots run at once, so a stripe over C objects keeps
/// up to C * PIPELINE_DEPTH commands in flight.
pub const PIPELINE_DEPTH: usize = 4;

/// The largest command of a transfer whose slots run from the caller's thread alone, one
/// command per slot in flight together. Up to here a thread costs more than reading the
/// answers in turn; past it, the slots' data moves faster on threads of their own
/// (docs/noncontiguous.md, "One thread for one command per OSD").
pub const CHAIN_BYTES_MAX: u64 = 256 << 10;

/// What one I/O call works on.
pub struct StripedFile<'a> {
    pub pool: &'a OsdPool,
    pub layout: &'a FileLayout,
    /// For error messages.
    pub path: &'a str,
}

/// One slot's commands and where its object is.
struct SlotWork<J> {
    osd: u32,
    object_id: u64,
    addr: ObjectAddr,
    jobs: Vec<J>,
    /// The largest of its commands, in bytes.
    largest: u64,
    /// Some pieces cover the same object bytes: the commands must run one at a time in list
    /// order, or a later WRITE could land before an earlier one and lose ("later wins").
    overlapping: bool,
}

/// Where one slot's commands go.
#[derive(Clone, Copy)]
struct Target {
    osd: u32,
    object_id: u64,
    addr: ObjectAddr,
}

impl<J> SlotWork<J> {
    fn target(&self) -> Target {
        Target { osd: self.osd, object_id: self.object_id, addr: self.addr }
    }
}

/// Whether any two pieces of one object's plan cover the same object byte.
fn pieces_overlap(pieces: &[tessera_layout::Piece]) -> bool {
    let mut ranges: Vec<(u64, u64)> = pieces.iter().map(|p| (p.object_offset, p.object_offset + p.len)).collect();
    ranges.sort_unstable();
    ranges.windows(2).any(|w| w[1].0 < w[0].1)
}

impl StripedFile<'_> {
    /// Plans `extents` and builds each slot's commands with `make(slot plan, piece starts, command)`.
    fn slot_work<J>(
        &self,
        extents: &[Extent],
        mode: Mode,
        mut make: impl FnMut(&PerOsdPlan, &[u64], SlotCommand) -> J,
    ) -> Result<Vec<SlotWork<J>>, ClientError> {
        let plans = plan(&self.layout.stripe, extents).map_err(|source| ClientError::Extents { path: self.path.to_string(), source })?;
        let mut out = Vec::with_capacity(plans.len());
        for p in &plans {
            let object = self.layout.objects[p.slot as usize];
            let addr = self.pool.object_addr(object.osd, object.object_id, self.path)?;
            // Leasing here also logs in, so the negotiated burst bounds the split.
            let lease = self.pool.lease(object.osd, object.object_id, self.path)?;
            let max = self.pool.max_transfer(&lease);
            let cmds = slot_commands(p, mode, max).map_err(|source| ClientError::Descriptor { path: self.path.to_string(), source })?;
            let starts = piece_starts(&p.pieces);
            let largest = cmds.iter().map(|c| c.len).max().unwrap_or(0);
            let jobs = cmds.into_iter().map(|c| make(p, &starts, c)).collect();
            out.push(SlotWork { osd: object.osd, object_id: object.object_id, addr, jobs, largest, overlapping: pieces_overlap(&p.pieces) });
        }
        Ok(out)
    }

    /// Writes `buf` (the extents' bytes end to end) to the extents. `fua` makes each WRITE
    /// durable before it is acknowledged.
    pub fn write(&self, extents: &[Extent], buf: &[u8], mode: Mode, fua: bool) -> Result<(), ClientError> {
        self.write_regions(extents, &[buf], mode, fua)
    }

    /// [`StripedFile::write`] from memory regions that hold the extents' bytes end to end.
    pub fn write_regions(&self, extents: &[Extent], mem: &[&[u8]], mode: Mode, fua: bool) -> Result<(), ClientError> {
        self.check_len(extents, memory::total_len(mem.iter().map(|r| r.len())))?;
        let mem = Source::new(mem);
        let work = self.slot_work(extents, mode, |p, starts, cmd| {
            let runs = buffer_runs(&p.pieces, starts, cmd.stream_start, cmd.len);
            (cmd, mem.runs(&runs))
        })?;
        self.run(work, |lease, addr, (cmd, slices), meanwhile| {
            debug_assert_eq!(slices.iter().map(|s| s.len() as u64).sum::<u64>(), cmd.len);
            lease.conn.write_scattered_meanwhile(addr, cmd.offset, slices, cmd.layout.clone(), fua, meanwhile)
        })
    }

    /// Reads the extents into `buf`. Bytes past an object's end come back as zeros; the result
    /// says whether any command reached past an object's end, in which case the caller must
    /// learn the file size to tell a hole from end of file.
    pub fn read(&self, extents: &[Extent], buf: &mut [u8], mode: Mode) -> Result<bool, ClientError> {
        self.read_regions(extents, vec![buf], mode)
    }

    /// [`StripedFile::read`] into memory regions that take the extents' bytes end to end.
    pub fn read_regions(&self, extents: &[Extent], mem: Vec<&mut [u8]>, mode: Mode) -> Result<bool, ClientError> {
        self.check_len(extents, memory::total_len(mem.iter().map(|r| r.len())))?;
        // Plan first with run lists, then hand each command its disjoint slices of the memory.
        let work = self.slot_work(extents, mode, |p, starts, cmd| {
            let runs = buffer_runs(&p.pieces, starts, cmd.stream_start, cmd.len);
            (cmd, runs)
        })?;
        let mut dests = split_runs(mem, &work);
        let work: Vec<SlotWork<ReadJob<'_>>> = work
            .into_iter()
            .enumerate()
            .map(|(s, w)| SlotWork {
                osd: w.osd,
                object_id: w.object_id,
                addr: w.addr,
                jobs: w.jobs.into_iter().enumerate().map(|(c, (cmd, _))| (cmd, std::mem::take(&mut dests[s][c]))).collect(),
                largest: w.largest,
                // Reads of the same bytes may run in any order.
                overlapping: false,
            })
            .collect();
        let past_end = AtomicBool::new(false);
        self.run(work, |lease, addr, (cmd, dest), meanwhile| {
            let result = lease.conn.read_into_meanwhile(addr, cmd.offset, cmd.len, cmd.layout.clone(), dest, meanwhile)?;
            if result.past_end || result.received < cmd.len {
                past_end.store(true, Ordering::Relaxed);
            }
            Ok(())
        })?;
        Ok(past_end.into_inner())
    }

    /// The memory (`None`: more than 2^64 bytes) must hold exactly the extents' bytes.
    fn check_len(&self, extents: &[Extent], buffer_len: Option<u64>) -> Result<(), ClientError> {
        let total = extents.iter().try_fold(0u64, |a, e| a.checked_add(e.len));
        match (total, buffer_len) {
            (Some(t), Some(b)) if t == b => Ok(()),
            (Some(t), b) => Err(ClientError::BufferLength { path: self.path.to_string(), extents_len: t, buffer_len: b.unwrap_or(u64::MAX) }),
            (None, _) => Err(ClientError::Extents { path: self.path.to_string(), source: tessera_layout::PlanError::TotalOverflow }),
        }
    }

    /// Runs the slots at once: chained from this thread when each is one small command
    /// ([`CHAIN_BYTES_MAX`]), else each with up to PIPELINE_DEPTH workers pulling its commands
    /// in order, a thread per worker but one, as the caller's thread serves too (a thread costs
    /// more than a small command, and far more on a busy machine, where it waits for a core).
    /// `op` runs one command, calling its last argument once the command has left. The first
    /// error is returned; the other slots still finish their commands in flight (none are
    /// cancelled half way).
    fn run<J: Send>(&self, work: Vec<SlotWork<J>>, op: impl Fn(&Lease, ObjectAddr, &mut J, &mut dyn FnMut()) -> Result<(), OsdError> + Sync) -> Result<(), ClientError> {
        if work.len() > 1 && work.iter().all(|w| w.jobs.len() == 1 && w.largest <= CHAIN_BYTES_MAX) {
            return self.run_chained(work, &op);
        }
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<ClientError>> = Mutex::new(None);
        let record = |e: ClientError| {
            failed.store(true, Ordering::Relaxed);
            first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
        };
        std::thread::scope(|scope| {
            let mut slots = work.into_iter();
            let mine = slots.next_back();
            for slot in slots {
                let (op, record, failed) = (&op, &record, &failed);
                scope.spawn(move || self.run_slot(slot, op, record, failed));
            }
            if let Some(slot) = mine {
                self.run_slot(slot, &op, &record, &failed);
            }
        });
        match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// One command per slot, in flight together from this thread; the first error (in slot
    /// order) is returned once every command has ended.
    fn run_chained<J>(&self, work: Vec<SlotWork<J>>, op: &impl Fn(&Lease, ObjectAddr, &mut J, &mut dyn FnMut()) -> Result<(), OsdError>) -> Result<(), ClientError> {
        let slots: Vec<(Target, RefCell<J>)> = work
            .into_iter()
            .map(|mut w| {
                let job = w.jobs.pop().expect("a chained slot has one command");
                (w.target(), RefCell::new(job))
            })
            .collect();
        let one = |i: usize, meanwhile: &mut dyn FnMut()| {
            let (target, job) = &slots[i];
            let lease = self.pool.lease(target.osd, target.object_id, self.path)?;
            self.send_meanwhile(lease, *target, &mut *job.borrow_mut(), op, meanwhile).map(drop)
        };
        chained(slots.len(), &one).into_iter().collect()
    }

    /// One slot's commands, by up to PIPELINE_DEPTH workers (this thread one of them), each on
    /// a session of its own; stops taking commands once any slot has failed.
    fn run_slot<J: Send>(
        &self,
        slot: SlotWork<J>,
        op: &(impl Fn(&Lease, ObjectAddr, &mut J, &mut dyn FnMut()) -> Result<(), OsdError> + Sync),
        record: &(impl Fn(ClientError) + Sync),
        failed: &AtomicBool,
    ) {
        let depth = if slot.overlapping { 1 } else { PIPELINE_DEPTH };
        let target = slot.target();
        let workers = slot.jobs.len().min(depth);
        if workers == 0 {
            return;
        }
        let queue = Mutex::new(slot.jobs.into_iter());
        let worker = || {
            let mut lease = match self.pool.lease(target.osd, target.object_id, self.path) {
                Ok(l) => l,
                Err(e) => return record(e),
            };
            while !failed.load(Ordering::Relaxed) {
                let Some(mut job) = queue.lock().unwrap_or_else(|p| p.into_inner()).next() else { return };
                lease = match self.send(lease, target, &mut job, op) {
                    Ok(l) => l,
                    Err(e) => return record(e),
                };
            }
        };
        std::thread::scope(|inner| {
            for _ in 1..workers {
                inner.spawn(worker);
            }
            worker();
        });
    }
}

impl StripedFile<'_> {
    /// Sends one command; a transport failure retires the session and sends the command once
    /// more on a session the pool has looked at. Returns the lease to go on with. Not after a
    /// session that timed out (the OSD said nothing for two liveness intervals): a frozen OSD
    /// would only make the resend's login wait as long again.
    fn send<J>(&self, lease: Lease, slot: Target, job: &mut J, op: &impl Fn(&Lease, ObjectAddr, &mut J, &mut dyn FnMut()) -> Result<(), OsdError>) -> Result<Lease, ClientError> {
        self.send_meanwhile(lease, slot, job, op, &mut || {})
    }

    /// [`StripedFile::send`] running `meanwhile` once, when the command (or its resend) has left.
    fn send_meanwhile<J>(
        &self,
        lease: Lease,
        slot: Target,
        job: &mut J,
        op: &impl Fn(&Lease, ObjectAddr, &mut J, &mut dyn FnMut()) -> Result<(), OsdError>,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<Lease, ClientError> {
        let mut ran = false;
        let mut once = || {
            if !std::mem::replace(&mut ran, true) {
                meanwhile();
            }
        };
        match op(&lease, slot.addr, job, &mut once) {
            Ok(()) => Ok(lease),
            Err(OsdError::Transport(e)) if !e.timed_out() => {
                tracing::debug!(osd = slot.osd, object = slot.object_id, error = %e, "OSD session lost under a command; sending it again");
                let again = self.pool.reinstate(&lease, slot.object_id, self.path)?;
                match op(&again, slot.addr, job, &mut once) {
                    Ok(()) => Ok(again),
                    Err(e) => Err(self.pool.fail(&again, slot.object_id, e)),
                }
            }
            Err(e) => Err(self.pool.fail(&lease, slot.object_id, e)),
        }
    }
}

/// (buffer offset, length) runs of one command, in stream order.
type Runs = Vec<(u64, u64)>;
/// One command's destination slices of the caller's buffer.
type Dests<'b> = Vec<&'b mut [u8]>;
type ReadJob<'b> = (SlotCommand, Dests<'b>);

/// Splits the memory regions into the runs of every command: `out[slot][command]` is that
/// command's destination slices in stream order (a run crossing regions gives one slice per
/// region). Every memory byte belongs to exactly one piece, so the runs tile the memory stream
/// and the slices are disjoint by construction.
fn split_runs<'b, J>(mem: Vec<&'b mut [u8]>, work: &[SlotWork<(J, Runs)>]) -> Vec<Vec<Dests<'b>>> {
    let mut all: Vec<(u64, u64, usize, usize)> = Vec::new(); // (offset, len, slot, command)
    for (s, w) in work.iter().enumerate() {
        for (c, (_, runs)) in w.jobs.iter().enumerate() {
            all.extend(runs.iter().map(|&(at, len)| (at, len, s, c)));
        }
    }
    // A command's runs already grow through the stream, so this keeps each command's order.
    all.sort_unstable();
    let mut out: Vec<Vec<Dests<'b>>> = work.iter().map(|w| w.jobs.iter().map(|_| Vec::new()).collect()).collect();
    let mut carver = Carver::new(mem);
    let mut at = 0u64;
    for (offset, len, s, c) in all {
        assert_eq!(offset, at, "buffer runs must tile the memory");
        carver.take(len, &mut out[s][c]);
        at += len;
    }
    assert!(carver.is_done(), "buffer runs must cover the memory");
    out
}
