//! The security manager's key schedule: which key id and seed each SET KEY carries, and which
//! working key version capabilities use at a given time.
//!
//! Seeds are not secret (they travel in the clear), they only have to differ between keys. Tessera
//! derives them from the OSD's master key, the slot and an epoch number, so every metadata
//! server holding the master key computes the same keys without talking to the others, and a
//! restarted server re-establishes exactly the keys the OSD already holds (outstanding
//! capabilities stay valid). Root and partition keys use epoch 0 (they change only when an
//! operator rotates the master key); working keys use the rotation epoch `now / period`, and
//! epoch `e` lives in key version `e mod 16`, so a version is overwritten sixteen periods after
//! it was installed.

use crate::capability::KEY_VERSIONS;
use crate::icv::hmac_sha256;
use crate::keys::{Key, KeySlot, KEY_ID_LEN, SEED_LEN};

const SEED_LABEL: &[u8] = b"tessera-key-schedule-seed";

/// Working keys rotate every `period_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySchedule {
    pub period_ms: u64,
}

impl KeySchedule {
    /// A schedule; a zero period is taken as one millisecond so `epoch` never divides by zero.
    pub fn new(period_ms: u64) -> KeySchedule {
        KeySchedule { period_ms: period_ms.max(1) }
    }

    /// The rotation epoch at `now_ms`.
    pub fn epoch(&self, now_ms: u64) -> u64 {
        now_ms / self.period_ms
    }

    /// When `epoch` ends.
    pub fn epoch_end_ms(&self, epoch: u64) -> u64 {
        epoch.saturating_add(1).saturating_mul(self.period_ms)
    }

    /// The working key version that holds `epoch`'s key.
    pub fn version(epoch: u64) -> u8 {
        (epoch % KEY_VERSIONS as u64) as u8
    }

    /// The working key slot of partition `pid` for `epoch`.
    pub fn working_slot(pid: u64, epoch: u64) -> KeySlot {
        KeySlot::Working(pid, Self::version(epoch))
    }

    /// The longest capability lifetime this schedule supports: a capability issued at the very
    /// end of an epoch must expire before its key version is reused, 15 periods later.
    pub fn lifetime_max_ms(&self) -> u64 {
        self.period_ms.saturating_mul(KEY_VERSIONS as u64 - 1)
    }
}

/// The key id and seed of `slot`'s key in `epoch` (0 for root and partition keys), derived from
/// the OSD's `master` key.
pub fn scheduled_seed(master: &Key, slot: KeySlot, epoch: u64) -> ([u8; KEY_ID_LEN], [u8; SEED_LEN]) {
    let (kind, pid, version) = slot.parts();
    let mac = hmac_sha256(master.bytes(), &[SEED_LABEL, &[kind], &pid.to_be_bytes(), &[version], &epoch.to_be_bytes()]);
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&mac[..KEY_ID_LEN]);
    let mut seed = [0u8; SEED_LEN];
    seed.copy_from_slice(&mac[KEY_ID_LEN..KEY_ID_LEN + SEED_LEN]);
    (id, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_map_onto_the_sixteen_versions() {
        let s = KeySchedule::new(1000);
        assert_eq!(s.epoch(15_999), 15);
        assert_eq!(KeySchedule::version(15), 15);
        assert_eq!(KeySchedule::version(16), 0);
        assert_eq!(s.epoch_end_ms(3), 4000);
        assert_eq!(s.lifetime_max_ms(), 15_000);
        assert_eq!(KeySchedule::new(0).epoch(5), 5);
    }

    /// Goal: two managers agree without talking, and seeds differ by slot, epoch and master key.
    #[test]
    fn seeds_are_deterministic_and_distinct() {
        let m = Key([1; 32]);
        let a = scheduled_seed(&m, KeySlot::Working(0x10000, 3), 19);
        assert_eq!(a, scheduled_seed(&m, KeySlot::Working(0x10000, 3), 19));
        assert_ne!(a, scheduled_seed(&m, KeySlot::Working(0x10000, 3), 35));
        assert_ne!(a, scheduled_seed(&m, KeySlot::Working(0x10001, 3), 19));
        assert_ne!(a, scheduled_seed(&Key([2; 32]), KeySlot::Working(0x10000, 3), 19));
        assert_ne!(scheduled_seed(&m, KeySlot::Root, 0), scheduled_seed(&m, KeySlot::Partition(0), 0));
    }
}
