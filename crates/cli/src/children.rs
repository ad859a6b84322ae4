//! Daemons this process started and did not hand off ([`crate::daemon::Daemon::detach`]) stop
//! with it. They run in process groups of their own, so a terminal's Ctrl-C reaches only this
//! process, and a signal ends a process without running destructors: without this, an
//! interrupted `tessera bench` or `demo` would leave its daemons running. Commands that start
//! daemons call [`stop_all_on_signals`]; SIGINT, SIGTERM or SIGHUP then stops every daemon still
//! registered (SIGTERM, SIGKILL after a grace period) before this process exits.

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::daemon::signal;

/// How long stopped daemons get to exit before they are killed.
const GRACE: Duration = Duration::from_secs(5);

static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<u32>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A daemon this process started and must stop if it is interrupted.
pub fn register(pid: u32) {
    live().push(pid);
}

/// The daemon was stopped, or handed off to outlive this process.
pub fn forget(pid: u32) {
    live().retain(|&p| p != pid);
}

/// From now on, an interrupting signal stops the registered daemons, then exits 128 + signal.
pub fn stop_all_on_signals() -> Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).context("installing the signal handlers")?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let pids = live().clone();
                if !pids.is_empty() {
                    eprintln!("tessera: interrupted; stopping {} daemon(s) this command started", pids.len());
                }
                stop(&pids);
                std::process::exit(128 + sig);
            }
        })
        .context("starting the signal thread")?;
    Ok(())
}

fn stop(pids: &[u32]) {
    for &pid in pids {
        signal(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + GRACE;
    let mut left: Vec<u32> = pids.to_vec();
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|&pid| !reaped(pid));
        thread::sleep(Duration::from_millis(20));
    }
    for pid in left {
        signal(pid, libc::SIGKILL);
        let _ = reaped(pid);
    }
}

/// Whether the child `pid` has exited (reaping it).
fn reaped(pid: u32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid on a child of this process with WNOHANG only writes `status`.
    let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    r != 0
}
