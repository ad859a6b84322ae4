//! The cluster's rename lock, held by metadata server 0, as Lustre's DNE holds a global one for
//! directory renames. A directory that moves to another parent must not end up below itself,
//! and the check walks the new parent's ancestors, some of them homed on other servers. A
//! server checks its own part inside its transaction, but another server's part as that server
//! answered a moment before; two moves on two servers could then each pass against a chain the
//! other is changing, and close a cycle that leaves both directories out of the tree. So every
//! such move, on any server, runs holding this lock. Moves within one directory, and renames of
//! anything but a directory, change no chain and do not take it.
//!
//! The lock is a lease: a holder that dies (or whose release is lost) holds it at most
//! [`LEASE`], after which it is free again; holders finish in milliseconds.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest a taken lock stays taken without being given back.
pub const LEASE: Duration = Duration::from_secs(60);

/// How long a move waits for the lock before it answers EBUSY; below a client's reply timeout.
pub const WAIT_MAX: Duration = Duration::from_secs(20);

/// The lock itself, on metadata server 0.
#[derive(Default)]
pub struct RenameLock {
    held: Mutex<Option<(u64, Instant)>>,
}

impl RenameLock {
    /// Takes the lock for `token` unless another token holds an unexpired lease; whether it
    /// was taken. Taking it again under the same token renews the lease.
    pub fn try_take(&self, token: u64, now: Instant) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        match *held {
            Some((holder, until)) if holder != token && now < until => false,
            _ => {
                *held = Some((token, now + LEASE));
                true
            }
        }
    }

    /// Gives the lock back if `token` holds it; a stale token (its lease ran out and another
    /// took the lock) changes nothing.
    pub fn release(&self, token: u64) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(*held, Some((holder, _)) if holder == token) {
            *held = None;
        }
    }
}

/// Where a server takes the lock: from itself (server 0) or from server 0 over its peer
/// connection.
pub trait LockHolder {
    /// Takes the lock for `token`; `Ok(false)` while another holds it.
    fn take(&self, token: u64) -> Result<bool, tessera_mds_proto::FsError>;
    /// Gives it back; a release that is lost leaves the lease to run out.
    fn give_back(&self, token: u64);
}

/// The lock, held until dropped.
pub struct Held<'a> {
    holder: &'a dyn LockHolder,
    token: u64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.holder.give_back(self.token);
    }
}

/// Takes the lock for `token`, waiting up to [`WAIT_MAX`] for its holder to finish; `Busy` after.
pub fn acquire(holder: &dyn LockHolder, token: u64) -> Result<Held<'_>, tessera_mds_proto::FsError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    while !holder.take(token)? {
        if start.elapsed() >= WAIT_MAX {
            tracing::warn!(waited = ?WAIT_MAX, "the cluster's rename lock stayed held; answering EBUSY");
            return Err(tessera_mds_proto::FsError::Busy);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    Ok(Held { holder, token })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_until_release_or_lease_end() {
        let lock = RenameLock::default();
        let t0 = Instant::now();
        assert!(lock.try_take(1, t0));
        assert!(!lock.try_take(2, t0), "held by another");
        assert!(lock.try_take(1, t0), "the holder renews");
        lock.release(2);
        assert!(!lock.try_take(2, t0), "only the holder releases");
        lock.release(1);
        assert!(lock.try_take(2, t0));
        assert!(!lock.try_take(3, t0 + LEASE - Duration::from_millis(1)));
        assert!(lock.try_take(3, t0 + LEASE), "a lease that ran out frees the lock");
        lock.release(2);
        assert!(!lock.try_take(4, t0 + LEASE), "a stale holder's release changes nothing");
    }
}
