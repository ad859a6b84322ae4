//! Goal: large plain WRITEs whose Data-Out the target receives straight into the object's file
//! move exactly the right bytes under every way Data-Out can arrive (immediate data,
//! unsolicited Data-Out, R2T bursts with several outstanding, pipelined commands whose bursts
//! interleave), with header digests on, while growing the object; with data digests on they
//! take the buffered path. A WRITE cut off mid-Data-Out (connection dropped, a header digest
//! error, ABORT TASK) leaves length and used capacity describing the object's file.
//!
//! Method: the real target (iSCSI server, OSD command set, engine on SQLite and files in a temp
//! directory) on a loopback socket, driven by Tessera's initiator: its OSD client for whole
//! WRITEs, its raw connection to stop a WRITE half-way. The target's statistics page counts
//! placed WRITEs, which shows which path each case took.

mod common;

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_iscsi::login::DigestKind;
use tessera_iscsi::pdu::*;
use tessera_iscsi::Digests;
use tessera_osd_proto::{AttrId, Command, DataLayout, OsdRequestBuilder};
use tessera_types::ObjectAddr;

use common::{attr, every_negotiation, new_object, pattern, placed_writes, OsdTarget as Fixture, RawSession, INFO, LENGTH, USED};

const TARGET: &str = "iqn.2026-11.org.tessera:placed";
const INITIATOR: &str = "iqn.2026-11.org.tessera:placed-test";

fn start() -> Fixture {
    Fixture::start(TARGET)
}

impl Fixture {
    fn client(&self, config: SessionConfig) -> OsdClient<Session> {
        OsdClient::new(Session::login(self.addr, config).unwrap(), 0)
    }
}

fn config() -> SessionConfig {
    SessionConfig::new(INITIATOR, TARGET)
}

fn digest_config(header_digest: bool) -> SessionConfig {
    let mut cfg = config();
    if header_digest {
        cfg.header_digest = DigestKind::Crc32c;
    }
    cfg
}

/// Stored bytes never run past the logical length, and the used capacity is what the file
/// holds.
fn is_consistent(f: &Fixture, c: &OsdClient<Session>, obj: ObjectAddr) -> bool {
    let meta = std::fs::metadata(f.object_file(obj)).unwrap();
    meta.len() <= attr(c, obj, INFO, LENGTH) && attr(c, obj, INFO, USED) == meta.blocks() * 512
}

/// Writes `data` at `offset` into the model and the object.
fn write(c: &OsdClient<Session>, obj: ObjectAddr, model: &mut Vec<u8>, offset: usize, data: &[u8], one_command: bool) {
    if one_command {
        c.write_layout(obj, offset as u64, data, DataLayout::Contiguous, false).unwrap();
    } else {
        c.write(obj, offset as u64, data, false).unwrap();
    }
    if model.len() < offset + data.len() {
        model.resize(offset + data.len(), 0);
    }
    model[offset..offset + data.len()].copy_from_slice(data);
}

#[test]
fn placed_writes_round_trip_under_every_negotiation() {
    let f = start();
    for (name, cfg) in every_negotiation(&config()) {
        let data_digest = cfg.data_digest != DigestKind::None;
        let c = f.client(cfg);
        let _ = c.get_attributes(ObjectAddr::ROOT, &[AttrId::new(INFO, 1)]); // the power-on unit attention
        let obj = new_object(&c);
        let mut model = Vec::new();
        // Growing the object, then overwriting inside it, in single commands and in the
        // client's pipelined 1 MiB pieces (several commands whose Data-Out interleaves); how
        // many commands each WRITE placed.
        let mut placed = Vec::new();
        for (offset, len, seed, one_command) in [(0, 300_001, 1, true), (300_001, (1 << 20) + 3, 2, true), (2 << 20, (5 << 20) + 1, 3, false), (123_457, 777_777, 4, true), (100, 3 << 20, 5, false)] {
            let before = placed_writes(&c);
            write(&c, obj, &mut model, offset, &pattern(len, seed), one_command);
            placed.push(placed_writes(&c) - before);
        }
        let got = c.read(obj, 0, model.len() as u64).unwrap();
        assert!(got.data == model, "{name}: bytes differ");
        assert_eq!(attr(&c, obj, INFO, LENGTH), model.len() as u64, "{name}");
        assert!(is_consistent(&f, &c, obj), "{name}");
        if data_digest {
            assert_eq!(placed, [0; 5], "{name}: data digests need the bytes in memory");
        } else {
            // The 5 MiB + 1 WRITE is five 1 MiB commands and a 1-byte tail, sent by parallel
            // workers: the tail is too small to place, and a piece whose command arrives while
            // the buffered tail is still ahead of it is buffered too (data lands in command
            // order), so how many of its pieces are placed depends on arrival order.
            assert_eq!([placed[0], placed[1], placed[3], placed[4]], [1, 1, 1, 3], "{name}: WRITEs placed");
            assert!(placed[2] <= 5, "{name}: at most the five 1 MiB pieces placed, got {}", placed[2]);
        }
    }
}

/// A WRITE of `len` bytes at `offset`: its CDB (NOSEC).
fn write_cdb(obj: ObjectAddr, offset: u64, len: u64) -> Vec<u8> {
    let data = vec![0u8; len as usize];
    let encoded = OsdRequestBuilder::new(Command::Write { addr: obj, offset, len, layout: DataLayout::Contiguous }).data(&data).encode().unwrap();
    encoded.cdb.to_vec()
}

/// How a WRITE is cut off half-way.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// The connection closes in the middle of a data segment.
    Dropped,
    /// A Data-Out header with a bad header digest: the target closes the connection.
    BadHeaderDigest,
}

fn cut_off_write(cut: Cut) {
    let f = start();
    let c = f.client(config());
    let _ = c.get_attributes(ObjectAddr::ROOT, &[AttrId::new(INFO, 1)]);
    let obj = new_object(&c);
    let old = pattern(100_000, 7);
    c.write(obj, 0, &old, false).unwrap();
    let placed_before = placed_writes(&c);

    // A 4 MiB WRITE from offset 50,000: 1 MiB of immediate data, one 1 MiB unsolicited
    // Data-Out, then the third is cut off.
    let new = pattern(4 << 20, 8);
    let mut raw = RawSession::login(f.addr, &digest_config(matches!(cut, Cut::BadHeaderDigest)));
    let itt = raw.itt();
    raw.command(itt, write_cdb(obj, 50_000, new.len() as u64), new.len() as u32, false, &new[..1 << 20]);
    raw.conn.send_pdu(&RawSession::data_out(itt, 1 << 20, false), &new[1 << 20..2 << 20]).unwrap();
    let third = RawSession::data_out(itt, 2 << 20, false);
    match cut {
        Cut::Dropped => {
            let mut bytes = tessera_iscsi::stream::encode_pdu(&third, &new[2 << 20..3 << 20], raw.conn.digests());
            bytes.truncate(48 + 300_000);
            raw.conn.send_raw(&bytes).unwrap();
            // The target closes its side once it has let go of the connection and its tasks.
            raw.conn.shutdown_write().unwrap();
            assert!(raw.conn.is_closed_by_peer(Duration::from_secs(20)), "the target closes the connection");
        }
        Cut::BadHeaderDigest => {
            let mut bytes = tessera_iscsi::stream::encode_pdu(&third, &new[2 << 20..3 << 20], Digests { header: true, data: false });
            bytes[50] ^= 0xFF; // inside the header digest
            raw.conn.send_raw(&bytes).unwrap();
            assert!(raw.conn.is_closed_by_peer(Duration::from_secs(20)), "a header digest error closes the connection");
        }
    }

    assert!(is_consistent(&f, &c, obj), "{cut:?}: length and used capacity describe the file");
    assert_eq!(placed_writes(&c) - placed_before, 1, "{cut:?}: the cut WRITE was a placed one");
    assert_eq!(attr(&c, obj, INFO, LENGTH), 100_000, "{cut:?}: an unacknowledged WRITE did not grow the object");
    // Inside the old length, each byte is the old one or the new one (a WRITE that was never
    // acknowledged may be partly applied); past it, nothing is visible.
    let got = c.read(obj, 0, 100_000).unwrap().data;
    assert!(got[..50_000] == old[..50_000], "{cut:?}: bytes before the WRITE changed");
    assert!((50_000..100_000).all(|i| got[i] == old[i] || got[i] == new[i - 50_000]), "{cut:?}: bytes from nowhere");
    // Growing the object later shows zeros where the cut WRITE's bytes were.
    c.write(obj, 5 << 20, b"end", false).unwrap();
    let got = c.read(obj, 100_000, (5 << 20) - 100_000).unwrap().data;
    assert!(got.iter().all(|b| *b == 0), "{cut:?}: bytes of the cut WRITE came back past the old length");
    assert!(is_consistent(&f, &c, obj), "{cut:?}");
    // And the placed path still works for the next WRITE.
    let again = pattern(2 << 20, 9);
    c.write(obj, 0, &again, false).unwrap();
    assert!(c.read(obj, 0, again.len() as u64).unwrap().data == again);
}

#[test]
fn a_write_dropped_mid_data_out_leaves_the_object_consistent() {
    cut_off_write(Cut::Dropped);
}

#[test]
fn a_header_digest_error_mid_data_out_leaves_the_object_consistent() {
    cut_off_write(Cut::BadHeaderDigest);
}

#[test]
fn abort_task_mid_data_out_leaves_the_object_consistent_and_the_session_usable() {
    let f = start();
    let c = f.client(config());
    let _ = c.get_attributes(ObjectAddr::ROOT, &[AttrId::new(INFO, 1)]);
    let obj = new_object(&c);
    let placed_before = placed_writes(&c);
    let mut raw = RawSession::login(f.addr, &digest_config(false));
    let new = pattern(3 << 20, 10);
    let itt = raw.itt();
    raw.command(itt, write_cdb(obj, 0, new.len() as u64), new.len() as u32, false, &new[..1 << 20]);
    let tmf_itt = raw.itt();
    let abort = Pdu::TaskMgmtRequest(TaskMgmtRequest {
        immediate: true,
        function: tmf_function::ABORT_TASK,
        lun: 0,
        itt: tmf_itt,
        referenced_task_tag: itt,
        cmd_sn: raw.cmd_sn,
        exp_stat_sn: 0,
        ref_cmd_sn: raw.cmd_sn - 1,
        exp_data_sn: 0,
    });
    raw.conn.send_pdu(&abort, &[]).unwrap();
    match raw.response(tmf_itt) {
        Pdu::TaskMgmtResponse(r) => assert_eq!(r.response, tmf_response::FUNCTION_COMPLETE),
        other => panic!("expected the TMF response, got {other:?}"),
    }
    // The aborted task is gone before the TMF is answered.
    assert!(is_consistent(&f, &c, obj));
    assert_eq!(attr(&c, obj, INFO, LENGTH), 0);
    assert_eq!(placed_writes(&c) - placed_before, 1);
    // Data-Out still in flight for the aborted task is dropped; the session goes on.
    raw.conn.send_pdu(&RawSession::data_out(itt, 1 << 20, true), &new[1 << 20..2 << 20]).unwrap();
    let itt = raw.itt();
    let small = pattern(100_000, 11);
    raw.command(itt, write_cdb(obj, 0, small.len() as u64), small.len() as u32, true, &small);
    match raw.response(itt) {
        Pdu::ScsiResponse(r) => assert_eq!(r.status, 0, "GOOD"),
        other => panic!("expected the WRITE's response, got {other:?}"),
    }
    assert!(c.read(obj, 0, 100_000).unwrap().data == small);
    assert_eq!(attr(&c, obj, INFO, LENGTH), 100_000);
    assert!(is_consistent(&f, &c, obj));
}
