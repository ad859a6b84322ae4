//! Goal: a metadata server killed (SIGKILL) in the middle of concurrent creates, and again
//! while it starts up (draining its journal, filling its precreated pools), keeps every create
//! it acknowledged, and leaks no object on the OSDs; killed in the middle of concurrent
//! unlinks, which it answers before their objects are removed, it keeps every unlink it
//! acknowledged and still removes their objects. Method: real `tessera mds` and `tessera osd`
//! processes on loopback; four clients create (or unlink) files until the server dies under
//! them; after each restart a fresh client checks every acknowledged name, and at the end the
//! server's repair check (run on its store, with the daemon stopped) finds no orphan.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::tessera_exe;
use tessera_cli::cluster::{ClusterSpec, LocalCluster, DATA_PARTITION, KEYS_DIR};
use tessera_cli::cmd_mds::{db_path, establish_keys, security_manager};
use tessera_cli::session::connect;
use tessera_client::{Client, ClusterConfig, Stripe, StripeHint};
use tessera_mds::{DataObjects, Mds, MdsConfig, OsdObjects, PrecreateConfig, SecurityConfig};
use tessera_mds_proto::{ClusterMap, OsdInfo};

/// Creates `r{round}-w{worker}-{i}` until a create fails (the server died under it); returns
/// the acknowledged names. The one that failed may or may not exist: it was never acknowledged.
fn create_until_failure(config: &ClusterConfig, worker: usize, round: usize, made: &AtomicUsize, connected: &Barrier) -> Vec<String> {
    let dir = Client::connect(config).unwrap().open_dir("/").unwrap();
    // Every client is connected before any creates: the crash must not meet a connect.
    connected.wait();
    let mut acked = Vec::new();
    for i in 0.. {
        let name = format!("r{round}-w{worker}-{i}");
        let stripe = Some(StripeHint { stripe_unit: 65536, stripe_count: 1 + (i % 2) as u32, start_osd: None });
        if dir.create(&name, 0o644, stripe).is_err() {
            break;
        }
        acked.push(name);
        made.fetch_add(1, Ordering::SeqCst);
    }
    acked
}

/// Runs four creating clients and kills the server once they have made `before_kill` files
/// together; returns every acknowledged name.
fn crash_during_creates(cluster: &mut LocalCluster, round: usize, before_kill: usize) -> Vec<String> {
    let config = cluster.config().clone();
    crash_amid(cluster, before_kill, |w, made, connected| create_until_failure(&config, w, round, made, connected))
}

/// Runs `work(worker, done, connected)` on four client threads, each counting what it got
/// acknowledged in `done` until the server dies under it, and kills the server with SIGKILL
/// (then restarts it) once `before_kill` are done together; returns every acknowledged name.
fn crash_amid(cluster: &mut LocalCluster, before_kill: usize, work: impl Fn(usize, &AtomicUsize, &Barrier) -> Vec<String> + Sync) -> Vec<String> {
    let done = AtomicUsize::new(0);
    let connected = Barrier::new(4);
    std::thread::scope(|s| {
        let (work, done, connected) = (&work, &done, &connected);
        let workers: Vec<_> = (0..4).map(|w| s.spawn(move || work(w, done, connected))).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while done.load(Ordering::SeqCst) < before_kill && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(done.load(Ordering::SeqCst) >= before_kill, "clients got only {} acknowledged in 60 s", done.load(Ordering::SeqCst));
        cluster.crash_and_restart_mds(0).unwrap();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    })
}

fn assert_all_present(config: &ClusterConfig, names: &[String]) {
    let root = Client::connect(config).unwrap().open_dir("/").unwrap();
    for name in names {
        let attr = root.stat(name).unwrap_or_else(|e| panic!("acknowledged {name} lost: {e}"));
        assert_eq!(attr.size, 0, "{name}");
    }
}

#[test]
fn acknowledged_creates_survive_mds_crashes_and_nothing_leaks() {
    let dir = tempfile::Builder::new().prefix("tessera-crash-").tempdir().unwrap();
    let spec = ClusterSpec { stripe_unit: 65536, stripe_count: 1, ..ClusterSpec::new(2) };
    let mut cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let config = cluster.config().clone();

    let mut acked = crash_during_creates(&mut cluster, 0, 300);
    assert_all_present(&config, &acked);
    // Killed again right after it is ready: its pools are being filled, its journal drained.
    cluster.crash_and_restart_mds(0).unwrap();
    acked.extend(crash_during_creates(&mut cluster, 1, 100));
    cluster.crash_and_restart_mds(0).unwrap();
    assert_all_present(&config, &acked);
    assert!(acked.len() >= 400);
    let (mds, _) = open_with_the_daemon_stopped(&mut cluster, dir.path());
    assert_eq!(mds.repair(), Ok(tessera_mds::Audit::default()), "objects on the OSDs that nothing accounts for, or files missing theirs");
}

/// Unlinks `names[worker], names[worker + 4], ...` until an unlink fails (the server died
/// under it); returns the acknowledged ones.
fn unlink_until_failure(config: &ClusterConfig, worker: usize, names: &[String], done: &AtomicUsize, connected: &Barrier) -> Vec<String> {
    let dir = Client::connect(config).unwrap().open_dir("/").unwrap();
    connected.wait();
    let mut acked = Vec::new();
    for name in names.iter().skip(worker).step_by(4) {
        if dir.unlink(name).is_err() {
            break;
        }
        acked.push(name.clone());
        done.fetch_add(1, Ordering::SeqCst);
    }
    acked
}

#[test]
fn acknowledged_unlinks_survive_an_mds_crash_and_their_objects_still_go() {
    let dir = tempfile::Builder::new().prefix("tessera-crash-rm-").tempdir().unwrap();
    let spec = ClusterSpec { stripe_unit: 65536, stripe_count: 2, ..ClusterSpec::new(2) };
    let mut cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let config = cluster.config().clone();
    let client = Client::connect(&config).unwrap();
    let names: Vec<String> = (0..1200).map(|i| format!("f{i}")).collect();
    let mut objects = Vec::new();
    for name in &names {
        client.create(&format!("/{name}"), 0o644, None).unwrap().pwrite(0, name.as_bytes()).unwrap();
        let Stripe::File(layout) = client.getstripe(&format!("/{name}")).unwrap() else { panic!("{name}: a file's layout") };
        objects.push(layout.objects);
    }

    let acked = crash_amid(&mut cluster, 300, |w, done, connected| unlink_until_failure(&config, w, &names, done, connected));
    assert!(acked.len() >= 300 && acked.len() < names.len(), "the crash came mid-way: {} of {} removed", acked.len(), names.len());

    // Every acknowledged unlink holds; the start-up drain removes what the crash left queued.
    let root = Client::connect(&config).unwrap();
    for name in &acked {
        assert!(root.lookup(&format!("/{name}")).is_err(), "acknowledged unlink of {name} undone by the crash");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while root.statfs().unwrap().pending_removals > 0 {
        assert!(Instant::now() < deadline, "objects still await removal 30 s after the restart");
        std::thread::sleep(Duration::from_millis(10));
    }
    let kept: Vec<bool> = names.iter().map(|name| root.lookup(&format!("/{name}")).is_ok()).collect();
    let (mds, osds) = open_with_the_daemon_stopped(&mut cluster, dir.path());
    for ((name, layout), kept) in names.iter().zip(&objects).zip(kept) {
        for o in layout {
            let present = osds.logical_len(*o).is_ok();
            assert_eq!(present, kept, "{name}'s object {:#x} on OSD {}: present {present}, file kept {kept}", o.object_id, o.osd);
        }
    }
    assert_eq!(mds.repair(), Ok(tessera_mds::Audit::default()), "nothing leaked");
}

/// The server's store opened here, with the daemon stopped and the OSDs still up, for its
/// repair check; and its OSDs, reached with commands signed like the server's own (the
/// cluster checks capabilities).
fn open_with_the_daemon_stopped(cluster: &mut LocalCluster, dir: &std::path::Path) -> (Mds, Arc<dyn DataObjects>) {
    let config = cluster.config().clone();
    let mds_dir = cluster.records().into_iter().find(|r| r.role == "mds").unwrap().data;
    cluster.stop_mds(0).unwrap();
    // Signed like the server's own commands: the cluster checks capabilities.
    let mut clients: Vec<_> = config.osds.iter().map(|o| connect(&o.addr, &o.target).unwrap()).collect();
    let manager = security_manager(SecurityConfig::default(), &dir.join(KEYS_DIR), &config, &mut clients).unwrap();
    let clients: Vec<_> = clients.into_iter().map(Arc::new).collect();
    establish_keys(&manager, &config, &clients).unwrap();
    let nodes: Vec<_> = clients.into_iter().map(|c| (c, DATA_PARTITION)).collect();
    let map = ClusterMap {
        servers: config.mds.iter().map(|m| m.addr.clone()).collect(),
        osds: config.osds.iter().map(|o| OsdInfo { addr: o.addr.clone(), partition_id: o.partition_id }).collect(),
    };
    let mds_config = MdsConfig {
        server_index: 0,
        cluster: map,
        default_stripe: StripeHint { stripe_unit: 65536, stripe_count: 1, start_osd: None },
        precreate: PrecreateConfig::default(),
        security: Some(manager),
        user_key: None,
        removal_queue_max: tessera_mds::reaper::QUEUED_MAX,
    };
    let osds: Arc<dyn DataObjects> = Arc::new(OsdObjects::new(nodes));
    (Mds::open(&db_path(&mds_dir, 0), mds_config, osds.clone()).unwrap(), osds)
}

/// Goal: a client that outlives its metadata server carries on once the server is back: the
/// connections it kept idle died with the server, and its next requests (a stat, a create, a
/// layout for a read) go out on new ones instead of failing (crates/client/src/mds_router.rs).
/// Method: one `Client` across two crashes and restarts of the real `tessera mds`.
#[test]
fn a_client_carries_on_across_metadata_server_restarts() {
    let dir = tempfile::Builder::new().prefix("tessera-restart-").tempdir().unwrap();
    let spec = ClusterSpec { stripe_unit: 65536, stripe_count: 2, ..ClusterSpec::new(2) };
    let mut cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let data = common::pattern(300_000, 9);
    client.create("/kept", 0o644, None).unwrap().pwrite(0, &data).unwrap();

    cluster.crash_and_restart_mds(0).unwrap();
    assert_eq!(client.stat("/kept").expect("stat after a restart").size, data.len() as u64);
    let dir_handle = client.open_dir("/").unwrap();
    cluster.crash_and_restart_mds(0).unwrap();
    // The first request after this restart is a create: it must not meet the dead connection.
    dir_handle.create("made-after", 0o644, None).expect("create after a restart");
    assert_eq!(client.open("/kept").unwrap().read_to_end().unwrap(), data);
    cluster.stop().unwrap();
}

/// Goal: a metadata server whose peer restarted goes on making directories there: its kept
/// connection to the peer died with it, and the next cross-server mkdir opens a new one instead
/// of answering EIO. Method: two real `tessera mds` processes; directories named until one is
/// homed on server 1 (a PeerCreateDir from server 0), server 1 crashed and restarted, then the
/// same again with every mkdir required to succeed.
#[test]
fn a_server_reaches_its_peer_again_after_the_peer_restarts() {
    let dir = tempfile::Builder::new().prefix("tessera-peer-").tempdir().unwrap();
    let spec = ClusterSpec { mds: 2, stripe_unit: 65536, stripe_count: 1, ..ClusterSpec::new(1) };
    let mut cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let homed_on_peer = |prefix: &str| {
        for i in 0..64 {
            let attr = client.mkdir(&format!("/{prefix}{i}"), 0o755).unwrap_or_else(|e| panic!("mkdir /{prefix}{i}: {e}"));
            if attr.ino.server() == 1 {
                return;
            }
        }
        panic!("no directory of 64 was homed on server 1");
    };
    homed_on_peer("before");
    cluster.crash_and_restart_mds(1).unwrap();
    homed_on_peer("after");
    cluster.stop().unwrap();
}
