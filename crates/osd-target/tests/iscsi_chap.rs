//! CHAP at login (RFC 7143 §12.1.3) against a real `TargetServer` on 127.0.0.1:0 in this
//! process: the real initiator (`Session`) with and without credentials, and hand-built Login
//! PDUs (`RawConnection`) to see the exact status, T bit and keys on the wire. The command set
//! behind the target is the SPC front over an empty device: logging in and TEST UNIT READY is
//! all these tests need.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tessera_initiator::iscsi::{ChapCredential, ChapSecrets, RawConnection, Session, SessionConfig};
use tessera_iscsi::login::auth::{chap_response, decode_binary, encode_hex, CHALLENGE_LEN};
use tessera_iscsi::pdu::{login_status, LoginRequest, LoginResponse, Pdu, STAGE_OPERATIONAL, STAGE_SECURITY};
use tessera_iscsi::text::{encode_text, find, parse_text, KeyValue};
use tessera_scsi::{Nexus, ScsiOutcome, ScsiRequest, ScsiStatus, ScsiTask, ScsiTransport, Sense, TransportError};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_target::spc::{CommandSet, DeviceIdentity, ScsiFront};

const TARGET: &str = "iqn.2026-11.org.tessera.test:chap";
const INITIATOR: &str = "iqn.2026-11.org.tessera.test:client";
const SECRET: &[u8] = b"initiator-secret";
const TARGET_SECRET: &[u8] = b"target-secret!";

struct Empty;

impl CommandSet for Empty {
    fn peripheral_device_type(&self) -> u8 {
        0x11
    }
    fn identity(&self) -> DeviceIdentity {
        DeviceIdentity::from_system_id(&[0x24; 20])
    }
    fn execute(&self, _: &Nexus, _: &ScsiTask) -> ScsiOutcome {
        ScsiOutcome::check_condition(Sense::invalid_opcode())
    }
    fn lun_reset(&self) {}
}

fn secrets(initiator_secret: &[u8], target_secret: Option<&[u8]>) -> ChapSecrets {
    let i = ChapCredential::new("alice", initiator_secret).unwrap();
    match target_secret {
        Some(t) => ChapSecrets::mutual(i, ChapCredential::new("osd0", t).unwrap()).unwrap(),
        None => ChapSecrets::one_way(i),
    }
}

fn start(chap: ChapSecrets) -> (ServerHandle, SocketAddr) {
    let mut config = TargetConfig::new(TARGET, "127.0.0.1:0");
    config.chap = Some(chap);
    let server = TargetServer::bind(config, Arc::new(ScsiFront::new(Empty))).unwrap();
    let addr = server.local_addr().unwrap();
    (server.spawn(), addr)
}

fn test_unit_ready(s: &Session) -> ScsiStatus {
    s.execute(&ScsiRequest { lun: 0, cdb: &[0u8; 6], data_out: &[], data_in_len: 0 }).unwrap().status
}

fn kv(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Sends one Login Request of the security stage asking to move on to the operational stage.
fn send_security(conn: &mut RawConnection, pairs: &[KeyValue]) {
    let req = LoginRequest { transit: true, csg: STAGE_SECURITY, nsg: STAGE_OPERATIONAL, isid: [0x80, 0, 0, 0, 0, 1], cmd_sn: 1, ..Default::default() };
    let mut data = Vec::new();
    encode_text(pairs, &mut data);
    conn.send_pdu(&Pdu::LoginRequest(req), &data).unwrap();
}

fn recv_login(conn: &mut RawConnection) -> (LoginResponse, Vec<KeyValue>) {
    let reply = conn.recv().unwrap();
    match reply.pdu.unwrap() {
        Pdu::LoginResponse(r) => (r, parse_text(&reply.data).unwrap()),
        other => panic!("expected a Login Response, got {other:?}"),
    }
}

fn raw(addr: SocketAddr) -> RawConnection {
    let conn = RawConnection::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    conn
}

fn names() -> Vec<KeyValue> {
    kv(&[("InitiatorName", INITIATOR), ("SessionType", "Normal"), ("TargetName", TARGET)])
}

/// Runs AuthMethod=CHAP and CHAP_A=5 by hand; returns the target's (CHAP_I, CHAP_C).
fn start_chap(conn: &mut RawConnection) -> (u8, Vec<u8>) {
    let mut first = names();
    first.extend(kv(&[("AuthMethod", "CHAP,None")]));
    send_security(conn, &first);
    let (rsp, keys) = recv_login(conn);
    assert_eq!((rsp.status_class, rsp.status_detail), login_status::SUCCESS);
    assert_eq!(find(&keys, "AuthMethod"), Some("CHAP"));
    assert!(!rsp.transit, "no transit to the operational stage before CHAP is done");
    send_security(conn, &kv(&[("CHAP_A", "5")]));
    let (rsp, keys) = recv_login(conn);
    assert!(!rsp.transit);
    assert_eq!(find(&keys, "CHAP_A"), Some("5"));
    let id: u8 = find(&keys, "CHAP_I").unwrap().parse().unwrap();
    let challenge = decode_binary(find(&keys, "CHAP_C").unwrap(), 1024).unwrap();
    assert_eq!(challenge.len(), CHALLENGE_LEN);
    (id, challenge)
}

/// Goal: the exchange on the wire is RFC 7143's: the target withholds the T bit until the
/// initiator's CHAP_R checks out, then grants it; each login gets a fresh challenge.
#[test]
fn hand_built_chap_login_is_granted_transit_only_when_done() {
    let (handle, addr) = start(secrets(SECRET, None));
    let mut conn = raw(addr);
    let (id, challenge) = start_chap(&mut conn);
    let r = chap_response(id, SECRET, &challenge);
    send_security(&mut conn, &kv(&[("CHAP_N", "alice"), ("CHAP_R", &encode_hex(&r))]));
    let (rsp, keys) = recv_login(&mut conn);
    assert_eq!((rsp.status_class, rsp.status_detail), login_status::SUCCESS);
    assert!(rsp.transit && rsp.nsg == STAGE_OPERATIONAL, "transit granted once authenticated");
    assert!(find(&keys, "CHAP_N").is_none(), "one-way: the target does not prove itself");
    let (_, second) = start_chap(&mut raw(addr));
    assert_ne!(second, challenge, "challenges are fresh per login");
    assert_eq!(handle.auth_failures(), 0);
}

/// Goal: a wrong CHAP_R, no CHAP at all, and a reflected challenge each get Login status
/// 0x0201 (Authentication failure) on the wire, are counted, and end the connection.
#[test]
fn failures_answer_authentication_failure_on_the_wire() {
    let (handle, addr) = start(secrets(SECRET, Some(TARGET_SECRET)));

    let mut conn = raw(addr);
    let (id, challenge) = start_chap(&mut conn);
    let wrong = chap_response(id, b"guessed-secret!", &challenge);
    send_security(&mut conn, &kv(&[("CHAP_N", "alice"), ("CHAP_R", &encode_hex(&wrong))]));
    let (rsp, _) = recv_login(&mut conn);
    assert_eq!((rsp.status_class, rsp.status_detail), login_status::AUTHENTICATION_FAILED);
    assert!(conn.is_closed_by_peer(Duration::from_secs(5)), "the target closes after a refusal");
    assert_eq!(handle.auth_failures(), 1);

    let mut conn = raw(addr);
    let mut none = names();
    none.extend(kv(&[("AuthMethod", "None")]));
    send_security(&mut conn, &none);
    let (rsp, _) = recv_login(&mut conn);
    assert_eq!((rsp.status_class, rsp.status_detail), login_status::AUTHENTICATION_FAILED);
    assert_eq!(handle.auth_failures(), 2);

    // Skipping the security stage altogether (starting at the operational stage).
    let mut conn = raw(addr);
    let req = LoginRequest { transit: true, csg: STAGE_OPERATIONAL, nsg: 3, isid: [0x80, 0, 0, 0, 0, 2], cmd_sn: 1, ..Default::default() };
    let mut data = Vec::new();
    encode_text(&names(), &mut data);
    conn.send_pdu(&Pdu::LoginRequest(req), &data).unwrap();
    let (rsp, _) = recv_login(&mut conn);
    assert_eq!((rsp.status_class, rsp.status_detail), login_status::AUTHENTICATION_FAILED);
    assert_eq!(handle.auth_failures(), 3);

    // Mutual CHAP whose challenge is the target's own (RFC 7143 §9.2.1).
    let mut conn = raw(addr);
    let (id, challenge) = start_chap(&mut conn);
    let r = chap_response(id, SECRET, &challenge);
    let reflect = kv(&[("CHAP_N", "alice"), ("CHAP_R", &encode_hex(&r)), ("CHAP_I", "1"), ("CHAP_C", &encode_hex(&challenge))]);
    send_security(&mut conn, &reflect);
    let (rsp, keys) = recv_login(&mut conn);
    assert_eq!((rsp.status_class, rsp.status_detail), login_status::AUTHENTICATION_FAILED);
    assert!(find(&keys, "CHAP_R").is_none(), "no answer to a reflected challenge");
    assert_eq!(handle.auth_failures(), 4);
}

/// Goal: the initiator's sessions, normal and discovery, authenticate with CHAP (one-way and
/// mutual) and then carry commands; without credentials or with wrong ones they get the typed
/// error naming status 0x0201.
#[test]
fn sessions_and_discovery_with_chap() {
    let (handle, addr) = start(secrets(SECRET, Some(TARGET_SECRET)));
    let one_way = SessionConfig::new(INITIATOR, TARGET).with_chap(secrets(SECRET, None));
    let s = Session::login(addr, one_way.clone()).unwrap();
    assert_eq!(test_unit_ready(&s), ScsiStatus::CheckCondition, "the power-on unit attention");
    assert_eq!(test_unit_ready(&s), ScsiStatus::Good);
    s.logout().unwrap();

    let mutual = SessionConfig::new(INITIATOR, TARGET).with_chap(secrets(SECRET, Some(TARGET_SECRET)));
    let s = Session::login(addr, mutual.clone()).unwrap();
    test_unit_ready(&s);
    s.logout().unwrap();

    let targets = Session::discover_with(addr, mutual).unwrap();
    assert_eq!(targets.len(), 1);
    assert_eq!(targets[0].name, TARGET);
    assert_eq!(handle.auth_failures(), 0);

    match Session::discover(addr, INITIATOR) {
        Err(TransportError::AuthenticationFailed { reason, .. }) => assert!(reason.contains("0x0201"), "{reason}"),
        other => panic!("discovery without CHAP must fail authentication, got {:?}", other.map(|_| ())),
    }
    let wrong = SessionConfig::new(INITIATOR, TARGET).with_chap(secrets(b"wrong-secret!", None));
    match Session::login(addr, wrong) {
        Err(TransportError::AuthenticationFailed { reason, .. }) => assert!(reason.contains("0x0201"), "{reason}"),
        other => panic!("a wrong secret must fail authentication, got {:?}", other.map(|_| ())),
    }
    assert_eq!(handle.auth_failures(), 2);

    // The target holds a different target secret than the initiator expects: the initiator
    // refuses the target, and the target sees no failure of its own.
    let suspicious = SessionConfig::new(INITIATOR, TARGET).with_chap(secrets(SECRET, Some(b"expected-other")));
    match Session::login(addr, suspicious) {
        Err(TransportError::AuthenticationFailed { reason, .. }) => assert!(reason.contains("target's CHAP_R is wrong"), "{reason}"),
        other => panic!("a target with the wrong secret must be refused, got {:?}", other.map(|_| ())),
    }
    assert_eq!(handle.auth_failures(), 2);
    handle.shutdown();
}
