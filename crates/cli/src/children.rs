//! Daemons this process started and did not hand off ([`crate::daemon::Daemon::detach`]) stop
//! with it. They run in process groups of their own, so a terminal's Ctrl-C reaches only this
//! process, and a signal ends a process without running destructors: without this, an
//! interrupted `tessera bench` or `demo` would leave its daemons running. Commands that start
//! daemons call [`stop_all_on_signals`]; SIGINT, SIGTERM or SIGHUP then stops every daemon still
//! registered (SIGTERM, SIGKILL after a grace period) before this process exits. The scratch
//! directories they made ([`scratch_dir`]: a bench's temporary OSD stores, which can hold
//! gigabytes) are removed then too, after the daemons are gone. A print that fails because
//! standard output's reader went away (`tessera bench ... | head`) ends the command the same
//! way ([`exit_after_stopping_all`], from `main.rs`), with SIGPIPE's exit status 141.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tempfile::TempDir;
use tessera_mds::cpus::CpuSet;

use crate::daemon::signal;

/// How long stopped daemons get to exit before they are killed.
const GRACE: Duration = Duration::from_secs(5);

struct Live {
    pids: Vec<u32>,
    /// Scratch directories to remove on an interrupt (one already removed costs nothing).
    scratch: Vec<PathBuf>,
    /// An interrupt is being handled: no more daemons start, and the signal thread exits.
    stopping: bool,
}

static LIVE: Mutex<Live> = Mutex::new(Live { pids: Vec::new(), scratch: Vec::new(), stopping: false });

/// Set once [`stop_all_on_signals`] runs: this command's daemons and scratch directories must
/// go with it however it ends. Read from a signal handler, hence an atomic.
static CLEANS_UP: AtomicBool = AtomicBool::new(false);

/// The CPUs daemons started from now on run on (`bench::pinning`); None: wherever the
/// scheduler puts them.
static DAEMON_CPUS: Mutex<Option<CpuSet>> = Mutex::new(None);

pub fn set_daemon_cpus(cpus: Option<CpuSet>) {
    *DAEMON_CPUS.lock().unwrap_or_else(|p| p.into_inner()) = cpus;
}

/// Puts the calling thread where daemons run, if they are pinned: for a thread that stands in
/// for a daemon (a bench's raw TCP server). Failing only leaves the thread where it was.
pub fn run_this_thread_as_daemon() {
    if let Some(set) = *DAEMON_CPUS.lock().unwrap_or_else(|p| p.into_inner()) {
        let _ = set.apply_to(0);
    }
}

fn live() -> std::sync::MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts a daemon this process must stop if it is interrupted. Spawning and registering are
/// one step under the lock, so the signal thread never misses a child that was just forked,
/// and once it is stopping nothing new starts.
pub fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    let mut live = live();
    if live.stopping {
        return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted"));
    }
    if let Some(set) = *DAEMON_CPUS.lock().unwrap_or_else(|p| p.into_inner()) {
        use std::os::unix::process::CommandExt;
        // SAFETY: between fork and exec the hook makes one system call on a copied set.
        unsafe {
            cmd.pre_exec(move || set.apply_to(0));
        }
    }
    let child = cmd.spawn()?;
    live.pids.push(child.id());
    Ok(child)
}

/// A temporary directory (under `in_dir`, or the system's) named `prefix` and random letters,
/// removed when the returned value is dropped, as `tempfile` does, and also when this process
/// is interrupted, which skips destructors.
pub fn scratch_dir(prefix: &str, in_dir: Option<&Path>) -> std::io::Result<TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    let dir = match in_dir {
        Some(parent) => builder.tempdir_in(parent)?,
        None => builder.tempdir()?,
    };
    let mut live = live();
    // Directories removed meanwhile leave the list, so it stays as short as what exists.
    live.scratch.retain(|d| d.exists());
    live.scratch.push(dir.path().to_path_buf());
    Ok(dir)
}

/// The daemon was stopped, or handed off to outlive this process.
pub fn forget(pid: u32) {
    live().pids.retain(|&p| p != pid);
}

/// Called before this process exits on its own: while an interrupt is being handled, the
/// signal thread is stopping daemons and exits the process when done, so wait for it.
pub fn wait_if_interrupted() {
    if live().stopping {
        loop {
            thread::park();
        }
    }
}

/// Whether this command stops its daemons and removes its scratch directories on every way
/// out ([`stop_all_on_signals`] ran). Safe to call from a signal handler.
pub fn cleans_up() -> bool {
    CLEANS_UP.load(Ordering::Relaxed)
}

/// Ends this process with `code` the way an interrupt does: the registered daemons stopped
/// and the scratch directories removed first, since `process::exit` runs no destructors. If a
/// signal is already being handled, its thread does that and exits instead.
pub fn exit_after_stopping_all(code: i32) -> ! {
    let (pids, scratch) = {
        let mut live = live();
        if live.stopping {
            drop(live);
            loop {
                thread::park();
            }
        }
        live.stopping = true;
        (live.pids.clone(), live.scratch.clone())
    };
    stop_and_remove(&pids, &scratch);
    std::process::exit(code)
}

/// From now on, an interrupting signal stops the registered daemons, then exits 128 + signal.
pub fn stop_all_on_signals() -> Result<()> {
    CLEANS_UP.store(true, Ordering::Relaxed);
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).context("installing the signal handlers")?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let (pids, scratch) = {
                    let mut live = live();
                    if live.stopping {
                        // The main thread is already on its way out (exit_after_stopping_all).
                        return;
                    }
                    live.stopping = true;
                    (live.pids.clone(), live.scratch.clone())
                };
                if !pids.is_empty() {
                    eprintln!("tessera: interrupted; stopping {} this command started", crate::units::count(pids.len() as u64, "daemon", "daemons"));
                }
                stop_and_remove(&pids, &scratch);
                std::process::exit(128 + sig);
            }
        })
        .context("starting the signal thread")?;
    Ok(())
}

fn stop_and_remove(pids: &[u32], scratch: &[PathBuf]) {
    stop(pids);
    for dir in scratch {
        let _ = std::fs::remove_dir_all(dir);
    }
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
