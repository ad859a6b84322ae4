//! Goal: a client that sat idle while an OSD restarted carries on without an error: its
//! sessions to that OSD died with the old process, and the pool notices before lending one
//! (crates/client/src/pool.rs) instead of failing the next command. Method: a real cluster
//! (one `tessera mds`, two `tessera osd`), a file striped over both, the OSD holding its first
//! stripe stopped and started again on the same store and address while the client waits;
//! then the same client reads and writes the whole file.

mod common;

use std::time::Duration;

use common::tessera_exe;
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::{Client, File, StripeHint};

/// Two OSDs and a client with a flushed file striped over both, its first stripe on OSD 0.
struct Striped {
    cluster: LocalCluster,
    client: Client,
    file: File,
    data: Vec<u8>,
}

fn striped_file(dir: &std::path::Path) -> Striped {
    let spec = ClusterSpec { stripe_unit: 64 << 10, stripe_count: 2, ..ClusterSpec::new(2) };
    let cluster = LocalCluster::start_spec(tessera_exe(), dir, &spec).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let data: Vec<u8> = (0..600_000u32).map(|i| (i * 13 + i / 1021) as u8).collect();
    let file = client.create("/r", 0o644, Some(StripeHint { stripe_unit: 64 << 10, stripe_count: 2, start_osd: Some(0) })).unwrap();
    file.pwrite(0, &data).unwrap();
    file.fsync().unwrap();
    Striped { cluster, client, file, data }
}

#[test]
fn an_idle_client_carries_on_after_an_osd_restart() {
    let dir = tempfile::Builder::new().prefix("tessera-osd-restart-").tempdir().unwrap();
    let Striped { mut cluster, client, file: f, data } = striped_file(dir.path());

    cluster.stop_osd(0).unwrap();
    cluster.start_osd(0).unwrap();
    // Longer than the pool's idle threshold: the next lease looks at the socket.
    std::thread::sleep(Duration::from_millis(700));
    let mut back = vec![0u8; data.len()];
    f.pread(0, &mut back).expect("a read after the OSD came back");
    assert!(back == data, "the restarted OSD kept the flushed stripes");
    f.pwrite(1000, b"after the restart").expect("a write after the OSD came back");
    let mut head = [0u8; 17];
    client.open("/r").unwrap().pread(1000, &mut head).unwrap();
    assert_eq!(&head, b"after the restart");
    cluster.stop().unwrap();
}

/// The same restart with no pause: sessions used moments before are not looked at before they
/// are lent, so the first command fails on its dead session and is sent once more on a new one
/// (crates/client/src/striped_io.rs).
#[test]
fn a_busy_client_carries_on_right_after_an_osd_restart() {
    let dir = tempfile::Builder::new().prefix("tessera-osd-restart-busy-").tempdir().unwrap();
    let Striped { mut cluster, file: f, data, .. } = striped_file(dir.path());

    cluster.stop_osd(0).unwrap();
    cluster.start_osd(0).unwrap();
    let mut back = vec![0u8; data.len()];
    f.pread(0, &mut back).expect("a read right after the OSD came back");
    assert!(back == data, "the restarted OSD kept the flushed stripes");
    cluster.stop().unwrap();
}
