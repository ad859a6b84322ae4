//! Goal: every client method produces bytes the target accepts and reads the answer it
//! produces. Method: the real OSD logical unit (decoder, engine on a temporary SQLite store,
//! encoder) in-process behind `DirectTransport`; only the iSCSI wire is skipped, which the
//! end-to-end tests in crates/cli/tests cover. A thin wrapper records the Data-Out gather
//! pieces so a test can check that write data goes out without a copy.

use std::sync::{Arc, Mutex};

use tessera_engine::{Engine, EngineConfig};
use tessera_osd_proto::{AttrId, Attribute, DataLayout, Extent};
use tessera_scsi::{DirectTransport, ScsiRequest, ScsiResponse, ScsiTransport, TransportError};
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::spc::ScsiFront;
use tessera_types::ObjectAddr;

use super::*;

struct RecordingTransport {
    inner: DirectTransport<ScsiFront<Arc<OsdCommandSet>>>,
    pieces: Mutex<Vec<usize>>,
    _dir: tempfile::TempDir,
}

impl ScsiTransport for RecordingTransport {
    fn execute(&self, request: &ScsiRequest<'_>) -> Result<ScsiResponse, TransportError> {
        *self.pieces.lock().unwrap() = request.data_out.iter().map(|s| s.as_ptr() as usize).collect();
        self.inner.execute(request)
    }

    fn peer(&self) -> String {
        "in-process-osd".to_string()
    }
}

fn client() -> OsdClient<RecordingTransport> {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), EngineConfig::default()).unwrap();
    let device = Arc::new(ScsiFront::new(Arc::new(OsdCommandSet::new(engine))));
    let inner = DirectTransport::new(device, "iqn.2026-11.org.tessera:test,i,0x1", 1);
    OsdClient::new(RecordingTransport { inner, pieces: Mutex::new(Vec::new()), _dir: dir }, 0)
}

#[test]
fn create_write_read_round_trip() {
    let c = client();
    let pid = c.create_partition(None).unwrap();
    assert!(pid >= 0x10000);
    let ids = c.create(pid, None, 3).unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[1], ids[0] + 1);
    let addr = ObjectAddr::new(pid, ids[0]);
    let data: Vec<u8> = (0..100u8).collect();
    c.write(addr, 10, &data, true).unwrap();
    // The caller's buffer went out as its own gather piece.
    assert!(c.transport().pieces.lock().unwrap().contains(&(data.as_ptr() as usize)));
    let got = c.read(addr, 10, 100).unwrap();
    assert_eq!((got.data, got.past_end), (data.clone(), false));
    // Past the end: what exists, zeros after it, and the recovered indication.
    let got = c.read(addr, 100, 50).unwrap();
    assert_eq!(got.data[..10], data[90..]);
    assert!(got.data[10..].iter().all(|b| *b == 0));
    assert!(got.past_end);
}

#[test]
fn layouts_scatter_and_gather() {
    let c = client();
    let pid = c.create_partition(Some(0x20000)).unwrap();
    let oid = c.create_one(pid).unwrap();
    let addr = ObjectAddr::new(pid, oid);
    c.write(addr, 0, &[0u8; 64], false).unwrap();
    c.write_layout(addr, 0, &[1, 1, 2, 2, 3, 3], DataLayout::Strided { stride: 10, block_len: 2 }, false).unwrap();
    let got = c.read(addr, 0, 24).unwrap().data;
    assert_eq!(&got[0..2], &[1, 1]);
    assert_eq!(&got[10..12], &[2, 2]);
    assert_eq!(&got[20..22], &[3, 3]);
    let sgl = DataLayout::List(vec![Extent { offset: 20, len: 2 }, Extent { offset: 0, len: 1 }]);
    assert_eq!(c.read_layout(addr, 0, 3, sgl).unwrap().data, vec![3, 3, 1]);
    let nested = DataLayout::Nested { block_len: 1, levels: vec![(2, 1), (2, 10)] };
    assert_eq!(c.read_layout(addr, 0, 4, nested).unwrap().data, vec![1, 1, 2, 2]);
}

/// Goal: a gathered WRITE stores the slices end to end through the layout, and each slice
/// leaves as its own Data-Out piece (no packing copy).
#[test]
fn gathered_write_sends_the_callers_slices() {
    let c = client();
    let pid = c.create_partition(None).unwrap();
    let addr = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    let (a, b) = (vec![5u8; 3], vec![6u8; 3]);
    c.write_gather(addr, 0, &[&a, &b], DataLayout::Strided { stride: 4, block_len: 2 }, false).unwrap();
    let sent = c.transport().pieces.lock().unwrap().clone();
    assert!(sent.contains(&(a.as_ptr() as usize)) && sent.contains(&(b.as_ptr() as usize)));
    assert_eq!(c.read(addr, 0, 10).unwrap().data, vec![5, 5, 0, 0, 5, 6, 0, 0, 6, 6]);
}

/// Goal: the hybrid packs small slices (one copied piece on the wire) and gathers large ones
/// (the caller's own slices on the wire); both store the same bytes.
#[test]
fn scattered_write_packs_small_and_gathers_large() {
    let c = client();
    let pid = c.create_partition(None).unwrap();
    let addr = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    for piece in [GATHER_MIN_PIECE_BYTES / 4, GATHER_MIN_PIECE_BYTES] {
        let slices: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i + piece as u8; piece]).collect();
        let refs: Vec<&[u8]> = slices.iter().map(Vec::as_slice).collect();
        c.write_scattered(addr, 0, &refs, DataLayout::Contiguous, false).unwrap();
        let sent = c.transport().pieces.lock().unwrap().clone();
        let in_place = refs.iter().filter(|r| sent.contains(&(r.as_ptr() as usize))).count();
        assert_eq!(in_place, if gathers(&refs) { 4 } else { 0 }, "piece {piece}");
        assert_eq!(c.read(addr, 0, 4 * piece as u64).unwrap().data, refs.concat());
    }
    assert!(!gathers(&[&[0u8; GATHER_MIN_PIECE_BYTES / 4][..]; 2]));
    assert!(gathers(&[&[0u8; GATHER_MIN_PIECE_BYTES][..]; 2]));
}

#[test]
fn append_returns_start_address() {
    let c = client();
    let pid = c.create_partition(None).unwrap();
    let addr = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    assert_eq!(c.append(addr, b"hello").unwrap(), 0);
    assert_eq!(c.append(addr, b"world").unwrap(), 5);
}

#[test]
fn attributes_and_atomics() {
    let c = client();
    let pid = c.create_partition(None).unwrap();
    let addr = ObjectAddr::new(pid, c.create_one(pid).unwrap());
    let id = AttrId::new(0x1_0000, 1);
    c.set_attributes(addr, &[Attribute { id, value: vec![9; 3] }]).unwrap();
    let got = c.get_attributes(addr, &[id, AttrId::new(0x1_0000, 2)]).unwrap();
    assert_eq!(got[0].value, Some(vec![9; 3]));
    assert_eq!(got[1].value, None);
    let page = c.get_attribute_page(addr, 0x1_0000).unwrap();
    assert_eq!(page.len(), 1);
    // Large values force the retry with the full length.
    let big = AttrId::new(0x1_0000, 3);
    c.set_attributes(addr, &[Attribute { id: big, value: vec![7; 6000] }]).unwrap();
    assert_eq!(c.get_attributes(addr, &[big]).unwrap()[0].value.as_ref().map(Vec::len), Some(6000));
    let counter = AttrId::new(0x1_0000, 0x10);
    assert_eq!(c.fetch_and_add(addr, counter, 5).unwrap(), 0);
    assert_eq!(c.fetch_and_add(addr, counter, 5).unwrap(), 5);
    assert_eq!(c.compare_and_swap(addr, counter, 10, 42).unwrap(), 10);
    assert_eq!(c.compare_and_swap(addr, counter, 10, 43).unwrap(), 42);
}

#[test]
fn list_follows_continuations() {
    let c = client();
    let pid = c.create_partition(None).unwrap();
    let ids = c.create(pid, None, 20).unwrap();
    let page = c.list(pid, &ListParams { allocation_len: 24 + 8 * 5, ..Default::default() }).unwrap();
    assert_eq!(page.entries.len(), 5);
    assert_eq!(page.continuation_oid, ids[5]);
    assert_eq!(c.list_all(pid).unwrap(), ids);
}

/// A target whose every LIST names one object and a continuation that points back, behind
/// the id it started from: a faulty or hostile target. After 100 LISTs it ends the list, so
/// a client that kept following it stops too (with far too many ids) instead of hanging.
struct BackwardsLists(Mutex<u32>);

impl ScsiTransport for BackwardsLists {
    fn execute(&self, _request: &ScsiRequest<'_>) -> Result<ScsiResponse, TransportError> {
        let mut calls = self.0.lock().unwrap();
        *calls += 1;
        let continuation_oid = if *calls > 100 { 0 } else { 0x10002 };
        let result = tessera_osd_proto::ListResult {
            continuation_oid,
            entries: vec![tessera_osd_proto::ListEntry { object_id: 0x10004, attrs: vec![] }],
            ..Default::default()
        };
        Ok(ScsiResponse { status: tessera_scsi::ScsiStatus::Good, data_in: result.encode(), sense: None, residual: 0 })
    }

    fn peer(&self) -> String {
        "backwards".to_string()
    }
}

/// Goal: following a list's continuations ends when a continuation does not move forward,
/// with an error naming the target, rather than looping forever.
#[test]
fn a_list_whose_continuation_points_back_ends_with_an_error() {
    let c = OsdClient::new(BackwardsLists(Mutex::new(0)), 0);
    let err = c.list_all_from(0x10000, 0x10004).unwrap_err().to_string();
    assert!(err.contains("backwards") && err.contains("progress in the list"), "{err}");
    assert_eq!(*c.transport().0.lock().unwrap(), 1, "one LIST, then the backward continuation stops it");
}

/// Goal: a refusal names the peer, the command and the object, and carries the sense.
#[test]
fn sense_errors_name_the_object() {
    let c = client();
    let err = c.remove(ObjectAddr::new(0x10000, 0x12345)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("in-process-osd") && text.contains("0x12345") && text.contains("Remove"), "{text}");
    assert_eq!(err.sense().map(|s| s.asc_ascq()), Some(0x2400));
}
