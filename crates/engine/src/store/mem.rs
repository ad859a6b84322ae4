//! Object data in memory: a simulator's disk and a second implementation for the
//! [`super::ObjectData`] contract suite. Every stored byte counts as written (no holes inside
//! the stored length); used capacity is the stored length.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use tessera_types::ObjectAddr;

use super::{MapExtent, ObjectData};
use crate::error::StorageError;

#[derive(Default)]
pub struct MemStore {
    objects: Mutex<BTreeMap<ObjectAddr, Vec<u8>>>,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn objects(&self) -> MutexGuard<'_, BTreeMap<ObjectAddr, Vec<u8>>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn grow(v: &mut Vec<u8>, end: u64) {
    if (v.len() as u64) < end {
        v.resize(end as usize, 0);
    }
}

impl ObjectData for MemStore {
    fn read_at(&self, addr: ObjectAddr, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        let objects = self.objects();
        let Some(v) = objects.get(&addr) else { return Ok(0) };
        let start = (offset.min(v.len() as u64)) as usize;
        let n = (v.len() - start).min(buf.len());
        buf[..n].copy_from_slice(&v[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, addr: ObjectAddr, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let mut objects = self.objects();
        let v = objects.entry(addr).or_default();
        grow(v, offset + data.len() as u64);
        v[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn stored_len(&self, addr: ObjectAddr) -> Result<u64, StorageError> {
        Ok(self.objects().get(&addr).map_or(0, |v| v.len() as u64))
    }

    fn set_len(&self, addr: ObjectAddr, len: u64) -> Result<(), StorageError> {
        let mut objects = self.objects();
        if len == 0 && !objects.contains_key(&addr) {
            return Ok(());
        }
        objects.entry(addr).or_default().resize(len as usize, 0);
        Ok(())
    }

    fn used_bytes(&self, addr: ObjectAddr) -> Result<u64, StorageError> {
        self.stored_len(addr)
    }

    fn punch(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<(), StorageError> {
        let mut objects = self.objects();
        if let Some(v) = objects.get_mut(&addr) {
            let end = (offset + len).min(v.len() as u64) as usize;
            let start = (offset as usize).min(end);
            v[start..end].fill(0);
        }
        Ok(())
    }

    fn zero(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<(), StorageError> {
        let mut objects = self.objects();
        let v = objects.entry(addr).or_default();
        grow(v, offset + len);
        v[offset as usize..(offset + len) as usize].fill(0);
        Ok(())
    }

    fn map(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<Vec<MapExtent>, StorageError> {
        let stored = self.stored_len(addr)?;
        let end = offset + len;
        let mut out = Vec::new();
        if offset < stored.min(end) {
            out.push(MapExtent { offset, len: stored.min(end) - offset, written: true });
        }
        let hole_start = offset.max(stored);
        if hole_start < end {
            out.push(MapExtent { offset: hole_start, len: end - hole_start, written: false });
        }
        Ok(out)
    }

    fn sync(&self, _addr: ObjectAddr) -> Result<(), StorageError> {
        Ok(())
    }

    fn sync_all(&self) -> Result<(), StorageError> {
        Ok(())
    }

    fn remove(&self, addr: ObjectAddr) -> Result<(), StorageError> {
        self.objects().remove(&addr);
        Ok(())
    }

    fn remove_partition(&self, partition_id: u64) -> Result<(), StorageError> {
        self.objects().retain(|a, _| a.partition_id.0 != partition_id);
        Ok(())
    }

    fn wipe(&self) -> Result<(), StorageError> {
        self.objects().clear();
        Ok(())
    }
}
