//! The OSD-2 command set behind LUN 0: decode the CDB and Data-Out into a typed request, run it
//! on the engine, encode the reply into Data-In. Errors at each stage become CHECK CONDITION with
//! the stage's own sense data.
//!
//! Each stage is timed so `tessera bench attr` can break a round trip down the way the seed's
//! slides do (attribute store, CDB processing, transport, initiator). The totals are readable as
//! a Tessera statistics page on the root object, [`STATS_PAGE`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::{CommandError, Engine, StorageError};
use tessera_osd_proto::{
    decode_request, encode_reply, AttrId, Command, FlushScope, GetAttrs, Options, Reply, ReplyPlacement, Request,
    RetrievedAttr, ServiceAction, TimestampsControl,
};
use tessera_security::clock::now_ms;
use tessera_security::key_commands::is_key_command;
use tessera_scsi::{FileDataIn, Nexus, PlacedDataOut, ScsiOutcome, ScsiTask};
use tessera_types::ObjectAddr;

use crate::security_gate::{GateError, SecurityGate, TargetSecurity};
use crate::spc::{CommandSet, DeviceIdentity};

mod placed_list;
mod placed_write;

/// OSD peripheral device type (SPC-4 table 51).
pub const OSD_DEVICE_TYPE: u8 = 0x11;

/// Root-object page (in the root's application range) that reports the target's per-stage
/// counters: 1 commands, 2 decode ns, 3 engine ns, 4 encode ns, 5 commands security let
/// through, 6 commands security refused, 7 WRITEs whose data was received straight into the
/// object's file (each 8 bytes, big-endian, cumulative since start).
/// Read-only; answered here, never stored.
pub const STATS_PAGE: u32 = 0x9FFF_FF00;

#[derive(Default)]
struct StageTimes {
    commands: AtomicU64,
    decode_ns: AtomicU64,
    engine_ns: AtomicU64,
    encode_ns: AtomicU64,
    placed_writes: AtomicU64,
}

pub struct OsdCommandSet {
    engine: Engine,
    times: StageTimes,
    /// Capability checks; None runs NOSEC (every command trusted).
    security: Option<SecurityGate>,
}

impl OsdCommandSet {
    /// A command set without security: every command is trusted (NOSEC).
    pub fn new(engine: Engine) -> Self {
        OsdCommandSet { engine, times: StageTimes::default(), security: None }
    }

    /// A command set that checks every command's capability (docs/security.md).
    pub fn with_security(engine: Engine, security: TargetSecurity) -> Result<Self, GateError> {
        let gate = SecurityGate::open(&engine, security, now_ms())?;
        Ok(OsdCommandSet { engine, times: StageTimes::default(), security: Some(gate) })
    }

    pub fn security(&self) -> Option<&SecurityGate> {
        self.security.as_ref()
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Makes everything durable (FLUSH OSD); used on shutdown.
    pub fn flush_all(&self) -> Result<(), StorageError> {
        let request = Request {
            service_action: ServiceAction::FlushOsd,
            options: Options::default(),
            timestamps: TimestampsControl::DoNotUpdate,
            command: Command::FlushOsd { scope: FlushScope::Everything },
            set_attrs: Vec::new(),
            get_attrs: GetAttrs::None,
            data: &[],
        };
        self.engine.execute(&request, now_ms()).map(|_| ()).map_err(StorageError::from)
    }

    fn stats_reply(&self) -> Reply {
        let t = &self.times;
        let security = self.security.as_ref().map(|g| g.counters()).unwrap_or_default();
        let values = [
            t.commands.load(Ordering::Relaxed),
            t.decode_ns.load(Ordering::Relaxed),
            t.engine_ns.load(Ordering::Relaxed),
            t.encode_ns.load(Ordering::Relaxed),
            security.authorized,
            security.refused,
            t.placed_writes.load(Ordering::Relaxed),
        ];
        let retrieved = values
            .iter()
            .enumerate()
            .map(|(i, v)| RetrievedAttr { id: AttrId::new(STATS_PAGE, i as u32 + 1), value: Some(v.to_be_bytes().to_vec()) })
            .collect();
        Reply { retrieved, ..Reply::default() }
    }
}

fn is_stats_request(request: &Request<'_>) -> bool {
    matches!(request.command, Command::GetAttributes { addr } if addr == ObjectAddr::ROOT)
        && matches!(request.get_attrs, GetAttrs::Page { page, .. } if page == STATS_PAGE)
}

fn nanos_since(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

impl CommandSet for Arc<OsdCommandSet> {
    fn peripheral_device_type(&self) -> u8 {
        OSD_DEVICE_TYPE
    }

    fn identity(&self) -> DeviceIdentity {
        DeviceIdentity::from_system_id(&self.engine.system_id())
    }

    fn execute(&self, nexus: &Nexus, task: &ScsiTask<'_>) -> ScsiOutcome {
        if let Some(gate) = &self.security {
            if is_key_command(task.cdb) {
                return gate.key_command(&self.engine, nexus, task, now_ms());
            }
        }
        let times = &self.times;
        let t0 = Instant::now();
        let decoded = decode_request(task.cdb, task.data_out);
        times.decode_ns.fetch_add(nanos_since(t0), Ordering::Relaxed);
        times.commands.fetch_add(1, Ordering::Relaxed);
        let (request, placement) = match decoded {
            Ok(d) => d,
            Err(e) => return ScsiOutcome::check_condition(e.sense()),
        };
        let Some(gate) = &self.security else { return self.run(task, &request, &placement, true) };
        let auth = match gate.authorize(&self.engine, nexus, task, &request, now_ms()) {
            Ok(a) => a,
            Err(sense) => return ScsiOutcome::check_condition(sense),
        };
        let outcome = self.run(task, &request, &placement, !auth.seals_data_in());
        gate.finish(&self.engine, &request, &auth, &placement, outcome)
    }

    fn place_data_out(&self, nexus: &Nexus, cdb: &[u8], data_out_len: u64, data_in_len: u32) -> Option<Box<dyn PlacedDataOut>> {
        self.place_write(nexus, cdb, data_out_len, data_in_len)
    }

    fn lun_reset(&self) {}
}

impl OsdCommandSet {
    /// Executes a decoded (and, under security, authorized) command. `by_reference` allows a
    /// plain READ to answer with a file range instead of bytes.
    fn run(&self, task: &ScsiTask<'_>, request: &Request<'_>, placement: &ReplyPlacement, by_reference: bool) -> ScsiOutcome {
        let times = &self.times;
        let t1 = Instant::now();
        let result = if is_stats_request(request) {
            Ok(self.stats_reply())
        } else if !by_reference {
            self.engine.execute(request, now_ms())
        } else {
            // Plain READs answer with where the bytes are; the transport sends them from the
            // page cache without a copy through this process.
            match self.engine.read_by_reference(request, now_ms()) {
                Ok(Some(read)) => {
                    times.engine_ns.fetch_add(nanos_since(t1), Ordering::Relaxed);
                    let data_in = FileDataIn { file: read.file, offset: read.offset, len: read.len, zeros: read.zeros };
                    return ScsiOutcome::from_file(data_in, read.recovered);
                }
                // List READs answer with pieces of the object's mapping, sent the same way.
                Ok(None) => match self.engine.read_mapped_by_reference(request, now_ms()) {
                    Ok(Some(read)) => {
                        times.engine_ns.fetch_add(nanos_since(t1), Ordering::Relaxed);
                        return ScsiOutcome::from_mapped(read.data_in, read.recovered);
                    }
                    Ok(None) => self.engine.execute(request, now_ms()),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        };
        times.engine_ns.fetch_add(nanos_since(t1), Ordering::Relaxed);
        self.outcome(result, placement, task.data_in_len)
    }

    /// The engine's answer as SCSI status, sense and Data-In.
    fn outcome(&self, result: Result<Reply, CommandError>, placement: &ReplyPlacement, data_in_len: u32) -> ScsiOutcome {
        let reply = match result {
            Ok(r) => r,
            Err(e) => return ScsiOutcome::check_condition(e.sense()),
        };
        let t2 = Instant::now();
        let recovered = reply.recovered.clone();
        let data_in = encode_reply(placement, reply, data_in_len);
        self.times.encode_ns.fetch_add(nanos_since(t2), Ordering::Relaxed);
        match recovered {
            Some(sense) => ScsiOutcome::check_condition_with_data(sense, data_in),
            None => ScsiOutcome::good(data_in),
        }
    }
}

/// Decodes the statistics page values (as retrieved by a client) into
/// (commands, decode ns, engine ns, encode ns).
pub fn parse_stats(attrs: &[RetrievedAttr]) -> Option<[u64; 4]> {
    let mut out = [0u64; 4];
    for a in attrs {
        if a.id.page != STATS_PAGE || !(1..=4).contains(&a.id.number) {
            continue;
        }
        let v: [u8; 8] = a.value.as_deref()?.try_into().ok()?;
        out[a.id.number as usize - 1] = u64::from_be_bytes(v);
    }
    Some(out)
}

