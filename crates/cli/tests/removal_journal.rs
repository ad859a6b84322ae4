//! Goal: a file removed while one of its OSDs is down gives its space back on that OSD once
//! the OSD returns, without a restart of the metadata server (the journaled REMOVE is retried
//! in the background). Method: a real cluster without security (one `tessera mds`, two
//! `tessera osd`), a file striped over both; OSD 1 is stopped, the file unlinked, OSD 1
//! started again; its data partition is then listed over a session of our own until the
//! file's object is gone.

mod common;

use std::time::{Duration, Instant};

use common::tessera_exe;
use tessera_cli::cluster::{ClusterSpec, LocalCluster, SecuritySpec};
use tessera_cli::session::connect;
use tessera_client::{Client, Stripe, StripeHint};

#[test]
fn an_unlink_with_an_osd_down_removes_its_object_when_the_osd_returns() {
    let dir = tempfile::Builder::new().prefix("tessera-removal-").tempdir().unwrap();
    let spec = ClusterSpec { security: SecuritySpec::nosec(), ..ClusterSpec::new(2) };
    let mut cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let f = client.create("/gone", 0o644, Some(StripeHint { stripe_unit: 65536, stripe_count: 2, start_osd: Some(0) })).unwrap();
    f.pwrite(0, &vec![7u8; 200_000]).unwrap();
    f.fsync().unwrap();
    let Stripe::File(layout) = client.getstripe("/gone").unwrap() else { panic!("a file's layout") };
    let on_osd1 = layout.objects.iter().find(|o| o.osd == 1).expect("an object on OSD 1").object_id;
    drop(f);

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
