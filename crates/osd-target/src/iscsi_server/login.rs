//! The target's login phase (RFC 7143 §6.3, §11.12, §11.13): security stage through
//! [`TargetAuth`] (CHAP when the target has secrets, AuthMethod=None otherwise), operational
//! negotiation through [`TargetNegotiator`], then the final response with the new TSIH. Login PDUs are bounded by the default MaxRecvDataSegmentLength (8192) and the
//! text of one stage by `limits::TEXT_LEN_MAX`.
//!
//! ```text
//!  start --CSG=0--> security --T,NSG=1--> operational --T,NSG=3--> full feature
//!        \--CSG=1-----------------------/          \--(CSG=0,T,NSG=3)--/
//! ```

use std::io;
use std::net::TcpStream;
use std::sync::atomic::Ordering;

use tessera_iscsi::login::keys::{INITIATOR_NAME, TARGET_ALIAS, TARGET_NAME, TARGET_PORTAL_GROUP_TAG};
use tessera_iscsi::login::auth::{AuthError, Challenge, TargetAuth, CHALLENGE_LEN};
use tessera_iscsi::login::{SessionParams, SessionType, TargetNegotiator};
use tessera_iscsi::pdu::{login_status, LoginRequest, LoginResponse, Pdu, STAGE_FULL_FEATURE, STAGE_OPERATIONAL, STAGE_SECURITY};
use tessera_iscsi::text::{encode_text, find, KeyValue, TextBuffer};
use tessera_iscsi::{PduReader, PduWriter, ReadError};
use tessera_scsi::Nexus;
use tessera_types::limits::CMD_WINDOW;
use tracing::{debug, info, warn};

use super::reinstatement::{PortClaim, StillEnding, REINSTATEMENT_WAIT};
use super::{ServerShared, PORTAL_GROUP_TAG};

/// The StatSN of our login responses; the full feature phase continues from the next number.
const INITIAL_STAT_SN: u32 = 1;
/// iSCSI version 0 is the only one defined (RFC 7143 §11.12.4).
const ISCSI_VERSION: u8 = 0;

pub(crate) struct LoginOutcome {
    pub params: SessionParams,
    pub nexus: Nexus,
    /// StatSN of the first full-feature status.
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    /// A normal session's hold on its initiator port (reinstatement.rs), kept until the
    /// connection has ended.
    pub claim: Option<PortClaim>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    #[error("read: {0}")]
    Read(#[from] ReadError),
    #[error("write: {0}")]
    Write(#[from] io::Error),
    #[error("expected a Login Request, got {0}")]
    NotLogin(String),
}

struct Exchange<'a> {
    writer: &'a mut PduWriter<TcpStream>,
    first: LoginRequest,
}

impl Exchange<'_> {
    fn respond(&mut self, req: &LoginRequest, status: (u8, u8), tsih: u16, text: &[KeyValue], transit: bool) -> io::Result<()> {
        let mut data = Vec::new();
        encode_text(text, &mut data);
        let rsp = LoginResponse {
            transit,
            cont: false,
            csg: req.csg,
            nsg: if transit { req.nsg } else { 0 },
            version_max: ISCSI_VERSION,
            version_active: ISCSI_VERSION,
            isid: self.first.isid,
            tsih,
            itt: req.itt,
            stat_sn: INITIAL_STAT_SN,
            exp_cmd_sn: self.first.cmd_sn,
            max_cmd_sn: self.first.cmd_sn.wrapping_add(CMD_WINDOW - 1),
            status_class: status.0,
            status_detail: status.1,
        };
        self.writer.write_pdu(&Pdu::LoginResponse(rsp), &[&data])
    }

    /// Sends a failure status; the connection then closes (RFC 7143 §11.13.5).
    fn fail(&mut self, req: &LoginRequest, status: (u8, u8), why: &str) -> Result<Option<LoginOutcome>, LoginError> {
        debug!(class = status.0, detail = status.1, why, "login refused");
        self.respond(req, status, 0, &[], false)?;
        Ok(None)
    }
}

fn read_login(reader: &mut PduReader<TcpStream>, text: &mut TextBuffer) -> Result<Result<LoginRequest, &'static str>, LoginError> {
    let inc = reader.read_header()?;
    let data = reader.read_data_vec(inc.data_segment_len())?;
    match inc.pdu {
        Ok(Pdu::LoginRequest(req)) => Ok(match text.push(&data) {
            Ok(()) => Ok(req),
            Err(_) => Err("login text too long"),
        }),
        Ok(other) => Err(LoginError::NotLogin(format!("{:?}", other.opcode()))),
        Err(e) => Err(LoginError::NotLogin(e.to_string())),
    }
}

/// Runs login; `Ok(None)` when the login was refused (a response was sent).
pub(crate) fn login(
    server: &ServerShared,
    reader: &mut PduReader<TcpStream>,
    writer: &mut PduWriter<TcpStream>,
) -> Result<Option<LoginOutcome>, LoginError> {
    let mut text = TextBuffer::default();
    let mut req = match read_login(reader, &mut text)? {
        Ok(r) => r,
        Err(_) => return Ok(None),
    };
    let mut ex = Exchange { writer, first: req.clone() };
    let Some(challenge) = fresh_challenge() else {
        return ex.fail(&req, login_status::TARGET_ERROR, "no randomness for a CHAP challenge");
    };
    let mut auth = TargetAuth::new(server.config.chap.clone(), challenge);
    let mut neg = TargetNegotiator::new(server.config.offer.clone());
    let mut first_response = true;
    let mut initiator_name: Option<String> = None;
    loop {
        if req.version_min > ISCSI_VERSION {
            return ex.fail(&req, (0x02, 0x05), "unsupported version");
        }
        if req.isid != ex.first.isid || req.tsih != ex.first.tsih {
            return ex.fail(&req, login_status::INITIATOR_ERROR, "ISID/TSIH changed during login");
        }
        if req.tsih != 0 {
            // Adding a connection to a session: MaxConnections=1. Reinstatement is by ISID
            // with TSIH 0 (reinstatement.rs).
            return ex.fail(&req, login_status::SESSION_DOES_NOT_EXIST, "connection join not supported");
        }
        if req.cont {
            // RFC 7143 §11.12.2: answer each partial text with an empty response.
            ex.respond(&req, login_status::SUCCESS, 0, &[], false)?;
            req = match read_login(reader, &mut text)? {
                Ok(r) => r,
                Err(why) => return ex.fail(&ex.first.clone(), login_status::INITIATOR_ERROR, why),
            };
            continue;
        }
        let pairs = match text.take() {
            Ok(p) => p,
            Err(_) => return ex.fail(&req, login_status::INITIATOR_ERROR, "malformed login text"),
        };
        if req.csg != STAGE_SECURITY && req.csg != STAGE_OPERATIONAL {
            return ex.fail(&req, login_status::INITIATOR_ERROR, "bad current stage");
        }
        if req.transit && (req.nsg <= req.csg || req.nsg == 2) {
            return ex.fail(&req, login_status::INITIATOR_ERROR, "bad next stage");
        }
        if let Some(n) = find(&pairs, INITIATOR_NAME) {
            initiator_name = Some(n.to_string());
        }
        let mut answer = match neg.respond(&pairs) {
            Ok(a) => a,
            Err(_) => return ex.fail(&req, login_status::INITIATOR_ERROR, "bad SessionType"),
        };
        if first_response {
            let Some(_) = &initiator_name else {
                return ex.fail(&req, login_status::MISSING_PARAMETER, "no InitiatorName");
            };
            if neg.params.session_type == SessionType::Normal {
                match find(&pairs, TARGET_NAME) {
                    None => return ex.fail(&req, login_status::MISSING_PARAMETER, "no TargetName"),
                    Some(t) if t != server.config.target_name => {
                        return ex.fail(&req, login_status::NOT_FOUND, "unknown TargetName")
                    }
                    Some(_) => {}
                }
                // RFC 7143 §13.9: TargetPortalGroupTag in the first response of a normal session.
                answer.push((TARGET_PORTAL_GROUP_TAG.to_string(), PORTAL_GROUP_TAG.to_string()));
                if let Some(alias) = &server.config.alias {
                    answer.push((TARGET_ALIAS.to_string(), alias.clone()));
                }
            }
            first_response = false;
        }
        let transit = match security_stage(&mut auth, &req, &pairs) {
            Ok((keys, transit)) => {
                answer.extend(keys);
                transit
            }
            Err(e) => return refuse_authentication(server, &mut ex, &req, initiator_name.as_deref(), reader, &e),
        };
        let to_ffp = transit && req.nsg == STAGE_FULL_FEATURE;
        if req.csg == STAGE_OPERATIONAL || to_ffp {
            answer.extend(neg.declarations());
        }
        if !to_ffp {
            ex.respond(&req, login_status::SUCCESS, 0, &answer, transit)?;
            req = match read_login(reader, &mut text)? {
                Ok(r) => r,
                Err(why) => return ex.fail(&ex.first.clone(), login_status::INITIATOR_ERROR, why),
            };
            continue;
        }
        // Final response: allocate the session, after ending any live session of the same
        // initiator port (reinstatement), which also frees its place under `sessions_max`.
        let normal = neg.params.session_type == SessionType::Normal;
        let session_id = server.allocate_session_id();
        let isid_hex: String = ex.first.isid.iter().map(|b| format!("{b:02x}")).collect();
        let initiator_port = format!("{},i,0x{isid_hex}", neg.params.initiator_name);
        let claim = if normal {
            let socket = reader.get_ref().try_clone()?;
            match server.ports.claim(&initiator_port, session_id, socket, REINSTATEMENT_WAIT) {
                Ok(claim) => Some(claim),
                Err(StillEnding) => {
                    warn!(initiator_port, "login refused: the session it reinstates is still running a command");
                    return ex.fail(&req, login_status::SERVICE_UNAVAILABLE, "old session still ending");
                }
            }
        } else {
            None
        };
        if normal && server.sessions.fetch_add(1, Ordering::AcqRel) >= server.config.sessions_max {
            server.sessions.fetch_sub(1, Ordering::AcqRel);
            return ex.fail(&req, login_status::OUT_OF_RESOURCES, "too many sessions");
        }
        if claim.as_ref().is_some_and(|c| c.reinstated) {
            server.reinstated.fetch_add(1, Ordering::Relaxed);
            info!(initiator_port, session = session_id, "session reinstated: the old one is closed and its tasks ended");
        }
        let tsih = (session_id & 0xFFFF) as u16;
        if let Err(e) = ex.respond(&req, login_status::SUCCESS, tsih, &answer, true) {
            if normal {
                server.sessions.fetch_sub(1, Ordering::AcqRel);
            }
            return Err(e.into());
        }
        let mut params = neg.params;
        params.target_name = server.config.target_name.clone();
        params.target_alias = server.config.alias.clone();
        params.target_portal_group_tag = PORTAL_GROUP_TAG;
        let nexus = Nexus { initiator_port, session_id };
        return Ok(Some(LoginOutcome {
            params,
            nexus,
            stat_sn: INITIAL_STAT_SN.wrapping_add(1),
            exp_cmd_sn: ex.first.cmd_sn,
            claim,
        }));
    }
}

/// The security stage's answer to one request and whether the initiator may move on: in the
/// security stage the auth keys are answered and the T bit granted only once authenticated;
/// later stages carry no auth keys and start only after authentication.
fn security_stage(auth: &mut TargetAuth, req: &LoginRequest, pairs: &[KeyValue]) -> Result<(Vec<KeyValue>, bool), AuthError> {
    if req.csg == STAGE_SECURITY {
        let keys = auth.respond(pairs)?;
        Ok((keys, auth.may_transit(req.transit)?))
    } else {
        auth.check_operational(pairs)?;
        Ok((Vec::new(), req.transit))
    }
}

/// A challenge from the operating system's CSPRNG; `None` if it cannot give one.
fn fresh_challenge() -> Option<Challenge> {
    let mut random = [0u8; 1 + CHALLENGE_LEN];
    getrandom::fill(&mut random).ok()?;
    Some(Challenge::from_random(random))
}

/// Answers Authentication failure (0x0201), counts it and logs why (never a secret). Loud for
/// the first failures, then at powers of two, so a flood of bad logins cannot drown the log.
fn refuse_authentication(
    server: &ServerShared,
    ex: &mut Exchange<'_>,
    req: &LoginRequest,
    initiator: Option<&str>,
    reader: &PduReader<TcpStream>,
    why: &AuthError,
) -> Result<Option<LoginOutcome>, LoginError> {
    let count = server.auth_failures.fetch_add(1, Ordering::Relaxed) + 1;
    let peer = reader.get_ref().peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let initiator = initiator.unwrap_or("(no InitiatorName)");
    if count <= 16 || count.is_power_of_two() {
        warn!(%peer, initiator, count, "iSCSI login refused, authentication failed: {why}");
    } else {
        debug!(%peer, initiator, count, "iSCSI login refused, authentication failed: {why}");
    }
    ex.fail(req, login_status::AUTHENTICATION_FAILED, "authentication failed")
}
