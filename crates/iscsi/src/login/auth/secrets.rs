//! CHAP credentials and the secret file both sides read (docs/security.md, "CHAP at login"):
//!
//! ```text
//! # comment
//! <initiator-user> <initiator-secret>      the initiator proves itself with this
//! <target-user> <target-secret>            optional: mutual CHAP, the target proves itself
//! ```
//!
//! Parsing is pure; reading the file and checking its mode is the caller's (see
//! [`check_file_mode`]), since this crate opens no files.

use thiserror::Error;

/// Shortest secret accepted: RFC 7143 §9.2.1 asks for at least 96 random bits when CHAP runs
/// without IPsec, as it does here.
pub const SECRET_LEN_MIN: usize = 12;
/// Longest name or secret: a text value of at most 255 bytes (RFC 7143 §6.1).
pub const FIELD_LEN_MAX: usize = 255;

/// A CHAP secret. Never printed: `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct ChapSecret(Vec<u8>);

impl ChapSecret {
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for ChapSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChapSecret({} bytes)", self.0.len())
    }
}

/// A CHAP name (CHAP_N) and its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChapCredential {
    pub user: String,
    pub secret: ChapSecret,
}

impl ChapCredential {
    /// Checks the RFC's bounds: a name of 1..=255 printable bytes, a secret of
    /// `SECRET_LEN_MIN..=FIELD_LEN_MAX` bytes.
    pub fn new(user: &str, secret: &[u8]) -> Result<ChapCredential, SecretsError> {
        if user.is_empty() || user.len() > FIELD_LEN_MAX || !user.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SecretsError::BadUser(user.chars().take(64).collect()));
        }
        if secret.len() < SECRET_LEN_MIN {
            return Err(SecretsError::SecretTooShort { user: user.to_string(), len: secret.len() });
        }
        if secret.len() > FIELD_LEN_MAX {
            return Err(SecretsError::SecretTooLong { user: user.to_string(), len: secret.len() });
        }
        Ok(ChapCredential { user: user.to_string(), secret: ChapSecret(secret.to_vec()) })
    }
}

/// Who proves what at login. The same value configures both ends: the target checks
/// `initiator` and answers with `target`; the initiator answers with `initiator` and, when
/// `target` is set, demands and checks the target's proof (mutual CHAP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChapSecrets {
    pub initiator: ChapCredential,
    pub target: Option<ChapCredential>,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SecretsError {
    #[error("the CHAP secret file holds no `user secret` line")]
    Empty,
    #[error("line {line} of the CHAP secret file must be `user secret` (two fields separated by spaces)")]
    Format { line: usize },
    #[error("the CHAP secret file has more than two `user secret` lines (initiator, then target)")]
    TooManyLines,
    #[error("CHAP user name {0:?} must be 1 to 255 printable ASCII characters")]
    BadUser(String),
    #[error("the CHAP secret of {user:?} is {len} bytes; use at least 12 random bytes (RFC 7143 §9.2.1), e.g. `head -c 12 /dev/urandom | base64`")]
    SecretTooShort { user: String, len: usize },
    #[error("the CHAP secret of {user:?} is {len} bytes; at most 255 fit in a login")]
    SecretTooLong { user: String, len: usize },
    #[error("the target's CHAP secret equals the initiator's; RFC 7143 §9.2.1 forbids one secret for both directions")]
    SameSecret,
    #[error("group or others may open it (mode {mode:03o}); run `chmod 600` on it")]
    Exposed { mode: u32 },
}

impl ChapSecrets {
    /// One-way CHAP: only the initiator proves itself.
    pub fn one_way(initiator: ChapCredential) -> ChapSecrets {
        ChapSecrets { initiator, target: None }
    }

    /// Mutual CHAP; the two secrets must differ.
    pub fn mutual(initiator: ChapCredential, target: ChapCredential) -> Result<ChapSecrets, SecretsError> {
        if initiator.secret == target.secret {
            return Err(SecretsError::SameSecret);
        }
        Ok(ChapSecrets { initiator, target: Some(target) })
    }

    /// Parses the secret file's text.
    pub fn parse(text: &str) -> Result<ChapSecrets, SecretsError> {
        let mut creds = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [user, secret] = fields[..] else { return Err(SecretsError::Format { line: i + 1 }) };
            if creds.len() == 2 {
                return Err(SecretsError::TooManyLines);
            }
            creds.push(ChapCredential::new(user, secret.as_bytes())?);
        }
        let mut creds = creds.into_iter();
        let initiator = creds.next().ok_or(SecretsError::Empty)?;
        match creds.next() {
            Some(target) => ChapSecrets::mutual(initiator, target),
            None => Ok(ChapSecrets::one_way(initiator)),
        }
    }
}

/// Refuses a file mode that lets group or others read (or write) the secrets.
pub fn check_file_mode(mode: u32) -> Result<(), SecretsError> {
    if mode & 0o077 != 0 {
        return Err(SecretsError::Exposed { mode: mode & 0o777 });
    }
    Ok(())
}
