//! Goal: an unlink is answered once the namespace change is durable, without waiting for the
//! file's OSDs, and the objects go right after; a file removed while one of its OSDs is down
//! gives its space back on that OSD once the OSD returns, without a restart of the metadata
//! server (the journaled REMOVE is retried in the background). Method: real clusters without
//! security (one `tessera mds`, two `tessera osd`), a file striped over both; OSD 1 is frozen
//! or stopped while the file is unlinked; its data partition is then listed over a session of
//! our own until the file's object is gone.

mod common;

use std::time::{Duration, Instant};

use common::{cluster_with_liveness, tessera_exe, until_objects_removed, while_frozen};
use tessera_cli::cluster::{ClusterSpec, LocalCluster, SecuritySpec};
use tessera_cli::session::connect;
use tessera_client::{Client, Stripe, StripeHint};

/// A file at `path` striped over both OSDs, with data; its object id on OSD 1.
fn striped_file(client: &Client, path: &str) -> u64 {
    let f = client.create(path, 0o644, Some(StripeHint { stripe_unit: 65536, stripe_count: 2, start_osd: Some(0) })).unwrap();
    f.pwrite(0, &vec![7u8; 200_000]).unwrap();
    f.fsync().unwrap();
    let Stripe::File(layout) = client.getstripe(path).unwrap() else { panic!("a file's layout") };
    layout.objects.iter().find(|o| o.osd == 1).expect("an object on OSD 1").object_id
}

#[test]
fn an_unlink_is_answered_without_waiting_for_a_frozen_osd_and_its_objects_go_after() {
    let dir = tempfile::Builder::new().prefix("tessera-removal-").tempdir().unwrap();
    let spec = ClusterSpec { security: SecuritySpec::nosec(), ..ClusterSpec::new(2) };
    // A frozen OSD holds a command for two liveness intervals before the server gives up.
    let (cluster, config) = cluster_with_liveness(dir.path(), &spec, 60);
    let client = Client::connect(&config).unwrap();
    let on_osd1 = striped_file(&client, "/gone");
    let osd1_pid = cluster.records().into_iter().find(|r| r.role == "osd" && r.index == 1).expect("OSD 1's record").pid;

    let ((unlinked, awaiting), took) = while_frozen(osd1_pid, || {
        let unlinked = client.unlink("/gone");
        (unlinked, client.statfs().unwrap().pending_removals)
    });
    unlinked.expect("an unlink with an OSD frozen");
    assert!(took < Duration::from_secs(20), "the unlink waited {took:?} for the frozen OSD; it should not wait for any OSD");
    assert!(awaiting >= 1, "the frozen OSD's object awaits removal meanwhile ({awaiting})");
    assert!(client.stat("/gone").is_err(), "the name is gone at once");

    until_objects_removed(&client);
    let e = config.osds[1].clone();
    let osd1 = connect(&e.addr, &e.target).unwrap();
    assert!(!osd1.list_all(e.partition_id).unwrap().contains(&on_osd1), "object {on_osd1:#x} left OSD 1 once it thawed");
    cluster.stop().unwrap();
}

#[test]
fn an_unlink_with_an_osd_down_removes_its_object_when_the_osd_returns() {
    let dir = tempfile::Builder::new().prefix("tessera-removal-").tempdir().unwrap();
    let spec = ClusterSpec { security: SecuritySpec::nosec(), ..ClusterSpec::new(2) };
    let mut cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let on_osd1 = striped_file(&client, "/gone");

    cluster.stop_osd(1).unwrap();
    client.unlink("/gone").expect("an unlink commits with an OSD down");
    cluster.start_osd(1).unwrap();

    let e = cluster.config().osds[1].clone();
    let osd1 = connect(&e.addr, &e.target).unwrap();
    // The background retry runs every 2 s; allow many rounds on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(40);
    while osd1.list_all(e.partition_id).unwrap().contains(&on_osd1) {
        assert!(Instant::now() < deadline, "object {on_osd1:#x} still on OSD 1 40 s after it returned");
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.stop().unwrap();
}
