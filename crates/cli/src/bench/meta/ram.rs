//! The seed's configuration beside the disk: the slides (002, "Create Latency") ran the
//! metadata server RAM-mounted "to eliminate disk effects". The same creates are repeated, in
//! the same run, on a second cluster whose whole directory (metadata database, OSD stores)
//! lives on a RAM-backed file system, so the table shows what the disk's flushes cost on top
//! of the server's own work. The disk numbers stay the headline: they are what a user's
//! cluster does.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::phase::{self, Phase};
use super::{name, open_workers, Worker, STRIPE_UNIT};
use crate::cluster::{ClusterSpec, LocalCluster};

/// Where RAM-mounted runs go unless told otherwise.
pub const DEFAULT_RAM_DIR: &str = "/dev/shm";

/// What the RAM-mounted repeat measured.
pub struct RamRun {
    pub create: Phase,
    pub mds_cpu_us_per_create: f64,
}

/// True when `dir` is on a RAM-backed file system (tmpfs or ramfs), from its statfs magic.
pub fn is_ram_backed(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid NUL-terminated path and a zeroed out-structure of the right type.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut s) } == 0) && matches!(s.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
}

/// Creates, then removes, `files` files from each of `clients` clients on a fresh cluster of
/// `osds` OSDs under `ram_dir`, timing the creates and the server's CPU.
pub fn creates(exe: &Path, ram_dir: &Path, osds: u32, clients: usize, files: usize, stripe_count: u32) -> Result<RamRun> {
    let tmp = crate::children::scratch_dir("tessera-bench-meta-ram-", Some(ram_dir)).with_context(|| format!("making a directory in {}", ram_dir.display()))?;
    let spec = ClusterSpec { stripe_unit: STRIPE_UNIT, stripe_count: 1, ..ClusterSpec::new(osds) };
    let cluster = LocalCluster::start_spec(exe, &tmp.path().join("cluster"), &spec)?;
    let config = cluster.config().clone();
    let mds_pid = cluster.records().iter().find(|r| r.role == "mds").map(|r| r.pid).context("the cluster has no metadata server")?;
    let admin = tessera_client::Client::connect(&config)?;
    let top = "/ram";
    let workers: Vec<Worker> = open_workers(&admin, &config, top, clients, stripe_count)?;
    let (create, cpu) = phase::with_cpu_of(mds_pid, || {
        phase::run(&workers, files, |(c, _, d), i| {
            d.create(&name(*c, i), 0o644, None)?;
            Ok(())
        })
    })?;
    phase::run(&workers, files, |(c, _, d), i| Ok(d.unlink(&name(*c, i))?))?;
    drop(workers);
    admin.rmdir(top)?;
    cluster.stop()?;
    let mds_cpu_us_per_create = cpu.as_secs_f64() * 1e6 / create.ops as f64;
    Ok(RamRun { create, mds_cpu_us_per_create })
}

/// The RAM directory to use: the one given, else [`DEFAULT_RAM_DIR`] when it is RAM-backed;
/// `None` to skip (given "none", or no RAM-backed default).
pub fn ram_dir(given: Option<&Path>) -> Result<Option<PathBuf>> {
    match given {
        Some(p) if p.as_os_str() == "none" => Ok(None),
        Some(p) => {
            anyhow::ensure!(p.is_dir(), "--ram-dir {}: not a directory", p.display());
            if !is_ram_backed(p) {
                tracing::warn!(dir = %p.display(), "--ram-dir is not on tmpfs or ramfs; its row measures that disk");
            }
            Ok(Some(p.to_path_buf()))
        }
        None => Ok(Some(PathBuf::from(DEFAULT_RAM_DIR)).filter(|p| is_ram_backed(p))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_shm_is_ram_backed_and_a_disk_directory_is_not() {
        let shm = Path::new(DEFAULT_RAM_DIR);
        if shm.is_dir() {
            assert!(is_ram_backed(shm), "/dev/shm is tmpfs on Linux");
        }
        assert!(!is_ram_backed(Path::new("/proc")), "procfs is not tmpfs");
        assert!(!is_ram_backed(Path::new("/nonexistent/for/sure")));
    }

    #[test]
    fn none_skips_and_a_missing_directory_is_an_error() {
        assert!(ram_dir(Some(Path::new("none"))).unwrap().is_none());
        assert!(ram_dir(Some(Path::new("/nonexistent/for/sure"))).is_err());
    }
}
