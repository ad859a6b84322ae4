//! Descriptor-format sense data (SPC-4 §4.5.2, response code 0x72) with the descriptors OSD-2
//! uses: sense-key specific (type 0x02, carries the field pointer), OSD object identification
//! (type 0x06, OSD-2 r05 §4.14.2.1) and OSD response integrity check value (type 0x07,
//! §4.14.2.2: 32 bytes under CMDRSP and ALLDATA, also returned with GOOD status).
//!
//! Layout of the fixed part:
//! ```text
//! 0     response code 0x72
//! 1     sense key (low nibble)
//! 2     ASC
//! 3     ASCQ
//! 4..7  reserved
//! 7     additional sense length (bytes after byte 7)
//! 8..   descriptors
//! ```

use thiserror::Error;

/// Length of the fixed part of descriptor sense.
pub const SENSE_HEADER_LEN: usize = 8;
const SENSE_KEY_SPECIFIC_TYPE: u8 = 0x02;
const SENSE_KEY_SPECIFIC_LEN: usize = 8;
const OSD_OBJECT_ID_TYPE: u8 = 0x06;
const OSD_OBJECT_ID_LEN: usize = 32;
const RESPONSE_ICV_TYPE: u8 = 0x07;
pub const RESPONSE_ICV_LEN: usize = 32;
/// The longest sense [`Sense::encoded`] writes: the header and every descriptor it knows.
pub const SENSE_MAX: usize = SENSE_HEADER_LEN + SENSE_KEY_SPECIFIC_LEN + OSD_OBJECT_ID_LEN + 2 + RESPONSE_ICV_LEN;

/// Encoded descriptor sense, on the stack.
#[derive(Clone, Copy)]
pub struct EncodedSense {
    bytes: [u8; SENSE_MAX],
    len: usize,
}

impl EncodedSense {
    fn extend_from_slice(&mut self, more: &[u8]) {
        self.bytes[self.len..self.len + more.len()].copy_from_slice(more);
        self.len += more.len();
    }
}

impl std::ops::Deref for EncodedSense {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenseKey {
    NoSense = 0x0,
    RecoveredError = 0x1,
    NotReady = 0x2,
    MediumError = 0x3,
    HardwareError = 0x4,
    IllegalRequest = 0x5,
    UnitAttention = 0x6,
    DataProtect = 0x7,
    AbortedCommand = 0xB,
    Miscompare = 0xE,
}

impl SenseKey {
    pub fn from_nibble(v: u8) -> Option<Self> {
        Some(match v & 0x0F {
            0x0 => SenseKey::NoSense,
            0x1 => SenseKey::RecoveredError,
            0x2 => SenseKey::NotReady,
            0x3 => SenseKey::MediumError,
            0x4 => SenseKey::HardwareError,
            0x5 => SenseKey::IllegalRequest,
            0x6 => SenseKey::UnitAttention,
            0x7 => SenseKey::DataProtect,
            0xB => SenseKey::AbortedCommand,
            0xE => SenseKey::Miscompare,
            _ => return None,
        })
    }
}

/// Where in the CDB or parameter data the offending field is (SPC-4 §4.5.2.4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldPointer {
    /// True when the field is in the CDB, false when in the Data-Out parameter data.
    pub in_cdb: bool,
    /// Byte offset of the field.
    pub byte: u16,
    /// Bit within the byte, when the field does not start on a byte boundary.
    pub bit: Option<u8>,
}

impl FieldPointer {
    pub fn cdb(byte: u16) -> Self {
        FieldPointer { in_cdb: true, byte, bit: None }
    }

    pub fn data(byte: u16) -> Self {
        FieldPointer { in_cdb: false, byte, bit: None }
    }
}

/// OSD object identification descriptor (OSD-2 r05 §4.14.2.1): which object and which command
/// functions were not initiated / completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OsdObjectSense {
    pub not_initiated_functions: u32,
    pub completed_functions: u32,
    pub partition_id: u64,
    pub object_id: u64,
}

/// Decoded or to-be-encoded sense data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sense {
    pub key: SenseKey,
    pub asc: u8,
    pub ascq: u8,
    pub field_pointer: Option<FieldPointer>,
    pub osd_object: Option<OsdObjectSense>,
    /// The OSD response integrity check value (CMDRSP, ALLDATA).
    pub response_icv: Option<[u8; RESPONSE_ICV_LEN]>,
}

impl Sense {
    pub fn new(key: SenseKey, asc: u8, ascq: u8) -> Self {
        Sense { key, asc, ascq, field_pointer: None, osd_object: None, response_icv: None }
    }

    pub fn with_field(mut self, field: FieldPointer) -> Self {
        self.field_pointer = Some(field);
        self
    }

    pub fn with_object(mut self, object: OsdObjectSense) -> Self {
        self.osd_object = Some(object);
        self
    }

    pub fn with_response_icv(mut self, icv: [u8; RESPONSE_ICV_LEN]) -> Self {
        self.response_icv = Some(icv);
        self
    }

    /// ASC and ASCQ as one number, as the design notes write them (e.g. 0x2400).
    pub fn asc_ascq(&self) -> u16 {
        u16::from_be_bytes([self.asc, self.ascq])
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN CDB (24/00) pointing at a CDB byte.
    pub fn invalid_cdb_field(byte: u16) -> Self {
        Sense::new(SenseKey::IllegalRequest, 0x24, 0x00).with_field(FieldPointer::cdb(byte))
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST (26/00) pointing at a Data-Out byte.
    pub fn invalid_param_field(byte: u16) -> Self {
        Sense::new(SenseKey::IllegalRequest, 0x26, 0x00).with_field(FieldPointer::data(byte))
    }

    /// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE (20/00).
    pub fn invalid_opcode() -> Self {
        Sense::new(SenseKey::IllegalRequest, 0x20, 0x00).with_field(FieldPointer::cdb(0))
    }

    /// ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED (25/00).
    pub fn lun_not_supported() -> Self {
        Sense::new(SenseKey::IllegalRequest, 0x25, 0x00)
    }

    /// UNIT ATTENTION, POWER ON, RESET, OR BUS DEVICE RESET OCCURRED (29/00).
    pub fn power_on() -> Self {
        Sense::new(SenseKey::UnitAttention, 0x29, 0x00)
    }

    pub fn encode(&self) -> Vec<u8> {
        self.encoded().to_vec()
    }

    /// [`Sense::encode`] without an allocation (the target encodes one per answer under
    /// CMDRSP, where every answer carries its response integrity value here).
    pub fn encoded(&self) -> EncodedSense {
        let mut out = EncodedSense { bytes: [0; SENSE_MAX], len: SENSE_HEADER_LEN };
        out.bytes[0] = 0x72;
        out.bytes[1] = self.key as u8;
        out.bytes[2] = self.asc;
        out.bytes[3] = self.ascq;
        if let Some(fp) = self.field_pointer {
            let mut d = [0u8; SENSE_KEY_SPECIFIC_LEN];
            d[0] = SENSE_KEY_SPECIFIC_TYPE;
            d[1] = (SENSE_KEY_SPECIFIC_LEN - 2) as u8;
            // byte 4: SKSV(7) C/D(6) BPV(3) bit pointer(2:0)
            let mut b = 0x80;
            if fp.in_cdb {
                b |= 0x40;
            }
            if let Some(bit) = fp.bit {
                b |= 0x08 | (bit & 0x07);
            }
            d[4] = b;
            d[5..7].copy_from_slice(&fp.byte.to_be_bytes());
            out.extend_from_slice(&d);
        }
        if let Some(o) = self.osd_object {
            let mut d = [0u8; OSD_OBJECT_ID_LEN];
            d[0] = OSD_OBJECT_ID_TYPE;
            d[1] = (OSD_OBJECT_ID_LEN - 2) as u8;
            d[8..12].copy_from_slice(&o.not_initiated_functions.to_be_bytes());
            d[12..16].copy_from_slice(&o.completed_functions.to_be_bytes());
            d[16..24].copy_from_slice(&o.partition_id.to_be_bytes());
            d[24..32].copy_from_slice(&o.object_id.to_be_bytes());
            out.extend_from_slice(&d);
        }
        if let Some(icv) = self.response_icv {
            out.extend_from_slice(&[RESPONSE_ICV_TYPE, RESPONSE_ICV_LEN as u8]);
            out.extend_from_slice(&icv);
        }
        out.bytes[7] = (out.len - SENSE_HEADER_LEN) as u8;
        out
    }

    /// Decodes descriptor (0x72/0x73) or fixed (0x70/0x71) sense. Unknown descriptors are
    /// skipped; lengths are checked before every read.
    pub fn decode(bytes: &[u8]) -> Result<Sense, SenseDecodeError> {
        let code = *bytes.first().ok_or(SenseDecodeError::Truncated)? & 0x7F;
        match code {
            0x72 | 0x73 => Self::decode_descriptor(bytes),
            0x70 | 0x71 => Self::decode_fixed(bytes),
            other => Err(SenseDecodeError::ResponseCode(other)),
        }
    }

    fn decode_descriptor(bytes: &[u8]) -> Result<Sense, SenseDecodeError> {
        if bytes.len() < SENSE_HEADER_LEN {
            return Err(SenseDecodeError::Truncated);
        }
        let key = SenseKey::from_nibble(bytes[1]).ok_or(SenseDecodeError::SenseKey(bytes[1] & 0x0F))?;
        let mut sense = Sense::new(key, bytes[2], bytes[3]);
        let additional = bytes[7] as usize;
        let end = (SENSE_HEADER_LEN + additional).min(bytes.len());
        let mut at = SENSE_HEADER_LEN;
        while at + 2 <= end {
            let kind = bytes[at];
            let len = bytes[at + 1] as usize + 2;
            if at + len > end {
                return Err(SenseDecodeError::Truncated);
            }
            let d = &bytes[at..at + len];
            match kind {
                SENSE_KEY_SPECIFIC_TYPE if len >= SENSE_KEY_SPECIFIC_LEN && d[4] & 0x80 != 0 => {
                    let bit = if d[4] & 0x08 != 0 { Some(d[4] & 0x07) } else { None };
                    sense.field_pointer = Some(FieldPointer {
                        in_cdb: d[4] & 0x40 != 0,
                        byte: u16::from_be_bytes([d[5], d[6]]),
                        bit,
                    });
                }
                OSD_OBJECT_ID_TYPE if len >= OSD_OBJECT_ID_LEN => {
                    sense.osd_object = Some(OsdObjectSense {
                        not_initiated_functions: u32::from_be_bytes(d[8..12].try_into().unwrap()),
                        completed_functions: u32::from_be_bytes(d[12..16].try_into().unwrap()),
                        partition_id: u64::from_be_bytes(d[16..24].try_into().unwrap()),
                        object_id: u64::from_be_bytes(d[24..32].try_into().unwrap()),
                    });
                }
                RESPONSE_ICV_TYPE if len >= 2 + RESPONSE_ICV_LEN => {
                    let mut icv = [0u8; RESPONSE_ICV_LEN];
                    icv.copy_from_slice(&d[2..2 + RESPONSE_ICV_LEN]);
                    sense.response_icv = Some(icv);
                }
                _ => {}
            }
            at += len;
        }
        Ok(sense)
    }

    fn decode_fixed(bytes: &[u8]) -> Result<Sense, SenseDecodeError> {
        if bytes.len() < 14 {
            return Err(SenseDecodeError::Truncated);
        }
        let key = SenseKey::from_nibble(bytes[2]).ok_or(SenseDecodeError::SenseKey(bytes[2] & 0x0F))?;
        let mut sense = Sense::new(key, bytes[12], bytes[13]);
        if bytes.len() >= 18 && bytes[15] & 0x80 != 0 {
            sense.field_pointer = Some(FieldPointer {
                in_cdb: bytes[15] & 0x40 != 0,
                byte: u16::from_be_bytes([bytes[16], bytes[17]]),
                bit: if bytes[15] & 0x08 != 0 { Some(bytes[15] & 0x07) } else { None },
            });
        }
        Ok(sense)
    }
}

impl std::fmt::Display for Sense {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ASC/ASCQ {:02X}{:02X}", self.key, self.asc, self.ascq)?;
        if let Some(fp) = self.field_pointer {
            let place = if fp.in_cdb { "CDB" } else { "parameter data" };
            write!(f, " at {place} byte {}", fp.byte)?;
        }
        match (self.asc, self.ascq, self.field_pointer) {
            // The OSD CDB's partition and object ids (OSD-2 r05 §5.2.1): a refusal pointing at
            // one of them says that object does not exist.
            (0x24, 0x00, Some(FieldPointer { in_cdb: true, byte: 16, .. })) => write!(f, " (invalid field in CDB: the partition id; no such partition)"),
            (0x24, 0x00, Some(FieldPointer { in_cdb: true, byte: 24, .. })) => write!(f, " (invalid field in CDB: the object id; no such object)"),
            _ => match meaning(self.asc, self.ascq) {
                Some(words) => write!(f, " ({words})"),
                None => Ok(()),
            },
        }
    }
}

/// What the additional sense codes a person most often meets from an OSD mean (SPC-4 Annex
/// D, OSD-2 §4.14), in words.
fn meaning(asc: u8, ascq: u8) -> Option<&'static str> {
    Some(match (asc, ascq) {
        (0x27, 0x07) => "space allocation failed: the OSD's disk is full",
        (0x55, 0x07) => "quota error: past an object's length limit or a capacity quota",
        (0x44, 0x00) => "internal target failure: see the OSD's log",
        (0x24, 0x00) => "invalid field in CDB",
        (0x26, 0x00) => "invalid field in parameter list",
        (0x3B, 0x17) => "read past the end of the object",
        (0x24, 0x06) => "nonce not unique",
        (0x24, 0x07) => "nonce timestamp out of range",
        (0x26, 0x0F) => "data integrity check failed",
        (0x2C, 0x0A) => "the partition or collection is not empty",
        (0x11, 0x00) => "unrecovered read error",
        (0x0C, 0x00) => "write error",
        _ => return None,
    })
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SenseDecodeError {
    #[error("sense data truncated")]
    Truncated,
    #[error("unknown sense response code {0:#04x}")]
    ResponseCode(u8),
    #[error("reserved sense key {0:#x}")]
    SenseKey(u8),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Goal: a refusal pointing at the OSD CDB's partition or object id reads as "no such
    /// object", and one pointing elsewhere (the request ICV) does not.
    #[test]
    fn a_refused_id_reads_as_no_such_object() {
        assert!(Sense::invalid_cdb_field(24).to_string().ends_with("at CDB byte 24 (invalid field in CDB: the object id; no such object)"));
        assert!(Sense::invalid_cdb_field(16).to_string().contains("no such partition"));
        let icv = Sense::invalid_cdb_field(184).to_string();
        assert!(icv.ends_with("at CDB byte 184 (invalid field in CDB)"), "{icv}");
        assert!(!Sense::invalid_param_field(24).to_string().contains("no such"));
    }

    #[test]
    fn invalid_field_round_trips_with_pointer() {
        let s = Sense::invalid_cdb_field(40);
        let bytes = s.encode();
        assert_eq!(bytes[0], 0x72);
        assert_eq!(bytes[1], 0x05);
        assert_eq!(&bytes[2..4], &[0x24, 0x00]);
        assert_eq!(bytes[7] as usize, bytes.len() - 8);
        assert_eq!(Sense::decode(&bytes).unwrap(), s);
    }

    #[test]
    fn osd_object_descriptor_round_trips() {
        let s = Sense::new(SenseKey::IllegalRequest, 0x2C, 0x0A).with_object(OsdObjectSense {
            not_initiated_functions: 1,
            completed_functions: 0,
            partition_id: 0x10000,
            object_id: 0,
        });
        assert_eq!(Sense::decode(&s.encode()).unwrap(), s);
    }

    #[test]
    fn response_icv_descriptor_round_trips() {
        let s = Sense::new(SenseKey::NoSense, 0, 0).with_response_icv([0xA5; 32]);
        let bytes = s.encode();
        assert_eq!(&bytes[8..10], &[0x07, 32]);
        assert_eq!(bytes.len(), 8 + 34);
        assert_eq!(Sense::decode(&bytes).unwrap(), s);
        let both = Sense::invalid_cdb_field(82).with_response_icv([1; 32]);
        assert_eq!(Sense::decode(&both.encode()).unwrap(), both);
    }

    /// Goal: the stack encoding holds every descriptor at once. Method: a sense with all of
    /// them fills `SENSE_MAX` exactly and decodes back.
    #[test]
    fn every_descriptor_fits_the_stack_encoding() {
        let mut s = Sense::invalid_cdb_field(82).with_response_icv([9; 32]);
        s.osd_object = Some(OsdObjectSense { not_initiated_functions: 1, completed_functions: 2, partition_id: 3, object_id: 4 });
        assert_eq!(s.encoded().len(), SENSE_MAX);
        assert_eq!(Sense::decode(&s.encoded()).unwrap(), s);
        assert_eq!(&*s.encoded(), &s.encode()[..]);
    }

    proptest! {
        /// Sense decoding takes arbitrary bytes without panicking, and whatever decodes
        /// re-encodes to the same sense (the body of fuzz/fuzz_targets/scsi_sense.rs).
        #[test]
        fn decode_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(sense) = Sense::decode(&bytes) {
                prop_assert_eq!(Sense::decode(&sense.encode()).unwrap(), sense);
            }
        }
    }
}
