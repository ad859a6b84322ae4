//! The CHAP computation (RFC 1994 §4.1, algorithm 5 = MD5): a response is
//! MD5(identifier || secret || challenge). Challenges come from the caller's CSPRNG (this crate
//! takes randomness from its caller); responses are compared in constant time.

use md5::{Digest, Md5};
use subtle::ConstantTimeEq;

/// CHAP_A value of CHAP with MD5, the one algorithm RFC 7143 §12.1.3 requires.
pub const CHAP_MD5: u32 = 5;
/// Length of an MD5 CHAP response.
pub const RESPONSE_LEN: usize = 16;
/// Length of the challenges Tessera sends, and the shortest it accepts: as long as the hash, so
/// a challenge never repeats in practice and precomputed responses are useless.
pub const CHALLENGE_LEN: usize = 16;

/// One side's CHAP challenge: identifier and random bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Challenge {
    pub id: u8,
    pub bytes: [u8; CHALLENGE_LEN],
}

impl Challenge {
    /// Builds a challenge from `1 + CHALLENGE_LEN` bytes the caller drew from a CSPRNG.
    pub fn from_random(random: [u8; 1 + CHALLENGE_LEN]) -> Challenge {
        let mut bytes = [0u8; CHALLENGE_LEN];
        bytes.copy_from_slice(&random[1..]);
        Challenge { id: random[0], bytes }
    }
}

impl std::fmt::Debug for Challenge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Challenge").field("id", &self.id).finish_non_exhaustive()
    }
}

/// MD5(id || secret || challenge).
pub fn chap_response(id: u8, secret: &[u8], challenge: &[u8]) -> [u8; RESPONSE_LEN] {
    let mut h = Md5::new();
    h.update([id]);
    h.update(secret);
    h.update(challenge);
    h.finalize().into()
}

/// Whether `received` is the response to (`id`, `challenge`) under `secret`, in time that does
/// not depend on where the bytes differ.
pub fn response_matches(received: &[u8], id: u8, secret: &[u8], challenge: &[u8]) -> bool {
    let expected = chap_response(id, secret, challenge);
    received.len() == RESPONSE_LEN && bool::from(expected.ct_eq(received))
}
