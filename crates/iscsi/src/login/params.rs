//! Negotiated session and connection parameters (the outcome of login, RFC 7143 §13), and the
//! values one side offers ([`Offer`]).

use tessera_types::limits::{BURST_LEN_MAX, DATA_SEGMENT_LEN_MAX};

/// Default MaxRecvDataSegmentLength, in force until a side declares its own (RFC 7143 §13.12);
/// it also bounds login PDUs.
pub const DEFAULT_MAX_RECV_DATA_SEGMENT_LEN: u32 = 8192;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SessionType {
    Discovery,
    #[default]
    Normal,
}

impl SessionType {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionType::Discovery => "Discovery",
            SessionType::Normal => "Normal",
        }
    }
}

/// A digest choice (RFC 7143 §13.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestKind {
    None,
    Crc32c,
}

impl DigestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DigestKind::None => "None",
            DigestKind::Crc32c => "CRC32C",
        }
    }

    pub fn parse(v: &str) -> Option<DigestKind> {
        match v {
            "None" => Some(DigestKind::None),
            "CRC32C" => Some(DigestKind::Crc32c),
            _ => None,
        }
    }
}

/// Everything login settled. Field names follow the RFC keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionParams {
    pub session_type: SessionType,
    pub initiator_name: String,
    pub initiator_alias: Option<String>,
    pub target_name: String,
    pub target_alias: Option<String>,
    pub target_portal_group_tag: u16,
    pub header_digest: bool,
    pub data_digest: bool,
    /// Largest data segment the initiator accepts: bounds every PDU the target sends.
    pub initiator_max_recv_data_segment_len: u32,
    /// Largest data segment the target accepts: bounds every PDU the initiator sends.
    pub target_max_recv_data_segment_len: u32,
    pub max_burst_len: u32,
    pub first_burst_len: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    pub max_connections: u32,
    pub error_recovery_level: u32,
    pub default_time2wait: u32,
    pub default_time2retain: u32,
    pub data_pdu_in_order: bool,
    pub data_sequence_in_order: bool,
}

impl Default for SessionParams {
    /// The RFC defaults (RFC 7143 §13).
    fn default() -> Self {
        SessionParams {
            session_type: SessionType::Normal,
            initiator_name: String::new(),
            initiator_alias: None,
            target_name: String::new(),
            target_alias: None,
            target_portal_group_tag: 1,
            header_digest: false,
            data_digest: false,
            initiator_max_recv_data_segment_len: DEFAULT_MAX_RECV_DATA_SEGMENT_LEN,
            target_max_recv_data_segment_len: DEFAULT_MAX_RECV_DATA_SEGMENT_LEN,
            max_burst_len: 262_144,
            first_burst_len: 65_536,
            immediate_data: true,
            initial_r2t: true,
            max_outstanding_r2t: 1,
            max_connections: 1,
            error_recovery_level: 0,
            default_time2wait: 2,
            default_time2retain: 20,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
        }
    }
}

impl SessionParams {
    /// Bytes of unsolicited data (immediate plus unsolicited Data-Out) an initiator sends for a
    /// command of `data_out_len` bytes (RFC 7143 §4.2.5.2 / §13.13..§13.14).
    pub fn unsolicited_len(&self, data_out_len: u32) -> u32 {
        if self.initial_r2t && !self.immediate_data {
            return 0;
        }
        let cap = self.first_burst_len.min(data_out_len);
        if self.initial_r2t {
            // Only immediate data, one PDU.
            cap.min(self.target_max_recv_data_segment_len)
        } else {
            cap
        }
    }
}

/// What one side proposes (the initiator) or accepts at most (the target).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    /// Header digests in order of preference.
    pub header_digests: Vec<DigestKind>,
    pub data_digests: Vec<DigestKind>,
    pub max_recv_data_segment_len: u32,
    pub max_burst_len: u32,
    pub first_burst_len: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    pub max_connections: u32,
    pub default_time2wait: u32,
    pub default_time2retain: u32,
    pub data_pdu_in_order: bool,
    pub data_sequence_in_order: bool,
}

impl Default for Offer {
    /// Tessera's choice: no R2T round trip on writes (ImmediateData=Yes, InitialR2T=No), the
    /// largest bursts and segments the limits allow, either digest.
    fn default() -> Self {
        Offer {
            header_digests: vec![DigestKind::None, DigestKind::Crc32c],
            data_digests: vec![DigestKind::None, DigestKind::Crc32c],
            max_recv_data_segment_len: DATA_SEGMENT_LEN_MAX,
            max_burst_len: BURST_LEN_MAX,
            first_burst_len: BURST_LEN_MAX,
            immediate_data: true,
            initial_r2t: false,
            max_outstanding_r2t: 1,
            max_connections: 1,
            default_time2wait: 2,
            default_time2retain: 20,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
        }
    }
}
