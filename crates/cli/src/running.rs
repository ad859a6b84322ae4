//! Which daemons of a local cluster directory run: the ones `DIR/daemons.json` records that are
//! still alive, and any process that holds the lock of one of the cluster's stores (`DIR/osd<i>`,
//! `DIR/mds<i>`). The locks find what the file misses: a lost or broken file, a daemon started
//! by hand on the cluster's store, or one an interrupted `up` never recorded.

use std::path::{Path, PathBuf};

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

/// Whether `pid` is a live process (a zombie has exited; only its parent has not noticed).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}
