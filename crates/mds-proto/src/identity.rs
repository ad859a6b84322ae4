//! Proof of who a client acts for. Without it a metadata server believes the [`Caller`] each
//! frame names, as NFS believes AUTH_SYS; with a cluster user key it believes only what a
//! [`Proof`] made with that key says, as a MUNGE credential works for Slurm:
//!
//! - the key is a file only the cluster's owner (and the superuser) can read, on every host
//!   that runs a metadata server or a user agent (`tessera agent`);
//! - a process that can read the key proves any caller itself (the superuser, the servers'
//!   own peer connections, the owner of a personal cluster);
//! - every other process asks the host's agent over a unix socket; the agent learns the
//!   process's uid and gid from the kernel (SO_PEERCRED), not from the process, and proves
//!   those;
//! - a connection's first request is `Authenticate`; the server then answers the connection's
//!   requests only for the caller proven (docs/security.md, "Users").
//!
//! ```text
//! 0  caller (9 + 4 per group)   expires, ms since the epoch (8)   nonce (8)   mac (32)
//! mac = HMAC-SHA256(key, "tessera user proof v1" || every byte before the mac)
//! ```

use std::path::Path;

use ring::hmac;

use crate::caller::Caller;
use crate::error::DecodeError;
use crate::wire::{Reader, Writer};

/// Bytes of a user key.
pub const USER_KEY_LEN: usize = 32;
/// How long a proof is good for, from when it is made. A proof is sent in the clear when a
/// connection opens, so one captured on the wire can be replayed until then (as the ids of
/// AUTH_SYS can be forever).
pub const PROOF_LIFETIME_MS: u64 = 10 * 60 * 1000;
/// Clock difference between hosts tolerated for a proof's expiry.
pub const CLOCK_SKEW_MS: u64 = 60 * 1000;
/// What the MAC covers first, so a proof can never be taken for another message made with
/// the same key.
const CONTEXT: &[u8] = b"tessera user proof v1";

/// A proof that `caller` acts through the connection that presents it, until `expires_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    pub caller: Caller,
    pub expires_ms: u64,
    /// Makes two proofs for one caller differ; not remembered by servers.
    pub nonce: u64,
    pub mac: [u8; 32],
}

impl Proof {
    pub fn encode(&self, w: &mut Writer) {
        self.encode_signed(w);
        w.bytes(&self.mac);
    }

    fn encode_signed(&self, w: &mut Writer) {
        self.caller.encode(w);
        w.u64(self.expires_ms);
        w.u64(self.nonce);
    }

    pub fn decode(r: &mut Reader) -> Result<Proof, DecodeError> {
        Ok(Proof { caller: Caller::decode(r)?, expires_ms: r.u64()?, nonce: r.u64()?, mac: r.array()? })
    }

    fn signed_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(CONTEXT);
        self.encode_signed(&mut w);
        w.buf
    }
}

/// Why a proof was refused (the server answers EPERM and logs this).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProofError {
    #[error("the proof's MAC is wrong: made with another cluster's key, or altered")]
    BadMac,
    #[error("the proof expired at {expires_ms} ms, {late_ms} ms ago (more than the {CLOCK_SKEW_MS} ms of clock skew allowed)")]
    Expired { expires_ms: u64, late_ms: u64 },
    #[error("the proof is good until {expires_ms} ms, further ahead than a proof is ever made for: is a clock wrong?")]
    TooFarAhead { expires_ms: u64 },
}

/// A cluster's user key.
#[derive(Clone)]
pub struct UserKey {
    key: hmac::Key,
}

impl std::fmt::Debug for UserKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UserKey(..)")
    }
}

impl UserKey {
    pub fn from_bytes(bytes: &[u8; USER_KEY_LEN]) -> UserKey {
        UserKey { key: hmac::Key::new(hmac::HMAC_SHA256, bytes) }
    }

    /// Reads a key file: 64 hex digits (as the OSD master key files), surrounding white space
    /// ignored. Its mode is the operator's business (`tessera up` writes it 0600); a key of
    /// another length is refused, never padded.
    pub fn read(path: &Path) -> std::io::Result<UserKey> {
        let text = std::fs::read_to_string(path)?;
        UserKey::from_hex(text.trim()).map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {why}", path.display())))
    }

    /// A key from 64 hex digits.
    pub fn from_hex(hex: &str) -> Result<UserKey, String> {
        if hex.len() != 2 * USER_KEY_LEN || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("a user key is {} hex digits; this holds {} characters", 2 * USER_KEY_LEN, hex.len()));
        }
        let mut key = [0u8; USER_KEY_LEN];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
        }
        Ok(UserKey::from_bytes(&key))
    }

    /// A proof for `caller`, good for [`PROOF_LIFETIME_MS`] from `now_ms`.
    pub fn prove(&self, caller: &Caller, now_ms: u64, nonce: u64) -> Proof {
        let mut proof = Proof { caller: caller.clone(), expires_ms: now_ms + PROOF_LIFETIME_MS, nonce, mac: [0; 32] };
        let mac = hmac::sign(&self.key, &proof.signed_bytes());
        proof.mac.copy_from_slice(mac.as_ref());
        proof
    }

    /// The caller `proof` proves at `now_ms`.
    pub fn verify(&self, proof: &Proof, now_ms: u64) -> Result<Caller, ProofError> {
        hmac::verify(&self.key, &proof.signed_bytes(), &proof.mac).map_err(|_| ProofError::BadMac)?;
        let late_ms = now_ms.saturating_sub(proof.expires_ms);
        if late_ms > CLOCK_SKEW_MS {
            return Err(ProofError::Expired { expires_ms: proof.expires_ms, late_ms });
        }
        if proof.expires_ms > now_ms + PROOF_LIFETIME_MS + CLOCK_SKEW_MS {
            return Err(ProofError::TooFarAhead { expires_ms: proof.expires_ms });
        }
        Ok(proof.caller.clone())
    }
}

/// Milliseconds since the Unix epoch, by this host's clock.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A nonce for a new proof: the clock's nanoseconds mixed with the process id, which is all a
/// nonce here needs (it only makes proofs differ; the MAC is what makes them unforgeable).
pub fn fresh_nonce() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 40)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> UserKey {
        UserKey::from_bytes(&[b; USER_KEY_LEN])
    }

    #[test]
    fn a_proof_proves_its_caller_only_under_its_key_and_only_in_time() {
        let alice = Caller { uid: 1000, gid: 1000, groups: vec![50] };
        let proof = key(1).prove(&alice, 1_000_000, 7);
        assert_eq!(key(1).verify(&proof, 1_000_000), Ok(alice.clone()));
        assert_eq!(key(2).verify(&proof, 1_000_000), Err(ProofError::BadMac));
        let claimed_root = Proof { caller: Caller::ROOT, ..proof.clone() };
        assert_eq!(key(1).verify(&claimed_root, 1_000_000), Err(ProofError::BadMac), "the caller is under the MAC");
        let extra_group = Proof { caller: Caller { groups: vec![50, 0], ..alice.clone() }, ..proof.clone() };
        assert_eq!(key(1).verify(&extra_group, 1_000_000), Err(ProofError::BadMac));
        let later = Proof { expires_ms: proof.expires_ms + 1, ..proof.clone() };
        assert_eq!(key(1).verify(&later, 1_000_000), Err(ProofError::BadMac), "the expiry is under the MAC");
        let end = proof.expires_ms + CLOCK_SKEW_MS;
        assert_eq!(key(1).verify(&proof, end), Ok(alice.clone()), "within the skew allowed");
        assert!(matches!(key(1).verify(&proof, end + 1), Err(ProofError::Expired { .. })));
        assert!(matches!(key(1).verify(&proof, 1_000_000 - CLOCK_SKEW_MS - 1), Err(ProofError::TooFarAhead { .. })));
    }

    #[test]
    fn keys_are_64_hex_digits() {
        let hex = "00ff".repeat(16);
        let proof = UserKey::from_hex(&hex).unwrap().prove(&Caller::ROOT, 1, 1);
        let mut bytes = [0u8; USER_KEY_LEN];
        for pair in bytes.chunks_mut(2) {
            pair[1] = 0xff;
        }
        assert_eq!(UserKey::from_bytes(&bytes).verify(&proof, 1), Ok(Caller::ROOT));
        assert!(UserKey::from_hex(&hex[1..]).is_err());
        assert!(UserKey::from_hex(&format!("{}zz", &hex[2..])).is_err());
        assert!(UserKey::from_hex(&format!("{hex}00")).is_err());
    }

    #[test]
    fn proofs_round_trip_and_every_prefix_is_refused() {
        let proof = key(3).prove(&Caller { uid: 5, gid: 6, groups: vec![7, 8] }, 42, 9);
        let mut w = Writer::default();
        proof.encode(&mut w);
        assert_eq!(Proof::decode(&mut Reader::new(&w.buf)), Ok(proof));
        for cut in 0..w.buf.len() {
            assert!(Proof::decode(&mut Reader::new(&w.buf[..cut])).is_err());
        }
    }
}
