//! `tessera repair`: asks every metadata server for orphans, objects in its id range on the
//! OSDs that no file, precreated range or removal journal accounts for (the removal journal
//! keeps unlink and create from leaking; orphans come from outside it, such as a metadata
//! store restored from an old backup). Reports them, and with `--remove` removes them.
//!
//! Each server also reports the other way round: data objects its files name that their OSDs
//! do not hold (an OSD store lost, or replaced with `up --reconfigure`), by the file's path.
//! Those are never removed.
//!
//! Each server also checks the directories split across servers: a directory inode nobody
//! names (a cross-server mkdir cut short, older than `--older-than`), an entry naming a gone
//! directory (a cross-server rmdir cut short); `--remove` removes both.
//!
//! It also walks the namespace for the temporaries of copies that never finished: `put`, `cp`
//! and `mv` write `.<name>.<command>-<pid>` beside their destination and rename it into place,
//! and only a client killed outright (SIGKILL, a crash, a lost host) leaves one behind. Those
//! not written for an hour (`--older-than`) are reported, and removed with `--remove`; a younger
//! one may belong to a copy still running, so it is only counted. A `mv` between metadata servers first renames its
//! source aside (`.<name>.tessera-mv-src-<pid>`); one left so as long is reported with the
//! command that puts it back, and never removed: it holds the only copy of its data.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use clap::Args;
use tessera_client::{Client, FileType, FsError, InodeId};

use super::ClusterArg;
use crate::units::count;

#[derive(Args)]
pub struct RepairArgs {
    /// A copy's temporary not written for this long, a mv's source renamed aside this long
    /// ago, or a directory inode made this long ago that no entry names, belongs to no running
    /// command (500ms, 30s, 10m, 2h; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = crate::units::parse_duration)]
    older_than: Duration,
    /// Remove the orphans found (each server journals them and removes them now, or when their
    /// OSD answers again), and the temporaries of unfinished copies. Without it, only report them.
    #[arg(long)]
    remove: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn repair(args: RepairArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let reports = client.repair(args.remove, args.older_than.as_secs())?;
    let mut total = 0;
    for r in &reports {
        total += r.found;
        let verb = if args.remove { "removed" } else { "found" };
        println!("mds{}: {} {verb}", r.server, count(r.found, "orphan object", "orphan objects"));
        for o in &r.orphans {
            println!("  osd{:<4} object {:#x}", o.osd, o.object_id);
        }
        if r.found > r.orphans.len() as u64 {
            println!("  ... and {} more", r.found - r.orphans.len() as u64);
        }
    }
    match (total, args.remove) {
        (0, _) => println!("repair: every object on the OSDs is accounted for"),
        (n, false) => println!("repair: {}; `tessera repair --remove` removes them", count(n, "orphan object", "orphan objects")),
        (n, true) => println!("repair: {} removed (those on an OSD that does not answer go when it returns)", count(n, "orphan object", "orphan objects")),
    }
    report_split_faults(&reports, args.remove);
    let cutoff = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().saturating_sub(args.older_than);
    let damaged: HashSet<InodeId> = reports.iter().flat_map(|r| r.missing.iter().map(|m| m.ino)).collect();
    let Walked { temporaries: stale, claimed, young, paths } = walk(&client, cutoff.as_secs() as i64, &damaged)?;
    report_missing(&reports, &paths);
    for (path, size) in &stale {
        if args.remove {
            client.unlink(path)?;
        }
        println!("  {path}  ({size} bytes)");
    }
    match (stale.len(), args.remove) {
        (0, _) if young.temporaries > 0 => println!("repair: no temporary left by a copy that did not finish {} ago or more", shown(args.older_than)),
        (0, _) => println!("repair: no temporary left by an unfinished copy"),
        (n, false) => println!(
            "repair: {} left by copies that did not finish (not written for {}); `tessera repair --remove` removes them",
            count(n as u64, "temporary file", "temporary files"),
            shown(args.older_than)
        ),
        (n, true) => println!("repair: {} left by copies that did not finish removed", count(n as u64, "temporary file", "temporary files")),
    }
    for (path, name) in &claimed {
        let back = format!("{}/{name}", path.rsplit_once('/').map_or("", |(dir, _)| dir));
        println!("  {path}  (put it back: tessera mv '{path}' '{back}')");
    }
    if !claimed.is_empty() {
        println!(
            "repair: {} of a mv between metadata servers that did not finish, renamed aside {} ago or more; they hold their data, so repair leaves them",
            count(claimed.len() as u64, "source", "sources"),
            shown(args.older_than)
        );
    }
    if let Some(what) = young.described() {
        // A command cut short a moment ago (its error pointed here) leaves these too.
        println!(
            "repair: left alone, as a put, cp or mv may still be writing them: {what} changed within the last {}; once none runs, `tessera repair --older-than 0` includes them",
            shown(args.older_than)
        );
    }
    Ok(())
}

/// What the walk passed over as too recent: a command may still be at work on it.
#[derive(Default)]
struct Young {
    temporaries: usize,
    claimed: usize,
}

impl Young {
    fn described(&self) -> Option<String> {
        let parts: Vec<String> = [(self.temporaries, "temporary file", "temporary files"), (self.claimed, "mv source renamed aside", "mv sources renamed aside")]
            .into_iter()
            .filter(|(n, _, _)| *n > 0)
            .map(|(n, one, many)| count(n as u64, one, many))
            .collect();
        (!parts.is_empty()).then(|| parts.join(" and "))
    }
}

/// What cross-server mkdirs and rmdirs cut short left (`RepairReport::unlinked`, `dangling`).
fn report_split_faults(reports: &[tessera_client::RepairReport], removed: bool) {
    let verb = if removed { "removed" } else { "found" };
    for r in reports.iter().filter(|r| !r.unlinked.is_empty()) {
        let what = count(r.unlinked.len() as u64, "directory inode that no entry names", "directory inodes that no entry names");
        println!("mds{}: {what} (a mkdir cut short) {verb}", r.server);
        for ino in &r.unlinked {
            println!("  inode {:#x}", ino.0);
        }
    }
    for r in reports.iter().filter(|r| !r.dangling.is_empty()) {
        let what = count(r.dangling.len() as u64, "entry naming a directory that is gone", "entries naming a directory that is gone");
        println!("mds{}: {what} (an rmdir cut short) {verb}", r.server);
        for e in &r.dangling {
            println!("  '{}' in directory {:#x} -> inode {:#x} (metadata server {})", e.name, e.dir.0, e.ino.0, e.ino.server());
        }
    }
    let unlinked: usize = reports.iter().map(|r| r.unlinked.len()).sum();
    let dangling: usize = reports.iter().map(|r| r.dangling.len()).sum();
    let what = || {
        let unlinked = count(unlinked as u64, "unnamed directory inode", "unnamed directory inodes");
        format!("{unlinked}, {}", count(dangling as u64, "entry naming a gone directory", "entries naming a gone directory"))
    };
    match (unlinked + dangling, removed) {
        (0, _) => println!("repair: every directory split across metadata servers is whole"),
        (_, false) => println!("repair: {}; `tessera repair --remove` removes them", what()),
        (_, true) => println!("repair: {} removed", what()),
    }
}

/// Files whose data objects their OSDs do not hold (`RepairReport::missing`), by path where
/// the walk found one. Never removed: what is left of the file is its owner's to judge.
fn report_missing(reports: &[tessera_client::RepairReport], paths: &HashMap<InodeId, String>) {
    let mut files = 0;
    for r in reports.iter().filter(|r| !r.missing.is_empty()) {
        let mut by_file: Vec<(InodeId, Vec<String>)> = Vec::new();
        for m in &r.missing {
            let object = format!("osd{} object {:#x}", m.object.osd, m.object.object_id);
            match by_file.last_mut() {
                Some((ino, objects)) if *ino == m.ino => objects.push(object),
                _ => by_file.push((m.ino, vec![object])),
            }
        }
        files += by_file.len();
        let what = count(by_file.len() as u64, "file whose data objects its OSDs do not hold", "files whose data objects their OSDs do not hold");
        println!("mds{}: {what} (an OSD store lost or replaced)", r.server);
        for (ino, objects) in &by_file {
            let path = paths.get(ino).map_or_else(|| format!("inode {:#x} (not found in the namespace walk)", ino.0), Clone::clone);
            println!("  {path}: {}", objects.join(", "));
        }
    }
    match files {
        0 => println!("repair: every file's data objects are on their OSDs"),
        1 => println!(
            "repair: 1 file lost data with its objects: reads of those stripes fail. Restore the OSD's store from a copy, or remove the file; repair leaves it"
        ),
        n => println!(
            "repair: {n} files lost data with their objects: reads of those stripes fail. Restore the OSD's store from a copy, or remove the files; repair leaves them"
        ),
    }
}

/// `1h`, `90s`: how `--older-than` reads back.
fn shown(d: Duration) -> String {
    match d.as_secs() {
        s if s > 0 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s > 0 && s % 60 == 0 => format!("{}m", s / 60),
        _ if d.subsec_millis() == 0 => format!("{}s", d.as_secs()),
        _ => format!("{}ms", d.as_millis()),
    }
}

/// What the namespace walk found: every copy temporary (`temporary::is_copy_temporary`) last
/// written before the cutoff, with its size (0 when an OSD holding it does not answer); every
/// source a `mv` claimed (`temporary::claimed_source`) not renamed since, with the name it had;
/// and the paths of the inodes asked for. Links are not followed, so each directory is walked
/// once.
struct Walked {
    temporaries: Vec<(String, u64)>,
    claimed: Vec<(String, String)>,
    young: Young,
    paths: HashMap<InodeId, String>,
}

fn walk(client: &Client, cutoff_secs: i64, wanted: &HashSet<InodeId>) -> Result<Walked> {
    let (mut temporaries, mut claimed, mut paths) = (Vec::new(), Vec::new(), HashMap::new());
    let mut young = Young::default();
    // Each directory through a handle from its parent's listing (`Dir`): no walk from the root
    // per directory, which would cost a deep tree d²/2 lookups.
    let mut dirs = vec![("/".to_string(), client.open_dir("/")?)];
    while let Some((dir, handle)) = dirs.pop() {
        // A directory removed since its parent was read (a command running beside the repair)
        // has nothing of its own to report.
        let entries = match handle.readdir() {
            Err(e) if matches!(e.fs_error(), Some(FsError::NotFound | FsError::Stale)) => continue,
            other => other?,
        };
        for entry in entries {
            let path = format!("{}/{}", dir.trim_end_matches('/'), entry.name);
            if wanted.contains(&entry.attr.ino) {
                paths.insert(entry.attr.ino, path.clone());
            }
            // A claimed source's ctime is its rename aside (a directory's moves since).
            if let Some(name) = super::temporary::claimed_source(&entry.name) {
                if entry.attr.ctime.secs < cutoff_secs {
                    claimed.push((path, name.to_string()));
                    continue;
                }
                young.claimed += 1;
            }
            match entry.attr.file_type {
                FileType::Directory => dirs.push((path, handle.entered(&entry.name, &entry.attr)?)),
                FileType::Regular if super::temporary::is_copy_temporary(&entry.name) => match entry.attr.mtime.secs < cutoff_secs {
                    true => temporaries.push((path, if entry.attr.size_known() { entry.attr.size } else { 0 })),
                    false => young.temporaries += 1,
                },
                _ => {}
            }
        }
    }
    temporaries.sort();
    claimed.sort();
    Ok(Walked { temporaries, claimed, young, paths })
}
