//! SCSI status codes (SAM-5 §5.3.1).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScsiStatus {
    Good,
    CheckCondition,
    Busy,
    ReservationConflict,
    TaskSetFull,
    TaskAborted,
    /// Any other byte a peer sent; kept so a decoder never has to reject a status.
    Other(u8),
}

impl ScsiStatus {
    pub fn code(self) -> u8 {
        match self {
            ScsiStatus::Good => 0x00,
            ScsiStatus::CheckCondition => 0x02,
            ScsiStatus::Busy => 0x08,
            ScsiStatus::ReservationConflict => 0x18,
            ScsiStatus::TaskSetFull => 0x28,
            ScsiStatus::TaskAborted => 0x40,
            ScsiStatus::Other(c) => c,
        }
    }

    pub fn from_code(code: u8) -> Self {
        match code {
            0x00 => ScsiStatus::Good,
            0x02 => ScsiStatus::CheckCondition,
            0x08 => ScsiStatus::Busy,
            0x18 => ScsiStatus::ReservationConflict,
            0x28 => ScsiStatus::TaskSetFull,
            0x40 => ScsiStatus::TaskAborted,
            c => ScsiStatus::Other(c),
        }
    }
}
