//! SCSI Command (RFC 7143 §11.3) and SCSI Response (§11.4) headers.
//!
//! SCSI Command BHS:
//! ```text
//! 0 .I 0x01   1 F R W . . ATTR(3)   4 TotalAHSLength   5..7 DataSegmentLength
//! 8..15 LUN   16..19 ITT   20..23 Expected Data Transfer Length   24..27 CmdSN
//! 28..31 ExpStatSN   32..47 CDB (first 16 bytes; the rest in an Extended CDB AHS)
//! ```
//! SCSI Response BHS:
//! ```text
//! 1 1 . . o u O U .   2 Response   3 Status   16..19 ITT   20..23 SNACK Tag   24..27 StatSN
//! 28..31 ExpCmdSN   32..35 MaxCmdSN   36..39 ExpDataSN   40..43 Bidirectional Read Residual
//! Count   44..47 Residual Count
//! ```

use tessera_types::limits::CDB_LEN_MAX;

use crate::ahs::{CommandAhs, BHS_CDB_LEN};
use crate::bhs::*;
use crate::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::error::DecodeError;

const CMD_READ_BIT: u8 = 0x40;
const CMD_WRITE_BIT: u8 = 0x20;
const CMD_ATTR_MASK: u8 = 0x07;
const OFF_EDTL: usize = OFF_TTT;
const OFF_CMD_SN: usize = OFF_EDTL + 4;
const OFF_EXP_STAT_SN: usize = OFF_CMD_SN + 4;
const OFF_CDB: usize = OFF_EXP_STAT_SN + 4;
const _: () = assert!(OFF_CDB + BHS_CDB_LEN == BHS_LEN);

/// Task attribute "Simple" (RFC 7143 §11.3.1.3).
pub const TASK_ATTR_SIMPLE: u8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScsiCommand {
    pub immediate: bool,
    /// No unsolicited Data-Out PDUs follow this command.
    pub final_bit: bool,
    pub read: bool,
    pub write: bool,
    pub task_attr: u8,
    pub lun: u64,
    pub itt: u32,
    pub expected_data_transfer_length: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    /// The whole CDB, at least 16 bytes (the BHS field is zero-padded).
    pub cdb: Vec<u8>,
    pub bidi_read_len: Option<u32>,
}

impl ScsiCommand {
    pub fn decode(b: &[u8; BHS_LEN], ahs: &[u8]) -> Result<Self, DecodeError> {
        let extra = CommandAhs::decode(ahs)?;
        let mut cdb = b[OFF_CDB..].to_vec();
        if let Some(ext) = extra.extended_cdb {
            cdb.extend_from_slice(&ext);
        }
        let flags = b[OFF_FLAGS];
        Ok(ScsiCommand {
            immediate: b[OFF_OPCODE] & IMMEDIATE_BIT != 0,
            final_bit: flags & FINAL_BIT != 0,
            read: flags & CMD_READ_BIT != 0,
            write: flags & CMD_WRITE_BIT != 0,
            task_attr: flags & CMD_ATTR_MASK,
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            expected_data_transfer_length: get_u32(b, OFF_EDTL),
            cmd_sn: get_u32(b, OFF_CMD_SN),
            exp_stat_sn: get_u32(b, OFF_EXP_STAT_SN),
            cdb,
            bidi_read_len: extra.bidi_read_len,
        })
    }

    pub fn ahs(&self) -> CommandAhs {
        CommandAhs {
            extended_cdb: (self.cdb.len() > BHS_CDB_LEN).then(|| self.cdb[BHS_CDB_LEN..].to_vec()),
            bidi_read_len: self.bidi_read_len,
        }
    }

    /// Writes the BHS; the caller appends [`ScsiCommand::ahs`].
    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        assert!(self.cdb.len() <= CDB_LEN_MAX, "CDB longer than CDB_LEN_MAX");
        b[OFF_OPCODE] = Opcode::ScsiCommand as u8 | if self.immediate { IMMEDIATE_BIT } else { 0 };
        b[OFF_FLAGS] = (if self.final_bit { FINAL_BIT } else { 0 })
            | (if self.read { CMD_READ_BIT } else { 0 })
            | (if self.write { CMD_WRITE_BIT } else { 0 })
            | (self.task_attr & CMD_ATTR_MASK);
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_EDTL, self.expected_data_transfer_length);
        put_u32(b, OFF_CMD_SN, self.cmd_sn);
        put_u32(b, OFF_EXP_STAT_SN, self.exp_stat_sn);
        let n = self.cdb.len().min(BHS_CDB_LEN);
        b[OFF_CDB..OFF_CDB + n].copy_from_slice(&self.cdb[..n]);
    }
}

const RSP_BIDI_OVERFLOW: u8 = 0x10;
const RSP_BIDI_UNDERFLOW: u8 = 0x08;
const RSP_OVERFLOW: u8 = 0x04;
const RSP_UNDERFLOW: u8 = 0x02;
const OFF_RESPONSE: usize = 2;
const OFF_STATUS: usize = 3;
const OFF_SNACK_TAG: usize = OFF_TTT;
pub(crate) const OFF_STAT_SN: usize = 24;
pub(crate) const OFF_EXP_CMD_SN: usize = OFF_STAT_SN + 4;
pub(crate) const OFF_MAX_CMD_SN: usize = OFF_EXP_CMD_SN + 4;
const OFF_EXP_DATA_SN: usize = OFF_MAX_CMD_SN + 4;
const OFF_BIDI_RESIDUAL: usize = OFF_EXP_DATA_SN + 4;
const OFF_RESIDUAL: usize = OFF_BIDI_RESIDUAL + 4;
const _: () = assert!(OFF_RESIDUAL + 4 == BHS_LEN);

/// Response code "Command Completed at Target" (RFC 7143 §11.4.3).
pub const RESPONSE_COMPLETED: u8 = 0x00;
/// Response code "Target Failure".
pub const RESPONSE_TARGET_FAILURE: u8 = 0x01;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScsiResponse {
    pub bidi_overflow: bool,
    pub bidi_underflow: bool,
    pub overflow: bool,
    pub underflow: bool,
    pub response: u8,
    pub status: u8,
    pub itt: u32,
    pub snack_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub exp_data_sn: u32,
    pub bidi_read_residual_count: u32,
    pub residual_count: u32,
}

impl ScsiResponse {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        let f = b[OFF_FLAGS];
        if f & RSP_OVERFLOW != 0 && f & RSP_UNDERFLOW != 0 {
            return Err(DecodeError::Field("both residual overflow and underflow"));
        }
        Ok(ScsiResponse {
            bidi_overflow: f & RSP_BIDI_OVERFLOW != 0,
            bidi_underflow: f & RSP_BIDI_UNDERFLOW != 0,
            overflow: f & RSP_OVERFLOW != 0,
            underflow: f & RSP_UNDERFLOW != 0,
            response: b[OFF_RESPONSE],
            status: b[OFF_STATUS],
            itt: get_u32(b, OFF_ITT),
            snack_tag: get_u32(b, OFF_SNACK_TAG),
            stat_sn: get_u32(b, OFF_STAT_SN),
            exp_cmd_sn: get_u32(b, OFF_EXP_CMD_SN),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
            exp_data_sn: get_u32(b, OFF_EXP_DATA_SN),
            bidi_read_residual_count: get_u32(b, OFF_BIDI_RESIDUAL),
            residual_count: get_u32(b, OFF_RESIDUAL),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::ScsiResponse as u8;
        b[OFF_FLAGS] = FINAL_BIT
            | (if self.bidi_overflow { RSP_BIDI_OVERFLOW } else { 0 })
            | (if self.bidi_underflow { RSP_BIDI_UNDERFLOW } else { 0 })
            | (if self.overflow { RSP_OVERFLOW } else { 0 })
            | (if self.underflow { RSP_UNDERFLOW } else { 0 });
        b[OFF_RESPONSE] = self.response;
        b[OFF_STATUS] = self.status;
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_SNACK_TAG, self.snack_tag);
        put_u32(b, OFF_STAT_SN, self.stat_sn);
        put_u32(b, OFF_EXP_CMD_SN, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
        put_u32(b, OFF_EXP_DATA_SN, self.exp_data_sn);
        put_u32(b, OFF_BIDI_RESIDUAL, self.bidi_read_residual_count);
        put_u32(b, OFF_RESIDUAL, self.residual_count);
    }
}
