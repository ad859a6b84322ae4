//! Receiving a list WRITE's Data-Out straight into the pieces of the object's mapping
//! ([`tessera_scsi::PlacedPieces`]), so each byte is copied once, socket to page cache, as a
//! contiguous WRITE's `splice` does. Bytes arrive in list order, so an overlapping later piece
//! overwrites an earlier one as the buffered path does.
//!
//! Two ways, the first whenever the connection has its pipe: `splice` socket -> pipe (pages
//! handed over, no copy) then `readv` pipe -> pieces, an iovec per piece; or one `recvmsg` with
//! an iovec per piece (`MSG_WAITALL`). Both copy once. `recvmsg` copies while it holds the
//! socket, and a sender on the same host then finds it busy, queues its segments on the
//! socket's backlog and has them processed again later: on loopback, 1024 pieces of 4 KiB cost
//! the sender ~200 us more CPU per 4 MiB WRITE than a contiguous one. Through the pipe the
//! socket is held only to hand pages over, as for the contiguous WRITE, and the difference is
//! gone (docs/noncontiguous.md, "WRITE into the pieces").
//!
//! The kernel's copy into a file mapping never raises SIGBUS: where a page cannot be had (past
//! the end of a file a racing truncate shortened, an I/O error, no space for a block) `readv` or
//! `recvmsg` stops short or fails with EFAULT. The bytes not copied (still in the pipe, or still
//! in the socket), and any Data-Out without a usable mapping, are then written with `pwrite`,
//! which reports the real error or succeeds; either way the PDU stream stays framed, and a
//! `pwrite` failure becomes the command's answer, never an acknowledgment.

use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use tessera_scsi::{PlacedPiece, PlacedPieces};

use super::splice::SplicePipe;

/// Iovecs per `recvmsg` (the kernel's `UIO_MAXIOV`).
const IOVECS_MAX: usize = 1024;
/// Bounce buffer for bytes the mapping could not take.
const BOUNCE_LEN: usize = 256 * 1024;

/// Index of the piece holding Data-Out byte `pos`, or of the first piece after it.
fn piece_at(pieces: &[PlacedPiece], pos: u64) -> usize {
    pieces.partition_point(|p| p.at + p.len as u64 <= pos)
}

/// Receives Data-Out `[from, from + len)` from `stream` into the pieces. Bytes no piece holds
/// are dropped. A failure of the file is kept in `failed` (the bytes are still consumed); an
/// `Err` means the stream lost its framing.
pub(crate) fn receive(stream: &mut TcpStream, target: &PlacedPieces<'_>, from: u64, len: usize, failed: &mut Option<io::Error>, pipe: Option<&SplicePipe>) -> io::Result<()> {
    let end = from + len as u64;
    let mut pos = from;
    if failed.is_none() {
        if let Some(memory) = target.memory.filter(|m| !m.is_damaged()) {
            let base = memory.as_ptr() as *mut u8;
            while pos < end {
                let iov = iovecs(target.pieces, base, memory.len(), pos, end);
                if iov.is_empty() {
                    break;
                }
                let fell_short = match pipe {
                    Some(pipe) => through_pipe(stream, pipe, target, iov, &mut pos, failed)?,
                    None => by_recvmsg(stream, &iov, &mut pos)?,
                };
                if fell_short {
                    break;
                }
            }
        }
    }
    if pos < end {
        receive_by_calls(stream, target, pos, end, failed)?;
    }
    Ok(())
}

/// One pass socket -> pipe -> pieces, advancing `pos`. True when a page could not be had:
/// the bytes the pipe still holds have then gone through `pwrite`, and the rest must too.
fn through_pipe(stream: &mut TcpStream, pipe: &SplicePipe, target: &PlacedPieces<'_>, iov: Vec<libc::iovec>, pos: &mut u64, failed: &mut Option<io::Error>) -> io::Result<bool> {
    let (copied, left) = pipe.socket_to_memory(stream, iov)?;
    *pos += copied as u64;
    if left == 0 {
        return Ok(false);
    }
    let mut rest = vec![0u8; left];
    pipe.take_left(&mut rest)?;
    if let Err(e) = write_by_calls(target, *pos, &rest) {
        *failed = Some(e);
    }
    *pos += left as u64;
    Ok(true)
}

/// One `recvmsg` into the pieces, advancing `pos`. True when a page could not be had: the
/// bytes not copied are still in the socket.
fn by_recvmsg(stream: &TcpStream, iov: &[libc::iovec], pos: &mut u64) -> io::Result<bool> {
    loop {
        match recv_into(stream, iov) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                *pos += n as u64;
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EFAULT) => return Ok(true),
            Err(e) => return Err(e),
        }
    }
}

/// Writes Data-Out `[from, from + bytes.len())` to the pieces with `pwrite` (bytes the reader
/// had already buffered, and the fallback). Bytes no piece holds are dropped.
pub(crate) fn write_by_calls(target: &PlacedPieces<'_>, from: u64, bytes: &[u8]) -> io::Result<()> {
    let end = from + bytes.len() as u64;
    for p in &target.pieces[piece_at(target.pieces, from)..] {
        if p.at >= end {
            break;
        }
        let lo = p.at.max(from);
        let hi = (p.at + p.len as u64).min(end);
        target.file.write_all_at(&bytes[(lo - from) as usize..(hi - from) as usize], p.offset + (lo - p.at))?;
    }
    Ok(())
}

fn receive_by_calls(stream: &mut TcpStream, target: &PlacedPieces<'_>, mut pos: u64, end: u64, failed: &mut Option<io::Error>) -> io::Result<()> {
    let mut bounce = vec![0u8; ((end - pos) as usize).min(BOUNCE_LEN)];
    while pos < end {
        let n = ((end - pos) as usize).min(bounce.len());
        stream.read_exact(&mut bounce[..n])?;
        if failed.is_none() {
            if let Err(e) = write_by_calls(target, pos, &bounce[..n]) {
                *failed = Some(e);
            }
        }
        pos += n as u64;
    }
    Ok(())
}

/// Iovecs over the mapping for Data-Out `[pos, end)`, at most [`IOVECS_MAX`], stopping at the
/// first byte no piece holds or at a piece outside the mapping (those go through pwrite).
fn iovecs(pieces: &[PlacedPiece], base: *mut u8, mapped_len: usize, pos: u64, end: u64) -> Vec<libc::iovec> {
    let mut out = Vec::new();
    let mut at = pos;
    for p in &pieces[piece_at(pieces, pos)..] {
        let inside = p.offset.checked_add(p.len as u64).is_some_and(|e| e <= mapped_len as u64);
        if at >= end || p.at > at || !inside || out.len() == IOVECS_MAX {
            break;
        }
        let skip = at - p.at;
        let n = (p.len as u64 - skip).min(end - at);
        // SAFETY: [offset + skip, + n) lies inside the mapping (checked above); the pointer is
        // only handed to the kernel, which fails with EFAULT rather than fault.
        let start = unsafe { base.add((p.offset + skip) as usize) };
        out.push(libc::iovec { iov_base: start as *mut libc::c_void, iov_len: n as usize });
        at += n;
    }
    out
}

fn recv_into(stream: &TcpStream, iov: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: an empty msghdr but for the iovecs, which point into the mapping (see iovecs).
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = iov.len() as _;
        libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_WAITALL)
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;

    use tessera_scsi::MappedMemory;

    use super::*;

    /// A shared mapping of a file, longer than the file.
    struct Map(*mut u8, usize);
    unsafe impl Send for Map {}
    unsafe impl Sync for Map {}
    impl MappedMemory for Map {
        fn as_ptr(&self) -> *const u8 {
            self.0
        }
        fn len(&self) -> usize {
            self.1
        }
        fn copy_out(&self, _offset: usize, _buf: &mut [u8]) -> io::Result<()> {
            unimplemented!("not used here")
        }
    }
    impl Drop for Map {
        fn drop(&mut self) {
            unsafe { libc::munmap(self.0 as *mut libc::c_void, self.1) };
        }
    }

    /// A socket pair over loopback with `bytes` sent into it.
    fn sent(bytes: Vec<u8>) -> TcpStream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut out = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        std::thread::spawn(move || out.write_all(&bytes).unwrap());
        listener.accept().unwrap().0
    }

    /// Goal: a piece whose page lies past the end of the file (as after a racing truncate)
    /// makes the kernel's copy fail with EFAULT, not SIGBUS; its bytes and the rest still land
    /// in the file (through pwrite), and the stream stays framed.
    #[test]
    fn a_page_past_the_end_falls_back_to_pwrite_and_keeps_the_stream_framed() {
        past_the_end(None);
        past_the_end(Some(&SplicePipe::new().unwrap()));
    }

    fn past_the_end(pipe: Option<&SplicePipe>) {
        let file = tempfile::tempfile().unwrap();
        file.set_len(3 * 4096).unwrap();
        let len = 1 << 20;
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        assert_ne!(base, libc::MAP_FAILED);
        let map = Map(base as *mut u8, len);
        let pieces = [
            PlacedPiece { at: 0, offset: 100, len: 5000 },
            PlacedPiece { at: 5000, offset: 200_000, len: 4096 }, // past the end of the file
            PlacedPiece { at: 9096, offset: 8192, len: 3000 },
            PlacedPiece { at: 12_096, offset: 50, len: 100 }, // overlaps the first: later wins
        ];
        let data: Vec<u8> = (0..12_196u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut wire = data.clone();
        wire.extend_from_slice(b"NEXT");
        let mut stream = sent(wire);
        let target = PlacedPieces { file: &file, memory: Some(&map), pieces: &pieces };
        let mut failed = None;
        receive(&mut stream, &target, 0, data.len(), &mut failed, pipe).unwrap();
        assert!(failed.is_none());
        let mut next = [0u8; 4];
        stream.read_exact(&mut next).unwrap();
        assert_eq!(&next, b"NEXT", "exactly the data was consumed");
        let mut model = vec![0u8; 204_096];
        for p in &pieces {
            model[p.offset as usize..][..p.len].copy_from_slice(&data[p.at as usize..][..p.len]);
        }
        let mut got = vec![0u8; model.len()];
        file.read_exact_at(&mut got, 0).unwrap();
        assert!(got == model);
    }

    /// Goal: Data-Out split anywhere across segments (as PDUs cut it) lands the same.
    #[test]
    fn segments_continue_where_the_last_one_ended() {
        segments_continue(None);
        segments_continue(Some(&SplicePipe::new().unwrap()));
    }

    fn segments_continue(pipe: Option<&SplicePipe>) {
        let file = tempfile::tempfile().unwrap();
        file.set_len(1 << 20).unwrap();
        let len = 1 << 20;
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        assert_ne!(base, libc::MAP_FAILED);
        let map = Map(base as *mut u8, len);
        let pieces: Vec<PlacedPiece> = (0..64u64).map(|i| PlacedPiece { at: i * 3000, offset: (63 - i) * 9000 + 17, len: 3000 }).collect();
        let data: Vec<u8> = (0..64 * 3000u32).map(|i| (i % 251) as u8).collect();
        let mut stream = sent(data.clone());
        let target = PlacedPieces { file: &file, memory: Some(&map), pieces: &pieces };
        let mut failed = None;
        let mut at = 0u64;
        for cut in [1usize, 2999, 3001, 10_000, 77_777] {
            receive(&mut stream, &target, at, cut, &mut failed, pipe).unwrap();
            at += cut as u64;
        }
        // The bytes the reader had buffered come through pwrite.
        let rest = data.len() - at as usize;
        let mut tail = vec![0u8; rest];
        stream.read_exact(&mut tail).unwrap();
        write_by_calls(&target, at, &tail).unwrap();
        for p in &pieces {
            let mut got = vec![0u8; p.len];
            file.read_exact_at(&mut got, p.offset).unwrap();
            assert!(got[..] == data[p.at as usize..][..p.len], "piece at {}", p.at);
        }
    }
}
