//! Goal: on the wire, a regular pattern costs one command per OSD: a strided pattern and a 3-D
//! subarray whose blocks stay inside stripe units, written and read in `Auto` and `Strided`
//! mode, reach each OSD as exactly one command (`Sgl` too), while `Iterative` sends one per
//! piece. Method: four real OSD targets; each target's own command counter (the Tessera
//! statistics page) is read before and after every call, over a separate session.

mod common;

use common::*;
use tessera_client::{Extent, File, Mode, StridedPattern, Subarray};
use tessera_initiator::iscsi::Session;
use tessera_initiator::osd_client::OsdClient;
use tessera_target::osd_lu::{parse_stats, STATS_PAGE};
use tessera_types::ObjectAddr;

const KIB: u64 = 1024;

/// Commands each OSD has executed, read over `observers`.
fn counters(observers: &[OsdClient<Session>]) -> Vec<u64> {
    observers.iter().map(|o| parse_stats(&o.get_attribute_page(ObjectAddr::ROOT, STATS_PAGE).unwrap()).unwrap()[0]).collect()
}

/// Waits until the OSDs execute nothing but the counter reads: the metadata server fills its
/// pools of precreated objects in the background after it starts, and those CREATEs are not
/// the commands under test.
fn settle(observers: &[OsdClient<Session>]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut last = counters(observers);
    let mut quiet_rounds = 0;
    while quiet_rounds < 3 {
        assert!(std::time::Instant::now() < deadline, "the OSDs never went quiet");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = counters(observers);
        // One counter read per OSD between two samples: nothing else ran.
        let quiet = now.iter().zip(&last).all(|(n, l)| n - l == 1);
        quiet_rounds = if quiet { quiet_rounds + 1 } else { 0 };
        last = now;
    }
}

/// Commands each OSD executed for `op`, not counting the counter reads themselves.
fn commands_for(observers: &[OsdClient<Session>], op: impl FnOnce()) -> Vec<u64> {
    settle(observers);
    // What reading the counters alone adds, measured right here.
    let (a, b) = (counters(observers), counters(observers));
    let own: Vec<u64> = a.iter().zip(&b).map(|(x, y)| y - x).collect();
    op();
    let after = counters(observers);
    after.iter().zip(&b).zip(&own).map(|((after, before), own)| after - before - own).collect()
}

fn check(observers: &[OsdClient<Session>], f: &File, extents: &[Extent], pieces_per_osd: u64) {
    let total: u64 = extents.iter().map(|e| e.len).sum();
    let data = pattern(total, total as usize);
    for (mode, expect) in [(Mode::Auto, 1), (Mode::Strided, 1), (Mode::Sgl, 1), (Mode::Iterative, pieces_per_osd)] {
        let sent = commands_for(observers, || f.write_extents(extents, &data, mode).unwrap());
        assert_eq!(sent, vec![expect; 4], "{mode:?} write");
        let mut back = vec![0u8; total as usize];
        let sent = commands_for(observers, || f.read_extents(extents, &mut back, mode).unwrap());
        assert_eq!(sent, vec![expect; 4], "{mode:?} read");
        assert!(back == data, "{mode:?} read bytes");
    }
}

#[test]
fn regular_patterns_are_one_command_per_osd() {
    let cluster = start(4, 1);
    let observers: Vec<OsdClient<Session>> = (0..cluster.config.osds.len()).map(|i| cluster.admin_session(i)).collect();
    let client = cluster.client();

    // 1024 pieces of 64 B at a 1 KiB stride over 64 KiB units: 256 pieces on each OSD.
    let f = client.create("/strided", 0o644, hint(64 * KIB, 4)).unwrap();
    let strided: Vec<Extent> = StridedPattern::new(0, 64, 1024, 1024).unwrap().extents().collect();
    check(&observers, &f, &strided, 256);

    // A BTIO-like 3-D subarray: planes of one 8 KiB unit, 8 rows of 256 B from each plane,
    // two planes per OSD: 16 pieces on each OSD.
    let f = client.create("/subarray", 0o644, hint(8 * KIB, 4)).unwrap();
    let sub: Vec<Extent> = Subarray::new(0, 8, &[8, 16, 64], &[0, 4, 16], &[8, 8, 32]).unwrap().extents().collect();
    check(&observers, &f, &sub, 16);
}
