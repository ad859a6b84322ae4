//! Which CPUs take the completion interrupts of the disk a directory is on, read from sysfs and
//! procfs. A disk with one queue (virtio-blk, SATA) interrupts one CPU; a thread that waits for
//! its flushes elsewhere is woken by a second interrupt, from that CPU to its own. The MDS's
//! event loop, which waits for every group's fdatasync, runs on the disk's CPUs
//! (`loop_cpus.rs`; docs/metadata.md, "The event loop runs where the disk interrupts").

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::cpus::parse_list;

/// How deep stacked devices (LVM, dm-crypt, md) are followed to their disks.
const STACK_DEPTH: usize = 4;

/// The interrupt lines of the disk(s) under a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskInterrupts {
    /// The disks' kernel names ("vda"), for messages.
    pub disks: Vec<String>,
    /// The lines that carry their I/O completions.
    pub irqs: Vec<u32>,
}

impl DiskInterrupts {
    /// The interrupt lines of the disk holding `dir`, or why there are none to follow: not on a
    /// block device (tmpfs, a network file system), or a device without interrupt lines of its
    /// own (a loop device, a RAM disk).
    pub fn of(dir: &Path) -> Result<DiskInterrupts, String> {
        let dev = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let node = Path::new("/sys/dev/block").join(format!("{major}:{minor}"));
        let block = node.canonicalize().map_err(|_| format!("{} is not on a block device (device {major}:{minor})", dir.display()))?;
        let mut disks = Vec::new();
        let mut lines = Vec::new();
        collect(&block, STACK_DEPTH, &mut disks, &mut lines);
        let counts = std::fs::read_to_string("/proc/interrupts").map(|t| irq_counts(&t)).unwrap_or_default();
        let irqs = busy_lines(&lines, &counts);
        if irqs.is_empty() {
            return Err(format!("{} has no interrupt lines of its own", names(&disks, &block)));
        }
        Ok(DiskInterrupts { disks, irqs })
    }

    /// The CPUs the lines are routed to now (the kernel's effective affinity; the allowed one
    /// where that is not given). Empty when none can be read.
    pub fn cpus(&self) -> Vec<usize> {
        let mut cpus: Vec<usize> = self.irqs.iter().flat_map(|irq| routed_to(*irq)).collect();
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }
}

fn names(disks: &[String], block: &Path) -> String {
    if disks.is_empty() {
        block.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    } else {
        disks.join(",")
    }
}

/// Follows a block device to its whole disk(s) and their interrupt lines: a partition to its
/// disk, a stacked device to the devices under it (`slaves/`).
fn collect(block: &Path, depth: usize, disks: &mut Vec<String>, lines: &mut Vec<u32>) {
    let disk = if block.join("partition").exists() { block.parent().unwrap_or(block).to_path_buf() } else { block.to_path_buf() };
    let under: Vec<PathBuf> = std::fs::read_dir(disk.join("slaves"))
        .map(|entries| entries.flatten().filter_map(|e| Path::new("/sys/class/block").join(e.file_name()).canonicalize().ok()).collect())
        .unwrap_or_default();
    if !under.is_empty() {
        if depth > 0 {
            for u in under {
                collect(&u, depth - 1, disks, lines);
            }
        }
        return;
    }
    if let Some(name) = disk.file_name() {
        disks.push(name.to_string_lossy().into_owned());
    }
    if let Ok(device) = disk.join("device").canonicalize() {
        lines.extend(device_lines(&device));
    }
}

/// The interrupt lines of the nearest device at or above `device` that has any: its MSI/MSI-X
/// vectors, or its legacy line.
fn device_lines(device: &Path) -> Vec<u32> {
    for dir in device.ancestors().take_while(|d| d.starts_with("/sys/devices") && *d != Path::new("/sys/devices")) {
        if let Ok(entries) = std::fs::read_dir(dir.join("msi_irqs")) {
            let mut irqs: Vec<u32> = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
            irqs.sort_unstable();
            if !irqs.is_empty() {
                return irqs;
            }
        }
        if let Some(irq) = std::fs::read_to_string(dir.join("irq")).ok().and_then(|s| s.trim().parse::<u32>().ok()).filter(|&i| i > 0) {
            return vec![irq];
        }
    }
    Vec::new()
}

/// Of a device's lines, those that carry its I/O: each with at least 1% of the interrupts
/// all of them have taken (a device's configuration line fires a handful of times; its queues
/// millions). All of them when none has fired yet.
fn busy_lines(lines: &[u32], counts: &HashMap<u32, u64>) -> Vec<u32> {
    let count = |irq: &u32| counts.get(irq).copied().unwrap_or(0);
    let total: u64 = lines.iter().map(count).sum();
    if total == 0 {
        return lines.to_vec();
    }
    lines.iter().copied().filter(|irq| count(irq).saturating_mul(100) >= total).collect()
}

/// Interrupts taken per line, all CPUs together, from `/proc/interrupts`.
fn irq_counts(text: &str) -> HashMap<u32, u64> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |header| header.split_whitespace().count());
    lines
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let irq = fields.next()?.strip_suffix(':')?.parse().ok()?;
            let total = fields.take(cpus).map_while(|f| f.parse::<u64>().ok()).sum();
            Some((irq, total))
        })
        .collect()
}

/// The CPUs line `irq` is delivered to.
fn routed_to(irq: u32) -> Vec<usize> {
    ["effective_affinity_list", "smp_affinity_list"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(format!("/proc/irq/{irq}/{f}")).ok())
        .filter_map(|s| parse_list(&s).ok())
        .find(|cpus| !cpus.is_empty())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       \n  35:          0          1 PCI-MSIX-0000:00:02.0   0-edge      virtio1-config\n  36:          5   16663608 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nNMI:          0          0   Non-maskable interrupts\n";

    #[test]
    fn counts_sum_every_cpu_and_skip_named_lines() {
        let counts = irq_counts(INTERRUPTS);
        assert_eq!(counts.get(&35), Some(&1));
        assert_eq!(counts.get(&36), Some(&16663613));
        assert_eq!(counts.len(), 2, "NMI and friends are not numbered lines: {counts:?}");
    }

    #[test]
    fn a_configuration_line_that_hardly_fires_is_left_out() {
        let counts = irq_counts(INTERRUPTS);
        assert_eq!(busy_lines(&[35, 36], &counts), vec![36]);
        assert_eq!(busy_lines(&[40, 41], &counts), vec![40, 41], "lines that never fired all count");
    }

    /// The real machine: a directory on an anonymous device (tmpfs, overlay) has no disk to
    /// follow; one on a disk names lines that take interrupts when the directory's files are
    /// flushed, routed to CPUs this machine has.
    #[test]
    fn the_lines_found_for_a_directory_are_those_its_flushes_interrupt() {
        let dir = tempfile::tempdir().unwrap();
        let major = libc::major(std::fs::metadata(dir.path()).unwrap().dev());
        let found = DiskInterrupts::of(dir.path());
        if major == 0 {
            let why = found.unwrap_err();
            assert!(why.contains("not on a block device"), "{why}");
            return;
        }
        let found = found.unwrap();
        assert!(!found.disks.is_empty() && !found.irqs.is_empty(), "{found:?}");
        let taken = || {
            let counts = irq_counts(&std::fs::read_to_string("/proc/interrupts").unwrap());
            found.irqs.iter().map(|irq| counts.get(irq).copied().unwrap_or(0)).sum::<u64>()
        };
        let before = taken();
        let mut file = std::fs::File::create(dir.path().join("f")).unwrap();
        for _ in 0..20 {
            std::io::Write::write_all(&mut file, &[7u8; 4096]).unwrap();
            file.sync_data().unwrap();
        }
        assert!(taken() > before, "20 flushes in {} interrupted none of {:?}", dir.path().display(), found.irqs);
        // SAFETY: sysconf has no pointer arguments.
        let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) } as usize;
        let cpus = found.cpus();
        assert!(!cpus.is_empty() && cpus.iter().all(|&c| c < configured), "{found:?} routed to {cpus:?}");
    }
}
