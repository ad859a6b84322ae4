//! Typed PDU headers (RFC 7143 §11). A [`Pdu`] is the decoded BHS plus AHS; the data segment
//! travels beside it (see [`crate::stream`]) so that read and write data are never copied into
//! a PDU value.

mod control;
mod data;
mod login;
mod scsi;

pub use control::*;
pub use data::*;
pub use login::*;
pub use scsi::*;

use crate::bhs::{Framing, Opcode, BHS_LEN, OFF_DATA_SEGMENT_LEN, OFF_TOTAL_AHS_LEN};
use crate::bytes::put_u24;
use crate::error::DecodeError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pdu {
    NopOut(NopOut),
    ScsiCommand(ScsiCommand),
    TaskMgmtRequest(TaskMgmtRequest),
    LoginRequest(LoginRequest),
    TextRequest(TextRequest),
    DataOut(DataOut),
    LogoutRequest(LogoutRequest),
    NopIn(NopIn),
    ScsiResponse(ScsiResponse),
    TaskMgmtResponse(TaskMgmtResponse),
    LoginResponse(LoginResponse),
    TextResponse(TextResponse),
    DataIn(DataIn),
    LogoutResponse(LogoutResponse),
    R2t(R2t),
    AsyncMessage(AsyncMessage),
    Reject(Reject),
}

impl Pdu {
    /// Decodes a BHS and its AHS region. AHS is only meaningful on a SCSI Command; other PDUs
    /// carrying AHS are refused because no AHS type is defined for them.
    pub fn decode(bhs: &[u8; BHS_LEN], ahs: &[u8]) -> Result<Pdu, DecodeError> {
        let framing = Framing::parse(bhs);
        if framing.total_ahs_len != ahs.len() {
            return Err(DecodeError::Truncated { need: framing.total_ahs_len, have: ahs.len() });
        }
        let op = Opcode::from_byte(framing.opcode_byte)?;
        if op != Opcode::ScsiCommand && !ahs.is_empty() {
            return Err(DecodeError::Ahs("AHS on a PDU that takes none"));
        }
        Ok(match op {
            Opcode::NopOut => Pdu::NopOut(NopOut::decode(bhs)?),
            Opcode::ScsiCommand => Pdu::ScsiCommand(ScsiCommand::decode(bhs, ahs)?),
            Opcode::TaskMgmtRequest => Pdu::TaskMgmtRequest(TaskMgmtRequest::decode(bhs)?),
            Opcode::LoginRequest => Pdu::LoginRequest(LoginRequest::decode(bhs)?),
            Opcode::TextRequest => Pdu::TextRequest(TextRequest::decode(bhs)?),
            Opcode::DataOut => Pdu::DataOut(DataOut::decode(bhs)?),
            Opcode::LogoutRequest => Pdu::LogoutRequest(LogoutRequest::decode(bhs)?),
            // SNACK needs ErrorRecoveryLevel > 0, which is never negotiated.
            Opcode::Snack => return Err(DecodeError::Opcode(framing.opcode_byte)),
            Opcode::NopIn => Pdu::NopIn(NopIn::decode(bhs)?),
            Opcode::ScsiResponse => Pdu::ScsiResponse(ScsiResponse::decode(bhs)?),
            Opcode::TaskMgmtResponse => Pdu::TaskMgmtResponse(TaskMgmtResponse::decode(bhs)?),
            Opcode::LoginResponse => Pdu::LoginResponse(LoginResponse::decode(bhs)?),
            Opcode::TextResponse => Pdu::TextResponse(TextResponse::decode(bhs)?),
            Opcode::DataIn => Pdu::DataIn(DataIn::decode(bhs)?),
            Opcode::LogoutResponse => Pdu::LogoutResponse(LogoutResponse::decode(bhs)?),
            Opcode::R2t => Pdu::R2t(R2t::decode(bhs)?),
            Opcode::AsyncMessage => Pdu::AsyncMessage(AsyncMessage::decode(bhs)?),
            Opcode::Reject => Pdu::Reject(Reject::decode(bhs)?),
        })
    }

    pub fn opcode(&self) -> Opcode {
        match self {
            Pdu::NopOut(_) => Opcode::NopOut,
            Pdu::ScsiCommand(_) => Opcode::ScsiCommand,
            Pdu::TaskMgmtRequest(_) => Opcode::TaskMgmtRequest,
            Pdu::LoginRequest(_) => Opcode::LoginRequest,
            Pdu::TextRequest(_) => Opcode::TextRequest,
            Pdu::DataOut(_) => Opcode::DataOut,
            Pdu::LogoutRequest(_) => Opcode::LogoutRequest,
            Pdu::NopIn(_) => Opcode::NopIn,
            Pdu::ScsiResponse(_) => Opcode::ScsiResponse,
            Pdu::TaskMgmtResponse(_) => Opcode::TaskMgmtResponse,
            Pdu::LoginResponse(_) => Opcode::LoginResponse,
            Pdu::TextResponse(_) => Opcode::TextResponse,
            Pdu::DataIn(_) => Opcode::DataIn,
            Pdu::LogoutResponse(_) => Opcode::LogoutResponse,
            Pdu::R2t(_) => Opcode::R2t,
            Pdu::AsyncMessage(_) => Opcode::AsyncMessage,
            Pdu::Reject(_) => Opcode::Reject,
        }
    }

    /// Appends the BHS and AHS, with `data_segment_len` in the BHS, to `out`.
    pub fn encode(&self, data_segment_len: u32, out: &mut Vec<u8>) {
        assert!(data_segment_len < 1 << 24, "data segment length is a 24-bit field");
        let mut b = [0u8; BHS_LEN];
        let mut ahs = Vec::new();
        match self {
            Pdu::NopOut(p) => p.encode(&mut b),
            Pdu::ScsiCommand(p) => {
                p.encode(&mut b);
                p.ahs().encode(&mut ahs);
            }
            Pdu::TaskMgmtRequest(p) => p.encode(&mut b),
            Pdu::LoginRequest(p) => p.encode(&mut b),
            Pdu::TextRequest(p) => p.encode(&mut b),
            Pdu::DataOut(p) => p.encode(&mut b),
            Pdu::LogoutRequest(p) => p.encode(&mut b),
            Pdu::NopIn(p) => p.encode(&mut b),
            Pdu::ScsiResponse(p) => p.encode(&mut b),
            Pdu::TaskMgmtResponse(p) => p.encode(&mut b),
            Pdu::LoginResponse(p) => p.encode(&mut b),
            Pdu::TextResponse(p) => p.encode(&mut b),
            Pdu::DataIn(p) => p.encode(&mut b),
            Pdu::LogoutResponse(p) => p.encode(&mut b),
            Pdu::R2t(p) => p.encode(&mut b),
            Pdu::AsyncMessage(p) => p.encode(&mut b),
            Pdu::Reject(p) => p.encode(&mut b),
        }
        assert!(ahs.len() % 4 == 0 && ahs.len() / 4 <= u8::MAX as usize);
        b[OFF_TOTAL_AHS_LEN] = (ahs.len() / 4) as u8;
        put_u24(&mut b, OFF_DATA_SEGMENT_LEN, data_segment_len);
        out.extend_from_slice(&b);
        out.extend_from_slice(&ahs);
    }
}

#[cfg(test)]
mod tests;
