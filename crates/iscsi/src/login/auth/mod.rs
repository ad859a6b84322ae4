//! The security stage of login (RFC 7143 §6.3, §12.1.3): AuthMethod negotiation (None, CHAP)
//! and the CHAP exchange, one-way or mutual, as two sans-IO state machines over parsed text.
//! [`TargetAuth`] decides whether an initiator may open a session; [`InitiatorAuth`] proves the
//! initiator and, under mutual CHAP, checks the target. Credentials are [`ChapSecrets`].
//!
//! ```text
//! I->T  AuthMethod=CHAP[,None]                 T->I  AuthMethod=CHAP
//! I->T  CHAP_A=5                               T->I  CHAP_A=5 CHAP_I=<id> CHAP_C=<challenge>
//! I->T  CHAP_N=<user> CHAP_R=<response>
//!       [CHAP_I=<id> CHAP_C=<challenge>]       T->I  [CHAP_N=<user> CHAP_R=<response>]
//! ```

mod binary;
mod chap;
mod error;
mod initiator;
mod secrets;
mod target;

pub use binary::{decode_binary, encode_hex, BinaryError, BINARY_LEN_MAX};
pub use chap::{chap_response, response_matches, Challenge, CHALLENGE_LEN, CHAP_MD5, RESPONSE_LEN};
pub use error::AuthError;
pub use initiator::InitiatorAuth;
pub use secrets::{check_file_mode, ChapCredential, ChapSecret, ChapSecrets, SecretsError, FIELD_LEN_MAX, SECRET_LEN_MIN};
pub use target::TargetAuth;

use super::keys::AUTH_METHOD;
use crate::text::KeyValue;

pub const CHAP_A: &str = "CHAP_A";
pub const CHAP_I: &str = "CHAP_I";
pub const CHAP_C: &str = "CHAP_C";
pub const CHAP_N: &str = "CHAP_N";
pub const CHAP_R: &str = "CHAP_R";
pub const METHOD_CHAP: &str = "CHAP";
pub const METHOD_NONE: &str = "None";

/// Keys only the security stage carries; the operational negotiator leaves them alone.
pub const SECURITY_KEYS: [&str; 6] = [AUTH_METHOD, CHAP_A, CHAP_I, CHAP_C, CHAP_N, CHAP_R];

pub fn is_security_key(key: &str) -> bool {
    SECURITY_KEYS.contains(&key)
}

/// The security keys of one request, each at most once.
#[derive(Debug, Default)]
struct SecurityPairs<'a> {
    values: [Option<&'a str>; SECURITY_KEYS.len()],
}

impl<'a> SecurityPairs<'a> {
    fn collect(pairs: &'a [KeyValue]) -> Result<SecurityPairs<'a>, AuthError> {
        let mut out = SecurityPairs::default();
        for (k, v) in pairs {
            if let Some(i) = SECURITY_KEYS.iter().position(|s| s == k) {
                if out.values[i].replace(v.as_str()).is_some() {
                    return Err(AuthError::Duplicate(k.clone()));
                }
            }
        }
        Ok(out)
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        SECURITY_KEYS.iter().position(|s| *s == key).and_then(|i| self.values[i])
    }

    /// The first key present that is not in `allowed`.
    fn has_other_than(&self, allowed: &[&str]) -> Option<&'static str> {
        SECURITY_KEYS.iter().zip(self.values.iter()).find(|(k, v)| v.is_some() && !allowed.contains(k)).map(|(k, _)| *k)
    }
}

/// CHAP_I: a number 0..=255, decimal or 0x-hex (RFC 7143 §6.1 numerical values).
fn parse_identifier(value: &str) -> Result<u8, AuthError> {
    let bad = || AuthError::BadIdentifier { key: CHAP_I, value: value.chars().take(32).collect() };
    let n = match value.strip_prefix("0x").or_else(|| value.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.len() <= 8 => u32::from_str_radix(hex, 16).map_err(|_| bad())?,
        Some(_) => return Err(bad()),
        None if !value.is_empty() && value.len() <= 3 && value.bytes().all(|b| b.is_ascii_digit()) => {
            value.parse::<u32>().map_err(|_| bad())?
        }
        None => return Err(bad()),
    };
    u8::try_from(n).map_err(|_| bad())
}

/// CHAP_C: a binary value of `CHALLENGE_LEN..=BINARY_LEN_MAX` bytes.
fn parse_challenge(value: &str) -> Result<Vec<u8>, AuthError> {
    let bytes = decode_binary(value, BINARY_LEN_MAX).map_err(|source| AuthError::Encoding { key: CHAP_C, source })?;
    if bytes.len() < CHALLENGE_LEN {
        return Err(AuthError::ChallengeTooShort { len: bytes.len(), min: CHALLENGE_LEN });
    }
    Ok(bytes)
}

/// CHAP_R: a binary value; its length is checked by the comparison.
fn parse_response(value: &str) -> Result<Vec<u8>, AuthError> {
    decode_binary(value, BINARY_LEN_MAX).map_err(|source| AuthError::Encoding { key: CHAP_R, source })
}

/// Whether a CHAP_A list (`5` or `7,5`, decimal or hex) holds MD5.
fn offers_md5(list: &str) -> bool {
    list.split(',').any(|a| {
        let n = match a.strip_prefix("0x").or_else(|| a.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => a.parse::<u32>().ok(),
        };
        n == Some(CHAP_MD5)
    })
}

#[cfg(test)]
mod tests;
