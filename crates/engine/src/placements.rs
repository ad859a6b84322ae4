//! WRITEs whose data is arriving straight into an object's file ([`crate::PlacedWrite`]): where
//! each ends, so the stale-tail trim before an extension keeps their bytes, and whether a
//! logical-length set has run since they began (it may have cut bytes they had placed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tessera_types::ObjectAddr;

struct InFlight {
    id: u64,
    end: u64,
    disturbed: bool,
}

#[derive(Default)]
pub(crate) struct Placements {
    by_object: Mutex<HashMap<ObjectAddr, Vec<InFlight>>>,
    next_id: AtomicU64,
}

impl Placements {
    fn map(&self) -> MutexGuard<'_, HashMap<ObjectAddr, Vec<InFlight>>> {
        // Plain bookkeeping: a panic elsewhere cannot leave it half-updated.
        self.by_object.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a placement of `addr`'s bytes up to `end`, until the ticket drops.
    pub fn register(self: &Arc<Self>, addr: ObjectAddr, end: u64) -> Ticket {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.map().entry(addr).or_default().push(InFlight { id, end, disturbed: false });
        Ticket { placements: self.clone(), addr, id }
    }

    /// Where the stored data of `addr` may be cut without losing bytes in flight: the logical
    /// length, or past it the end of the furthest placement.
    pub fn keep_up_to(&self, addr: ObjectAddr, logical_len: u64) -> u64 {
        let map = self.map();
        let furthest = map.get(&addr).and_then(|v| v.iter().map(|p| p.end).max()).unwrap_or(0);
        logical_len.max(furthest)
    }

    /// A logical-length set on `addr` may have cut placed bytes: its placements must not commit.
    pub fn disturb(&self, addr: ObjectAddr) {
        if let Some(v) = self.map().get_mut(&addr) {
            for p in v {
                p.disturbed = true;
            }
        }
    }
}

/// One registered placement; dropping it forgets the placement.
pub(crate) struct Ticket {
    placements: Arc<Placements>,
    addr: ObjectAddr,
    id: u64,
}

impl Ticket {
    pub fn disturbed(&self) -> bool {
        let map = self.placements.map();
        map.get(&self.addr).and_then(|v| v.iter().find(|p| p.id == self.id)).is_some_and(|p| p.disturbed)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut map = self.placements.map();
        if let Some(v) = map.get_mut(&self.addr) {
            v.retain(|p| p.id != self.id);
            if v.is_empty() {
                map.remove(&self.addr);
            }
        }
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").field("addr", &self.addr).field("id", &self.id).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ObjectAddr = ObjectAddr { partition_id: tessera_types::PartitionId(0x10000), object_id: tessera_types::ObjectId(0x10000) };
    const B: ObjectAddr = ObjectAddr { partition_id: tessera_types::PartitionId(0x10000), object_id: tessera_types::ObjectId(0x10001) };

    #[test]
    fn keeps_bytes_in_flight_until_the_ticket_drops() {
        let p = Arc::new(Placements::default());
        assert_eq!(p.keep_up_to(A, 10), 10);
        let t1 = p.register(A, 100);
        let t2 = p.register(A, 50);
        assert_eq!(p.keep_up_to(A, 10), 100);
        assert_eq!(p.keep_up_to(A, 200), 200);
        assert_eq!(p.keep_up_to(B, 10), 10, "other objects are not affected");
        drop(t1);
        assert_eq!(p.keep_up_to(A, 10), 50);
        drop(t2);
        assert_eq!(p.keep_up_to(A, 10), 10);
        assert!(p.map().is_empty());
    }

    #[test]
    fn a_length_set_disturbs_only_placements_then_in_flight() {
        let p = Arc::new(Placements::default());
        let before = p.register(A, 100);
        let other = p.register(B, 100);
        p.disturb(A);
        let after = p.register(A, 100);
        assert!(before.disturbed());
        assert!(!other.disturbed());
        assert!(!after.disturbed());
    }
}
