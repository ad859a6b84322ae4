//! Operational parameter negotiation (RFC 7143 §6.2, §13) as pure functions over parsed text:
//! [`TargetNegotiator`] answers an initiator's offers; [`InitiatorNegotiator`] builds offers and
//! checks the answers. No sockets: the login exchange feeds them text and reads text back.

use thiserror::Error;

use super::auth::is_security_key;
use super::keys::*;
use super::params::{DigestKind, Offer, SessionParams, SessionType};
use crate::text::{find, KeyValue};

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NegotiationError {
    #[error("{key}={value} is outside what was offered or allowed")]
    Violates { key: String, value: String },
    #[error("unknown SessionType {0:?}")]
    SessionType(String),
}

fn num(spec_name: &str, v: &str) -> Option<u32> {
    lookup(spec_name).and_then(|s| parse_num(s, v))
}

fn pick_digest(offered: &str, allowed: &[DigestKind]) -> Option<DigestKind> {
    offered.split(',').filter_map(DigestKind::parse).find(|d| allowed.contains(d))
}

/// Numeric result functions; `None` for non-numeric kinds.
fn numeric_result(kind: KeyKind, theirs: u32, ours: u32) -> Option<u32> {
    match kind {
        KeyKind::NumMin => Some(theirs.min(ours)),
        KeyKind::NumMax => Some(theirs.max(ours)),
        KeyKind::BoolAnd => Some(((theirs != 0) && (ours != 0)) as u32),
        KeyKind::BoolOr => Some(((theirs != 0) || (ours != 0)) as u32),
        _ => None,
    }
}

/// Writes a negotiated numeric or boolean value into `params`.
fn store(params: &mut SessionParams, key: &str, v: u32) {
    match key {
        MAX_CONNECTIONS => params.max_connections = v,
        INITIAL_R2T => params.initial_r2t = v != 0,
        IMMEDIATE_DATA => params.immediate_data = v != 0,
        MAX_BURST_LENGTH => params.max_burst_len = v,
        FIRST_BURST_LENGTH => params.first_burst_len = v,
        DEFAULT_TIME2WAIT => params.default_time2wait = v,
        DEFAULT_TIME2RETAIN => params.default_time2retain = v,
        MAX_OUTSTANDING_R2T => params.max_outstanding_r2t = v,
        DATA_PDU_IN_ORDER => params.data_pdu_in_order = v != 0,
        DATA_SEQUENCE_IN_ORDER => params.data_sequence_in_order = v != 0,
        ERROR_RECOVERY_LEVEL => params.error_recovery_level = v,
        _ => {}
    }
}

/// Our value of a negotiable numeric/boolean key.
fn ours(offer: &Offer, key: &str) -> Option<u32> {
    Some(match key {
        MAX_CONNECTIONS => offer.max_connections,
        INITIAL_R2T => offer.initial_r2t as u32,
        IMMEDIATE_DATA => offer.immediate_data as u32,
        MAX_BURST_LENGTH => offer.max_burst_len,
        FIRST_BURST_LENGTH => offer.first_burst_len,
        DEFAULT_TIME2WAIT => offer.default_time2wait,
        DEFAULT_TIME2RETAIN => offer.default_time2retain,
        MAX_OUTSTANDING_R2T => offer.max_outstanding_r2t,
        DATA_PDU_IN_ORDER => offer.data_pdu_in_order as u32,
        DATA_SEQUENCE_IN_ORDER => offer.data_sequence_in_order as u32,
        // ErrorRecoveryLevel 0 is all either side implements.
        ERROR_RECOVERY_LEVEL => 0,
        IF_MARKER | OF_MARKER => 0,
        ISCSI_PROTOCOL_LEVEL => 1,
        _ => return None,
    })
}

fn value_str(kind: KeyKind, v: u32) -> String {
    match kind {
        KeyKind::BoolAnd | KeyKind::BoolOr => bool_str(v != 0).to_string(),
        _ => v.to_string(),
    }
}

/// Keeps FirstBurstLength within MaxBurstLength (RFC 7143 §13.14).
fn settle(params: &mut SessionParams) {
    params.first_burst_len = params.first_burst_len.min(params.max_burst_len);
}

/// The target's half of negotiation.
#[derive(Debug)]
pub struct TargetNegotiator {
    offer: Offer,
    pub params: SessionParams,
    declared_mrdsl: bool,
}

impl TargetNegotiator {
    pub fn new(offer: Offer) -> Self {
        let params = SessionParams { target_max_recv_data_segment_len: offer.max_recv_data_segment_len, ..SessionParams::default() };
        TargetNegotiator { offer, params, declared_mrdsl: false }
    }

    /// Answers one batch of offers and records the outcome in `self.params`. SessionType is
    /// read first so that session-wide keys in a discovery session are answered Irrelevant.
    pub fn respond(&mut self, pairs: &[KeyValue]) -> Result<Vec<KeyValue>, NegotiationError> {
        if let Some(t) = find(pairs, SESSION_TYPE) {
            self.params.session_type = match t {
                "Discovery" => SessionType::Discovery,
                "Normal" => SessionType::Normal,
                other => return Err(NegotiationError::SessionType(other.to_string())),
            };
        }
        let mut out = Vec::new();
        for (key, value) in pairs {
            if let Some(answer) = self.answer(key, value) {
                out.push((key.clone(), answer));
            }
        }
        settle(&mut self.params);
        Ok(out)
    }

    fn answer(&mut self, key: &str, value: &str) -> Option<String> {
        if is_security_key(key) {
            // Answered by the security stage (`auth::TargetAuth`).
            return None;
        }
        let Some(spec) = lookup(key) else {
            return Some(match key {
                IF_MARK_INT | OF_MARK_INT => IRRELEVANT.to_string(),
                _ => NOT_UNDERSTOOD.to_string(),
            });
        };
        let discovery = self.params.session_type == SessionType::Discovery;
        if spec.normal_only && discovery {
            return Some(IRRELEVANT.to_string());
        }
        match key {
            INITIATOR_NAME => self.params.initiator_name = value.to_string(),
            INITIATOR_ALIAS => self.params.initiator_alias = Some(value.to_string()),
            TARGET_NAME => self.params.target_name = value.to_string(),
            SESSION_TYPE => {}
            // Only the target declares these.
            TARGET_ALIAS | TARGET_ADDRESS | TARGET_PORTAL_GROUP_TAG => return Some(REJECT.to_string()),
            HEADER_DIGEST | DATA_DIGEST => {
                let header = key == HEADER_DIGEST;
                let allowed = if header { &self.offer.header_digests } else { &self.offer.data_digests };
                let Some(d) = pick_digest(value, allowed) else { return Some(REJECT.to_string()) };
                if header {
                    self.params.header_digest = d == DigestKind::Crc32c;
                } else {
                    self.params.data_digest = d == DigestKind::Crc32c;
                }
                return Some(d.as_str().to_string());
            }
            MAX_RECV_DATA_SEGMENT_LENGTH => {
                let Some(v) = parse_num(spec, value) else { return Some(REJECT.to_string()) };
                self.params.initiator_max_recv_data_segment_len = v;
                // Declarative: answering with our own declaration is how the target declares.
                self.declared_mrdsl = true;
                return Some(self.offer.max_recv_data_segment_len.to_string());
            }
            FIRST_BURST_LENGTH if self.params.initial_r2t && !self.params.immediate_data && !self.offer.immediate_data => {
                return Some(IRRELEVANT.to_string());
            }
            _ => {
                let theirs = match spec.kind {
                    KeyKind::BoolAnd | KeyKind::BoolOr => parse_bool(value).map(|b| b as u32),
                    _ => parse_num(spec, value),
                };
                let Some(theirs) = theirs else { return Some(REJECT.to_string()) };
                let Some(mine) = ours(&self.offer, key) else { return Some(NOT_UNDERSTOOD.to_string()) };
                let result = numeric_result(spec.kind, theirs, mine)?;
                store(&mut self.params, key, result);
                return Some(value_str(spec.kind, result));
            }
        }
        None
    }

    /// Declarations the target adds on its own, once: its MaxRecvDataSegmentLength when the
    /// initiator did not mention the key.
    pub fn declarations(&mut self) -> Vec<KeyValue> {
        if self.declared_mrdsl {
            return Vec::new();
        }
        self.declared_mrdsl = true;
        vec![(MAX_RECV_DATA_SEGMENT_LENGTH.to_string(), self.offer.max_recv_data_segment_len.to_string())]
    }
}

/// The initiator's half of negotiation.
#[derive(Debug)]
pub struct InitiatorNegotiator {
    offer: Offer,
    pub params: SessionParams,
}

impl InitiatorNegotiator {
    pub fn new(offer: Offer, initiator_name: &str, target_name: &str, session_type: SessionType) -> Self {
        let params = SessionParams {
            session_type,
            initiator_name: initiator_name.to_string(),
            target_name: target_name.to_string(),
            initiator_max_recv_data_segment_len: offer.max_recv_data_segment_len,
            ..SessionParams::default()
        };
        InitiatorNegotiator { offer, params }
    }

    /// The operational keys to offer (the security-stage names are sent by the login code).
    pub fn offers(&self) -> Vec<KeyValue> {
        let o = &self.offer;
        let list = |ds: &[DigestKind]| ds.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(",");
        let mut v: Vec<(&str, String)> = vec![
            (HEADER_DIGEST, list(&o.header_digests)),
            (DATA_DIGEST, list(&o.data_digests)),
            (MAX_RECV_DATA_SEGMENT_LENGTH, o.max_recv_data_segment_len.to_string()),
        ];
        if self.params.session_type == SessionType::Normal {
            v.extend([
                (MAX_CONNECTIONS, o.max_connections.to_string()),
                (INITIAL_R2T, bool_str(o.initial_r2t).to_string()),
                (IMMEDIATE_DATA, bool_str(o.immediate_data).to_string()),
                (MAX_BURST_LENGTH, o.max_burst_len.to_string()),
                (FIRST_BURST_LENGTH, o.first_burst_len.to_string()),
                (DEFAULT_TIME2WAIT, o.default_time2wait.to_string()),
                (DEFAULT_TIME2RETAIN, o.default_time2retain.to_string()),
                (MAX_OUTSTANDING_R2T, o.max_outstanding_r2t.to_string()),
                (DATA_PDU_IN_ORDER, bool_str(o.data_pdu_in_order).to_string()),
                (DATA_SEQUENCE_IN_ORDER, bool_str(o.data_sequence_in_order).to_string()),
                (ERROR_RECOVERY_LEVEL, "0".to_string()),
            ]);
        }
        v.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// Checks and records the target's answers. Keys answered NotUnderstood, Irrelevant or
    /// Reject keep their RFC defaults.
    pub fn apply(&mut self, pairs: &[KeyValue]) -> Result<(), NegotiationError> {
        let recorded = self.record(pairs);
        // Also after a refused answer, so the parameters never break FirstBurstLength <=
        // MaxBurstLength, whatever stage the answers stopped at.
        settle(&mut self.params);
        recorded
    }

    fn record(&mut self, pairs: &[KeyValue]) -> Result<(), NegotiationError> {
        for (key, value) in pairs {
            let violates = || NegotiationError::Violates { key: key.clone(), value: value.clone() };
            if matches!(value.as_str(), NOT_UNDERSTOOD | IRRELEVANT | REJECT) {
                continue;
            }
            match key.as_str() {
                TARGET_ALIAS => self.params.target_alias = Some(value.clone()),
                TARGET_PORTAL_GROUP_TAG => {
                    self.params.target_portal_group_tag = value.parse().map_err(|_| violates())?
                }
                HEADER_DIGEST | DATA_DIGEST => {
                    let header = key == HEADER_DIGEST;
                    let offered = if header { &self.offer.header_digests } else { &self.offer.data_digests };
                    let d = DigestKind::parse(value).filter(|d| offered.contains(d)).ok_or_else(violates)?;
                    if header {
                        self.params.header_digest = d == DigestKind::Crc32c;
                    } else {
                        self.params.data_digest = d == DigestKind::Crc32c;
                    }
                }
                MAX_RECV_DATA_SEGMENT_LENGTH => {
                    self.params.target_max_recv_data_segment_len = num(key, value).ok_or_else(violates)?;
                }
                _ => {
                    let Some(spec) = lookup(key) else { continue };
                    let theirs = match spec.kind {
                        KeyKind::BoolAnd | KeyKind::BoolOr => parse_bool(value).map(|b| b as u32),
                        KeyKind::NumMin | KeyKind::NumMax => parse_num(spec, value),
                        _ => continue,
                    };
                    let theirs = theirs.ok_or_else(violates)?;
                    let Some(mine) = ours(&self.offer, key) else { continue };
                    // The answer must be what the result function can produce from our offer.
                    let ok = match spec.kind {
                        KeyKind::NumMin => theirs <= mine,
                        KeyKind::NumMax => theirs >= mine,
                        KeyKind::BoolAnd => mine != 0 || theirs == 0,
                        KeyKind::BoolOr => mine == 0 || theirs != 0,
                        _ => true,
                    };
                    if !ok {
                        return Err(violates());
                    }
                    store(&mut self.params, key, theirs);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
