//! Goal: a striped WRITE whose OSD connection is lost while the OSD has not noticed (a network
//! partition rather than a reset) completes, and its resend cannot race the lost copy: the
//! client logs the pool slot in again with the same ISID, and the OSD closes the old session and
//! answers that login only once the old session's commands have ended (RFC 7143 §6.3.5
//! reinstatement; crates/client/src/pool.rs). Without it the OSD would keep the old session,
//! its half-received WRITE and anything queued behind it.
//!
//! Method: the in-process test cluster (CMDRSP security on), a relay (crates/test-faults) in
//! front of OSD 0 that, in the middle of the WRITE's Data-Out, closes the client's connection
//! and holds the OSD's open and silent. The bytes read back are compared with a local copy.

mod common;

use std::time::Duration;

use tessera_client::{Client, StripeHint};
use tessera_test_faults::{Direction, Fault, Relay};

const STRIPE: u64 = 64 << 10;
const LEN: usize = 1_200_000;

#[test]
fn a_write_whose_connection_stalls_reinstates_the_session_and_completes() {
    let cluster = common::start(2, 1);
    let mut config = cluster.config.clone();
    let relay = Relay::start(config.osds[0].addr.parse().unwrap(), Direction::ToTarget, Fault::StallAfter(150_000));
    config.osds[0].addr = relay.addr.to_string();
    config.sessions_per_osd = 1;
    let client = Client::connect(&config).unwrap();
    let f = client.create("/stalled", 0o644, Some(StripeHint { stripe_unit: STRIPE, stripe_count: 2, start_osd: Some(0) })).unwrap();
    f.pwrite(0, &common::pattern(1, LEN)).unwrap();
    f.fsync().unwrap();

    relay.arm();
    let newer = common::pattern(2, LEN);
    f.pwrite(0, &newer).expect("a write whose session to OSD 0 stalled mid Data-Out");
    f.fsync().unwrap();

    assert!(
        relay.held_closed_by_daemon(Duration::from_secs(10)),
        "OSD 0 closed the stalled session when the client logged in again with its ISID"
    );
    assert_eq!(cluster.osd_handle(0).reinstated_sessions(), 1, "that login was a reinstatement");
    assert_eq!(cluster.osd_handle(1).reinstated_sessions(), 0, "OSD 1's session was never lost");

    let mut back = vec![0u8; LEN];
    cluster.client().open("/stalled").unwrap().pread(0, &mut back).unwrap();
    assert!(back == newer, "every byte of the resent WRITE reached the OSDs");
}
