//! Login Request/Response (RFC 7143 §11.12, §11.13) and Text Request/Response (§11.10,
//! §11.11) headers.
//!
//! Login Request / Response:
//! ```text
//! 0 .1 0x03 / 0x23   1 T C . . CSG(2) NSG(2)   2 Version-max   3 Version-min / -active
//! 8..13 ISID   14..15 TSIH   16..19 ITT   20..21 CID (request)   24..27 CmdSN / StatSN
//! 28..31 ExpStatSN / ExpCmdSN   32..35 - / MaxCmdSN   36 Status-Class   37 Status-Detail
//! ```
//! Text Request / Response:
//! ```text
//! 1 F C   8..15 LUN   16..19 ITT   20..23 TTT   24..27 CmdSN / StatSN
//! 28..31 ExpStatSN / ExpCmdSN   32..35 - / MaxCmdSN
//! ```

use crate::bhs::*;
use crate::bytes::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::error::DecodeError;

const LOGIN_TRANSIT: u8 = 0x80;
const CONTINUE_BIT: u8 = 0x40;
const CSG_SHIFT: u8 = 2;
const STAGE_MASK: u8 = 0x03;
const OFF_VERSION_MAX: usize = 2;
const OFF_VERSION_MIN: usize = 3;
const OFF_ISID: usize = OFF_LUN;
const ISID_LEN: usize = 6;
const OFF_TSIH: usize = OFF_ISID + ISID_LEN;
const OFF_CID: usize = OFF_TTT;
const OFF_SN: usize = 24;
const OFF_SN2: usize = OFF_SN + 4;
const OFF_MAX_CMD_SN: usize = OFF_SN2 + 4;
const OFF_STATUS_CLASS: usize = OFF_MAX_CMD_SN + 4;
const OFF_STATUS_DETAIL: usize = OFF_STATUS_CLASS + 1;
const _: () = assert!(OFF_TSIH == 14 && OFF_STATUS_CLASS == 36);

/// Login stages (RFC 7143 §11.12.3).
pub const STAGE_SECURITY: u8 = 0;
pub const STAGE_OPERATIONAL: u8 = 1;
pub const STAGE_FULL_FEATURE: u8 = 3;

/// Login status classes and details (RFC 7143 §11.13.5).
pub mod login_status {
    pub const SUCCESS: (u8, u8) = (0x00, 0x00);
    pub const INITIATOR_ERROR: (u8, u8) = (0x02, 0x00);
    pub const AUTHENTICATION_FAILED: (u8, u8) = (0x02, 0x01);
    pub const NOT_FOUND: (u8, u8) = (0x02, 0x03);
    pub const MISSING_PARAMETER: (u8, u8) = (0x02, 0x07);
    pub const SESSION_DOES_NOT_EXIST: (u8, u8) = (0x02, 0x0A);
    pub const INVALID_DURING_LOGIN: (u8, u8) = (0x02, 0x0B);
    pub const TARGET_ERROR: (u8, u8) = (0x03, 0x00);
    pub const SERVICE_UNAVAILABLE: (u8, u8) = (0x03, 0x01);
    pub const OUT_OF_RESOURCES: (u8, u8) = (0x03, 0x02);
}

fn stage_flags(transit: bool, cont: bool, csg: u8, nsg: u8) -> u8 {
    (if transit { LOGIN_TRANSIT } else { 0 })
        | (if cont { CONTINUE_BIT } else { 0 })
        | ((csg & STAGE_MASK) << CSG_SHIFT)
        | (nsg & STAGE_MASK)
}

fn isid(b: &[u8; BHS_LEN]) -> [u8; ISID_LEN] {
    let mut v = [0u8; ISID_LEN];
    v.copy_from_slice(&b[OFF_ISID..OFF_ISID + ISID_LEN]);
    v
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoginRequest {
    pub transit: bool,
    pub cont: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_min: u8,
    pub isid: [u8; ISID_LEN],
    pub tsih: u16,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl LoginRequest {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        let f = b[OFF_FLAGS];
        let r = LoginRequest {
            transit: f & LOGIN_TRANSIT != 0,
            cont: f & CONTINUE_BIT != 0,
            csg: (f >> CSG_SHIFT) & STAGE_MASK,
            nsg: f & STAGE_MASK,
            version_max: b[OFF_VERSION_MAX],
            version_min: b[OFF_VERSION_MIN],
            isid: isid(b),
            tsih: get_u16(b, OFF_TSIH),
            itt: get_u32(b, OFF_ITT),
            cid: get_u16(b, OFF_CID),
            cmd_sn: get_u32(b, OFF_SN),
            exp_stat_sn: get_u32(b, OFF_SN2),
        };
        // §11.12.2: T and C must not both be set.
        if r.transit && r.cont {
            return Err(DecodeError::Field("login T and C bits both set"));
        }
        Ok(r)
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::LoginRequest as u8 | IMMEDIATE_BIT;
        b[OFF_FLAGS] = stage_flags(self.transit, self.cont, self.csg, self.nsg);
        b[OFF_VERSION_MAX] = self.version_max;
        b[OFF_VERSION_MIN] = self.version_min;
        b[OFF_ISID..OFF_ISID + ISID_LEN].copy_from_slice(&self.isid);
        put_u16(b, OFF_TSIH, self.tsih);
        put_u32(b, OFF_ITT, self.itt);
        put_u16(b, OFF_CID, self.cid);
        put_u32(b, OFF_SN, self.cmd_sn);
        put_u32(b, OFF_SN2, self.exp_stat_sn);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoginResponse {
    pub transit: bool,
    pub cont: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_active: u8,
    pub isid: [u8; ISID_LEN],
    pub tsih: u16,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub status_class: u8,
    pub status_detail: u8,
}

impl LoginResponse {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        let f = b[OFF_FLAGS];
        Ok(LoginResponse {
            transit: f & LOGIN_TRANSIT != 0,
            cont: f & CONTINUE_BIT != 0,
            csg: (f >> CSG_SHIFT) & STAGE_MASK,
            nsg: f & STAGE_MASK,
            version_max: b[OFF_VERSION_MAX],
            version_active: b[OFF_VERSION_MIN],
            isid: isid(b),
            tsih: get_u16(b, OFF_TSIH),
            itt: get_u32(b, OFF_ITT),
            stat_sn: get_u32(b, OFF_SN),
            exp_cmd_sn: get_u32(b, OFF_SN2),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
            status_class: b[OFF_STATUS_CLASS],
            status_detail: b[OFF_STATUS_DETAIL],
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::LoginResponse as u8;
        b[OFF_FLAGS] = stage_flags(self.transit, self.cont, self.csg, self.nsg);
        b[OFF_VERSION_MAX] = self.version_max;
        b[OFF_VERSION_MIN] = self.version_active;
        b[OFF_ISID..OFF_ISID + ISID_LEN].copy_from_slice(&self.isid);
        put_u16(b, OFF_TSIH, self.tsih);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_SN, self.stat_sn);
        put_u32(b, OFF_SN2, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
        b[OFF_STATUS_CLASS] = self.status_class;
        b[OFF_STATUS_DETAIL] = self.status_detail;
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextRequest {
    pub immediate: bool,
    pub final_bit: bool,
    pub cont: bool,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl TextRequest {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        let f = b[OFF_FLAGS];
        if f & FINAL_BIT != 0 && f & CONTINUE_BIT != 0 {
            return Err(DecodeError::Field("text F and C bits both set"));
        }
        Ok(TextRequest {
            immediate: b[OFF_OPCODE] & IMMEDIATE_BIT != 0,
            final_bit: f & FINAL_BIT != 0,
            cont: f & CONTINUE_BIT != 0,
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            ttt: get_u32(b, OFF_TTT),
            cmd_sn: get_u32(b, OFF_SN),
            exp_stat_sn: get_u32(b, OFF_SN2),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::TextRequest as u8 | if self.immediate { IMMEDIATE_BIT } else { 0 };
        b[OFF_FLAGS] = (if self.final_bit { FINAL_BIT } else { 0 }) | (if self.cont { CONTINUE_BIT } else { 0 });
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_TTT, self.ttt);
        put_u32(b, OFF_SN, self.cmd_sn);
        put_u32(b, OFF_SN2, self.exp_stat_sn);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextResponse {
    pub final_bit: bool,
    pub cont: bool,
    pub lun: u64,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl TextResponse {
    pub fn decode(b: &[u8; BHS_LEN]) -> Result<Self, DecodeError> {
        let f = b[OFF_FLAGS];
        if f & FINAL_BIT != 0 && f & CONTINUE_BIT != 0 {
            return Err(DecodeError::Field("text F and C bits both set"));
        }
        Ok(TextResponse {
            final_bit: f & FINAL_BIT != 0,
            cont: f & CONTINUE_BIT != 0,
            lun: get_u64(b, OFF_LUN),
            itt: get_u32(b, OFF_ITT),
            ttt: get_u32(b, OFF_TTT),
            stat_sn: get_u32(b, OFF_SN),
            exp_cmd_sn: get_u32(b, OFF_SN2),
            max_cmd_sn: get_u32(b, OFF_MAX_CMD_SN),
        })
    }

    pub fn encode(&self, b: &mut [u8; BHS_LEN]) {
        b[OFF_OPCODE] = Opcode::TextResponse as u8;
        b[OFF_FLAGS] = (if self.final_bit { FINAL_BIT } else { 0 }) | (if self.cont { CONTINUE_BIT } else { 0 });
        put_u64(b, OFF_LUN, self.lun);
        put_u32(b, OFF_ITT, self.itt);
        put_u32(b, OFF_TTT, self.ttt);
        put_u32(b, OFF_SN, self.stat_sn);
        put_u32(b, OFF_SN2, self.exp_cmd_sn);
        put_u32(b, OFF_MAX_CMD_SN, self.max_cmd_sn);
    }
}
