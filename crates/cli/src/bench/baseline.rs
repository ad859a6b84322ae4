//! Raw loopback TCP baselines measured in the same run as every bench: a small-message ping-pong
//! (the floor under any request/response protocol) and request/transfer exchanges of a given size
//! (the floor under a READ or WRITE of that size). Benches report ratios against these, because
//! absolute times on a shared 2-core machine mean little.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

const OP_PING: u8 = 1;
const OP_WRITE: u8 = 2;
const OP_READ: u8 = 3;
const OP_QUIT: u8 = 4;

/// Bytes of one ping in each direction: about a GET ATTRIBUTES request (48-byte BHS plus
/// 224-byte CDB AHS) so the baseline moves what the protocol moves.
pub const PING_LEN: usize = 272;

/// A thread serving the raw protocol, to one client at a time.
pub struct RawServer {
    addr: SocketAddr,
    /// The listening socket, shut down on drop so an accept nobody answered returns.
    listener: TcpListener,
    handle: Option<JoinHandle<()>>,
}

impl RawServer {
    /// On a loopback port.
    pub fn start() -> Result<RawServer> {
        Self::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// On a kernel-chosen port of `ip` (in the network namespace of the calling thread).
    pub fn start_on(ip: IpAddr) -> Result<RawServer> {
        let listener = TcpListener::bind((ip, 0)).with_context(|| format!("binding raw TCP baseline server on {ip}"))?;
        let addr = listener.local_addr()?;
        let accepting = listener.try_clone()?;
        // One client at a time, until the listener is shut down.
        let handle = thread::spawn(move || {
            // It stands in for a daemon, so it runs where the benches' daemons run.
            crate::children::run_this_thread_as_daemon();
            while let Ok((stream, _)) = accepting.accept() {
                let _ = serve(stream);
            }
        });
        Ok(RawServer { addr, listener, handle: Some(handle) })
    }

    pub fn connect(&self) -> Result<RawClient> {
        let stream = TcpStream::connect(self.addr).context("connecting to raw TCP baseline server")?;
        stream.set_nodelay(true)?;
        Ok(RawClient { stream, buf: Vec::new() })
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        // SAFETY: shutdown(2) on a socket this server owns; a blocked accept returns EINVAL.
        unsafe {
            libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR);
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::with_capacity(1 << 20, stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(1 << 20, stream);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let mut head = [0u8; 9];
        reader.read_exact(&mut head)?;
        let len = u64::from_be_bytes(head[1..9].try_into().expect("8 bytes")) as usize;
        match head[0] {
            OP_PING => {
                let mut ping = [0u8; PING_LEN];
                reader.read_exact(&mut ping[..PING_LEN - 9])?;
                writer.write_all(&ping)?;
            }
            OP_WRITE => {
                let mut left = len;
                while left > 0 {
                    let n = left.min(buf.len());
                    reader.read_exact(&mut buf[..n])?;
                    left -= n;
                }
                writer.write_all(&[0u8])?;
            }
            OP_READ => {
                let mut left = len;
                while left > 0 {
                    let n = left.min(buf.len());
                    writer.write_all(&buf[..n])?;
                    left -= n;
                }
            }
            _ => return Ok(()),
        }
        writer.flush()?;
    }
}

pub struct RawClient {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    /// One ping-pong of [`PING_LEN`] bytes each way.
    pub fn ping(&mut self) -> Result<Duration> {
        let mut msg = [0u8; PING_LEN];
        msg[0] = OP_PING;
        let t = Instant::now();
        self.stream.write_all(&msg)?;
        self.stream.read_exact(&mut msg)?;
        Ok(t.elapsed())
    }

    /// Sends `len` bytes and waits for a one-byte acknowledgement.
    pub fn write(&mut self, len: usize) -> Result<Duration> {
        self.buf.resize(len.min(1 << 20), 0xA5);
        let t = Instant::now();
        self.stream.write_all(&header(OP_WRITE, len))?;
        let mut left = len;
        while left > 0 {
            let n = left.min(self.buf.len());
            self.stream.write_all(&self.buf[..n])?;
            left -= n;
        }
        let mut ack = [0u8; 1];
        self.stream.read_exact(&mut ack)?;
        Ok(t.elapsed())
    }

    /// Asks for `len` bytes and reads them.
    pub fn read(&mut self, len: usize) -> Result<Duration> {
        self.buf.resize(len.min(1 << 20), 0);
        let t = Instant::now();
        self.stream.write_all(&header(OP_READ, len))?;
        let mut left = len;
        while left > 0 {
            let n = left.min(self.buf.len());
            self.stream.read_exact(&mut self.buf[..n])?;
            left -= n;
        }
        Ok(t.elapsed())
    }
}

/// Every client moves `transfers` transfers of `size` bytes at the same time, each on its own
/// thread: the raw floor under a striped write (`write`) or read over as many hosts. Returns
/// the wall time of the slowest.
pub fn fan_out(clients: &mut [RawClient], transfers: usize, size: usize, write: bool) -> Result<Duration> {
    let t = Instant::now();
    thread::scope(|scope| {
        let workers: Vec<_> = clients
            .iter_mut()
            .map(|c| {
                scope.spawn(move || -> Result<()> {
                    for _ in 0..transfers {
                        if write {
                            c.write(size)?;
                        } else {
                            c.read(size)?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().map_err(|_| anyhow::anyhow!("raw baseline thread panicked"))?)
    })?;
    Ok(t.elapsed())
}

impl Drop for RawClient {
    fn drop(&mut self) {
        let _ = self.stream.write_all(&header(OP_QUIT, 0));
    }
}

fn header(op: u8, len: usize) -> [u8; 9] {
    let mut h = [0u8; 9];
    h[0] = op;
    h[1..].copy_from_slice(&(len as u64).to_be_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_exchanges_move_the_bytes() {
        let server = RawServer::start().unwrap();
        let mut c = server.connect().unwrap();
        c.ping().unwrap();
        c.write(3 << 20).unwrap();
        c.read(3 << 20).unwrap();
        c.read(1).unwrap();
        drop(c);
        // The next client is served once the first has quit.
        server.connect().unwrap().ping().unwrap();
    }

    #[test]
    fn a_server_nobody_connected_to_stops_on_drop() {
        drop(RawServer::start().unwrap());
    }
}
