//! [`Caller`]: who sends a request. Every request frame carries one (frame.rs), and the metadata
//! server checks directory and file modes against it (`tessera-mds`'s `access.rs`).
//!
//! On its own a caller is a claim, as the ids of NFS's AUTH_SYS are. A cluster with a user key
//! makes each connection prove its caller first (`identity.rs`), and its servers then answer a
//! frame only when it names the caller proven (docs/security.md, "Proof of users").
//!
//! ```text
//! 0  uid (4)   4  gid (4)   8  group count (1)   9  groups (4 each, at most GROUPS_MAX)
//! ```

use crate::error::DecodeError;
use crate::limits::GROUPS_MAX;
use crate::wire::{Reader, Writer};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Caller {
    pub uid: u32,
    /// The primary group (the effective gid).
    pub gid: u32,
    /// Supplementary groups, at most [`GROUPS_MAX`].
    pub groups: Vec<u32>,
}

impl Caller {
    /// The superuser: passes every directory check and may change any inode's owner.
    pub const ROOT: Caller = Caller { uid: 0, gid: 0, groups: Vec::new() };

    /// A user with one group and no supplementary ones.
    pub fn user(uid: u32, gid: u32) -> Caller {
        Caller { uid, gid, groups: Vec::new() }
    }

    /// This process's effective ids and supplementary groups, as they were when first asked
    /// (read once: every connection a client opens sends them). A process in more than
    /// [`GROUPS_MAX`] groups is sent with the first of them: the server then grants less, never
    /// more, than the process's groups would.
    pub fn of_process() -> Caller {
        static PROCESS: std::sync::OnceLock<Caller> = std::sync::OnceLock::new();
        PROCESS.get_or_init(Self::read_process).clone()
    }

    fn read_process() -> Caller {
        // SAFETY: geteuid/getegid cannot fail; getgroups writes at most `len` entries and
        // returns how many it wrote, or -1 (then no supplementary group is sent).
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut all = vec![0 as libc::gid_t; 65_536];
        let n = unsafe { libc::getgroups(all.len() as libc::c_int, all.as_mut_ptr()) };
        all.truncate(n.max(0) as usize);
        all.retain(|&g| g != gid);
        all.truncate(GROUPS_MAX);
        Caller { uid, gid, groups: all }
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// The r/w/x bits (4, 2, 1) of the class the caller falls in for an inode owned by
    /// `uid`:`gid`: the owner's, else the group's, else the others'. The first class that
    /// matches decides, even when it has fewer bits than the next.
    pub fn class_bits(&self, uid: u32, gid: u32, mode: u32) -> u32 {
        if self.uid == uid {
            (mode >> 6) & 7
        } else if self.in_group(gid) {
            (mode >> 3) & 7
        } else {
            mode & 7
        }
    }

    /// What the caller may do with a file's data, as r/w/x bits: its class's, or for the
    /// superuser every bit some class has (as Linux treats execute for root), so `chmod a-w`
    /// still stops root's writes. The metadata server grants capabilities by these.
    pub fn data_bits(&self, uid: u32, gid: u32, mode: u32) -> u32 {
        match self.is_root() {
            true => (mode | mode >> 3 | mode >> 6) & 7,
            false => self.class_bits(uid, gid, mode),
        }
    }

    /// Whether a write by this caller takes the privilege bits off a file of `mode`
    /// ([`crate::mode::without_privileges`]); the superuser's keeps them, as Linux's
    /// CAP_FSETID does.
    pub fn write_drops_privileges(&self, mode: u32) -> bool {
        !self.is_root() && crate::mode::without_privileges(mode) != mode
    }

    /// Whether `gid` is the caller's primary or one of its supplementary groups.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    pub fn encode(&self, w: &mut Writer) {
        assert!(self.groups.len() <= GROUPS_MAX, "{} groups over GROUPS_MAX", self.groups.len());
        w.u32(self.uid);
        w.u32(self.gid);
        w.u8(self.groups.len() as u8);
        for &g in &self.groups {
            w.u32(g);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Caller, DecodeError> {
        let uid = r.u32()?;
        let gid = r.u32()?;
        let at = r.position();
        let count = r.u8()? as usize;
        if count > GROUPS_MAX {
            return Err(DecodeError::TooLong { what: "group count", value: count as u64, max: GROUPS_MAX as u64, at });
        }
        let groups = (0..count).map(|_| r.u32()).collect::<Result<_, _>>()?;
        Ok(Caller { uid, gid, groups })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_round_trips_and_too_many_groups_are_refused() {
        let c = Caller { uid: 1000, gid: 100, groups: vec![4, 27, 1001] };
        let mut w = Writer::default();
        c.encode(&mut w);
        assert_eq!(w.buf.len(), 9 + 12);
        assert_eq!(Caller::decode(&mut Reader::new(&w.buf)), Ok(c));
        let mut hostile = vec![0u8; 8];
        hostile.push(GROUPS_MAX as u8 + 1);
        hostile.extend(std::iter::repeat_n(0u8, 4 * (GROUPS_MAX + 1)));
        assert!(matches!(Caller::decode(&mut Reader::new(&hostile)), Err(DecodeError::TooLong { what: "group count", .. })));
        let short = [0u8, 0, 0, 1, 0, 0, 0, 1, 2, 0, 0, 0, 5];
        assert!(matches!(Caller::decode(&mut Reader::new(&short)), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn this_process_is_described_without_its_primary_group_twice() {
        let me = Caller::of_process();
        // SAFETY: as in of_process.
        assert_eq!(me.uid, unsafe { libc::geteuid() });
        assert!(!me.groups.contains(&me.gid));
        assert!(me.groups.len() <= GROUPS_MAX);
    }
}
