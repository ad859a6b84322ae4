//! Plain WRITEs received straight into the object's file ([`tessera_scsi::PlacedDataOut`]): when
//! the command arrives, its CDB is decoded and checked, the capability authorized and the engine
//! prepares the file ([`Engine::begin_placed_write`](tessera_engine::Engine::begin_placed_write));
//! the transport then puts the Data-Out bytes there as they arrive, and `finish` commits.
//!
//! Taken only when nothing is lost by deciding early: the command must decode from its CDB alone
//! with Data-Out that is all data (no attribute lists), or, for a list WRITE, from its CDB and
//! continuation segment with Data-Out that is the segment and then the data (placed_list.rs),
//! and under security its capability must not ask for ALLDATA (whose integrity value covers the
//! Data-Out bytes). Every other command, and every CDB that does not decode, goes the buffered
//! way, where `execute` answers it. A refusal decided here (capability, missing object, quota)
//! is answered once the data has been read and dropped, exactly as `execute` would have
//! answered it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::PlacedWrite;
use tessera_osd_proto::{decode_before_data, ReplyPlacement, Request};
use tessera_scsi::{Decided, Destination, MappedMemory, Nexus, PlacedDataOut, PlacedPiece, PlacedPieces, ScsiOutcome, ScsiTask};
use tessera_security::Authorized;
use tessera_security::clock::now_ms;

use super::{nanos_since, OsdCommandSet};
use crate::spc::LUN0;

impl OsdCommandSet {
    /// See the module doc; `None` sends the command the buffered way.
    pub(super) fn place_write(self: &Arc<Self>, nexus: &Nexus, cdb: &[u8], data_out_len: u64, data_in_len: u32) -> Option<Box<dyn PlacedDataOut>> {
        if self.security.as_ref().is_some_and(|g| g.needs_data_out(cdb)) {
            return None;
        }
        let t0 = Instant::now();
        let Some((request, placement)) = decode_before_data(cdb, data_out_len) else {
            return self.place_list_write(nexus, cdb, data_out_len, data_in_len);
        };
        if !self.engine.placeable(&request) {
            return None;
        }
        self.times.decode_ns.fetch_add(nanos_since(t0), Ordering::Relaxed);
        Some(self.begin_placed(nexus, cdb, &[], request, placement, data_in_len))
    }

    /// Authorizes a decoded placeable WRITE (`data_out` is what of its Data-Out has arrived:
    /// nothing, or its continuation segment) and begins it on the engine; a refusal is decided
    /// here, to be answered once the data has been dropped.
    pub(super) fn begin_placed(self: &Arc<Self>, nexus: &Nexus, cdb: &[u8], data_out: &[u8], request: Request<'static>, placement: ReplyPlacement, data_in_len: u32) -> Box<dyn PlacedDataOut> {
        self.times.commands.fetch_add(1, Ordering::Relaxed);
        let auth = match &self.security {
            None => None,
            Some(gate) => {
                let task = ScsiTask { lun: LUN0, cdb, data_out, data_in_len };
                match gate.authorize(&self.engine, nexus, &task, &request, now_ms()) {
                    Ok(auth) => Some(auth),
                    Err(sense) => return Box::new(Decided(ScsiOutcome::check_condition(sense))),
                }
            }
        };
        let t1 = Instant::now();
        let begun = self.engine.begin_placed_write(&request);
        self.times.engine_ns.fetch_add(nanos_since(t1), Ordering::Relaxed);
        let mut placed = OsdPlacedWrite { set: self.clone(), request, placement, data_in_len, auth, write: None, pieces: Vec::new() };
        match begun {
            Ok(write) => {
                self.times.placed_writes.fetch_add(1, Ordering::Relaxed);
                // The list's data follows the continuation segment in Data-Out.
                if let Some(list) = &write.list {
                    let at = data_out.len() as u64;
                    placed.pieces = list.pieces.iter().map(|p| PlacedPiece { at: at + p.buf_offset as u64, offset: p.object_offset, len: p.len }).collect();
                }
                placed.write = Some(write);
                Box::new(placed)
            }
            Err(e) => Box::new(Decided(placed.sealed(ScsiOutcome::check_condition(e.sense())))),
        }
    }
}

struct OsdPlacedWrite {
    set: Arc<OsdCommandSet>,
    request: Request<'static>,
    placement: ReplyPlacement,
    data_in_len: u32,
    auth: Option<Authorized>,
    /// Some until finished; dropped unfinished, it is abandoned.
    write: Option<PlacedWrite>,
    /// A list WRITE's pieces, at their Data-Out offsets; empty for a contiguous WRITE.
    pieces: Vec<PlacedPiece>,
}

impl OsdPlacedWrite {
    /// Adds the security answer (response integrity value) as `execute` does.
    fn sealed(&self, outcome: ScsiOutcome) -> ScsiOutcome {
        match (&self.set.security, &self.auth) {
            (Some(gate), Some(auth)) => gate.finish(&self.set.engine, &self.request, auth, &self.placement, outcome),
            _ => outcome,
        }
    }
}

impl PlacedDataOut for OsdPlacedWrite {
    fn destination(&self) -> Destination<'_> {
        match &self.write {
            Some(w) => match &w.list {
                None => Destination::File { file: &w.file, offset: w.offset },
                Some(list) => Destination::Pieces(PlacedPieces {
                    file: &w.file,
                    memory: list.mapping.as_deref().map(|m| m as &dyn MappedMemory),
                    pieces: &self.pieces,
                }),
            },
            None => Destination::Discard,
        }
    }

    fn finish(mut self: Box<Self>) -> ScsiOutcome {
        let Some(write) = self.write.take() else {
            unreachable!("an OsdPlacedWrite without a write is never handed out");
        };
        let t = Instant::now();
        let result = self.set.engine.finish_placed_write(write, &self.request, now_ms());
        self.set.times.engine_ns.fetch_add(nanos_since(t), Ordering::Relaxed);
        let outcome = self.set.outcome(result, &self.placement, self.data_in_len);
        self.sealed(outcome)
    }
}

impl Drop for OsdPlacedWrite {
    fn drop(&mut self) {
        if let Some(write) = self.write.take() {
            self.set.engine.abandon_placed_write(write);
        }
    }
}
