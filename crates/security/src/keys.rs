//! The OSD-2 key hierarchy (r05 §4.11.4): master -> root -> partition -> up to 16 working keys
//! per partition. The security manager and the OSD each hold a copy; no key ever crosses the
//! wire. SET KEY names a key slot and carries a seed and a key identifier; both sides derive the
//! new key from its parent with [`derive`]. The first master key is provisioned out of band
//! (docs/security.md).
//!
//! Which key signs what (Tessera's reading of r05 §4.11.4.2):
//!
//! | command | key the capability key is computed from |
//! |---|---|
//! | SET MASTER KEY, SET KEY of the root key | master key |
//! | SET KEY of a partition key | root key |
//! | SET KEY of a working key | that partition's partition key |
//! | any other command on the root object | root key |
//! | any other command in a partition | working key (partition, capability key version) |

use std::fmt;

use crate::icv::hmac_sha256;

pub const KEY_LEN: usize = 32;
/// SET KEY's key identifier (r05: 7 bytes), kept beside each key so the security manager can
/// tell which generation an OSD holds.
pub const KEY_ID_LEN: usize = 7;
/// SET KEY's seed.
pub const SEED_LEN: usize = 20;

/// A secret key. `Debug` prints nothing of it, so a key cannot end up in a log by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(pub [u8; KEY_LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    pub fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// Parses 64 hex digits (surrounding whitespace ignored): the master key file format.
    pub fn from_hex(text: &str) -> Option<Key> {
        let t = text.trim();
        if t.len() != 2 * KEY_LEN || !t.is_ascii() {
            return None;
        }
        let mut k = [0u8; KEY_LEN];
        for (i, out) in k.iter_mut().enumerate() {
            *out = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Key(k))
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A place in the key hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeySlot {
    Master,
    Root,
    Partition(u64),
    /// (partition id, key version 0..15)
    Working(u64, u8),
}

impl KeySlot {
    /// The key a new key of this slot is derived from, and that signs its SET KEY.
    pub fn parent(self) -> KeySlot {
        match self {
            KeySlot::Master | KeySlot::Root => KeySlot::Master,
            KeySlot::Partition(_) => KeySlot::Root,
            KeySlot::Working(pid, _) => KeySlot::Partition(pid),
        }
    }

    /// (kind code, partition id, version): the storage and derivation encoding.
    pub fn parts(self) -> (u8, u64, u8) {
        match self {
            KeySlot::Master => (0, 0, 0),
            KeySlot::Root => (1, 0, 0),
            KeySlot::Partition(pid) => (2, pid, 0),
            KeySlot::Working(pid, v) => (3, pid, v),
        }
    }

    pub fn from_parts(kind: u8, pid: u64, version: u8) -> Option<KeySlot> {
        Some(match kind {
            0 => KeySlot::Master,
            1 => KeySlot::Root,
            2 => KeySlot::Partition(pid),
            3 if version < crate::capability::KEY_VERSIONS => KeySlot::Working(pid, version),
            _ => return None,
        })
    }
}

impl fmt::Display for KeySlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySlot::Master => f.write_str("master key"),
            KeySlot::Root => f.write_str("root key"),
            KeySlot::Partition(pid) => write!(f, "partition key of {pid:#x}"),
            KeySlot::Working(pid, v) => write!(f, "working key {v} of partition {pid:#x}"),
        }
    }
}

/// Domain separation for key derivation, so a derived key can never equal an integrity value
/// computed elsewhere under the same parent.
const DERIVE_LABEL: &[u8] = b"tessera-osd2-set-key";

/// The new key of `slot`: HMAC-SHA256 under the parent key over the label, the slot, the key
/// identifier and the seed. Binding the slot means one seed cannot yield the same key in two
/// places.
pub fn derive(parent: &Key, slot: KeySlot, key_id: &[u8; KEY_ID_LEN], seed: &[u8; SEED_LEN]) -> Key {
    let (kind, pid, version) = slot.parts();
    Key(hmac_sha256(parent.bytes(), &[DERIVE_LABEL, &[kind], &pid.to_be_bytes(), &[version], key_id, seed]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_follow_the_hierarchy() {
        assert_eq!(KeySlot::Working(0x10000, 3).parent(), KeySlot::Partition(0x10000));
        assert_eq!(KeySlot::Partition(0x10000).parent(), KeySlot::Root);
        assert_eq!(KeySlot::Root.parent(), KeySlot::Master);
        assert_eq!(KeySlot::Master.parent(), KeySlot::Master);
        for s in [KeySlot::Master, KeySlot::Root, KeySlot::Partition(7), KeySlot::Working(7, 15)] {
            let (k, p, v) = s.parts();
            assert_eq!(KeySlot::from_parts(k, p, v), Some(s));
        }
        assert_eq!(KeySlot::from_parts(3, 7, 16), None);
    }

    /// Goal: derivation depends on every input. Method: change one at a time.
    #[test]
    fn derivation_binds_parent_slot_id_and_seed() {
        let parent = Key([1; 32]);
        let base = derive(&parent, KeySlot::Working(0x10000, 0), &[0; 7], &[9; 20]);
        assert_eq!(base, derive(&parent, KeySlot::Working(0x10000, 0), &[0; 7], &[9; 20]));
        assert_ne!(base, derive(&Key([2; 32]), KeySlot::Working(0x10000, 0), &[0; 7], &[9; 20]));
        assert_ne!(base, derive(&parent, KeySlot::Working(0x10000, 1), &[0; 7], &[9; 20]));
        assert_ne!(base, derive(&parent, KeySlot::Working(0x10001, 0), &[0; 7], &[9; 20]));
        assert_ne!(base, derive(&parent, KeySlot::Working(0x10000, 0), &[1; 7], &[9; 20]));
        assert_ne!(base, derive(&parent, KeySlot::Working(0x10000, 0), &[0; 7], &[8; 20]));
    }

    #[test]
    fn hex_round_trips_and_debug_hides_the_key() {
        let k = Key([0xAB; 32]);
        assert_eq!(Key::from_hex(&format!(" {}\n", k.to_hex())), Some(k.clone()));
        assert_eq!(Key::from_hex("abcd"), None);
        assert_eq!(Key::from_hex(&"zz".repeat(32)), None);
        assert_eq!(format!("{k:?}"), "Key(..)");
    }
}
