//! The security manager's copy of one OSD's keys ([`OsdKeys`]): what it needs to establish
//! keys with SET KEY / SET MASTER KEY and to issue credentials. Tessera's metadata server keeps
//! one per OSD; tests and tools use it to play the security manager. Sans-IO: seeds and key
//! identifiers come from the caller's randomness, and a key is recorded only after the OSD
//! answered GOOD to the command that set it.

use std::collections::HashMap;

use crate::capability::{Capability, ObjectType, Permissions, Scope, SecurityMethod, KEY_VERSIONS};
use crate::credential::Credential;
use crate::icv::KeyingKey;
use crate::key_commands::KeyCommand;
use crate::keys::{derive, Key, KeySlot, KEY_ID_LEN, SEED_LEN};

/// How long the capability of a key command lives: it is used at once.
const KEY_COMMAND_LIFETIME_MS: u64 = 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ManagerError {
    #[error("the security manager holds no {0} for this OSD")]
    NoKey(KeySlot),
}

/// A key the manager holds, ready to derive capability keys under.
#[derive(Clone)]
struct Held {
    key: Key,
    keying: KeyingKey,
}

impl Held {
    fn new(key: Key) -> Held {
        let keying = KeyingKey::new(&key);
        Held { key, keying }
    }
}

/// One OSD's keys as the security manager knows them.
#[derive(Clone)]
pub struct OsdKeys {
    system_id: [u8; 20],
    keys: HashMap<KeySlot, Held>,
    /// The working key version new capabilities of each partition use.
    current: HashMap<u64, u8>,
}

impl std::fmt::Debug for OsdKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut slots: Vec<&KeySlot> = self.keys.keys().collect();
        slots.sort();
        f.debug_struct("OsdKeys").field("slots", &slots).finish()
    }
}

impl OsdKeys {
    /// Keys of the OSD with `system_id` whose master key is `master` (provisioned out of band).
    pub fn new(system_id: [u8; 20], master: Key) -> Self {
        OsdKeys { system_id, keys: HashMap::from([(KeySlot::Master, Held::new(master))]), current: HashMap::new() }
    }

    pub fn system_id(&self) -> [u8; 20] {
        self.system_id
    }

    pub fn has(&self, slot: KeySlot) -> bool {
        self.keys.contains_key(&slot)
    }

    /// The working key version new capabilities of `pid` use, if one is set.
    pub fn current_version(&self, pid: u64) -> Option<u8> {
        self.current.get(&pid).copied()
    }

    /// The version a rotation of `pid` installs next: the one after the current.
    pub fn next_version(&self, pid: u64) -> u8 {
        self.current_version(pid).map_or(0, |v| (v + 1) % KEY_VERSIONS)
    }

    /// A SET KEY (or SET MASTER KEY for [`KeySlot::Master`]) for `slot` and the credential to
    /// send it with, signed under the slot's parent key.
    pub fn key_command(
        &self,
        slot: KeySlot,
        key_id: [u8; KEY_ID_LEN],
        seed: [u8; SEED_LEN],
        method: SecurityMethod,
        now_ms: u64,
    ) -> Result<(KeyCommand, Credential), ManagerError> {
        let command = KeyCommand { slot, key_id, seed };
        let parent_slot = slot.parent();
        let parent = &self.keys.get(&parent_slot).ok_or(ManagerError::NoKey(parent_slot))?.keying;
        let mut cap = match command.addressed() {
            crate::policy::Addressed::Partition(pid) => {
                Capability::new(method, ObjectType::Partition, Scope::Partition, pid, 0, command.permissions())
            }
            _ => Capability::new(method, ObjectType::Root, Scope::Root, 0, 0, command.permissions()),
        };
        cap.expires_ms = now_ms + KEY_COMMAND_LIFETIME_MS;
        let key = parent.capability_key(&cap.encode(), &self.system_id);
        Ok((command, Credential::new(cap, &key)))
    }

    /// Records the key a command set, after the OSD answered GOOD. A working key becomes the
    /// partition's current version.
    pub fn record(&mut self, command: &KeyCommand) -> Result<(), ManagerError> {
        let parent_slot = command.slot.parent();
        let parent = &self.keys.get(&parent_slot).ok_or(ManagerError::NoKey(parent_slot))?.key;
        let key = derive(parent, command.slot, &command.key_id, &command.seed);
        match command.slot {
            KeySlot::Working(pid, v) => {
                self.current.insert(pid, v);
            }
            KeySlot::Partition(pid) => {
                // A new partition key orphans the working keys derived from the old one.
                self.keys.retain(|s, _| !matches!(s, KeySlot::Working(p, _) if *p == pid));
                self.current.remove(&pid);
            }
            KeySlot::Master | KeySlot::Root => {}
        }
        self.keys.insert(command.slot, Held::new(key));
        Ok(())
    }

    /// Forgets a removed partition's keys (the OSD forgot them too).
    pub fn forget_partition(&mut self, pid: u64) {
        self.keys.retain(|s, _| !matches!(s, KeySlot::Partition(p) | KeySlot::Working(p, _) if *p == pid));
        self.current.remove(&pid);
    }

    /// A credential for `capability`: root scope under the root key, anything in a partition
    /// under the working key the capability's key version names.
    pub fn credential(&self, capability: Capability) -> Result<Credential, ManagerError> {
        let cap_key = self.capability_key(&capability)?;
        Ok(Credential::new(capability, &cap_key))
    }

    /// The capability key of `capability` (what a client receives beside it): HMAC over the
    /// capability and the system id under the key its scope and version name.
    pub fn capability_key(&self, capability: &Capability) -> Result<Key, ManagerError> {
        let slot = match capability.scope {
            Scope::Root => KeySlot::Root,
            _ => KeySlot::Working(capability.partition_id, capability.key_version),
        };
        let held = self.keys.get(&slot).ok_or(ManagerError::NoKey(slot))?;
        Ok(held.keying.capability_key(&capability.encode(), &self.system_id))
    }

    /// A capability for the root object with `permissions`, expiring at `expires_ms`.
    pub fn root_capability(&self, method: SecurityMethod, permissions: Permissions, expires_ms: u64) -> Capability {
        let mut c = Capability::new(method, ObjectType::Root, Scope::Root, 0, 0, permissions);
        c.expires_ms = expires_ms;
        c
    }

    /// A capability for partition `pid` and everything in it, under its current working key.
    pub fn partition_capability(&self, method: SecurityMethod, pid: u64, permissions: Permissions, expires_ms: u64) -> Result<Capability, ManagerError> {
        let version = self.current_version(pid).ok_or(ManagerError::NoKey(KeySlot::Working(pid, 0)))?;
        let mut c = Capability::new(method, ObjectType::Partition, Scope::Partition, pid, 0, permissions);
        c.expires_ms = expires_ms;
        c.key_version = version;
        Ok(c)
    }

    /// A capability for one user object under its partition's current working key.
    pub fn object_capability(
        &self,
        method: SecurityMethod,
        pid: u64,
        oid: u64,
        permissions: Permissions,
        expires_ms: u64,
        policy_tag: u32,
    ) -> Result<Capability, ManagerError> {
        let version = self.current_version(pid).ok_or(ManagerError::NoKey(KeySlot::Working(pid, 0)))?;
        let mut c = Capability::new(method, ObjectType::User, Scope::Object, pid, oid, permissions);
        c.expires_ms = expires_ms;
        c.key_version = version;
        c.policy_tag = policy_tag;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the manager and an OSD that applies the same commands hold the same keys, so the
    /// manager's credentials verify at the OSD. Method: the checker's own derivation.
    #[test]
    fn manager_and_osd_derive_the_same_keys() {
        use crate::check::{Checker, CheckerConfig};
        let master = Key([7; 32]);
        let sysid = [3; 20];
        let mut m = OsdKeys::new(sysid, master.clone());
        let osd = Checker::new(CheckerConfig { required: SecurityMethod::CmdRsp, nonce_window: Default::default() }, sysid, [(KeySlot::Master, master)], 0);
        for (i, slot) in [KeySlot::Root, KeySlot::Partition(0x10000), KeySlot::Working(0x10000, 0)].into_iter().enumerate() {
            let (cmd, _cred) = m.key_command(slot, [i as u8; 7], [i as u8 + 1; 20], SecurityMethod::CmdRsp, 0).unwrap();
            osd.set_key(slot, osd.derive(&cmd).unwrap());
            m.record(&cmd).unwrap();
        }
        assert_eq!(m.current_version(0x10000), Some(0));
        assert_eq!(m.next_version(0x10000), 1);
        assert!(m.has(KeySlot::Working(0x10000, 0)));
        assert!(m.object_capability(SecurityMethod::CmdRsp, 0x10001, 5, Permissions::READ, 0, 0).is_err());
        let (cmd, _) = m.key_command(KeySlot::Partition(0x10000), [9; 7], [9; 20], SecurityMethod::CmdRsp, 0).unwrap();
        m.record(&cmd).unwrap();
        assert!(!m.has(KeySlot::Working(0x10000, 0)), "a new partition key orphans its working keys");
        assert_eq!(m.key_command(KeySlot::Working(0x10001, 0), [0; 7], [0; 20], SecurityMethod::CmdRsp, 0).unwrap_err(), ManagerError::NoKey(KeySlot::Partition(0x10001)));
    }
}
