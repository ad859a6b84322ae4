//! Test cluster: real OSD targets (engine + SCSI front + iSCSI server) and real metadata
//! servers (SQLite + TCP), all in-process on loopback sockets in one temp dir. The client under
//! test reaches them only through the network, exactly as in production. Capability security
//! is on (CMDRSP), as in a cluster `tessera up` starts: every OSD checks every command, and
//! each metadata server is a security manager holding the OSDs' master keys.

#![allow(dead_code)]

use std::net::TcpListener;
use std::sync::Arc;

use tessera_client::{Client, ClusterConfig, MdsEntry, OsdEntry, StripeHint};
use tessera_engine::{Engine, EngineConfig};
use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_mds::security::KeyInstaller;
use tessera_mds::{Mds, MdsConfig, OsdObjects, OsdSecret, SecurityConfig, SecurityManager};
use tessera_mds_proto::{ClusterMap, OsdInfo};
use tessera_security::clock::now_ms;
use tessera_security::{Key, SecurityMethod};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::security_gate::TargetSecurity;
use tessera_target::spc::ScsiFront;

pub const PARTITION: u64 = 0x10000;

pub struct TestCluster {
    pub config: ClusterConfig,
    pub mds: Vec<Arc<Mds>>,
    /// Metadata server i's security manager.
    pub managers: Vec<Arc<SecurityManager>>,
    osds: Vec<ServerHandle>,
    // Last: the directories outlive the servers using them.
    _dir: tempfile::TempDir,
}

pub fn session(addr: &str, target: &str) -> OsdClient<Session> {
    let config = SessionConfig::new("iqn.2026-11.org.tessera.test:mds", target);
    OsdClient::new(Session::login(addr, config).expect("login to the test OSD"), 0)
}

/// `osd_count` OSDs and `servers` metadata servers; new files stripe over every OSD with a
/// 64 KiB unit unless told otherwise.
pub fn start(osd_count: u32, servers: u32) -> TestCluster {
    let dir = tempfile::tempdir().unwrap();
    let mut osds = Vec::new();
    let mut entries = Vec::new();
    let mut secrets = Vec::new();
    for i in 0..osd_count {
        let d = dir.path().join(format!("osd{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let engine = Engine::open(&d, EngineConfig::default()).unwrap();
        let master = Key([0x40 + i as u8; 32]);
        secrets.push((engine.system_id(), master.clone()));
        let security = TargetSecurity::new(SecurityMethod::CmdRsp, Some(master));
        let device = Arc::new(ScsiFront::new(Arc::new(OsdCommandSet::with_security(engine, security).unwrap())));
        let name = format!("iqn.2026-11.org.tessera.test:osd{i}");
        let server = TargetServer::bind(TargetConfig::new(&name, "127.0.0.1:0"), device).unwrap();
        let handle = server.spawn();
        let addr = handle.local_addr().unwrap().to_string();
        entries.push(OsdEntry { addr, target: name, partition_id: PARTITION, lun: 0 });
        osds.push(handle);
    }
    let listeners: Vec<TcpListener> = (0..servers).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let addrs: Vec<String> = listeners.iter().map(|l| l.local_addr().unwrap().to_string()).collect();
    let map = ClusterMap {
        servers: addrs.clone(),
        osds: entries.iter().map(|e| OsdInfo { addr: e.addr.clone(), partition_id: PARTITION }).collect(),
    };
    let mut mds = Vec::new();
    let mut managers = Vec::new();
    for (index, listener) in listeners.into_iter().enumerate() {
        let osd_secrets = secrets.iter().map(|(system_id, master)| OsdSecret { system_id: *system_id, master: master.clone(), partition_id: PARTITION }).collect();
        let manager = Arc::new(SecurityManager::new(SecurityConfig::default(), osd_secrets).unwrap());
        let clients: Vec<Arc<OsdClient<Session>>> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut c = session(&e.addr, &e.target);
                c.set_credentials(Some(manager.source(i as u32)));
                manager.establish(i as u32, &c, now_ms()).unwrap();
                Arc::new(c)
            })
            .collect();
        let installers: Vec<Arc<dyn KeyInstaller>> = clients.iter().map(|c| c.clone() as Arc<dyn KeyInstaller>).collect();
        manager.clone().spawn_rotation(installers).unwrap();
        let nodes: Vec<(Arc<OsdClient<Session>>, u64)> = clients.into_iter().map(|c| (c, PARTITION)).collect();
        let config = MdsConfig {
            server_index: index as u32,
            cluster: map.clone(),
            default_stripe: StripeHint { stripe_unit: 64 * 1024, stripe_count: 0, start_osd: None },
            precreate: Default::default(),
            security: Some(manager.clone()),
            user_key: None,
            removal_queue_max: tessera_mds::reaper::QUEUED_MAX,
        };
        let server = Arc::new(Mds::open(&dir.path().join(format!("mds{index}.db")), config, Arc::new(OsdObjects::new(nodes))).unwrap());
        tessera_mds::tcp::spawn(listener, server.clone()).unwrap();
        mds.push(server);
        managers.push(manager);
    }
    let config = ClusterConfig::new(addrs.into_iter().map(|addr| MdsEntry { addr }).collect(), entries);
    TestCluster { config, mds, managers, osds, _dir: dir }
}

impl TestCluster {
    pub fn client(&self) -> Client {
        Client::connect(&self.config).unwrap()
    }

    /// OSD `i`'s iSCSI server, for its counters.
    pub fn osd_handle(&self, i: usize) -> &ServerHandle {
        &self.osds[i]
    }

    /// A session to OSD `i` signing with the security manager's own credentials (what an
    /// administrator's tool would hold), for tests that read an OSD's counters.
    pub fn admin_session(&self, i: usize) -> OsdClient<Session> {
        let e = &self.config.osds[i];
        let mut c = session(&e.addr, &e.target);
        c.set_credentials(Some(self.managers[0].source(i as u32)));
        c
    }
}

/// Deterministic bytes that differ at every offset and between seeds, so a misplaced stripe
/// unit never compares equal by accident.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn hint(stripe_unit: u64, stripe_count: u32) -> Option<StripeHint> {
    Some(StripeHint { stripe_unit, stripe_count, start_osd: None })
}

/// A seeded xorshift generator, so a model test's random sequence is the same on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Waits until the metadata servers report no unlinked file's object awaiting removal: they
/// remove a file's objects a moment after answering its unlink (`tessera_mds::reaper`).
pub fn until_objects_removed(client: &Client) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let left = client.statfs().unwrap().pending_removals;
        if left == 0 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{left} objects still await removal after 20 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
