//! What the security manager hands a client with a layout: for each data object, in slot order,
//! an OSD-2 capability and its capability key (docs/security.md). This crate carries them as
//! opaque fixed-length fields; the client decodes the capability (`tessera-security`) before it
//! signs anything with it.
//!
//! On the wire a grant is a count (0, or exactly the layout's object count) and that many
//! 104 + 32 byte entries. An empty grant means the cluster runs without capability security.

use crate::error::DecodeError;
use crate::limits::OSDS_MAX;
use crate::wire::{Reader, Writer};

/// An OSD-2 capability (r05 §4.11.2.2, format 2).
pub const CAPABILITY_LEN: usize = 104;
/// HMAC-SHA256 of the capability and the OSD's system id under a working key.
pub const CAPABILITY_KEY_LEN: usize = 32;
const ENTRY_LEN: usize = CAPABILITY_LEN + CAPABILITY_KEY_LEN;

/// The credential for one data object.
#[derive(Clone, PartialEq, Eq)]
pub struct ObjectCredential {
    pub capability: [u8; CAPABILITY_LEN],
    pub key: [u8; CAPABILITY_KEY_LEN],
}

impl std::fmt::Debug for ObjectCredential {
    /// The key is a secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectCredential").field("capability", &&self.capability[..]).finish_non_exhaustive()
    }
}

/// Credentials for a layout's objects, slot by slot; empty without capability security.
pub type Grant = Vec<ObjectCredential>;

pub fn encode_grant(grant: &[ObjectCredential], w: &mut Writer) {
    w.count(grant.len(), OSDS_MAX);
    for c in grant {
        w.bytes(&c.capability);
        w.bytes(&c.key);
    }
}

/// Decodes a grant for a layout of `objects` objects: none, or one per object.
pub fn decode_grant(r: &mut Reader, objects: usize) -> Result<Grant, DecodeError> {
    let at = r.position();
    let n = r.count("credentials", OSDS_MAX, ENTRY_LEN)?;
    if n != 0 && n != objects {
        return Err(DecodeError::Invalid { what: "credential count (neither 0 nor one per object)", at });
    }
    let mut grant = Vec::with_capacity(n);
    for _ in 0..n {
        grant.push(ObjectCredential { capability: r.array()?, key: r.array()? });
    }
    Ok(grant)
}
