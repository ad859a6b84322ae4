//! The target's security stage. With secrets it requires CHAP of every login; without, it
//! accepts AuthMethod=None only.
//!
//! ```text
//!  AwaitMethod --AuthMethod=CHAP--> AwaitAlgorithm --CHAP_A=5--> AwaitResponse --CHAP_N,CHAP_R ok--> Done
//!       \--AuthMethod=None (no secrets)------------------------------------------------------------/
//! ```

use super::chap::{chap_response, response_matches, Challenge};
use super::error::AuthError;
use super::secrets::ChapSecrets;
use super::*;

#[derive(Debug)]
enum Step {
    AwaitMethod,
    AwaitAlgorithm,
    AwaitResponse,
    Done,
}

impl Step {
    fn describe(&self) -> &'static str {
        match self {
            Step::AwaitMethod => "negotiating AuthMethod",
            Step::AwaitAlgorithm => "waiting for CHAP_A",
            Step::AwaitResponse => "waiting for CHAP_N and CHAP_R",
            Step::Done => "authentication is complete",
        }
    }
}

#[derive(Debug)]
pub struct TargetAuth {
    secrets: Option<ChapSecrets>,
    challenge: Challenge,
    step: Step,
}

impl TargetAuth {
    /// `challenge` must come from a CSPRNG, fresh for each login.
    pub fn new(secrets: Option<ChapSecrets>, challenge: Challenge) -> TargetAuth {
        TargetAuth { secrets, challenge, step: Step::AwaitMethod }
    }

    pub fn requires_chap(&self) -> bool {
        self.secrets.is_some()
    }

    /// Whether the initiator may leave the security stage: CHAP done, or not required.
    pub fn complete(&self) -> bool {
        !self.requires_chap() || matches!(self.step, Step::Done)
    }

    /// Checked when the login reaches the operational stage (by transit, or by starting there).
    pub fn check_complete(&self) -> Result<(), AuthError> {
        self.complete().then_some(()).ok_or(AuthError::NotAuthenticated)
    }

    /// Whether to grant an initiator's wish (the T bit, after [`TargetAuth::respond`]) to leave
    /// the security stage: yes once complete; not yet while CHAP is under way; an error when
    /// CHAP is required and the initiator never started it.
    pub fn may_transit(&self, wants: bool) -> Result<bool, AuthError> {
        match (wants, self.complete(), &self.step) {
            (false, _, _) => Ok(false),
            (true, true, _) => Ok(true),
            (true, false, Step::AwaitMethod) => Err(AuthError::NotAuthenticated),
            (true, false, _) => Ok(false),
        }
    }

    /// Refuses security keys outside the security stage.
    pub fn check_operational(&self, pairs: &[KeyValue]) -> Result<(), AuthError> {
        match pairs.iter().find(|(k, _)| is_security_key(k)) {
            Some((k, _)) => Err(AuthError::OutsideSecurityStage(k.clone())),
            None => self.check_complete(),
        }
    }

    /// Answers the security keys of one security-stage request; other keys are the operational
    /// negotiator's. An error means Authentication failure.
    pub fn respond(&mut self, pairs: &[KeyValue]) -> Result<Vec<KeyValue>, AuthError> {
        let keys = SecurityPairs::collect(pairs)?;
        let mut out = Vec::new();
        let mut chose_method_now = false;
        if let Some(offered) = keys.get(AUTH_METHOD) {
            if !matches!(self.step, Step::AwaitMethod) {
                return Err(self.unexpected(AUTH_METHOD));
            }
            out.push((AUTH_METHOD.to_string(), self.choose_method(offered)?.to_string()));
            chose_method_now = true;
        }
        let allowed: &[&str] = match self.step {
            Step::AwaitMethod | Step::Done => &[AUTH_METHOD],
            Step::AwaitAlgorithm => &[AUTH_METHOD, CHAP_A],
            Step::AwaitResponse => &[CHAP_N, CHAP_R, CHAP_I, CHAP_C],
        };
        if let Some(k) = keys.has_other_than(allowed) {
            return Err(self.unexpected(k));
        }
        match self.step {
            Step::AwaitMethod | Step::Done => {}
            Step::AwaitAlgorithm => match keys.get(CHAP_A) {
                Some(list) => {
                    if !offers_md5(list) {
                        return Err(AuthError::NoCommonAlgorithm { offered: list.chars().take(64).collect() });
                    }
                    out.push((CHAP_A.to_string(), CHAP_MD5.to_string()));
                    out.push((CHAP_I.to_string(), self.challenge.id.to_string()));
                    out.push((CHAP_C.to_string(), encode_hex(&self.challenge.bytes)));
                    self.step = Step::AwaitResponse;
                }
                // AuthMethod and CHAP_A may share a request; otherwise CHAP_A must follow.
                None if chose_method_now => {}
                None => return Err(AuthError::Missing { key: CHAP_A, step: self.step.describe() }),
            },
            Step::AwaitResponse => {
                out.extend(self.verify_initiator(&keys)?);
                self.step = Step::Done;
            }
        }
        Ok(out)
    }

    fn unexpected(&self, key: &str) -> AuthError {
        AuthError::Unexpected { key: key.to_string(), step: self.step.describe() }
    }

    fn choose_method(&mut self, offered: &str) -> Result<&'static str, AuthError> {
        let has = |m: &str| offered.split(',').any(|o| o == m);
        let offered_short = || offered.chars().take(64).collect::<String>();
        if self.requires_chap() {
            if !has(METHOD_CHAP) {
                return Err(AuthError::ChapRequired { offered: offered_short() });
            }
            self.step = Step::AwaitAlgorithm;
            Ok(METHOD_CHAP)
        } else {
            if !has(METHOD_NONE) {
                return Err(AuthError::NoCommonMethod { offered: offered_short() });
            }
            self.step = Step::Done;
            Ok(METHOD_NONE)
        }
    }

    /// Checks CHAP_N and CHAP_R; under mutual CHAP answers the initiator's challenge.
    fn verify_initiator(&self, keys: &SecurityPairs<'_>) -> Result<Vec<KeyValue>, AuthError> {
        let step = self.step.describe();
        let Some(secrets) = self.secrets.as_ref() else { return Err(AuthError::NotAuthenticated) };
        let user = keys.get(CHAP_N).ok_or(AuthError::Missing { key: CHAP_N, step })?;
        let response = parse_response(keys.get(CHAP_R).ok_or(AuthError::Missing { key: CHAP_R, step })?)?;
        let expected = &secrets.initiator;
        // Both checks run before either refuses, so timing does not tell a wrong name from a
        // wrong secret.
        let user_ok = user == expected.user;
        let response_ok = response_matches(&response, self.challenge.id, expected.secret.bytes(), &self.challenge.bytes);
        if !user_ok {
            return Err(AuthError::UnknownUser { user: user.chars().take(64).collect() });
        }
        if !response_ok {
            return Err(AuthError::WrongResponse { user: user.to_string() });
        }
        let (id, challenge) = match (keys.get(CHAP_I), keys.get(CHAP_C)) {
            (None, None) => return Ok(Vec::new()),
            (Some(_), None) => return Err(AuthError::Missing { key: CHAP_C, step }),
            (None, Some(_)) => return Err(AuthError::Missing { key: CHAP_I, step }),
            (Some(i), Some(c)) => (parse_identifier(i)?, parse_challenge(c)?),
        };
        if challenge == self.challenge.bytes {
            return Err(AuthError::ChallengeReflected);
        }
        let target = secrets.target.as_ref().ok_or(AuthError::MutualNotConfigured)?;
        let answer = chap_response(id, target.secret.bytes(), &challenge);
        Ok(vec![(CHAP_N.to_string(), target.user.clone()), (CHAP_R.to_string(), encode_hex(&answer))])
    }
}
