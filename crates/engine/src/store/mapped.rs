//! List I/O through a persistent shared mapping of an object file: a piece costs a `memcpy`
//! instead of a system call (vectored runs) or a page of read-modify-write (the sieve).
//!
//! One mapping per object lives beside its open file in the [`FileCache`] and is reused by
//! every list command until the object outgrows it (then a larger one replaces it) or leaves
//! the cache. A mapping reserves headroom past the end of the file ([`capacity_for`]) so that
//! writes which extend the object rarely remap; only bytes below the file's size are touched
//! (beyond it a mapping raises SIGBUS), so a WRITE extends the file first, as `pwrite` past the
//! end would, and a READ leaves bytes past the stored data as they are. Every copy runs under
//! [`fault_guard::guarded`]: an I/O error, a full disk or a file shrunk behind the engine's
//! back damages the mapping instead of killing the target, and the command is redone with
//! system calls, which report the error properly.
//!
//! Callers hold the object's lock (shared for READ, exclusive for WRITE), as for every data
//! command, so no truncate runs while a copy is under way.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tessera_types::ObjectAddr;

use super::cache::FileCache;
use super::fault_guard;
use super::Piece;

/// Smallest mapping made: small objects get room to grow without a remap.
const CAPACITY_MIN: u64 = 1 << 20;
/// Objects larger than this are not mapped: the cache may hold thousands of mappings, and
/// their address space (not memory) must stay well inside the 128 TiB a process has.
pub const MAPPED_OBJECT_MAX: u64 = 16 << 30;

/// A shared read-write mapping of the first `len` bytes of an object file.
pub struct Mapping {
    base: *mut u8,
    len: usize,
    /// Set by the fault handler when a page of this mapping was replaced (see fault_guard).
    damaged: AtomicBool,
}

// SAFETY: the mapping is plain shared memory; every access goes through raw pointers under
// the object lock and the fault guard, never through references that could alias.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    pub fn new(file: &File, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at an address of the kernel's choosing; the fd is open for
        // reading and writing.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0)
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { base: base as *mut u8, len, damaged: AtomicBool::new(false) })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_damaged(&self) -> bool {
        self.damaged.load(Ordering::SeqCst)
    }

    /// Copies the pieces of `data` into the mapping in list order (a later piece overwrites an
    /// earlier overlapping one). Every piece must lie below both the mapping's length and the
    /// file's size.
    pub fn write_pieces(&self, pieces: &[Piece], data: &[u8]) -> io::Result<()> {
        for p in pieces {
            assert!(p.object_offset + p.len as u64 <= self.len as u64, "piece beyond the mapping");
            assert!(p.buf_offset + p.len <= data.len(), "piece beyond the data");
        }
        fault_guard::guarded(self.base, self.len, &self.damaged, || {
            for p in pieces {
                // SAFETY: both ranges were checked above; the mapping and `data` never overlap.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(p.buf_offset), self.base.add(p.object_offset as usize), p.len) };
            }
        })
    }

    /// Fills the pieces of `buf` from the mapping. Bytes at or past `stored` (the file's size,
    /// at most the mapping's length) are left as they are.
    pub fn read_pieces(&self, pieces: &[Piece], buf: &mut [u8], stored: u64) -> io::Result<()> {
        assert!(stored <= self.len as u64, "file larger than its mapping");
        for p in pieces {
            assert!(p.buf_offset + p.len <= buf.len(), "piece beyond the buffer");
        }
        let out = buf.as_mut_ptr();
        fault_guard::guarded(self.base, self.len, &self.damaged, || {
            for p in pieces {
                let n = stored.saturating_sub(p.object_offset).min(p.len as u64) as usize;
                // SAFETY: [object_offset, + n) lies below `stored`, inside the mapping; the
                // buffer range was checked above.
                unsafe { std::ptr::copy_nonoverlapping(self.base.add(p.object_offset as usize), out.add(p.buf_offset), n) };
            }
        })
    }
}

/// A list READ's Data-In can be sent straight from the mapping (see zero_copy.rs).
impl tessera_scsi::MappedMemory for Mapping {
    fn as_ptr(&self) -> *const u8 {
        self.base
    }

    fn len(&self) -> usize {
        self.len
    }

    fn copy_out(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let piece = Piece { object_offset: offset as u64, buf_offset: 0, len: buf.len() };
        let end = offset.checked_add(buf.len()).filter(|&e| e <= self.len).ok_or_else(|| io::Error::other("copy beyond the mapping"))?;
        self.read_pieces(&[piece], buf, end as u64)
    }

    fn is_damaged(&self) -> bool {
        Mapping::is_damaged(self)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped (including any page the fault handler
        // replaced inside it); nothing can use it any more.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// The length to map for an object file of `len` bytes: the next power of two, at least
/// [`CAPACITY_MIN`]; `None` above [`MAPPED_OBJECT_MAX`].
pub fn capacity_for(len: u64) -> Option<usize> {
    (len <= MAPPED_OBJECT_MAX).then(|| len.max(CAPACITY_MIN).next_power_of_two() as usize)
}

/// The cached mapping of `addr` if it covers `end` bytes, else a new one (cached), or `None`
/// when the object is too large to map or the system refuses.
pub fn mapping(cache: &FileCache, addr: ObjectAddr, file: &File, end: u64) -> Option<Arc<Mapping>> {
    if let Some(m) = cache.mapping(&addr).filter(|m| m.len() as u64 >= end && !m.is_damaged()) {
        return Some(m);
    }
    let m = Arc::new(Mapping::new(file, capacity_for(end)?).ok()?);
    cache.set_mapping(&addr, Some(m.clone()));
    Some(m)
}

fn end_of(pieces: &[Piece]) -> u64 {
    pieces.iter().map(|p| p.object_offset + p.len as u64).max().unwrap_or(0)
}

/// A list WRITE through the object's mapping, extending the file first if the pieces reach
/// past its end. `Ok(false)`: not done (too large, or a page faulted), write with system
/// calls instead; the pieces are then written again whole, so nothing half-copied survives.
pub fn write(cache: &FileCache, addr: ObjectAddr, file: &File, pieces: &[Piece], data: &[u8]) -> io::Result<bool> {
    let end = end_of(pieces);
    if !fault_guard::available() || end > MAPPED_OBJECT_MAX {
        return Ok(false);
    }
    if file.metadata()?.len() < end {
        file.set_len(end)?;
    }
    let Some(m) = mapping(cache, addr, file, end) else { return Ok(false) };
    match m.write_pieces(pieces, data) {
        Ok(()) => Ok(true),
        Err(_) => {
            cache.set_mapping(&addr, None);
            Ok(false)
        }
    }
}

/// A list READ through the object's mapping; bytes past the stored data are left as they are.
/// `Ok(false)`: not done, read with system calls instead.
pub fn read(cache: &FileCache, addr: ObjectAddr, file: &File, pieces: &[Piece], buf: &mut [u8]) -> io::Result<bool> {
    let stored = file.metadata()?.len();
    if !fault_guard::available() || stored > MAPPED_OBJECT_MAX {
        return Ok(false);
    }
    if stored == 0 {
        return Ok(true);
    }
    let Some(m) = mapping(cache, addr, file, stored) else { return Ok(false) };
    match m.read_pieces(pieces, buf, stored) {
        Ok(()) => Ok(true),
        Err(_) => {
            cache.set_mapping(&addr, None);
            Ok(false)
        }
    }
}

#[cfg(test)]
#[path = "mapped_tests.rs"]
mod tests;
