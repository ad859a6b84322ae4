//! The metadata server as the OSD-2 security manager (docs/security.md): it holds each OSD's
//! master key, establishes the root, partition and working keys with SET KEY, rotates the
//! working keys on a schedule, signs its own OSD commands, and hands clients a capability and
//! capability key for every data object of a file they open.
//!
//! Keys come from [`tessera_security::schedule`]: deterministic in the master key, so every
//! metadata server of a cluster and every restart of one establish the same keys, and
//! outstanding capabilities survive an MDS restart.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tessera_initiator::osd_client::{object_of, CredentialSource, OsdClient, OsdError};
use tessera_mds_proto::{FsError, ObjectCredential, ObjectRef};
use tessera_osd_proto::Command;
use tessera_scsi::ScsiTransport;
use tessera_security::capability::{ObjectType, Permissions, Scope};
use tessera_security::clock::now_ms;
use tessera_security::{scheduled_seed, Capability, Credential, Key, KeyCommand, KeySchedule, KeySlot, OsdKeys, SecurityMethod};
use thiserror::Error;

/// How the security manager runs.
#[derive(Clone, Copy, Debug)]
pub struct SecurityConfig {
    /// The method every capability names (the OSDs accept it or stronger).
    pub method: SecurityMethod,
    /// How long a client's capability lives; clients refresh before it ends.
    pub capability_lifetime: Duration,
    /// Working keys rotate every period.
    pub key_period: Duration,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig { method: SecurityMethod::CmdRsp, capability_lifetime: Duration::from_secs(600), key_period: Duration::from_secs(3600) }
    }
}

/// One OSD as the security manager is told about it.
pub struct OsdSecret {
    /// From INQUIRY (unit serial number): every capability key binds it.
    pub system_id: [u8; 20],
    /// Provisioned out of band (`tessera up` writes it; docs/security.md).
    pub master: Key,
    /// The partition holding file data.
    pub partition_id: u64,
}

#[derive(Debug, Error)]
pub enum SecurityError {
    #[error("capability lifetime {lifetime:?} must be positive and at most {max:?} (14 key periods of {period:?}), so no capability outlives its key")]
    Lifetime { lifetime: Duration, max: Duration, period: Duration },
    #[error("security method NOSEC gives no protection: run the metadata server without master keys instead")]
    NoSec,
    #[error("OSD {osd}: {source}")]
    Osd {
        osd: u32,
        #[source]
        source: Box<OsdError>,
    },
    #[error("OSD {0}: no working key installed yet")]
    NotEstablished(u32),
    /// The OSD found the root key command's integrity check wrong: it holds a different master
    /// key than the one this server was given for it.
    #[error("OSD {osd} refused the root key signed under the master key this server has for it: the OSD holds a different master key (was its key file replaced or made anew?); give this server the key file the OSD was first started with ({source})")]
    MasterKeyMismatch {
        osd: u32,
        #[source]
        source: Box<OsdError>,
    },
}

/// Sends SET KEY to one OSD: the seam the rotation thread uses (implemented by the OSD client).
pub trait KeyInstaller: Send + Sync {
    fn install(&self, command: &KeyCommand, credential: &Credential) -> Result<(), Box<OsdError>>;
}

impl<T: ScsiTransport + Send + Sync> KeyInstaller for OsdClient<T> {
    fn install(&self, command: &KeyCommand, credential: &Credential) -> Result<(), Box<OsdError>> {
        self.set_key(command, credential).map_err(Box::new)
    }
}

/// A credential the MDS made for its own commands, reused until half its life is gone.
struct Cached {
    credential: Arc<Credential>,
    version: u8,
    renew_at_ms: u64,
}

struct OsdState {
    partition_id: u64,
    master: Key,
    keys: RwLock<OsdKeys>,
    /// Epochs whose working key this OSD holds (set since this process started).
    installed: Mutex<BTreeSet<u64>>,
    /// The MDS's own credentials: `None` key = root scope, `Some(pid)` = partition scope.
    own: Mutex<HashMap<Option<u64>, Cached>>,
}

pub struct SecurityManager {
    config: SecurityConfig,
    schedule: KeySchedule,
    osds: Vec<OsdState>,
}

impl std::fmt::Debug for SecurityManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecurityManager").field("config", &self.config).field("osds", &self.osds.len()).finish()
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

impl SecurityManager {
    /// The manager for OSDs `osds` (indexed like the cluster map). Root and partition keys are
    /// computed here; nothing is sent until [`SecurityManager::establish`].
    pub fn new(config: SecurityConfig, osds: Vec<OsdSecret>) -> Result<SecurityManager, SecurityError> {
        if config.method == SecurityMethod::NoSec {
            return Err(SecurityError::NoSec);
        }
        let schedule = KeySchedule::new(ms(config.key_period));
        // A version is overwritten when the epoch 16 later is installed, one period early.
        let max = config.key_period.saturating_mul(14);
        if config.capability_lifetime.is_zero() || config.capability_lifetime > max {
            return Err(SecurityError::Lifetime { lifetime: config.capability_lifetime, max, period: config.key_period });
        }
        let osds = osds
            .into_iter()
            .map(|o| {
                let mut keys = OsdKeys::new(o.system_id, o.master.clone());
                for slot in [KeySlot::Root, KeySlot::Partition(o.partition_id)] {
                    let (id, seed) = scheduled_seed(&o.master, slot, 0);
                    let (command, _) = keys.key_command(slot, id, seed, config.method, 0).expect("parent recorded first");
                    keys.record(&command).expect("parent recorded first");
                }
                OsdState {
                    partition_id: o.partition_id,
                    master: o.master,
                    keys: RwLock::new(keys),
                    installed: Mutex::new(BTreeSet::new()),
                    own: Mutex::new(HashMap::new()),
                }
            })
            .collect();
        Ok(SecurityManager { config, schedule, osds })
    }

    pub fn method(&self) -> SecurityMethod {
        self.config.method
    }

    pub fn config(&self) -> &SecurityConfig {
        &self.config
    }

    fn osd(&self, osd: u32) -> &OsdState {
        &self.osds[osd as usize]
    }

    /// Makes OSD `osd` hold this manager's keys: root key (under the master key), the data
    /// partition (created if missing), its partition key, and the working keys of this epoch
    /// and the next. Every step is idempotent: the keys are the ones the OSD may already hold.
    /// `client` must sign with [`SecurityManager::source`] for this OSD.
    pub fn establish<T: ScsiTransport + Send + Sync>(&self, osd: u32, client: &OsdClient<T>, now_ms: u64) -> Result<(), SecurityError> {
        let state = self.osd(osd);
        let fail = |source: Box<OsdError>| SecurityError::Osd { osd, source };
        self.send(osd, client, KeySlot::Root, 0, now_ms).map_err(|source| match source.is_invalid_cdb_field(tessera_osd_proto::cdb::REQUEST_ICV) {
            true => SecurityError::MasterKeyMismatch { osd, source },
            false => fail(source),
        })?;
        if !client.list_all(0).map_err(|e| fail(Box::new(e)))?.contains(&state.partition_id) {
            client.create_partition(Some(state.partition_id)).map_err(|e| fail(Box::new(e)))?;
        }
        self.send(osd, client, KeySlot::Partition(state.partition_id), 0, now_ms).map_err(fail)?;
        self.rotate(osd, client, now_ms)
    }

    /// Installs the working keys of the current epoch and the next where not yet installed.
    /// Called at every tick of the rotation thread; a failure is retried at the next tick.
    pub fn rotate(&self, osd: u32, installer: &dyn KeyInstaller, now_ms: u64) -> Result<(), SecurityError> {
        let state = self.osd(osd);
        let current = self.schedule.epoch(now_ms);
        for epoch in [current, current + 1] {
            if state.installed.lock().unwrap_or_else(|p| p.into_inner()).contains(&epoch) {
                continue;
            }
            let slot = KeySchedule::working_slot(state.partition_id, epoch);
            self.send(osd, installer, slot, epoch, now_ms).map_err(|source| SecurityError::Osd { osd, source })?;
            let mut installed = state.installed.lock().unwrap_or_else(|p| p.into_inner());
            installed.insert(epoch);
            // Forget epochs whose version has been reused.
            installed.retain(|e| e + 15 > epoch);
            tracing::info!(osd, epoch, version = KeySchedule::version(epoch), "working key installed");
        }
        Ok(())
    }

    /// One SET KEY for `slot` with the scheduled seed of `epoch`, recorded once the OSD took it.
    fn send(&self, osd: u32, installer: &dyn KeyInstaller, slot: KeySlot, epoch: u64, now_ms: u64) -> Result<(), Box<OsdError>> {
        let state = self.osd(osd);
        let (id, seed) = scheduled_seed(&state.master, slot, epoch);
        let keys = state.keys.read().unwrap_or_else(|p| p.into_inner());
        let (command, credential) = keys.key_command(slot, id, seed, self.config.method, now_ms).map_err(|e| Box::new(e.into()))?;
        drop(keys);
        installer.install(&command, &credential)?;
        let mut keys = state.keys.write().unwrap_or_else(|p| p.into_inner());
        keys.record(&command).map_err(|e| Box::new(e.into()))?;
        if let KeySlot::Partition(_) = slot {
            // Recording a partition key drops its working keys from the book (the OSD keeps
            // them, and they are the same): mark them for re-recording.
            state.installed.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        Ok(())
    }

    /// The working key version capabilities for `osd` use now: the newest installed epoch not
    /// after the current one (the next epoch's key is installed early, never used early).
    fn version_now(&self, osd: u32, now_ms: u64) -> Result<u8, SecurityError> {
        let current = self.schedule.epoch(now_ms);
        let installed = self.osd(osd).installed.lock().unwrap_or_else(|p| p.into_inner());
        installed.range(..=current).next_back().map(|e| KeySchedule::version(*e)).ok_or(SecurityError::NotEstablished(osd))
    }

    /// Credentials for a file's objects, slot by slot: object scope, the file's permissions,
    /// the object's policy tag, expiring one capability lifetime from now.
    pub fn grant(&self, objects: &[ObjectRef], policy_tags: &[u32], permissions: Permissions, now_ms: u64) -> Result<Vec<ObjectCredential>, FsError> {
        let expires_ms = now_ms + ms(self.config.capability_lifetime);
        objects
            .iter()
            .zip(policy_tags)
            .map(|(o, tag)| {
                let state = self.osds.get(o.osd as usize).ok_or(FsError::Io)?;
                let version = self.version_now(o.osd, now_ms).map_err(|e| {
                    tracing::warn!(%e, "cannot issue a capability");
                    FsError::Io
                })?;
                let mut cap = Capability::new(self.config.method, ObjectType::User, Scope::Object, state.partition_id, o.object_id, permissions);
                cap.expires_ms = expires_ms;
                cap.key_version = version;
                cap.policy_tag = *tag;
                let key = state.keys.read().unwrap_or_else(|p| p.into_inner()).capability_key(&cap).map_err(|e| {
                    tracing::warn!(%e, osd = o.osd, "cannot issue a capability");
                    FsError::Io
                })?;
                Ok(ObjectCredential { capability: cap.encode(), key: key.0 })
            })
            .collect()
    }

    /// A credential for the MDS's own `command` to OSD `osd`: root scope for the root object,
    /// partition scope otherwise, every permission.
    pub fn own_credential(&self, osd: u32, command: &Command, now_ms: u64) -> Option<Arc<Credential>> {
        let state = self.osds.get(osd as usize)?;
        let (partition, _) = object_of(command);
        let scope = (partition != 0 && !matches!(command, Command::CreatePartition { .. })).then_some(partition);
        let version = match scope {
            Some(_) => self.version_now(osd, now_ms).ok()?,
            None => 0,
        };
        let mut own = state.own.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = own.get(&scope) {
            if c.version == version && now_ms < c.renew_at_ms {
                return Some(c.credential.clone());
            }
        }
        let lifetime = ms(self.config.capability_lifetime);
        let keys = state.keys.read().unwrap_or_else(|p| p.into_inner());
        let mut cap = match scope {
            None => keys.root_capability(self.config.method, Permissions::ALL, 0),
            Some(pid) => {
                let mut c = Capability::new(self.config.method, ObjectType::Partition, Scope::Partition, pid, 0, Permissions::ALL);
                c.key_version = version;
                c
            }
        };
        cap.expires_ms = now_ms + lifetime;
        let credential = Arc::new(keys.credential(cap).ok()?);
        own.insert(scope, Cached { credential: credential.clone(), version, renew_at_ms: now_ms + lifetime / 2 });
        Some(credential)
    }

    /// What the MDS's client to OSD `osd` signs its commands with.
    pub fn source(self: &Arc<Self>, osd: u32) -> Arc<dyn CredentialSource> {
        Arc::new(OwnCredentials { manager: self.clone(), osd })
    }

    /// Starts the thread that installs each epoch's working key on every OSD ahead of its
    /// epoch (ticks four times per period, and every second at most).
    pub fn spawn_rotation(self: Arc<Self>, installers: Vec<Arc<dyn KeyInstaller>>) -> std::io::Result<std::thread::JoinHandle<()>> {
        let tick = (self.config.key_period / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        std::thread::Builder::new().name("key-rotation".into()).spawn(move || loop {
            std::thread::sleep(tick);
            for (osd, installer) in installers.iter().enumerate() {
                if let Err(e) = self.rotate(osd as u32, installer.as_ref(), now_ms()) {
                    tracing::warn!(%e, "working key rotation failed; retrying");
                }
            }
        })
    }
}

/// The MDS's [`CredentialSource`] for one OSD.
struct OwnCredentials {
    manager: Arc<SecurityManager>,
    osd: u32,
}

impl CredentialSource for OwnCredentials {
    fn credential(&self, command: &Command) -> Option<Arc<Credential>> {
        self.manager.own_credential(self.osd, command, now_ms())
    }
}

/// What a client may do with a file's objects, from the r/w/x bits the file's mode gives its
/// caller (`access::file_bits`). Attributes may always be read (a file's size comes from
/// them), and FLUSH (OBJ_MGMT; on a user object it allows nothing else) may always be sent:
/// it changes no byte, and a handle that wrote before a `chmod a-w` must still be able to make
/// those writes durable (fsync has no EACCES in POSIX).
pub fn file_permissions(bits: u32) -> Permissions {
    let mut p = Permissions::GET_ATTR | Permissions::OBJ_MGMT;
    if bits & crate::access::READ != 0 {
        p = p | Permissions::READ;
    }
    if bits & crate::access::WRITE != 0 {
        p = p | Permissions::WRITE | Permissions::APPEND | Permissions::SET_ATTR;
    }
    p
}

/// A fresh policy tag for a revocation: random, never 0 ("not checked") or the initial tag.
pub fn fresh_policy_tag() -> u32 {
    loop {
        let tag = getrandom::u32().unwrap_or_else(|_| now_ms() as u32);
        if tag > crate::store::INITIAL_POLICY_TAG {
            return tag;
        }
    }
}
