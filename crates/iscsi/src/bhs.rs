//! The Basic Header Segment common to every PDU (RFC 7143 §11.2.1):
//!
//! ```text
//! 0      .I opcode(6)         1..3  opcode-specific (byte 1 bit 7 = F on most PDUs)
//! 4      TotalAHSLength (4-byte words)
//! 5..7   DataSegmentLength
//! 8..15  LUN or opcode-specific
//! 16..19 Initiator Task Tag
//! 20..47 opcode-specific
//! ```

use crate::bytes::{get_u24, get_u32};
use crate::error::DecodeError;

pub const BHS_LEN: usize = 48;
pub const OFF_OPCODE: usize = 0;
pub const OFF_FLAGS: usize = OFF_OPCODE + 1;
pub const OFF_TOTAL_AHS_LEN: usize = 4;
pub const OFF_DATA_SEGMENT_LEN: usize = OFF_TOTAL_AHS_LEN + 1;
pub const OFF_LUN: usize = OFF_DATA_SEGMENT_LEN + 3;
pub const OFF_ITT: usize = OFF_LUN + 8;
pub const OFF_TTT: usize = OFF_ITT + 4;
const _: () = assert!(OFF_ITT == 16 && OFF_TTT == 20 && BHS_LEN == 48);

/// Bit 6 of byte 0: immediate delivery (RFC 7143 §11.2.1.2).
pub const IMMEDIATE_BIT: u8 = 0x40;
pub const OPCODE_MASK: u8 = 0x3F;
/// Byte 1 bit 7: final PDU of a sequence.
pub const FINAL_BIT: u8 = 0x80;

/// The reserved tag value meaning "no task" / "no transfer".
pub const RESERVED_TAG: u32 = 0xFFFF_FFFF;

/// Opcodes (RFC 7143 §11.2.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    NopOut = 0x00,
    ScsiCommand = 0x01,
    TaskMgmtRequest = 0x02,
    LoginRequest = 0x03,
    TextRequest = 0x04,
    DataOut = 0x05,
    LogoutRequest = 0x06,
    Snack = 0x10,
    NopIn = 0x20,
    ScsiResponse = 0x21,
    TaskMgmtResponse = 0x22,
    LoginResponse = 0x23,
    TextResponse = 0x24,
    DataIn = 0x25,
    LogoutResponse = 0x26,
    R2t = 0x31,
    AsyncMessage = 0x32,
    Reject = 0x3F,
}

impl Opcode {
    pub fn from_byte(b: u8) -> Result<Opcode, DecodeError> {
        use Opcode::*;
        Ok(match b & OPCODE_MASK {
            0x00 => NopOut,
            0x01 => ScsiCommand,
            0x02 => TaskMgmtRequest,
            0x03 => LoginRequest,
            0x04 => TextRequest,
            0x05 => DataOut,
            0x06 => LogoutRequest,
            0x10 => Snack,
            0x20 => NopIn,
            0x21 => ScsiResponse,
            0x22 => TaskMgmtResponse,
            0x23 => LoginResponse,
            0x24 => TextResponse,
            0x25 => DataIn,
            0x26 => LogoutResponse,
            0x31 => R2t,
            0x32 => AsyncMessage,
            0x3F => Reject,
            other => return Err(DecodeError::Opcode(other)),
        })
    }

    /// Opcodes 0x00..0x1F travel initiator to target; 0x20..0x3F target to initiator.
    pub fn from_initiator(self) -> bool {
        (self as u8) < 0x20
    }
}

/// The fields every PDU shares, enough to frame it: how many AHS and data bytes follow the BHS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framing {
    /// The raw opcode byte (low 6 bits); may be an unknown opcode, which is a Reject, not a
    /// framing error.
    pub opcode_byte: u8,
    pub immediate: bool,
    pub total_ahs_len: usize,
    pub data_segment_len: u32,
    pub itt: u32,
}

impl Framing {
    pub fn parse(bhs: &[u8; BHS_LEN]) -> Framing {
        Framing {
            opcode_byte: bhs[OFF_OPCODE] & OPCODE_MASK,
            immediate: bhs[OFF_OPCODE] & IMMEDIATE_BIT != 0,
            total_ahs_len: bhs[OFF_TOTAL_AHS_LEN] as usize * 4,
            data_segment_len: get_u24(bhs, OFF_DATA_SEGMENT_LEN),
            itt: get_u32(bhs, OFF_ITT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_fields_at_rfc_offsets() {
        let mut b = [0u8; BHS_LEN];
        b[0] = 0x41; // immediate SCSI Command
        b[4] = 2; // 8 AHS bytes
        b[5..8].copy_from_slice(&[0x01, 0x02, 0x03]);
        b[16..20].copy_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
        let f = Framing::parse(&b);
        assert_eq!(f.opcode_byte, 0x01);
        assert!(f.immediate);
        assert_eq!(f.total_ahs_len, 8);
        assert_eq!(f.data_segment_len, 0x010203);
        assert_eq!(f.itt, 0xDEADBEEF);
        assert_eq!(Opcode::from_byte(0x3F).unwrap(), Opcode::Reject);
        assert_eq!(Opcode::from_byte(0x1C), Err(DecodeError::Opcode(0x1C)));
    }
}
