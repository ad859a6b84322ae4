//! Goal: a `ReconnectingSession` (the metadata server's session to each OSD) whose connection
//! is lost logs in again with the same ISID, so the target reinstates the lost session before
//! the retried command can run, even when the target never saw the connection end. Method: a
//! real target on loopback (a small RAM command set behind `ScsiFront`) and a relay
//! (crates/test-faults) that, in the middle of a command's Data-Out, closes the initiator's
//! side and holds the target's open and silent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tessera_initiator::iscsi::{ReconnectingSession, SessionConfig};
use tessera_scsi::{Nexus, ScsiOutcome, ScsiRequest, ScsiStatus, ScsiTask, ScsiTransport, Sense};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_target::spc::{CommandSet, DeviceIdentity, ScsiFront};
use tessera_test_faults::{Direction, Fault, Relay};

const TARGET: &str = "iqn.2026-11.org.tessera.test:reconnect";
const OP_PUT: u8 = 0xC0;
const OP_GET: u8 = 0xC1;

/// PUT stores Data-Out under the key in CDB bytes 2..10; GET returns it.
#[derive(Default)]
struct Ram(Mutex<HashMap<u64, Vec<u8>>>);

impl CommandSet for Ram {
    fn peripheral_device_type(&self) -> u8 {
        0x11
    }
    fn identity(&self) -> DeviceIdentity {
        DeviceIdentity { vendor: "TESSERA".into(), product: "RAM TEST".into(), revision: "0001".into(), serial: "SN0000000002".into() }
    }
    fn execute(&self, _nexus: &Nexus, task: &ScsiTask) -> ScsiOutcome {
        let key = u64::from_be_bytes(task.cdb[2..10].try_into().unwrap());
        match task.cdb[0] {
            OP_PUT => {
                self.0.lock().unwrap().insert(key, task.data_out.to_vec());
                ScsiOutcome::good(Vec::new())
            }
            OP_GET => match self.0.lock().unwrap().get(&key) {
                Some(v) => ScsiOutcome::good(v.clone()),
                None => ScsiOutcome::check_condition(Sense::invalid_cdb_field(2)),
            },
            _ => ScsiOutcome::check_condition(Sense::invalid_opcode()),
        }
    }
    fn lun_reset(&self) {}
}

fn cdb(op: u8, key: u64) -> Vec<u8> {
    let mut c = vec![0u8; 16];
    c[0] = op;
    c[2..10].copy_from_slice(&key.to_be_bytes());
    c
}

/// Runs a command, resending it past the unit attention a new session starts with (as the
/// OSD client does).
fn run(s: &ReconnectingSession, cdb: &[u8], data_out: &[&[u8]], data_in_len: u32) -> tessera_scsi::ScsiResponse {
    for _ in 0..3 {
        let r = s.execute(&ScsiRequest { lun: 0, cdb, data_out, data_in_len }).unwrap();
        if !(r.status == ScsiStatus::CheckCondition && r.sense.as_ref().is_some_and(|s| s.asc_ascq() == 0x2900)) {
            return r;
        }
    }
    panic!("unit attention three times in a row");
}

/// A RAM target behind a relay that stalls after 60,000 bytes once armed, and a session to it
/// through the relay that has PUT "first" under key 1.
fn behind_a_relay() -> (ServerHandle, Relay, ReconnectingSession) {
    let server = TargetServer::bind(TargetConfig::new(TARGET, "127.0.0.1:0"), Arc::new(ScsiFront::new(Ram::default()))).unwrap();
    let handle = server.spawn();
    let relay = Relay::start(handle.local_addr().unwrap(), Direction::ToTarget, Fault::StallAfter(60_000));
    let session = ReconnectingSession::new(&relay.addr.to_string(), SessionConfig::new("iqn.2026-11.org.tessera.test:mds", TARGET));
    assert_eq!(run(&session, &cdb(OP_PUT, 1), &[b"first"], 0).status, ScsiStatus::Good);
    (handle, relay, session)
}

#[test]
fn a_lost_connection_is_retried_on_a_reinstated_session() {
    let (handle, relay, session) = behind_a_relay();

    relay.arm();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    assert_eq!(run(&session, &cdb(OP_PUT, 2), &[&big], 0).status, ScsiStatus::Good, "the PUT cut mid Data-Out is retried");

    assert!(relay.held_closed_by_daemon(Duration::from_secs(10)), "the target closed the stalled session at the new login");
    assert_eq!(handle.reinstated_sessions(), 1, "the new login reused the lost session's ISID");
    assert_eq!(run(&session, &cdb(OP_GET, 2), &[], big.len() as u32).data_in, big);
    handle.shutdown();
}

/// Goal: `execute_into_meanwhile` runs its `meanwhile` exactly once per call, after the
/// command has left, also when the connection is lost and the command is resent on a
/// reinstated session; and `meanwhile` may run other commands on the same session (as the
/// metadata server has a file's GET ATTRIBUTES in flight together). Method: the relay above;
/// `meanwhile` counts its runs and GETs the key being PUT, which the target, running a
/// connection's commands in order, answers with the PUT's data only if the PUT left first.
#[test]
fn meanwhile_runs_once_across_a_retry_and_may_run_commands() {
    let (handle, relay, session) = behind_a_relay();

    let (mut runs, mut got) = (0, Vec::new());
    let put = cdb(OP_PUT, 2);
    let request = ScsiRequest { lun: 0, cdb: &put, data_out: &[b"second"], data_in_len: 0 };
    let r = session
        .execute_into_meanwhile(&request, Vec::new(), &mut || {
            runs += 1;
            got.push(run(&session, &cdb(OP_GET, 2), &[], 6).data_in);
        })
        .unwrap();
    assert_eq!((r.status, runs, got), (ScsiStatus::Good, 1, vec![b"second".to_vec()]), "a command inside another's meanwhile, after it");

    relay.arm();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 11 + i / 253) as u8).collect();
    let put = cdb(OP_PUT, 3);
    let data: [&[u8]; 1] = [&big];
    let request = ScsiRequest { lun: 0, cdb: &put, data_out: &data, data_in_len: 0 };
    let mut runs = 0;
    let r = session.execute_into_meanwhile(&request, Vec::new(), &mut || runs += 1).unwrap();
    assert_eq!(runs, 1, "meanwhile ran once although the command went out twice");
    assert_eq!(handle.reinstated_sessions(), 1, "the connection was lost and the session reinstated");
    // The resent PUT may have met the new session's unit attention; then it goes once more.
    if r.status != ScsiStatus::Good {
        assert_eq!(run(&session, &put, &data, 0).status, ScsiStatus::Good);
    }
    assert_eq!(run(&session, &cdb(OP_GET, 3), &[], big.len() as u32).data_in, big);
    assert_eq!(run(&session, &cdb(OP_GET, 2), &[], 6).data_in, b"second");
    handle.shutdown();
}
