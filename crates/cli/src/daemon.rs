//! Starting Tessera daemons as real child processes. A daemon prints one `ready` line on stdout
//! once it listens; the parent waits for that line (with a deadline) and reads the address from
//! it, so ports can be chosen by the kernel (`:0`) with no races.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use crate::parent_tie::Tie;

/// How long a daemon may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// The ready line: `ready key=value key=value ...`.
pub fn ready_line(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("ready {}", body.join(" "))
}

fn parse_ready(line: &str) -> Option<HashMap<String, String>> {
    let rest = line.strip_prefix("ready ")?;
    Some(
        rest.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// A running daemon; stopped (SIGTERM, then SIGKILL after a grace period) when dropped.
pub struct Daemon {
    child: Child,
    pub fields: HashMap<String, String>,
    /// Stops the daemon if this process dies before handing it off (`parent_tie.rs`).
    tie: Option<Tie>,
}

impl Daemon {
    /// Runs `tessera <args...>` (this same executable) and waits for its ready line.
    pub fn spawn(args: &[&str]) -> Result<Daemon> {
        let exe = std::env::current_exe().context("finding the tessera executable")?;
        Self::spawn_exe(&exe, args)
    }

    pub fn spawn_exe(exe: &Path, args: &[&str]) -> Result<Daemon> {
        Self::spawn_with(exe, args, None)
    }

    /// Like [`Daemon::spawn_exe`], with stderr appended to `log` when given. The child gets its
    /// own process group, so a Ctrl-C meant for a foreground command does not reach it.
    pub fn spawn_with(exe: &Path, args: &[&str], log: Option<&Path>) -> Result<Daemon> {
        let mut cmd = Command::new(exe);
        cmd.args(args);
        Self::spawn_command(cmd, &args.join(" "), log)
    }

    /// Spawns a prepared command (e.g. one that enters a network namespace first, see
    /// [`crate::netns::Host::command`]) that runs a `tessera` daemon, and waits for its ready
    /// line. `what` names the daemon in errors (its `tessera` arguments).
    pub fn spawn_command(mut cmd: Command, what: &str, log: Option<&Path>) -> Result<Daemon> {
        let (stderr, log_start) = match log {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("opening log {}", path.display()))?;
                let start = file.metadata().map(|m| m.len()).unwrap_or(0);
                (Stdio::from(file), start)
            }
            None => (Stdio::inherit(), 0),
        };
        let tie = Tie::attach(&mut cmd).context("making the pipe that ties a daemon to this process")?;
        cmd.stdout(Stdio::piped()).stderr(stderr).process_group(0);
        let mut child = crate::children::spawn(&mut cmd).with_context(|| format!("starting `tessera {what}`"))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout pipe"))?;
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let mut sent = false;
            while let Some(Ok(line)) = lines.next() {
                if !sent {
                    if let Some(fields) = parse_ready(&line) {
                        let _ = tx.send(fields);
                        sent = true;
                        continue;
                    }
                }
                println!("{line}");
            }
        });
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(fields) => Ok(Daemon { child, fields, tie: Some(tie) }),
            Err(e) => {
                // Disconnected: stdout closed, so the daemon is exiting; wait for its status.
                let status = match e {
                    mpsc::RecvTimeoutError::Disconnected => child.wait().ok(),
                    mpsc::RecvTimeoutError::Timeout => None,
                };
                let _ = child.kill();
                let _ = child.wait();
                crate::children::forget(child.id());
                // The reason is in the daemon's log; show it rather than send the operator there.
                let why = log.map(|path| log_tail(path, log_start)).unwrap_or_default();
                match status {
                    Some(s) => bail!("`tessera {what}` exited ({s}) before it was ready{why}"),
                    None => bail!("`tessera {what}` was not ready within {READY_TIMEOUT:?}{why}"),
                }
            }
        }
    }

    pub fn field(&self, key: &str) -> Result<&str> {
        self.fields.get(key).map(String::as_str).ok_or_else(|| anyhow!("daemon ready line lacks `{key}`"))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Leaves the daemon running after this handle (and this process) is gone; returns its pid.
    pub fn detach(mut self) -> u32 {
        if let Some(tie) = self.tie.take() {
            tie.release();
        }
        let pid = self.child.id();
        crate::children::forget(pid);
        std::mem::forget(self);
        pid
    }

    /// Stops the daemon gracefully and waits for it.
    pub fn stop(mut self) -> Result<()> {
        self.terminate()
    }

    /// Kills the daemon without letting it clean up (a crash, for durability tests).
    pub fn kill(mut self) -> Result<()> {
        crate::children::forget(self.child.id());
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    fn terminate(&mut self) -> Result<()> {
        crate::children::forget(self.child.id());
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        signal(self.child.id(), libc::SIGTERM);
        for _ in 0..100 {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(50));
        }
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

/// How many of a log's last lines a start-up failure shows.
const LOG_TAIL_LINES: usize = 8;

/// How `tessera` begins the line it prints when a command (a daemon too) fails.
pub const ERROR_PREFIX: &str = "tessera: error: ";

/// A log's length now, to read later only what was written after it.
pub fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// What `path` gained after byte `start`.
pub fn log_since(path: &Path, start: u64) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(bytes.get(start as usize..).unwrap_or_default()).into_owned()
}

/// The last lines `path` gained after byte `start` (this run's, not an earlier run's), with
/// the path, for an error message.
pub fn log_tail(path: &Path, start: u64) -> String {
    let new = log_since(path, start);
    let lines: Vec<&str> = new.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
    if last.is_empty() {
        return format!(" (its log {} is empty)", path.display());
    }
    format!("; the end of its log {}:\n    {}", path.display(), last.join("\n    "))
}

/// Sends `sig` to `pid`; false if no such process.
pub fn signal(pid: u32, sig: libc::c_int) -> bool {
    // SAFETY: kill(2) with a valid signal number has no memory effects in this process.
    unsafe { libc::kill(pid as libc::pid_t, sig) == 0 }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.terminate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_round_trips() {
        let line = ready_line(&[("addr", "127.0.0.1:3260".into()), ("target", "iqn.x:y".into())]);
        let f = parse_ready(&line).unwrap();
        assert_eq!(f["addr"], "127.0.0.1:3260");
        assert_eq!(f["target"], "iqn.x:y");
        assert!(parse_ready("hello").is_none());
    }

    #[test]
    fn a_log_tail_shows_only_what_this_run_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("d.log");
        std::fs::write(&log, "old run\n").unwrap();
        let start = std::fs::metadata(&log).unwrap().len();
        assert!(log_tail(&log, start).contains("is empty"));
        let mut text = String::from("old run\n");
        for i in 0..20 {
            text.push_str(&format!("line {i}\n"));
        }
        std::fs::write(&log, text).unwrap();
        let tail = log_tail(&log, start);
        assert!(tail.contains(&log.display().to_string()) && tail.contains("line 19") && tail.contains("line 12"), "{tail}");
        assert!(!tail.contains("line 11") && !tail.contains("old run"), "{tail}");
    }
}
