//! Goal: READ data received straight into the caller's memory (`OsdClient::read_into`, the
//! session writing each Data-In PDU in place) is exactly what the OSD holds, is verified as a
//! buffered read is, zero-fills past the end of the object, and a command that fails is never
//! reported as good. Method: the real OSD target (engine on a temporary store, security gate,
//! iSCSI server) on a loopback port and a real initiator session; for the failures, a byte
//! relay between the two that cuts the connection or alters one byte of a Data-In (or of a
//! WRITE's answer) in flight.

use std::net::SocketAddr;
use std::sync::Arc;

use tessera_engine::{Engine, EngineConfig};
use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_initiator::osd_client::{OsdClient, OsdError};
use tessera_iscsi::login::DigestKind;
use tessera_osd_proto::pages::CURRENT_COMMAND_PARTITION_ID;
use tessera_osd_proto::{AttrId, Command, DataLayout, Extent, GetAttrs, OsdRequestBuilder};
use tessera_security::clock::now_ms;
use tessera_security::{Key, KeySlot, OsdKeys, Permissions, ResponseError, SecurityMethod};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_target::osd_lu::OsdCommandSet;
use tessera_target::security_gate::TargetSecurity;
use tessera_target::spc::ScsiFront;
use tessera_test_faults::{Direction, Fault, Relay};
use tessera_types::ObjectAddr;

const MASTER: Key = Key([0x3C; 32]);
const TARGET: &str = "iqn.2026-11.org.tessera.test:lent";
const HOUR_MS: u64 = 3_600_000;
/// Logical length, user object information page (OSD-2 r05 §7.1.2.12).
const LOGICAL_LENGTH: AttrId = AttrId::new(1, 0x82);

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8).collect()
}

/// A secured OSD with one partition and one object holding `data`, and the manager's keys.
struct Osd {
    _server: ServerHandle,
    _dir: tempfile::TempDir,
    addr: SocketAddr,
    method: SecurityMethod,
    keys: OsdKeys,
    object: ObjectAddr,
}

fn osd(method: SecurityMethod, data: &[u8]) -> Osd {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), EngineConfig::default()).unwrap();
    let set = OsdCommandSet::with_security(engine, TargetSecurity::new(method, Some(MASTER))).unwrap();
    let server = TargetServer::bind(TargetConfig::new(TARGET, "127.0.0.1:0"), Arc::new(ScsiFront::new(Arc::new(set)))).unwrap();
    let server = server.spawn();
    let addr = server.local_addr().unwrap();
    let mut client = session(&addr.to_string(), DigestKind::None);
    let mut keys = OsdKeys::new(client.system_id().unwrap(), MASTER);
    client.establish_key(&mut keys, KeySlot::Root, method).unwrap();
    let root = keys.credential(keys.root_capability(method, Permissions::CREATE, now_ms() + HOUR_MS)).unwrap();
    let create = OsdRequestBuilder::new(Command::CreatePartition { requested: None })
        .get_attrs(GetAttrs::List { ids: vec![CURRENT_COMMAND_PARTITION_ID], allocation_len: 64 });
    let pid = client.execute_as(&create, &root).unwrap();
    let pid = tessera_osd_proto::pages::value_u64(pid.attr(CURRENT_COMMAND_PARTITION_ID).unwrap()).unwrap();
    client.establish_key(&mut keys, KeySlot::Partition(pid), method).unwrap();
    client.establish_key(&mut keys, KeySlot::Working(pid, 0), method).unwrap();
    let partition = keys.credential(keys.partition_capability(method, pid, Permissions::ALL, now_ms() + HOUR_MS).unwrap()).unwrap();
    client.set_credentials(Some(Arc::new(partition)));
    let object = ObjectAddr::new(pid, client.create_one(pid).unwrap());
    client.write(object, 0, data, false).unwrap();
    Osd { _server: server, _dir: dir, addr, method, keys, object }
}

fn session(addr: &str, data_digest: DigestKind) -> OsdClient<Session> {
    let mut config = SessionConfig::new("iqn.2026-11.org.tessera.test:initiator", TARGET);
    config.data_digest = data_digest;
    OsdClient::new(Session::login(addr, config).unwrap(), 0)
}

impl Osd {
    /// A client on `addr` (the OSD, or a relay in front of it) holding a credential for the
    /// object, as a file-system client does.
    fn client(&self, addr: &str, data_digest: DigestKind) -> OsdClient<Session> {
        let mut c = session(addr, data_digest);
        let rights = Permissions::READ | Permissions::WRITE | Permissions::GET_ATTR;
        let cap = self.keys.object_capability(self.method, self.object.partition_id.0, self.object.object_id.0, rights, now_ms() + HOUR_MS, 0).unwrap();
        c.set_credentials(Some(Arc::new(self.keys.credential(cap).unwrap())));
        c
    }
}

/// `buf` cut into slices of the given lengths, cycling through them (the last one shorter).
fn slices<'a>(mut buf: &'a mut [u8], lens: &[usize]) -> Vec<&'a mut [u8]> {
    let mut out = Vec::new();
    for &n in lens.iter().cycle() {
        if buf.is_empty() {
            break;
        }
        let (a, b) = buf.split_at_mut(n.min(buf.len()));
        out.push(a);
        buf = b;
    }
    out
}

/// Goal: under CMDRSP (the cluster default) a multi-PDU READ lands in many uneven slices
/// byte for byte, a list READ too, and a READ that also retrieves an attribute gets the data
/// in the lent memory and the (verified) attribute in the reply.
#[test]
fn lent_read_under_cmdrsp() {
    let data = pattern(3 << 20 | 777, 1);
    let osd = osd(SecurityMethod::CmdRsp, &data);
    let c = osd.client(&osd.addr.to_string(), DigestKind::None);
    let mut buf = vec![0xEEu8; data.len() - 100];
    let got = c.read_into(osd.object, 100, buf.len() as u64, DataLayout::Contiguous, &mut slices(&mut buf, &[1, 4096, 100_003, 1 << 20])).unwrap();
    assert_eq!((got.received, got.past_end), (buf.len() as u64, false));
    assert!(buf == data[100..], "contiguous READ into slices");

    let layout = DataLayout::Strided { stride: 4096, block_len: 64 };
    let mut buf = vec![0xEEu8; 64 * 700];
    c.read_into(osd.object, 10, buf.len() as u64, layout, &mut slices(&mut buf, &[64, 3, 61, 1000])).unwrap();
    let expected: Vec<u8> = (0..700).flat_map(|i| data[10 + i * 4096..10 + i * 4096 + 64].to_vec()).collect();
    assert!(buf == expected, "strided READ into slices");

    let mut buf = vec![0xEEu8; 5000];
    let read = OsdRequestBuilder::new(Command::Read { addr: osd.object, offset: 0, len: 5000, layout: DataLayout::Contiguous })
        .get_attrs(GetAttrs::List { ids: vec![LOGICAL_LENGTH], allocation_len: 64 });
    let (reply, received) = c.execute_lent(&read, &mut slices(&mut buf, &[1000])).unwrap();
    assert_eq!(received, 5000);
    assert!(buf == data[..5000]);
    assert!(reply.data.is_empty(), "all command data went to the lent memory");
    let len = reply.attr(LOGICAL_LENGTH).and_then(tessera_osd_proto::pages::value_u64);
    assert_eq!(len, Some(data.len() as u64), "the retrieved attribute arrives beside the lent data");
}

/// Goal: with many READs in flight on one session, each lands in its own caller's memory,
/// whichever thread happens to read the socket. Method: 8 threads, each reading its own
/// ranges into its own slices 20 times, compared byte for byte.
#[test]
fn concurrent_lent_reads_land_in_their_own_memory() {
    let data = pattern(2 << 20, 6);
    let osd = osd(SecurityMethod::CmdRsp, &data);
    let c = osd.client(&osd.addr.to_string(), DigestKind::None);
    std::thread::scope(|scope| {
        for t in 0..8usize {
            let (c, data, object) = (&c, &data, osd.object);
            scope.spawn(move || {
                for round in 0..20usize {
                    let (at, len) = ((t * 131_071 + round * 4099) % (1 << 20), 100_000 + t * 10_000);
                    let mut buf = vec![0xEEu8; len];
                    c.read_into(object, at as u64, len as u64, DataLayout::Contiguous, &mut slices(&mut buf, &[4096, 17])).unwrap();
                    assert!(buf == data[at..at + len], "thread {t} round {round}");
                }
            });
        }
    });
}

/// Goal: with data digests on, each Data-In PDU's digest is checked over the slices it
/// landed in. Method: a 3 MiB READ (several PDUs, each spanning slice boundaries).
#[test]
fn lent_read_with_data_digests() {
    let data = pattern(3 << 20, 2);
    let osd = osd(SecurityMethod::CmdRsp, &data);
    let c = osd.client(&osd.addr.to_string(), DigestKind::Crc32c);
    assert!(c.transport().negotiated().data_digest, "data digests negotiated");
    let mut buf = vec![0u8; data.len()];
    c.read_into(osd.object, 0, data.len() as u64, DataLayout::Contiguous, &mut slices(&mut buf, &[333_333, 7])).unwrap();
    assert!(buf == data);
}

/// Goal: past the end of the object the lent memory reads as zeros, whatever it held before:
/// a contiguous READ (the OSD sends fewer bytes) and a list READ (the OSD zero-fills).
#[test]
fn lent_read_past_end_is_zeros() {
    let data = pattern(10_000, 3);
    let osd = osd(SecurityMethod::CmdRsp, &data);
    let c = osd.client(&osd.addr.to_string(), DigestKind::None);
    let mut buf = vec![0xEEu8; 3000];
    let got = c.read_into(osd.object, 9000, 3000, DataLayout::Contiguous, &mut slices(&mut buf, &[700])).unwrap();
    assert!(got.past_end);
    assert!(got.received >= 1000, "what exists arrived (the OSD may also send the zeros)");
    assert!(buf[..1000] == data[9000..] && buf[1000..].iter().all(|b| *b == 0));

    let mut buf = vec![0xEEu8; 200];
    let layout = DataLayout::List(vec![Extent { offset: 0, len: 100 }, Extent { offset: 20_000, len: 100 }]);
    let got = c.read_into(osd.object, 9950, 200, layout, &mut slices(&mut buf, &[30])).unwrap();
    assert!(got.past_end);
    assert!(buf[..50] == data[9950..] && buf[50..].iter().all(|b| *b == 0));
}


/// Goal: a connection that drops in the middle of a READ's Data-In gives the caller an error,
/// never partial data reported as good, and the session refuses further commands. Method: a
/// 4 MiB READ through a relay that closes both connections 1.5 MiB into the reply.
#[test]
fn connection_dropped_mid_data_in_is_an_error() {
    let data = pattern(4 << 20, 4);
    let osd = osd(SecurityMethod::CmdRsp, &data);
    let relay = Relay::start(osd.addr, Direction::FromTarget, Fault::CutAfter(3 << 19));
    let c = osd.client(&relay.addr.to_string(), DigestKind::None);
    relay.arm();
    let mut buf = vec![0u8; data.len()];
    let err = c.read_into(osd.object, 0, data.len() as u64, DataLayout::Contiguous, &mut slices(&mut buf, &[1 << 20])).unwrap_err();
    assert!(matches!(err, OsdError::Transport(_)), "a transport error, got {err}");
    assert!(buf[..1 << 20] == data[..1 << 20], "the first PDU had landed before the cut");
    assert!(buf[2 << 20..].iter().all(|b| *b == 0), "nothing past the cut was written");
    let mut again = [0u8; 10];
    assert!(c.read_into(osd.object, 0, 10, DataLayout::Contiguous, &mut [&mut again[..]]).is_err(), "the session is closed");
}

/// Goal: under ALLDATA the Data-In integrity value covers the bytes that landed in the lent
/// memory: an unaltered READ verifies, and one data byte altered on the wire is refused as
/// an integrity failure. Method: a 2 MiB READ through a relay, clean, then with one byte
/// flipped inside the first Data-In PDU's data.
#[test]
fn alldata_data_in_icv_covers_lent_memory() {
    let data = pattern(2 << 20, 5);
    let osd = osd(SecurityMethod::AllData, &data);
    let clean = osd.client(&osd.addr.to_string(), DigestKind::None);
    let mut buf = vec![0u8; data.len()];
    clean.read_into(osd.object, 0, data.len() as u64, DataLayout::Contiguous, &mut slices(&mut buf, &[65_536, 3])).unwrap();
    assert!(buf == data, "ALLDATA READ into slices");

    let relay = Relay::start(osd.addr, Direction::FromTarget, Fault::FlipAt(300_000));
    let c = osd.client(&relay.addr.to_string(), DigestKind::None);
    relay.arm();
    let mut buf = vec![0u8; data.len()];
    let err = c.read_into(osd.object, 0, data.len() as u64, DataLayout::Contiguous, &mut slices(&mut buf, &[65_536, 3])).unwrap_err();
    assert!(
        matches!(err, OsdError::Integrity { source: ResponseError::DataInIcv, .. }),
        "an altered data byte is an integrity failure, got {err}"
    );
}

/// Goal: the answer to a WRITE, whose response integrity value the client computes while the
/// command is in flight (a GOOD answer is then checked by comparison), is still refused when
/// altered on the wire. Method: 4 KiB WRITEs under CMDRSP through a relay: one before arming
/// verifies; the next has the last byte of its answer flipped (a 48-byte SCSI Response header
/// and 44 bytes of sense data ending with the 32-byte value) and must fail the check.
#[test]
fn an_altered_answer_to_a_write_is_refused() {
    let data = pattern(4096, 6);
    let osd = osd(SecurityMethod::CmdRsp, &data);
    let relay = Relay::start(osd.addr, Direction::FromTarget, Fault::FlipAt(91));
    let c = osd.client(&relay.addr.to_string(), DigestKind::None);
    c.write(osd.object, 0, &data, false).unwrap();
    relay.arm();
    let err = c.write(osd.object, 0, &data, false).unwrap_err();
    assert!(
        matches!(err, OsdError::Integrity { source: ResponseError::ResponseIcv, .. }),
        "an altered answer is an integrity failure, got {err}"
    );
}
