//! SET KEY (0x8898) and SET MASTER KEY (0x8899): the CDBs the security manager sends to change
//! a key. Neither carries the key: each carries a seed and a key identifier, and both ends derive
//! the new key from its parent ([`crate::keys::derive`]). The command itself must carry a
//! capability whose key comes from that parent, so only a holder of the parent can change a
//! child.
//!
//! Tessera's CDB use (the security fields at 80..235 as in every OSD command):
//!
//! ```text
//! 8..9    service action
//! 10      SET KEY: bits 1:0 key to set (01b root, 10b partition, 11b working key)
//!         SET MASTER KEY: 0 (derive from the current master key)
//! 11      SET KEY of a working key: bits 3:0 key version
//! 16..23  partition id (partition and working keys; 0 otherwise)
//! 24..30  key identifier (7 bytes)
//! 32..51  seed (20 bytes)
//! ```
//!
//! r05 changes the master key with a two-step Diffie-Hellman exchange; Tessera derives the new
//! master key from the current one instead and provisions the first one out of band
//! (docs/security.md), so byte 10 of SET MASTER KEY must be 0.

use tessera_osd_proto::cdb::{self, RawCdb, CDB_LEN};
use tessera_osd_proto::ServiceAction;
use tessera_scsi::Sense;
use tessera_types::ids::FIRST_ASSIGNABLE_ID;

use crate::capability::{Permissions, KEY_VERSIONS};
use crate::keys::{KeySlot, KEY_ID_LEN, SEED_LEN};
use crate::policy::Addressed;

pub const KEY_TO_SET: usize = cdb::OPTIONS;
pub const KEY_VERSION: usize = cdb::ATTR_FORMAT;
pub const KEY_ID: usize = cdb::OBJECT_ID;
pub const SEED: usize = cdb::LENGTH;
const _: () = assert!(KEY_ID + KEY_ID_LEN <= SEED && SEED + SEED_LEN == cdb::ATTR_PARAMS);

/// One key change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyCommand {
    /// The key that changes (`Master` for SET MASTER KEY).
    pub slot: KeySlot,
    pub key_id: [u8; KEY_ID_LEN],
    pub seed: [u8; SEED_LEN],
}

/// True when the CDB is SET KEY or SET MASTER KEY.
pub fn is_key_command(cdb: &[u8]) -> bool {
    RawCdb::new(cdb).is_some_and(|raw| {
        let sa = raw.u16(cdb::SERVICE_ACTION);
        sa == ServiceAction::SetKey as u16 || sa == ServiceAction::SetMasterKey as u16
    })
}

impl KeyCommand {
    /// Decodes a SET KEY / SET MASTER KEY CDB; a bad field is INVALID FIELD IN CDB pointing at
    /// it.
    pub fn decode(bytes: &[u8]) -> Result<KeyCommand, Sense> {
        let raw = RawCdb::new(bytes).ok_or(Sense::invalid_cdb_field(cdb::ADDITIONAL_CDB_LEN as u16))?;
        let bad = |at: usize| Sense::invalid_cdb_field(at as u16);
        if raw.u8(cdb::ADDITIONAL_CDB_LEN) != cdb::ADDITIONAL_CDB_LEN_VALUE {
            return Err(bad(cdb::ADDITIONAL_CDB_LEN));
        }
        let pid = raw.u64(cdb::PARTITION_ID);
        let slot = match raw.u16(cdb::SERVICE_ACTION) {
            sa if sa == ServiceAction::SetMasterKey as u16 => {
                if raw.u8(KEY_TO_SET) != 0 {
                    return Err(bad(KEY_TO_SET));
                }
                KeySlot::Master
            }
            sa if sa == ServiceAction::SetKey as u16 => match raw.u8(KEY_TO_SET) & 0x03 {
                0b01 => KeySlot::Root,
                0b10 => KeySlot::Partition(pid),
                0b11 => {
                    let version = raw.u8(KEY_VERSION) & 0x0F;
                    debug_assert!(version < KEY_VERSIONS);
                    KeySlot::Working(pid, version)
                }
                _ => return Err(bad(KEY_TO_SET)),
            },
            _ => return Err(bad(cdb::SERVICE_ACTION)),
        };
        let partition_ok = match slot {
            KeySlot::Master | KeySlot::Root => pid == 0,
            KeySlot::Partition(p) | KeySlot::Working(p, _) => p >= FIRST_ASSIGNABLE_ID,
        };
        if !partition_ok {
            return Err(bad(cdb::PARTITION_ID));
        }
        let mut key_id = [0u8; KEY_ID_LEN];
        key_id.copy_from_slice(raw.bytes(KEY_ID, KEY_ID_LEN));
        let mut seed = [0u8; SEED_LEN];
        seed.copy_from_slice(raw.bytes(SEED, SEED_LEN));
        Ok(KeyCommand { slot, key_id, seed })
    }

    /// The CDB with the security fields zero (a signer fills them).
    pub fn encode(&self) -> [u8; CDB_LEN] {
        let mut b = [0u8; CDB_LEN];
        b[cdb::OPCODE] = cdb::OPCODE_VARIABLE_LENGTH;
        b[cdb::ADDITIONAL_CDB_LEN] = cdb::ADDITIONAL_CDB_LEN_VALUE;
        let (sa, key_to_set, pid, version) = match self.slot {
            KeySlot::Master => (ServiceAction::SetMasterKey, 0, 0, 0),
            KeySlot::Root => (ServiceAction::SetKey, 0b01, 0, 0),
            KeySlot::Partition(p) => (ServiceAction::SetKey, 0b10, p, 0),
            KeySlot::Working(p, v) => (ServiceAction::SetKey, 0b11, p, v & 0x0F),
        };
        b[cdb::SERVICE_ACTION..cdb::SERVICE_ACTION + 2].copy_from_slice(&(sa as u16).to_be_bytes());
        b[KEY_TO_SET] = key_to_set;
        b[KEY_VERSION] = version;
        b[cdb::PARTITION_ID..cdb::PARTITION_ID + 8].copy_from_slice(&pid.to_be_bytes());
        b[KEY_ID..KEY_ID + KEY_ID_LEN].copy_from_slice(&self.key_id);
        b[SEED..SEED + SEED_LEN].copy_from_slice(&self.seed);
        b
    }

    /// What the command addresses: the root for the master and root keys, else the partition.
    pub fn addressed(&self) -> Addressed {
        match self.slot {
            KeySlot::Master | KeySlot::Root => Addressed::Root,
            KeySlot::Partition(p) | KeySlot::Working(p, _) => Addressed::Partition(p),
        }
    }

    pub fn permissions(&self) -> Permissions {
        match self.slot {
            KeySlot::Master => Permissions::POL_SEC | Permissions::DEV_MGMT,
            _ => Permissions::POL_SEC,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_slot() {
        for slot in [KeySlot::Master, KeySlot::Root, KeySlot::Partition(0x10000), KeySlot::Working(0x10002, 15)] {
            let c = KeyCommand { slot, key_id: [1, 2, 3, 4, 5, 6, 7], seed: [9; 20] };
            let b = c.encode();
            assert!(is_key_command(&b));
            assert_eq!(KeyCommand::decode(&b), Ok(c));
        }
    }

    /// Goal: bad fields are refused with their CDB byte.
    #[test]
    fn bad_fields_point_at_their_byte() {
        let c = KeyCommand { slot: KeySlot::Partition(0x10000), key_id: [0; 7], seed: [0; 20] };
        let mut b = c.encode();
        b[KEY_TO_SET] = 0;
        assert_eq!(KeyCommand::decode(&b).unwrap_err().field_pointer.unwrap().byte, 10);
        let mut b = c.encode();
        b[cdb::PARTITION_ID + 7] = 5; // partition 0x10005 is fine
        assert!(KeyCommand::decode(&b).is_ok());
        let bad_pid = KeyCommand { slot: KeySlot::Partition(5), ..c }.encode();
        assert_eq!(KeyCommand::decode(&bad_pid).unwrap_err().field_pointer.unwrap().byte, 16);
        let mut master = KeyCommand { slot: KeySlot::Master, ..c }.encode();
        master[KEY_TO_SET] = 1;
        assert_eq!(KeyCommand::decode(&master).unwrap_err().field_pointer.unwrap().byte, 10);
        assert!(KeyCommand::decode(&[0u8; 10]).is_err());
        assert!(!is_key_command(&[0u8; 10]));
    }

    proptest::proptest! {
        /// Arbitrary CDBs never panic the decoder; what decodes round-trips (the body of
        /// fuzz/fuzz_targets/security_key_command.rs).
        #[test]
        fn decode_never_panics(mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 230..240), sa in 0u16..3) {
            if bytes.len() > 9 {
                bytes[7] = 0xE4;
                bytes[8..10].copy_from_slice(&(0x8897 + sa).to_be_bytes());
            }
            crate::fuzzing::key_command_bytes(&bytes);
        }
    }
}
