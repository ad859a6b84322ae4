//! The initiator's login exchange (RFC 7143 §6.3, §11.12): security stage with AuthMethod=None
//! and the names, then operational negotiation through [`InitiatorNegotiator`], until the target
//! answers the transit to full feature phase. Shared by [`super::Session`] and
//! [`super::RawConnection`].

use std::io::{Read, Write};

use tessera_iscsi::login::keys::{AUTH_METHOD, INITIATOR_NAME, SESSION_TYPE, TARGET_NAME};
use tessera_iscsi::login::{InitiatorNegotiator, SessionParams, SessionType};
use tessera_iscsi::pdu::{LoginRequest, Pdu, STAGE_FULL_FEATURE, STAGE_OPERATIONAL, STAGE_SECURITY};
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

pub(crate) fn read_err(peer: &str, e: tessera_iscsi::ReadError) -> TransportError {
    match e {
        tessera_iscsi::ReadError::Closed => TransportError::SessionClosed { peer: peer.to_string() },
        tessera_iscsi::ReadError::Io(io) => io_err(peer, io),
        other => proto(peer, other.to_string()),
    }
}

/// Runs login on a fresh connection. `target_name` is required for normal sessions.
pub fn login<R: Read, W: Write>(
    reader: &mut PduReader<R>,
    writer: &mut PduWriter<W>,
    isid: [u8; 6],
    mut neg: InitiatorNegotiator,
    peer: &str,
) -> Result<LoginResult, TransportError> {
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
    security.push((AUTH_METHOD.into(), "None".into()));
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
                return Err(TransportError::LoginRefused {
                    peer: peer.to_string(),
                    reason: format!("status class {:#04x} detail {:#04x}", rsp.status_class, rsp.status_detail),
                });
            }
            if !rsp.cont {
                break rsp;
            }
            let more = LoginRequest { transit: false, cont: false, csg: stage, nsg: 0, isid, cmd_sn, exp_stat_sn, ..Default::default() };
            writer.write_pdu(&Pdu::LoginRequest(more), &[]).map_err(|e| io_err(peer, e))?;
        };
        let answers = text.take().map_err(|e| proto(peer, e.to_string()))?;
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
