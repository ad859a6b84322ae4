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

/// Every other KiB of the first `len` bytes: with a 4 KiB stripe unit over three OSDs, one
/// small strided command per OSD, which the client sends from one thread, chained
/// (`striped_io.rs`, `CHAIN_BYTES_MAX`).
fn every_other_kib(len: u64) -> Vec<tessera_client::Extent> {
    (0..len / 2048).map(|i| tessera_client::Extent { offset: i * 2048, len: 1024 }).collect()
}

/// `run`, a chained transfer over three OSDs, during which the middle OSD's connection stalls
/// part way through the bytes going in `direction` (the client's end closed, the OSD's held
/// open and silent); afterwards the extents must hold what was last written.
fn chained_transfer_survives_a_cut(direction: Direction, run: impl Fn(&tessera_client::File, &[tessera_client::Extent], &[u8])) {
    use tessera_client::Mode;
    let cluster = common::start(3, 1);
    let mut config = cluster.config.clone();
    // Counted from the arming: about a third of the way into the command's 32 KiB.
    let relay = Relay::start(config.osds[1].addr.parse().unwrap(), direction, Fault::StallAfter(12_000));
    config.osds[1].addr = relay.addr.to_string();
    config.sessions_per_osd = 1;
    let client = Client::connect(&config).unwrap();
    let f = client.create("/chained", 0o644, Some(StripeHint { stripe_unit: 4096, stripe_count: 3, start_osd: Some(0) })).unwrap();
    let extents = every_other_kib(192 << 10);
    let first = common::pattern(3, 96 << 10);
    f.write_extents(&extents, &first, Mode::Auto).unwrap();

    relay.arm();
    run(&f, &extents, &first);
    assert_eq!(cluster.osd_handle(1).reinstated_sessions(), 1, "the cut session to OSD 1 was logged in again");
    for osd in [0, 2] {
        assert_eq!(cluster.osd_handle(osd).reinstated_sessions(), 0, "OSD {osd}'s session was never lost");
    }
    let mut back = vec![0u8; first.len()];
    cluster.client().open("/chained").unwrap().read_extents(&extents, &mut back, Mode::Auto).unwrap();
    let mut expected = first.clone();
    if direction == Direction::ToTarget {
        expected = common::pattern(4, first.len());
    }
    assert!(back == expected, "the extents hold what was last written");
}

#[test]
fn a_chained_write_whose_session_is_cut_is_resent_and_lands_whole() {
    chained_transfer_survives_a_cut(Direction::ToTarget, |f, extents, _| {
        let newer = common::pattern(4, extents.len() * 1024);
        f.write_extents(extents, &newer, tessera_client::Mode::Auto).expect("a chained write whose session to OSD 1 was cut");
    });
}

#[test]
fn a_chained_read_whose_session_is_cut_is_resent_and_returns_every_byte() {
    chained_transfer_survives_a_cut(Direction::FromTarget, |f, extents, written| {
        let mut back = vec![0u8; written.len()];
        f.read_extents(extents, &mut back, tessera_client::Mode::Auto).expect("a chained read whose session to OSD 1 was cut");
        assert!(back == written, "the resent READ filled every byte");
    });
}
