//! Goal: list WRITEs (SGL, strided, nested) whose data the target receives straight into the
//! object's pages give exactly the bytes the buffered path gives (a byte-array model): under
//! every way Data-Out can arrive, with a continuation segment split across PDUs, unordered and
//! overlapping pieces, pieces spanning pages and reaching past the end, one piece, the most
//! pieces an SGL holds, many WRITEs in flight on one session; with data digests they take the
//! buffered path. A list WRITE cut off mid-Data-Out leaves length and used capacity describing
//! the object's file; objects truncated under list WRITEs in flight never crash the target;
//! under CMDRSP a tampered continuation segment is refused and nothing is written.
//!
//! Method: the real target (iSCSI server, OSD command set, engine on SQLite and files in a temp
//! directory) on a loopback socket, driven by Tessera's initiator: its OSD client for whole
//! WRITEs, its raw connection for hand-built PDUs. The target's statistics page counts placed
//! WRITEs, which shows which path each case took.

mod common;

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tessera_engine::{Engine, EngineConfig};
use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::login::DigestKind;
use tessera_iscsi::pdu::*;
use tessera_osd_proto::pages::CURRENT_COMMAND_PARTITION_ID;
use tessera_osd_proto::{AttrId, Attribute, Command, DataLayout, Extent, GetAttrs, OsdRequestBuilder};
use tessera_security::clock::now_ms;
use tessera_security::{Key, KeySlot, NonceSource, OsdKeys, Permissions, SecurityMethod};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::security_gate::TargetSecurity;
use tessera_target::spc::ScsiFront;
use tessera_types::ObjectAddr;

use common::{attr, every_negotiation, new_object, pattern, placed_writes, OsdTarget as Fixture, RawSession, INFO, LENGTH, USED};

const TARGET: &str = "iqn.2026-11.org.tessera:placed-list";
const INITIATOR: &str = "iqn.2026-11.org.tessera:placed-list-test";

fn config() -> SessionConfig {
    SessionConfig::new(INITIATOR, TARGET)
}

fn client(addr: SocketAddr, config: SessionConfig) -> OsdClient<Session> {
    let c = OsdClient::new(Session::login(addr, config).unwrap(), 0);
    let _ = c.get_attributes(ObjectAddr::ROOT, &[AttrId::new(INFO, 1)]); // the power-on unit attention
    c
}

/// Stored bytes never run past the logical length, and the used capacity is what the file
/// holds.
fn is_consistent(file: &std::path::Path, c: &OsdClient<Session>, obj: ObjectAddr) -> bool {
    let meta = std::fs::metadata(file).unwrap();
    meta.len() <= attr(c, obj, INFO, LENGTH) && attr(c, obj, INFO, USED) == meta.blocks() * 512
}

/// Applies a list WRITE of `data` to the model: pieces in list order, later ones win.
fn apply(model: &mut Vec<u8>, layout: &DataLayout, offset: u64, data: &[u8]) {
    let mut at = 0usize;
    layout.for_each_extent(offset, data.len() as u64, |o, n| {
        let (o, n) = (o as usize, n as usize);
        if model.len() < o + n {
            model.resize(o + n, 0);
        }
        model[o..o + n].copy_from_slice(&data[at..at + n]);
        at += n;
    });
}

/// Writes `data` with `layout` into the model and the object.
fn write(c: &OsdClient<Session>, obj: ObjectAddr, model: &mut Vec<u8>, offset: u64, layout: DataLayout, data: &[u8]) {
    c.write_layout(obj, offset, data, layout.clone(), false).unwrap();
    apply(model, &layout, offset, data);
}

/// Pieces of uneven sizes (mean about 5 KiB) in shuffled order, some overlapping the one
/// before, some spanning pages, the last reaching `end`.
fn unordered_overlapping(end: u64, count: usize) -> DataLayout {
    let mut extents = Vec::new();
    for i in 0..count as u64 {
        let len = 1000 + (i * 7919) % 9000;
        let offset = (i * 104_729) % end.saturating_sub(len).max(1);
        extents.push(Extent { offset, len });
        if i % 5 == 0 {
            extents.push(Extent { offset: offset + len / 2, len }); // overlaps the one before
        }
    }
    extents.push(Extent { offset: end - 3000, len: 3000 });
    DataLayout::List(extents)
}

fn total(layout: &DataLayout, fallback: u64) -> u64 {
    match layout {
        DataLayout::List(e) => e.iter().map(|x| x.len).sum(),
        _ => fallback,
    }
}

#[test]
fn placed_list_writes_match_the_model_under_every_negotiation() {
    let f = Fixture::start(TARGET);
    for (name, cfg) in every_negotiation(&config()) {
        let data_digest = cfg.data_digest != DigestKind::None;
        let c = client(f.addr, cfg);
        let obj = new_object(&c);
        let before = placed_writes(&c);
        let mut model = Vec::new();
        let writes: Vec<(u64, DataLayout, u64)> = vec![
            // Growing the object: 4 KiB pieces at a 64 KiB stride (the benchmark's shape).
            (0, DataLayout::Strided { stride: 64 << 10, block_len: 4096 }, 1 << 20),
            // Pieces spanning pages, a short last block, past the end.
            (1000, DataLayout::Strided { stride: 10_000, block_len: 6000 }, 600_001),
            // Unordered and overlapping, some past the current end.
            (0, unordered_overlapping(3 << 20, 300), 0),
            // A 2-D subarray.
            (12_345, DataLayout::Nested { block_len: 5000, levels: vec![(20, 8192), (10, 300_000)] }, 5000 * 200),
            // One piece.
            (777, DataLayout::List(vec![Extent { offset: 4_000_000, len: 200_000 }]), 0),
            // Small pieces: received into a buffer (not placed).
            (0, DataLayout::Strided { stride: 1024, block_len: 64 }, 64 << 10),
        ];
        for (i, (offset, layout, len)) in writes.iter().enumerate() {
            let data = pattern(total(layout, *len) as usize, i as u32 + 1);
            write(&c, obj, &mut model, *offset, layout.clone(), &data);
        }
        let got = c.read(obj, 0, model.len() as u64).unwrap();
        assert!(got.data == model, "{name}: bytes differ");
        assert_eq!(attr(&c, obj, INFO, LENGTH), model.len() as u64, "{name}");
        assert!(is_consistent(&f.object_file(obj), &c, obj), "{name}");
        let placed = placed_writes(&c) - before;
        if data_digest {
            assert_eq!(placed, 0, "{name}: data digests need the bytes in memory");
        } else {
            assert_eq!(placed, 5, "{name}: list WRITEs placed (all but the 64-byte pieces)");
        }
    }
}

/// The most pieces an SGL can carry (its continuation segment is 1 MiB, received across many
/// PDUs before any data byte), each 1 KiB, in reverse order.
#[test]
fn the_longest_sgl_is_placed_and_exact() {
    let f = Fixture::start(TARGET);
    let c = client(f.addr, config());
    let obj = new_object(&c);
    let count = tessera_types::limits::SGL_ENTRIES_MAX;
    let extents: Vec<Extent> = (0..count).rev().map(|i| Extent { offset: i * 1100, len: 1024 }).collect();
    let layout = DataLayout::List(extents);
    let data = pattern((count * 1024) as usize, 42);
    let before = placed_writes(&c);
    let mut model = Vec::new();
    write(&c, obj, &mut model, 0, layout, &data);
    assert_eq!(placed_writes(&c) - before, 1, "placed");
    assert!(c.read(obj, 0, model.len() as u64).unwrap().data == model);
    assert!(is_consistent(&f.object_file(obj), &c, obj));
}

/// Goal: many list WRITEs in flight on one session, to one object, each land their own bytes.
#[test]
fn list_writes_in_flight_on_one_session_land_their_own_bytes() {
    let f = Fixture::start(TARGET);
    let c = Arc::new(client(f.addr, config()));
    let obj = new_object(&c);
    let before = placed_writes(&c);
    const THREADS: u64 = 6;
    const ROUNDS: u32 = 8;
    // Thread t owns blocks t, t + THREADS, ... of 4 KiB: interleaved strided lists.
    let layout = DataLayout::Strided { stride: THREADS * 4096, block_len: 4096 };
    let len = 256 * 4096u64;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let c = c.clone();
            let layout = layout.clone();
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    let data = pattern(len as usize, (t as u32) << 8 | round);
                    c.write_layout(obj, t * 4096, &data, layout.clone(), false).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut model = Vec::new();
    for t in 0..THREADS {
        apply(&mut model, &layout, t * 4096, &pattern(len as usize, (t as u32) << 8 | (ROUNDS - 1)));
    }
    assert!(c.read(obj, 0, model.len() as u64).unwrap().data == model);
    assert_eq!(placed_writes(&c) - before, THREADS * ROUNDS as u64);
    assert!(is_consistent(&f.object_file(obj), &c, obj));
}

/// Goal: a list WRITE whose connection drops mid-Data-Out is never acknowledged, leaves length
/// and used capacity describing the file (the extension made before the data arrived is
/// trimmed), and the target goes on serving.
#[test]
fn a_list_write_cut_mid_data_out_leaves_the_object_consistent() {
    let f = Fixture::start(TARGET);
    let c = client(f.addr, config());
    let obj = new_object(&c);
    let old = pattern(100_000, 7);
    c.write(obj, 0, &old, false).unwrap();
    let before = placed_writes(&c);

    // 1024 pieces of 4 KiB at a 64 KiB stride from 50,000: the object would grow to 64 MiB.
    let layout = DataLayout::Strided { stride: 64 << 10, block_len: 4096 };
    let new = pattern(4 << 20, 8);
    let encoded = OsdRequestBuilder::new(Command::Write { addr: obj, offset: 50_000, len: new.len() as u64, layout }).data(&new).encode().unwrap();
    let data_out = encoded.data_out_vec();
    let mut raw = RawSession::login(f.addr, &config());
    let itt = raw.itt();
    raw.command(itt, encoded.cdb.to_vec(), data_out.len() as u32, false, &data_out[..1 << 20]);
    let second = Pdu::DataOut(DataOut { final_bit: false, lun: 0, itt, ttt: RESERVED_TAG, exp_stat_sn: 0, data_sn: 0, buffer_offset: 1 << 20 });
    let mut bytes = tessera_iscsi::stream::encode_pdu(&second, &data_out[1 << 20..2 << 20], raw.conn.digests());
    bytes.truncate(48 + 300_000);
    raw.conn.send_raw(&bytes).unwrap();
    raw.conn.shutdown_write().unwrap();
    assert!(raw.conn.is_closed_by_peer(Duration::from_secs(20)), "the target closes the connection");

    assert_eq!(placed_writes(&c) - before, 1, "the cut WRITE was a placed one");
    assert_eq!(attr(&c, obj, INFO, LENGTH), 100_000, "an unacknowledged WRITE did not grow the object");
    assert!(is_consistent(&f.object_file(obj), &c, obj), "length and used capacity describe the file");
    let got = c.read(obj, 0, 100_000).unwrap().data;
    assert!(got[..50_000] == old[..50_000], "bytes before the WRITE changed");
    assert!((50_000..100_000).all(|i| got[i] == old[i] || got[i] == new[i - 50_000]), "bytes from nowhere");
    // A later extension shows zeros where the cut WRITE's bytes were.
    c.write(obj, 8 << 20, b"end", false).unwrap();
    assert!(c.read(obj, 100_000, (8 << 20) - 100_000).unwrap().data.iter().all(|b| *b == 0));
    assert!(is_consistent(&f.object_file(obj), &c, obj));
    // And list WRITEs are still placed.
    let mut model = c.read(obj, 0, (8 << 20) + 3).unwrap().data;
    write(&c, obj, &mut model, 0, DataLayout::Strided { stride: 8192, block_len: 4096 }, &pattern(1 << 20, 9));
    assert!(c.read(obj, 0, model.len() as u64).unwrap().data == model);
}

/// Goal: objects shrunk while list WRITEs of them are in flight (through the OSD, and behind
/// its back so that pages the data is received into vanish) never crash the target or break
/// the PDU stream: every WRITE is answered, with success or an error, the session stays
/// usable, and afterwards the object's attributes describe its file and a fresh WRITE reads
/// back exactly.
#[test]
fn truncating_objects_under_list_writes_in_flight_never_crashes() {
    let f = Fixture::start(TARGET);
    let c = Arc::new(client(f.addr, config()));
    let obj = new_object(&c);
    let file = f.object_file(obj);
    let layout = DataLayout::Strided { stride: 64 << 10, block_len: 4096 };
    c.write_layout(obj, 0, &pattern(4 << 20, 1), layout.clone(), false).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3u32)
        .map(|t| {
            let (c, layout, stop) = (c.clone(), layout.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut ok, mut failed) = (0, 0);
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) || round < 4 {
                    let data = pattern(4 << 20, t * 1000 + round);
                    match c.write_layout(obj, t as u64 * 4096, &data, layout.clone(), false) {
                        Ok(()) => ok += 1,
                        Err(_) => failed += 1,
                    }
                    round += 1;
                }
                (ok, failed)
            })
        })
        .collect();
    let other = client(f.addr, config());
    for i in 0..30 {
        std::thread::sleep(Duration::from_millis(15));
        if i % 2 == 0 {
            let cut = Attribute { id: AttrId::new(INFO, LENGTH), value: ((i as u64 * 997) % (4 << 20)).to_be_bytes().to_vec() };
            let _ = other.set_attributes(obj, &[cut]);
        } else if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&file) {
            let _ = f.set_len((i as u64 * 7717) % (1 << 20));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut answered = 0;
    for w in writers {
        let (ok, failed) = w.join().unwrap();
        answered += ok + failed;
    }
    assert!(answered >= 12, "every WRITE was answered");
    // The session and the target still work; a fresh WRITE of the object reads back exactly.
    let cut = Attribute { id: AttrId::new(INFO, LENGTH), value: 0u64.to_be_bytes().to_vec() };
    c.set_attributes(obj, &[cut]).unwrap();
    let mut model = Vec::new();
    write(&c, obj, &mut model, 0, layout, &pattern(4 << 20, 77));
    assert!(c.read(obj, 0, model.len() as u64).unwrap().data == model);
    assert!(is_consistent(&file, &c, obj));
    let fresh = client(f.addr, config());
    assert_eq!(attr(&fresh, obj, INFO, LENGTH), model.len() as u64);
}

const MASTER: Key = Key([0x5A; 32]);
const HOUR_MS: u64 = 3_600_000;

/// A CMDRSP target and a client holding an object credential.
fn secured() -> (ServerHandle, tempfile::TempDir, OsdClient<Session>, tessera_security::Credential, ObjectAddr) {
    let dir = tempfile::tempdir().unwrap();
    let method = SecurityMethod::CmdRsp;
    let engine = Engine::open(dir.path(), EngineConfig::default()).unwrap();
    let set = OsdCommandSet::with_security(engine, TargetSecurity::new(method, Some(MASTER))).unwrap();
    let server = TargetServer::bind(TargetConfig::new(TARGET, "127.0.0.1:0"), Arc::new(ScsiFront::new(Arc::new(set)))).unwrap().spawn();
    let mut c = OsdClient::new(Session::login(server.local_addr().unwrap(), config()).unwrap(), 0);
    let mut keys = OsdKeys::new(c.system_id().unwrap(), MASTER);
    c.establish_key(&mut keys, KeySlot::Root, method).unwrap();
    let root = keys.credential(keys.root_capability(method, Permissions::CREATE, now_ms() + HOUR_MS)).unwrap();
    let create = OsdRequestBuilder::new(Command::CreatePartition { requested: None })
        .get_attrs(GetAttrs::List { ids: vec![CURRENT_COMMAND_PARTITION_ID], allocation_len: 64 });
    let pid = c.execute_as(&create, &root).unwrap();
    let pid = tessera_osd_proto::pages::value_u64(pid.attr(CURRENT_COMMAND_PARTITION_ID).unwrap()).unwrap();
    c.establish_key(&mut keys, KeySlot::Partition(pid), method).unwrap();
    c.establish_key(&mut keys, KeySlot::Working(pid, 0), method).unwrap();
    let partition = keys.credential(keys.partition_capability(method, pid, Permissions::ALL, now_ms() + HOUR_MS).unwrap()).unwrap();
    c.set_credentials(Some(Arc::new(partition)));
    let obj = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    let rights = Permissions::READ | Permissions::WRITE | Permissions::GET_ATTR;
    let cap = keys.object_capability(method, pid, obj.object_id.0, rights, now_ms() + HOUR_MS, 0).unwrap();
    let credential = keys.credential(cap).unwrap();
    c.set_credentials(Some(Arc::new(credential.clone())));
    (server, dir, c, credential, obj)
}

/// Goal: under CMDRSP a list WRITE is placed once its continuation segment's integrity value
/// verifies, and a segment altered after signing is refused before any byte is written.
#[test]
fn under_cmdrsp_a_tampered_continuation_segment_is_refused_and_nothing_written() {
    let (server, _dir, c, credential, obj) = secured();
    let layout = DataLayout::Strided { stride: 64 << 10, block_len: 4096 };
    let mut model = Vec::new();
    write(&c, obj, &mut model, 0, layout.clone(), &pattern(1 << 20, 3));
    assert!(c.read(obj, 0, model.len() as u64).unwrap().data == model, "a signed list WRITE lands");

    // The same shape signed, then its stride altered (still a valid descriptor); small
    // enough to go as one immediate data segment.
    let data = pattern(512 << 10, 4);
    let builder = OsdRequestBuilder::new(Command::Write { addr: obj, offset: 0, len: data.len() as u64, layout }).data(&data);
    let mut encoded = builder.encode().unwrap();
    credential.sign(&mut encoded, NonceSource::new(0xC0FFEE).next(now_ms())).unwrap();
    let segment = encoded.continuation_mut().expect("a list WRITE has a continuation segment");
    segment[54] ^= 0x01; // the stride's third-lowest byte: 64 KiB becomes 64 KiB + 256
    let data_out = encoded.data_out_vec();
    let mut raw = RawSession::login(server.local_addr().unwrap(), &config());
    let itt = raw.itt();
    raw.command(itt, encoded.cdb.to_vec(), data_out.len() as u32, true, &data_out);
    assert_eq!(raw.status(itt), 0x02, "CHECK CONDITION");
    assert!(c.read(obj, 0, model.len() as u64).unwrap().data == model, "nothing was written");
    assert_eq!(attr(&c, obj, INFO, LENGTH), model.len() as u64);
}
