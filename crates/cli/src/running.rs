//! Which daemons of a local cluster directory run: the ones `DIR/daemons.json` records that are
//! still alive, and any process that holds the lock of one of the cluster's stores (`DIR/osd<i>`,
//! `DIR/mds<i>`). The locks find what the file misses: a lost or broken file, a daemon started
//! by hand on the cluster's store, or one an interrupted `up` never recorded.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cluster::{read_records, DaemonRecord, DAEMONS_FILE};
use crate::lock;

#[derive(Default)]
pub struct Found {
    /// Metadata servers first (they are stopped first), then OSDs, each by index.
    pub daemons: Vec<DaemonRecord>,
    /// Stores locked by a process that has not written its pid yet (it is just starting).
    pub unknown: Vec<PathBuf>,
    /// Why `DIR/daemons.json` exists but cannot be read.
    pub broken_records: Option<String>,
}

impl Found {
    pub fn is_empty(&self) -> bool {
        self.daemons.is_empty() && self.unknown.is_empty()
    }

    /// `mds0 (pid 12), osd0 (pid 13)`, for messages.
    pub fn describe(&self) -> String {
        let mut names: Vec<String> = self.daemons.iter().map(|r| format!("{} (pid {})", r.name(), r.pid)).collect();
        names.extend(self.unknown.iter().map(|d| format!("{} (pid not known yet)", d.display())));
        names.join(", ")
    }
}

/// The running daemons of the cluster in `dir` (an absolute path, as `up` records it).
pub fn find(dir: &Path) -> Found {
    let mut found = Found::default();
    match read_records(dir) {
        Ok(records) => found.daemons = records.into_iter().filter(is_running).collect(),
        Err(e) if dir.join(DAEMONS_FILE).exists() => found.broken_records = Some(format!("{e:#}")),
        Err(_) => {}
    }
    for (role, index, data) in stores(dir) {
        let Some(holder) = lock::holder(&data) else { continue };
        match holder.pid {
            Some(pid) if found.daemons.iter().any(|r| r.pid == pid) => {}
            Some(pid) => {
                let log = dir.join("logs").join(format!("{role}{index}.log"));
                found.daemons.push(DaemonRecord { role: role.into(), index, pid, addr: String::new(), data, log });
            }
            None => found.unknown.push(data),
        }
    }
    found.daemons.sort_by_key(|r| (r.role != "mds", r.index));
    found
}

/// Every store directory under `dir`: `osd0`, `osd1`, ... and `mds0`, ...
pub fn stores(dir: &Path) -> Vec<(&'static str, u32, PathBuf)> {
    let mut out = Vec::new();
    for role in ["mds", "osd"] {
        for index in 0.. {
            let data = dir.join(format!("{role}{index}"));
            if !data.is_dir() {
                break;
            }
            out.push((role, index, data));
        }
    }
    out
}

/// Whether the daemon a record names is still this daemon: alive, and its command line still
/// names its directory (pids are reused).
pub fn is_running(r: &DaemonRecord) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{}/cmdline", r.pid)) else { return false };
    let data = r.data.to_string_lossy();
    alive(r.pid) && cmdline.split(|b| *b == 0).any(|arg| arg == data.as_bytes())
}

/// How long [`alive`] waits for a process that is exiting to be gone.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Whether `pid` is a live process. A zombie has exited (only its parent has not noticed). A
/// process killed a moment ago may still be tearing down: until its last thread is gone it
/// holds its files, so its store's lock. It is waited for, up to [`EXIT_WAIT`], so that `up`
/// run right after a crash starts its successor instead of finding it running.
pub fn alive(pid: u32) -> bool {
    let deadline = Instant::now() + EXIT_WAIT;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        let status = || std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let life = match stat.ok().as_deref().and_then(life) {
            // The first thread waits as a zombie for the others, which still hold the files.
            Some(Life::Exited) if threads(pid) > 1 => Some(Life::Exiting),
            // A SIGKILL sent but not yet acted on (the process has not run since) ends it too.
            Some(Life::Running) if kill_pending(&status()) => Some(Life::Exiting),
            life => life,
        };
        match life {
            None | Some(Life::Exited) => return false,
            Some(Life::Running) => return true,
            Some(Life::Exiting) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            // Stuck in its exit: it holds what it held, so it counts as running.
            Some(Life::Exiting) => return true,
        }
    }
}

/// The threads process `pid` has left (0 once it is gone).
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |tasks| tasks.count())
}

#[derive(Debug, PartialEq)]
enum Life {
    Running,
    /// Killed or returned, and tearing down (the kernel's PF_EXITING).
    Exiting,
    /// A zombie, or dead.
    Exited,
}

/// PF_EXITING in the flags field of /proc/PID/stat (include/linux/sched.h).
const PF_EXITING: u64 = 0x4;

/// A process's life from its /proc/PID/stat line: after the command name in parentheses
/// (which may itself hold `)`), the state is the first field and the flags the seventh.
fn life(stat: &str) -> Option<Life> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let flags: u64 = fields.get(6)?.parse().ok()?;
    Some(match fields[0] {
        "Z" | "X" | "x" => Life::Exited,
        _ if flags & PF_EXITING != 0 => Life::Exiting,
        _ => Life::Running,
    })
}

/// Whether /proc/PID/status shows a SIGKILL pending, for the process (ShdPnd) or its main
/// thread (SigPnd): masks in hex, signal n at bit n - 1.
fn kill_pending(status: &str) -> bool {
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    status.lines().filter_map(|l| l.strip_prefix("ShdPnd:").or_else(|| l.strip_prefix("SigPnd:"))).any(|mask| {
        u64::from_str_radix(mask.trim(), 16).is_ok_and(|m| m & SIGKILL_BIT != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_sigkill_is_read_from_either_mask() {
        let status = |sig: &str, shd: &str| format!("Name:\ttessera\nState:\tS (sleeping)\nSigPnd:\t{sig}\nShdPnd:\t{shd}\nSigBlk:\t0000000000000100\n");
        assert!(kill_pending(&status("0000000000000000", "0000000000000100")));
        assert!(kill_pending(&status("0000000000000100", "0000000000000000")));
        assert!(!kill_pending(&status("0000000000000000", "0000000000004000")), "SIGTERM pending is not SIGKILL");
        assert!(!kill_pending(""), "no status: nothing known pending");
    }

    #[test]
    fn a_process_is_running_exiting_or_exited_by_its_stat_line() {
        let line = |name: &str, state: &str, flags: u64| format!("4242 ({name}) {state} 1 4242 4242 0 -1 {flags} 120 0 0 0 5 3 0 0 20 0 1 0");
        assert_eq!(life(&line("tessera", "S", 0x400000)), Some(Life::Running));
        assert_eq!(life(&line("tessera", "R", 0x400004)), Some(Life::Exiting), "killed, tearing down");
        assert_eq!(life(&line("tessera", "D", 0x400044)), Some(Life::Exiting));
        assert_eq!(life(&line("tessera", "Z", 0x40400c)), Some(Life::Exited));
        assert_eq!(life(&line("a) R 1 (b", "S", 0)), Some(Life::Running), "a name holding `) R`");
        assert_eq!(life("4242 (tessera) S 1"), None, "cut short");
        assert_eq!(life(""), None);
    }

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        assert!(alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!alive(pid));
    }
}
