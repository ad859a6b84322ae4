//! Data-Out (RFC 7143 §11.7), Data-In (§11.7) and Ready To Transfer (§11.8) headers.
//!
//! ```text
//!         Data-Out            Data-In                      R2T
//! 1       F                   F A . . . O U S              1 (F)
//! 3       -                   Status (when S)              -
//! 8..15   LUN                 LUN                          LUN
//! 16..19  ITT                 ITT                          ITT
//! 20..23  TTT                 TTT                          TTT
//! 24..27  -                   StatSN (when S)              StatSN
//! 28..31  ExpStatSN           ExpCmdSN                     ExpCmdSN
//! 32..35  -                   MaxCmdSN                     MaxCmdSN
//! 36..39  DataSN              DataSN                       R2TSN
//! 40..43  Buffer Offset       Buffer Offset                Buffer Offset
//! 44..47  -                   Residual Count               Desired Data Transfer Length
//! ```

use crate::bhs::*;
use crate::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::error::DecodeError;

const OFF_STAT_SN: usize = 24;
const OFF_EXP_STAT_SN: usize = OFF_STAT_SN + 4;
const OFF_EXP_CMD_SN: usize = OFF_STAT_SN + 4;
const OFF_MAX_CMD_SN: usize = OFF_EXP_CMD_SN + 4;
const OFF_DATA_SN: usize = OFF_MAX_CMD_SN + 4;
const OFF_BUFFER_OFFSET: usize = OFF_DATA_SN + 4;
const OFF_LAST_WORD: usize = OFF_BUFFER_OFFSET + 4;
const _: () = assert!(OFF_LAST_WORD + 4 == BHS_LEN);
const OFF_STATUS: usize = 3;
const DIN_ACK: u8 = 0x40;
const DIN_OVERFLOW: u8 = 0x04;
const DIN_UNDERFLOW: u8 = 0x02;
const DIN_STATUS: u8 = 0x01;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataOut {
    pub final_bit: bool,
    pub lun: u64,
    pub itt: u32,
    /// [`RESERVED_TAG`] for unsolicited data; the R2T's tag otherwise.
    pub ttt: u32,
    pub exp_stat_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
}

impl DataOut {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(DataOut {
            final_bit: b[OFF_FLAGS] & FINAL_BIT != 0,
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            ttt: get_u32(b, OFF_TTT),
            exp_stat_sn: get_u32(b, OFF_EXP_STAT_SN),
            data_sn: get_u32(b, OFF_DATA_SN),
            buffer_offset: get_u32(b, OFF_BUFFER_OFFSET),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::DataOut as u8;
        b[OFF_FLAGS] = if self.final_bit { FINAL_BIT } else { 0 };
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_TTT, self.ttt);
        put_u32(b, OFF_EXP_STAT_SN, self.exp_stat_sn);
        put_u32(b, OFF_DATA_SN, self.data_sn);
        put_u32(b, OFF_BUFFER_OFFSET, self.buffer_offset);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataIn {
    pub final_bit: bool,
    pub acknowledge: bool,
    pub overflow: bool,
    pub underflow: bool,
    /// The SCSI status, present when the S bit is set (status rides on this PDU).
    pub status: Option<u8>,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    /// Valid only with a status.
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
    pub residual_count: u32,
}

impl DataIn {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        let f = b[OFF_FLAGS];
        let has_status = f & DIN_STATUS != 0;
        if has_status && f & FINAL_BIT == 0 {
            return Err(DecodeError::Field("Data-In S bit without F bit"));
        }
        if f & DIN_OVERFLOW != 0 && f & DIN_UNDERFLOW != 0 {
            return Err(DecodeError::Field("both residual overflow and underflow"));
        }
        Ok(DataIn {
            final_bit: f & FINAL_BIT != 0,
            acknowledge: f & DIN_ACK != 0,
            overflow: f & DIN_OVERFLOW != 0,
            underflow: f & DIN_UNDERFLOW != 0,
            status: has_status.then_some(b[OFF_STATUS]),
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            ttt: get_u32(b, OFF_TTT),
            stat_sn: get_u32(b, OFF_STAT_SN),
            exp_cmd_sn: get_u32(b, OFF_EXP_CMD_SN),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
            data_sn: get_u32(b, OFF_DATA_SN),
            buffer_offset: get_u32(b, OFF_BUFFER_OFFSET),
            residual_count: get_u32(b, OFF_LAST_WORD),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::DataIn as u8;
        b[OFF_FLAGS] = (if self.final_bit || self.status.is_some() { FINAL_BIT } else { 0 })
            | (if self.acknowledge { DIN_ACK } else { 0 })
            | (if self.overflow { DIN_OVERFLOW } else { 0 })
            | (if self.underflow { DIN_UNDERFLOW } else { 0 })
            | (if self.status.is_some() { DIN_STATUS } else { 0 });
        b[OFF_STATUS] = self.status.unwrap_or(0);
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_TTT, self.ttt);
        put_u32(b, OFF_STAT_SN, self.stat_sn);
        put_u32(b, OFF_EXP_CMD_SN, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
        put_u32(b, OFF_DATA_SN, self.data_sn);
        put_u32(b, OFF_BUFFER_OFFSET, self.buffer_offset);
        put_u32(b, OFF_LAST_WORD, self.residual_count);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct R2t {
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub r2t_sn: u32,
    pub buffer_offset: u32,
    pub desired_data_transfer_length: u32,
}

impl R2t {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        let r = R2t {
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            ttt: get_u32(b, OFF_TTT),
            stat_sn: get_u32(b, OFF_STAT_SN),
            exp_cmd_sn: get_u32(b, OFF_EXP_CMD_SN),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
            r2t_sn: get_u32(b, OFF_DATA_SN),
            buffer_offset: get_u32(b, OFF_BUFFER_OFFSET),
            desired_data_transfer_length: get_u32(b, OFF_LAST_WORD),
        };
        if r.desired_data_transfer_length == 0 || r.ttt == RESERVED_TAG {
            return Err(DecodeError::Field("R2T with zero length or reserved tag"));
        }
        Ok(r)
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::R2t as u8;
        b[OFF_FLAGS] = FINAL_BIT;
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_TTT, self.ttt);
        put_u32(b, OFF_STAT_SN, self.stat_sn);
        put_u32(b, OFF_EXP_CMD_SN, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
        put_u32(b, OFF_DATA_SN, self.r2t_sn);
        put_u32(b, OFF_BUFFER_OFFSET, self.buffer_offset);
        put_u32(b, OFF_LAST_WORD, self.desired_data_transfer_length);
    }
}
