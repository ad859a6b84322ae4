//! The OSD side: [`Checker::authorize`] runs the r05 §4.11.2.3 checks on one command, in the
//! standard's order, and [`Checker::seal`] adds the response and Data-In integrity values to
//! its answer.
//!
//! Order: (1) security method, (2) expiry, (3) object and byte range, (4) object created time,
//! (5) policy/access tag, (6) permission bits, (7) integrity: request ICV, continuation ICV,
//! Data-Out ICV (ALLDATA), then the nonce (CMDRSP and ALLDATA), recorded only once the command
//! is known to be authentic so a forger cannot fill the replay list.
//!
//! The checker holds the OSD's keys in memory (the target persists them) and caches derived
//! capability keys: deriving one is an HMAC, and a client sends many commands under one
//! capability.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use rustc_hash::FxBuildHasher;
use tessera_osd_proto::cdb::{self, RawCdb, CDB_LEN};
use tessera_osd_proto::offset::decode_offset;
use tessera_osd_proto::ReplyPlacement;
use tessera_scsi::Sense;
use tessera_types::limits::TRANSFER_LEN_MAX;
use tessera_types::ObjectAddr;

use crate::capability::{self, Capability, ObjectType, Scope, SecurityMethod, CAPABILITY_LEN};
use crate::error::SecurityError;
use crate::icv::{capability_key, icv_eq, CapabilityKey, ICV_SIZE};
use crate::key_commands::KeyCommand;
use crate::keys::{derive, Key, KeySlot};
use crate::nonce::{Nonce, NonceWindow, ReplayList};
use crate::policy::{Addressed, Bytes, Requirement};

/// Derived capability keys kept at most; the cache empties when full.
const CAPABILITY_KEYS_MAX: usize = 4096;

/// Derived capability keys by (key slot, capability bytes), each with the key ring generation
/// it was derived under. Hashed with FxHash: SipHash over a 104-byte capability cost a
/// measurable part of a command, and the cache need not resist chosen collisions, since only
/// capabilities that proved authentic (minted by the security manager) are ever stored, so a
/// client cannot crowd one bucket.
type CapabilityKeyCache = HashMap<(KeySlot, [u8; CAPABILITY_LEN]), (u64, CapabilityKey), FxBuildHasher>;

/// What the OSD knows of the object a capability names (only asked for when a check needs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectFacts {
    pub object_type: ObjectType,
    pub created_ms: u64,
    /// 0 when the object has none.
    pub policy_tag: u32,
}

/// One command as it arrived.
#[derive(Clone, Copy, Debug)]
pub struct Arrived<'a> {
    pub cdb: &'a [u8; CDB_LEN],
    pub data_out: &'a [u8],
    /// The continuation segment (Data-Out bytes 0..CDB continuation length), if the command has
    /// one.
    pub continuation: Option<&'a [u8]>,
    /// The initiator's expected Data-In length.
    pub data_in_len: u32,
}

/// A command that passed every check: what sealing its answer needs.
#[derive(Clone, Debug)]
pub struct Authorized {
    pub method: SecurityMethod,
    pub capability: Capability,
    key: CapabilityKey,
    request_icv: [u8; ICV_SIZE],
    /// ALLDATA: where the Data-In ICV goes.
    data_in_icv_offset: Option<u64>,
}

impl Authorized {
    /// True when the answer's Data-In must be in memory to be sealed (ALLDATA with Data-In).
    pub fn seals_data_in(&self) -> bool {
        self.data_in_icv_offset.is_some()
    }
}

/// The target's security settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckerConfig {
    /// Weakest method accepted.
    pub required: SecurityMethod,
    pub nonce_window: NonceWindow,
}

pub struct Checker {
    config: CheckerConfig,
    system_id: [u8; 20],
    keys: RwLock<KeyRing>,
    /// Bumped (under the ring's write lock) on every change of the key ring, so cached
    /// capability keys of a replaced or forgotten key never match again. A cache hit reads only
    /// this, not the ring.
    generation: AtomicU64,
    capability_keys: Mutex<CapabilityKeyCache>,
    replay: Mutex<ReplayList>,
}

#[derive(Default)]
struct KeyRing {
    keys: HashMap<KeySlot, Key>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Checker {
    /// A checker for the OSD with `system_id`, started at `now_ms` (the nonce floor), holding
    /// `keys`.
    pub fn new(config: CheckerConfig, system_id: [u8; 20], keys: impl IntoIterator<Item = (KeySlot, Key)>, now_ms: u64) -> Self {
        let ring = KeyRing { keys: keys.into_iter().collect() };
        Checker {
            config,
            system_id,
            keys: RwLock::new(ring),
            generation: AtomicU64::new(0),
            capability_keys: Mutex::new(HashMap::default()),
            replay: Mutex::new(ReplayList::new(config.nonce_window, now_ms)),
        }
    }

    pub fn config(&self) -> CheckerConfig {
        self.config
    }

    pub fn has_key(&self, slot: KeySlot) -> bool {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).keys.contains_key(&slot)
    }

    pub fn key_slots(&self) -> Vec<KeySlot> {
        let mut v: Vec<KeySlot> = self.keys.read().unwrap_or_else(|p| p.into_inner()).keys.keys().copied().collect();
        v.sort();
        v
    }

    pub fn set_key(&self, slot: KeySlot, key: Key) {
        let mut ring = self.keys.write().unwrap_or_else(|p| p.into_inner());
        ring.keys.insert(slot, key);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Forgets the partition key and working keys of `pid` (its partition was removed).
    pub fn forget_partition(&self, pid: u64) {
        let mut ring = self.keys.write().unwrap_or_else(|p| p.into_inner());
        ring.keys.retain(|slot, _| !matches!(slot, KeySlot::Partition(p) | KeySlot::Working(p, _) if *p == pid));
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Forgets every partition's keys (FORMAT OSD); the master and root keys stay.
    pub fn forget_partitions(&self) {
        let mut ring = self.keys.write().unwrap_or_else(|p| p.into_inner());
        ring.keys.retain(|slot, _| matches!(slot, KeySlot::Master | KeySlot::Root));
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The key a SET KEY / SET MASTER KEY installs, derived from its parent.
    pub fn derive(&self, command: &KeyCommand) -> Result<Key, SecurityError> {
        let parent_slot = command.slot.parent();
        let ring = self.keys.read().unwrap_or_else(|p| p.into_inner());
        let parent = ring.keys.get(&parent_slot).ok_or(SecurityError::UnknownKey(parent_slot))?;
        Ok(derive(parent, command.slot, &command.key_id, &command.seed))
    }

    /// Checks a decoded OSD command; `facts` answers for the capability's object (an error
    /// there refuses the command: the checks fail closed).
    pub fn authorize(
        &self,
        arrived: &Arrived<'_>,
        requirement: &Requirement,
        now_ms: u64,
        facts: &dyn Fn(ObjectAddr) -> Result<Option<ObjectFacts>, SecurityError>,
    ) -> Result<Authorized, SecurityError> {
        let capability = self.capability(arrived.cdb)?;
        check_expiry(&capability, now_ms)?;
        let cap_object = check_scope(&capability, requirement.addressed)?;
        check_bytes(&capability, requirement.bytes)?;
        check_object(&capability, cap_object, facts)?;
        let missing = requirement.missing(capability.permissions);
        if !missing.is_empty() {
            return Err(SecurityError::Permissions { missing });
        }
        let slot = match requirement.addressed {
            Addressed::Root => KeySlot::Root,
            other => KeySlot::Working(other.partition_id(), capability.key_version),
        };
        self.verify(arrived, capability, slot, now_ms)
    }

    /// Checks a SET KEY / SET MASTER KEY: root or partition scope, POL_SEC (and DEV_MGMT), and
    /// integrity under the parent of the key being set.
    pub fn authorize_key_command(&self, arrived: &Arrived<'_>, command: &KeyCommand, now_ms: u64) -> Result<Authorized, SecurityError> {
        let capability = self.capability(arrived.cdb)?;
        check_expiry(&capability, now_ms)?;
        check_scope(&capability, command.addressed())?;
        let missing = capability.permissions.missing(command.permissions());
        if !missing.is_empty() {
            return Err(SecurityError::Permissions { missing });
        }
        self.verify(arrived, capability, command.slot.parent(), now_ms)
    }

    /// Step 1: the capability and its method.
    fn capability(&self, cdb: &[u8; CDB_LEN]) -> Result<Capability, SecurityError> {
        let required = self.config.required;
        let bytes = &cdb[cdb::CAPABILITY..cdb::CAPABILITY + CAPABILITY_LEN];
        if capability::is_absent(bytes) {
            return Err(SecurityError::MethodRefused { required, got: SecurityMethod::NoSec });
        }
        let c = Capability::decode(bytes).map_err(SecurityError::Malformed)?;
        if c.method < required {
            return Err(SecurityError::MethodRefused { required, got: c.method });
        }
        Ok(c)
    }

    /// The capability key, from the cache or derived. A derived key comes back with the ring
    /// generation it was derived under, to be cached once the command proved authentic (so
    /// forged capabilities cannot flush the cache).
    fn capability_key(&self, slot: KeySlot, capability: &[u8; CAPABILITY_LEN]) -> Result<(CapabilityKey, Option<u64>), SecurityError> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((g, k)) = lock(&self.capability_keys).get(&(slot, *capability)) {
            if *g == generation {
                return Ok((k.clone(), None));
            }
        }
        let ring = self.keys.read().unwrap_or_else(|p| p.into_inner());
        // Read again under the lock: the ring cannot change while it is held.
        let generation = self.generation.load(Ordering::Acquire);
        let key = ring.keys.get(&slot).ok_or(SecurityError::UnknownKey(slot))?;
        Ok((CapabilityKey::new(&capability_key(key, capability, &self.system_id)), Some(generation)))
    }

    fn remember(&self, slot: KeySlot, capability: [u8; CAPABILITY_LEN], key: &CapabilityKey, generation: u64) {
        let mut cache = lock(&self.capability_keys);
        if cache.len() >= CAPABILITY_KEYS_MAX {
            cache.clear();
        }
        cache.insert((slot, capability), (generation, key.clone()));
    }

    /// Step 7: the integrity values and the nonce.
    fn verify(&self, arrived: &Arrived<'_>, capability: Capability, slot: KeySlot, now_ms: u64) -> Result<Authorized, SecurityError> {
        let mut cap_bytes = [0u8; CAPABILITY_LEN];
        cap_bytes.copy_from_slice(&arrived.cdb[cdb::CAPABILITY..cdb::CAPABILITY + CAPABILITY_LEN]);
        let (key, derived_under) = self.capability_key(slot, &cap_bytes)?;
        let request_icv = key.request_icv(arrived.cdb);
        if !icv_eq(&request_icv, &arrived.cdb[cdb::REQUEST_ICV..cdb::REQUEST_ICV + ICV_SIZE]) {
            return Err(SecurityError::RequestIcv);
        }
        if let Some(generation) = derived_under {
            self.remember(slot, cap_bytes, &key, generation);
        }
        if let Some(segment) = arrived.continuation {
            let icv = key.continuation_icv(segment);
            if !icv_eq(&icv, &segment[crate::icv::CONTINUATION_ICV..crate::icv::CONTINUATION_ICV + ICV_SIZE]) {
                return Err(SecurityError::ContinuationIcv);
            }
        }
        let raw = RawCdb::new(arrived.cdb).expect("a CDB_LEN array is a CDB");
        let method = capability.method;
        let mut data_in_icv_offset = None;
        if method == SecurityMethod::AllData {
            check_data_out(&key, raw, arrived.data_out)?;
            data_in_icv_offset = data_in_offset(raw, arrived.data_in_len)?;
        }
        if method >= SecurityMethod::CmdRsp {
            let mut n = [0u8; cdb::REQUEST_NONCE_LEN];
            n.copy_from_slice(raw.bytes(cdb::REQUEST_NONCE, cdb::REQUEST_NONCE_LEN));
            lock(&self.replay).accept(&Nonce(n), now_ms).map_err(SecurityError::Nonce)?;
        }
        Ok(Authorized { method, capability, key, request_icv, data_in_icv_offset })
    }

    /// Adds the integrity values to an answer: the response ICV (CMDRSP, ALLDATA) into the
    /// returned sense, and the Data-In ICV (ALLDATA) at its offset in `data_in`, which is
    /// zero-filled up to it. `sense` is the answer's own sense (None for GOOD).
    pub fn seal(&self, auth: &Authorized, status: u8, sense: Option<Sense>, placement: &ReplyPlacement, data_in: &mut Vec<u8>) -> Option<Sense> {
        if auth.method < SecurityMethod::CmdRsp {
            return sense;
        }
        if let Some(offset) = auth.data_in_icv_offset {
            // data_in_offset() bounded the offset by the expected Data-In length (u32). The
            // client sees these zeros too, so both ends cover the same bytes.
            data_in.resize(offset as usize, 0);
        }
        let mut sense = sense.unwrap_or_else(|| Sense::new(tessera_scsi::SenseKey::NoSense, 0, 0));
        let triplet = [sense.key as u8, sense.asc, sense.ascq];
        let icv = auth.key.response_icv(&auth.request_icv, status, triplet, retrieved_area(placement, data_in));
        sense.response_icv = Some(icv);
        if auth.data_in_icv_offset.is_some() {
            let icv = auth.key.data_in_icv(data_in);
            data_in.extend_from_slice(&icv);
        }
        Some(sense)
    }
}

/// The retrieved-attributes bytes of a Data-In, as the response ICV covers them (both ends cut
/// them the same way: at the allocation length and at what Data-In holds).
pub fn retrieved_area<'a>(placement: &ReplyPlacement, data_in: &'a [u8]) -> &'a [u8] {
    let Some(r) = placement.retrieved else { return &[] };
    let start = usize::try_from(r.offset).unwrap_or(usize::MAX).min(data_in.len());
    let end = start.saturating_add(r.allocation_len as usize).min(data_in.len());
    &data_in[start..end]
}

fn check_expiry(c: &Capability, now_ms: u64) -> Result<(), SecurityError> {
    if c.expires_ms != 0 && now_ms > c.expires_ms {
        return Err(SecurityError::Expired { expires_ms: c.expires_ms, now_ms });
    }
    Ok(())
}

/// Step 3a: the capability covers the addressed object. Returns the capability's own object.
fn check_scope(c: &Capability, addressed: Addressed) -> Result<ObjectAddr, SecurityError> {
    let same_partition = |pid: u64| {
        if c.partition_id == pid {
            Ok(())
        } else {
            Err(SecurityError::WrongPartition { allowed: c.partition_id, addressed: pid })
        }
    };
    match (c.scope, addressed) {
        (Scope::Root, Addressed::Root) => {
            if c.object_type != ObjectType::Root {
                return Err(SecurityError::WrongObjectType);
            }
            Ok(ObjectAddr::ROOT)
        }
        (Scope::Partition, Addressed::Partition(pid)) | (Scope::Partition, Addressed::Object(ObjectAddr { partition_id: tessera_types::PartitionId(pid), .. })) => {
            same_partition(pid)?;
            if c.object_type != ObjectType::Partition {
                return Err(SecurityError::WrongObjectType);
            }
            Ok(ObjectAddr::partition(pid))
        }
        (Scope::Object, Addressed::Object(addr)) => {
            same_partition(addr.partition_id.0)?;
            if c.object_id != addr.object_id.0 {
                return Err(SecurityError::WrongObject { allowed: c.object_id, addressed: addr.object_id.0 });
            }
            if !matches!(c.object_type, ObjectType::User | ObjectType::Collection) {
                return Err(SecurityError::WrongObjectType);
            }
            Ok(addr)
        }
        _ => Err(SecurityError::WrongScope),
    }
}

/// Step 3b: the bytes lie in the allowed range.
fn check_bytes(c: &Capability, bytes: Bytes) -> Result<(), SecurityError> {
    let (lo, hi) = c.allowed_range();
    match bytes {
        Bytes::None => Ok(()),
        Bytes::Range(start, end) if start >= lo && end <= hi => Ok(()),
        Bytes::Range(start, end) => Err(SecurityError::OutsideRange { start, end }),
        Bytes::Unbounded if c.range_len == 0 => Ok(()),
        Bytes::Unbounded => Err(SecurityError::OutsideRange { start: 0, end: u64::MAX }),
    }
}

/// Steps 3c, 4, 5: object type, created time, policy tag, from the OSD's own records. An
/// object the OSD does not have passes here; the command then fails on it in the engine.
fn check_object(
    c: &Capability,
    object: ObjectAddr,
    facts: &dyn Fn(ObjectAddr) -> Result<Option<ObjectFacts>, SecurityError>,
) -> Result<(), SecurityError> {
    let needs_type = c.scope == Scope::Object;
    if !needs_type && c.object_created_ms == 0 && c.policy_tag == 0 {
        return Ok(());
    }
    let Some(f) = facts(object)? else { return Ok(()) };
    if needs_type && f.object_type != c.object_type {
        return Err(SecurityError::WrongObjectType);
    }
    if c.object_created_ms != 0 && f.created_ms != c.object_created_ms {
        return Err(SecurityError::CreatedTime { allowed_ms: c.object_created_ms, actual_ms: f.created_ms });
    }
    if c.policy_tag != 0 && f.policy_tag != c.policy_tag {
        return Err(SecurityError::PolicyTag);
    }
    Ok(())
}

/// ALLDATA Data-Out: the ICV sits last, at its encoded offset, over every byte before it.
fn check_data_out(key: &CapabilityKey, raw: RawCdb<'_>, data_out: &[u8]) -> Result<(), SecurityError> {
    let encoded = raw.u32(cdb::DATA_OUT_ICV_OFFSET);
    if data_out.is_empty() {
        return match decode_offset(encoded) {
            None => Ok(()),
            Some(_) => Err(SecurityError::DataOutIcvOffset),
        };
    }
    let offset = decode_offset(encoded).ok_or(SecurityError::DataOutIcvOffset)?;
    if offset.checked_add(ICV_SIZE as u64) != Some(data_out.len() as u64) {
        return Err(SecurityError::DataOutIcvOffset);
    }
    let (covered, icv) = data_out.split_at(offset as usize);
    if !icv_eq(&key.data_out_icv(&[covered]), icv) {
        return Err(SecurityError::DataOutIcv);
    }
    Ok(())
}

/// ALLDATA Data-In: the ICV offset must leave room for the ICV inside the expected length.
fn data_in_offset(raw: RawCdb<'_>, data_in_len: u32) -> Result<Option<u64>, SecurityError> {
    match decode_offset(raw.u32(cdb::DATA_IN_ICV_OFFSET)) {
        None if data_in_len == 0 => Ok(None),
        None => Err(SecurityError::DataInIcvOffset),
        // Bounded by the transfer limit too: sealing zero-fills up to the offset, and the
        // expected length alone is the initiator's word.
        Some(offset) if offset + ICV_SIZE as u64 <= (data_in_len as u64).min(TRANSFER_LEN_MAX) => Ok(Some(offset)),
        Some(_) => Err(SecurityError::DataInIcvOffset),
    }
}
