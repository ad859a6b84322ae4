//! Test fixtures: real OSDs (the engine behind the real SCSI front, reached through
//! `DirectTransport`, so every CDB is encoded and decoded as over iSCSI), and MDS instances on
//! temp dirs.

#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tessera_engine::{Engine, EngineConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_mds::{DataObjects, Mds, MdsConfig, ObjectsError, OsdObjects};
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

pub fn cluster(servers: Vec<String>, osds: u32) -> ClusterMap {
    ClusterMap { servers, osds: (0..osds).map(|i| OsdInfo { addr: format!("osd{i}"), partition_id: PARTITION }).collect() }
}

pub fn config(server_index: u32, cluster: ClusterMap) -> MdsConfig {
    MdsConfig { server_index, cluster, default_stripe: StripeHint { stripe_unit: 64 * 1024, stripe_count: 2, start_osd: None } }
}

pub fn open_single(dir: &Path, objects: Arc<dyn DataObjects>, osds: u32) -> Mds {
    Mds::open(&dir.join("mds.db"), config(0, cluster(vec!["unused".into()], osds)), objects).unwrap()
}

/// Real OSDs whose REMOVE can be made to fail on demand: the one failure a real node cannot
/// be asked to produce (a node down mid-unlink).
pub struct FlakyRemove {
    pub inner: Real,
    pub fail: AtomicBool,
}

impl DataObjects for FlakyRemove {
    fn create(&self, objects: &[ObjectRef]) -> Result<(), ObjectsError> {
        self.inner.create(objects)
    }
    fn remove(&self, object: ObjectRef) -> Result<(), ObjectsError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(ObjectsError::Unavailable { osd: object.osd });
        }
        self.inner.remove(object)
    }
    fn logical_len(&self, object: ObjectRef) -> Result<u64, ObjectsError> {
        self.inner.logical_len(object)
    }
    fn set_logical_len(&self, object: ObjectRef, len: u64) -> Result<(), ObjectsError> {
        self.inner.set_logical_len(object, len)
    }
    fn list(&self, osd: u32) -> Result<Vec<u64>, ObjectsError> {
        self.inner.list(osd)
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
