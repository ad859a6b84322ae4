//! The daemons' file descriptor budget. Every client connection costs a daemon descriptors (a
//! metadata server one socket per client process; an OSD a few per iSCSI session), and Linux
//! starts processes with a soft limit of 1,024 whatever the hard limit allows. So each daemon
//! raises its soft limit to its hard one at start, as servers do, and serves as many
//! connections as the descriptors it then has allow, keeping some for its own files.

use anyhow::{Context, Result};

/// Descriptors a daemon keeps for its own files: the store (SQLite, object files and
/// mappings), its sessions to the OSDs, its logs.
pub const DESCRIPTORS_KEPT: u64 = 512;

/// The most descriptors a daemon asks for: past this, connections are bounded by memory and
/// threads, not descriptors.
const WANTED: u64 = 1 << 20;

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit (at most [`WANTED`]); returns
/// the soft limit now in effect.
pub fn raise() -> Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid out-pointer to an rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error()).context("reading this process's file descriptor limit");
    }
    let wanted = limit.rlim_max.min(WANTED);
    if limit.rlim_cur < wanted {
        let raised = libc::rlimit { rlim_cur: wanted, rlim_max: limit.rlim_max };
        // SAFETY: a valid rlimit; lowering nothing, raising the soft limit within the hard one.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            tracing::warn!(soft = limit.rlim_cur, hard = limit.rlim_max, error = %std::io::Error::last_os_error(), "cannot raise the file descriptor limit");
            return Ok(limit.rlim_cur);
        }
        return Ok(wanted);
    }
    Ok(limit.rlim_cur)
}

/// Connections `limit` descriptors allow at `per_connection` each, keeping `kept` (or half the
/// limit, if less) for the daemon's own files; at most `ceiling`, at least one.
pub fn connections(limit: u64, kept: u64, per_connection: u64, ceiling: usize) -> usize {
    let spare = limit.saturating_sub(kept.min(limit / 2));
    let allowed = spare / per_connection.max(1);
    (allowed.min(ceiling as u64) as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roomy_limit_gives_the_ceiling_and_a_small_one_keeps_half_for_the_daemon() {
        assert_eq!(connections(1 << 20, 512, 4, 4096), 4096);
        assert_eq!(connections(20_000, 512, 1, 16_384), 16_384);
        assert_eq!(connections(1024, 512, 1, 16_384), 512);
        assert_eq!(connections(1024, 512, 4, 4096), 128);
        assert_eq!(connections(64, 512, 4, 4096), 8);
        assert_eq!(connections(0, 512, 4, 4096), 1);
    }

    #[test]
    fn raising_never_lowers_the_limit() {
        let mut before = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) }, 0);
        let now = raise().unwrap();
        assert!(now >= before.rlim_cur && now <= before.rlim_max);
    }
}
