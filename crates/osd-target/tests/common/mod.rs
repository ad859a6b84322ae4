//! A real OSD target for these tests: an engine in a temporary directory behind the iSCSI
//! server on a loopback port, shut down when dropped.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tempfile::TempDir;
use tessera_engine::{Engine, EngineConfig};
use tessera_target::iscsi_server::{ServerHandle, TargetConfig, TargetServer};
use tessera_initiator::iscsi::{RawConnection, Session, SessionConfig};
use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::pdu::{DataOut, Pdu, ScsiCommand};
use tessera_iscsi::login::DigestKind;
use tessera_initiator::osd_client::OsdClient;
use tessera_osd_proto::AttrId;
use tessera_target::osd_lu::{OsdCommandSet, STATS_PAGE};
use tessera_target::spc::ScsiFront;
use tessera_types::ObjectAddr;

pub struct OsdTarget {
    handle: Option<ServerHandle>,
    pub addr: SocketAddr,
    pub dir: TempDir,
}

impl OsdTarget {
    /// Starts a target named `target` (an iSCSI qualified name) on a free loopback port.
    pub fn start(target: &str) -> OsdTarget {
        Self::start_with(target, |_| {})
    }

    /// [`OsdTarget::start`] with its configuration changed by `adjust` first.
    pub fn start_with(target: &str, adjust: impl FnOnce(&mut TargetConfig)) -> OsdTarget {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(dir.path(), EngineConfig::default()).unwrap();
        let device = Arc::new(ScsiFront::new(Arc::new(OsdCommandSet::new(engine))));
        let mut config = TargetConfig::new(target, "127.0.0.1:0");
        adjust(&mut config);
        let server = TargetServer::bind(config, device).unwrap();
        let addr = server.local_addr().unwrap();
        OsdTarget { handle: Some(server.spawn()), addr, dir }
    }

    pub fn handle(&self) -> &ServerHandle {
        self.handle.as_ref().expect("the target runs until dropped")
    }

    /// The file that holds `obj`'s data.
    pub fn object_file(&self, obj: ObjectAddr) -> PathBuf {
        self.dir.path().join("objects").join(format!("{:x}", obj.partition_id.0)).join(format!("{:x}", obj.object_id.0))
    }
}

impl Drop for OsdTarget {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}

/// Attribute pages and numbers the tests read.
pub const INFO: u32 = 1;
pub const USED: u32 = 0x81;
pub const LENGTH: u32 = 0x82;
/// The target's statistics page counter of WRITEs received straight into their file.
pub const PLACED_WRITES: u32 = 7;

/// `len` bytes of a pattern that differs with `seed`.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 24) as u8).collect()
}

/// Attribute `number` of `page` of `addr`, as a big-endian integer.
pub fn attr(c: &OsdClient<Session>, addr: ObjectAddr, page: u32, number: u32) -> u64 {
    let got = c.get_attributes(addr, &[AttrId::new(page, number)]).unwrap();
    let v = got[0].value.as_ref().unwrap_or_else(|| panic!("{page:#x}/{number:#x} undefined"));
    v.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64)
}

/// How many WRITEs the target has placed so far (its statistics page).
pub fn placed_writes(c: &OsdClient<Session>) -> u64 {
    let page = c.get_attribute_page(ObjectAddr::ROOT, STATS_PAGE).unwrap();
    let found = page.iter().find(|a| a.id.number == PLACED_WRITES).and_then(|a| a.value.as_ref()).expect("placed WRITEs counter");
    u64::from_be_bytes(found.as_slice().try_into().expect("8 bytes"))
}

/// A new object in a new partition.
pub fn new_object(c: &OsdClient<Session>) -> ObjectAddr {
    let pid = c.create_partition(None).unwrap();
    ObjectAddr::new(pid, c.create_one(pid).unwrap())
}

/// `base` under every way Data-Out can arrive (immediate data, unsolicited Data-Out, R2Ts,
/// odd bursts, 8 KiB segments so one command's data spans many PDUs), with header digests,
/// and with data digests (which keep WRITEs buffered), each with its name.
pub fn every_negotiation(base: &SessionConfig) -> Vec<(&'static str, SessionConfig)> {
    // (name, immediate data, initial R2T, first burst, max burst, segment, outstanding R2Ts,
    //  header digest, data digest)
    let cases = [
        ("immediate and unsolicited", true, false, (16 << 20) - 1, (16 << 20) - 1, 1 << 20, 1, false, false),
        ("unsolicited Data-Out, then R2Ts", false, false, 256 << 10, 1 << 20, 64 << 10, 1, false, false),
        ("immediate data, then R2Ts", true, true, 64 << 10, 256 << 10, 256 << 10, 4, false, false),
        ("R2Ts only, odd bursts, 8 KiB segments", false, true, 64 << 10, 100_003, 8 << 10, 2, false, false),
        ("header digests", true, false, 512 << 10, 1 << 20, 128 << 10, 2, true, false),
        ("data digests (buffered)", true, false, 512 << 10, 1 << 20, 128 << 10, 2, true, true),
    ];
    cases
        .into_iter()
        .map(|(name, imm, r2t, first, max, segment, outstanding, header_digest, data_digest)| {
            let mut cfg = base.clone();
            cfg.immediate_data = imm;
            cfg.initial_r2t = r2t;
            cfg.first_burst_len = first;
            cfg.max_burst_len = max;
            cfg.max_recv_data_segment_len = segment;
            cfg.max_outstanding_r2t = outstanding;
            cfg.header_digest = if header_digest { DigestKind::Crc32c } else { DigestKind::None };
            cfg.data_digest = if data_digest { DigestKind::Crc32c } else { DigestKind::None };
            (name, cfg)
        })
        .collect()
}

/// A raw iSCSI session for hand-built PDUs: logged in with `config`, the power-on unit
/// attention already taken by a TEST UNIT READY.
pub struct RawSession {
    pub conn: RawConnection,
    /// The CmdSN the next command carries.
    pub cmd_sn: u32,
    next_itt: u32,
}

impl RawSession {
    pub fn login(addr: SocketAddr, config: &SessionConfig) -> RawSession {
        let mut conn = RawConnection::connect(addr).unwrap();
        let login = conn.login(config).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut raw = RawSession { conn, cmd_sn: login.cmd_sn, next_itt: 1 };
        let itt = raw.itt();
        raw.command(itt, vec![0u8; 16], 0, true, &[]);
        raw.response(itt);
        raw
    }

    /// A fresh initiator task tag.
    pub fn itt(&mut self) -> u32 {
        self.next_itt += 1;
        self.next_itt
    }

    /// Sends a SCSI Command (a WRITE of `write_len` bytes when non-zero) with `immediate` data.
    pub fn command(&mut self, itt: u32, cdb: Vec<u8>, write_len: u32, final_bit: bool, immediate: &[u8]) {
        let pdu = Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_bit,
            read: false,
            write: write_len > 0,
            task_attr: 1,
            lun: 0,
            itt,
            expected_data_transfer_length: write_len,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: 0,
            cdb,
            bidi_read_len: None,
        });
        self.cmd_sn += 1;
        self.conn.send_pdu(&pdu, immediate).unwrap();
    }

    /// An unsolicited Data-Out header for `itt` at `offset`.
    pub fn data_out(itt: u32, offset: u32, final_bit: bool) -> Pdu {
        Pdu::DataOut(DataOut { final_bit, lun: 0, itt, ttt: RESERVED_TAG, exp_stat_sn: 0, data_sn: 0, buffer_offset: offset })
    }

    /// Waits for the SCSI Response (or TMF response) to `itt`, skipping anything else.
    pub fn response(&mut self, itt: u32) -> Pdu {
        loop {
            let reply = self.conn.recv().unwrap();
            match reply.pdu.unwrap() {
                Pdu::ScsiResponse(r) if r.itt == itt => return Pdu::ScsiResponse(r),
                Pdu::TaskMgmtResponse(r) if r.itt == itt => return Pdu::TaskMgmtResponse(r),
                _ => {}
            }
        }
    }

    /// The status of `itt`'s SCSI Response.
    pub fn status(&mut self, itt: u32) -> u8 {
        match self.response(itt) {
            Pdu::ScsiResponse(r) => r.status,
            other => panic!("a SCSI Response to {itt}, got {other:?}"),
        }
    }
}
