//! The event loop's readiness queue (`tcp.rs`): epoll with one-shot interest per socket, an
//! eventfd that wakes the loop, and waits with microsecond timeouts.
//!
//! - **One-shot.** A socket reports once, then stays silent until whoever holds its connection
//!   asks again ([`Poller::modify`]): the loop, or a worker handing the connection back.
//! - **Microsecond timeouts.** The open group of creates waits at most 200 us (`GATHER_MAX`),
//!   so a wait's timeout goes to `epoll_pwait2`, which takes a timespec. Kernels before 5.11
//!   lack it; there the timeout is rounded up to the millisecond `epoll_wait` takes.
//! - **Polling before sleeping** ([`Poller::wait_polling`]): after serving, the loop asks the
//!   kernel again without sleeping for a few tens of microseconds before it blocks (how long,
//!   `poll_window.rs` decides from what earlier polls caught). On a
//!   virtual machine a sleeping thread woken by a packet from another CPU costs more than that
//!   polling, in latency and in CPU: four clients' creates on disk went from 16.7-18.5k/s to
//!   19.4-21.3k/s, with less server CPU per create (docs/metadata.md, "The event loop's system
//!   calls").
//! - **Why not the `polling` crate**, which the loop used before: every wait through it also
//!   armed a timerfd, registered it again, read its notifier and registered that again. That
//!   is four system calls beyond the wait, about two per create (docs/metadata.md, "The event
//!   loop's system calls"). Here a wait is one call, and the eventfd is read only when a worker
//!   has written it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::poll_window::Waited;

/// The key the wake-up eventfd reports under; never a connection's.
const WAKE_KEY: u64 = u64::MAX;
/// Events taken from the kernel per wait.
const EVENTS_MAX: usize = 1024;

/// What a socket is watched for, under which key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest {
    pub key: usize,
    writable: bool,
}

impl Interest {
    pub fn readable(key: usize) -> Interest {
        Interest { key, writable: false }
    }

    pub fn writable(key: usize) -> Interest {
        Interest { key, writable: true }
    }

    fn epoll_event(&self) -> libc::epoll_event {
        let direction = if self.writable { libc::EPOLLOUT } else { libc::EPOLLIN };
        libc::epoll_event { events: (direction | libc::EPOLLONESHOT) as u32, u64: self.key as u64 }
    }
}

/// The keys of the sockets one wait found ready.
pub struct Events {
    list: Vec<libc::epoll_event>,
    len: usize,
}

impl Default for Events {
    fn default() -> Self {
        Events { list: vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_MAX], len: 0 }
    }
}

impl Events {
    /// The ready sockets' keys (the wake-up is not one).
    pub fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.list[..self.len].iter().map(|e| e.u64).filter(|&k| k != WAKE_KEY).map(|k| k as usize)
    }
}

pub struct Poller {
    epoll: OwnedFd,
    wake: OwnedFd,
    /// False once the kernel said it has no `epoll_pwait2`.
    pwait2: AtomicBool,
}

impl Poller {
    pub fn new() -> io::Result<Poller> {
        // SAFETY: plain system calls; each descriptor is owned at once, and closed with it.
        let epoll = unsafe { owned(libc::epoll_create1(libc::EPOLL_CLOEXEC))? };
        let wake = unsafe { owned(libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK))? };
        let poller = Poller { epoll, wake, pwait2: AtomicBool::new(true) };
        // Level-triggered, not one-shot: it reports until `wait` reads it.
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: WAKE_KEY };
        poller.ctl(libc::EPOLL_CTL_ADD, poller.wake.as_raw_fd(), Some(&mut ev))?;
        Ok(poller)
    }

    /// Watches `fd` once for `interest`. The descriptor must be [deleted](Poller::delete)
    /// before it is closed, or a later descriptor with its number inherits nothing: the kernel
    /// drops a closed file from the set by itself.
    pub fn add(&self, fd: &impl AsRawFd, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd.as_raw_fd(), Some(&mut interest.epoll_event()))
    }

    /// Watches `fd` once more, for `interest`.
    pub fn modify(&self, fd: &impl AsRawFd, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd.as_raw_fd(), Some(&mut interest.epoll_event()))
    }

    /// [`Poller::modify`] by descriptor number, for a socket whose owner was just handed to
    /// another thread (a worker giving a connection back to the loop): the number is all
    /// epoll needs, and the new owner does not close it before the event asked for here.
    pub fn modify_raw(&self, fd: RawFd, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, Some(&mut interest.epoll_event()))
    }

    pub fn delete(&self, fd: &impl AsRawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd.as_raw_fd(), None)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, event: Option<&mut libc::epoll_event>) -> io::Result<()> {
        let event = event.map_or(std::ptr::null_mut(), |e| e as *mut libc::epoll_event);
        // SAFETY: `event` is null (DEL) or points at an event that lives through the call.
        check(unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, event) }).map(drop)
    }

    /// Waits until a watched socket is ready, [`Poller::notify`] is called, or `timeout`
    /// passes (`None`: no limit). A signal ends the wait early with no events.
    pub fn wait(&self, events: &mut Events, timeout: Option<Duration>) -> io::Result<()> {
        events.len = 0;
        let list = events.list.as_mut_ptr();
        let max = events.list.len() as libc::c_int;
        let epfd = self.epoll.as_raw_fd();
        let n = match timeout {
            Some(t) if self.pwait2.load(Ordering::Relaxed) => {
                let ts = libc::timespec { tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t, tv_nsec: t.subsec_nanos() as libc::c_long };
                // SAFETY: `list` holds `max` events; `ts` lives through the call; no signal mask.
                let n = unsafe { libc::syscall(libc::SYS_epoll_pwait2, epfd, list, max, &ts as *const libc::timespec, std::ptr::null::<libc::sigset_t>(), 0usize) };
                if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                    self.pwait2.store(false, Ordering::Relaxed);
                    return self.wait(events, timeout);
                }
                n as libc::c_int
            }
            // SAFETY: `list` holds `max` events.
            _ => unsafe { libc::epoll_wait(epfd, list, max, timeout.map_or(-1, millis_rounded_up)) },
        };
        match check(n) {
            Ok(n) => events.len = n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        if events.list[..events.len].iter().any(|e| e.u64 == WAKE_KEY) {
            let mut count = [0u8; 8];
            // SAFETY: an 8-byte buffer for the eventfd's counter; EAGAIN (read already) is fine.
            unsafe { libc::read(self.wake.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
        }
        Ok(())
    }

    /// Like [`Poller::wait`], but first asks without sleeping, again and again for up to
    /// `poll_for` (never past `timeout`), and sleeps only if nothing came meanwhile. Says how
    /// the wait ended, for the loop's [`PollWindow`](crate::poll_window::PollWindow).
    pub fn wait_polling(&self, events: &mut Events, timeout: Option<Duration>, poll_for: Duration) -> io::Result<Waited> {
        let start = Instant::now();
        if !poll_for.is_zero() {
            let limit = timeout.map_or(poll_for, |t| t.min(poll_for));
            loop {
                self.wait(events, Some(Duration::ZERO))?;
                if events.len > 0 {
                    return Ok(Waited::Polled);
                }
                if start.elapsed() >= limit {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        self.wait(events, timeout.map(|t| t.saturating_sub(start.elapsed())))?;
        Ok(if events.len > 0 { Waited::Slept(start.elapsed()) } else { Waited::TimedOut })
    }

    /// Wakes the current or the next [`Poller::wait`], from any thread.
    pub fn notify(&self) -> io::Result<()> {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte buffer, as an eventfd takes.
        check(unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) } as libc::c_int).map(drop)
    }
}

/// `Duration` as the milliseconds `epoll_wait` takes, rounded up so a wait never ends early.
fn millis_rounded_up(t: Duration) -> libc::c_int {
    t.as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128) as libc::c_int
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// # Safety
/// `fd` is a new descriptor nobody else owns (or negative: an error).
unsafe fn owned(fd: RawFd) -> io::Result<OwnedFd> {
    check(fd).map(|fd| OwnedFd::from_raw_fd(fd))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::time::Instant;

    use super::*;

    fn keys(events: &Events) -> Vec<usize> {
        events.keys().collect()
    }

    #[test]
    fn a_socket_reports_once_until_watched_again() {
        let poller = Poller::new().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        poller.add(&server, Interest::readable(7)).unwrap();
        let mut events = Events::default();
        poller.wait(&mut events, Some(Duration::from_millis(1))).unwrap();
        assert!(keys(&events).is_empty(), "nothing to read yet");
        client.write_all(b"x").unwrap();
        poller.wait(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(keys(&events), vec![7]);
        poller.wait(&mut events, Some(Duration::from_millis(1))).unwrap();
        assert!(keys(&events).is_empty(), "one-shot: silent until re-armed, though a byte waits");
        poller.modify(&server, Interest::readable(8)).unwrap();
        poller.wait(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(keys(&events), vec![8]);
        poller.modify(&server, Interest::writable(9)).unwrap();
        poller.wait(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(keys(&events), vec![9], "room to write");
        poller.delete(&server).unwrap();
    }

    #[test]
    fn notify_wakes_a_wait_from_another_thread_and_is_cleared() {
        let poller = std::sync::Arc::new(Poller::new().unwrap());
        let waker = poller.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            waker.notify().unwrap();
        });
        let mut events = Events::default();
        let start = Instant::now();
        poller.wait(&mut events, None).unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(keys(&events).is_empty(), "a wake-up is no socket's event");
        t.join().unwrap();
        // Two notifications before a wait: that wait takes both, the next one sleeps.
        let waker = poller.clone();
        std::thread::spawn(move || {
            waker.notify().unwrap();
            waker.notify().unwrap();
        })
        .join()
        .unwrap();
        let start = Instant::now();
        poller.wait(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert!(start.elapsed() < Duration::from_secs(5), "woken by the notifications");
        let start = Instant::now();
        poller.wait(&mut events, Some(Duration::from_millis(20))).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(20), "both notifications were cleared by the first wait");
    }

    #[test]
    fn a_polling_wait_takes_what_arrives_and_keeps_its_timeout() {
        let poller = Poller::new().unwrap();
        let mut events = Events::default();
        let start = Instant::now();
        let waited = poller.wait_polling(&mut events, Some(Duration::from_millis(3)), Duration::from_micros(500)).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(3), "polls, then sleeps out the rest");
        assert_eq!(waited, Waited::TimedOut);
        assert!(keys(&events).is_empty());
        let start = Instant::now();
        poller.wait_polling(&mut events, Some(Duration::from_millis(2)), Duration::from_secs(60)).unwrap();
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(2) && took < Duration::from_secs(30), "polling never outlasts the timeout: {took:?}");

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        poller.add(&server, Interest::readable(3)).unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1));
            client.write_all(b"x").unwrap();
            client
        });
        let waited = poller.wait_polling(&mut events, Some(Duration::from_secs(5)), Duration::from_millis(200)).unwrap();
        assert_eq!(keys(&events), vec![3], "a byte sent while polling");
        assert_eq!(waited, Waited::Polled);
        let mut client = writer.join().unwrap();
        // Read, so the socket is readable again only once the next byte comes.
        let mut x = [0u8; 1];
        std::io::Read::read_exact(&mut &server, &mut x).unwrap();
        poller.modify(&server, Interest::readable(4)).unwrap();
        let later = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            client.write_all(b"y").unwrap();
        });
        let start = Instant::now();
        let waited = poller.wait_polling(&mut events, None, Duration::from_micros(100)).unwrap();
        assert_eq!(keys(&events), vec![4], "a byte sent after the polling, while asleep");
        let Waited::Slept(after) = waited else { panic!("{waited:?}") };
        assert!(after >= Duration::from_millis(50) && after <= start.elapsed(), "measured from the wait's start: {after:?}");
        later.join().unwrap();
    }

    #[test]
    fn a_wait_never_ends_before_its_timeout() {
        let poller = Poller::new().unwrap();
        let mut events = Events::default();
        let start = Instant::now();
        poller.wait(&mut events, Some(Duration::from_micros(300))).unwrap();
        assert!(start.elapsed() >= Duration::from_micros(300), "never early");
        assert_eq!(millis_rounded_up(Duration::from_micros(1)), 1);
        assert_eq!(millis_rounded_up(Duration::from_millis(2)), 2);
        assert_eq!(millis_rounded_up(Duration::from_secs(u64::MAX)), libc::c_int::MAX);
    }
}
