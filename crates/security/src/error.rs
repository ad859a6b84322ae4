//! Why an OSD refused a command on security grounds, and the sense data each refusal carries.
//! Capability problems are INVALID FIELD IN CDB with the field pointer on the capability's byte
//! (CDB byte 80 + capability offset), as r05 §4.11.2.3 asks. No message holds key material.
//!
//! | variant | sense key | ASC/ASCQ | field pointer (CDB byte) |
//! |---|---|---|---|
//! | `MethodRefused` (incl. no capability) | ILLEGAL REQUEST | 24/00 | 82 security method |
//! | `Malformed` | ILLEGAL REQUEST | 24/00 | the bad field (80 format, 81 algorithm, 82 method, 128 object type, 135 descriptor type) |
//! | `Expired` | ILLEGAL REQUEST | 24/00 | 84 expiration time |
//! | `WrongScope` | ILLEGAL REQUEST | 24/00 | 135 object descriptor type |
//! | `WrongObjectType` | ILLEGAL REQUEST | 24/00 | 128 object type |
//! | `WrongPartition` | ILLEGAL REQUEST | 24/00 | 152 allowed partition id |
//! | `WrongObject` | ILLEGAL REQUEST | 24/00 | 160 allowed object id |
//! | `OutsideRange` | ILLEGAL REQUEST | 24/00 | 168 allowed range |
//! | `CreatedTime` | ILLEGAL REQUEST | 24/00 | 122 object created time |
//! | `PolicyTag` | ILLEGAL REQUEST | 24/00 | 140 policy/access tag |
//! | `Permissions` | ILLEGAL REQUEST | 24/00 | 129 permission bit mask |
//! | `UnknownKey` | ILLEGAL REQUEST | 24/00 | 81 key version |
//! | `RequestIcv` | ILLEGAL REQUEST | 24/00 | 184 request integrity check value |
//! | `ContinuationIcv` | ILLEGAL REQUEST | 26/00 invalid field in parameter list | Data-Out byte 8 |
//! | `Nonce(NotUnique)` | ILLEGAL REQUEST | 24/06 nonce not unique | 216 |
//! | `Nonce(OutOfRange)` | ILLEGAL REQUEST | 24/07 nonce timestamp out of range | 216 |
//! | `DataOutIcvOffset` | ILLEGAL REQUEST | 24/00 | 232 Data-Out ICV offset |
//! | `DataInIcvOffset` | ILLEGAL REQUEST | 24/00 | 228 Data-In ICV offset |
//! | `DataOutIcv` | ILLEGAL REQUEST | 26/0F invalid Data-Out buffer integrity check value | none |
//! | `FactsUnavailable` | HARDWARE ERROR | 44/00 internal target failure | none |

use tessera_osd_proto::cdb;
use tessera_scsi::{FieldPointer, Sense, SenseKey};
use thiserror::Error;

use crate::capability::{self as cap, CapabilityError, Permissions, SecurityMethod};
use crate::keys::KeySlot;
use crate::nonce::NonceError;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SecurityError {
    #[error("security method {got} is below the {required} this OSD requires")]
    MethodRefused { required: SecurityMethod, got: SecurityMethod },
    #[error("malformed capability: {0}")]
    Malformed(CapabilityError),
    #[error("capability expired at {expires_ms} ms (OSD clock {now_ms} ms)")]
    Expired { expires_ms: u64, now_ms: u64 },
    #[error("capability's object descriptor type does not cover this command's object")]
    WrongScope,
    #[error("capability is for another object type")]
    WrongObjectType,
    #[error("capability is for partition {allowed:#x}, the command addresses {addressed:#x}")]
    WrongPartition { allowed: u64, addressed: u64 },
    #[error("capability is for object {allowed:#x}, the command addresses {addressed:#x}")]
    WrongObject { allowed: u64, addressed: u64 },
    #[error("bytes [{start}, {end}) lie outside the capability's allowed range")]
    OutsideRange { start: u64, end: u64 },
    #[error("capability names an object created at {allowed_ms} ms; this one was created at {actual_ms} ms")]
    CreatedTime { allowed_ms: u64, actual_ms: u64 },
    #[error("capability's policy/access tag no longer matches the object's (revoked)")]
    PolicyTag,
    #[error("capability lacks the permissions {}", missing.names().join(", "))]
    Permissions { missing: Permissions },
    #[error("the OSD holds no {0}")]
    UnknownKey(KeySlot),
    #[error("request integrity check value does not verify (forged or altered CDB, or a stale key)")]
    RequestIcv,
    #[error("continuation segment integrity check value does not verify")]
    ContinuationIcv,
    #[error("{0}")]
    Nonce(NonceError),
    #[error("Data-Out integrity check value offset is missing or does not follow the Data-Out")]
    DataOutIcvOffset,
    #[error("Data-In integrity check value offset is missing or overlaps the Data-In")]
    DataInIcvOffset,
    #[error("Data-Out integrity check value does not verify (altered data)")]
    DataOutIcv,
    #[error("the OSD could not read the object's security attributes")]
    FactsUnavailable,
}

fn capability_field(offset: usize) -> u16 {
    (cdb::CAPABILITY + offset) as u16
}

impl SecurityError {
    /// A short stable name for counters and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            SecurityError::MethodRefused { .. } => "method",
            SecurityError::Malformed(_) => "malformed",
            SecurityError::Expired { .. } => "expired",
            SecurityError::WrongScope | SecurityError::WrongObjectType | SecurityError::WrongPartition { .. } | SecurityError::WrongObject { .. } => {
                "object"
            }
            SecurityError::OutsideRange { .. } => "range",
            SecurityError::CreatedTime { .. } => "created_time",
            SecurityError::PolicyTag => "policy_tag",
            SecurityError::Permissions { .. } => "permissions",
            SecurityError::UnknownKey(_) => "key",
            SecurityError::RequestIcv | SecurityError::ContinuationIcv => "icv",
            SecurityError::Nonce(_) => "nonce",
            SecurityError::DataOutIcvOffset | SecurityError::DataInIcvOffset | SecurityError::DataOutIcv => "data_icv",
            SecurityError::FactsUnavailable => "store",
        }
    }

    /// The sense data of the module table.
    pub fn sense(&self) -> Sense {
        let field = |offset: usize| Sense::invalid_cdb_field(capability_field(offset));
        match self {
            SecurityError::MethodRefused { .. } => field(cap::SECURITY_METHOD),
            SecurityError::Malformed(e) => field(e.byte()),
            SecurityError::Expired { .. } => field(cap::EXPIRATION),
            SecurityError::WrongScope => field(cap::DESCRIPTOR_TYPE),
            SecurityError::WrongObjectType => field(cap::OBJECT_TYPE),
            SecurityError::WrongPartition { .. } => field(cap::ALLOWED_PARTITION),
            SecurityError::WrongObject { .. } => field(cap::ALLOWED_OBJECT),
            SecurityError::OutsideRange { .. } => field(cap::RANGE_LENGTH),
            SecurityError::CreatedTime { .. } => field(cap::CREATED_TIME),
            SecurityError::PolicyTag => field(cap::POLICY_TAG),
            SecurityError::Permissions { .. } => field(cap::PERMISSIONS),
            SecurityError::UnknownKey(_) => field(cap::ALGORITHM_AND_KEY_VERSION),
            SecurityError::RequestIcv => Sense::invalid_cdb_field(cdb::REQUEST_ICV as u16),
            SecurityError::ContinuationIcv => Sense::invalid_param_field(crate::icv::CONTINUATION_ICV as u16),
            SecurityError::Nonce(NonceError::NotUnique) => {
                Sense::new(SenseKey::IllegalRequest, 0x24, 0x06).with_field(FieldPointer::cdb(cdb::REQUEST_NONCE as u16))
            }
            SecurityError::Nonce(NonceError::OutOfRange { .. }) => {
                Sense::new(SenseKey::IllegalRequest, 0x24, 0x07).with_field(FieldPointer::cdb(cdb::REQUEST_NONCE as u16))
            }
            SecurityError::DataOutIcvOffset => Sense::invalid_cdb_field(cdb::DATA_OUT_ICV_OFFSET as u16),
            SecurityError::DataInIcvOffset => Sense::invalid_cdb_field(cdb::DATA_IN_ICV_OFFSET as u16),
            SecurityError::DataOutIcv => Sense::new(SenseKey::IllegalRequest, 0x26, 0x0F),
            SecurityError::FactsUnavailable => Sense::new(SenseKey::HardwareError, 0x44, 0x00),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the table of the module doc holds. Method: one case per pointer.
    #[test]
    fn sense_table() {
        let ptr = |e: SecurityError| {
            let s = e.sense();
            (s.key, s.asc_ascq(), s.field_pointer.map(|f| (f.in_cdb, f.byte)))
        };
        let ill = SenseKey::IllegalRequest;
        assert_eq!(ptr(SecurityError::MethodRefused { required: SecurityMethod::CmdRsp, got: SecurityMethod::NoSec }), (ill, 0x2400, Some((true, 82))));
        assert_eq!(ptr(SecurityError::Expired { expires_ms: 1, now_ms: 2 }), (ill, 0x2400, Some((true, 84))));
        assert_eq!(ptr(SecurityError::WrongPartition { allowed: 1, addressed: 2 }), (ill, 0x2400, Some((true, 152))));
        assert_eq!(ptr(SecurityError::WrongObject { allowed: 1, addressed: 2 }), (ill, 0x2400, Some((true, 160))));
        assert_eq!(ptr(SecurityError::OutsideRange { start: 0, end: 1 }), (ill, 0x2400, Some((true, 168))));
        assert_eq!(ptr(SecurityError::CreatedTime { allowed_ms: 1, actual_ms: 2 }), (ill, 0x2400, Some((true, 122))));
        assert_eq!(ptr(SecurityError::PolicyTag), (ill, 0x2400, Some((true, 140))));
        assert_eq!(ptr(SecurityError::Permissions { missing: Permissions::WRITE }), (ill, 0x2400, Some((true, 129))));
        assert_eq!(ptr(SecurityError::UnknownKey(KeySlot::Working(1, 2))), (ill, 0x2400, Some((true, 81))));
        assert_eq!(ptr(SecurityError::RequestIcv), (ill, 0x2400, Some((true, 184))));
        assert_eq!(ptr(SecurityError::ContinuationIcv), (ill, 0x2600, Some((false, 8))));
        assert_eq!(ptr(SecurityError::Nonce(NonceError::NotUnique)), (ill, 0x2406, Some((true, 216))));
        let range = NonceError::OutOfRange { nonce_ms: 0, oldest_ms: 1, newest_ms: 2 };
        assert_eq!(ptr(SecurityError::Nonce(range)), (ill, 0x2407, Some((true, 216))));
        assert_eq!(ptr(SecurityError::DataOutIcv), (ill, 0x260F, None));
        assert_eq!(ptr(SecurityError::Malformed(CapabilityError::Format(1))), (ill, 0x2400, Some((true, 80))));
    }

    #[test]
    fn messages_name_permissions_not_keys() {
        let e = SecurityError::Permissions { missing: Permissions::WRITE | Permissions::SET_ATTR };
        assert_eq!(e.to_string(), "capability lacks the permissions WRITE, SET_ATTR");
        assert_eq!(SecurityError::UnknownKey(KeySlot::Working(0x10000, 2)).to_string(), "the OSD holds no working key 2 of partition 0x10000");
    }
}
