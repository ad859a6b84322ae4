//! What `df` shows: each OSD's capacity and use, and the file system under it.
//!
//! On the wire: a count, then per OSD its total and used bytes and an optional backing file
//! system (present = 1, then id, size and available bytes).

use crate::error::DecodeError;
use crate::limits::OSDS_MAX;
use crate::wire::{Reader, Writer};

/// One OSD's capacity and use (root information page), and its backing file system (the root's
/// backing page) where the OSD reports one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OsdUsage {
    /// Formatted capacity: fixed when the OSD's store was made.
    pub total_bytes: u64,
    /// Bytes the OSD's objects occupy.
    pub used_bytes: u64,
    pub fs: Option<FsSpace>,
}

/// The file system holding an OSD's store, as it was when asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsSpace {
    /// Equal for OSDs sharing one file system of one host.
    pub id: u64,
    pub size_bytes: u64,
    pub avail_bytes: u64,
}

impl OsdUsage {
    /// What the metadata server reports for an OSD that did not answer.
    pub const UNREACHABLE: OsdUsage = OsdUsage { total_bytes: u64::MAX, used_bytes: u64::MAX, fs: None };

    pub fn reachable(&self) -> bool {
        *self != Self::UNREACHABLE
    }

    /// Bytes this OSD can hold: its formatted capacity, and no more than its file system.
    pub fn space_bytes(&self) -> u64 {
        self.fs.map_or(self.total_bytes, |fs| fs.size_bytes.min(self.total_bytes))
    }

    /// Bytes a write can still use on this OSD: what its capacity leaves, and no more than
    /// its file system has free.
    pub fn avail_bytes(&self) -> u64 {
        let left = self.total_bytes.saturating_sub(self.used_bytes);
        self.fs.map_or(left, |fs| left.min(fs.avail_bytes))
    }

    /// Under [`FULL_BELOW_PERCENT`] of its space free.
    pub fn is_full(&self) -> bool {
        (self.avail_bytes() as u128) * 100 < (self.space_bytes() as u128) * FULL_BELOW_PERCENT as u128
    }
}

/// An OSD with less than this share of its space free is full: metadata servers place new
/// files on the other OSDs while they have room (as Lustre's allocator passes over a full OST).
pub const FULL_BELOW_PERCENT: u64 = 1;

/// Bytes of the smallest entry: total, used, and an absent file system.
const ENTRY_LEN_MIN: usize = 8 + 8 + 1;

pub fn encode_usage(usage: &[OsdUsage], w: &mut Writer) {
    w.count(usage.len(), OSDS_MAX);
    for u in usage {
        w.u64(u.total_bytes);
        w.u64(u.used_bytes);
        w.option(&u.fs, |w, fs| {
            w.u64(fs.id);
            w.u64(fs.size_bytes);
            w.u64(fs.avail_bytes);
        });
    }
}

pub fn decode_usage(r: &mut Reader) -> Result<Vec<OsdUsage>, DecodeError> {
    let n = r.count("OSD usage entries", OSDS_MAX, ENTRY_LEN_MIN)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let (total_bytes, used_bytes) = (r.u64()?, r.u64()?);
        let fs = r.option(|r| Ok(FsSpace { id: r.u64()?, size_bytes: r.u64()?, avail_bytes: r.u64()? }))?;
        out.push(OsdUsage { total_bytes, used_bytes, fs });
    }
    Ok(out)
}
