//! The operational text keys (RFC 7143 §13) with their kind, range, default and result
//! function. Values are the RFC's; the bounds we offer live in `tessera_types::limits`.

/// How a key's outcome is computed (RFC 7143 §6.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Result = offer AND ours.
    BoolAnd,
    /// Result = offer OR ours.
    BoolOr,
    /// Result = the smaller number.
    NumMin,
    /// Result = the larger number.
    NumMax,
    /// Each side declares its own number; no negotiation (MaxRecvDataSegmentLength).
    DeclarativeNum,
    /// A declared string (names, aliases, SessionType).
    DeclarativeStr,
    /// The responder picks the first offered value it supports (digests, AuthMethod).
    List,
}

#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    pub name: &'static str,
    pub kind: KeyKind,
    pub min: u32,
    pub default: u32,
    pub max: u32,
    /// Negotiated once per session (LO keys); meaningless in a discovery session.
    pub normal_only: bool,
}

const N24: u32 = (1 << 24) - 1;

const fn spec(name: &'static str, kind: KeyKind, min: u32, default: u32, max: u32, normal_only: bool) -> KeySpec {
    KeySpec { name, kind, min, default, max, normal_only }
}

const YES: u32 = 1;
const NO: u32 = 0;

pub const HEADER_DIGEST: &str = "HeaderDigest";
pub const DATA_DIGEST: &str = "DataDigest";
pub const MAX_CONNECTIONS: &str = "MaxConnections";
pub const INITIAL_R2T: &str = "InitialR2T";
pub const IMMEDIATE_DATA: &str = "ImmediateData";
pub const MAX_RECV_DATA_SEGMENT_LENGTH: &str = "MaxRecvDataSegmentLength";
pub const MAX_BURST_LENGTH: &str = "MaxBurstLength";
pub const FIRST_BURST_LENGTH: &str = "FirstBurstLength";
pub const DEFAULT_TIME2WAIT: &str = "DefaultTime2Wait";
pub const DEFAULT_TIME2RETAIN: &str = "DefaultTime2Retain";
pub const MAX_OUTSTANDING_R2T: &str = "MaxOutstandingR2T";
pub const DATA_PDU_IN_ORDER: &str = "DataPDUInOrder";
pub const DATA_SEQUENCE_IN_ORDER: &str = "DataSequenceInOrder";
pub const ERROR_RECOVERY_LEVEL: &str = "ErrorRecoveryLevel";
pub const SESSION_TYPE: &str = "SessionType";
pub const TARGET_NAME: &str = "TargetName";
pub const INITIATOR_NAME: &str = "InitiatorName";
pub const TARGET_ALIAS: &str = "TargetAlias";
pub const INITIATOR_ALIAS: &str = "InitiatorAlias";
pub const TARGET_ADDRESS: &str = "TargetAddress";
pub const TARGET_PORTAL_GROUP_TAG: &str = "TargetPortalGroupTag";
pub const AUTH_METHOD: &str = "AuthMethod";
pub const SEND_TARGETS: &str = "SendTargets";
/// RFC 3720 marker keys, obsoleted by RFC 7143 but still sent by older initiators; answered
/// "No" / "Irrelevant" so they keep working (RFC 7143 §13.25 of obsoleted keys).
pub const IF_MARKER: &str = "IFMarker";
pub const OF_MARKER: &str = "OFMarker";
pub const IF_MARK_INT: &str = "IFMarkInt";
pub const OF_MARK_INT: &str = "OFMarkInt";
/// RFC 7144 protocol level; we implement RFC 7143 (level 1).
pub const ISCSI_PROTOCOL_LEVEL: &str = "iSCSIProtocolLevel";

pub const NOT_UNDERSTOOD: &str = "NotUnderstood";
pub const IRRELEVANT: &str = "Irrelevant";
pub const REJECT: &str = "Reject";

/// Key table (RFC 7143 §13.2..§13.21).
pub const KEYS: &[KeySpec] = &[
    spec(HEADER_DIGEST, KeyKind::List, 0, 0, 0, false),
    spec(DATA_DIGEST, KeyKind::List, 0, 0, 0, false),
    spec(MAX_CONNECTIONS, KeyKind::NumMin, 1, 1, 65535, true),
    spec(INITIAL_R2T, KeyKind::BoolOr, NO, YES, YES, true),
    spec(IMMEDIATE_DATA, KeyKind::BoolAnd, NO, YES, YES, true),
    spec(MAX_RECV_DATA_SEGMENT_LENGTH, KeyKind::DeclarativeNum, 512, 8192, N24, false),
    spec(MAX_BURST_LENGTH, KeyKind::NumMin, 512, 262_144, N24, true),
    spec(FIRST_BURST_LENGTH, KeyKind::NumMin, 512, 65_536, N24, true),
    spec(DEFAULT_TIME2WAIT, KeyKind::NumMax, 0, 2, 3600, true),
    spec(DEFAULT_TIME2RETAIN, KeyKind::NumMin, 0, 20, 3600, true),
    spec(MAX_OUTSTANDING_R2T, KeyKind::NumMin, 1, 1, 65535, true),
    spec(DATA_PDU_IN_ORDER, KeyKind::BoolOr, NO, YES, YES, true),
    spec(DATA_SEQUENCE_IN_ORDER, KeyKind::BoolOr, NO, YES, YES, true),
    spec(ERROR_RECOVERY_LEVEL, KeyKind::NumMin, 0, 0, 2, false),
    spec(IF_MARKER, KeyKind::BoolAnd, NO, NO, YES, false),
    spec(OF_MARKER, KeyKind::BoolAnd, NO, NO, YES, false),
    spec(ISCSI_PROTOCOL_LEVEL, KeyKind::NumMin, 0, 0, 31, false),
    spec(SESSION_TYPE, KeyKind::DeclarativeStr, 0, 0, 0, false),
    spec(TARGET_NAME, KeyKind::DeclarativeStr, 0, 0, 0, false),
    spec(INITIATOR_NAME, KeyKind::DeclarativeStr, 0, 0, 0, false),
    spec(TARGET_ALIAS, KeyKind::DeclarativeStr, 0, 0, 0, false),
    spec(INITIATOR_ALIAS, KeyKind::DeclarativeStr, 0, 0, 0, false),
    spec(TARGET_ADDRESS, KeyKind::DeclarativeStr, 0, 0, 0, false),
    spec(TARGET_PORTAL_GROUP_TAG, KeyKind::DeclarativeStr, 0, 0, 0, false),
    spec(AUTH_METHOD, KeyKind::List, 0, 0, 0, false),
];

pub fn lookup(name: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.name == name)
}

/// Parses "Yes"/"No".
pub fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "Yes" => Some(true),
        "No" => Some(false),
        _ => None,
    }
}

pub fn bool_str(b: bool) -> &'static str {
    if b {
        "Yes"
    } else {
        "No"
    }
}

/// Parses a decimal or 0x-hex number (RFC 7143 §6.1 numerical values) within the key's range.
pub fn parse_num(spec: &KeySpec, v: &str) -> Option<u32> {
    let n = if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16).ok()?
    } else {
        if v.is_empty() || v.len() > 10 || !v.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        v.parse::<u32>().ok()?
    };
    (spec.min..=spec.max).contains(&n).then_some(n)
}
