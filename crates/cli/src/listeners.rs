//! The listening sockets of a local cluster's daemons.
//!
//! `tessera up` (and every cluster the tests start) picks each daemon's port, binds it here,
//! and hands the open socket to the daemon (`--listen-fd`). Between choosing a port and
//! serving on it no other process can take it: with a port merely found free and released,
//! a connection anyone opened in that moment could be given it as its local port, and the
//! daemon failed with "Address already in use".
//!
//! The ports lie outside the kernel's ephemeral range (`ip_local_port_range`), which every
//! outgoing connection on the host draws its local port from. A daemon restarted on its
//! recorded address (`start_mds`, `tessera up` after a crash) binds that port again itself;
//! outside the range, only another listener asking for that exact port could hold it.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use anyhow::{bail, Context, Result};

const EPHEMERAL_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";
/// The lowest port chosen: below it lie the ports well-known services are configured on.
const LOWEST: u16 = 16384;
/// Ports tried before falling back to one the kernel picks.
const TRIES: usize = 200;

/// `count` listening sockets on `host`, on distinct ports outside the ephemeral range where
/// the host leaves room for them (else on ports the kernel picks). Socket i takes
/// `earlier[i]` if that port lies outside the range and is free: a cluster started again
/// keeps the addresses its clients know.
pub fn reserve(host: &str, count: u32, earlier: &[Option<u16>]) -> Result<Vec<TcpListener>> {
    let ports = ports_outside(ephemeral_range());
    (0..count as usize).map(|i| reserve_one(host, &ports, earlier.get(i).copied().flatten())).collect()
}

fn reserve_one(host: &str, ports: &Option<(u16, u16)>, earlier: Option<u16>) -> Result<TcpListener> {
    if let (Some((low, high)), Some(port)) = (*ports, earlier) {
        if (low..=high).contains(&port) {
            if let Ok(listener) = TcpListener::bind((host, port)) {
                return Ok(listener);
            }
        }
    }
    if let Some((low, high)) = *ports {
        for _ in 0..TRIES {
            let port = low + (random_u16() % (high - low + 1));
            match TcpListener::bind((host, port)) {
                Ok(listener) => return Ok(listener),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                Err(e) => return Err(e).with_context(|| format!("listening on {host}:{port}")),
            }
        }
    }
    TcpListener::bind((host, 0)).with_context(|| format!("listening on a free port of {host}"))
}

/// The kernel's ephemeral ports, `None` if the file is missing or unreadable.
fn ephemeral_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string(EPHEMERAL_RANGE).ok()?;
    let mut fields = text.split_whitespace().map(str::parse::<u16>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

/// The widest span of ports at or above [`LOWEST`] clear of `ephemeral`, if there is one
/// roomy enough (1,024 ports) for random choices to rarely meet.
fn ports_outside(ephemeral: Option<(u16, u16)>) -> Option<(u16, u16)> {
    let (low, high) = ephemeral?;
    let below = (low > LOWEST).then(|| (LOWEST, low - 1));
    let above = (high < u16::MAX).then(|| (high.max(LOWEST - 1) + 1, u16::MAX));
    let room = |(a, b): (u16, u16)| u32::from(b) - u32::from(a) + 1;
    [below, above].into_iter().flatten().filter(|&r| room(r) >= 1024).max_by_key(|&r| room(r))
}

fn random_u16() -> u16 {
    let mut bytes = [0u8; 2];
    // No randomness (never seen on Linux): the first port tried is then always the same one,
    // and a taken one moves the search on by the fallback.
    let _ = getrandom::fill(&mut bytes);
    u16::from_le_bytes(bytes)
}

/// Makes `cmd`'s child inherit `listener` (the socket stays shut to every other child this
/// process starts); returns the descriptor number to give it as `--listen-fd`. Keep the
/// listener open until the child has started.
pub fn hand_to(cmd: &mut Command, listener: &TcpListener) -> RawFd {
    let fd = listener.as_raw_fd();
    // SAFETY: the closure runs in the child between fork and exec and calls only fcntl(2),
    // which is async-signal-safe; it clears close-on-exec on a descriptor the child holds.
    unsafe {
        cmd.pre_exec(move || match libc::fcntl(fd, libc::F_SETFD, 0) {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    fd
}

/// In a daemon: the listening TCP socket it was handed as descriptor `fd`, checked to be one.
pub fn inherited(fd: RawFd) -> Result<TcpListener> {
    if (0..=2).contains(&fd) {
        bail!("--listen-fd {fd} is standard input, output or error, not a socket handed over");
    }
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        bail!("--listen-fd {fd}: no such open descriptor (it must be a listening socket this process inherits)");
    }
    let listening = socket_option(fd, libc::SO_ACCEPTCONN).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTSOCK) => anyhow::anyhow!("--listen-fd {fd} is open but is not a socket"),
        _ => anyhow::anyhow!("--listen-fd {fd}: {e}"),
    })?;
    let stream = socket_option(fd, libc::SO_TYPE)? == libc::SOCK_STREAM;
    let domain = socket_option(fd, libc::SO_DOMAIN)?;
    if !stream || !(domain == libc::AF_INET || domain == libc::AF_INET6) {
        bail!("--listen-fd {fd} is a socket but not a TCP one");
    }
    if listening == 0 {
        bail!("--listen-fd {fd} is a TCP socket that is not listening");
    }
    // SAFETY: FD_CLOEXEC keeps the socket from any program this one might start.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: `fd` is open and a listening TCP socket (checked above); it was handed to this
    // process for this one use, so the listener becomes its only owner.
    Ok(unsafe { TcpListener::from_raw_fd(fd) })
}

fn socket_option(fd: RawFd, option: libc::c_int) -> std::io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `value`, an int it was sized for.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, option, &mut value as *mut libc::c_int as *mut libc::c_void, &mut len) };
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_chosen_clear_of_the_ephemeral_range() {
        assert_eq!(ports_outside(Some((32768, 60999))), Some((16384, 32767)));
        assert_eq!(ports_outside(Some((1024, 40000))), Some((40001, 65535)));
        assert_eq!(ports_outside(Some((1024, 65535))), None, "no room: the kernel picks");
        assert_eq!(ports_outside(Some((17000, 65000))), None, "too little room either side");
        assert_eq!(ports_outside(None), None);
    }

    #[test]
    fn reserved_ports_are_distinct_listening_and_outside_the_range() {
        let listeners = reserve("127.0.0.1", 8, &[]).unwrap();
        let ports: std::collections::BTreeSet<u16> = ports_of(&listeners).into_iter().collect();
        assert_eq!(ports.len(), 8);
        let (low, high) = ports_outside(ephemeral_range()).expect("room outside this host's ephemeral range");
        assert!(ports.iter().all(|p| (low..=high).contains(p)), "{ports:?} outside {low}..={high}");
        for l in &listeners {
            assert_eq!(socket_option(l.as_raw_fd(), libc::SO_ACCEPTCONN).unwrap(), 1);
        }
    }

    fn ports_of(listeners: &[TcpListener]) -> Vec<u16> {
        listeners.iter().map(|l| l.local_addr().unwrap().port()).collect()
    }

    #[test]
    fn an_earlier_port_is_taken_again_when_free_and_clear_of_the_range() {
        let ephemeral = ephemeral_range().expect("this host's ephemeral port range");
        let (low, high) = ports_outside(Some(ephemeral)).expect("room outside this host's ephemeral range");
        let ports = ports_of(&reserve("127.0.0.1", 2, &[]).unwrap());
        let again = reserve("127.0.0.1", 2, &[Some(ports[0]), Some(ports[1])]).unwrap();
        assert_eq!(ports_of(&again), ports, "free again once the first listeners closed");
        // While `again` holds them, asking for one gets another; a port inside the ephemeral
        // range is not kept either.
        let other = ports_of(&reserve("127.0.0.1", 2, &[Some(ports[0]), Some(ephemeral.0)]).unwrap());
        assert_ne!(other[0], ports[0]);
        assert!((low..=high).contains(&other[1]), "{other:?}");
    }

    /// A descriptor of its own for `inherited` to take (it owns what it accepts).
    fn duplicate(fd: &impl AsRawFd) -> RawFd {
        // SAFETY: dup(2) of an open descriptor makes a new one nothing else owns.
        unsafe { libc::dup(fd.as_raw_fd()) }
    }

    #[test]
    fn a_handed_listening_socket_is_taken_and_anything_else_is_refused_by_name() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = inherited(duplicate(&listener)).unwrap();
        assert_eq!(taken.local_addr().unwrap(), listener.local_addr().unwrap());
        // SAFETY: F_GETFD only reads the flags.
        assert_eq!(unsafe { libc::fcntl(taken.as_raw_fd(), libc::F_GETFD) } & libc::FD_CLOEXEC, libc::FD_CLOEXEC, "kept from programs it starts");

        let refused = |fd: RawFd| inherited(fd).unwrap_err().to_string();
        assert!(refused(1).contains("standard input, output or error"));
        assert!(refused(999_999).contains("no such open descriptor"));
        let file = std::fs::File::open("/dev/null").unwrap();
        assert!(refused(duplicate(&file)).contains("is not a socket"));
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(refused(duplicate(&udp)).contains("not a TCP one"));
        let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(refused(duplicate(&stream)).contains("not listening"));
    }
}
