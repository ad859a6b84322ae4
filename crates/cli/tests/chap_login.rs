//! Goal: `tessera osd --chap-secret-file` lets only initiators that prove the CHAP secret open a
//! session, normal or discovery; under mutual CHAP the initiator also refuses a target that
//! cannot prove its own secret; failures are logged (never the secret) and counted; a secret
//! file that others may read, or a short secret, stops the daemon at start. Method: the real
//! daemon on a loopback port, Tessera's initiator and OSD client, its log read back.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::*;
use tessera_cli::daemon::Daemon;
use tessera_cli::session::{connect_with, INITIATOR_NAME};
use tessera_initiator::iscsi::{ChapSecrets, Session, SessionConfig};
use tessera_scsi::TransportError;
use tessera_types::ObjectAddr;

const ONE_WAY: &str = "# Tessera CHAP\nalice initiator-secret\n";
const MUTUAL: &str = "alice initiator-secret\nosd0 target-secret!!\n";
const REFUSED: &str = "iSCSI login refused, authentication failed";

struct ChapOsd {
    daemon: Daemon,
    _dir: tempfile::TempDir,
    addr: String,
    target: String,
    log: PathBuf,
}

fn write_secret_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn spawn(dir: &Path, secret_file: &Path, log: &Path) -> anyhow::Result<Daemon> {
    let data = dir.join("osd");
    let args = ["osd", "--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0", "--chap-secret-file", secret_file.to_str().unwrap()];
    Daemon::spawn_with(tessera_exe(), &args, Some(log))
}

fn start(secret_text: &str) -> ChapOsd {
    let dir = tempfile::Builder::new().prefix("tessera-chap-").tempdir().unwrap();
    let file = write_secret_file(dir.path(), "chap.secrets", secret_text, 0o600);
    let log = dir.path().join("osd.log");
    let daemon = spawn(dir.path(), &file, &log).expect("start tessera osd with CHAP");
    let addr = daemon.field("addr").unwrap().to_string();
    let target = daemon.field("target").unwrap().to_string();
    ChapOsd { daemon, _dir: dir, addr, target, log }
}

fn chap(text: &str) -> ChapSecrets {
    ChapSecrets::parse(text).unwrap()
}

/// The daemon's log with terminal colour codes removed.
fn log_text(osd: &ChapOsd) -> String {
    let raw = std::fs::read_to_string(&osd.log).unwrap();
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}

/// The typed authentication error inside a failed connect.
fn auth_failure(result: anyhow::Result<impl Sized>) -> String {
    let err = result.err().expect("login must fail");
    match err.downcast_ref::<TransportError>() {
        Some(TransportError::AuthenticationFailed { reason, .. }) => reason.clone(),
        _ => panic!("expected an authentication failure, got: {err:#}"),
    }
}

fn write_and_read_back(osd: &ChapOsd, secrets: ChapSecrets) {
    let client = connect_with(&osd.addr, &osd.target, Some(secrets)).expect("CHAP login");
    let pid = client.create_partition(None).unwrap();
    let obj = ObjectAddr::new(pid, client.create_one(pid).unwrap());
    let data = pattern(100_000, 7);
    client.write(obj, 0, &data, false).unwrap();
    assert!(client.read(obj, 0, data.len() as u64).unwrap().data == data, "bytes read back differ");
}

#[test]
fn the_right_secret_logs_in_and_moves_data() {
    let osd = start(ONE_WAY);
    write_and_read_back(&osd, chap(ONE_WAY));
    assert!(!log_text(&osd).contains(REFUSED));
}

#[test]
fn a_wrong_secret_or_no_chap_is_refused_logged_and_counted() {
    let osd = start(ONE_WAY);
    let reason = auth_failure(connect_with(&osd.addr, &osd.target, None));
    assert!(reason.contains("0x0201") && reason.contains("requires authentication"), "{reason}");
    let wrong = chap("alice guessed-secret\n");
    let reason = auth_failure(connect_with(&osd.addr, &osd.target, Some(wrong)));
    assert!(reason.contains("0x0201") && reason.contains("refused our CHAP credentials"), "{reason}");

    let log = log_text(&osd);
    let refusals: Vec<&str> = log.lines().filter(|l| l.contains(REFUSED)).collect();
    assert_eq!(refusals.len(), 2, "one log line per refusal:\n{log}");
    assert!(refusals[1].contains("CHAP_R for user \"alice\" is wrong"), "{}", refusals[1]);
    assert!(refusals[0].contains("count=1") && refusals[1].contains("count=2"), "{log}");
    assert!(!log.contains("initiator-secret") && !log.contains("guessed-secret"), "a secret reached the log:\n{log}");
    // Still serving the right initiator afterwards.
    write_and_read_back(&osd, chap(ONE_WAY));
}

#[test]
fn mutual_chap_succeeds_and_catches_a_wrong_target_secret() {
    let osd = start(MUTUAL);
    write_and_read_back(&osd, chap(MUTUAL));
    let expects_other = chap("alice initiator-secret\nosd0 other-target-secret\n");
    let reason = auth_failure(connect_with(&osd.addr, &osd.target, Some(expects_other)));
    assert!(reason.contains("target's CHAP_R is wrong"), "{reason}");
    let reason = auth_failure(connect_with(&osd.addr, &osd.target, Some(chap("alice initiator-secret\nosd7 target-secret!!\n"))));
    assert!(reason.contains("osd7"), "{reason}");
    assert!(!log_text(&osd).contains(REFUSED), "the target itself refused nobody");
}

#[test]
fn discovery_sessions_need_chap_too() {
    let osd = start(MUTUAL);
    let config = SessionConfig::new(INITIATOR_NAME, "").with_chap(chap(MUTUAL));
    let targets = Session::discover_with(osd.addr.as_str(), config).unwrap();
    assert_eq!(targets.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), [osd.target.as_str()]);
    match Session::discover(osd.addr.as_str(), INITIATOR_NAME) {
        Err(TransportError::AuthenticationFailed { reason, .. }) => assert!(reason.contains("0x0201"), "{reason}"),
        other => panic!("discovery without CHAP must be refused, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn an_exposed_or_weak_secret_file_stops_the_daemon() {
    let dir = tempfile::Builder::new().prefix("tessera-chap-").tempdir().unwrap();
    let log = dir.path().join("osd.log");
    let exposed = write_secret_file(dir.path(), "exposed", ONE_WAY, 0o644);
    assert!(spawn(dir.path(), &exposed, &log).is_err(), "a world-readable secret file must be refused");
    let weak = write_secret_file(dir.path(), "weak", "alice short\n", 0o600);
    assert!(spawn(dir.path(), &weak, &log).is_err(), "a 5-byte secret must be refused");
    let same = write_secret_file(dir.path(), "same", "alice same-secret-1\nosd0 same-secret-1\n", 0o600);
    assert!(spawn(dir.path(), &same, &log).is_err(), "one secret for both directions must be refused");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("chmod 600"), "{text}");
    assert!(text.contains("at least 12"), "{text}");
    assert!(text.contains("forbids one secret for both directions"), "{text}");
}

#[test]
fn the_ready_line_says_how_logins_authenticate() {
    assert_eq!(start(MUTUAL).daemon.field("auth").unwrap(), "chap-mutual");
    assert_eq!(start(ONE_WAY).daemon.field("auth").unwrap(), "chap");
    assert_eq!(TestOsd::start().daemon.as_ref().unwrap().field("auth").unwrap(), "none");
}
