//! Caller memory lent to the session for one command's Data-In, so READ data is received
//! straight into the place the caller wants it instead of a buffer copied afterwards.
//!
//! Whichever thread is reading the socket (leader/follower, [`super::driver`]) writes the
//! Data-In, so the memory must be reachable from the task's slot, which is shared and outlives
//! the call. Hence raw pointers, and this invariant, which makes them sound:
//!
//! - A [`LentMemory`] is made only by [`Lend::new`] from an exclusive borrow `&'a mut` of the
//!   caller's slices, and lives only inside the slot's state, behind the slot's mutex: every
//!   write through it happens with that mutex held.
//! - The [`Lend`] guard keeps the borrow `'a` for as long as it lives, and its `Drop` takes the
//!   memory out of the slot under the same mutex (waiting for a write in progress to end). The
//!   guard is a local of the call that lent the memory and is never handed out, so it is
//!   dropped before that call returns, on success, on error and on unwind alike.
//!
//! So no write reaches the memory once the caller has it back, and while it is lent the caller
//! (blocked in the call) does not touch it.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

use super::session::Slot;

/// The lent slices, end to end, with a cursor: Data-In for lent memory arrives in order.
pub(crate) struct LentMemory {
    parts: Vec<(NonNull<u8>, usize)>,
    /// Part and offset within it where the next byte goes.
    part: usize,
    within: usize,
}

// SAFETY: the pointers are used only under the slot's mutex (module invariant), like the
// `&mut` they came from, which is `Send`.
unsafe impl Send for LentMemory {}

impl LentMemory {
    /// The next `n` bytes of the lent memory as slices, in order. `n` must not exceed what is
    /// left (the receiver checks Data-In offsets against the lent length first).
    pub fn take(&mut self, mut n: usize) -> Vec<&mut [u8]> {
        let mut out = Vec::new();
        while n > 0 {
            let (ptr, len) = self.parts[self.part];
            let k = n.min(len - self.within);
            // SAFETY: `ptr` and `len` come from a live `&mut [u8]` (module invariant: the borrow
            // outlives this memory's place in the slot), the range lies inside it, and the
            // cursor only moves forward, so no two slices returned ever overlap.
            out.push(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr().add(self.within), k) });
            self.within += k;
            n -= k;
            if self.within == len {
                self.part += 1;
                self.within = 0;
            }
        }
        out
    }
}

/// Keeps `'a` borrowed while the slot can reach the memory; revokes it when dropped.
pub(crate) struct Lend<'a> {
    slot: Arc<Slot>,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> Lend<'a> {
    /// Puts `memory` into `slot` for Data-In. Call before the command is sent.
    pub fn new(slot: Arc<Slot>, memory: &'a mut [&mut [u8]]) -> Self {
        let parts = memory.iter_mut().filter(|p| !p.is_empty()).map(|p| (NonNull::from(&mut **p).cast::<u8>(), p.len())).collect();
        slot.state.lock().unwrap_or_else(|p| p.into_inner()).lent = Some(LentMemory { parts, part: 0, within: 0 });
        Lend { slot, _borrow: PhantomData }
    }
}

impl Drop for Lend<'_> {
    fn drop(&mut self) {
        // Also through a poisoned lock: the memory must be taken back whatever happened.
        self.slot.state.lock().unwrap_or_else(|p| p.into_inner()).lent = None;
    }
}
