//! `df`: each OSD's capacity and use, and the namespace's inode counts.
//!
//! The metadata server reads the OSDs' root pages (clients hold no capability for them). An
//! OSD's size is its formatted capacity, fixed when its store was made; what it can still take
//! is also bounded by the file system under it, which other OSDs and other files may share. So
//! `avail` is the smaller of the two, and the total counts a shared file system once, as the
//! OSDs on it can never together hold more than it does.

use anyhow::Result;
use clap::Args;
use tessera_mds_proto::OsdUsage;

use super::ClusterArg;
use crate::units::{count, format_size};

/// `-h` is df(1)'s human sizes, so help is `--help` alone.
#[derive(Args)]
#[command(disable_help_flag = true)]
pub struct DfArgs {
    /// Sizes as 1.5K, 200M, 3.1G: the only way this table shows them, accepted as df(1) users
    /// type it.
    #[arg(short = 'h', long = "human-readable")]
    _human: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn df(args: DfArgs) -> Result<()> {
    let (client, config) = args.cluster.connect()?;
    let usage = client.osd_usage()?;
    println!("{:<6} {:<22} {:>12} {:>12} {:>12} {:>5}", "osd", "portal", "size", "used", "avail", "use%");
    for (i, (entry, u)) in config.osds.iter().zip(&usage).enumerate() {
        if u.reachable() {
            print_row(&format!("osd{i}"), &entry.addr, Space { size: u.total_bytes, used: u.used_bytes, avail: u.avail_bytes() });
        } else {
            println!("{:<6} {:<22} {:>12}", format!("osd{i}"), entry.addr, "not answering");
        }
    }
    let (total, shared) = total(&usage);
    print_row("total", "", total);
    for group in shared {
        let names: Vec<String> = group.osds.iter().map(|i| format!("osd{i}")).collect();
        println!(
            "{} share one file system ({}, {} free); the total counts it once",
            names.join(", "),
            format_size(group.size_bytes),
            format_size(group.avail_bytes)
        );
    }
    let full: Vec<String> = usage.iter().enumerate().filter(|(_, u)| u.reachable() && u.is_full()).map(|(i, _)| format!("osd{i}")).collect();
    if !full.is_empty() {
        println!("full (under {}% free): {}; new files go to the other OSDs while they have room", tessera_mds_proto::usage::FULL_BELOW_PERCENT, full.join(", "));
    }
    let fs = client.statfs()?;
    println!(
        "namespace: {}, {}, {}, {} awaiting removal",
        count(fs.files, "file", "files"),
        count(fs.directories, "directory", "directories"),
        count(fs.symlinks, "symlink", "symlinks"),
        count(fs.pending_removals, "object", "objects")
    );
    let down = usage.iter().filter(|u| !u.reachable()).count();
    if down > 0 {
        anyhow::bail!("{down} of {} OSDs did not answer; the total counts the others", usage.len());
    }
    Ok(())
}

/// One row of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Space {
    size: u64,
    used: u64,
    avail: u64,
}

/// OSDs (by index) on one file system.
#[derive(Debug, PartialEq, Eq)]
struct SharedFs {
    osds: Vec<usize>,
    size_bytes: u64,
    avail_bytes: u64,
}

/// The total of the OSDs that answered, each file system counted once: the OSDs on one file
/// system hold at most its size and can take at most its free space. Also the file systems
/// more than one OSD shares.
fn total(usage: &[OsdUsage]) -> (Space, Vec<SharedFs>) {
    let mut groups: Vec<(Option<u64>, Vec<usize>)> = Vec::new();
    for (i, u) in usage.iter().enumerate().filter(|(_, u)| u.reachable()) {
        let id = u.fs.map(|fs| fs.id);
        match groups.iter_mut().find(|(g, _)| id.is_some() && *g == id) {
            Some((_, members)) => members.push(i),
            None => groups.push((id, vec![i])),
        }
    }
    let mut sum = Space::default();
    let mut shared = Vec::new();
    for (_, members) in groups {
        let on = |f: fn(&OsdUsage) -> u64| members.iter().map(|&i| f(&usage[i])).fold(0u64, u64::saturating_add);
        let (mut size, used) = (on(|u| u.total_bytes), on(|u| u.used_bytes));
        let mut avail = on(|u| u.total_bytes.saturating_sub(u.used_bytes));
        // Members report the same file system; the latest answer's figures are as good as any.
        if let Some(fs) = members.iter().filter_map(|&i| usage[i].fs).next_back() {
            size = size.min(fs.size_bytes);
            avail = avail.min(fs.avail_bytes);
            if members.len() > 1 {
                shared.push(SharedFs { osds: members.clone(), size_bytes: fs.size_bytes, avail_bytes: fs.avail_bytes });
            }
        }
        sum.size = sum.size.saturating_add(size);
        sum.used = sum.used.saturating_add(used);
        sum.avail = sum.avail.saturating_add(avail);
    }
    (sum, shared)
}

fn print_row(name: &str, portal: &str, s: Space) {
    println!("{name:<6} {portal:<22} {:>12} {:>12} {:>12} {:>4}%", format_size(s.size), format_size(s.used), format_size(s.avail), use_percent(s));
}

/// As df(1): the share of the space a writer could have that is used, rounded up, so an OSD
/// whose disk other files filled shows 100% however little of it is its own.
fn use_percent(s: Space) -> u64 {
    let reachable = s.used as u128 + s.avail as u128;
    if reachable == 0 {
        return 0;
    }
    (s.used as u128 * 100).div_ceil(reachable) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_mds_proto::FsSpace;

    const GIB: u64 = 1 << 30;

    fn osd(total: u64, used: u64, fs: Option<(u64, u64, u64)>) -> OsdUsage {
        OsdUsage { total_bytes: total, used_bytes: used, fs: fs.map(|(id, size_bytes, avail_bytes)| FsSpace { id, size_bytes, avail_bytes }) }
    }

    #[test]
    fn osds_on_one_file_system_count_it_once() {
        // Three OSDs formatted to a 100 GiB disk with 30 GiB free, and one on its own disk.
        let disk = Some((7, 100 * GIB, 30 * GIB));
        let usage = [osd(100 * GIB, GIB, disk), osd(100 * GIB, 2 * GIB, disk), osd(100 * GIB, 0, disk), osd(50 * GIB, 10 * GIB, Some((8, 50 * GIB, 40 * GIB)))];
        let (sum, shared) = total(&usage);
        assert_eq!(sum, Space { size: 150 * GIB, used: 13 * GIB, avail: 70 * GIB });
        assert_eq!(shared, vec![SharedFs { osds: vec![0, 1, 2], size_bytes: 100 * GIB, avail_bytes: 30 * GIB }]);
        assert_eq!(usage[0].avail_bytes(), 30 * GIB, "an OSD's own avail is bounded by its disk too");
    }

    #[test]
    fn use_is_a_share_of_what_a_writer_could_have() {
        assert_eq!(use_percent(Space { size: 100, used: 0, avail: 100 }), 0);
        assert_eq!(use_percent(Space { size: 100, used: 1, avail: 199 }), 1, "rounded up");
        assert_eq!(use_percent(Space { size: 24 << 20, used: 1 << 20, avail: 0 }), 100, "its disk is full");
        assert_eq!(use_percent(Space::default()), 0);
    }

    #[test]
    fn osds_without_a_file_system_and_unreachable_ones() {
        let usage = [osd(10 * GIB, GIB, None), osd(10 * GIB, GIB, None), OsdUsage::UNREACHABLE];
        let (sum, shared) = total(&usage);
        assert_eq!(sum, Space { size: 20 * GIB, used: 2 * GIB, avail: 18 * GIB }, "no file system: nothing is merged");
        assert!(shared.is_empty());
    }
}
