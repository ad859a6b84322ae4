//! The initiator's login exchange (RFC 7143 §6.3, §11.12): security stage with the names and
//! [`InitiatorAuth`] (CHAP when the session has credentials), then operational negotiation
//! through [`InitiatorNegotiator`], until the target answers the transit to full feature
//! phase. Shared by [`super::Session`] and [`super::RawConnection`].

use std::io::{Read, Write};

use tessera_iscsi::login::auth::{AuthError, ChapSecrets, Challenge, InitiatorAuth, CHALLENGE_LEN};
use tessera_iscsi::login::keys::{INITIATOR_NAME, SESSION_TYPE, TARGET_NAME};
use tessera_iscsi::login::{InitiatorNegotiator, SessionParams, SessionType};
use tessera_iscsi::pdu::{login_status, LoginRequest, Pdu, STAGE_FULL_FEATURE, STAGE_OPERATIONAL, STAGE_SECURITY};
use tessera_iscsi::text::{encode_text, KeyValue, TextBuffer};
use tessera_iscsi::{PduReader, PduWriter};
use tessera_scsi::TransportError;

/// Login round trips before we give up on a target that never lets us transit.
const LOGIN_ROUNDS_MAX: usize = 16;

/// Sequence numbers at the start of full feature phase.
#[derive(Clone, Debug)]
pub struct LoginResult {
    pub params: SessionParams,
    pub tsih: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub max_cmd_sn: u32,
}

pub(crate) fn proto(peer: &str, detail: impl Into<String>) -> TransportError {
    TransportError::Protocol { peer: peer.to_string(), detail: detail.into() }
}

pub(crate) fn io_err(peer: &str, e: impl Into<std::io::Error>) -> TransportError {
    TransportError::Io { peer: peer.to_string(), source: e.into() }
}

/// A socket read that timed out (`e`), said as the liveness check says it: the peer did not
/// answer for `secs`. Any other error is returned as it is.
pub(crate) fn as_unresponsive(e: TransportError, peer: &str, secs: u64) -> TransportError {
    match e {
        TransportError::Io { ref source, .. } if matches!(source.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            TransportError::Unresponsive { peer: peer.to_string(), secs }
        }
        other => other,
    }
}

pub(crate) fn read_err(peer: &str, e: tessera_iscsi::ReadError) -> TransportError {
    match e {
        tessera_iscsi::ReadError::Closed => TransportError::SessionClosed { peer: peer.to_string() },
        tessera_iscsi::ReadError::Io(io) => io_err(peer, io),
        tessera_iscsi::ReadError::Idle => io_err(peer, std::io::Error::new(std::io::ErrorKind::TimedOut, "the target did not answer in time")),
        other => proto(peer, other.to_string()),
    }
}

fn auth_err(peer: &str, e: AuthError) -> TransportError {
    TransportError::AuthenticationFailed { peer: peer.to_string(), reason: e.to_string() }
}

/// What a refused login's status means, with what to check (RFC 7143 §11.13.5).
fn refusal(peer: &str, class: u8, detail: u8, chap: bool) -> TransportError {
    if (class, detail) == login_status::AUTHENTICATION_FAILED {
        let reason = if chap {
            "the target refused our CHAP credentials (status 0x0201): check that the user and secret match the target's CHAP secret file"
        } else {
            "the target requires authentication (status 0x0201): give this initiator the target's CHAP secret file"
        };
        return TransportError::AuthenticationFailed { peer: peer.to_string(), reason: reason.to_string() };
    }
    if (class, detail) == login_status::SERVICE_UNAVAILABLE {
        let reason = "service unavailable (status 0x0301): the target is still ending this initiator port's previous session, whose running command has not returned; retry later, and check the target's disk and log if it persists";
        return TransportError::LoginRefused { peer: peer.to_string(), reason: reason.to_string() };
    }
    if (class, detail) == login_status::OUT_OF_RESOURCES {
        let reason = "out of resources (status 0x0302): the target serves as many sessions as it takes; retry later, or raise the OSD's file descriptor limit (its log says what it serves)";
        return TransportError::LoginRefused { peer: peer.to_string(), reason: reason.to_string() };
    }
    TransportError::LoginRefused { peer: peer.to_string(), reason: format!("status class {class:#04x} detail {detail:#04x}") }
}

/// A mutual-CHAP challenge from the operating system's CSPRNG.
fn fresh_challenge(peer: &str) -> Result<Challenge, TransportError> {
    let mut random = [0u8; 1 + CHALLENGE_LEN];
    getrandom::fill(&mut random).map_err(|e| io_err(peer, std::io::Error::other(e.to_string())))?;
    Ok(Challenge::from_random(random))
}

/// Runs login on a fresh connection. `target_name` is required for normal sessions; `chap`
/// makes the security stage run CHAP.
pub fn login<R: Read, W: Write>(
    reader: &mut PduReader<R>,
    writer: &mut PduWriter<W>,
    isid: [u8; 6],
    mut neg: InitiatorNegotiator,
    chap: Option<ChapSecrets>,
    peer: &str,
) -> Result<LoginResult, TransportError> {
    let uses_chap = chap.is_some();
    let mut auth = InitiatorAuth::new(chap, fresh_challenge(peer)?);
    let session_type = neg.params.session_type;
    let cmd_sn = 1u32;
    let mut exp_stat_sn = 0u32;
    let mut security: Vec<KeyValue> = vec![
        (INITIATOR_NAME.into(), neg.params.initiator_name.clone()),
        (SESSION_TYPE.into(), session_type.as_str().into()),
    ];
    if session_type == SessionType::Normal {
        security.push((TARGET_NAME.into(), neg.params.target_name.clone()));
    }
    security.extend(auth.offer());
    let mut stage = STAGE_SECURITY;
    let mut pending: Vec<KeyValue> = security;
    let mut offered_operational = false;
    for _ in 0..LOGIN_ROUNDS_MAX {
        if stage == STAGE_OPERATIONAL && !offered_operational {
            pending.extend(neg.offers());
            offered_operational = true;
        }
        let nsg = if stage == STAGE_SECURITY { STAGE_OPERATIONAL } else { STAGE_FULL_FEATURE };
        let req = LoginRequest {
            transit: true,
            cont: false,
            csg: stage,
            nsg,
            version_max: 0,
            version_min: 0,
            isid,
            tsih: 0,
            itt: 0,
            cid: 0,
            cmd_sn,
            exp_stat_sn,
        };
        let mut data = Vec::new();
        encode_text(&pending, &mut data);
        pending.clear();
        writer.write_pdu(&Pdu::LoginRequest(req), &[&data]).map_err(|e| io_err(peer, e))?;
        // Read the response, following C-bit continuations.
        let mut text = TextBuffer::default();
        let rsp = loop {
            let inc = reader.read_header().map_err(|e| read_err(peer, e))?;
            let body = reader.read_data_vec(inc.data_segment_len()).map_err(|e| read_err(peer, e))?;
            let rsp = match inc.pdu {
                Ok(Pdu::LoginResponse(r)) => r,
                Ok(other) => return Err(proto(peer, format!("expected Login Response, got {:?}", other.opcode()))),
                Err(e) => return Err(proto(peer, e.to_string())),
            };
            text.push(&body).map_err(|e| proto(peer, e.to_string()))?;
            exp_stat_sn = rsp.stat_sn.wrapping_add(1);
            if rsp.status_class != 0 {
                return Err(refusal(peer, rsp.status_class, rsp.status_detail, uses_chap));
            }
            if !rsp.cont {
                break rsp;
            }
            let more = LoginRequest { transit: false, cont: false, csg: stage, nsg: 0, isid, cmd_sn, exp_stat_sn, ..Default::default() };
            writer.write_pdu(&Pdu::LoginRequest(more), &[]).map_err(|e| io_err(peer, e))?;
        };
        let answers = text.take().map_err(|e| proto(peer, e.to_string()))?;
        if stage == STAGE_SECURITY {
            pending = auth.on_answer(&answers).map_err(|e| auth_err(peer, e))?;
            if rsp.transit {
                auth.check_transit().map_err(|e| auth_err(peer, e))?;
            }
        }
        neg.apply(&answers).map_err(|e| proto(peer, e.to_string()))?;
        let max_cmd_sn = rsp.max_cmd_sn;
        if rsp.transit {
            if rsp.nsg == STAGE_FULL_FEATURE {
                return Ok(LoginResult { params: neg.params, tsih: rsp.tsih, cmd_sn, exp_stat_sn, max_cmd_sn });
            }
            stage = rsp.nsg;
        }
    }
    Err(proto(peer, "login did not reach full feature phase"))
}
