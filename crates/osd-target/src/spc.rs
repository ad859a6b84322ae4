//! SCSI primary commands (SPC-4) in front of a command set: [`ScsiFront`] answers INQUIRY
//! (standard data and VPD pages 0x00, 0x80, 0x83; SPC-4 §6.6, §7.8), REPORT LUNS (§6.33),
//! TEST UNIT READY (§6.47) and REQUEST SENSE (§6.39) for LUN 0, keeps unit attention conditions
//! per I_T nexus (SAM-5 §5.14, SPC-4 §5.14), and passes every other CDB to the
//! [`CommandSet`] (OSD-2 for Tessera, peripheral device type 0x11).

use std::collections::HashMap;
use std::sync::Mutex;

use tessera_iscsi::lun::encode_lun;
use tessera_scsi::{Nexus, PlacedDataOut, ScsiDevice, ScsiOutcome, ScsiTask, Sense, SenseKey, TmfResult};

/// The logical unit this front serves.
pub const LUN0: u64 = 0;

const OP_TEST_UNIT_READY: u8 = 0x00;
const OP_REQUEST_SENSE: u8 = 0x03;
const OP_INQUIRY: u8 = 0x12;
const OP_REPORT_LUNS: u8 = 0xA0;

const VPD_SUPPORTED_PAGES: u8 = 0x00;
const VPD_UNIT_SERIAL: u8 = 0x80;
const VPD_DEVICE_ID: u8 = 0x83;

/// Standard INQUIRY data length we return (SPC-4 §6.6.2: 36 bytes minimum).
const STD_INQUIRY_LEN: usize = 36;
const INQ_VERSION_SPC4: u8 = 0x06;
/// Response data format 2 plus HISUP (LUNs are hierarchical).
const INQ_FORMAT_HISUP: u8 = 0x12;
/// Byte 7 CMDQUE: the device queues commands.
const INQ_CMDQUE: u8 = 0x02;
/// Peripheral qualifier 011b, type 1Fh: "no logical unit at this LUN" (SPC-4 §6.6.2).
const INQ_NO_LUN: u8 = 0x7F;

/// A command set behind the primary commands: OSD-2 in Tessera, a RAM disk in tests.
pub trait CommandSet: Send + Sync + 'static {
    /// Peripheral device type for INQUIRY (0x11 = object-based storage).
    fn peripheral_device_type(&self) -> u8;
    fn identity(&self) -> DeviceIdentity;
    fn execute(&self, nexus: &Nexus, task: &ScsiTask) -> ScsiOutcome;
    /// See [`ScsiDevice::place_data_out`]; asked only for LUN 0 with no unit attention pending.
    fn place_data_out(&self, _nexus: &Nexus, _cdb: &[u8], _data_out_len: u64, _data_in_len: u32) -> Option<Box<dyn PlacedDataOut>> {
        None
    }
    /// Abort everything in progress (LOGICAL UNIT RESET).
    fn lun_reset(&self);
}

/// What INQUIRY reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// T10 vendor identification, up to 8 ASCII characters (space padded on the wire).
    pub vendor: String,
    /// Up to 16 characters.
    pub product: String,
    /// Up to 4 characters.
    pub revision: String,
    /// Unit serial number (VPD page 0x80), printable ASCII.
    pub serial: String,
}

impl DeviceIdentity {
    /// Tessera's identity for an OSD whose root information page reports `system_id` (OSD-2
    /// root attribute 0x3): the unit serial number is the system id in hex, so INQUIRY and
    /// the OSD attributes name the same device.
    pub fn from_system_id(system_id: &[u8]) -> Self {
        DeviceIdentity {
            vendor: "TESSERA".to_string(),
            product: "OSD-2 TARGET".to_string(),
            revision: env!("CARGO_PKG_VERSION").chars().filter(|c| *c != '.').take(4).collect(),
            serial: system_id.iter().map(|b| format!("{b:02X}")).collect(),
        }
    }

    /// NAA locally assigned (type 3) 64-bit identifier derived from the serial (FNV-1a), so it
    /// is stable across restarts of the same unit (SPC-4 §7.8.6.6.3).
    pub fn naa_id(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.vendor.bytes().chain(self.serial.bytes()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        (0x3u64 << 60) | (h >> 4)
    }
}

fn padded(s: &str, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = s.bytes().filter(|b| b.is_ascii_graphic() || *b == b' ').take(len).collect();
    v.resize(len, b' ');
    v
}

pub struct ScsiFront<C: CommandSet> {
    command_set: C,
    /// Every known nexus with its pending unit attention, if any (one condition each:
    /// power on / reset).
    unit_attention: Mutex<HashMap<Nexus, Option<Sense>>>,
}

impl<C: CommandSet> ScsiFront<C> {
    pub fn new(command_set: C) -> Self {
        ScsiFront { command_set, unit_attention: Mutex::new(HashMap::new()) }
    }

    pub fn command_set(&self) -> &C {
        &self.command_set
    }

    fn take_unit_attention(&self, nexus: &Nexus) -> Option<Sense> {
        self.unit_attention.lock().expect("unit attention lock poisoned").get_mut(nexus).and_then(Option::take)
    }

    fn inquiry(&self, cdb: &[u8], lun_ok: bool) -> ScsiOutcome {
        let evpd = cdb[1] & 0x01 != 0;
        let page = cdb[2];
        let alloc = u16::from_be_bytes([cdb[3], cdb[4]]) as usize;
        let pdt = if lun_ok { self.command_set.peripheral_device_type() & 0x1F } else { INQ_NO_LUN };
        let mut data = if !evpd {
            if page != 0 {
                return ScsiOutcome::check_condition(Sense::invalid_cdb_field(2));
            }
            self.standard_inquiry(pdt)
        } else if !lun_ok {
            return ScsiOutcome::check_condition(Sense::lun_not_supported());
        } else {
            match self.vpd_page(pdt, page) {
                Some(d) => d,
                None => return ScsiOutcome::check_condition(Sense::invalid_cdb_field(2)),
            }
        };
        data.truncate(alloc);
        ScsiOutcome::good(data)
    }

    fn standard_inquiry(&self, pdt: u8) -> Vec<u8> {
        let id = self.command_set.identity();
        let mut d = vec![0u8; 8];
        d[0] = pdt;
        d[2] = INQ_VERSION_SPC4;
        d[3] = INQ_FORMAT_HISUP;
        d[4] = (STD_INQUIRY_LEN - 5) as u8;
        d[7] = INQ_CMDQUE;
        d.extend(padded(&id.vendor, 8));
        d.extend(padded(&id.product, 16));
        d.extend(padded(&id.revision, 4));
        debug_assert_eq!(d.len(), STD_INQUIRY_LEN);
        d
    }

    fn vpd_page(&self, pdt: u8, page: u8) -> Option<Vec<u8>> {
        let id = self.command_set.identity();
        let body: Vec<u8> = match page {
            VPD_SUPPORTED_PAGES => vec![VPD_SUPPORTED_PAGES, VPD_UNIT_SERIAL, VPD_DEVICE_ID],
            VPD_UNIT_SERIAL => padded(&id.serial, id.serial.len().min(250)),
            VPD_DEVICE_ID => {
                let mut b = Vec::new();
                // NAA designator: binary code set 1, association LU, type 3.
                b.extend_from_slice(&[0x01, 0x03, 0x00, 0x08]);
                b.extend_from_slice(&id.naa_id().to_be_bytes());
                // T10 vendor ID designator: ASCII code set 2, association LU, type 1.
                let mut t10 = padded(&id.vendor, 8);
                t10.extend(padded(&id.serial, id.serial.len().min(200)));
                b.extend_from_slice(&[0x02, 0x01, 0x00, t10.len() as u8]);
                b.extend(t10);
                b
            }
            _ => return None,
        };
        let mut d = vec![pdt, page];
        d.extend_from_slice(&(body.len() as u16).to_be_bytes());
        d.extend(body);
        Some(d)
    }

    fn report_luns(&self, cdb: &[u8]) -> ScsiOutcome {
        if cdb.len() < 12 {
            return ScsiOutcome::check_condition(Sense::invalid_cdb_field(0));
        }
        let alloc = u32::from_be_bytes([cdb[6], cdb[7], cdb[8], cdb[9]]) as usize;
        // SPC-4 §6.33: an allocation length under 16 is an invalid field.
        if alloc < 16 {
            return ScsiOutcome::check_condition(Sense::invalid_cdb_field(6));
        }
        let luns = [LUN0];
        let mut d = Vec::with_capacity(8 + 8 * luns.len());
        d.extend_from_slice(&((8 * luns.len()) as u32).to_be_bytes());
        d.extend_from_slice(&[0u8; 4]);
        for l in luns {
            d.extend_from_slice(&encode_lun(l).to_be_bytes());
        }
        d.truncate(alloc);
        ScsiOutcome::good(d)
    }

    /// REQUEST SENSE returns the pending unit attention (clearing it) or NO SENSE, in
    /// descriptor or fixed format as the DESC bit asks.
    fn request_sense(&self, nexus: &Nexus, cdb: &[u8], lun_ok: bool) -> ScsiOutcome {
        let desc = cdb[1] & 0x01 != 0;
        let alloc = cdb[4] as usize;
        let sense = if !lun_ok {
            Sense::lun_not_supported()
        } else {
            self.take_unit_attention(nexus).unwrap_or(Sense::new(SenseKey::NoSense, 0, 0))
        };
        let mut d = if desc { sense.encode() } else { fixed_sense(&sense) };
        d.truncate(alloc);
        ScsiOutcome::good(d)
    }
}

/// Fixed-format sense (SPC-4 §4.5.3, response code 0x70), 18 bytes.
fn fixed_sense(s: &Sense) -> Vec<u8> {
    let mut d = vec![0u8; 18];
    d[0] = 0x70;
    d[2] = s.key as u8;
    d[7] = 10;
    d[12] = s.asc;
    d[13] = s.ascq;
    d
}

impl<C: CommandSet> ScsiDevice for ScsiFront<C> {
    fn luns(&self) -> Vec<u64> {
        vec![LUN0]
    }

    fn execute(&self, nexus: &Nexus, task: &ScsiTask<'_>) -> ScsiOutcome {
        let Some(&opcode) = task.cdb.first() else {
            return ScsiOutcome::check_condition(Sense::invalid_opcode());
        };
        // Every CDB we parse here is at least 6 bytes; the transport gives at least 16.
        if task.cdb.len() < 6 {
            return ScsiOutcome::check_condition(Sense::invalid_cdb_field(0));
        }
        let lun_ok = task.lun == LUN0;
        // SPC-4 §5.14: INQUIRY, REPORT LUNS and REQUEST SENSE neither report nor clear a unit
        // attention (REQUEST SENSE reports it as data).
        match opcode {
            OP_INQUIRY => return self.inquiry(task.cdb, lun_ok),
            OP_REPORT_LUNS => return self.report_luns(task.cdb),
            OP_REQUEST_SENSE => return self.request_sense(nexus, task.cdb, lun_ok),
            _ => {}
        }
        if !lun_ok {
            return ScsiOutcome::check_condition(Sense::lun_not_supported());
        }
        if let Some(ua) = self.take_unit_attention(nexus) {
            return ScsiOutcome::check_condition(ua);
        }
        match opcode {
            OP_TEST_UNIT_READY => ScsiOutcome::good(Vec::new()),
            _ => self.command_set.execute(nexus, task),
        }
    }

    fn place_data_out(&self, nexus: &Nexus, lun: u64, cdb: &[u8], data_out_len: u64, data_in_len: u32) -> Option<Box<dyn PlacedDataOut>> {
        let primary = matches!(cdb.first(), Some(&(OP_INQUIRY | OP_REPORT_LUNS | OP_REQUEST_SENSE | OP_TEST_UNIT_READY)));
        // A pending unit attention is the answer to the next command: `execute` reports it.
        let attention = || self.unit_attention.lock().expect("unit attention lock poisoned").get(nexus).is_some_and(Option::is_some);
        if lun != LUN0 || primary || cdb.len() < 6 || attention() {
            return None;
        }
        self.command_set.place_data_out(nexus, cdb, data_out_len, data_in_len)
    }

    fn lun_reset(&self, nexus: &Nexus, lun: u64) -> TmfResult {
        if lun != LUN0 {
            return TmfResult::LunDoesNotExist;
        }
        self.command_set.lun_reset();
        let mut ua = self.unit_attention.lock().expect("unit attention lock poisoned");
        for (n, s) in ua.iter_mut() {
            if n != nexus {
                *s = Some(Sense::power_on());
            }
        }
        TmfResult::FunctionComplete
    }

    fn nexus_added(&self, nexus: &Nexus) {
        self.unit_attention.lock().expect("unit attention lock poisoned").insert(nexus.clone(), Some(Sense::power_on()));
    }

    fn nexus_removed(&self, nexus: &Nexus) {
        self.unit_attention.lock().expect("unit attention lock poisoned").remove(nexus);
    }
}
