//! Why a login's security stage failed, on either side. Messages name the key and what to fix;
//! none ever holds a secret (user names and lengths only). A target answers every one of these
//! with Login status 0x0201, Authentication failure (RFC 7143 §11.13.5).

use thiserror::Error;

use super::binary::BinaryError;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AuthError {
    #[error("this target requires CHAP, but the initiator offered AuthMethod={offered}; give the initiator the CHAP secret file")]
    ChapRequired { offered: String },
    #[error("the initiator offered AuthMethod={offered} only; this target has no CHAP secret (start it with --chap-secret-file) and knows no other method")]
    NoCommonMethod { offered: String },
    #[error("the initiator left the security stage before CHAP completed; this target requires CHAP")]
    NotAuthenticated,
    #[error("{key} was not expected while {step}")]
    Unexpected { key: String, step: &'static str },
    #[error("{0} appears more than once in one login request")]
    Duplicate(String),
    #[error("{key} is missing while {step}")]
    Missing { key: &'static str, step: &'static str },
    #[error("{0} may only be sent in the security stage (CSG=0)")]
    OutsideSecurityStage(String),
    #[error("CHAP_A={offered} names no algorithm Tessera supports; offer 5 (MD5)")]
    NoCommonAlgorithm { offered: String },
    #[error("the target chose CHAP_A={0}, which the initiator did not offer (5, MD5)")]
    AlgorithmNotOffered(String),
    #[error("{key}={value:?} is not an identifier from 0 to 255")]
    BadIdentifier { key: &'static str, value: String },
    #[error("{key} is malformed: {source}")]
    Encoding {
        key: &'static str,
        #[source]
        source: BinaryError,
    },
    #[error("CHAP_C of {len} bytes is too short; at least {min} random bytes are required")]
    ChallengeTooShort { len: usize, min: usize },
    #[error("the initiator's CHAP_C repeats the target's own challenge (a reflection attack; RFC 7143 §9.2.1)")]
    ChallengeReflected,
    #[error("CHAP user {user:?} is not the one this target accepts; check the first line of both CHAP secret files")]
    UnknownUser { user: String },
    #[error("CHAP_R for user {user:?} is wrong: the initiator's secret differs from the target's")]
    WrongResponse { user: String },
    #[error("the initiator asks for mutual CHAP, but this target has no target secret (the second line of its CHAP secret file)")]
    MutualNotConfigured,
    #[error("the target answered AuthMethod={answer:?} to the offer {offered}")]
    MethodRefused { offered: String, answer: String },
    #[error("mutual CHAP is configured, but the target did not prove itself (it chose no authentication or skipped its CHAP_N/CHAP_R)")]
    TargetSkippedAuth,
    #[error("the target answered CHAP_N={got:?}, but the CHAP secret file names {expected:?}")]
    TargetUserMismatch { got: String, expected: String },
    #[error("the target's CHAP_R is wrong: its secret differs from the target secret in the CHAP secret file, or this is not the expected target")]
    TargetNotAuthenticated,
}
