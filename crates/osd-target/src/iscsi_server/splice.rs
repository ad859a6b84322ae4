//! A pipe for moving data without passing it through this process.
//!
//! Data-Out, socket -> file: `splice(2)` socket -> pipe hands over the pages the kernel
//! received into (no copy), pipe -> file copies them into the page cache (one copy). Raw TCP's
//! receiver copies once too; the buffered path copies twice (socket -> buffer -> page cache),
//! which on a two-core node is the difference between about half and most of a raw TCP stream
//! (docs/benchmarks.md).
//!
//! Data-In, memory -> socket: `vmsplice(2)` hands the pipe references to the pages under the
//! slices (the page cache's own pages, for an object's mapping), `splice(2)` pipe -> socket
//! hands them on to the socket: no copy on the target, as `sendfile` for a contiguous READ.

use std::fs::File;
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Pipe size asked for: one call moves this much. Linux lets any process grow a pipe to
/// /proc/sys/fs/pipe-max-size (1 MiB by default); if refused, the default 64 KiB still works.
const PIPE_LEN: libc::c_int = 1 << 20;

/// A pipe kept per connection for splicing.
pub(crate) struct SplicePipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

/// How a transfer ended when the socket side was fine.
pub(crate) type FileResult = Result<(), io::Error>;

fn check(rc: libc::ssize_t) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

impl SplicePipe {
    pub fn new() -> io::Result<SplicePipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor we own, with integer arguments only.
        unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_LEN) };
        // SAFETY: as above.
        let capacity = check(unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) } as libc::ssize_t)?;
        Ok(SplicePipe { read, write, capacity: capacity.max(4096) })
    }

    /// Moves exactly `len` bytes from `socket` into `file` at `offset`. `Err` is a socket
    /// failure (the stream lost its framing); a file failure is `Ok(Err(..))`, returned once the
    /// rest of the `len` bytes have been read and dropped, so the stream stays framed.
    pub fn socket_to_file(&self, socket: &mut TcpStream, file: &File, mut offset: u64, len: usize) -> io::Result<FileResult> {
        let mut left = len;
        while left > 0 {
            let n = self.fill(socket, left.min(self.capacity))?;
            left -= n;
            if let Err(e) = self.empty_into(file, &mut offset, n) {
                discard(socket, left)?;
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// Up to `max` bytes socket -> pipe; the pipe is empty before, so this never waits on it.
    fn fill(&self, socket: &mut TcpStream, max: usize) -> io::Result<usize> {
        loop {
            // SAFETY: both descriptors are open for the call; null offsets (a socket and a pipe
            // have none).
            let rc = unsafe {
                libc::splice(socket.as_raw_fd(), std::ptr::null_mut(), self.write.as_raw_fd(), std::ptr::null_mut(), max, libc::SPLICE_F_MOVE)
            };
            match check(rc) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Moves the `n` bytes in the pipe into `file` at `*offset`. On failure the pipe is still
    /// emptied (its bytes dropped), so it is ready for the next transfer.
    fn empty_into(&self, file: &File, offset: &mut u64, n: usize) -> io::Result<()> {
        let mut left = n;
        while left > 0 {
            let mut off = *offset as libc::loff_t;
            // SAFETY: both descriptors are open; the kernel reads and advances `off`.
            let rc = unsafe { libc::splice(self.read.as_raw_fd(), std::ptr::null_mut(), file.as_raw_fd(), &mut off, left, libc::SPLICE_F_MOVE) };
            match check(rc) {
                Ok(0) => {
                    self.drop_bytes(left)?;
                    return Err(io::ErrorKind::WriteZero.into());
                }
                Ok(moved) => {
                    left -= moved;
                    *offset += moved as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.drop_bytes(left)?;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Moves socket bytes into the memory `iov` describes, at most as many as it and the pipe
    /// hold: socket -> pipe without a copy, then pipe -> memory (one copy). The socket lock is
    /// held only to hand pages over, not for the copy, so a sender on this host is not held
    /// back while the bytes are copied (see docs/noncontiguous.md, "WRITE into the pieces").
    /// Returns how many bytes reached the memory, and how many that were taken from the
    /// socket did not (left in the pipe: the memory faulted); the caller must take those with
    /// [`SplicePipe::take_left`] before the next transfer.
    pub fn socket_to_memory(&self, socket: &mut TcpStream, mut iov: Vec<libc::iovec>) -> io::Result<(usize, usize)> {
        let room: usize = iov.iter().map(|v| v.iov_len).sum();
        let n = self.fill(socket, room.min(self.capacity))?;
        let mut copied = 0usize;
        let mut first = 0usize;
        while copied < n {
            // SAFETY: the iovecs describe memory the caller keeps alive for the call; the
            // descriptor is our pipe's read end. At most `n - copied` bytes are in the pipe.
            let rc = unsafe { libc::readv(self.read.as_raw_fd(), iov[first..].as_ptr(), (iov.len() - first).min(IOVECS_PER_CALL) as libc::c_int) };
            match check(rc) {
                Ok(0) => break,
                Ok(mut got) => {
                    copied += got;
                    while got > 0 {
                        let v = &mut iov[first];
                        let step = got.min(v.iov_len);
                        v.iov_base = (v.iov_base as usize + step) as *mut libc::c_void;
                        v.iov_len -= step;
                        got -= step;
                        if v.iov_len == 0 {
                            first += 1;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EFAULT) => break,
                Err(e) => return Err(e),
            }
        }
        Ok((copied, n - copied))
    }

    /// Reads `buf.len()` bytes left in the pipe.
    pub fn take_left(&self, buf: &mut [u8]) -> io::Result<()> {
        let mut pipe = File::from(self.read.try_clone()?);
        pipe.read_exact(buf)
    }

    /// Reads and drops `n` bytes held in the pipe.
    fn drop_bytes(&self, n: usize) -> io::Result<()> {
        let mut pipe = File::from(self.read.try_clone()?);
        io::copy(&mut (&mut pipe).take(n as u64), &mut io::sink()).map(|_| ())
    }
}

/// Largest iovec count one `vmsplice` takes (UIO_MAXIOV).
const IOVECS_PER_CALL: usize = 1024;

impl SplicePipe {
    /// Sends the concatenation of `slices` on `socket` by reference: the socket takes the
    /// pages under them, not a copy. The caller must keep the slices' bytes unchanged until the
    /// peer has read them (page-cache pages of a mapping qualify: they change only as the file
    /// does, as with `sendfile`; a reused buffer does not). The pipe must be empty. On `Err`
    /// the pipe may still hold bytes and the socket may have sent part of the data: the
    /// connection must be closed and the pipe dropped, never reused. `still_valid` is asked
    /// after each batch of pages is taken and before it is sent: `false` fails the send (the
    /// mapping was damaged and some page may have been replaced by zeros).
    pub fn send_slices(&self, socket: &TcpStream, slices: &[&[u8]], still_valid: impl Fn() -> bool) -> io::Result<()> {
        let total: usize = slices.iter().map(|s| s.len()).sum();
        let mut sent = 0usize;
        let (mut index, mut skip) = (0usize, 0usize);
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(slices.len().min(IOVECS_PER_CALL));
        while sent < total {
            while skip == slices[index].len() {
                index += 1;
                skip = 0;
            }
            iov.clear();
            for (k, s) in slices[index..].iter().take(IOVECS_PER_CALL).enumerate() {
                let s = if k == 0 { &s[skip..] } else { s };
                iov.push(libc::iovec { iov_base: s.as_ptr() as *mut libc::c_void, iov_len: s.len() });
            }
            let taken = self.take_pages(&iov)?;
            if !still_valid() {
                return Err(io::Error::other("a mapped page could not be read"));
            }
            sent += taken;
            self.empty_into_socket(socket, taken, sent < total)?;
            // Step past what was taken.
            let mut left = taken;
            while left > 0 {
                let rest = slices[index].len() - skip;
                if left < rest {
                    skip += left;
                    left = 0;
                } else {
                    left -= rest;
                    index += 1;
                    skip = 0;
                }
            }
        }
        Ok(())
    }

    /// `vmsplice` of as much of `iov` as the pipe holds; never waits (the pipe is empty, so at
    /// least one page fits; a pipe left full by a bug fails with EAGAIN instead of hanging).
    /// A page that cannot be read (an object truncated below a slice) fails with EFAULT: the
    /// kernel takes pages without touching them from user space, so no SIGBUS is raised.
    fn take_pages(&self, iov: &[libc::iovec]) -> io::Result<usize> {
        loop {
            // SAFETY: the iovecs describe memory the caller keeps alive for the call; the
            // descriptor is our pipe's write end.
            let rc = unsafe { libc::vmsplice(self.write.as_raw_fd(), iov.as_ptr(), iov.len(), libc::SPLICE_F_NONBLOCK) };
            match check(rc) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Moves exactly `n` bytes from the pipe to the socket, telling the socket whether more
    /// data follows at once (so it need not push a short segment in between).
    fn empty_into_socket(&self, socket: &TcpStream, n: usize, more: bool) -> io::Result<()> {
        let mut left = n;
        while left > 0 {
            let flags = libc::SPLICE_F_MOVE | if more { libc::SPLICE_F_MORE } else { 0 };
            // SAFETY: both descriptors are open for the call; null offsets (a pipe and a
            // socket have none).
            let rc = unsafe { libc::splice(self.read.as_raw_fd(), std::ptr::null_mut(), socket.as_raw_fd(), std::ptr::null_mut(), left, flags) };
            match check(rc) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(moved) => left -= moved,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Reads and drops `n` bytes of the socket.
fn discard(socket: &mut TcpStream, n: usize) -> io::Result<()> {
    let copied = io::copy(&mut socket.take(n as u64), &mut io::sink())?;
    if copied != n as u64 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;
    use std::os::unix::fs::FileExt;

    use super::*;

    fn socket_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn moves_exactly_the_asked_bytes_to_the_offset() {
        let (mut tx, mut rx) = socket_pair();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let sender = std::thread::spawn(move || {
            tx.write_all(&data).unwrap();
            tx.write_all(b"after").unwrap();
            data
        });
        let dir = tempfile::tempdir().unwrap();
        let file = File::options().read(true).write(true).create(true).truncate(true).open(dir.path().join("f")).unwrap();
        let pipe = SplicePipe::new().unwrap();
        pipe.socket_to_file(&mut rx, &file, 100, 3_000_000).unwrap().unwrap();
        let data = sender.join().unwrap();
        let mut got = vec![0u8; 3_000_000];
        file.read_exact_at(&mut got, 100).unwrap();
        assert!(got == data);
        let mut rest = [0u8; 5];
        rx.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"after", "nothing past the asked length was taken");
    }

    #[test]
    fn a_file_failure_still_consumes_the_bytes() {
        let (mut tx, mut rx) = socket_pair();
        let sender = std::thread::spawn(move || {
            tx.write_all(&vec![7u8; 2_000_000]).unwrap();
            tx.write_all(b"next").unwrap();
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        File::create(&path).unwrap();
        let read_only = File::open(&path).unwrap();
        let pipe = SplicePipe::new().unwrap();
        let failed = pipe.socket_to_file(&mut rx, &read_only, 0, 2_000_000).unwrap();
        assert!(failed.is_err(), "writing into a read-only file fails");
        sender.join().unwrap();
        let mut rest = [0u8; 4];
        rx.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"next", "the stream is still framed");
        // The pipe is empty and usable again.
        let (mut tx, mut rx) = socket_pair();
        tx.write_all(b"again").unwrap();
        let file = File::options().read(true).write(true).open(&path).unwrap();
        pipe.socket_to_file(&mut rx, &file, 0, 5).unwrap().unwrap();
        let mut got = [0u8; 5];
        file.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(&got, b"again");
    }

    #[test]
    fn a_closed_socket_is_an_error() {
        let (mut tx, mut rx) = socket_pair();
        tx.write_all(&[1u8; 1000]).unwrap();
        drop(tx);
        let dir = tempfile::tempdir().unwrap();
        let file = File::options().read(true).write(true).create(true).truncate(true).open(dir.path().join("f")).unwrap();
        let pipe = SplicePipe::new().unwrap();
        let err = pipe.socket_to_file(&mut rx, &file, 0, 5000).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
