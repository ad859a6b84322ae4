//! The request nonce (CDB bytes 216..227) and the OSD's replay defence under CMDRSP and ALLDATA
//! (r05 §4.11.3.3).
//!
//! A nonce is 6 bytes of the initiator's clock (ms since the epoch) then 6 bytes that make it
//! unique. The OSD accepts a nonce only when its time lies in the window [now - past, now +
//! future] (else 24/07 NONCE TIMESTAMP OUT OF RANGE) and it has not seen it before (else 24/06
//! NONCE NOT UNIQUE). The replay list holds every nonce still inside the window, bounded: when
//! it is full the oldest entry leaves and every nonce at or before its time is refused as out of
//! range from then on (the floor), so no eviction ever lets a replay through. The floor starts
//! at the OSD's start time, so commands recorded before a restart cannot be replayed after it.

use std::collections::BTreeSet;

use tessera_osd_proto::cdb::REQUEST_NONCE_LEN;

/// Time part of a nonce, bytes.
const TIME_LEN: usize = 6;
const _: () = assert!(REQUEST_NONCE_LEN == 2 * TIME_LEN);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nonce(pub [u8; REQUEST_NONCE_LEN]);

impl Nonce {
    pub fn new(time_ms: u64, unique: u64) -> Nonce {
        let mut b = [0u8; REQUEST_NONCE_LEN];
        b[..TIME_LEN].copy_from_slice(&time_ms.to_be_bytes()[2..]);
        b[TIME_LEN..].copy_from_slice(&unique.to_be_bytes()[2..]);
        Nonce(b)
    }

    pub fn time_ms(&self) -> u64 {
        let b = &self.0;
        u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    fn unique(&self) -> [u8; TIME_LEN] {
        let mut u = [0u8; TIME_LEN];
        u.copy_from_slice(&self.0[TIME_LEN..]);
        u
    }
}

/// An initiator's nonces: the caller's clock plus a counter started at a random value, so two
/// initiators (or two runs) do not collide and one initiator never repeats itself within a
/// millisecond. Sans-IO: the caller supplies the random start and the time.
#[derive(Debug)]
pub struct NonceSource {
    next: std::sync::atomic::AtomicU64,
}

impl NonceSource {
    pub fn new(random_start: u64) -> Self {
        NonceSource { next: std::sync::atomic::AtomicU64::new(random_start) }
    }

    pub fn next(&self, now_ms: u64) -> Nonce {
        let unique = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Nonce::new(now_ms, unique)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NonceError {
    /// 24/06
    #[error("nonce already used")]
    NotUnique,
    /// 24/07
    #[error("nonce time {nonce_ms} ms lies outside the accepted window [{oldest_ms}, {newest_ms}]")]
    OutOfRange { nonce_ms: u64, oldest_ms: u64, newest_ms: u64 },
}

/// How wide the window is and how many nonces the list may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NonceWindow {
    /// How far in the past a nonce may be (the OSD's "oldest valid nonce limit").
    pub past_ms: u64,
    /// How far in the future (clock skew towards the initiator).
    pub future_ms: u64,
    /// Nonces remembered at most.
    pub capacity: usize,
}

impl Default for NonceWindow {
    /// One minute either way (clock skew between hosts), 256 Ki entries (about 10 MB).
    fn default() -> Self {
        NonceWindow { past_ms: 60_000, future_ms: 60_000, capacity: 256 * 1024 }
    }
}

/// The OSD's replay list.
#[derive(Debug)]
pub struct ReplayList {
    window: NonceWindow,
    seen: BTreeSet<(u64, [u8; TIME_LEN])>,
    /// Nonces at or before this time are refused.
    floor_ms: u64,
}

impl ReplayList {
    /// A list for an OSD that started at `start_ms`.
    pub fn new(window: NonceWindow, start_ms: u64) -> Self {
        assert!(window.capacity > 0, "a replay list must hold at least one nonce");
        // Strictly before the start: the previous run's commands were all older, and a client
        // may sign its first command in the very millisecond this one started.
        ReplayList { window, seen: BTreeSet::new(), floor_ms: start_ms.saturating_sub(1) }
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Accepts `nonce` at `now_ms` once, or says why not.
    pub fn accept(&mut self, nonce: &Nonce, now_ms: u64) -> Result<(), NonceError> {
        let t = nonce.time_ms();
        let oldest_ms = now_ms.saturating_sub(self.window.past_ms);
        let newest_ms = now_ms.saturating_add(self.window.future_ms);
        if t < oldest_ms || t > newest_ms || t <= self.floor_ms {
            return Err(NonceError::OutOfRange { nonce_ms: t, oldest_ms: oldest_ms.max(self.floor_ms + 1), newest_ms });
        }
        // Entries older than the window can never match again: their nonces are refused above.
        while let Some(&first) = self.seen.first() {
            if first.0 >= oldest_ms {
                break;
            }
            self.seen.pop_first();
        }
        if !self.seen.insert((t, nonce.unique())) {
            return Err(NonceError::NotUnique);
        }
        if self.seen.len() > self.window.capacity {
            if let Some((evicted, _)) = self.seen.pop_first() {
                self.floor_ms = self.floor_ms.max(evicted);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: u64 = 1_000_000;

    fn list(capacity: usize) -> ReplayList {
        ReplayList::new(NonceWindow { past_ms: 1000, future_ms: 500, capacity }, START)
    }

    #[test]
    fn nonce_fields() {
        let n = Nonce::new(0x0102_0304_0506, 0x0A0B_0C0D_0E0F);
        assert_eq!(n.0, [1, 2, 3, 4, 5, 6, 0xA, 0xB, 0xC, 0xD, 0xE, 0xF]);
        assert_eq!(n.time_ms(), 0x0102_0304_0506);
    }

    #[test]
    fn a_nonce_is_accepted_once() {
        let mut l = list(16);
        let n = Nonce::new(START + 10, 1);
        assert_eq!(l.accept(&n, START + 20), Ok(()));
        assert_eq!(l.accept(&n, START + 30), Err(NonceError::NotUnique));
        assert_eq!(l.accept(&Nonce::new(START + 10, 2), START + 30), Ok(()));
    }

    /// Goal: the window bounds in both directions, and the start time is a floor.
    #[test]
    fn the_window_bounds_time() {
        let mut l = list(16);
        let now = START + 5000;
        assert!(matches!(l.accept(&Nonce::new(now - 1001, 1), now), Err(NonceError::OutOfRange { .. })));
        assert_eq!(l.accept(&Nonce::new(now - 1000, 1), now), Ok(()));
        assert!(matches!(l.accept(&Nonce::new(now + 501, 1), now), Err(NonceError::OutOfRange { .. })));
        assert_eq!(l.accept(&Nonce::new(now + 500, 1), now), Ok(()));
        // Right after a start, nonces from before it are refused even inside the window.
        let mut fresh = list(16);
        assert!(matches!(fresh.accept(&Nonce::new(START - 1, 1), START + 10), Err(NonceError::OutOfRange { .. })));
        assert_eq!(fresh.accept(&Nonce::new(START, 1), START), Ok(()));
    }

    /// Goal: a full list never lets a replay through. Method: overflow it, replay the evicted
    /// nonce.
    #[test]
    fn eviction_raises_the_floor() {
        let mut l = list(4);
        let now = START + 100;
        for i in 1..=5 {
            l.accept(&Nonce::new(START + i, i), now).unwrap();
        }
        assert_eq!(l.len(), 4);
        assert!(matches!(l.accept(&Nonce::new(START + 1, 1), now), Err(NonceError::OutOfRange { .. })));
        assert_eq!(l.accept(&Nonce::new(START + 2, 2), now), Err(NonceError::NotUnique));
        assert_eq!(l.accept(&Nonce::new(START + 6, 6), now), Ok(()));
    }

    #[test]
    fn old_entries_are_pruned() {
        let mut l = list(1000);
        l.accept(&Nonce::new(START + 1, 1), START + 2).unwrap();
        l.accept(&Nonce::new(START + 5000, 2), START + 5000).unwrap();
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn sources_do_not_repeat() {
        let s = NonceSource::new(u64::MAX - 1);
        let a = s.next(START);
        let b = s.next(START);
        assert_ne!(a, b);
        assert_eq!(a.time_ms(), START);
    }
}
