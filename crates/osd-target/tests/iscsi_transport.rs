//! Transport tests: a real `TargetServer` on 127.0.0.1:0 in this process, a small RAM command
//! set behind `ScsiFront`, driven over real sockets by the real initiator (`Session`) and, for
//! error handling, by hand-built PDUs (`RawConnection`). Each test states its goal; the method
//! is always: start a server, talk to it, compare what comes back byte for byte.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tessera_initiator::iscsi::{RawConnection, Session, SessionConfig};
use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::login::DigestKind;
use tessera_iscsi::pdu::*;
use tessera_scsi::{Nexus, ScsiOutcome, ScsiRequest, ScsiStatus, ScsiTask, ScsiTransport, Sense, SenseKey, TmfResult};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_target::spc::{CommandSet, DeviceIdentity, ScsiFront};

const TARGET: &str = "iqn.2026-11.org.tessera.test:ram";
const INITIATOR: &str = "iqn.2026-11.org.tessera.test:client";

/// Test-only opcodes of the RAM command set: PUT stores Data-Out under the 8-byte key in CDB
/// bytes 2..10, GET returns it, ECHO (bidirectional) returns its Data-Out.
const OP_PUT: u8 = 0xC0;
const OP_GET: u8 = 0xC1;
const OP_ECHO: u8 = 0xC2;

#[derive(Default)]
struct RamSet {
    objects: Mutex<HashMap<u64, Vec<u8>>>,
    resets: Mutex<u32>,
}

fn key_of(cdb: &[u8]) -> u64 {
    u64::from_be_bytes(cdb[2..10].try_into().unwrap())
}

impl CommandSet for RamSet {
    fn peripheral_device_type(&self) -> u8 {
        0x11
    }
    fn identity(&self) -> DeviceIdentity {
        DeviceIdentity {
            vendor: "TESSERA".into(),
            product: "RAM TEST".into(),
            revision: "0001".into(),
            serial: "SN0123456789".into(),
        }
    }
    fn execute(&self, _nexus: &Nexus, task: &ScsiTask) -> ScsiOutcome {
        match task.cdb[0] {
            OP_PUT => {
                self.objects.lock().unwrap().insert(key_of(task.cdb), task.data_out.to_vec());
                ScsiOutcome::good(Vec::new())
            }
            OP_GET => match self.objects.lock().unwrap().get(&key_of(task.cdb)) {
                Some(v) => ScsiOutcome::good(v.clone()),
                None => ScsiOutcome::check_condition(Sense::invalid_cdb_field(2)),
            },
            OP_ECHO => ScsiOutcome::good(task.data_out.to_vec()),
            _ => ScsiOutcome::check_condition(Sense::invalid_opcode()),
        }
    }
    fn lun_reset(&self) {
        *self.resets.lock().unwrap() += 1;
    }
}

struct Fixture {
    handle: Option<ServerHandle>,
    addr: SocketAddr,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}

fn start() -> Fixture {
    let server = TargetServer::bind(TargetConfig::new(TARGET, "127.0.0.1:0"), Arc::new(ScsiFront::new(RamSet::default()))).unwrap();
    let addr = server.local_addr().unwrap();
    Fixture { handle: Some(server.spawn()), addr }
}

fn config() -> SessionConfig {
    SessionConfig::new(INITIATOR, TARGET)
}

fn cdb(op: u8, key: u64) -> Vec<u8> {
    let mut c = vec![0u8; 16];
    c[0] = op;
    c[2..10].copy_from_slice(&key.to_be_bytes());
    c
}

fn run(s: &dyn ScsiTransport, cdb: &[u8], data_out: &[&[u8]], data_in_len: u32) -> tessera_scsi::ScsiResponse {
    s.execute(&ScsiRequest { lun: 0, cdb, data_out, data_in_len }).unwrap()
}

/// Clears the power-on unit attention a new session starts with.
fn clear_ua(s: &Session) {
    let r = run(s, &[0u8; 6], &[], 0);
    assert_eq!(r.status, ScsiStatus::CheckCondition);
    assert_eq!(r.sense.unwrap().asc_ascq(), 0x2900);
    assert_eq!(run(s, &[0u8; 6], &[], 0).status, ScsiStatus::Good);
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(seed as u32) as u8 ^ seed).collect()
}

/// Goal: login works with and without CRC32C digests, and the SPC commands answer correctly:
/// unit attention once, INQUIRY (device type 0x11) and VPD pages with allocation-length
/// truncation, REPORT LUNS, wrong-LUN sense.
#[test]
fn login_and_primary_commands() {
    let f = start();
    for digest in [DigestKind::None, DigestKind::Crc32c] {
        let mut c = config();
        c.header_digest = digest;
        c.data_digest = digest;
        let s = Session::login(f.addr, c).unwrap();
        assert_eq!(s.negotiated().header_digest, digest == DigestKind::Crc32c);
        assert_eq!(s.negotiated().data_digest, digest == DigestKind::Crc32c);
        // INQUIRY does not consume the unit attention.
        let inq = run(&s, &[0x12, 0, 0, 0, 255, 0], &[], 255);
        assert_eq!(inq.status, ScsiStatus::Good);
        assert_eq!(inq.data_in.len(), 36);
        assert_eq!(inq.residual, 255 - 36);
        assert_eq!(inq.data_in[0], 0x11);
        assert_eq!(&inq.data_in[8..16], b"TESSERA ");
        assert_eq!(&inq.data_in[16..24], b"RAM TEST");
        clear_ua(&s);
        // Allocation length truncation.
        let short = run(&s, &[0x12, 0, 0, 0, 5, 0], &[], 5);
        assert_eq!(short.data_in.len(), 5);
        let vpd0 = run(&s, &[0x12, 1, 0x00, 0, 255, 0], &[], 255);
        assert_eq!(vpd0.data_in, vec![0x11, 0x00, 0, 3, 0x00, 0x80, 0x83]);
        let vpd80 = run(&s, &[0x12, 1, 0x80, 0, 255, 0], &[], 255);
        assert_eq!(&vpd80.data_in[4..], b"SN0123456789");
        let vpd83 = run(&s, &[0x12, 1, 0x83, 0, 255, 0], &[], 255);
        assert_eq!(vpd83.data_in[1], 0x83);
        assert_eq!(vpd83.data_in[4..8], [0x01, 0x03, 0x00, 0x08]);
        assert_eq!(vpd83.data_in[4 + 12] & 0x0F, 0x02, "T10 vendor id designator is ASCII");
        let vpd83_short = run(&s, &[0x12, 1, 0x83, 0, 6, 0], &[], 6);
        assert_eq!(vpd83_short.data_in, vpd83.data_in[..6]);
        let bad_page = run(&s, &[0x12, 1, 0x42, 0, 255, 0], &[], 255);
        assert_eq!(bad_page.sense.unwrap().asc_ascq(), 0x2400);
        let luns = run(&s, &[0xA0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[], 256);
        assert_eq!(luns.data_in, [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let wrong = s.execute(&ScsiRequest { lun: 3, cdb: &[0u8; 6], data_out: &[], data_in_len: 0 }).unwrap();
        assert_eq!(wrong.status, ScsiStatus::CheckCondition);
        let sense = wrong.sense.unwrap();
        assert_eq!((sense.key, sense.asc_ascq()), (SenseKey::IllegalRequest, 0x2500));
        s.logout().unwrap();
    }
}

/// Goal: a discovery session answers SendTargets=All with our name and address.
#[test]
fn discovery_send_targets() {
    let f = start();
    let targets = Session::discover(f.addr, INITIATOR).unwrap();
    assert_eq!(targets.len(), 1);
    assert_eq!(targets[0].name, TARGET);
    assert_eq!(targets[0].addresses, vec![format!("{},1", f.addr)]);
}

fn round_trip(s: &Session, key: u64, data: &[u8]) {
    // Split the gather list in uneven pieces to exercise slicing across R2T boundaries.
    let cut = data.len() / 3;
    let pieces: [&[u8]; 2] = [&data[..cut], &data[cut..]];
    let put = run(s, &cdb(OP_PUT, key), &pieces, 0);
    assert_eq!(put.status, ScsiStatus::Good, "PUT of {} bytes", data.len());
    let get = run(s, &cdb(OP_GET, key), &[], data.len() as u32);
    assert_eq!(get.status, ScsiStatus::Good);
    assert_eq!(get.residual, 0);
    assert!(get.data_in == data, "GET of {} bytes differs", data.len());
}

/// Goal: writes and reads of every size arrive byte for byte under each ImmediateData /
/// InitialR2T combination, with burst lengths small enough to force many R2Ts.
#[test]
fn transfers_under_all_negotiations() {
    let f = start();
    let sizes = [0usize, 1, 8 << 10, 1 << 20, 40 << 20];
    for (imm, r2t, first, max, segment) in [
        (true, false, (16 << 20) - 1, (16 << 20) - 1, 1 << 20),
        (false, true, 64 << 10, 1 << 20, 256 << 10),
        (true, true, 8 << 10, 64 << 10, 8 << 10),
        (false, false, 8 << 10, 16 << 10, 4 << 10),
    ] {
        let mut c = config();
        c.immediate_data = imm;
        c.initial_r2t = r2t;
        c.first_burst_len = first;
        c.max_burst_len = max;
        c.max_recv_data_segment_len = segment;
        c.max_outstanding_r2t = 4;
        let s = Session::login(f.addr, c).unwrap();
        let p = s.negotiated().clone();
        assert_eq!((p.immediate_data, p.initial_r2t, p.max_burst_len), (imm, r2t, max));
        clear_ua(&s);
        for (i, &len) in sizes.iter().enumerate() {
            if len == 40 << 20 && max < 1 << 20 {
                continue; // 40 MiB in 16 KiB bursts is slow in debug builds; 1 MiB covers it.
            }
            round_trip(&s, i as u64, &pattern(len, i as u8));
        }
        // Bidirectional: Data-Out and Data-In on one command with both AHS.
        let payload = pattern(100_000, 9);
        let mut long_cdb = cdb(OP_ECHO, 0);
        long_cdb.resize(32, 0xEE);
        let echo = run(&s, &long_cdb, &[&payload], payload.len() as u32);
        assert_eq!(echo.status, ScsiStatus::Good);
        assert!(echo.data_in == payload);
        s.logout().unwrap();
    }
}

/// Goal: residuals are reported: underflow when the device returns less than expected and
/// overflow when it returns more.
#[test]
fn residual_counts() {
    let f = start();
    let s = Session::login(f.addr, config()).unwrap();
    clear_ua(&s);
    run(&s, &cdb(OP_PUT, 1), &[&[7u8; 100]], 0);
    let under = run(&s, &cdb(OP_GET, 1), &[], 150);
    assert_eq!((under.data_in.len(), under.residual), (100, 50));
    let over = run(&s, &cdb(OP_GET, 1), &[], 60);
    assert_eq!((over.data_in.len(), over.residual), (60, -40));
}

/// Goal: 64 threads with commands in flight at once on one session all get their own data.
#[test]
fn many_threads_one_session() {
    let f = start();
    let mut c = config();
    c.max_burst_len = 64 << 10;
    c.first_burst_len = 16 << 10;
    c.max_recv_data_segment_len = 32 << 10;
    let s = Session::login(f.addr, c).unwrap();
    clear_ua(&s);
    std::thread::scope(|scope| {
        for t in 0..64u64 {
            let s = &s;
            scope.spawn(move || {
                for i in 0..20u64 {
                    let key = t * 1000 + i;
                    let data = pattern(((t * 7919 + i * 104_729) % 200_000) as usize, (t + i) as u8);
                    round_trip(s, key, &data);
                }
            });
        }
    });
    s.logout().unwrap();
}

/// Goal: several sessions at once, each its own nexus, on the same target.
#[test]
fn several_sessions_at_once() {
    let f = start();
    std::thread::scope(|scope| {
        for n in 0..6u64 {
            let addr = f.addr;
            scope.spawn(move || {
                let s = Session::login(addr, config()).unwrap();
                clear_ua(&s);
                for i in 0..10 {
                    round_trip(&s, n * 100 + i, &pattern(50_000 + i as usize, n as u8));
                }
                s.logout().unwrap();
            });
        }
    });
}

/// Goal: NOP-Out pings are echoed; ABORT TASK of an unknown task says "does not exist"; LUN
/// RESET completes and raises a unit attention for the other session only.
#[test]
fn nop_abort_and_lun_reset() {
    let f = start();
    let a = Session::login(f.addr, config()).unwrap();
    let b = Session::login(f.addr, config()).unwrap();
    clear_ua(&a);
    clear_ua(&b);
    assert_eq!(a.nop_ping(b"ping data").unwrap(), b"ping data");
    assert_eq!(a.nop_ping(&[]).unwrap(), b"");
    assert_eq!(a.abort_task(0xABCD).unwrap(), TmfResult::TaskDoesNotExist);
    assert_eq!(a.lun_reset(0).unwrap(), TmfResult::FunctionComplete);
    assert_eq!(a.lun_reset(5).unwrap(), TmfResult::LunDoesNotExist);
    assert_eq!(run(&a, &[0u8; 6], &[], 0).status, ScsiStatus::Good, "the resetting nexus gets no UA");
    clear_ua(&b);
    a.logout().unwrap();
    b.logout().unwrap();
}

fn reject_reason(conn: &mut RawConnection) -> u8 {
    let reply = conn.recv().unwrap();
    match reply.pdu.unwrap() {
        Pdu::Reject(r) => r.reason,
        other => panic!("expected Reject, got {other:?}"),
    }
}

fn nop(conn: &mut RawConnection, itt: u32) {
    let cmd_sn = conn.login.as_ref().unwrap().cmd_sn;
    let pdu = Pdu::NopOut(NopOut { immediate: true, lun: 0, itt, ttt: RESERVED_TAG, cmd_sn, exp_stat_sn: 0 });
    conn.send_pdu(&pdu, b"x").unwrap();
    match conn.recv().unwrap().pdu.unwrap() {
        Pdu::NopIn(n) => assert_eq!(n.itt, itt),
        other => panic!("expected NOP-In, got {other:?}"),
    }
}

fn raw_login(addr: SocketAddr, digests: bool) -> RawConnection {
    let mut conn = RawConnection::connect(addr).unwrap();
    let mut c = config();
    if digests {
        c.header_digest = DigestKind::Crc32c;
        c.data_digest = DigestKind::Crc32c;
    }
    conn.login(&c).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    conn
}

fn command(itt: u32, cmd_sn: u32, edtl: u32, write: bool, final_bit: bool) -> Pdu {
    Pdu::ScsiCommand(ScsiCommand {
        immediate: false,
        final_bit,
        read: !write,
        write,
        task_attr: 1,
        lun: 0,
        itt,
        expected_data_transfer_length: edtl,
        cmd_sn,
        exp_stat_sn: 0,
        cdb: cdb(if write { OP_PUT } else { OP_GET }, 1),
        bidi_read_len: None,
    })
}

/// Goal: malformed PDUs get what RFC 7143 prescribes, and the target keeps serving: an unknown
/// opcode and an invalid field get a Reject, a data digest error a Reject (reason 2), an
/// Expected Data Transfer Length beyond the limit a CHECK CONDITION, a header digest error or
/// an oversized data segment close only that connection.
#[test]
fn malformed_pdus() {
    let f = start();
    // Unknown opcode 0x1D: Reject "command not supported", connection stays usable.
    let mut conn = raw_login(f.addr, false);
    let mut bad = [0u8; 48];
    bad[0] = 0x1D;
    bad[16..20].copy_from_slice(&77u32.to_be_bytes());
    conn.send_raw(&bad).unwrap();
    assert_eq!(reject_reason(&mut conn), reject_reason::COMMAND_NOT_SUPPORTED);
    nop(&mut conn, 1);
    // Immediate data longer than the Expected Data Transfer Length: Reject "invalid PDU field".
    let cmd_sn = conn.login.as_ref().unwrap().cmd_sn;
    conn.send_pdu(&command(2, cmd_sn, 4, true, true), &[0u8; 8]).unwrap();
    assert_eq!(reject_reason(&mut conn), reject_reason::INVALID_PDU_FIELD);
    // Expected Data Transfer Length over limits::TRANSFER_LEN_MAX: CHECK CONDITION, no
    // allocation. (The rejected command above still consumed its CmdSN.)
    conn.send_pdu(&command(3, cmd_sn + 1, u32::MAX, false, true), &[]).unwrap();
    match conn.recv().unwrap().pdu.unwrap() {
        Pdu::ScsiResponse(r) => {
            assert_eq!((r.itt, r.status), (3, 0x02));
        }
        other => panic!("expected SCSI Response, got {other:?}"),
    }
    nop(&mut conn, 4);
    // Data segment longer than our MaxRecvDataSegmentLength: the connection closes.
    let mut huge = vec![0u8; 48];
    huge[0] = 0x40; // immediate NOP-Out
    huge[5..8].copy_from_slice(&[0xFF, 0xFF, 0xFF]);
    conn.send_raw(&huge).unwrap();
    assert!(conn.is_closed_by_peer(Duration::from_secs(10)));

    // With digests: a data digest mismatch is rejected; a header digest mismatch closes.
    let mut conn = raw_login(f.addr, true);
    nop(&mut conn, 5);
    let ping = Pdu::NopOut(NopOut { immediate: true, itt: 6, ttt: RESERVED_TAG, cmd_sn: cmd_sn + 2, ..Default::default() });
    let mut bytes = tessera_iscsi::stream::encode_pdu(&ping, b"abcd", conn.digests());
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF; // corrupt the data digest
    conn.send_raw(&bytes).unwrap();
    assert_eq!(reject_reason(&mut conn), reject_reason::DATA_DIGEST_ERROR);
    nop(&mut conn, 7);
    let mut bytes = tessera_iscsi::stream::encode_pdu(&ping, b"", conn.digests());
    bytes[48] ^= 0xFF; // corrupt the header digest
    conn.send_raw(&bytes).unwrap();
    assert!(conn.is_closed_by_peer(Duration::from_secs(10)));

    // Garbage before login closes just that connection.
    let mut junk = RawConnection::connect(f.addr).unwrap();
    junk.send_raw(&[0xAB; 100]).unwrap();
    assert!(junk.is_closed_by_peer(Duration::from_secs(10)));

    // The target still serves a new session.
    let s = Session::login(f.addr, config()).unwrap();
    clear_ua(&s);
    round_trip(&s, 42, &pattern(4096, 1));
    s.logout().unwrap();
}
