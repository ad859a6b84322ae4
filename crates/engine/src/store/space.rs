//! The file system under a store: its size, its free space, and which file system it is.
//!
//! A store's formatted capacity (root information page) is fixed when the store is made and
//! says nothing of what else lives on the disk. Several OSDs of one host often share a file
//! system (a local cluster always does), and other files use it too. So the engine also
//! reports the backing file system as it is now (pages.rs, the root's backing page): `df` can
//! then show the space a write can really use, and count a shared file system once.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::{IoOp, StorageError};

/// The file system holding a store, as `statvfs(3)` sees it now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackingSpace {
    /// Equal for two stores on one file system of one host, and (with a 2^-32 chance of a
    /// collision between hosts) different otherwise: the host's identity and the device number.
    pub fs_id: u64,
    pub size_bytes: u64,
    /// What an unprivileged writer may still use (`f_bavail`: blocks reserved for root excluded).
    pub avail_bytes: u64,
}

/// The file system holding `dir`.
pub fn of_dir(dir: &Path) -> Result<BackingSpace, StorageError> {
    let st = statvfs(dir)?;
    let device = std::fs::metadata(dir).map_err(StorageError::io(IoOp::Stat))?.dev();
    let frsize = st.f_frsize as u64;
    Ok(BackingSpace {
        fs_id: fs_id(host_identity(), device),
        size_bytes: (st.f_blocks as u64).saturating_mul(frsize),
        avail_bytes: (st.f_bavail as u64).saturating_mul(frsize),
    })
}

fn statvfs(dir: &Path) -> Result<libc::statvfs, StorageError> {
    let c_path = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| StorageError::Io { op: IoOp::Stat, source: std::io::Error::from(std::io::ErrorKind::InvalidInput) })?;
    // SAFETY: statvfs writes only into the zeroed struct we pass; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut st) } != 0 {
        return Err(StorageError::Io { op: IoOp::Stat, source: std::io::Error::last_os_error() });
    }
    Ok(st)
}

/// Device numbers repeat across hosts, so the id mixes in the host: its machine id, or, where
/// there is none (some containers), the kernel's boot id. Network namespaces share both, as
/// they share the file systems.
fn host_identity() -> u32 {
    static HOST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *HOST.get_or_init(|| {
        let id = std::fs::read("/etc/machine-id")
            .ok()
            .filter(|v| !v.trim_ascii().is_empty())
            .or_else(|| std::fs::read("/proc/sys/kernel/random/boot_id").ok())
            .unwrap_or_default();
        crc32c::crc32c(id.trim_ascii())
    })
}

fn fs_id(host: u32, device: u64) -> u64 {
    ((host as u64) << 32) | ((device as u32 as u64) ^ (device >> 32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_system_has_one_id_and_another_a_different_one() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir_in(a.path()).unwrap();
        let (sa, sb) = (of_dir(a.path()).unwrap(), of_dir(b.path()).unwrap());
        assert_eq!(sa.fs_id, sb.fs_id, "two directories of one file system");
        assert!(sa.size_bytes > 0 && sa.avail_bytes <= sa.size_bytes, "{sa:?}");
        // /proc is its own file system on every Linux host.
        assert_ne!(of_dir(Path::new("/proc")).unwrap().fs_id, sa.fs_id);
        assert_ne!(fs_id(1, 0x801), fs_id(2, 0x801), "the same device number on two hosts");
    }
}
