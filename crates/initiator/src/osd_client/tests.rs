//! Goal: every client method produces bytes the target decoder accepts, and reads the answer
//! the target encoder produces. Method: a small in-memory OSD behind a fake transport that runs
//! `decode_request` / `encode_reply` from tessera-osd-proto, so only the engine is faked.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tessera_osd_proto::pages::*;
use tessera_osd_proto::{
    decode_request, encode_reply, AttrId, Attribute, Command, DataLayout, Extent, GetAttrs, ListEntry, ListResult, Reply,
    RetrievedAttr,
};
use tessera_scsi::{ScsiRequest, ScsiResponse, ScsiStatus, ScsiTransport, Sense, SenseKey, TransportError};
use tessera_types::ObjectAddr;

use super::*;

#[derive(Default)]
struct Fake {
    objects: BTreeMap<(u64, u64), Vec<u8>>,
    attrs: BTreeMap<(u64, u64, AttrId), Vec<u8>>,
    next_id: u64,
    /// Addresses of the Data-Out pieces of the last command.
    pieces: Vec<usize>,
}

struct FakeTransport(Mutex<Fake>);

fn sense_at_oid() -> Sense {
    Sense::invalid_cdb_field(24)
}

impl Fake {
    fn run(&mut self, command: &Command, data: &[u8], set: &[Attribute], get: &GetAttrs) -> Result<Reply, Sense> {
        let mut reply = Reply::default();
        let mut current: BTreeMap<AttrId, Vec<u8>> = BTreeMap::new();
        let mut addr = None;
        self.next_id = self.next_id.max(0x10000);
        match command {
            Command::CreatePartition { requested } => {
                let pid = requested.unwrap_or_else(|| {
                    self.next_id += 1;
                    self.next_id
                });
                self.objects.insert((pid, 0), Vec::new());
                current.insert(CURRENT_COMMAND_PARTITION_ID, pid.to_be_bytes().to_vec());
            }
            Command::Create { partition_id, requested, count } => {
                let first = requested.unwrap_or(self.next_id + 1);
                for i in 0..*count as u64 {
                    self.objects.insert((*partition_id, first + i), Vec::new());
                }
                self.next_id = self.next_id.max(first + *count as u64);
                current.insert(CURRENT_COMMAND_OBJECT_ID, first.to_be_bytes().to_vec());
            }
            Command::Write { addr: a, offset, len, layout } => {
                let obj = self.objects.get_mut(&(a.partition_id.0, a.object_id.0)).ok_or_else(sense_at_oid)?;
                let mut at = 0usize;
                layout.for_each_extent(*offset, *len, |o, n| {
                    let end = (o + n) as usize;
                    if obj.len() < end {
                        obj.resize(end, 0);
                    }
                    obj[o as usize..end].copy_from_slice(&data[at..at + n as usize]);
                    at += n as usize;
                });
                addr = Some(*a);
            }
            Command::Append { addr: a, .. } => {
                let obj = self.objects.get_mut(&(a.partition_id.0, a.object_id.0)).ok_or_else(sense_at_oid)?;
                current.insert(CURRENT_COMMAND_APPEND_START, (obj.len() as u64).to_be_bytes().to_vec());
                obj.extend_from_slice(data);
            }
            Command::Read { addr: a, offset, len, layout } => {
                let obj = self.objects.get(&(a.partition_id.0, a.object_id.0)).ok_or_else(sense_at_oid)?;
                let mut past = false;
                layout.for_each_extent(*offset, *len, |o, n| {
                    for i in o..o + n {
                        match obj.get(i as usize) {
                            Some(&b) => reply.data_in.push(b),
                            None => {
                                past = true;
                                if *layout != DataLayout::Contiguous {
                                    reply.data_in.push(0);
                                }
                            }
                        }
                    }
                });
                if past {
                    reply.recovered = Some(Sense::new(SenseKey::RecoveredError, 0x3B, 0x17));
                }
            }
            Command::Remove { addr: a } => {
                self.objects.remove(&(a.partition_id.0, a.object_id.0)).ok_or_else(sense_at_oid)?;
            }
            Command::GetAttributes { addr: a } | Command::SetAttributes { addr: a } => addr = Some(*a),
            Command::List { partition_id, initial_oid, allocation_len, .. } => {
                let entries = self
                    .objects
                    .keys()
                    .filter(|(p, o)| *p == *partition_id && *o >= *initial_oid && *o != 0)
                    .map(|(_, o)| ListEntry { object_id: *o, attrs: vec![] })
                    .collect();
                reply.data_in = ListResult { entries, list_id: 1, ..Default::default() }.encode_within(*allocation_len);
            }
            Command::CompareAndSwap { addr: a, attr, expected, new } => {
                let key = (a.partition_id.0, a.object_id.0, *attr);
                let old = self.attrs.get(&key).and_then(|v| value_u64(v)).unwrap_or(0);
                if old == *expected {
                    self.attrs.insert(key, new.to_be_bytes().to_vec());
                }
                reply.data_in = old.to_be_bytes().to_vec();
            }
            Command::FetchAndAdd { addr: a, attr, addend } => {
                let key = (a.partition_id.0, a.object_id.0, *attr);
                let old = self.attrs.get(&key).and_then(|v| value_u64(v)).unwrap_or(0);
                self.attrs.insert(key, old.wrapping_add(*addend).to_be_bytes().to_vec());
                reply.data_in = old.to_be_bytes().to_vec();
            }
            _ => {}
        }
        let (p, o) = addr.map_or((0, 0), |a| (a.partition_id.0, a.object_id.0));
        for a in set {
            self.attrs.insert((p, o, a.id), a.value.clone());
        }
        let ids: Vec<AttrId> = match get {
            GetAttrs::None => vec![],
            GetAttrs::List { ids, .. } => ids.clone(),
            GetAttrs::Page { page, .. } => self.attrs.keys().filter(|k| k.0 == p && k.1 == o && k.2.page == *page).map(|k| k.2).collect(),
        };
        reply.retrieved = ids
            .into_iter()
            .map(|id| {
                let value = if id.page == CURRENT_COMMAND_PAGE { current.get(&id).cloned() } else { self.attrs.get(&(p, o, id)).cloned() };
                RetrievedAttr { id, value }
            })
            .collect();
        Ok(reply)
    }
}

impl ScsiTransport for FakeTransport {
    fn execute(&self, request: &ScsiRequest<'_>) -> Result<ScsiResponse, TransportError> {
        let mut fake = self.0.lock().unwrap();
        fake.pieces = request.data_out.iter().map(|s| s.as_ptr() as usize).collect();
        let data_out = request.data_out.concat();
        let (req, placement) = match decode_request(request.cdb, &data_out) {
            Ok(x) => x,
            Err(e) => panic!("the client sent a CDB the target refuses: {e}"),
        };
        let answer = |status, data_in: Vec<u8>, sense| ScsiResponse { status, residual: request.data_in_len as i64 - data_in.len() as i64, data_in, sense };
        Ok(match fake.run(&req.command, req.data, &req.set_attrs, &req.get_attrs) {
            Ok(reply) => {
                let data_in = encode_reply(&placement, &reply, request.data_in_len);
                match reply.recovered {
                    Some(s) => answer(ScsiStatus::CheckCondition, data_in, Some(s)),
                    None => answer(ScsiStatus::Good, data_in, None),
                }
            }
            Err(sense) => answer(ScsiStatus::CheckCondition, Vec::new(), Some(sense)),
        })
    }

    fn peer(&self) -> String {
        "fake-osd:3260".to_string()
    }
}

fn client() -> OsdClient<FakeTransport> {
    OsdClient::new(FakeTransport(Mutex::new(Fake::default())), 0)
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
    assert!(c.transport().0.lock().unwrap().pieces.contains(&(data.as_ptr() as usize)));
    let got = c.read(addr, 10, 100).unwrap();
    assert_eq!((got.data, got.past_end), (data.clone(), false));
    // Past the end: short data plus the recovered indication.
    let got = c.read(addr, 100, 50).unwrap();
    assert_eq!(got.data, data[90..].to_vec());
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

/// Goal: a refusal names the peer, the command and the object, and carries the sense.
#[test]
fn sense_errors_name_the_object() {
    let c = client();
    let err = c.remove(ObjectAddr::new(0x10000, 0x12345)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("fake-osd:3260") && text.contains("0x12345") && text.contains("Remove"), "{text}");
    assert_eq!(err.sense().map(|s| s.asc_ascq()), Some(0x2400));
}
