//! A daemon started by a command that owns it (`demo`, `bench`, a test harness) stops when that
//! command dies, even of SIGKILL, which runs no handler and no destructor. The daemon's stdin
//! is a pipe whose only writer is the starting process: the kernel closes it when that process
//! ends, however it ends, and the daemon reads end-of-file and shuts down as on SIGTERM
//! (flushing its store). A command that hands its daemons off on purpose (`up`, which returns
//! and leaves the cluster running) first writes one byte, which tells the daemon to stop
//! watching. A pipe rather than PR_SET_PDEATHSIG, which follows the thread that forked, not the
//! process, and cannot be undone once the daemon is handed off.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

/// Set in a tied daemon's environment (passed through `ip netns exec` like any variable).
const ENV: &str = "TESSERA_TIED_TO_PARENT";
/// The byte that releases a daemon.
const RELEASE: u8 = b'r';

/// The starting side of a tie: dropping it (or the process ending) stops the daemon.
pub struct Tie {
    writer: File,
}

impl Tie {
    /// Ties the daemon `cmd` will start: its stdin becomes the pipe's reading end.
    pub fn attach(cmd: &mut Command) -> std::io::Result<Tie> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills `fds` with two new descriptors, each then owned exactly once.
        // O_CLOEXEC: no other child (another daemon started later) inherits the writing end.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just made by pipe2 and nothing else owns them.
        let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        cmd.stdin(Stdio::from(reader)).env(ENV, "1");
        Ok(Tie { writer })
    }

    /// Lets the daemon outlive this process.
    pub fn release(mut self) {
        if let Err(e) = self.writer.write_all(&[RELEASE]) {
            // Already gone (it exited): nothing is left to release.
            tracing::debug!(%e, "releasing a daemon that has exited");
        }
    }
}

/// In a daemon: if it was started tied, watches stdin on a thread of its own and sends this
/// process SIGTERM when the starting process is gone. Call after the signal handlers are
/// installed (the signal then reaches them).
pub fn watch_if_tied(role: &'static str) {
    if std::env::var_os(ENV).is_none() {
        return;
    }
    let spawned = std::thread::Builder::new().name("parent-tie".into()).spawn(move || {
        let mut byte = [0u8; 1];
        match std::io::stdin().read(&mut byte) {
            Ok(1) if byte[0] == RELEASE => {}
            _ => {
                eprintln!("tessera {role}: the command that started this daemon is gone; shutting down");
                // SAFETY: kill(2) of this process; the signal handler takes it like any SIGTERM.
                unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
            }
        }
    });
    if let Err(e) = spawned {
        eprintln!("tessera {role}: warning: cannot watch the starting command ({e}); this daemon will outlive it if it is killed");
    }
}
