//! Control PDUs: NOP-Out/NOP-In (RFC 7143 §11.18, §11.19), Task Management Function Request/
//! Response (§11.5, §11.6), Logout Request/Response (§11.14, §11.15), Reject (§11.17) and
//! Asynchronous Message (§11.9).
//!
//! Shared offsets: 24..27 CmdSN (initiator) or StatSN (target), 28..31 ExpStatSN (initiator)
//! or ExpCmdSN (target), 32..35 MaxCmdSN (target).

use crate::bhs::*;
use crate::bytes::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::error::DecodeError;

const OFF_SN: usize = 24;
const OFF_SN2: usize = OFF_SN + 4;
const OFF_MAX_CMD_SN: usize = OFF_SN2 + 4;
const OFF_WORD9: usize = OFF_MAX_CMD_SN + 4;
const OFF_WORD10: usize = OFF_WORD9 + 4;
const OFF_RESPONSE: usize = 2;
const FUNCTION_MASK: u8 = 0x7F;

fn opcode_byte(op: Opcode, immediate: bool) -> u8 {
    op as u8 | if immediate { IMMEDIATE_BIT } else { 0 }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NopOut {
    pub immediate: bool,
    pub lun: u64,
    /// [`RESERVED_TAG`] when this answers a target's NOP-In (then `ttt` echoes it).
    pub itt: u32,
    pub ttt: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl NopOut {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(NopOut {
            immediate: b[OFF_OPCODE] & IMMEDIATE_BIT != 0,
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            ttt: get_u32(b, OFF_TTT),
            cmd_sn: get_u32(b, OFF_SN),
            exp_stat_sn: get_u32(b, OFF_SN2),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = opcode_byte(Opcode::NopOut, self.immediate);
        b[OFF_FLAGS] = FINAL_BIT;
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_TTT, self.ttt);
        put_u32(b, OFF_SN, self.cmd_sn);
        put_u32(b, OFF_SN2, self.exp_stat_sn);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NopIn {
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl NopIn {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(NopIn {
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            ttt: get_u32(b, OFF_TTT),
            stat_sn: get_u32(b, OFF_SN),
            exp_cmd_sn: get_u32(b, OFF_SN2),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::NopIn as u8;
        b[OFF_FLAGS] = FINAL_BIT;
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_TTT, self.ttt);
        put_u32(b, OFF_SN, self.stat_sn);
        put_u32(b, OFF_SN2, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
    }
}

/// Task management function codes (RFC 7143 §11.5.1).
pub mod tmf_function {
    pub const ABORT_TASK: u8 = 1;
    pub const ABORT_TASK_SET: u8 = 2;
    pub const CLEAR_ACA: u8 = 3;
    pub const CLEAR_TASK_SET: u8 = 4;
    pub const LOGICAL_UNIT_RESET: u8 = 5;
    pub const TARGET_WARM_RESET: u8 = 6;
    pub const TARGET_COLD_RESET: u8 = 7;
    pub const TASK_REASSIGN: u8 = 8;
}

/// Task management response codes (RFC 7143 §11.6.1).
pub mod tmf_response {
    pub const FUNCTION_COMPLETE: u8 = 0;
    pub const TASK_DOES_NOT_EXIST: u8 = 1;
    pub const LUN_DOES_NOT_EXIST: u8 = 2;
    pub const TASK_STILL_ALLEGIANT: u8 = 3;
    pub const REASSIGNMENT_NOT_SUPPORTED: u8 = 4;
    pub const NOT_SUPPORTED: u8 = 5;
    pub const AUTHORIZATION_FAILED: u8 = 6;
    pub const FUNCTION_REJECTED: u8 = 255;
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskMgmtRequest {
    pub immediate: bool,
    pub function: u8,
    pub lun: u64,
    pub itt: u32,
    pub referenced_task_tag: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub ref_cmd_sn: u32,
    pub exp_data_sn: u32,
}

impl TaskMgmtRequest {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(TaskMgmtRequest {
            immediate: b[OFF_OPCODE] & IMMEDIATE_BIT != 0,
            function: b[OFF_FLAGS] & FUNCTION_MASK,
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            referenced_task_tag: get_u32(b, OFF_TTT),
            cmd_sn: get_u32(b, OFF_SN),
            exp_stat_sn: get_u32(b, OFF_SN2),
            ref_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
            exp_data_sn: get_u32(b, OFF_WORD9),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = opcode_byte(Opcode::TaskMgmtRequest, self.immediate);
        b[OFF_FLAGS] = FINAL_BIT | (self.function & FUNCTION_MASK);
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_TTT, self.referenced_task_tag);
        put_u32(b, OFF_SN, self.cmd_sn);
        put_u32(b, OFF_SN2, self.exp_stat_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.ref_cmd_sn);
        put_u32(b, OFF_WORD9, self.exp_data_sn);
    }
}

/// Shape shared by the TMF and Logout responses and Reject: a code in byte 2 plus StatSN,
/// ExpCmdSN and MaxCmdSN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskMgmtResponse {
    pub response: u8,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl TaskMgmtResponse {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(TaskMgmtResponse {
            response: b[OFF_RESPONSE],
            itt: get_u32(b, OFF_ITT),
            stat_sn: get_u32(b, OFF_SN),
            exp_cmd_sn: get_u32(b, OFF_SN2),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::TaskMgmtResponse as u8;
        b[OFF_FLAGS] = FINAL_BIT;
        b[OFF_RESPONSE] = self.response;
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_SN, self.stat_sn);
        put_u32(b, OFF_SN2, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
    }
}

/// Logout reason codes (RFC 7143 §11.14.1).
pub const LOGOUT_CLOSE_SESSION: u8 = 0;
pub const LOGOUT_CLOSE_CONNECTION: u8 = 1;
const OFF_CID: usize = OFF_TTT;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogoutRequest {
    pub immediate: bool,
    pub reason: u8,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl LogoutRequest {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(LogoutRequest {
            immediate: b[OFF_OPCODE] & IMMEDIATE_BIT != 0,
            reason: b[OFF_FLAGS] & FUNCTION_MASK,
            itt: get_u32(b, OFF_ITT),
            cid: get_u16(b, OFF_CID),
            cmd_sn: get_u32(b, OFF_SN),
            exp_stat_sn: get_u32(b, OFF_SN2),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = opcode_byte(Opcode::LogoutRequest, self.immediate);
        b[OFF_FLAGS] = FINAL_BIT | (self.reason & FUNCTION_MASK);
        put_u32(b, OFF_ITT, self.itt);
        put_u16(b, OFF_CID, self.cid);
        put_u32(b, OFF_SN, self.cmd_sn);
        put_u32(b, OFF_SN2, self.exp_stat_sn);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogoutResponse {
    pub response: u8,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub time2wait: u16,
    pub time2retain: u16,
}

impl LogoutResponse {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(LogoutResponse {
            response: b[OFF_RESPONSE],
            itt: get_u32(b, OFF_ITT),
            stat_sn: get_u32(b, OFF_SN),
            exp_cmd_sn: get_u32(b, OFF_SN2),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
            time2wait: get_u16(b, OFF_WORD10),
            time2retain: get_u16(b, OFF_WORD10 + 2),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::LogoutResponse as u8;
        b[OFF_FLAGS] = FINAL_BIT;
        b[OFF_RESPONSE] = self.response;
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_SN, self.stat_sn);
        put_u32(b, OFF_SN2, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
        put_u16(b, OFF_WORD10, self.time2wait);
        put_u16(b, OFF_WORD10 + 2, self.time2retain);
    }
}

/// Reject reason codes (RFC 7143 §11.17.1).
pub mod reject_reason {
    pub const DATA_DIGEST_ERROR: u8 = 0x02;
    pub const SNACK_REJECT: u8 = 0x03;
    pub const PROTOCOL_ERROR: u8 = 0x04;
    pub const COMMAND_NOT_SUPPORTED: u8 = 0x05;
    pub const IMMEDIATE_COMMAND_REJECT: u8 = 0x06;
    pub const TASK_IN_PROGRESS: u8 = 0x07;
    pub const INVALID_DATA_ACK: u8 = 0x08;
    pub const INVALID_PDU_FIELD: u8 = 0x09;
    pub const OUT_OF_RESOURCES: u8 = 0x0A;
    pub const WAITING_FOR_LOGOUT: u8 = 0x0C;
}

/// Reject; its data segment is the complete header of the rejected PDU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reject {
    pub reason: u8,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
}

impl Reject {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(Reject {
            reason: b[OFF_RESPONSE],
            stat_sn: get_u32(b, OFF_SN),
            exp_cmd_sn: get_u32(b, OFF_SN2),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
            data_sn: get_u32(b, OFF_WORD9),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::Reject as u8;
        b[OFF_FLAGS] = FINAL_BIT;
        b[OFF_RESPONSE] = self.reason;
        put_u32(b, OFF_ITT, RESERVED_TAG);
        put_u32(b, OFF_SN, self.stat_sn);
        put_u32(b, OFF_SN2, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
        put_u32(b, OFF_WORD9, self.data_sn);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AsyncMessage {
    pub lun: u64,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub async_event: u8,
    pub async_vcode: u8,
    pub parameter1: u16,
    pub parameter2: u16,
    pub parameter3: u16,
}

impl AsyncMessage {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        Ok(AsyncMessage {
            lun: get_u64(b, OFF_LUN),
            stat_sn: get_u32(b, OFF_SN),
            exp_cmd_sn: get_u32(b, OFF_SN2),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
            async_event: b[OFF_WORD9],
            async_vcode: b[OFF_WORD9 + 1],
            parameter1: get_u16(b, OFF_WORD9 + 2),
            parameter2: get_u16(b, OFF_WORD10),
            parameter3: get_u16(b, OFF_WORD10 + 2),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::AsyncMessage as u8;
        b[OFF_FLAGS] = FINAL_BIT;
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, RESERVED_TAG);
        put_u32(b, OFF_SN, self.stat_sn);
        put_u32(b, OFF_SN2, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
        b[OFF_WORD9] = self.async_event;
        b[OFF_WORD9 + 1] = self.async_vcode;
        put_u16(b, OFF_WORD9 + 2, self.parameter1);
        put_u16(b, OFF_WORD10, self.parameter2);
        put_u16(b, OFF_WORD10 + 2, self.parameter3);
    }
}
