//! Goal: a client waiting on a metadata server tells a server that is only slow (it waits on an
//! OSD for this request) from one that is stopped. The slow one is waited for; the stopped one
//! fails the call in seconds, saying so, instead of after the 60 s reply timeout.
//! Method: a real cluster (one `tessera mds`, two `tessera osd`) with `osd_liveness_secs = 4`
//! in its cluster file before the server restarts, so a request that meets a frozen OSD waits
//! about 8 s on it, past the client's 5 s probe; then the server itself frozen with SIGSTOP.

mod common;

use std::time::Duration;

use common::{cluster_with_liveness, while_frozen};
use tessera_cli::cluster::ClusterSpec;
use tessera_client::{Client, ClientError, StripeHint};

#[test]
fn a_slow_server_is_waited_for_and_a_stopped_one_is_not() {
    let dir = tempfile::Builder::new().prefix("tessera-mds-frozen-").tempdir().unwrap();
    let (cluster, config) = cluster_with_liveness(dir.path(), &ClusterSpec::new(2), 4);
    let client = Client::connect(&config).unwrap();
    let f = client.create("/f", 0o644, Some(StripeHint { stripe_unit: 65536, stripe_count: 2, start_osd: Some(0) })).unwrap();
    f.pwrite(0, &[1u8; 200_000]).unwrap();
    f.fsync().unwrap();

    // Slow: the stat waits on the frozen OSD's session for two of its liveness intervals.
    let pid_of = |role: &str, index: u32| cluster.records().into_iter().find(|r| r.role == role && r.index == index).expect("the daemon's record").pid;
    let (slow, waited) = while_frozen(pid_of("osd", 1), || client.stat("/f"));
    let err = slow.expect_err("the size needs the frozen OSD");
    assert!(matches!(err, ClientError::SizeUnknown { .. }), "the slow server's answer, not a timeout: {err}");
    assert!(waited > tessera_mds_proto::connection::PROBE_AFTER, "the call outlasted a probe ({waited:?}), so the probe found the server there");

    // Stopped: the same call fails after a probe goes unanswered, well before the timeout.
    let (stopped, waited) = while_frozen(pid_of("mds", 0), || client.stat("/"));
    let err = stopped.expect_err("a stopped server answers nothing");
    assert!(err.to_string().contains("no answer on a new connection either"), "{err}");
    assert!(waited < Duration::from_secs(30), "the call gave up after {waited:?}; the reply timeout is 60 s");
    assert!(client.stat("/").is_ok(), "the thawed server answers again");
    cluster.stop().unwrap();
}
