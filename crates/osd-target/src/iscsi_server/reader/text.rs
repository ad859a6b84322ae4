//! Text Requests in full feature phase (RFC 7143 §11.10) and SendTargets (§6.3.1, Appendix C):
//! `SendTargets=All` in a discovery session lists our target with its address; in a normal
//! session an empty value names the current target. Other keys are answered NotUnderstood.

use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::login::keys::{NOT_UNDERSTOOD, SEND_TARGETS, TARGET_ADDRESS, TARGET_NAME};
use tessera_iscsi::login::SessionType;
use tessera_iscsi::pdu::{reject_reason, Pdu, TextRequest, TextResponse};
use tessera_iscsi::text::{encode_text, parse_text, KeyValue};
use tessera_iscsi::{Incoming, ReadError};

use super::{Fatal, Reader};
use crate::iscsi_server::PORTAL_GROUP_TAG;

impl Reader<'_> {
    pub(super) fn on_text(&mut self, inc: &Incoming, t: TextRequest) -> Result<(), Fatal> {
        let data = match self.pdus.read_data_vec(inc.data_segment_len()) {
            Ok(d) => d,
            Err(ReadError::DataDigest) => {
                self.conn.reject(reject_reason::DATA_DIGEST_ERROR, &inc.bhs)?;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        self.advance_cmd_sn(t.immediate, t.cmd_sn);
        // Multi-PDU text requests (C bit) are not needed by any key we answer; refuse them
        // rather than buffer.
        let pairs = match (t.cont, parse_text(&data)) {
            (false, Ok(p)) => p,
            _ => {
                self.conn.reject(reject_reason::PROTOCOL_ERROR, &inc.bhs)?;
                return Ok(());
            }
        };
        let mut answer: Vec<KeyValue> = Vec::new();
        for (key, value) in &pairs {
            if key == SEND_TARGETS {
                answer.extend(self.send_targets(value));
            } else {
                answer.push((key.clone(), NOT_UNDERSTOOD.to_string()));
            }
        }
        let mut out = Vec::new();
        encode_text(&answer, &mut out);
        let max = self.conn.params.initiator_max_recv_data_segment_len as usize;
        out.truncate(max);
        let lun = t.lun;
        let itt = t.itt;
        self.conn.send_status(
            |stat_sn, exp_cmd_sn, max_cmd_sn| {
                Pdu::TextResponse(TextResponse {
                    final_bit: true,
                    cont: false,
                    lun,
                    itt,
                    ttt: RESERVED_TAG,
                    stat_sn,
                    exp_cmd_sn,
                    max_cmd_sn,
                })
            },
            &[&out],
        )?;
        Ok(())
    }

    fn send_targets(&self, value: &str) -> Vec<KeyValue> {
        let config = &self.conn.server.config;
        let discovery = self.conn.params.session_type == SessionType::Discovery;
        let wanted = match value {
            "All" => discovery,
            "" => !discovery,
            name => name == config.target_name,
        };
        if !wanted {
            return Vec::new();
        }
        let address = config.advertised_address.clone().unwrap_or_else(|| match self.conn.socket.local_addr() {
            Ok(std::net::SocketAddr::V6(a)) => format!("[{}]:{}", a.ip(), a.port()),
            Ok(a) => a.to_string(),
            Err(_) => config.portal.clone(),
        });
        vec![
            (TARGET_NAME.to_string(), config.target_name.clone()),
            (TARGET_ADDRESS.to_string(), format!("{address},{PORTAL_GROUP_TAG}")),
        ]
    }
}
