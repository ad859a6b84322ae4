//! Sealed connections. Once a connection has proven its user (`identity.rs`), every later
//! frame both ways is sealed with AES-256-GCM under a session key only the two ends know, so
//! that on the wire:
//!
//! - nobody can read the capability keys that layouts carry (with one, anyone who can reach
//!   an OSD could act as the file's client until the capability expires), nor names or
//!   attributes;
//! - nobody can alter, drop, reorder, replay or inject a frame: each direction counts its
//!   frames, and the count is the nonce, so the next frame opens only if it is the next one
//!   sealed, unaltered, by the other end;
//! - a client knows it talks to the cluster's server, since only a holder of the user key can
//!   derive the key its replies are sealed under.
//!
//! ```text
//! 0..4    frame length (u32, big-endian, in the clear): the sealed body's length
//! 4..     the frame body (frame.rs) encrypted, then its 16-byte tag
//! nonce   direction (1 client to server, 2 server to client), 3 zero bytes, frame count (u64)
//! key     HMAC-SHA256(user key, "tessera session key v1" || caller || challenge)
//! ```
//!
//! The session key binds the caller and the connection's challenge, so the agent may hand a
//! user the key of that user's own connection and nothing else. AES-GCM is `ring`'s, with the
//! CPU's AES and carry-less multiply instructions where it has them: a metadata frame is a
//! few hundred bytes, sealed in well under a microsecond.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};

use crate::error::DecodeError;
use crate::frame::{frame_body_len, BODY_LEN_MIN, FRAME_HEADER_LEN};
use crate::limits::FRAME_LEN_MAX;

/// Bytes of a session key.
pub const SESSION_KEY_LEN: usize = 32;
/// Bytes a seal adds to a frame's body.
pub const TAG_LEN: usize = 16;

/// The key one connection's frames are sealed under.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKey(pub [u8; SESSION_KEY_LEN]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// Which end of the connection seals with a [`Seal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Client,
    Server,
}

const FROM_CLIENT: u8 = 1;
const FROM_SERVER: u8 = 2;

/// One end's sealing state: the key, and how many frames each direction has carried.
pub struct Seal {
    key: LessSafeKey,
    sends: u8,
    receives: u8,
    sent: u64,
    received: u64,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seal").field("sent", &self.sent).field("received", &self.received).finish_non_exhaustive()
    }
}

impl Seal {
    pub fn new(key: &SessionKey, end: End) -> Seal {
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key.0).expect("an AES-256 key is 32 bytes"));
        let (sends, receives) = match end {
            End::Client => (FROM_CLIENT, FROM_SERVER),
            End::Server => (FROM_SERVER, FROM_CLIENT),
        };
        Seal { key, sends, receives, sent: 0, received: 0 }
    }

    /// Seals a whole encoded frame (header and body) in place: the body is encrypted, its tag
    /// appended, and the header rewritten to announce the longer body.
    pub fn seal_frame(&mut self, frame: &mut Vec<u8>) {
        assert!(frame.len() >= FRAME_HEADER_LEN + BODY_LEN_MIN && frame.len() <= FRAME_LEN_MAX, "not an encoded frame");
        let nonce = nonce(self.sends, self.sent);
        self.sent += 1;
        let tag = self.key.seal_in_place_separate_tag(nonce, Aad::empty(), &mut frame[FRAME_HEADER_LEN..]).expect("a frame is far below AES-GCM's length limit");
        frame.extend_from_slice(tag.as_ref());
        let body_len = (frame.len() - FRAME_HEADER_LEN) as u32;
        frame[..FRAME_HEADER_LEN].copy_from_slice(&body_len.to_be_bytes());
    }

    /// Opens a sealed body in place, leaving the plain frame body; fails unless it is the next
    /// frame the other end sealed, unaltered.
    pub fn open_body(&mut self, body: &mut Vec<u8>) -> Result<(), DecodeError> {
        if body.len() < BODY_LEN_MIN + TAG_LEN {
            return Err(DecodeError::Unsealed);
        }
        let plain_len = self.key.open_in_place(nonce(self.receives, self.received), Aad::empty(), body).map_err(|_| DecodeError::Unsealed)?.len();
        self.received += 1;
        body.truncate(plain_len);
        Ok(())
    }
}

/// The body length a sealed frame's header announces, or why it is refused: a plain frame's
/// bounds, plus the tag.
pub fn sealed_body_len(header: [u8; FRAME_HEADER_LEN]) -> Result<usize, DecodeError> {
    let len = u32::from_be_bytes(header) as usize;
    let plain = len.checked_sub(TAG_LEN).ok_or(DecodeError::FrameLength { len: len as u64, min: BODY_LEN_MIN + TAG_LEN, max: FRAME_LEN_MAX - FRAME_HEADER_LEN + TAG_LEN })?;
    frame_body_len((plain as u32).to_be_bytes()).map_err(|_| DecodeError::FrameLength { len: len as u64, min: BODY_LEN_MIN + TAG_LEN, max: FRAME_LEN_MAX - FRAME_HEADER_LEN + TAG_LEN })?;
    Ok(len)
}

/// The body length `header` announces on a connection sealed by `seal`, or not sealed.
pub fn body_len(seal: Option<&Seal>, header: [u8; FRAME_HEADER_LEN]) -> Result<usize, DecodeError> {
    match seal {
        Some(_) => sealed_body_len(header),
        None => frame_body_len(header),
    }
}

fn nonce(direction: u8, count: u64) -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    n[0] = direction;
    n[NONCE_LEN - 8..].copy_from_slice(&count.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{encode_request_frame, Frame};
    use crate::{Caller, Request};

    fn pair() -> (Seal, Seal) {
        let key = SessionKey([7; SESSION_KEY_LEN]);
        (Seal::new(&key, End::Client), Seal::new(&key, End::Server))
    }

    fn frame(id: u64) -> Vec<u8> {
        encode_request_frame(id, &Caller::ROOT, &Request::StatFs)
    }

    /// Opens what `seal_frame` made, as a reader would: header first, then the body.
    fn open(seal: &mut Seal, sealed: &[u8]) -> Result<Frame, DecodeError> {
        let header = sealed[..FRAME_HEADER_LEN].try_into().unwrap();
        let len = sealed_body_len(header)?;
        let mut body = sealed[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len].to_vec();
        seal.open_body(&mut body)?;
        Frame::decode_body(&body)
    }

    #[test]
    fn frames_open_in_order_at_the_other_end_only() {
        let (mut client, mut server) = pair();
        let (mut a, mut b) = (frame(1), frame(2));
        let plain_a = a.clone();
        client.seal_frame(&mut a);
        client.seal_frame(&mut b);
        assert_eq!(a.len(), plain_a.len() + TAG_LEN);
        assert!(!a.windows(8).any(|w| w == 1u64.to_be_bytes()), "the request id is not in the clear");
        // The client cannot open its own frames (each direction has its own nonces).
        assert_eq!(open(&mut pair().0, &a), Err(DecodeError::Unsealed));
        // Out of order: b before a does not open; in order both do.
        assert_eq!(open(&mut pair().1, &b), Err(DecodeError::Unsealed));
        assert_eq!(open(&mut server, &a).unwrap().request_id, 1);
        assert_eq!(open(&mut server, &a), Err(DecodeError::Unsealed), "a replay");
        assert_eq!(open(&mut server, &b).unwrap().request_id, 2);
        // Another session's key.
        let mut other = Seal::new(&SessionKey([8; SESSION_KEY_LEN]), End::Server);
        assert_eq!(open(&mut other, &a), Err(DecodeError::Unsealed));
    }

    #[test]
    fn every_altered_byte_is_refused() {
        let mut sealed = frame(9);
        pair().0.seal_frame(&mut sealed);
        for i in FRAME_HEADER_LEN..sealed.len() {
            let mut altered = sealed.clone();
            altered[i] ^= 0x20;
            assert_eq!(open(&mut pair().1, &altered), Err(DecodeError::Unsealed), "byte {i}");
        }
        assert!(open(&mut pair().1, &sealed).is_ok());
    }

    #[test]
    fn sealed_lengths_are_a_plain_frames_plus_the_tag() {
        let max = (FRAME_LEN_MAX - FRAME_HEADER_LEN + TAG_LEN) as u32;
        assert_eq!(sealed_body_len(max.to_be_bytes()), Ok(max as usize));
        assert!(sealed_body_len((max + 1).to_be_bytes()).is_err());
        assert!(sealed_body_len(((BODY_LEN_MIN + TAG_LEN) as u32 - 1).to_be_bytes()).is_err());
        assert!(sealed_body_len(3u32.to_be_bytes()).is_err(), "shorter than a tag");
        let mut short = vec![0u8; TAG_LEN];
        assert_eq!(pair().1.open_body(&mut short), Err(DecodeError::Unsealed));
    }
}
