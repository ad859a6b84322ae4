//! The initiator's security stage. Without secrets it offers AuthMethod=None; with one-way
//! secrets `CHAP,None` (a target that does not check initiators may waive it); with mutual
//! secrets only `CHAP`, since then the target must prove itself too.
//!
//! ```text
//!  Offered --AuthMethod=CHAP--> AlgorithmSent --CHAP_A,CHAP_I,CHAP_C--> ResponseSent --[target's CHAP_N,CHAP_R ok]--> Done
//!     \--AuthMethod=None (allowed)--------------------------------------------------------------------------------/
//! ```

use super::chap::{chap_response, response_matches, Challenge};
use super::error::AuthError;
use super::secrets::ChapSecrets;
use super::*;

#[derive(Debug)]
enum Step {
    Offered,
    AlgorithmSent,
    ResponseSent,
    Done,
}

impl Step {
    fn describe(&self) -> &'static str {
        match self {
            Step::Offered => "waiting for the target's AuthMethod",
            Step::AlgorithmSent => "waiting for the target's CHAP challenge",
            Step::ResponseSent => "waiting for the target's CHAP response",
            Step::Done => "authentication is complete",
        }
    }
}

#[derive(Debug)]
pub struct InitiatorAuth {
    secrets: Option<ChapSecrets>,
    /// Our challenge to the target under mutual CHAP.
    challenge: Challenge,
    step: Step,
}

impl InitiatorAuth {
    /// `challenge` must come from a CSPRNG, fresh for each login; it is used only under mutual
    /// CHAP.
    pub fn new(secrets: Option<ChapSecrets>, challenge: Challenge) -> InitiatorAuth {
        InitiatorAuth { secrets, challenge, step: Step::Offered }
    }

    fn mutual(&self) -> bool {
        self.secrets.as_ref().is_some_and(|s| s.target.is_some())
    }

    fn offered(&self) -> &'static str {
        match (&self.secrets, self.mutual()) {
            (None, _) => METHOD_NONE,
            (Some(_), false) => "CHAP,None",
            (Some(_), true) => METHOD_CHAP,
        }
    }

    /// The AuthMethod offer for the first security-stage request.
    pub fn offer(&self) -> Vec<KeyValue> {
        vec![(AUTH_METHOD.to_string(), self.offered().to_string())]
    }

    pub fn complete(&self) -> bool {
        matches!(self.step, Step::Done)
    }

    /// Checked when the target moves the login out of the security stage: it may not skip
    /// the part of the exchange we still wait for.
    pub fn check_transit(&self) -> Result<(), AuthError> {
        if self.complete() {
            return Ok(());
        }
        if self.secrets.is_none() {
            // We offered None only; a target that transits without answering chose it.
            return Ok(());
        }
        Err(AuthError::TargetSkippedAuth)
    }

    /// Reads the target's security keys; returns the keys for the next request.
    pub fn on_answer(&mut self, pairs: &[KeyValue]) -> Result<Vec<KeyValue>, AuthError> {
        let keys = SecurityPairs::collect(pairs)?;
        match self.step {
            Step::Offered => self.on_method(&keys),
            Step::AlgorithmSent => self.on_challenge(&keys),
            Step::ResponseSent => self.on_target_response(&keys),
            Step::Done => match keys.has_other_than(&[]) {
                Some(k) => Err(AuthError::Unexpected { key: k.to_string(), step: self.step.describe() }),
                None => Ok(Vec::new()),
            },
        }
    }

    fn on_method(&mut self, keys: &SecurityPairs<'_>) -> Result<Vec<KeyValue>, AuthError> {
        let offered = self.offered();
        let refused = |answer: &str| AuthError::MethodRefused { offered: offered.to_string(), answer: answer.chars().take(64).collect() };
        match keys.get(AUTH_METHOD) {
            // The answer must be one of the values we offered.
            Some(METHOD_CHAP) if self.secrets.is_some() => {
                self.step = Step::AlgorithmSent;
                Ok(vec![(CHAP_A.to_string(), CHAP_MD5.to_string())])
            }
            Some(METHOD_NONE) if self.mutual() => Err(AuthError::TargetSkippedAuth),
            Some(METHOD_NONE) => {
                self.step = Step::Done;
                Ok(Vec::new())
            }
            Some(other) => Err(refused(other)),
            // The target may answer in a later response (it set no T bit yet).
            None => Ok(Vec::new()),
        }
    }

    fn on_challenge(&mut self, keys: &SecurityPairs<'_>) -> Result<Vec<KeyValue>, AuthError> {
        let step = self.step.describe();
        let Some(secrets) = &self.secrets else { return Err(AuthError::TargetSkippedAuth) };
        let algorithm = keys.get(CHAP_A).ok_or(AuthError::Missing { key: CHAP_A, step })?;
        if algorithm.contains(',') || !offers_md5(algorithm) {
            return Err(AuthError::AlgorithmNotOffered(algorithm.chars().take(64).collect()));
        }
        let id = parse_identifier(keys.get(CHAP_I).ok_or(AuthError::Missing { key: CHAP_I, step })?)?;
        let challenge = parse_challenge(keys.get(CHAP_C).ok_or(AuthError::Missing { key: CHAP_C, step })?)?;
        let response = chap_response(id, secrets.initiator.secret.bytes(), &challenge);
        let mut out = vec![(CHAP_N.to_string(), secrets.initiator.user.clone()), (CHAP_R.to_string(), encode_hex(&response))];
        if self.mutual() {
            // RFC 7143 §9.2.1: never send back the challenge we were given.
            if challenge == self.challenge.bytes {
                self.challenge.bytes[0] ^= 0xFF;
            }
            out.push((CHAP_I.to_string(), self.challenge.id.to_string()));
            out.push((CHAP_C.to_string(), encode_hex(&self.challenge.bytes)));
        }
        self.step = Step::ResponseSent;
        Ok(out)
    }

    fn on_target_response(&mut self, keys: &SecurityPairs<'_>) -> Result<Vec<KeyValue>, AuthError> {
        let Some(expected) = self.secrets.as_ref().and_then(|s| s.target.as_ref()) else {
            // One-way: the target has nothing more to say.
            self.step = Step::Done;
            return Ok(Vec::new());
        };
        let (Some(user), Some(response)) = (keys.get(CHAP_N), keys.get(CHAP_R)) else {
            return Err(AuthError::TargetSkippedAuth);
        };
        let response = parse_response(response)?;
        if user != expected.user {
            return Err(AuthError::TargetUserMismatch { got: user.chars().take(64).collect(), expected: expected.user.clone() });
        }
        if !response_matches(&response, self.challenge.id, expected.secret.bytes(), &self.challenge.bytes) {
            return Err(AuthError::TargetNotAuthenticated);
        }
        self.step = Step::Done;
        Ok(Vec::new())
    }
}
