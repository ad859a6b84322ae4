//! The OSD's capability checks around the engine (docs/security.md): every OSD command passes
//! [`SecurityGate::authorize`] before it runs and [`SecurityGate::finish`] after (response and
//! Data-In integrity values, cache invalidation); SET KEY and SET MASTER KEY are executed here.
//!
//! Keys live in the engine's SQLite (`security_keys`) and in the checker's memory. An object's
//! type, created time and policy/access tag are cached per object; any command that can change
//! them (removal, creation, a policy-page set, member and atomic commands, FORMAT) bumps a
//! generation that empties the cache, so a revocation takes effect for every command that
//! starts after it completes.
//!
//! Refusals are counted by kind and logged with the command, the object and the initiator; a
//! key never reaches a log (`Key`'s `Debug` prints nothing of it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tessera_engine::{Engine, ObjectKind, StoredKey};
use tessera_osd_proto::{continuation_segment, Command, GetAttrs, ReplyPlacement, Request, ServiceAction};
use tessera_scsi::{Nexus, ScsiOutcome, ScsiTask, Sense};
use tessera_security::check::Arrived;
use tessera_security::key_commands::KeyCommand;
use tessera_security::nonce::NonceWindow;
use tessera_security::policy::{is_policy_page, requirement};
use tessera_security::{Authorized, Checker, CheckerConfig, Key, KeySlot, ObjectFacts, ObjectType, SecurityError, SecurityMethod};
use tessera_types::ObjectAddr;
use tracing::{debug, info, warn};

/// How a target enforces security.
#[derive(Clone, Debug)]
pub struct TargetSecurity {
    /// Weakest method accepted (CAPKEY or stronger).
    pub required: SecurityMethod,
    pub nonce_window: NonceWindow,
    /// The first master key, used only when the store holds none yet (provisioning).
    pub master_key: Option<Key>,
}

impl TargetSecurity {
    /// Security at `required` with the default nonce window.
    pub fn new(required: SecurityMethod, master_key: Option<Key>) -> Self {
        TargetSecurity { required, nonce_window: NonceWindow::default(), master_key }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("security method {0} enforces nothing; run without security instead")]
    NoSec(SecurityMethod),
    #[error("security is on but no master key is stored or provisioned: give the first master key (see docs/security.md)")]
    NoMasterKey,
    #[error("reading the stored keys: {0}")]
    Store(#[from] tessera_engine::StorageError),
}

/// Refusal counters by [`SecurityError::kind`], plus the commands let through.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SecurityCounters {
    pub authorized: u64,
    pub refused: u64,
    pub refused_by_kind: Vec<(&'static str, u64)>,
}

/// The kind a liveness probe's refusal is counted under.
const PROBE: &str = "probe";

/// A LIST of the root with no capability (NOSEC) that asks for no bytes: let through, it would
/// read and change nothing, so it is no attempt at data. `tessera status` sends it to learn
/// whether an OSD checks capabilities (refused) or runs NOSEC (answered).
fn is_liveness_probe(request: &Request<'_>, e: &SecurityError) -> bool {
    matches!(e, SecurityError::MethodRefused { got: SecurityMethod::NoSec, .. })
        && matches!(request.command, Command::List { partition_id: 0, allocation_len: 0, with_attrs: false, .. })
        && request.get_attrs == GetAttrs::None
        && request.set_attrs.is_empty()
}

pub struct SecurityGate {
    checker: Checker,
    facts: Mutex<HashMap<ObjectAddr, (u64, Option<ObjectFacts>)>>,
    facts_generation: AtomicU64,
    authorized: AtomicU64,
    refused: Mutex<HashMap<&'static str, u64>>,
}

/// Cached objects at most; the cache empties when full.
const FACTS_MAX: usize = 16 * 1024;

fn slot_of(k: &StoredKey) -> Option<KeySlot> {
    KeySlot::from_parts(k.kind, k.partition_id, k.version)
}

fn object_type(kind: ObjectKind) -> ObjectType {
    match kind {
        ObjectKind::Root => ObjectType::Root,
        ObjectKind::Partition => ObjectType::Partition,
        ObjectKind::Collection => ObjectType::Collection,
        ObjectKind::User => ObjectType::User,
    }
}

impl SecurityGate {
    /// Loads the stored keys (provisioning the first master key if none is stored).
    pub fn open(engine: &Engine, config: TargetSecurity, now_ms: u64) -> Result<SecurityGate, GateError> {
        if config.required == SecurityMethod::NoSec {
            return Err(GateError::NoSec(config.required));
        }
        let mut stored = engine.security_keys()?;
        if !stored.iter().any(|k| k.kind == 0) {
            let master = config.master_key.as_ref().ok_or(GateError::NoMasterKey)?;
            let row = StoredKey { kind: 0, partition_id: 0, version: 0, key: *master.bytes(), key_id: [0; 7] };
            engine.put_security_key(&row)?;
            info!("first master key provisioned into the store");
            stored.push(row);
        } else if config.master_key.is_some() {
            info!("the store already holds a master key; the provisioned one is not used");
        }
        let keys: Vec<(KeySlot, Key)> = stored.iter().filter_map(|k| slot_of(k).map(|s| (s, Key(k.key)))).collect();
        info!(method = %config.required, keys = keys.len(), "capability security on");
        let checker = Checker::new(CheckerConfig { required: config.required, nonce_window: config.nonce_window }, engine.system_id(), keys, now_ms);
        Ok(SecurityGate {
            checker,
            facts: Mutex::new(HashMap::new()),
            facts_generation: AtomicU64::new(0),
            authorized: AtomicU64::new(0),
            refused: Mutex::new(HashMap::new()),
        })
    }

    pub fn required(&self) -> SecurityMethod {
        self.checker.config().required
    }

    pub fn counters(&self) -> SecurityCounters {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        let mut by_kind: Vec<(&'static str, u64)> = refused.iter().map(|(k, v)| (*k, *v)).collect();
        by_kind.sort();
        SecurityCounters { authorized: self.authorized.load(Ordering::Relaxed), refused: by_kind.iter().map(|(_, v)| v).sum(), refused_by_kind: by_kind }
    }

    fn facts(&self, engine: &Engine, addr: ObjectAddr) -> Result<Option<ObjectFacts>, SecurityError> {
        let generation = self.facts_generation.load(Ordering::Acquire);
        if let Some((g, f)) = self.facts.lock().unwrap_or_else(|p| p.into_inner()).get(&addr) {
            if *g == generation {
                return Ok(*f);
            }
        }
        let found = engine.object_security(addr).map_err(|e| {
            warn!(error = %e, "reading an object's security attributes failed");
            SecurityError::FactsUnavailable
        })?;
        let facts = found.map(|s| ObjectFacts { object_type: object_type(s.kind), created_ms: s.created_ms, policy_tag: s.policy_tag });
        let mut cache = self.facts.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= FACTS_MAX {
            cache.clear();
        }
        // Stamped with the generation read before the lookup: a change that lands meanwhile
        // leaves an entry that never matches again.
        cache.insert(addr, (generation, facts));
        Ok(facts)
    }

    /// Counts one refusal of `kind`; returns how many there were.
    fn count(&self, kind: &'static str) -> u64 {
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        let n = refused.entry(kind).or_insert(0);
        *n += 1;
        *n
    }

    fn refuse(&self, nexus: &Nexus, what: &str, addr: (u64, u64), e: SecurityError) -> Sense {
        let count = self.count(e.kind());
        // Loud for the first refusals of each kind, then at powers of two: a hostile flood must
        // not drown the log.
        if count <= 16 || count.is_power_of_two() {
            warn!(initiator = %nexus.initiator_port, command = what, partition = addr.0, object = addr.1, kind = e.kind(), count, "refused: {e}");
        } else {
            debug!(initiator = %nexus.initiator_port, command = what, kind = e.kind(), "refused: {e}");
        }
        e.sense()
    }

    /// True when the capability in `cdb` asks for ALLDATA, whose checks cover the Data-Out
    /// bytes: such a command cannot be authorized before its data has arrived.
    pub fn needs_data_out(&self, cdb: &[u8]) -> bool {
        use tessera_osd_proto::cdb::{CAPABILITY, CAPABILITY_LEN};
        let method = cdb.get(CAPABILITY..CAPABILITY + CAPABILITY_LEN).and_then(|c| tessera_security::Capability::decode(c).ok()).map(|c| c.method);
        // A missing or malformed capability is refused without looking at any data.
        method.is_some_and(|m| m >= SecurityMethod::AllData)
    }

    /// Runs the checks on a decoded command; a refusal is the sense to answer with.
    pub fn authorize(&self, engine: &Engine, nexus: &Nexus, task: &ScsiTask<'_>, request: &Request<'_>, now_ms: u64) -> Result<Authorized, Sense> {
        let cdb: &[u8; tessera_osd_proto::cdb::CDB_LEN] = task.cdb.try_into().expect("decode_request accepted a 236-byte CDB");
        let arrived = Arrived {
            cdb,
            data_out: task.data_out,
            continuation: continuation_segment(request.service_action, task.cdb, task.data_out),
            data_in_len: task.data_in_len,
        };
        let need = requirement(request);
        match self.checker.authorize(&arrived, &need, now_ms, &|addr| self.facts(engine, addr)) {
            Ok(auth) => {
                self.authorized.fetch_add(1, Ordering::Relaxed);
                Ok(auth)
            }
            Err(e) if is_liveness_probe(request, &e) => {
                // Refused all the same, but counted apart and logged quietly: a health check
                // every few seconds must neither fill the log with warnings nor use up the
                // warnings that real refusals get.
                let count = self.count(PROBE);
                debug!(initiator = %nexus.initiator_port, count, "refused a liveness probe (a capability-less LIST of the root for 0 bytes)");
                Err(e.sense())
            }
            Err(e) => {
                let addressed = tessera_security::policy::Addressed::partition_id(need.addressed);
                let object = match need.addressed {
                    tessera_security::policy::Addressed::Object(a) => a.object_id.0,
                    _ => 0,
                };
                Err(self.refuse(nexus, &format!("{:?}", request.service_action), (addressed, object), e))
            }
        }
    }

    /// After the engine ran an authorized command: invalidates cached facts and keys the
    /// command may have changed, and seals the answer.
    pub fn finish(&self, engine: &Engine, request: &Request<'_>, auth: &Authorized, placement: &ReplyPlacement, mut outcome: ScsiOutcome) -> ScsiOutcome {
        use ServiceAction as S;
        let sa = request.service_action;
        let changes_facts = matches!(
            sa,
            S::Remove
                | S::RemovePartition
                | S::RemoveCollection
                | S::RemoveMemberObjects
                | S::FormatOsd
                | S::SetMemberAttributes
                | S::CompareAndSwap
                | S::FetchAndAdd
                | S::Create
                | S::CreateCollection
                | S::CreateAndWrite
                | S::CreatePartition
        ) || request.set_attrs.iter().any(|a| is_policy_page(a.id.page));
        if changes_facts {
            self.facts_generation.fetch_add(1, Ordering::Release);
        }
        let succeeded = outcome.status == tessera_scsi::ScsiStatus::Good;
        if succeeded {
            match request.command {
                tessera_osd_proto::Command::RemovePartition { partition_id } => self.forget_partition(engine, partition_id),
                tessera_osd_proto::Command::FormatOsd { .. } => self.forget_partition(engine, 0),
                _ => {}
            }
        }
        let status = outcome.status.code();
        let sense = outcome.sense.take();
        outcome.sense = self.checker.seal(auth, status, sense, placement, &mut outcome.data_in);
        outcome
    }

    /// Partition keys die with their partition (0: all partitions), so a partition id used
    /// again starts without keys.
    fn forget_partition(&self, engine: &Engine, partition_id: u64) {
        if partition_id == 0 {
            self.checker.forget_partitions();
        } else {
            self.checker.forget_partition(partition_id);
        }
        if let Err(e) = engine.delete_partition_keys(partition_id) {
            warn!(error = %e, partition = partition_id, "deleting a removed partition's keys from the store failed");
        }
    }

    /// Executes SET KEY or SET MASTER KEY.
    pub fn key_command(&self, engine: &Engine, nexus: &Nexus, task: &ScsiTask<'_>, now_ms: u64) -> ScsiOutcome {
        let command = match KeyCommand::decode(task.cdb) {
            Ok(c) => c,
            Err(sense) => return ScsiOutcome::check_condition(sense),
        };
        let cdb: &[u8; tessera_osd_proto::cdb::CDB_LEN] = task.cdb.try_into().expect("KeyCommand::decode accepted a 236-byte CDB");
        let arrived = Arrived { cdb, data_out: task.data_out, continuation: None, data_in_len: task.data_in_len };
        let what = if command.slot == KeySlot::Master { "SetMasterKey" } else { "SetKey" };
        let auth = match self.checker.authorize_key_command(&arrived, &command, now_ms) {
            Ok(a) => a,
            Err(e) => return ScsiOutcome::check_condition(self.refuse(nexus, what, (command.addressed().partition_id(), 0), e)),
        };
        let key = match self.checker.derive(&command) {
            Ok(k) => k,
            Err(e) => return ScsiOutcome::check_condition(self.refuse(nexus, what, (command.addressed().partition_id(), 0), e)),
        };
        let (kind, partition_id, version) = command.slot.parts();
        let row = StoredKey { kind, partition_id, version, key: *key.bytes(), key_id: command.key_id };
        if let Err(e) = engine.put_security_key(&row) {
            return ScsiOutcome::check_condition(e.sense());
        }
        self.checker.set_key(command.slot, key);
        info!(initiator = %nexus.initiator_port, slot = %command.slot, "key set");
        let placement = ReplyPlacement { data_len_max: 0, retrieved: None };
        let mut outcome = ScsiOutcome::good(Vec::new());
        outcome.sense = self.checker.seal(&auth, outcome.status.code(), None, &placement, &mut outcome.data_in);
        outcome
    }
}
