//! Decode errors for PDUs, AHS and text. Each names what was wrong so the target can choose
//! between a Reject PDU (a well-framed PDU with a bad field) and closing the connection (a PDU
//! that cannot be framed).

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("PDU truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("unknown opcode {0:#04x}")]
    Opcode(u8),
    #[error("opcode {0:#04x} is not sent by this side")]
    WrongDirection(u8),
    #[error("data segment of {len} bytes exceeds the limit of {max}")]
    DataSegmentTooLong { len: u32, max: u32 },
    #[error("malformed AHS: {0}")]
    Ahs(&'static str),
    #[error("CDB of {0} bytes is out of range")]
    CdbLength(usize),
    #[error("invalid field: {0}")]
    Field(&'static str),
    #[error("header digest mismatch")]
    HeaderDigest,
    #[error("data digest mismatch")]
    DataDigest,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TextError {
    #[error("text of {len} bytes exceeds the limit of {max}")]
    TooLong { len: usize, max: usize },
    #[error("text pair without '=': {0:?}")]
    NoEquals(String),
    #[error("text is not UTF-8")]
    NotUtf8,
    #[error("key {0:?} is too long or empty")]
    BadKey(String),
    #[error("value of {0:?} exceeds 8192 bytes")]
    ValueTooLong(String),
}
