//! Goal: a parallel file system's clients all reach every server, so one metadata server
//! serves far more than 1,024 client connections at once and one OSD far more than 256 iSCSI
//! sessions (the limits before: the second was the target's fixed cap, the first the metadata
//! server's, and both daemons then lived within Linux's default soft limit of 1,024
//! descriptors). Each daemon raises its soft descriptor limit to its hard one at start and
//! serves what that allows (`crates/cli/src/fd_limit.rs`).
//!
//! Method: a real cluster (`tessera mds`, `tessera osd` processes, CMDRSP security); from this
//! test's process, with its own limit raised first, 1,100 clients connected at once (each
//! proves its user and stats a file over its own connection) and 300 sessions logged in to
//! the OSD at once (each answers a TEST UNIT READY); while all are open, a new client writes a
//! file and reads it back.

mod common;

use common::tessera_exe;
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::{Client, StripeHint};
use tessera_initiator::iscsi::Session;
use tessera_scsi::{ScsiRequest, ScsiStatus, ScsiTransport};

const CLIENTS: usize = 1_100;
const SESSIONS: usize = 300;

/// This process needs a descriptor per client connection and three per session, with room.
fn raise_own_limit(needed: u64) {
    let soft = tessera_cli::fd_limit::raise().unwrap();
    if soft >= needed {
        return;
    }
    // Below it even at the hard limit: only the superuser may raise that.
    let l = libc::rlimit { rlim_cur: needed, rlim_max: needed };
    // SAFETY: a valid rlimit.
    let raised = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } == 0;
    assert!(raised, "this test needs {needed} file descriptors and the hard limit allows {soft}: {}", std::io::Error::last_os_error());
}

fn test_unit_ready(session: &Session) -> ScsiStatus {
    session.execute(&ScsiRequest { lun: 0, cdb: &[0u8; 6], data_out: &[], data_in_len: 0 }).expect("TEST UNIT READY").status
}

#[test]
fn one_metadata_server_and_one_osd_serve_more_clients_than_the_old_caps_at_once() {
    raise_own_limit((CLIENTS + 3 * SESSIONS + 512) as u64);
    let dir = tempfile::Builder::new().prefix("tessera-many-clients-").tempdir().unwrap();
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &ClusterSpec::new(1)).unwrap();
    let config = cluster.config().clone();
    let admin = Client::connect(&config).unwrap();
    admin.create("/shared", 0o644, Some(StripeHint { stripe_unit: 65536, stripe_count: 1, start_osd: Some(0) })).unwrap().pwrite(0, b"seen by all").unwrap();

    let clients: Vec<Client> = (0..CLIENTS).map(|i| Client::connect(&config).unwrap_or_else(|e| panic!("client {i} of {CLIENTS}: {e}"))).collect();
    for (i, c) in clients.iter().enumerate() {
        let attr = c.stat("/shared").unwrap_or_else(|e| panic!("client {i} of {CLIENTS} stat: {e}"));
        assert_eq!(attr.size, 11);
    }

    let osd = &config.osds[0];
    let sessions: Vec<Session> = (0..SESSIONS)
        .map(|i| Session::login(osd.addr.as_str(), config.session_config(osd).unwrap()).unwrap_or_else(|e| panic!("session {i} of {SESSIONS}: {e}")))
        .collect();
    for (i, s) in sessions.iter().enumerate() {
        // The first command of a session reports the power-on unit attention.
        test_unit_ready(s);
        assert_eq!(test_unit_ready(s), ScsiStatus::Good, "session {i} of {SESSIONS}");
    }

    let late = Client::connect(&config).expect("one more client while all the others are connected");
    let data = common::pattern(300_000, 7);
    late.create("/late", 0o644, None).unwrap().pwrite(0, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    late.open("/late").unwrap().pread(0, &mut back).unwrap();
    assert!(back == data, "the late client's file reads back whole");
    drop((clients, sessions));
    cluster.stop().unwrap();
}
