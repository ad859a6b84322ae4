//! Proof of who a client acts for. Without it a metadata server believes the [`Caller`] each
//! frame names, as NFS believes AUTH_SYS; with a cluster user key it believes only what a
//! [`Proof`] made with that key says, as a MUNGE credential works for Slurm:
//!
//! - the key is a file only the cluster's owner (and the superuser) can read, on every host
//!   that runs a metadata server or a user agent (`tessera agent`), 64 hex digits as the OSD
//!   master key files (`tessera_security::Key::from_hex` reads both);
//! - a connection's first requests are `Challenge`, which the server answers with 16 random
//!   bytes it keeps for that connection, and `Authenticate` with a proof for them; the server
//!   then answers the connection's requests only for the caller proven (docs/security.md,
//!   "Users"). A proof is good for one connection once: one read off the wire is useless on
//!   any other, and no clock has to agree with another host's;
//! - a process that can read the key proves any caller itself (the superuser, the servers'
//!   own peer connections, the owner of a personal cluster);
//! - every other process asks the host's agent over a unix socket; the agent learns the
//!   process's uid and gid from the kernel (SO_PEERCRED), not from the process, and proves
//!   those.
//!
//! ```text
//! 0  caller (9 + 4 per group)   challenge (16)   mac (32)
//! mac = HMAC-SHA256(key, "tessera user proof v2" || every byte before the mac)
//! ```

use ring::hmac;

use crate::caller::Caller;
use crate::error::DecodeError;
use crate::seal::{SessionKey, SESSION_KEY_LEN};
use crate::wire::{Reader, Writer};

/// Bytes of a user key.
pub const USER_KEY_LEN: usize = 32;
/// Bytes of a server's challenge.
pub const CHALLENGE_LEN: usize = 16;
/// What the MAC covers first, so a proof can never be taken for another message made with
/// the same key.
const CONTEXT: &[u8] = b"tessera user proof v2";
/// What a session key's MAC covers first (`seal.rs`): never the same input as a proof's.
const SESSION_CONTEXT: &[u8] = b"tessera session key v1";

/// A server's challenge to one connection.
pub type Challenge = [u8; CHALLENGE_LEN];

/// A proof that `caller` acts through the connection that was sent `challenge`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    pub caller: Caller,
    pub challenge: Challenge,
    pub mac: [u8; 32],
}

impl Proof {
    pub fn encode(&self, w: &mut Writer) {
        self.encode_signed(w);
        w.bytes(&self.mac);
    }

    fn encode_signed(&self, w: &mut Writer) {
        self.caller.encode(w);
        w.bytes(&self.challenge);
    }

    pub fn decode(r: &mut Reader) -> Result<Proof, DecodeError> {
        Ok(Proof { caller: Caller::decode(r)?, challenge: r.array()?, mac: r.array()? })
    }

    fn signed_bytes(&self) -> Vec<u8> {
        self.bytes_after(CONTEXT)
    }

    fn bytes_after(&self, context: &[u8]) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(context);
        self.encode_signed(&mut w);
        w.buf
    }
}

/// Why a proof was refused (the server answers EPERM and logs this).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProofError {
    #[error("the proof's MAC is wrong: made with another cluster's key, or altered")]
    BadMac,
    #[error("the proof answers another challenge than the one this connection was sent (a proof read off another connection?)")]
    WrongChallenge,
    #[error("the connection asked for no challenge before it sent a proof")]
    NoChallenge,
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

    /// A proof for `caller` on the connection that was sent `challenge`.
    pub fn prove(&self, caller: &Caller, challenge: &Challenge) -> Proof {
        let mut proof = Proof { caller: caller.clone(), challenge: *challenge, mac: [0; 32] };
        let mac = hmac::sign(&self.key, &proof.signed_bytes());
        proof.mac.copy_from_slice(mac.as_ref());
        proof
    }

    /// [`UserKey::prove`], with the key the connection is sealed under once the proof is
    /// accepted (`seal.rs`): only a holder of the user key can derive it, and it is bound to
    /// the caller and the challenge, so it seals that one connection.
    pub fn prove_sealed(&self, caller: &Caller, challenge: &Challenge) -> (Proof, SessionKey) {
        let proof = self.prove(caller, challenge);
        let session = self.session_key(&proof);
        (proof, session)
    }

    /// The session key of the connection `proof` was made for.
    pub fn session_key(&self, proof: &Proof) -> SessionKey {
        let mut key = [0u8; SESSION_KEY_LEN];
        key.copy_from_slice(hmac::sign(&self.key, &proof.bytes_after(SESSION_CONTEXT)).as_ref());
        SessionKey(key)
    }

    /// The caller `proof` proves on a connection that was sent `challenge` (`None`: none was).
    pub fn verify(&self, proof: &Proof, challenge: Option<&Challenge>) -> Result<Caller, ProofError> {
        let challenge = challenge.ok_or(ProofError::NoChallenge)?;
        hmac::verify(&self.key, &proof.signed_bytes(), &proof.mac).map_err(|_| ProofError::BadMac)?;
        if proof.challenge != *challenge {
            return Err(ProofError::WrongChallenge);
        }
        Ok(proof.caller.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> UserKey {
        UserKey::from_bytes(&[b; USER_KEY_LEN])
    }

    #[test]
    fn a_proof_proves_its_caller_only_under_its_key_and_only_for_its_challenge() {
        let alice = Caller { uid: 1000, gid: 1000, groups: vec![50] };
        let (c1, c2) = ([1; CHALLENGE_LEN], [2; CHALLENGE_LEN]);
        let proof = key(1).prove(&alice, &c1);
        assert_eq!(key(1).verify(&proof, Some(&c1)), Ok(alice.clone()));
        assert_eq!(key(2).verify(&proof, Some(&c1)), Err(ProofError::BadMac));
        assert_eq!(key(1).verify(&proof, Some(&c2)), Err(ProofError::WrongChallenge), "replayed on another connection");
        assert_eq!(key(1).verify(&proof, None), Err(ProofError::NoChallenge));
        let claimed_root = Proof { caller: Caller::ROOT, ..proof.clone() };
        assert_eq!(key(1).verify(&claimed_root, Some(&c1)), Err(ProofError::BadMac), "the caller is under the MAC");
        let extra_group = Proof { caller: Caller { groups: vec![50, 0], ..alice.clone() }, ..proof.clone() };
        assert_eq!(key(1).verify(&extra_group, Some(&c1)), Err(ProofError::BadMac));
        let moved = Proof { challenge: c2, ..proof.clone() };
        assert_eq!(key(1).verify(&moved, Some(&c2)), Err(ProofError::BadMac), "the challenge is under the MAC");
    }

    #[test]
    fn a_session_key_is_its_connections_and_callers_alone() {
        let alice = Caller::user(1000, 1000);
        let (proof, session) = key(1).prove_sealed(&alice, &[1; CHALLENGE_LEN]);
        assert_eq!(key(1).session_key(&proof), session, "both ends derive the same key");
        assert_ne!(&session.0, &proof.mac, "the key is not the MAC sent in the clear");
        assert_ne!(key(1).prove_sealed(&alice, &[2; CHALLENGE_LEN]).1, session, "another connection");
        assert_ne!(key(1).prove_sealed(&Caller::user(1001, 1000), &[1; CHALLENGE_LEN]).1, session, "another caller");
        assert_ne!(key(2).prove_sealed(&alice, &[1; CHALLENGE_LEN]).1, session, "another cluster");
    }

    #[test]
    fn proofs_round_trip_and_every_prefix_is_refused() {
        let proof = key(3).prove(&Caller { uid: 5, gid: 6, groups: vec![7, 8] }, &[9; CHALLENGE_LEN]);
        let mut w = Writer::default();
        proof.encode(&mut w);
        assert_eq!(Proof::decode(&mut Reader::new(&w.buf)), Ok(proof));
        for cut in 0..w.buf.len() {
            assert!(Proof::decode(&mut Reader::new(&w.buf[..cut])).is_err());
        }
    }
}
