//! Goal: a striped READ or WRITE whose OSD connection dies under it completes anyway: the
//! client sends the lost command once more on a new session (crates/client/src/striped_io.rs)
//! instead of failing the whole call. Method: a real cluster (one `tessera mds`, two `tessera
//! osd`), a file striped over both, and a relay (crates/test-faults) in front of OSD 0 that cuts
//! the client's only session to it in the middle of a transfer: Data-In for the READ, Data-Out
//! for the WRITE. The bytes read back are compared with a local copy.

mod common;

use std::net::SocketAddr;

use common::tessera_exe;
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::{Client, ClusterConfig, File, StripeHint};
use tessera_test_faults::{Direction, Fault, Relay};

const STRIPE: u64 = 64 << 10;

fn pattern(len: usize, salt: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(31) ^ (i / 977) ^ salt) as u8).collect()
}

/// A cluster of two OSDs, and a client that reaches OSD 0 through a relay with `fault` on one
/// session only.
fn cluster_with_relay(dir: &std::path::Path, direction: Direction, fault: Fault) -> (LocalCluster, Relay, ClusterConfig) {
    let spec = ClusterSpec { stripe_unit: STRIPE, stripe_count: 2, ..ClusterSpec::new(2) };
    let cluster = LocalCluster::start_spec(tessera_exe(), dir, &spec).unwrap();
    let mut config = cluster.config().clone();
    let osd0: SocketAddr = config.osds[0].addr.parse().unwrap();
    let relay = Relay::start(osd0, direction, fault);
    config.osds[0].addr = relay.addr.to_string();
    config.sessions_per_osd = 1;
    (cluster, relay, config)
}

fn striped_file(client: &Client, data: &[u8]) -> File {
    let f = client.create("/lost", 0o644, Some(StripeHint { stripe_unit: STRIPE, stripe_count: 2, start_osd: Some(0) })).unwrap();
    f.pwrite(0, data).unwrap();
    f.fsync().unwrap();
    f
}

#[test]
fn a_read_cut_mid_data_in_is_sent_again() {
    let dir = tempfile::Builder::new().prefix("tessera-lost-read-").tempdir().unwrap();
    let (cluster, relay, config) = cluster_with_relay(dir.path(), Direction::FromTarget, Fault::CutAfter(150_000));
    let client = Client::connect(&config).unwrap();
    let data = pattern(1_200_000, 7);
    let f = striped_file(&client, &data);

    relay.arm();
    let mut back = vec![0u8; data.len()];
    f.pread(0, &mut back).expect("a read whose session to OSD 0 was cut mid Data-In");
    assert!(back == data, "the resent READ returned the file's bytes");
    cluster.stop().unwrap();
}

#[test]
fn a_write_cut_mid_data_out_is_sent_again() {
    let dir = tempfile::Builder::new().prefix("tessera-lost-write-").tempdir().unwrap();
    let (cluster, relay, config) = cluster_with_relay(dir.path(), Direction::ToTarget, Fault::CutAfter(150_000));
    let client = Client::connect(&config).unwrap();
    let f = striped_file(&client, &pattern(1_200_000, 7));

    relay.arm();
    let newer = pattern(1_200_000, 0x55);
    f.pwrite(0, &newer).expect("a write whose session to OSD 0 was cut mid Data-Out");
    f.fsync().unwrap();
    let mut back = vec![0u8; newer.len()];
    Client::connect(cluster.config()).unwrap().open("/lost").unwrap().pread(0, &mut back).unwrap();
    assert!(back == newer, "every byte of the resent WRITE reached the OSD");
    cluster.stop().unwrap();
}
