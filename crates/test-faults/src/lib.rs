//! A TCP relay between a client and a daemon that injects one fault into one direction of a
//! real connection: cut it after so many bytes, or flip one byte. Tests put it in front of a
//! target to see what a connection lost mid-transfer or a byte altered on the wire does to
//! both ends; everything else is forwarded unchanged.
//!
//! A stall cuts only the client's side and leaves the daemon's connection open and silent, as a
//! network partition does to a daemon that has not noticed the client is gone.
//!
//! The fault applies to the relay's first connection. Bytes are counted from the moment
//! [`Relay::arm`] is called, so a test can log in and set up through that connection first.
//! Later connections (a client that logs in again after the fault) are forwarded clean.

pub mod descriptors;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What happens to the faulted direction once armed.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Forward this many bytes, then close both connections.
    CutAfter(u64),
    /// Flip the lowest bit of the byte at this position; forward everything.
    FlipAt(u64),
    /// Forward this many bytes, then close the client's connection only: the daemon's stays
    /// open, nothing more passes either way, and the relay holds it until the daemon closes it
    /// ([`Relay::held_closed_by_daemon`]) or the relay is dropped.
    StallAfter(u64),
}

/// Which direction the fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Bytes the daemon sends (Data-In, responses).
    FromTarget,
    /// Bytes the client sends (commands, Data-Out).
    ToTarget,
}

/// A listening relay; connect the client to [`Relay::addr`].
pub struct Relay {
    pub addr: SocketAddr,
    armed: Arc<AtomicBool>,
    /// The daemon's side of a stalled connection.
    held: Arc<Mutex<Option<TcpStream>>>,
}

impl Relay {
    /// Listens on a loopback port; every connection is relayed to `target`, the first one with
    /// the fault.
    pub fn start(target: SocketAddr, direction: Direction, fault: Fault) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port for the relay");
        let addr = listener.local_addr().expect("the relay's address");
        let armed = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Mutex::new(None));
        let (flag, hold) = (armed.clone(), held.clone());
        std::thread::spawn(move || {
            for (n, client) in listener.incoming().enumerate() {
                let (Ok(client), Ok(server)) = (client, TcpStream::connect(target)) else { continue };
                let (flag, hold) = (flag.clone(), hold.clone());
                std::thread::spawn(move || {
                    if n == 0 {
                        relay_with_fault(client, server, direction, fault, &flag, &hold);
                    } else {
                        relay_clean(client, server);
                    }
                });
            }
        });
        Relay { addr, armed, held }
    }

    /// After a [`Fault::StallAfter`]: whether the daemon closed the connection the relay holds
    /// open, waiting up to `wait` (bytes the daemon sends meanwhile are read and dropped).
    /// `false` also when nothing is held (the stall has not happened).
    pub fn held_closed_by_daemon(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let Some(mut held) = self.held.lock().expect("held lock").as_ref().and_then(|s| s.try_clone().ok()) else {
            return false;
        };
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || held.set_read_timeout(Some(left)).is_err() {
                return false;
            }
            match held.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return false,
                Err(_) => return true,
            }
        }
    }

    /// Starts counting bytes toward the fault.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }
}

fn relay_with_fault(client: TcpStream, server: TcpStream, direction: Direction, fault: Fault, armed: &AtomicBool, held: &Mutex<Option<TcpStream>>) {
    if let (Fault::StallAfter(_), Ok(keep)) = (fault, server.try_clone()) {
        // Kept open past the stall: the forwarding threads' clones close with them.
        *held.lock().expect("held lock") = Some(keep);
    }
    let (clean, faulted) = match direction {
        Direction::FromTarget => ((client.try_clone(), server.try_clone()), (server, client)),
        Direction::ToTarget => ((server.try_clone(), client.try_clone()), (client, server)),
    };
    // A stall must not pass the client's end of stream on to the daemon.
    let pass_close = !matches!(fault, Fault::StallAfter(_));
    if let (Ok(from), Ok(to)) = clean {
        std::thread::spawn(move || copy_until_closed(from, to, pass_close));
    }
    forward_with_fault(faulted.0, faulted.1, direction, fault, armed);
}

fn relay_clean(client: TcpStream, server: TcpStream) {
    if let (Ok(from), Ok(to)) = (server.try_clone(), client.try_clone()) {
        std::thread::spawn(move || copy_until_closed(from, to, true));
    }
    copy_until_closed(client, server, true);
}

fn copy_until_closed(mut from: TcpStream, mut to: TcpStream, pass_close: bool) {
    let _ = std::io::copy(&mut from, &mut to);
    if pass_close {
        let _ = to.shutdown(Shutdown::Write);
    }
}

fn forward_with_fault(mut from: TcpStream, mut to: TcpStream, direction: Direction, fault: Fault, armed: &AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut seen = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &mut buf[..n];
        if armed.load(Ordering::Acquire) {
            match fault {
                Fault::CutAfter(limit) if seen + n as u64 >= limit => {
                    let _ = to.write_all(&chunk[..(limit - seen) as usize]);
                    break;
                }
                Fault::StallAfter(limit) if seen + n as u64 >= limit => {
                    let _ = to.write_all(&chunk[..(limit - seen) as usize]);
                    let client = if direction == Direction::ToTarget { &from } else { &to };
                    let _ = client.shutdown(Shutdown::Both);
                    return;
                }
                Fault::FlipAt(at) if (seen..seen + n as u64).contains(&at) => chunk[(at - seen) as usize] ^= 0x01,
                _ => {}
            }
            seen += n as u64;
        }
        if to.write_all(chunk).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon stand-in that sends `n` bytes 0, 1, 2, ... (mod 256) on its first connection.
    fn sender(n: usize) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let bytes: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let _ = s.write_all(&bytes);
        });
        addr
    }

    fn receive_all(addr: SocketAddr) -> Vec<u8> {
        let mut got = Vec::new();
        let _ = TcpStream::connect(addr).unwrap().read_to_end(&mut got);
        got
    }

    #[test]
    fn a_cut_forwards_exactly_the_bytes_before_it() {
        let relay = Relay::start(sender(200_000), Direction::FromTarget, Fault::CutAfter(70_001));
        relay.arm();
        let got = receive_all(relay.addr);
        assert_eq!(got.len(), 70_001);
        assert!(got.iter().enumerate().all(|(i, b)| *b == i as u8));
    }

    #[test]
    fn a_flip_alters_one_byte_only() {
        let relay = Relay::start(sender(100_000), Direction::FromTarget, Fault::FlipAt(12_345));
        relay.arm();
        let got = receive_all(relay.addr);
        assert_eq!(got.len(), 100_000);
        let altered: Vec<usize> = (0..got.len()).filter(|&i| got[i] != i as u8).collect();
        assert_eq!(altered, vec![12_345]);
        assert_eq!(got[12_345], (12_345usize as u8) ^ 1);
    }

    #[test]
    fn an_unarmed_relay_forwards_everything() {
        let relay = Relay::start(sender(50_000), Direction::FromTarget, Fault::CutAfter(10));
        assert_eq!(receive_all(relay.addr).len(), 50_000);
    }

    #[test]
    fn a_connection_after_the_faulted_one_is_forwarded_clean() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let mut s = s.unwrap();
                let bytes: Vec<u8> = (0..30_000usize).map(|i| i as u8).collect();
                std::thread::spawn(move || {
                    let _ = s.write_all(&bytes);
                });
            }
        });
        let relay = Relay::start(target, Direction::FromTarget, Fault::CutAfter(1_000));
        relay.arm();
        assert_eq!(receive_all(relay.addr).len(), 1_000, "the first connection is cut");
        let again = receive_all(relay.addr);
        assert_eq!(again.len(), 30_000, "the second is not");
        assert!(again.iter().enumerate().all(|(i, b)| *b == i as u8));
    }

    #[test]
    fn a_stall_closes_the_client_and_holds_the_daemon_connection_open() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = vec![0u8; 3_000];
            s.read_exact(&mut got).unwrap();
            tx.send(got).unwrap();
            // Still open: nothing more arrives, and no end of stream, for a while.
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let mut more = [0u8; 16];
            let quiet = matches!(s.read(&mut more), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut);
            tx.send(vec![quiet as u8]).unwrap();
            drop(s);
        });
        let relay = Relay::start(target, Direction::ToTarget, Fault::StallAfter(3_000));
        relay.arm();
        let mut client = TcpStream::connect(relay.addr).unwrap();
        let _ = client.write_all(&vec![9u8; 20_000]);
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).map(|_| rest.len()).unwrap_or(0), 0, "the client's side is closed");
        assert_eq!(rx.recv().unwrap(), vec![9u8; 3_000]);
        assert_eq!(rx.recv().unwrap(), vec![1], "the daemon's connection stayed open and silent");
        assert!(relay.held_closed_by_daemon(Duration::from_secs(5)), "then the daemon closed it, and the relay saw that");
    }

    #[test]
    fn a_cut_toward_the_target_stops_the_client_bytes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            tx.send(got).unwrap();
        });
        let relay = Relay::start(target, Direction::ToTarget, Fault::CutAfter(5_000));
        relay.arm();
        let mut client = TcpStream::connect(relay.addr).unwrap();
        let _ = client.write_all(&vec![7u8; 20_000]);
        let got = rx.recv().unwrap();
        assert_eq!(got, vec![7u8; 5_000]);
    }
}
