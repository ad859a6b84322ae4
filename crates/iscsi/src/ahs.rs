//! Additional Header Segments (RFC 7143 §11.2.2) of a SCSI Command:
//!
//! ```text
//! 0..1  AHSLength (bytes of the AHS-specific field, from byte 3, without padding)
//! 2     AHSType: 1 = Extended CDB (§11.2.2.3), 2 = Bidirectional Read Expected Data
//!       Transfer Length (§11.2.2.4)
//! 3..   AHS-specific (first byte reserved in both types), padded to 4 bytes
//! ```

use tessera_types::limits::{AHS_LEN_MAX, CDB_LEN_MAX};

use crate::bytes::{get_u16, get_u32, pad_len, put_u16, put_u32};
use crate::error::DecodeError;

pub const AHS_TYPE_EXTENDED_CDB: u8 = 1;
pub const AHS_TYPE_BIDI_READ_LEN: u8 = 2;
const OFF_AHS_LEN: usize = 0;
const OFF_AHS_TYPE: usize = OFF_AHS_LEN + 2;
const OFF_AHS_SPECIFIC: usize = OFF_AHS_TYPE + 1;
/// The bidirectional AHS: AHSLength 5 = reserved byte + 4-byte length.
const BIDI_AHS_LEN_FIELD: u16 = 5;
/// CDB bytes that fit in the BHS; longer CDBs continue in an Extended CDB AHS.
pub const BHS_CDB_LEN: usize = 16;

/// The AHS content a SCSI Command may carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandAhs {
    /// CDB bytes beyond the first 16.
    pub extended_cdb: Option<Vec<u8>>,
    pub bidi_read_len: Option<u32>,
}

impl CommandAhs {
    /// Parses every AHS in `ahs` (the whole TotalAHSLength region). Unknown AHS types are a
    /// field error: RFC 7143 defines no others.
    pub fn decode(ahs: &[u8]) -> Result<CommandAhs, DecodeError> {
        if ahs.len() > AHS_LEN_MAX {
            return Err(DecodeError::Ahs("total AHS length over limit"));
        }
        let mut out = CommandAhs::default();
        let mut at = 0;
        while at < ahs.len() {
            if ahs.len() - at < OFF_AHS_SPECIFIC + 1 {
                return Err(DecodeError::Ahs("AHS header truncated"));
            }
            let len = get_u16(ahs, at + OFF_AHS_LEN) as usize;
            let kind = ahs[at + OFF_AHS_TYPE];
            let body_start = at + OFF_AHS_SPECIFIC;
            let body_end = body_start.checked_add(len).filter(|e| *e <= ahs.len());
            let body_end = body_end.ok_or(DecodeError::Ahs("AHS length beyond TotalAHSLength"))?;
            if len == 0 {
                return Err(DecodeError::Ahs("empty AHS"));
            }
            // The first AHS-specific byte is reserved in both defined types.
            let body = &ahs[body_start + 1..body_end];
            match kind {
                AHS_TYPE_EXTENDED_CDB => {
                    if out.extended_cdb.is_some() || body.is_empty() {
                        return Err(DecodeError::Ahs("duplicate or empty extended CDB"));
                    }
                    if BHS_CDB_LEN + body.len() > CDB_LEN_MAX {
                        return Err(DecodeError::CdbLength(BHS_CDB_LEN + body.len()));
                    }
                    out.extended_cdb = Some(body.to_vec());
                }
                AHS_TYPE_BIDI_READ_LEN => {
                    if len != BIDI_AHS_LEN_FIELD as usize || out.bidi_read_len.is_some() {
                        return Err(DecodeError::Ahs("bad bidirectional AHS"));
                    }
                    out.bidi_read_len = Some(get_u32(body, 0));
                }
                _ => return Err(DecodeError::Ahs("unknown AHS type")),
            }
            at = body_end + pad_len(len + OFF_AHS_SPECIFIC);
        }
        Ok(out)
    }

    /// Bytes `encode` will write (a multiple of 4).
    pub fn encoded_len(&self) -> usize {
        let mut n = 0;
        if let Some(ext) = &self.extended_cdb {
            let l = OFF_AHS_SPECIFIC + 1 + ext.len();
            n += l + pad_len(l);
        }
        if self.bidi_read_len.is_some() {
            n += OFF_AHS_SPECIFIC + BIDI_AHS_LEN_FIELD as usize;
            n += pad_len(OFF_AHS_SPECIFIC + BIDI_AHS_LEN_FIELD as usize);
        }
        n
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        if let Some(ext) = &self.extended_cdb {
            let mut h = [0u8; OFF_AHS_SPECIFIC + 1];
            put_u16(&mut h, OFF_AHS_LEN, (ext.len() + 1) as u16);
            h[OFF_AHS_TYPE] = AHS_TYPE_EXTENDED_CDB;
            out.extend_from_slice(&h);
            out.extend_from_slice(ext);
            out.resize(out.len() + pad_len(h.len() + ext.len()), 0);
        }
        if let Some(len) = self.bidi_read_len {
            let mut h = [0u8; OFF_AHS_SPECIFIC + BIDI_AHS_LEN_FIELD as usize];
            put_u16(&mut h, OFF_AHS_LEN, BIDI_AHS_LEN_FIELD);
            h[OFF_AHS_TYPE] = AHS_TYPE_BIDI_READ_LEN;
            put_u32(&mut h, OFF_AHS_SPECIFIC + 1, len);
            out.extend_from_slice(&h);
        }
        debug_assert_eq!(out.len() % 4, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_ahs_bytes() {
        let a = CommandAhs { extended_cdb: None, bidi_read_len: Some(0x1234) };
        let mut out = Vec::new();
        a.encode(&mut out);
        assert_eq!(out, [0x00, 0x05, 0x02, 0x00, 0x00, 0x00, 0x12, 0x34]);
        assert_eq!(CommandAhs::decode(&out).unwrap(), a);
    }

    #[test]
    fn extended_cdb_ahs_bytes() {
        // A 20-byte CDB: 4 bytes continue in the AHS; AHSLength = 5 (reserved + 4).
        let a = CommandAhs { extended_cdb: Some(vec![1, 2, 3, 4]), bidi_read_len: None };
        let mut out = Vec::new();
        a.encode(&mut out);
        assert_eq!(out, [0x00, 0x05, 0x01, 0x00, 1, 2, 3, 4]);
        assert_eq!(a.encoded_len(), out.len());
        assert_eq!(CommandAhs::decode(&out).unwrap(), a);
    }

    #[test]
    fn rejects_lengths_past_end() {
        assert!(CommandAhs::decode(&[0x00, 0x09, 0x01, 0x00, 1, 2, 3, 4]).is_err());
        assert!(CommandAhs::decode(&[0x00, 0x05, 0x07, 0x00, 1, 2, 3, 4]).is_err());
    }
}
