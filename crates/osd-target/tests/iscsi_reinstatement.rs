//! Session reinstatement (RFC 7143 §6.3.5) on a real `TargetServer` over loopback, driven by the
//! real initiator. The command set behind `ScsiFront` can hold one command until the test lets
//! it go, so the test decides when the old session's running command ends.
//!
//! Goal: a login that reuses a live session's ISID closes that session, is answered only once
//! the command it was running has returned, and the command queued behind it never runs; a
//! login with another ISID is not held up at all.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_scsi::{Nexus, ScsiOutcome, ScsiRequest, ScsiStatus, ScsiTask, ScsiTransport, Sense};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_target::spc::{CommandSet, DeviceIdentity, ScsiFront};

const TARGET: &str = "iqn.2026-11.org.tessera.test:gate";
const INITIATOR: &str = "iqn.2026-11.org.tessera.test:client";

/// PUT stores Data-Out under the key in CDB bytes 2..10, GET returns it, HOLD waits until the
/// test opens the gate and then returns `data_in_len` zeros.
const OP_PUT: u8 = 0xC0;
const OP_GET: u8 = 0xC1;
const OP_HOLD: u8 = 0xC3;
/// Above the target's inline limit, so HOLD runs on the executor thread and the reader goes on
/// receiving (and queueing) the commands behind it.
const HOLD_LEN: u32 = 256 * 1024;

struct GateSet {
    objects: Mutex<HashMap<u64, Vec<u8>>>,
    open: Mutex<bool>,
    opened: Condvar,
    /// Told when HOLD has started.
    holding: Mutex<mpsc::Sender<()>>,
}

impl GateSet {
    fn open_gate(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// Opens the gate when dropped, so a failing test unwinds instead of hanging in the server's
/// shutdown behind a HOLD that never returns.
struct OpenOnDrop(Arc<GateSet>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open_gate();
    }
}

fn key_of(cdb: &[u8]) -> u64 {
    u64::from_be_bytes(cdb[2..10].try_into().unwrap())
}

/// The command set `ScsiFront` drives; the test keeps its own handle on the same state.
struct Gate(Arc<GateSet>);

impl CommandSet for Gate {
    fn peripheral_device_type(&self) -> u8 {
        0x11
    }
    fn identity(&self) -> DeviceIdentity {
        DeviceIdentity { vendor: "TESSERA".into(), product: "GATE TEST".into(), revision: "0001".into(), serial: "SN0000000001".into() }
    }
    fn execute(&self, _nexus: &Nexus, task: &ScsiTask) -> ScsiOutcome {
        let set = &self.0;
        match task.cdb[0] {
            OP_PUT => {
                set.objects.lock().unwrap().insert(key_of(task.cdb), task.data_out.to_vec());
                ScsiOutcome::good(Vec::new())
            }
            OP_GET => match set.objects.lock().unwrap().get(&key_of(task.cdb)) {
                Some(v) => ScsiOutcome::good(v.clone()),
                None => ScsiOutcome::check_condition(Sense::invalid_cdb_field(2)),
            },
            OP_HOLD => {
                let _ = set.holding.lock().unwrap().send(());
                let mut open = set.open.lock().unwrap();
                while !*open {
                    open = set.opened.wait(open).unwrap();
                }
                ScsiOutcome::good(vec![0u8; task.data_in_len as usize])
            }
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

fn run(s: &dyn ScsiTransport, cdb: &[u8], data_out: &[&[u8]], data_in_len: u32) -> Result<tessera_scsi::ScsiResponse, tessera_scsi::TransportError> {
    s.execute(&ScsiRequest { lun: 0, cdb, data_out, data_in_len })
}

/// Logs in and clears the power-on unit attention a new session starts with.
fn login(addr: SocketAddr, isid: [u8; 6]) -> Session {
    let mut config = SessionConfig::new(INITIATOR, TARGET);
    config.isid = isid;
    let s = Session::login(addr, config).unwrap();
    assert_eq!(run(&s, &[0u8; 6], &[], 0).unwrap().sense.unwrap().asc_ascq(), 0x2900);
    s
}

fn start() -> (Arc<GateSet>, ServerHandle, SocketAddr, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    let set = Arc::new(GateSet { objects: Mutex::default(), open: Mutex::new(false), opened: Condvar::new(), holding: Mutex::new(tx) });
    let server = TargetServer::bind(TargetConfig::new(TARGET, "127.0.0.1:0"), Arc::new(ScsiFront::new(Gate(set.clone())))).unwrap();
    let addr = server.local_addr().unwrap();
    (set, server.spawn(), addr, rx)
}

#[test]
fn a_login_with_a_live_sessions_isid_waits_for_its_running_command_and_drops_its_queue() {
    let (set, handle, addr, holding) = start();
    let _release = OpenOnDrop(set.clone());
    let isid = [0x80, 0x12, 0x34, 0x56, 0x00, 0x01];
    let old = Arc::new(login(addr, isid));

    let held = {
        let old = old.clone();
        std::thread::spawn(move || run(&*old, &cdb(OP_HOLD, 0), &[], HOLD_LEN).map(|r| r.status))
    };
    holding.recv_timeout(Duration::from_secs(10)).expect("HOLD started on the old session");
    let queued = {
        let old = old.clone();
        std::thread::spawn(move || run(&*old, &cdb(OP_PUT, 7), &[b"stale"], 0).map(|r| r.status))
    };
    // Time for the PUT to reach the target and queue behind HOLD.
    std::thread::sleep(Duration::from_millis(200));

    let (done_tx, done_rx) = mpsc::channel();
    let new_login = std::thread::spawn(move || {
        let s = login(addr, isid);
        done_tx.send(()).unwrap();
        s
    });
    assert!(
        done_rx.recv_timeout(Duration::from_millis(400)).is_err(),
        "the reinstating login is not answered while the old session still runs a command"
    );
    set.open_gate();
    done_rx.recv_timeout(Duration::from_secs(10)).expect("answered once the old command returned");
    let new = new_login.join().unwrap();

    assert!(held.join().unwrap().is_err(), "the old session was closed under its HOLD: no answer reaches it");
    assert!(queued.join().unwrap().is_err(), "nor one for the PUT queued behind it");
    let got = run(&new, &cdb(OP_GET, 7), &[], 16).unwrap();
    assert_eq!(got.status, ScsiStatus::CheckCondition, "the queued PUT never ran");
    assert!(set.objects.lock().unwrap().is_empty());
    assert_eq!(handle.reinstated_sessions(), 1);

    // The new session works as any other.
    assert_eq!(run(&new, &cdb(OP_PUT, 7), &[b"fresh"], 0).unwrap().status, ScsiStatus::Good);
    assert_eq!(run(&new, &cdb(OP_GET, 7), &[], 16).unwrap().data_in, b"fresh");
    handle.shutdown();
}

#[test]
fn a_login_with_another_isid_is_not_held_up_by_a_busy_session() {
    let (set, handle, addr, holding) = start();
    let _release = OpenOnDrop(set.clone());
    let busy = Arc::new(login(addr, [0x80, 0, 0, 1, 0, 1]));
    let held = {
        let busy = busy.clone();
        std::thread::spawn(move || run(&*busy, &cdb(OP_HOLD, 0), &[], HOLD_LEN).map(|r| r.status))
    };
    holding.recv_timeout(Duration::from_secs(10)).expect("HOLD started");
    let other = login(addr, [0x80, 0, 0, 1, 0, 2]);
    assert_eq!(run(&other, &cdb(OP_PUT, 1), &[b"x"], 0).unwrap().status, ScsiStatus::Good);
    set.open_gate();
    assert_eq!(held.join().unwrap().unwrap(), ScsiStatus::Good, "the busy session was left alone");
    assert_eq!(handle.reinstated_sessions(), 0);
    handle.shutdown();
}
