//! `tessera repair`: asks every metadata server for orphans, objects in its id range on the
//! OSDs that no file, precreated range or removal journal accounts for (the removal journal
//! keeps unlink and create from leaking; orphans come from outside it, such as a metadata
//! store restored from an old backup). Reports them, and with `--remove` removes them.
//!
//! It also walks the namespace for the temporaries of copies that never finished: `put`, `cp`
//! and `mv` write `.<name>.<command>-<pid>` beside their destination and rename it into place,
//! and only a client killed outright (SIGKILL, a crash, a lost host) leaves one behind. Those
//! not written for an hour are reported, and removed with `--remove`; a younger one may belong
//! to a copy still running.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use clap::Args;
use tessera_client::{Client, FileType};

use super::ClusterArg;

/// A temporary not written for this long belongs to no running copy.
const TEMPORARY_STALE_AFTER: Duration = Duration::from_secs(3600);

#[derive(Args)]
pub struct RepairArgs {
    /// Remove the orphans found (each server journals them and removes them now, or when their
    /// OSD answers again), and the temporaries of unfinished copies. Without it, only report them.
    #[arg(long)]
    remove: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn repair(args: RepairArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let reports = client.repair(args.remove)?;
    let mut total = 0;
    for r in &reports {
        total += r.found;
        let verb = if args.remove { "removed" } else { "found" };
        println!("mds{}: {} orphan object(s) {verb}", r.server, r.found);
        for o in &r.orphans {
            println!("  osd{:<4} object {:#x}", o.osd, o.object_id);
        }
        if r.found > r.orphans.len() as u64 {
            println!("  ... and {} more", r.found - r.orphans.len() as u64);
        }
    }
    match (total, args.remove) {
        (0, _) => println!("repair: every object on the OSDs is accounted for"),
        (n, false) => println!("repair: {n} orphan object(s); `tessera repair --remove` removes them"),
        (n, true) => println!("repair: {n} orphan object(s) removed (those on an OSD that does not answer go when it returns)"),
    }
    let cutoff = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().saturating_sub(TEMPORARY_STALE_AFTER);
    let stale = stale_temporaries(&client, cutoff.as_secs() as i64)?;
    for (path, size) in &stale {
        if args.remove {
            client.unlink(path)?;
        }
        println!("  {path}  ({size} bytes)");
    }
    match (stale.len(), args.remove) {
        (0, _) => println!("repair: no temporary left by an unfinished copy"),
        (n, false) => println!("repair: {n} temporary file(s) left by copies that did not finish (not written for an hour); `tessera repair --remove` removes them"),
        (n, true) => println!("repair: {n} temporary file(s) left by copies that did not finish removed"),
    }
    Ok(())
}

/// Every copy temporary (`temporary::is_copy_temporary`) in the namespace last written before
/// `cutoff_secs`, with its size (0 when an OSD holding it does not answer). Links are not
/// followed, so each directory is walked once.
fn stale_temporaries(client: &Client, cutoff_secs: i64) -> Result<Vec<(String, u64)>> {
    let mut found = Vec::new();
    let mut dirs = vec!["/".to_string()];
    while let Some(dir) = dirs.pop() {
        for entry in client.readdir(&dir)? {
            let path = format!("{}/{}", dir.trim_end_matches('/'), entry.name);
            match entry.attr.file_type {
                FileType::Directory => dirs.push(path),
                FileType::Regular if super::temporary::is_copy_temporary(&entry.name) && entry.attr.mtime.secs < cutoff_secs => {
                    found.push((path, if entry.attr.size_known() { entry.attr.size } else { 0 }));
                }
                _ => {}
            }
        }
    }
    found.sort();
    Ok(found)
}
