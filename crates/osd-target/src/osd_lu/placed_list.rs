//! List WRITEs received straight into the object's pages: the continuation segment comes first
//! in Data-Out, so the command is decided in two steps. From the CDB alone it is only known to
//! be a WRITE with a continuation segment ([`continuation_before_data`]); the transport then
//! receives the segment and hands it over ([`PlacedDataOut::take_prefix`]), and only then is
//! the layout decoded and validated, the capability checked (its integrity value covers the
//! segment), and the object's file extended and mapped ([`OsdCommandSet::begin_placed`]),
//! before any data byte arrives. A segment that does not decode, attribute lists, or pieces too
//! small to gain send the command the buffered way, where `execute` answers it exactly as
//! before (a bad descriptor: ILLEGAL REQUEST with its field pointer, nothing written).

use std::sync::Arc;
use std::time::Instant;

use tessera_osd_proto::{continuation_before_data, decode_before_data_with_continuation};
use tessera_scsi::{Destination, Nexus, PlacedDataOut, ScsiOutcome, Sense, SenseKey};

use super::{nanos_since, OsdCommandSet};

impl OsdCommandSet {
    /// A WRITE whose Data-Out starts with a continuation segment: placed once the segment is in.
    pub(super) fn place_list_write(self: &Arc<Self>, nexus: &Nexus, cdb: &[u8], data_out_len: u64, data_in_len: u32) -> Option<Box<dyn PlacedDataOut>> {
        let segment_len = continuation_before_data(cdb, data_out_len)?;
        if !self.engine.places_list_writes() {
            return None;
        }
        Some(Box::new(OsdPlacedList {
            set: self.clone(),
            nexus: nexus.clone(),
            cdb: cdb.to_vec(),
            data_out_len,
            data_in_len,
            segment_len: segment_len as usize,
            placed: None,
        }))
    }
}

struct OsdPlacedList {
    set: Arc<OsdCommandSet>,
    nexus: Nexus,
    cdb: Vec<u8>,
    data_out_len: u64,
    data_in_len: u32,
    segment_len: usize,
    /// Once the segment is in: the placed WRITE, or its decided answer.
    placed: Option<Box<dyn PlacedDataOut>>,
}

impl PlacedDataOut for OsdPlacedList {
    fn destination(&self) -> Destination<'_> {
        match &self.placed {
            Some(p) => p.destination(),
            None => Destination::Prefix { len: self.segment_len },
        }
    }

    fn take_prefix(&mut self, segment: &[u8]) -> bool {
        if self.placed.is_some() || segment.len() != self.segment_len {
            return false;
        }
        let t0 = Instant::now();
        let Some((request, placement)) = decode_before_data_with_continuation(&self.cdb, segment, self.data_out_len) else {
            return false;
        };
        if !self.set.engine.placeable(&request) {
            return false;
        }
        self.set.times.decode_ns.fetch_add(nanos_since(t0), std::sync::atomic::Ordering::Relaxed);
        self.placed = Some(self.set.begin_placed(&self.nexus, &self.cdb, segment, request, placement, self.data_in_len));
        true
    }

    fn finish(self: Box<Self>) -> ScsiOutcome {
        match self.placed {
            Some(p) => p.finish(),
            // The transport finishes a command only once all its Data-Out is in, the segment
            // first; answered as a broken data phase rather than trusted.
            None => ScsiOutcome::check_condition(Sense::new(SenseKey::AbortedCommand, 0x4B, 0x00)),
        }
    }
}
