//! The 236-byte OSD-2 CDB (OSD-2 r05 §5.2.1, variable-length CDB of SPC-4 §4.2.3): byte
//! positions as named constants and raw big-endian field access. No validation happens here;
//! [`crate::decode`] turns the raw fields into a typed [`crate::Request`].
//!
//! ```text
//! 0        operation code 0x7F
//! 1        control
//! 2..6     reserved
//! 7        additional CDB length = 0xE4 (228)
//! 8..9     service action
//! 10       options: bit 4 DPO, bit 3 FUA, bits 2:0 isolation; FLUSH family: bits 1:0 scope
//! 11       bits 5:4 get/set attributes format; bit 6 LIST attributes; bit 0 REMOVE COLLECTION force
//! 12       timestamps control (0x00 update, 0x7F do not update)
//! 13       READ MAP (Tessera): requested map type
//! 14..15   reserved
//! 16..23   partition id
//! 24..31   user object id / collection id
//! 32..39   length / allocation length / formatted capacity / CREATE: number of objects (32..33)
//! 40..47   starting byte address / LIST: initial object id
//! 48..51   CDB continuation length / LIST: list identifier / READ MAP: allocation length
//! 52..79   get/set attribute parameters (page or list format, see below)
//! 80..183  capability (104 bytes)
//! 184..215 request integrity check value
//! 216..227 request nonce
//! 228..231 Data-In integrity check value offset (encoded)
//! 232..235 Data-Out integrity check value offset (encoded)
//! ```
//!
//! Attribute parameters, page format (byte 11 bits 5:4 = 10b) and list format (11b):
//!
//! ```text
//!        page format                      list format
//! 52     get attributes page              get list length
//! 56     get allocation length            get list offset (Data-Out, encoded)
//! 60     retrieved offset (Data-In, enc.) get allocation length
//! 64     set attribute page               retrieved attributes offset (Data-In, encoded)
//! 68     set attribute number             set list length
//! 72     set attribute length             set list offset (Data-Out, encoded)
//! 76     set value offset (Data-Out, enc) reserved
//! ```

pub const CDB_LEN: usize = 236;
pub const OPCODE: usize = 0;
pub const OPCODE_VARIABLE_LENGTH: u8 = 0x7F;
pub const CONTROL: usize = 1;
pub const ADDITIONAL_CDB_LEN: usize = 7;
pub const ADDITIONAL_CDB_LEN_VALUE: u8 = (CDB_LEN - 8) as u8;
pub const SERVICE_ACTION: usize = 8;
pub const OPTIONS: usize = SERVICE_ACTION + 2;
pub const ATTR_FORMAT: usize = OPTIONS + 1;
pub const TIMESTAMPS: usize = ATTR_FORMAT + 1;
pub const MAP_TYPE: usize = TIMESTAMPS + 1;
pub const PARTITION_ID: usize = 16;
pub const OBJECT_ID: usize = PARTITION_ID + 8;
pub const LENGTH: usize = OBJECT_ID + 8;
pub const START: usize = LENGTH + 8;
pub const CONTINUATION_LEN: usize = START + 8;
/// LIST / LIST COLLECTION reuse bytes 48..51.
pub const LIST_ID: usize = CONTINUATION_LEN;
/// READ MAP reuses bytes 48..51 (Tessera; READ MAP takes no continuation).
pub const READ_MAP_ALLOCATION_LEN: usize = CONTINUATION_LEN;
pub const ATTR_PARAMS: usize = CONTINUATION_LEN + 4;
pub const ATTR_PARAMS_LEN: usize = 28;
pub const CAPABILITY: usize = ATTR_PARAMS + ATTR_PARAMS_LEN;
pub const CAPABILITY_LEN: usize = 104;
pub const REQUEST_ICV: usize = CAPABILITY + CAPABILITY_LEN;
pub const REQUEST_ICV_LEN: usize = 32;
pub const REQUEST_NONCE: usize = REQUEST_ICV + REQUEST_ICV_LEN;
pub const REQUEST_NONCE_LEN: usize = 12;
pub const DATA_IN_ICV_OFFSET: usize = REQUEST_NONCE + REQUEST_NONCE_LEN;
pub const DATA_OUT_ICV_OFFSET: usize = DATA_IN_ICV_OFFSET + 4;

const _: () = assert!(OPTIONS == 10 && ATTR_FORMAT == 11 && TIMESTAMPS == 12 && MAP_TYPE == 13);
const _: () = assert!(OBJECT_ID == 24 && LENGTH == 32 && START == 40 && CONTINUATION_LEN == 48);
const _: () = assert!(ATTR_PARAMS == 52 && CAPABILITY == 80 && REQUEST_ICV == 184);
const _: () = assert!(REQUEST_NONCE == 216 && DATA_IN_ICV_OFFSET == 228);
const _: () = assert!(DATA_OUT_ICV_OFFSET + 4 == CDB_LEN);
const _: () = assert!(ADDITIONAL_CDB_LEN_VALUE == 0xE4);
const _: () = assert!(CDB_LEN <= tessera_types::limits::CDB_LEN_MAX);

/// CREATE: number of user objects, 2 bytes (Tessera's reading of r05; 0 means 1).
pub const CREATE_COUNT: usize = LENGTH;

/// Byte 10 bits.
pub const OPTION_DPO: u8 = 0x10;
pub const OPTION_FUA: u8 = 0x08;
pub const FLUSH_SCOPE_MASK: u8 = 0x03;

/// Byte 11 bits.
pub const ATTR_FORMAT_SHIFT: u8 = 4;
pub const ATTR_FORMAT_MASK: u8 = 0x30;
pub const LIST_WITH_ATTRS: u8 = 0x40;
pub const REMOVE_COLLECTION_FORCE: u8 = 0x01;

/// Byte 12 values.
pub const TIMESTAMPS_UPDATE: u8 = 0x00;
pub const TIMESTAMPS_DO_NOT_UPDATE: u8 = 0x7F;

/// Get/set attribute parameters, page format.
pub mod page {
    use super::ATTR_PARAMS;
    pub const GET_PAGE: usize = ATTR_PARAMS;
    pub const GET_ALLOCATION_LEN: usize = GET_PAGE + 4;
    pub const RETRIEVED_OFFSET: usize = GET_ALLOCATION_LEN + 4;
    pub const SET_PAGE: usize = RETRIEVED_OFFSET + 4;
    pub const SET_NUMBER: usize = SET_PAGE + 4;
    pub const SET_LEN: usize = SET_NUMBER + 4;
    pub const SET_VALUE_OFFSET: usize = SET_LEN + 4;
    const _: () = assert!(SET_VALUE_OFFSET + 4 == super::CAPABILITY);
}

/// Get/set attribute parameters, list format.
pub mod list {
    use super::ATTR_PARAMS;
    pub const GET_LIST_LEN: usize = ATTR_PARAMS;
    pub const GET_LIST_OFFSET: usize = GET_LIST_LEN + 4;
    pub const GET_ALLOCATION_LEN: usize = GET_LIST_OFFSET + 4;
    pub const RETRIEVED_OFFSET: usize = GET_ALLOCATION_LEN + 4;
    pub const SET_LIST_LEN: usize = RETRIEVED_OFFSET + 4;
    pub const SET_LIST_OFFSET: usize = SET_LIST_LEN + 4;
    const _: () = assert!(SET_LIST_OFFSET + 8 == super::CAPABILITY);
}

/// Byte 11 bits 5:4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrFormat {
    /// 00b: no attributes are got or set.
    None,
    /// 10b: one page got, one attribute set.
    Page,
    /// 11b: get and set lists in Data-Out.
    List,
}

impl AttrFormat {
    pub fn bits(self) -> u8 {
        match self {
            AttrFormat::None => 0,
            AttrFormat::Page => 0b10 << ATTR_FORMAT_SHIFT,
            AttrFormat::List => 0b11 << ATTR_FORMAT_SHIFT,
        }
    }

    /// `None` for 01b (one value in the CDB, OSD-1 style), which Tessera does not accept.
    pub fn from_byte(byte11: u8) -> Option<Self> {
        match (byte11 & ATTR_FORMAT_MASK) >> ATTR_FORMAT_SHIFT {
            0b00 => Some(AttrFormat::None),
            0b10 => Some(AttrFormat::Page),
            0b11 => Some(AttrFormat::List),
            _ => None,
        }
    }
}

/// A CDB known to be [`CDB_LEN`] bytes long; field reads cannot fail.
#[derive(Clone, Copy)]
pub struct RawCdb<'a>(&'a [u8; CDB_LEN]);

impl<'a> RawCdb<'a> {
    pub fn new(cdb: &'a [u8]) -> Option<Self> {
        cdb.try_into().ok().map(RawCdb)
    }

    pub fn u8(&self, at: usize) -> u8 {
        self.0[at]
    }

    pub fn u16(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.0[at], self.0[at + 1]])
    }

    pub fn u32(&self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.0[at..at + 4]);
        u32::from_be_bytes(b)
    }

    pub fn u64(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[at..at + 8]);
        u64::from_be_bytes(b)
    }

    pub fn bytes(&self, at: usize, len: usize) -> &'a [u8] {
        &self.0[at..at + len]
    }
}

/// Writes big-endian fields into a CDB being built.
pub(crate) fn put_u16(cdb: &mut [u8; CDB_LEN], at: usize, v: u16) {
    cdb[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u32(cdb: &mut [u8; CDB_LEN], at: usize, v: u32) {
    cdb[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u64(cdb: &mut [u8; CDB_LEN], at: usize, v: u64) {
    cdb[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// The security fields of a CDB (OSD-2 r05 §5.2.6, §4.11.2). Tessera sends zeros (NOSEC) until
/// the capability work fills them; the decoder leaves them to the security checker, which reads
/// them with [`SecurityFields::decode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityFields {
    pub capability: [u8; CAPABILITY_LEN],
    pub request_icv: [u8; REQUEST_ICV_LEN],
    pub request_nonce: [u8; REQUEST_NONCE_LEN],
    pub data_in_icv_offset: u32,
    pub data_out_icv_offset: u32,
}

impl Default for SecurityFields {
    fn default() -> Self {
        SecurityFields {
            capability: [0; CAPABILITY_LEN],
            request_icv: [0; REQUEST_ICV_LEN],
            request_nonce: [0; REQUEST_NONCE_LEN],
            data_in_icv_offset: crate::offset::OFFSET_UNUSED,
            data_out_icv_offset: crate::offset::OFFSET_UNUSED,
        }
    }
}

impl SecurityFields {
    pub fn decode(cdb: RawCdb<'_>) -> Self {
        let mut s = SecurityFields::default();
        s.capability.copy_from_slice(cdb.bytes(CAPABILITY, CAPABILITY_LEN));
        s.request_icv.copy_from_slice(cdb.bytes(REQUEST_ICV, REQUEST_ICV_LEN));
        s.request_nonce.copy_from_slice(cdb.bytes(REQUEST_NONCE, REQUEST_NONCE_LEN));
        s.data_in_icv_offset = cdb.u32(DATA_IN_ICV_OFFSET);
        s.data_out_icv_offset = cdb.u32(DATA_OUT_ICV_OFFSET);
        s
    }

    pub fn encode(&self, cdb: &mut [u8; CDB_LEN]) {
        cdb[CAPABILITY..CAPABILITY + CAPABILITY_LEN].copy_from_slice(&self.capability);
        cdb[REQUEST_ICV..REQUEST_ICV + REQUEST_ICV_LEN].copy_from_slice(&self.request_icv);
        cdb[REQUEST_NONCE..REQUEST_NONCE + REQUEST_NONCE_LEN].copy_from_slice(&self.request_nonce);
        put_u32(cdb, DATA_IN_ICV_OFFSET, self.data_in_icv_offset);
        put_u32(cdb, DATA_OUT_ICV_OFFSET, self.data_out_icv_offset);
    }
}
