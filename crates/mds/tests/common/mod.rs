//! Test fixtures: real OSDs (the engine behind the real SCSI front, reached through
//! `DirectTransport`, so every CDB is encoded and decoded as over iSCSI), and MDS instances on
//! temp dirs.

#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use tessera_engine::{Engine, EngineConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_mds::{DataObjects, Mds, MdsConfig, ObjectsError, OsdObjects, PrecreateConfig};
use tessera_mds_proto::{ClusterMap, ObjectRef, OsdInfo, StripeHint};
use tessera_scsi::DirectTransport;
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::spc::ScsiFront;

pub const PARTITION: u64 = 0x10000;

pub type Device = ScsiFront<Arc<OsdCommandSet>>;
pub type Real = OsdObjects<DirectTransport<Device>>;

/// `count` OSDs with their data partition, stores under `dir/osdN`.
pub fn real_osds(dir: &Path, count: u32) -> (Real, Vec<Arc<Device>>) {
    let mut nodes = Vec::new();
    let mut devices = Vec::new();
    for i in 0..count {
        let d = dir.join(format!("osd{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let engine = Engine::open(&d, EngineConfig::default()).unwrap();
        let device = Arc::new(ScsiFront::new(Arc::new(OsdCommandSet::new(engine))));
        let client = OsdClient::new(DirectTransport::new(device.clone(), "iqn.2026-11.org.tessera.test:mds", 1), 0);
        if client.list_all(PARTITION).is_err() {
            client.create_partition(Some(PARTITION)).unwrap();
        }
        nodes.push((client, PARTITION));
        devices.push(device);
    }
    (OsdObjects::new(nodes), devices)
}

/// Another client of OSDs [`real_osds`] made, for a test to look at them behind a server.
pub fn osds_of(devices: &[Arc<Device>]) -> Real {
    let nodes = devices
        .iter()
        .map(|d| (OsdClient::new(DirectTransport::new(d.clone(), "iqn.2026-11.org.tessera.test:checker", 1), 0), PARTITION))
        .collect();
    OsdObjects::new(nodes)
}

pub fn cluster(servers: Vec<String>, osds: u32) -> ClusterMap {
    ClusterMap { servers, osds: (0..osds).map(|i| OsdInfo { addr: format!("osd{i}"), partition_id: PARTITION }).collect() }
}

pub fn config(server_index: u32, cluster: ClusterMap) -> MdsConfig {
    MdsConfig {
        server_index,
        cluster,
        default_stripe: StripeHint { stripe_unit: 64 * 1024, stripe_count: 2, start_osd: None },
        precreate: PrecreateConfig { retry_after: std::time::Duration::ZERO, ..PrecreateConfig::default() },
        security: None,
        user_key: None,
        removal_queue_max: tessera_mds::reaper::QUEUED_MAX,
    }
}

pub fn open_single(dir: &Path, objects: Arc<dyn DataObjects>, osds: u32) -> Mds {
    Mds::open(&dir.join("mds.db"), config(0, cluster(vec!["unused".into()], osds)), objects).unwrap()
}

/// Real OSDs with the failures a real node cannot be asked to produce: REMOVE failing (a node
/// down mid-unlink), one OSD unreachable, a CREATE that runs but whose answer is lost, or a
/// node that hangs before answering a length or a REMOVE.
pub struct Faulty {
    pub inner: Real,
    pub fail_remove: AtomicBool,
    /// The index of an unreachable OSD; `u32::MAX` for none.
    pub down: AtomicU32,
    pub lose_create_answer: AtomicBool,
    /// While set, reading an object's length waits (a hung node).
    pub hang_lengths: AtomicBool,
    /// While set, a REMOVE waits (a hung node); `removes_hung` counts those waiting.
    pub hang_removes: AtomicBool,
    pub removes_hung: AtomicU32,
    /// Setting a length on this OSD fails (a node that dies between a truncate's check and
    /// its set); `u32::MAX` for none.
    pub fail_set_len: AtomicU32,
    /// Runs once a listing of an OSD has been taken, before it is returned (what happens
    /// while a repair lists the OSDs).
    pub after_list: std::sync::Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

impl Faulty {
    pub fn new(inner: Real) -> Faulty {
        Faulty { inner, fail_remove: AtomicBool::new(false), down: AtomicU32::new(u32::MAX), lose_create_answer: AtomicBool::new(false), hang_lengths: AtomicBool::new(false), hang_removes: AtomicBool::new(false), removes_hung: AtomicU32::new(0), fail_set_len: AtomicU32::new(u32::MAX), after_list: std::sync::Mutex::new(None) }
    }

    /// What asking a node for a length meets: the node down, or hung while `hang_lengths`.
    fn wait_for_length(&self, object: ObjectRef) -> Result<(), ObjectsError> {
        self.reach(object.osd)?;
        while self.hang_lengths.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(())
    }

    fn reach(&self, osd: u32) -> Result<(), ObjectsError> {
        if self.down.load(Ordering::SeqCst) == osd {
            return Err(ObjectsError::Unavailable { osd });
        }
        Ok(())
    }
}

impl DataObjects for Faulty {
    fn create(&self, objects: &[ObjectRef]) -> Result<(), ObjectsError> {
        objects.iter().try_for_each(|o| self.reach(o.osd))?;
        self.inner.create(objects)
    }
    fn create_range(&self, osd: u32, first: u64, count: u16, policy_tag: u32) -> Result<(), ObjectsError> {
        self.reach(osd)?;
        self.inner.create_range(osd, first, count, policy_tag)?;
        if self.lose_create_answer.load(Ordering::SeqCst) {
            return Err(ObjectsError::Unavailable { osd });
        }
        Ok(())
    }
    fn remove(&self, object: ObjectRef) -> Result<(), ObjectsError> {
        self.reach(object.osd)?;
        if self.fail_remove.load(Ordering::SeqCst) {
            return Err(ObjectsError::Unavailable { osd: object.osd });
        }
        if self.hang_removes.load(Ordering::SeqCst) {
            self.removes_hung.fetch_add(1, Ordering::SeqCst);
            while self.hang_removes.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            self.removes_hung.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.remove(object)
    }
    fn logical_len(&self, object: ObjectRef) -> Result<u64, ObjectsError> {
        self.wait_for_length(object)?;
        self.inner.logical_len(object)
    }
    fn data_state(&self, object: ObjectRef) -> Result<tessera_mds::ObjectData, ObjectsError> {
        self.wait_for_length(object)?;
        self.inner.data_state(object)
    }
    fn set_logical_len(&self, object: ObjectRef, len: u64) -> Result<(), ObjectsError> {
        self.reach(object.osd)?;
        if self.fail_set_len.load(Ordering::SeqCst) == object.osd {
            return Err(ObjectsError::Unavailable { osd: object.osd });
        }
        self.inner.set_logical_len(object, len)
    }
    fn list(&self, osd: u32) -> Result<Vec<u64>, ObjectsError> {
        self.reach(osd)?;
        let listed = self.inner.list(osd)?;
        if let Some(after) = self.after_list.lock().unwrap().as_ref() {
            after();
        }
        Ok(listed)
    }
    fn set_policy_tag(&self, object: ObjectRef, tag: u32) -> Result<(), ObjectsError> {
        self.reach(object.osd)?;
        self.inner.set_policy_tag(object, tag)
    }
    fn usage(&self, osd: u32) -> Result<tessera_mds_proto::OsdUsage, ObjectsError> {
        self.reach(osd)?;
        self.inner.usage(osd)
    }
}

/// Another set of clients (another initiator session) on the same OSDs.
pub fn clients_for(devices: &[Arc<Device>], session: u64) -> Real {
    OsdObjects::new(
        devices
            .iter()
            .map(|d| (OsdClient::new(DirectTransport::new(d.clone(), "iqn.2026-11.org.tessera.test:mds", session), 0), PARTITION))
            .collect(),
    )
}
