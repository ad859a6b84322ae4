//! Object data in plain files: `<root>/<pid hex>/<oid hex>`, created on first write.
//!
//! All I/O is positional (pread/pwrite and their vectored forms), so threads share one open
//! file without seeking. List I/O goes through the object's mapping ([`super::mapped`]) where
//! the file system allows it, and through the system-call plan ([`super::plan`]) otherwise. PUNCH is fallocate(PUNCH_HOLE | KEEP_SIZE), CLEAR is
//! fallocate(ZERO_RANGE), READ MAP walks SEEK_DATA / SEEK_HOLE; where the file system lacks
//! one of these, the store falls back to writing zeros (the result reads the same).

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tessera_types::ObjectAddr;

use super::cache::FileCache;
use super::{fault_guard, mapped};
use super::plan::{self, Run, Segment, Step};
use super::{MapExtent, ObjectData, Piece};
use crate::error::{IoOp, StorageError};

/// Zeros written per pwrite when the file system cannot zero a range itself.
const ZERO_CHUNK: usize = 64 * 1024;

pub struct FileStore {
    root: PathBuf,
    pub(super) cache: FileCache,
    read_gap_max: u64,
    /// Gaps a list WRITE may read and rewrite: below the file system's block (plan.rs).
    write_gap_max: u64,
    /// List I/O goes through a mapping of the object ([`super::mapped`]). Only where a block
    /// is at least a page: a write fault dirties a whole page, which must not allocate blocks
    /// that writing the piece with `pwrite` would leave as holes.
    mapped_lists: bool,
    /// Partition directories with entries created since their last fsync: a FLUSH of an
    /// object in one of them fsyncs the directory too, so a new file's name is durable.
    dirty_dirs: Mutex<HashSet<u64>>,
    /// The store's directory, open for the store's life: syncfs reports a write-back error
    /// only to descriptors opened before it happened.
    root_dir: File,
    /// Flushes that failed, and so must keep failing ([`super::write_back`]).
    lost: super::write_back::WriteBackErrors,
}

impl FileStore {
    pub fn open(root: &Path, open_files_max: usize, read_gap_max: u64) -> Result<FileStore, StorageError> {
        fs::create_dir_all(root).map_err(StorageError::io(IoOp::Open))?;
        let block = fs::metadata(root).map_err(StorageError::io(IoOp::Stat))?.blksize().max(1);
        Ok(FileStore {
            root: root.to_path_buf(),
            cache: FileCache::new(open_files_max),
            read_gap_max,
            write_gap_max: plan::WRITE_GAP_MAX.min(block - 1),
            mapped_lists: block >= fault_guard::page_size() as u64,
            dirty_dirs: Mutex::new(HashSet::new()),
            root_dir: File::open(root).map_err(StorageError::io(IoOp::Open))?,
            lost: Default::default(),
        })
    }

    /// Turns list I/O through mappings off (or back on where the file system allows it), to
    /// compare the two paths.
    pub fn with_mapped_lists(mut self, on: bool) -> FileStore {
        self.mapped_lists &= on;
        self
    }

    fn partition_dir(&self, partition_id: u64) -> PathBuf {
        self.root.join(format!("{partition_id:x}"))
    }

    fn path(&self, addr: ObjectAddr) -> PathBuf {
        self.partition_dir(addr.partition_id.0).join(format!("{:x}", addr.object_id.0))
    }

    /// The open file, or None when the object has no data yet.
    fn existing(&self, addr: ObjectAddr) -> Result<Option<Arc<File>>, StorageError> {
        if let Some(f) = self.cache.get(&addr) {
            return Ok(Some(f));
        }
        match OpenOptions::new().read(true).write(true).open(self.path(addr)) {
            Ok(f) => {
                let f = Arc::new(f);
                self.cache.insert(addr, f.clone());
                Ok(Some(f))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StorageError::Io { op: IoOp::Open, source: e }),
        }
    }

    /// The open file, created (with its partition directory) if needed.
    fn create(&self, addr: ObjectAddr) -> Result<Arc<File>, StorageError> {
        if let Some(f) = self.existing(addr)? {
            return Ok(f);
        }
        let path = self.path(addr);
        let open = || OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path);
        let file = match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(self.partition_dir(addr.partition_id.0)).map_err(StorageError::io(IoOp::Open))?;
                open()
            }
            other => other,
        }
        .map_err(StorageError::io(IoOp::Open))?;
        self.dirty_dirs.lock().unwrap_or_else(|p| p.into_inner()).insert(addr.partition_id.0);
        let file = Arc::new(file);
        self.cache.insert(addr, file.clone());
        Ok(file)
    }

    fn write_zeros(file: &File, offset: u64, len: u64) -> Result<(), StorageError> {
        let zeros = vec![0u8; ZERO_CHUNK.min(len as usize)];
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let n = (end - at).min(ZERO_CHUNK as u64) as usize;
            file.write_all_at(&zeros[..n], at).map_err(StorageError::io(IoOp::Write))?;
            at += n as u64;
        }
        Ok(())
    }

    fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
        // SAFETY: fallocate reads only its integer arguments; the fd is open for writing.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset as libc::off_t, len as libc::off_t) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

fn unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL))
}

/// Skips `n` transferred bytes in an iovec array (after a short vectored transfer).
fn advance(iovs: &mut [libc::iovec], mut n: usize) -> &mut [libc::iovec] {
    let mut skip = 0;
    for iov in iovs.iter() {
        if n < iov.iov_len {
            break;
        }
        n -= iov.iov_len;
        skip += 1;
    }
    let rest = &mut iovs[skip..];
    if n > 0 {
        // SAFETY: n < rest[0].iov_len (checked by the loop), so the pointer stays inside the
        // iovec's buffer.
        rest[0].iov_base = unsafe { (rest[0].iov_base as *mut u8).add(n) } as *mut libc::c_void;
        rest[0].iov_len -= n;
    }
    rest
}

/// preadv until every iovec is full or end of file (the rest is left untouched).
fn preadv_all(file: &File, mut offset: u64, mut iovs: &mut [libc::iovec]) -> io::Result<()> {
    while !iovs.is_empty() {
        // SAFETY: every iovec points into a live buffer the caller borrows mutably for the
        // duration of this call, and iovs.len() <= IOV_MAX.
        let n = unsafe { libc::preadv(file.as_raw_fd(), iovs.as_ptr(), iovs.len() as libc::c_int, offset as libc::off_t) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(());
        }
        offset += n as u64;
        iovs = advance(iovs, n as usize);
    }
    Ok(())
}

fn pwritev_all(file: &File, mut offset: u64, mut iovs: &mut [libc::iovec]) -> io::Result<()> {
    while !iovs.is_empty() {
        // SAFETY: as in preadv_all; the kernel only reads the buffers.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iovs.as_ptr(), iovs.len() as libc::c_int, offset as libc::off_t) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        offset += n as u64;
        iovs = advance(iovs, n as usize);
    }
    Ok(())
}

thread_local! {
    /// Scratch for sieved spans and read-through gaps, kept per thread: a fresh buffer per
    /// command would be allocated, faulted in and zeroed every time, which costs as much as the
    /// system calls the sieve saves. Bounded by `SIEVE_SPAN_MAX` and the read gap limit.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn with_scratch<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    SCRATCH.with(|s| f(&mut s.borrow_mut()))
}

/// `scratch[..len]`, growing it if needed; old contents are not cleared.
fn scratch_of(scratch: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if scratch.len() < len {
        scratch.resize(len, 0);
    }
    &mut scratch[..len]
}

fn read_run(file: &File, run: &Run, buf: &mut [u8], scratch: &mut Vec<u8>) -> io::Result<()> {
    if let [Segment::Buf(r)] = run.segments.as_slice() {
        return read_at_most(file, run.object_offset, &mut buf[r.clone()]).map(|_| ());
    }
    // Every gap lands in the same scratch bytes (they are thrown away).
    let gap_max = run.segments.iter().map(|s| if let Segment::Gap(n) = s { *n as usize } else { 0 }).max().unwrap_or(0);
    let scratch = scratch_of(scratch, gap_max);
    let base = buf.as_mut_ptr();
    let mut iovs: Vec<libc::iovec> = run
        .segments
        .iter()
        .map(|s| match s {
            // SAFETY (pointer arithmetic): every range lies inside buf; the plan keeps pieces
            // of one read disjoint in the buffer.
            Segment::Buf(r) => libc::iovec { iov_base: unsafe { base.add(r.start) } as *mut libc::c_void, iov_len: r.len() },
            Segment::Gap(n) => libc::iovec { iov_base: scratch.as_mut_ptr() as *mut libc::c_void, iov_len: *n as usize },
        })
        .collect();
    preadv_all(file, run.object_offset, &mut iovs)
}

/// One pread of the span, then each piece copied out of it. Bytes past the end of the stored
/// data are left as they are in `buf`, as [`ObjectData::read_at`] does.
fn read_sieve(file: &File, start: u64, len: u64, pieces: &[Piece], buf: &mut [u8], scratch: &mut Vec<u8>) -> io::Result<()> {
    let scratch = scratch_of(scratch, len as usize);
    let stored = read_at_most(file, start, scratch)?;
    for p in pieces {
        let at = (p.object_offset - start) as usize;
        let n = stored.saturating_sub(at).min(p.len);
        buf[p.buf_offset..p.buf_offset + n].copy_from_slice(&scratch[at..at + n]);
    }
    Ok(())
}

fn write_run(file: &File, run: &Run, data: &[u8]) -> io::Result<()> {
    if let [Segment::Buf(r)] = run.segments.as_slice() {
        return file.write_all_at(&data[r.clone()], run.object_offset);
    }
    let mut iovs: Vec<libc::iovec> = run
        .segments
        .iter()
        .map(|s| match s {
            Segment::Buf(r) => libc::iovec { iov_base: data[r.clone()].as_ptr() as *mut libc::c_void, iov_len: r.len() },
            Segment::Gap(_) => unreachable!("write plans have no gaps"),
        })
        .collect();
    pwritev_all(file, run.object_offset, &mut iovs)
}

/// Read-modify-write of the span: the pieces patched in list order (later wins), the span
/// written back whole. Past the end of the stored data the span reads as zeros.
fn write_sieve(file: &File, start: u64, len: u64, pieces: &[Piece], data: &[u8], scratch: &mut Vec<u8>) -> io::Result<()> {
    let scratch = scratch_of(scratch, len as usize);
    let stored = read_at_most(file, start, scratch)?;
    scratch[stored..].fill(0);
    for p in pieces {
        let at = (p.object_offset - start) as usize;
        scratch[at..at + p.len].copy_from_slice(&data[p.buf_offset..p.buf_offset + p.len]);
    }
    file.write_all_at(scratch, start)
}

/// pread until `buf` is full or end of file; returns the bytes read.
fn read_at_most(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

impl ObjectData for FileStore {
    fn file(&self, addr: ObjectAddr) -> Result<Option<Arc<File>>, StorageError> {
        self.existing(addr)
    }

    fn places_writes(&self) -> bool {
        true
    }

    fn file_for_write(&self, addr: ObjectAddr) -> Result<Arc<File>, StorageError> {
        self.create(addr)
    }

    fn mapped(&self, addr: ObjectAddr) -> Result<Option<(Arc<mapped::Mapping>, u64)>, StorageError> {
        let Some(file) = self.existing(addr)?.filter(|_| self.mapped_lists) else { return Ok(None) };
        let stored = file.metadata().map_err(StorageError::io(IoOp::Stat))?.len();
        if stored == 0 || !fault_guard::available() {
            return Ok(None);
        }
        Ok(mapped::mapping(&self.cache, addr, &file, stored).map(|m| (m, stored)))
    }

    fn maps_list_writes(&self, end: u64) -> bool {
        self.mapped_lists && end <= mapped::MAPPED_OBJECT_MAX && fault_guard::available()
    }

    fn prepare_list_write(&self, addr: ObjectAddr, file: &File, end: u64) -> Result<Option<Arc<mapped::Mapping>>, StorageError> {
        if file.metadata().map_err(StorageError::io(IoOp::Stat))?.len() < end {
            file.set_len(end).map_err(StorageError::io(IoOp::Truncate))?;
        }
        if !self.maps_list_writes(end) {
            return Ok(None);
        }
        Ok(mapped::mapping(&self.cache, addr, file, end))
    }

    fn read_at(&self, addr: ObjectAddr, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        match self.existing(addr)? {
            Some(f) => read_at_most(&f, offset, buf).map_err(StorageError::io(IoOp::Read)),
            None => Ok(0),
        }
    }

    fn write_at(&self, addr: ObjectAddr, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        self.create(addr)?.write_all_at(data, offset).map_err(StorageError::io(IoOp::Write))
    }

    fn read_pieces(&self, addr: ObjectAddr, pieces: &[Piece], buf: &mut [u8]) -> Result<(), StorageError> {
        let Some(file) = self.existing(addr)? else { return Ok(()) };
        if self.mapped_lists && pieces.len() > 1 && mapped::read(&self.cache, addr, &file, pieces, buf).map_err(StorageError::io(IoOp::Read))? {
            return Ok(());
        }
        with_scratch(|scratch| {
            for step in plan::plan_read(pieces, self.read_gap_max) {
                match step {
                    Step::Vectored(run) => read_run(&file, &run, buf, scratch),
                    Step::Sieve { object_offset, len, pieces } => read_sieve(&file, object_offset, len, &pieces, buf, scratch),
                }
                .map_err(StorageError::io(IoOp::Read))?;
            }
            Ok(())
        })
    }

    fn write_pieces(&self, addr: ObjectAddr, pieces: &[Piece], data: &[u8]) -> Result<(), StorageError> {
        let file = self.create(addr)?;
        if self.mapped_lists && pieces.len() > 1 && mapped::write(&self.cache, addr, &file, pieces, data).map_err(StorageError::io(IoOp::Write))? {
            return Ok(());
        }
        with_scratch(|scratch| {
            for step in plan::plan_write(pieces, self.write_gap_max) {
                match step {
                    Step::Vectored(run) => write_run(&file, &run, data),
                    Step::Sieve { object_offset, len, pieces } => write_sieve(&file, object_offset, len, &pieces, data, scratch),
                }
                .map_err(StorageError::io(IoOp::Write))?;
            }
            Ok(())
        })
    }

    fn stored_len(&self, addr: ObjectAddr) -> Result<u64, StorageError> {
        match self.existing(addr)? {
            Some(f) => Ok(f.metadata().map_err(StorageError::io(IoOp::Stat))?.len()),
            None => Ok(0),
        }
    }

    fn set_len(&self, addr: ObjectAddr, len: u64) -> Result<(), StorageError> {
        let file = if len == 0 { self.existing(addr)? } else { Some(self.create(addr)?) };
        match file {
            Some(f) => f.set_len(len).map_err(StorageError::io(IoOp::Truncate)),
            None => Ok(()),
        }
    }

    fn used_bytes(&self, addr: ObjectAddr) -> Result<u64, StorageError> {
        match self.existing(addr)? {
            Some(f) => Ok(f.metadata().map_err(StorageError::io(IoOp::Stat))?.blocks() * 512),
            None => Ok(0),
        }
    }

    fn punch(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<(), StorageError> {
        let Some(file) = self.existing(addr)? else { return Ok(()) };
        match Self::fallocate(&file, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len) {
            Ok(()) => Ok(()),
            Err(e) if unsupported(&e) => {
                let size = file.metadata().map_err(StorageError::io(IoOp::Stat))?.len();
                let end = (offset + len).min(size);
                if end > offset {
                    Self::write_zeros(&file, offset, end - offset)?;
                }
                Ok(())
            }
            Err(e) => Err(StorageError::Io { op: IoOp::Deallocate, source: e }),
        }
    }

    fn zero(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<(), StorageError> {
        let file = self.create(addr)?;
        match Self::fallocate(&file, libc::FALLOC_FL_ZERO_RANGE, offset, len) {
            Ok(()) => Ok(()),
            Err(e) if unsupported(&e) => Self::write_zeros(&file, offset, len),
            Err(e) => Err(StorageError::Io { op: IoOp::Write, source: e }),
        }
    }

    fn map(&self, addr: ObjectAddr, offset: u64, len: u64) -> Result<Vec<MapExtent>, StorageError> {
        let end = offset.saturating_add(len);
        let mut out = Vec::new();
        if len == 0 {
            return Ok(out);
        }
        let Some(file) = self.existing(addr)? else {
            out.push(MapExtent { offset, len, written: false });
            return Ok(out);
        };
        let fd = file.as_raw_fd();
        let seek = |at: u64, whence: libc::c_int| -> io::Result<Option<u64>> {
            // SAFETY: lseek takes integers only; the file offset it moves is never used
            // (all data I/O here is positional).
            let r = unsafe { libc::lseek(fd, at as libc::off_t, whence) };
            if r >= 0 {
                Ok(Some(r as u64))
            } else {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ENXIO) { Ok(None) } else { Err(e) }
            }
        };
        let mut at = offset;
        while at < end {
            let data = seek(at, libc::SEEK_DATA).map_err(StorageError::io(IoOp::Map))?.unwrap_or(end).min(end);
            if data > at {
                out.push(MapExtent { offset: at, len: data - at, written: false });
            }
            if data >= end {
                break;
            }
            let hole = seek(data, libc::SEEK_HOLE).map_err(StorageError::io(IoOp::Map))?.unwrap_or(end).min(end);
            out.push(MapExtent { offset: data, len: hole - data, written: true });
            at = hole;
        }
        Ok(out)
    }

    fn sync(&self, addr: ObjectAddr) -> Result<(), StorageError> {
        self.lost.check_object(addr)?;
        if let Some(f) = self.existing(addr)? {
            f.sync_data().map_err(|e| self.lost.object_failed(addr, e))?;
        }
        let dirty = self.dirty_dirs.lock().unwrap_or_else(|p| p.into_inner()).remove(&addr.partition_id.0);
        if dirty {
            let dir = File::open(self.partition_dir(addr.partition_id.0)).map_err(StorageError::io(IoOp::Sync))?;
            dir.sync_all().map_err(StorageError::io(IoOp::Sync))?;
        }
        Ok(())
    }

    fn sync_all(&self) -> Result<(), StorageError> {
        self.lost.check_all()?;
        // SAFETY: syncfs takes an open fd and nothing else.
        if unsafe { libc::syncfs(self.root_dir.as_raw_fd()) } != 0 {
            return Err(self.lost.all_failed(io::Error::last_os_error()));
        }
        self.dirty_dirs.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Ok(())
    }

    fn remove(&self, addr: ObjectAddr) -> Result<(), StorageError> {
        self.cache.evict(&addr);
        self.lost.forget(addr);
        match fs::remove_file(self.path(addr)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(StorageError::Io { op: IoOp::Remove, source: e }),
            _ => Ok(()),
        }
    }

    fn remove_partition(&self, partition_id: u64) -> Result<(), StorageError> {
        self.cache.evict_partition(partition_id);
        self.lost.forget_partition(partition_id);
        match fs::remove_dir_all(self.partition_dir(partition_id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(StorageError::Io { op: IoOp::Remove, source: e }),
            _ => Ok(()),
        }
    }

    fn wipe(&self) -> Result<(), StorageError> {
        self.cache.clear();
        match fs::remove_dir_all(&self.root) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(StorageError::Io { op: IoOp::Remove, source: e }),
            _ => {}
        }
        fs::create_dir_all(&self.root).map_err(StorageError::io(IoOp::Open))
    }

    fn backing_space(&self) -> Result<Option<super::space::BackingSpace>, StorageError> {
        super::space::of_dir(&self.root).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ObjectAddr = ObjectAddr { partition_id: tessera_types::PartitionId(0x10000), object_id: tessera_types::ObjectId(0x10000) };

    fn strided(count: u64, len: usize, stride: u64) -> Vec<Piece> {
        (0..count).map(|i| Piece { object_offset: i * stride, buf_offset: i as usize * len, len }).collect()
    }

    /// Goal: a sieved WRITE into a fresh object stores exactly the pieces (zeros between them,
    /// the stored length ending at the last piece) and allocates no block that piece-by-piece
    /// writes would leave a hole; a sieved READ returns the pieces and leaves bytes past the
    /// stored data alone. Method: real files, READ MAP through SEEK_HOLE.
    #[test]
    fn sieve_keeps_data_length_and_holes() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStore::open(dir.path(), 4, 4096).unwrap();
        let pieces = strided(200, 64, 1024);
        let data: Vec<u8> = (0..200 * 64).map(|i| (i % 251) as u8 + 1).collect();
        s.write_pieces(A, &pieces, &data).unwrap();
        assert_eq!(s.stored_len(A).unwrap(), 199 * 1024 + 64);
        let mut whole = vec![0u8; 199 * 1024 + 64];
        s.read_at(A, 0, &mut whole).unwrap();
        for (i, chunk) in whole.chunks(1024).enumerate() {
            assert_eq!(&chunk[..64], &data[i * 64..(i + 1) * 64]);
            assert!(chunk[64..].iter().all(|b| *b == 0));
        }
        let mut back = vec![0u8; data.len()];
        s.read_pieces(A, &pieces, &mut back).unwrap();
        assert_eq!(back, data);
        // Past the stored end a sieved read leaves the caller's bytes alone.
        let mut tail = vec![7u8; 8];
        s.read_pieces(A, &[Piece { object_offset: whole.len() as u64 - 4, buf_offset: 0, len: 4 }, Piece { object_offset: whole.len() as u64 + 2, buf_offset: 4, len: 4 }], &mut tail).unwrap();
        assert_eq!(&tail[..4], &whole[whole.len() - 4..]);
        assert_eq!(&tail[4..], &[7; 4]);
        // 64-byte pieces a whole block apart are written one by one: the blocks between stay holes.
        let b = ObjectAddr::new(0x10000, 0x10001);
        let far = strided(4, 64, 3 * 4096);
        s.write_pieces(b, &far, &data[..256]).unwrap();
        let holes = s.map(b, 0, 3 * 3 * 4096 + 64).unwrap().iter().filter(|e| !e.written).count();
        let sparse_fs = holes > 0;
        if sparse_fs {
            assert_eq!(holes, 3, "one hole between each pair of pieces");
        }
    }
}
