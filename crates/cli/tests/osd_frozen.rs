//! Goal: an OSD that stops answering while keeping its connections open (a stopped process, a
//! cut-off host) fails the commands waiting on it within a bounded time, with an error naming
//! the OSD, instead of hanging them; once it answers again, the same client carries on.
//! Method: a real cluster (one `tessera mds`, two `tessera osd`), a client whose cluster file
//! sets `osd_liveness_secs = 1`, a file striped over both OSDs; OSD 1 is frozen with SIGSTOP
//! while the client reads, then thawed with SIGCONT.

mod common;

use std::time::{Duration, Instant};

use common::{cluster_with_liveness, freeze, signal, tessera_exe};
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::{Client, ClientError, StripeHint};

const STRIPE: u64 = 64 << 10;

#[test]
fn a_frozen_osd_fails_reads_in_bounded_time_and_serves_again_when_thawed() {
    let dir = tempfile::Builder::new().prefix("tessera-frozen-").tempdir().unwrap();
    let spec = ClusterSpec { stripe_unit: STRIPE, stripe_count: 2, ..ClusterSpec::new(2) };
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &spec).unwrap();
    let mut config = cluster.config().clone();
    config.osd_liveness_secs = 1;
    let client = Client::connect(&config).unwrap();
    let data: Vec<u8> = (0..4 * STRIPE as u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let f = std::sync::Arc::new(client.create("/frozen", 0o644, Some(StripeHint { stripe_unit: STRIPE, stripe_count: 2, start_osd: Some(0) })).unwrap());
    f.pwrite(0, &data).unwrap();
    f.fsync().unwrap();

    let osd1 = cluster.records().into_iter().find(|r| r.role == "osd" && r.index == 1).expect("OSD 1's record");
    freeze(osd1.pid);
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = f.clone();
    let len = data.len();
    std::thread::spawn(move || {
        let mut back = vec![0u8; len];
        let _ = tx.send(reader.pread(0, &mut back));
    });
    let outcome = rx.recv_timeout(Duration::from_secs(90));
    let waited = started.elapsed();
    // The session that timed out is not logged in again to resend the read (a frozen OSD
    // would only hold the resend for a login timeout too): so no login has timed out yet,
    // and the next read tries one rather than being refused by the login back-off.
    let mut again = vec![0u8; data.len()];
    let next = f.pread(0, &mut again).expect_err("still frozen");
    signal(osd1.pid, libc::SIGCONT);
    assert!(!next.to_string().contains("not tried again"), "the first read logged in again after its session timed out: {next}");
    let err = outcome.expect("the read against a frozen OSD hung").expect_err("a read that needs a frozen OSD fails");

    match &err {
        ClientError::Osd { osd_index, .. } => assert_eq!(*osd_index, 1, "the error names the frozen OSD: {err}"),
        other => panic!("expected an OSD error naming OSD 1, got: {other}"),
    }
    assert!(err.to_string().contains("did not answer"), "the error says the OSD went silent: {err}");
    // One liveness interval of silence, one more for the unanswered ping; generous for a
    // loaded machine, and far from "for ever".
    assert!(waited < Duration::from_secs(30), "the read gave up after {waited:?}");

    // Thawed, the OSD serves the same client and handle again (a new session).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match f.pread(0, &mut again) {
            Ok(n) => {
                assert_eq!(n, data.len());
                break;
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => panic!("the thawed OSD never served the read again: {e}"),
        }
    }
    assert!(again == data, "the bytes read after the thaw are the file's");
    cluster.stop().unwrap();
}

/// Goal: a frozen OSD is waited on once, not on every request. After the metadata server has
/// found it silent, a `stat` needing its size answers at once (EIO, size unknown) instead of
/// each waiting out a login timeout; a client whose login to it timed out fails its next
/// command to it at once too, saying so; and once the OSD is thawed, both use it again.
/// Method: as above, with `osd_liveness_secs = 1` in the cluster file before the metadata
/// server (re)starts, so its sessions use it as well; a fresh client after the freeze.
#[test]
fn a_frozen_osd_is_waited_on_once_then_reported_at_once_until_it_thaws() {
    let dir = tempfile::Builder::new().prefix("tessera-frozen-").tempdir().unwrap();
    let spec = ClusterSpec { stripe_unit: STRIPE, stripe_count: 2, ..ClusterSpec::new(2) };
    let (cluster, config) = cluster_with_liveness(dir.path(), &spec, 1);
    let login_timeout = Duration::from_secs(2 * config.osd_liveness_secs);

    let writer = Client::connect(&config).unwrap();
    let data = vec![7u8; 4 * STRIPE as usize];
    let f = writer.create("/f", 0o644, Some(StripeHint { stripe_unit: STRIPE, stripe_count: 2, start_osd: Some(0) })).unwrap();
    f.pwrite(0, &data).unwrap();
    f.fsync().unwrap();
    assert_eq!(writer.stat("/f").unwrap().size, data.len() as u64);

    let osd1 = cluster.records().into_iter().find(|r| r.role == "osd" && r.index == 1).expect("OSD 1's record");
    freeze(osd1.pid);
    let first = writer.stat("/f").expect_err("the size needs the frozen OSD");
    assert!(matches!(first, ClientError::SizeUnknown { .. }), "{first}");
    assert!(first.to_string().contains(&format!("cannot reach OSD 1 at {}", config.osds[1].addr)), "the error names the frozen OSD: {first}");
    // Past the metadata server's own login back-off, so that only its knowing the OSD is
    // silent can spare the next stat a login timeout.
    std::thread::sleep(login_timeout);
    let started = Instant::now();
    let again = writer.stat("/f").expect_err("still frozen");
    let waited = started.elapsed();
    assert!(matches!(again, ClientError::SizeUnknown { .. }), "{again}");
    assert!(waited < login_timeout, "the second stat waited {waited:?} on an OSD already known to be silent");

    let reader = Client::connect(&config).unwrap();
    let g = reader.open("/f").unwrap();
    let mut back = vec![0u8; data.len()];
    let err = g.pread(0, &mut back).expect_err("a read that needs the frozen OSD");
    assert!(matches!(&err, ClientError::Osd { osd_index: 1, .. }), "{err}");
    let err = g.pread(0, &mut back).expect_err("still frozen");
    assert!(matches!(&err, ClientError::Osd { osd_index: 1, .. }), "{err}");
    assert!(err.to_string().contains("not tried again"), "the second read is refused without another login: {err}");

    signal(osd1.pid, libc::SIGCONT);
    let deadline = Instant::now() + Duration::from_secs(60);
    let size = loop {
        match writer.stat("/f") {
            Ok(a) => break a.size,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => panic!("the metadata server never used the thawed OSD again: {e}"),
        }
    };
    assert_eq!(size, data.len() as u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = g.pread(0, &mut back) {
        assert!(Instant::now() < deadline, "the client never read from the thawed OSD again: {e}");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(back == data);
    cluster.stop().unwrap();
}

/// Goal: the metadata server finds a frozen OSD by itself, in about one probe interval plus
/// two probe liveness intervals (3 s), whatever the cluster's own liveness interval, and
/// finds it again when it thaws; no client request is needed for either.
/// Method: `osd_liveness_secs = 60` in the cluster file before the server restarts, so its
/// operations' sessions would take two minutes to give up; OSD 1 frozen; the server's record
/// read with its OsdsDown request until it names OSD 1 (within 60 s), then until it is empty
/// again after SIGCONT.
#[test]
fn the_metadata_server_finds_a_frozen_osd_without_waiting_out_the_cluster_liveness() {
    let dir = tempfile::Builder::new().prefix("tessera-frozen-").tempdir().unwrap();
    let (cluster, config) = cluster_with_liveness(dir.path(), &ClusterSpec::new(2), 60);
    let down = || {
        let mut conn = tessera_client::prover::open_mds(&config, 0, None).unwrap();
        match conn.call(&tessera_mds_proto::Request::OsdsDown).unwrap() {
            Ok(tessera_mds_proto::Reply::OsdsDown(v)) => v,
            other => panic!("OsdsDown answered {other:?}"),
        }
    };
    let until = |want: &[u32], what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while down() != want {
            assert!(Instant::now() < deadline, "{what} within 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    until(&[], "both OSDs answer at first");
    let osd1 = cluster.records().into_iter().find(|r| r.role == "osd" && r.index == 1).expect("OSD 1's record");
    freeze(osd1.pid);
    until(&[1], "the server finds OSD 1 frozen");
    signal(osd1.pid, libc::SIGCONT);
    until(&[], "the server finds OSD 1 back");
    cluster.stop().unwrap();
}

/// A new client process has no session to a frozen OSD, and a login to it would wait out the
/// login timeout (20 s at the default 10 s liveness). Once the metadata server reports the
/// OSD down, a new client's login to it waits seconds, and fails naming it; a thawed OSD is
/// still logged in to at once, whatever the server last said.
#[test]
fn a_new_client_logs_in_briefly_to_an_osd_the_server_reports_down() {
    let dir = tempfile::Builder::new().prefix("tessera-frozen-").tempdir().unwrap();
    let cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &ClusterSpec::new(2)).unwrap();
    let config = cluster.config().clone();
    let data: Vec<u8> = (0..256u32 << 10).map(|i| (i % 251) as u8).collect();
    {
        let client = Client::connect(&config).unwrap();
        let f = client.create("/f", 0o644, Some(StripeHint { stripe_unit: 64 << 10, stripe_count: 2, start_osd: Some(0) })).unwrap();
        f.pwrite(0, &data).unwrap();
        f.fsync().unwrap();
    }
    let down = || {
        let mut conn = tessera_client::prover::open_mds(&config, 0, None).unwrap();
        match conn.call(&tessera_mds_proto::Request::OsdsDown).unwrap() {
            Ok(tessera_mds_proto::Reply::OsdsDown(v)) => v,
            other => panic!("OsdsDown answered {other:?}"),
        }
    };
    let osd1 = cluster.records().into_iter().find(|r| r.role == "osd" && r.index == 1).expect("OSD 1's record");
    freeze(osd1.pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    while down() != [1] {
        assert!(Instant::now() < deadline, "the server finds OSD 1 frozen within 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }

    let client = Client::connect(&config).unwrap();
    let f = client.open("/f").unwrap();
    let mut first = vec![0u8; 64 << 10];
    f.pread(0, &mut first).expect("the first stripe unit is on OSD 0");
    assert_eq!(first, data[..64 << 10]);
    let mut all = vec![0u8; data.len()];
    let started = Instant::now();
    let err = f.pread(0, &mut all).expect_err("half the file is on the frozen OSD 1");
    let took = started.elapsed();
    assert!(matches!(&err, ClientError::Osd { osd_index: 1, .. }), "names OSD 1: {err}");
    assert!(took < Duration::from_secs(10), "a login the server's word shortens, not the 20 s one: {took:?} ({err})");

    signal(osd1.pid, libc::SIGCONT);
    let thawed = Client::connect(&config).unwrap();
    assert_eq!(thawed.open("/f").unwrap().read_to_end().unwrap(), data, "a thawed OSD is logged in to at once");
    cluster.stop().unwrap();
}

/// Goal: `df` on a cluster one of whose OSDs has just frozen answers within the metadata
/// server's probe liveness (seconds), naming that OSD, whatever the cluster's own liveness
/// interval (which would hold it for two minutes here).
/// Method: `osd_liveness_secs = 60` before the server restarts; OSD 1 frozen and `tessera df`
/// run at once, before the server's prober can have found it.
#[test]
fn df_names_a_just_frozen_osd_without_waiting_out_the_cluster_liveness() {
    let dir = tempfile::Builder::new().prefix("tessera-frozen-").tempdir().unwrap();
    let (cluster, _) = cluster_with_liveness(dir.path(), &ClusterSpec::new(2), 60);
    let file = cluster.cluster_file();
    let osd1 = cluster.records().into_iter().find(|r| r.role == "osd" && r.index == 1).expect("OSD 1's record");
    let (out, took) = common::while_frozen(osd1.pid, || common::run(&["df"], Some(&file)));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "df fails while an OSD does not answer: {stdout}{stderr}");
    assert!(stdout.lines().any(|l| l.starts_with("osd1 ") && l.contains("not answering")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("osd0 ") && !l.contains("not answering")), "the other OSD is shown: {stdout}");
    assert!(stderr.contains("1 of 2 OSDs did not answer"), "{stderr}");
    assert!(took < Duration::from_secs(40), "df waited {took:?}; the cluster's liveness would hold it 120 s");
    cluster.stop().unwrap();
}
