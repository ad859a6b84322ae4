//! Goal: a metadata request whose connection is lost before its reply arrives is sent once more,
//! on a new connection, only when it changes nothing (a lookup, a stat); a create is not sent
//! again, because it may have taken effect, and a second one would refuse what succeeded
//! (crates/client/src/mds_router.rs).
//!
//! Method: the in-process test cluster, a relay (crates/test-faults) in front of the metadata
//! server that closes the connection at the first reply byte once armed. Later connections
//! through the relay are clean.

mod common;

use tessera_client::{Client, ClientError, FsError};
use tessera_test_faults::{Direction, Fault, Relay};

/// A client whose metadata server is reached through a relay that cuts the first reply after
/// `arm`; the relay's first connection is the client's, opened by the `create` of `/setup`.
fn client_behind_relay(cluster: &common::TestCluster) -> (Client, Relay) {
    let mut config = cluster.config.clone();
    let relay = Relay::start(config.mds[0].addr.parse().unwrap(), Direction::FromTarget, Fault::CutAfter(0));
    config.mds[0].addr = relay.addr.to_string();
    let client = Client::connect(&config).unwrap();
    client.mkdir("/setup", 0o755).unwrap();
    (client, relay)
}

#[test]
fn a_lookup_whose_reply_is_lost_is_sent_again() {
    let cluster = common::start(1, 1);
    let (client, relay) = client_behind_relay(&cluster);
    relay.arm();
    let attr = client.stat("/setup").expect("a stat whose first reply was cut");
    assert_eq!(attr.file_type, tessera_client::FileType::Directory);
}

#[test]
fn a_create_whose_reply_is_lost_is_not_sent_again() {
    let cluster = common::start(1, 1);
    let (client, relay) = client_behind_relay(&cluster);
    // Opened first, so the create is the one request after arming (no lookups before it).
    let dir = client.open_dir("/setup").unwrap();
    relay.arm();
    match dir.create("made", 0o644, None) {
        Err(ClientError::Mds { .. }) => {}
        other => panic!("a create whose reply was cut must fail at the transport, got {:?}", other.map(|_| ())),
    }
    // It took effect once: a second create of the name would have answered EEXIST.
    assert!(client.stat("/setup/made").is_ok(), "the create reached the server");
    let again = client.create("/setup/made", 0o644, None).map(|_| ());
    assert_eq!(again.unwrap_err().fs_error(), Some(FsError::Exists));
}
