//! A SQLite VFS ("tessera-wal") over the default unix one that gathers a transaction's WAL
//! writes in memory and hands them to the kernel in one `pwrite` when the commit syncs.
//!
//! Why: SQLite writes each WAL frame as two calls, its 24-byte header and then its page, so a
//! group of four creates costs about 24 `pwrite`s. Through ext4's buffered write path each
//! call costs microseconds whatever its size (page lookup, buffer heads, the inode's times):
//! a plain C loop on this machine took 56 us for 24 such calls against 7.5 us for one call
//! of the same bytes (docs/metadata.md, "The WAL written in one call per commit").
//!
//! How, for the WAL file only (every other file passes straight through):
//! - `xWrite` appends to the buffer when it continues it, overwrites in place when it falls
//!   inside it (SQLite rewrites a frame of the open transaction at times), and otherwise writes
//!   the buffer out first and starts a new one.
//! - Every other call that looks at the file (read, size, truncate, file control, close)
//!   writes the buffer out first, so SQLite never sees the file without its own writes.
//! - `xSync` writes the buffer out. With `SQLITE_SYNC_NORMAL` it stops there; with any other
//!   flags it also syncs. The writer connection runs `synchronous=FULL` with
//!   `checkpoint_fullfsync=ON` ([`crate::db::open`]): a COMMIT then ends with an
//!   `xSync(NORMAL)` before SQLite publishes the frames in the WAL index, so readers never see
//!   a frame that is not in the file yet, and the durable flush stays with the group commit
//!   (`commit.rs`, one fdatasync per group). The WAL header's sync at a restart carries the
//!   checkpoint flags (FULL) and still syncs.
//!
//! Only the writer connection opens through this VFS. Readers and the checkpointer use the
//! default one; the unix VFS shares locks per file across both (it keys them by inode).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name connections open with.
pub const NAME: &CStr = c"tessera-wal";

/// Past this many buffered bytes the buffer is written out early (a transaction that large
/// gains little more from waiting).
const BUFFER_MAX: usize = 256 << 10;
/// The most one call to the unix VFS's xWrite may carry: it masks lengths to 17 bits.
const WRITE_MAX: usize = 64 << 10;

/// Registers the VFS once per process; `false` when the default VFS is not the unix one this
/// shim was written against (callers then open with the default VFS).
pub fn register() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| unsafe { register_once() })
}

unsafe fn register_once() -> bool {
    let real = ffi::sqlite3_vfs_find(std::ptr::null());
    if real.is_null() || CStr::from_ptr((*real).zName).to_bytes() != b"unix" {
        return false;
    }
    // The unix VFS's methods other than xOpen never read their vfs argument, so the copy can
    // keep them; xOpen is ours and calls the real one with the real vfs.
    let mut vfs: ffi::sqlite3_vfs = *real;
    vfs.szOsFile = (SHIM_LEN + (*real).szOsFile as usize) as c_int;
    vfs.pNext = std::ptr::null_mut();
    vfs.zName = NAME.as_ptr();
    vfs.pAppData = real as *mut c_void;
    vfs.xOpen = Some(shim_open);
    let vfs = Box::leak(Box::new(vfs));
    ffi::sqlite3_vfs_register(vfs, 0) == ffi::SQLITE_OK
}

/// Our part of each file object; the real file object follows it in the same allocation.
#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    wal: bool,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_at: i64,
}

/// `ShimFile`'s size rounded up so the real file object after it stays aligned.
const SHIM_LEN: usize = std::mem::size_of::<ShimFile>().next_multiple_of(16);

unsafe extern "C" fn shim_open(vfs: *mut ffi::sqlite3_vfs, name: *const c_char, file: *mut ffi::sqlite3_file, flags: c_int, out_flags: *mut c_int) -> c_int {
    let real_vfs = (*vfs).pAppData as *mut ffi::sqlite3_vfs;
    let real = (file as *mut u8).add(SHIM_LEN) as *mut ffi::sqlite3_file;
    (*file).pMethods = std::ptr::null();
    let rc = ((*real_vfs).xOpen.expect("the unix VFS opens files"))(real_vfs, name, real, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    std::ptr::write(
        file as *mut ShimFile,
        ShimFile { base: ffi::sqlite3_file { pMethods: &METHODS }, real, wal: flags & ffi::SQLITE_OPEN_WAL != 0, buf: Vec::new(), buf_at: 0 },
    );
    ffi::SQLITE_OK
}

unsafe fn shim<'a>(file: *mut ffi::sqlite3_file) -> &'a mut ShimFile {
    &mut *(file as *mut ShimFile)
}

unsafe fn real_methods(s: &ShimFile) -> &ffi::sqlite3_io_methods {
    &*(*s.real).pMethods
}

/// Writes the buffer out: one call for a commit's frames (a group's are a few KiB).
unsafe fn write_out(s: &mut ShimFile) -> c_int {
    let write = real_methods(s).xWrite.expect("files can be written");
    let mut rc = ffi::SQLITE_OK;
    for (i, chunk) in s.buf.chunks(WRITE_MAX).enumerate() {
        rc = write(s.real, chunk.as_ptr() as *const c_void, chunk.len() as c_int, s.buf_at + (i * WRITE_MAX) as i64);
        if rc != ffi::SQLITE_OK {
            break;
        }
    }
    s.buf.clear();
    rc
}

/// Writes the buffer out, then runs `then` on the real file.
unsafe fn after_write_out(file: *mut ffi::sqlite3_file, then: impl FnOnce(&ShimFile) -> c_int) -> c_int {
    let s = shim(file);
    let rc = write_out(s);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    then(s)
}

unsafe extern "C" fn shim_close(file: *mut ffi::sqlite3_file) -> c_int {
    let s = shim(file);
    let written = write_out(s);
    let closed = (real_methods(s).xClose.expect("files can be closed"))(s.real);
    std::ptr::drop_in_place(&mut s.buf);
    (*file).pMethods = std::ptr::null();
    if written != ffi::SQLITE_OK {
        written
    } else {
        closed
    }
}

unsafe extern "C" fn shim_read(file: *mut ffi::sqlite3_file, out: *mut c_void, len: c_int, at: i64) -> c_int {
    after_write_out(file, |s| (real_methods(s).xRead.expect("read"))(s.real, out, len, at))
}

unsafe extern "C" fn shim_write(file: *mut ffi::sqlite3_file, data: *const c_void, len: c_int, at: i64) -> c_int {
    let s = shim(file);
    if !s.wal {
        return (real_methods(s).xWrite.expect("write"))(s.real, data, len, at);
    }
    let bytes = std::slice::from_raw_parts(data as *const u8, len as usize);
    let end = s.buf_at + s.buf.len() as i64;
    if !s.buf.is_empty() && at >= s.buf_at && at + len as i64 <= end {
        let from = (at - s.buf_at) as usize;
        s.buf[from..from + bytes.len()].copy_from_slice(bytes);
        return ffi::SQLITE_OK;
    }
    if s.buf.is_empty() || at != end || s.buf.len() + bytes.len() > BUFFER_MAX {
        let rc = write_out(s);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        s.buf_at = at;
    }
    s.buf.extend_from_slice(bytes);
    ffi::SQLITE_OK
}

unsafe extern "C" fn shim_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    after_write_out(file, |s| (real_methods(s).xTruncate.expect("truncate"))(s.real, size))
}

unsafe extern "C" fn shim_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    after_write_out(file, |s| {
        // A WAL commit's sync (see the module comment): the group commit makes it durable.
        if s.wal && flags & 0x0F == ffi::SQLITE_SYNC_NORMAL {
            return ffi::SQLITE_OK;
        }
        (real_methods(s).xSync.expect("sync"))(s.real, flags)
    })
}

unsafe extern "C" fn shim_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    after_write_out(file, |s| (real_methods(s).xFileSize.expect("size"))(s.real, size))
}

unsafe extern "C" fn shim_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let s = shim(file);
    (real_methods(s).xLock.expect("lock"))(s.real, level)
}

unsafe extern "C" fn shim_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    let s = shim(file);
    (real_methods(s).xUnlock.expect("unlock"))(s.real, level)
}

unsafe extern "C" fn shim_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    let s = shim(file);
    (real_methods(s).xCheckReservedLock.expect("reserved lock"))(s.real, out)
}

unsafe extern "C" fn shim_file_control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    after_write_out(file, |s| (real_methods(s).xFileControl.expect("file control"))(s.real, op, arg))
}

unsafe extern "C" fn shim_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    let s = shim(file);
    (real_methods(s).xSectorSize.expect("sector size"))(s.real)
}

unsafe extern "C" fn shim_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    let s = shim(file);
    (real_methods(s).xDeviceCharacteristics.expect("device characteristics"))(s.real)
}

unsafe extern "C" fn shim_shm_map(file: *mut ffi::sqlite3_file, page: c_int, page_len: c_int, extend: c_int, out: *mut *mut c_void) -> c_int {
    let s = shim(file);
    (real_methods(s).xShmMap.expect("shm map"))(s.real, page, page_len, extend, out)
}

unsafe extern "C" fn shim_shm_lock(file: *mut ffi::sqlite3_file, offset: c_int, n: c_int, flags: c_int) -> c_int {
    let s = shim(file);
    (real_methods(s).xShmLock.expect("shm lock"))(s.real, offset, n, flags)
}

unsafe extern "C" fn shim_shm_barrier(file: *mut ffi::sqlite3_file) {
    let s = shim(file);
    (real_methods(s).xShmBarrier.expect("shm barrier"))(s.real)
}

unsafe extern "C" fn shim_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    let s = shim(file);
    (real_methods(s).xShmUnmap.expect("shm unmap"))(s.real, delete)
}

unsafe extern "C" fn shim_fetch(file: *mut ffi::sqlite3_file, at: i64, len: c_int, out: *mut *mut c_void) -> c_int {
    let s = shim(file);
    match real_methods(s).xFetch {
        Some(fetch) => fetch(s.real, at, len, out),
        None => {
            *out = std::ptr::null_mut();
            ffi::SQLITE_OK
        }
    }
}

unsafe extern "C" fn shim_unfetch(file: *mut ffi::sqlite3_file, at: i64, p: *mut c_void) -> c_int {
    let s = shim(file);
    match real_methods(s).xUnfetch {
        Some(unfetch) => unfetch(s.real, at, p),
        None => ffi::SQLITE_OK,
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(shim_close),
    xRead: Some(shim_read),
    xWrite: Some(shim_write),
    xTruncate: Some(shim_truncate),
    xSync: Some(shim_sync),
    xFileSize: Some(shim_file_size),
    xLock: Some(shim_lock),
    xUnlock: Some(shim_unlock),
    xCheckReservedLock: Some(shim_check_reserved_lock),
    xFileControl: Some(shim_file_control),
    xSectorSize: Some(shim_sector_size),
    xDeviceCharacteristics: Some(shim_device_characteristics),
    xShmMap: Some(shim_shm_map),
    xShmLock: Some(shim_shm_lock),
    xShmBarrier: Some(shim_shm_barrier),
    xShmUnmap: Some(shim_shm_unmap),
    xFetch: Some(shim_fetch),
    xUnfetch: Some(shim_unfetch),
};

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, OpenFlags};

    /// A writer through this VFS, set up as `db::open` sets it up, and a reader through the
    /// default VFS, on a new store in `dir`.
    fn pair(dir: &std::path::Path, cache_kib: i64) -> (Connection, Connection) {
        assert!(super::register());
        let path = dir.join("t.db");
        let w = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), super::NAME.to_str().unwrap()).unwrap();
        w.pragma_update(None, "page_size", 1024).unwrap();
        w.pragma_update(None, "journal_mode", "WAL").unwrap();
        w.pragma_update(None, "synchronous", "FULL").unwrap();
        w.pragma_update(None, "checkpoint_fullfsync", true).unwrap();
        w.pragma_update(None, "cache_size", -cache_kib).unwrap();
        w.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)").unwrap();
        let r = Connection::open(&path).unwrap();
        (w, r)
    }

    fn blob(k: i64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as i64 * 31 + k * 7) as u8).collect()
    }

    #[test]
    fn a_commit_is_seen_by_another_connection_as_soon_as_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let (w, r) = pair(dir.path(), 2048);
        for k in 0..300i64 {
            w.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", rusqlite::params![k, blob(k, 100)]).unwrap();
            let v: Vec<u8> = r.query_row("SELECT v FROM t WHERE k = ?1", [k], |row| row.get(0)).unwrap();
            assert_eq!(v, blob(k, 100), "row {k} read back through the default VFS");
        }
    }

    #[test]
    fn a_transaction_larger_than_the_buffer_and_the_cache_commits_whole() {
        let dir = tempfile::tempdir().unwrap();
        // A 64 KiB page cache makes SQLite spill frames to the WAL mid-transaction and read
        // them back; 3 MiB of rows passes the buffer's limit many times.
        let (mut w, r) = pair(dir.path(), 64);
        let tx = w.transaction().unwrap();
        for k in 0..1500i64 {
            tx.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", rusqlite::params![k, blob(k, 2000)]).unwrap();
        }
        for k in (0..1500i64).step_by(7) {
            tx.execute("UPDATE t SET v = ?2 WHERE k = ?1", rusqlite::params![k, blob(k + 1, 2000)]).unwrap();
        }
        let n: i64 = tx.query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0)).unwrap();
        assert_eq!(n, 1500, "the transaction reads its own spilled pages");
        tx.commit().unwrap();
        for k in 0..1500i64 {
            let v: Vec<u8> = r.query_row("SELECT v FROM t WHERE k = ?1", [k], |row| row.get(0)).unwrap();
            let want = if k % 7 == 0 { blob(k + 1, 2000) } else { blob(k, 2000) };
            assert!(v == want, "row {k}");
        }
    }

    #[test]
    fn a_rolled_back_transaction_leaves_nothing_and_the_store_reopens_intact() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut w, _r) = pair(dir.path(), 64);
            w.execute("INSERT INTO t (k, v) VALUES (1, x'01')", []).unwrap();
            let tx = w.transaction().unwrap();
            for k in 10..800i64 {
                tx.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", rusqlite::params![k, blob(k, 1500)]).unwrap();
            }
            tx.rollback().unwrap();
            w.execute("INSERT INTO t (k, v) VALUES (2, x'02')", []).unwrap();
            // The WAL is left as it is (no checkpoint at close): the reopen recovers from it.
            w.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
            std::mem::forget(w);
        }
        let again = Connection::open(dir.path().join("t.db")).unwrap();
        let keys: Vec<i64> = again.prepare("SELECT k FROM t ORDER BY k").unwrap().query_map([], |row| row.get(0)).unwrap().map(|k| k.unwrap()).collect();
        assert_eq!(keys, vec![1, 2]);
        let ok: String = again.query_row("PRAGMA integrity_check", [], |row| row.get(0)).unwrap();
        assert_eq!(ok, "ok");
    }
}
