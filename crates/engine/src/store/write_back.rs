//! Write-back failures, remembered. Once the kernel fails to write an object's dirty pages
//! (a failing disk, a thin device out of room), it reports the error to one fdatasync or
//! syncfs and then marks the pages clean: a second FLUSH of the same data would succeed
//! although the data never reached the disk (PostgreSQL's "fsyncgate"). So a FLUSH that failed
//! keeps failing: for the object, or for every object once a syncfs failed, until the OSD
//! restarts and serves what the disk really holds. Removing an object forgets it.

use std::io;
use std::sync::Mutex;

use tessera_types::ObjectAddr;

use crate::error::{IoOp, StorageError};

#[derive(Default)]
pub struct WriteBackErrors {
    /// Objects whose data sync failed, with the error number it gave.
    objects: Mutex<Vec<(ObjectAddr, i32)>>,
    /// Set once a sync of the whole file system failed: which objects lost data is unknown.
    everywhere: Mutex<Option<i32>>,
}

impl WriteBackErrors {
    /// The earlier failure a sync of `addr` must report again, if any.
    pub fn check_object(&self, addr: ObjectAddr) -> Result<(), StorageError> {
        self.check_all()?;
        let objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        match objects.iter().find(|(a, _)| *a == addr) {
            Some(&(_, errno)) => Err(again(errno)),
            None => Ok(()),
        }
    }

    /// The earlier failure a sync of the whole store must report again, if any.
    pub fn check_all(&self) -> Result<(), StorageError> {
        match *self.everywhere.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(errno) => Err(again(errno)),
            None => Ok(()),
        }
    }

    /// Records that syncing `addr` failed with `e`; returns the error to report.
    pub fn object_failed(&self, addr: ObjectAddr, e: io::Error) -> StorageError {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        tracing::error!(?addr, %e, "writing an object's data to disk failed; every later flush of it fails too, until the OSD restarts");
        let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        if !objects.iter().any(|(a, _)| *a == addr) {
            objects.push((addr, errno));
        }
        StorageError::Io { op: IoOp::Sync, source: e }
    }

    /// Records that syncing the whole file system failed with `e`; returns the error to report.
    pub fn all_failed(&self, e: io::Error) -> StorageError {
        tracing::error!(%e, "writing object data to disk failed; every later flush fails too, until the OSD restarts");
        self.everywhere.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e.raw_os_error().unwrap_or(libc::EIO));
        StorageError::Io { op: IoOp::Sync, source: e }
    }

    /// `addr` was removed: a new object of that id starts with nothing lost.
    pub fn forget(&self, addr: ObjectAddr) {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).retain(|(a, _)| *a != addr);
    }

    /// Partition `partition_id` was removed.
    pub fn forget_partition(&self, partition_id: u64) {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).retain(|(a, _)| a.partition_id.0 != partition_id);
    }
}

fn again(errno: i32) -> StorageError {
    StorageError::Io { op: IoOp::Sync, source: io::Error::from_raw_os_error(errno) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_sync_is_reported_again_until_its_object_goes() {
        let w = WriteBackErrors::default();
        let (a, b) = (ObjectAddr::new(0x10000, 0x10001), ObjectAddr::new(0x10000, 0x10002));
        assert!(w.check_object(a).is_ok());
        w.object_failed(a, io::Error::from_raw_os_error(libc::EIO));
        for _ in 0..2 {
            let again = w.check_object(a).unwrap_err();
            assert!(matches!(&again, StorageError::Io { op: IoOp::Sync, source } if source.raw_os_error() == Some(libc::EIO)), "{again}");
        }
        assert!(w.check_object(b).is_ok() && w.check_all().is_ok(), "other objects and the store are not marked");
        w.forget(a);
        assert!(w.check_object(a).is_ok());
        w.object_failed(b, io::Error::from_raw_os_error(libc::ENOSPC));
        w.forget_partition(0x10000);
        assert!(w.check_object(b).is_ok());
        w.all_failed(io::Error::from_raw_os_error(libc::EIO));
        assert!(w.check_all().is_err() && w.check_object(a).is_err() && w.check_object(b).is_err(), "a failed syncfs marks everything");
    }
}
