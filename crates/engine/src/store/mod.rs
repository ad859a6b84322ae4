//! Object data behind one small trait, so the command logic never knows whether bytes live in
//! one file per object ([`file::FileStore`]), in memory ([`mem::MemStore`], for simulators and
//! tests) or, later, in an extent-based store.
//!
//! Every method addresses a user object by its [`ObjectAddr`]. An object that was never
//! written has no data: it reads as zeros and maps as one hole. Logical length is not the
//! store's business; it lives in the attribute store, and the engine clamps reads to it.

pub mod cache;
mod fault_guard;
pub mod file;
pub mod mapped;
pub mod mem;
pub mod plan;
pub mod space;
pub mod write_back;

use tessera_types::ObjectAddr;

use crate::error::StorageError;
pub use plan::Piece;

/// One extent of a READ MAP answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapExtent {
    pub offset: u64,
    pub len: u64,
    /// True for written (allocated) data, false for a hole.
    pub written: bool,
}

/// Per-object data I/O.
pub trait ObjectData: Send + Sync {
    /// The open file holding the object's bytes, for stores that keep one file per object, so
    /// a target can send data with `sendfile` instead of copying it through a buffer. `None`
    /// (the default) when the store has no such file or the object has no data yet.
    fn file(&self, _addr: ObjectAddr) -> Result<Option<std::sync::Arc<std::fs::File>>, StorageError> {
        Ok(None)
    }

    /// True when [`ObjectData::file_for_write`] works: the store keeps one file per object.
    fn places_writes(&self) -> bool {
        false
    }

    /// The open file holding the object's bytes, created if the object has no data yet, for a
    /// target that receives WRITE data straight into it. Only where
    /// [`ObjectData::places_writes`]; the default refuses.
    fn file_for_write(&self, _addr: ObjectAddr) -> Result<std::sync::Arc<std::fs::File>, StorageError> {
        Err(StorageError::Io { op: crate::error::IoOp::Open, source: std::io::ErrorKind::Unsupported.into() })
    }

    /// True when [`ObjectData::prepare_list_write`] maps a file of `end` bytes: list WRITEs
    /// reaching that far can be received straight into the object's pages. The default does
    /// not map.
    fn maps_list_writes(&self, _end: u64) -> bool {
        false
    }

    /// Makes `file` (the object's, from [`ObjectData::file_for_write`]) at least `end` bytes
    /// long, as writing a piece there would, and returns a shared mapping of it covering `end`
    /// when the store maps list writes and could map it. The caller holds the object lock.
    fn prepare_list_write(&self, _addr: ObjectAddr, file: &std::fs::File, end: u64) -> Result<Option<std::sync::Arc<mapped::Mapping>>, StorageError> {
        if file.metadata().map_err(StorageError::io(crate::error::IoOp::Stat))?.len() < end {
            file.set_len(end).map_err(StorageError::io(crate::error::IoOp::Truncate))?;
        }
        Ok(None)
    }

    /// A mapping of the object's stored bytes and how many there are, for stores that can map
    /// them (a list READ is then sent from it without a copy into a buffer). `None` (the
    /// default) when the store cannot, or the object has no data.
    fn mapped(&self, _addr: ObjectAddr) -> Result<Option<(std::sync::Arc<mapped::Mapping>, u64)>, StorageError> {
        Ok(None)
    }

    /// Fills `buf` from `offset`; returns how many bytes the stored data covered. Bytes past
    /// the end of the stored data are left as they are (the caller zeroes its buffers).
    fn read_at(&self, addr: ObjectAddr, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError>;

    /// Writes `data` at `offset`, creating the object's data on first write.
    fn write_at(&self, addr: ObjectAddr, offset: u64, data: &[u8]) -> Result<(), StorageError>;

    /// Reads many pieces into one buffer (`buf[piece.buf_offset..][..piece.len]` from
    /// `piece.object_offset`). Implementations batch; the default reads piece by piece.
    fn read_pieces(&self, addr: ObjectAddr, pieces: &[Piece], buf: &mut [u8]) -> Result<(), StorageError> {
        for p in pieces {
            self.read_at(addr, p.object_offset, &mut buf[p.buf_offset..p.buf_offset + p.len])?;
        }
        Ok(())
    }

    /// Writes many pieces in list order (a later piece overwrites an earlier overlapping one).
    fn write_pieces(&self, addr: ObjectAddr, pieces: &[Piece], data: &[u8]) -> Result<(), StorageError> {
        for p in pieces {
            self.write_at(addr, p.object_offset, &data[p.buf_offset..p.buf_offset + p.len])?;
        }
        Ok(())
    }

    /// Size of the stored data (0 when never written). May exceed the logical length after a
    /// crash between a write and its metadata commit; the engine trims it before extending.
    fn stored_len(&self, addr: ObjectAddr) -> Result<u64, StorageError>;

    /// Truncates or sparsely extends the stored data.
    fn set_len(&self, addr: ObjectAddr, len: u64) -> Result<(), StorageError>;

    /// Bytes of storage the object occupies (allocated blocks, not logical length).
    fn used_bytes(&self, addr: ObjectAddr) -> Result<u64, StorageError>;

    /// Deallocates a range; it reads back as zeros and the stored length does not change.
    fn punch(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<(), StorageError>;

    /// Zeroes a range, keeping (or making) it allocated.
    fn zero(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<(), StorageError>;

    /// Written and hole extents covering [offset, offset + len), in order, without gaps.
    fn map(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<Vec<MapExtent>, StorageError>;

    /// Makes the object's data durable.
    fn sync(&self, addr: ObjectAddr) -> Result<(), StorageError>;

    /// Makes every object's data durable.
    fn sync_all(&self) -> Result<(), StorageError>;

    /// Forgets an object's data.
    fn remove(&self, addr: ObjectAddr) -> Result<(), StorageError>;

    /// Forgets every object of a partition (its objects were removed one by one already;
    /// this drops what remains, e.g. a directory).
    fn remove_partition(&self, partition_id: u64) -> Result<(), StorageError>;

    /// Forgets everything (FORMAT OSD).
    fn wipe(&self) -> Result<(), StorageError>;

    /// The file system the data lives on, as it is now; `None` (the default) for a store with
    /// none, such as memory.
    fn backing_space(&self) -> Result<Option<space::BackingSpace>, StorageError> {
        Ok(None)
    }
}

/// The contract every [`ObjectData`] implementation keeps, run against each of them.
#[cfg(test)]
mod contract {
    use super::*;

    const A: ObjectAddr = ObjectAddr { partition_id: tessera_types::PartitionId(0x10000), object_id: tessera_types::ObjectId(0x10000) };

    fn suite(s: &dyn ObjectData) {
        // Never written: no data, reads leave the buffer alone, one hole.
        let mut buf = [9u8; 4];
        assert_eq!(s.read_at(A, 0, &mut buf).unwrap(), 0);
        assert_eq!(buf, [9; 4]);
        assert_eq!(s.stored_len(A).unwrap(), 0);
        assert_eq!(s.map(A, 0, 10).unwrap(), vec![MapExtent { offset: 0, len: 10, written: false }]);
        // Write, read back, short read at the end.
        s.write_at(A, 2, b"abcdef").unwrap();
        let mut buf = [0u8; 10];
        assert_eq!(s.read_at(A, 0, &mut buf).unwrap(), 8);
        assert_eq!(&buf, b"\0\0abcdef\0\0");
        // Pieces: list order wins on overlap.
        let pieces = [Piece { object_offset: 0, buf_offset: 0, len: 4 }, Piece { object_offset: 2, buf_offset: 4, len: 2 }];
        s.write_pieces(A, &pieces, b"WXYZqr").unwrap();
        let mut buf = [0u8; 4];
        s.read_pieces(A, &[Piece { object_offset: 0, buf_offset: 0, len: 4 }], &mut buf).unwrap();
        assert_eq!(&buf, b"WXqr");
        // Punch and zero read back as zeros and keep the length.
        s.punch(A, 1, 2).unwrap();
        s.zero(A, 5, 1).unwrap();
        let mut buf = [0u8; 8];
        s.read_at(A, 0, &mut buf).unwrap();
        assert_eq!(&buf, b"W\0\0rc\0ef");
        assert_eq!(s.stored_len(A).unwrap(), 8);
        // Truncate, sparse extend.
        s.set_len(A, 3).unwrap();
        s.set_len(A, 6).unwrap();
        let mut buf = [7u8; 6];
        s.read_at(A, 0, &mut buf).unwrap();
        assert_eq!(&buf, b"W\0\0\0\0\0");
        // The map covers the asked range without gaps.
        let map = s.map(A, 0, 100).unwrap();
        assert_eq!(map.first().map(|e| e.offset), Some(0));
        assert_eq!(map.iter().map(|e| e.len).sum::<u64>(), 100);
        assert!(map.windows(2).all(|w| w[0].offset + w[0].len == w[1].offset));
        s.sync(A).unwrap();
        s.sync_all().unwrap();
        s.remove(A).unwrap();
        assert_eq!(s.stored_len(A).unwrap(), 0);
        s.write_at(A, 0, b"x").unwrap();
        s.remove_partition(0x10000).unwrap();
        assert_eq!(s.stored_len(A).unwrap(), 0);
        s.write_at(A, 0, b"x").unwrap();
        s.wipe().unwrap();
        assert_eq!(s.stored_len(A).unwrap(), 0);
    }

    #[test]
    fn file_store_keeps_the_contract() {
        let dir = tempfile::tempdir().unwrap();
        suite(&file::FileStore::open(dir.path(), 4, 64).unwrap());
    }

    #[test]
    fn mem_store_keeps_the_contract() {
        suite(&mem::MemStore::new());
    }
}
