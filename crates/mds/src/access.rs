//! Who may do what: POSIX's permission rules on an inode's owner, group and mode bits, against
//! the [`Caller`] a request names. Pure functions of rows; `server/authorize.rs` reads the rows
//! and applies them to each request.
//!
//! The superuser passes every directory check and every owner check, as Linux's
//! CAP_DAC_OVERRIDE and CAP_FOWNER do. For a file's data it is granted a read or write bit when
//! any of the three classes has it (as Linux treats execute for root), so `chmod a-w` still
//! stops root's writes, the rule capabilities enforced before users were known.

use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::mode::{without_privileges, SETGID, STICKY};
use tessera_mds_proto::{Attr, Caller, FileType, FsError, SetAttrs};

use crate::store::InodeRow;

/// An inode's owner, group and mode, as a stored row, another server's attributes or the
/// parent facts creates keep give them.
pub trait Owned {
    /// (uid, gid, mode)
    fn owner(&self) -> (u32, u32, u32);
}

impl Owned for InodeRow {
    fn owner(&self) -> (u32, u32, u32) {
        (self.uid, self.gid, self.mode)
    }
}

impl Owned for Attr {
    fn owner(&self) -> (u32, u32, u32) {
        (self.uid, self.gid, self.mode)
    }
}

/// Permission bits in one class's position (r, w, x).
pub const READ: u32 = 4;
pub const WRITE: u32 = 2;
/// Execute, or search for a directory: what walking through it needs.
pub const SEARCH: u32 = 1;

fn class_bits(caller: &Caller, inode: &impl Owned) -> u32 {
    let (uid, gid, mode) = inode.owner();
    caller.class_bits(uid, gid, mode)
}

/// What `caller` may do with a file's data, as r/w/x bits ([`Caller::data_bits`]): the
/// capabilities the metadata server grants for its objects follow them.
pub fn file_bits(caller: &Caller, inode: &impl Owned) -> u32 {
    let (uid, gid, mode) = inode.owner();
    caller.data_bits(uid, gid, mode)
}

/// EACCES unless `caller` has every bit of `want` on the inode (the superuser always has).
pub fn check(caller: &Caller, inode: &impl Owned, want: u32) -> Result<(), FsError> {
    match caller.is_root() || class_bits(caller, inode) & want == want {
        true => Ok(()),
        false => Err(FsError::Access),
    }
}

/// EPERM unless `caller` owns the inode or is the superuser: what chmod and utimes need.
pub fn owns(caller: &Caller, inode: &impl Owned) -> Result<(), FsError> {
    match caller.is_root() || caller.uid == inode.owner().0 {
        true => Ok(()),
        false => Err(FsError::NotPermitted),
    }
}

/// Whether a sticky directory lets `caller` remove or rename an entry owned by `entry_uid`
/// (write and search permission on the directory are checked apart).
pub fn sticky_allows(caller: &Caller, dir: &impl Owned, entry_uid: u32) -> bool {
    let (uid, _, mode) = dir.owner();
    mode & STICKY == 0 || caller.is_root() || caller.uid == uid || caller.uid == entry_uid
}

/// Whether the sticky rule needs the entry's owner at all.
pub fn sticky_applies(caller: &Caller, dir: &impl Owned) -> bool {
    !sticky_allows(caller, dir, u32::MAX)
}

/// A new inode may be owned by its caller and one of the caller's groups; only the superuser
/// makes inodes for others (`tessera mv` between servers keeps a tree's owners that way).
pub fn new_owner(caller: &Caller, new: &NewInode) -> Result<(), FsError> {
    match caller.is_root() || (new.uid == caller.uid && caller.in_group(new.gid)) {
        true => Ok(()),
        false => Err(FsError::NotPermitted),
    }
}

/// What a new inode in `parent` gets: in a setgid directory (mode 2000) the directory's group
/// instead of its creator's, and a new subdirectory the setgid bit too, so a project
/// directory's tree stays the project's group (Linux's inode_init_owner).
pub fn inherited(parent: &impl Owned, new: &NewInode, kind: FileType) -> NewInode {
    let (_, gid, mode) = parent.owner();
    match mode & SETGID {
        0 => *new,
        _ => NewInode { gid, mode: if kind == FileType::Directory { new.mode | SETGID } else { new.mode }, ..*new },
    }
}

/// chmod, chown and utimes, as Linux's setattr allows them: the mode and the times by the owner;
/// the owner only by the superuser (a change to the same owner is no change); the group by the
/// owner to one of its own groups. The superuser may do all of it.
pub fn setattr(caller: &Caller, row: &impl Owned, changes: &SetAttrs) -> Result<(), FsError> {
    if caller.is_root() {
        return Ok(());
    }
    let (owner, group, _) = row.owner();
    let gives_away = changes.uid.is_some_and(|uid| uid != owner);
    let regroups = changes.gid.is_some_and(|gid| gid != group);
    if gives_away || (regroups && !changes.gid.is_some_and(|gid| caller.in_group(gid))) {
        return Err(FsError::NotPermitted);
    }
    if changes.mode.is_some() || changes.atime.is_some() || changes.mtime.is_some() || regroups {
        owns(caller, row)?;
    }
    // What a writer may do to a file it does not own: stamp it with the time (touch), and
    // give up the privilege bits its write takes away.
    if changes.times_to_now || changes.drop_privileges {
        owns(caller, row).or_else(|_| check(caller, row, WRITE))?;
    }
    Ok(())
}

/// The mode `changes` leave on an inode of `kind`, after the rules Linux applies to the
/// privilege bits, for every caller the superuser included unless said otherwise:
/// - a change of owner or group of anything but a directory clears setuid, and setgid where
///   group execute is set, so a file cannot keep running as someone it no longer belongs to;
/// - `drop_privileges` clears the same bits (what a write does);
/// - a mode given outright is taken as given, except that a caller other than the superuser
///   who is not in the file's (new) group loses the setgid bit, without an error, as chmod(2)
///   says.
pub fn mode_after(caller: &Caller, row: &impl Owned, kind: FileType, changes: &SetAttrs) -> u32 {
    let (_, gid, mut mode) = row.owner();
    let owner_changes = changes.uid.is_some() || changes.gid.is_some();
    if changes.drop_privileges || (owner_changes && kind != FileType::Directory) {
        mode = without_privileges(mode);
    }
    if let Some(given) = changes.mode {
        mode = given;
        if !caller.is_root() && !caller.in_group(changes.gid.unwrap_or(gid)) {
            mode &= !SETGID;
        }
    }
    mode
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_mds_proto::{FileType, InodeId, Timespec};

    fn row(uid: u32, gid: u32, mode: u32) -> InodeRow {
        let t = Timespec { secs: 0, nanos: 0 };
        InodeRow { ino: InodeId(2), kind: FileType::Directory, mode, uid, gid, atime: t, mtime: t, ctime: t, parent: InodeId::ROOT, symlink: None, subdirs: 0 }
    }

    const ALICE: fn() -> Caller = || Caller { uid: 1000, gid: 1000, groups: vec![50] };

    #[test]
    fn the_class_is_owner_then_group_then_other_and_the_first_match_decides() {
        let alice = ALICE();
        assert_eq!(check(&alice, &row(1000, 7, 0o077), READ), Err(FsError::Access), "an owner without bits is refused, whatever the others have");
        assert_eq!(check(&alice, &row(1, 50, 0o740), READ), Ok(()), "a supplementary group counts");
        assert_eq!(check(&alice, &row(1, 1000, 0o704), READ), Err(FsError::Access), "a group without bits is refused, whatever other has");
        assert_eq!(check(&alice, &row(1, 2, 0o003), WRITE | SEARCH), Ok(()));
        assert_eq!(check(&alice, &row(1, 2, 0o002), WRITE | SEARCH), Err(FsError::Access), "every wanted bit is needed");
        assert_eq!(check(&Caller::ROOT, &row(1, 2, 0o000), READ | WRITE | SEARCH), Ok(()));
    }

    #[test]
    fn the_superuser_gets_a_data_bit_that_any_class_has() {
        assert_eq!(file_bits(&Caller::ROOT, &row(1, 2, 0o004)), READ);
        assert_eq!(file_bits(&Caller::ROOT, &row(1, 2, 0o444)), READ, "no class may write, so root may not either");
        assert_eq!(file_bits(&ALICE(), &row(1000, 2, 0o466)), READ);
    }

    #[test]
    fn only_owners_change_modes_and_times_and_only_root_gives_files_away() {
        let alice = ALICE();
        let mine = row(1000, 1000, 0o644);
        let bobs = row(2000, 2000, 0o666);
        let mode = SetAttrs { mode: Some(0o600), ..SetAttrs::default() };
        assert_eq!(setattr(&alice, &mine, &mode), Ok(()));
        assert_eq!(setattr(&alice, &bobs, &mode), Err(FsError::NotPermitted), "write permission is not ownership");
        let times = SetAttrs { mtime: Some(Timespec { secs: 5, nanos: 0 }), ..SetAttrs::default() };
        assert_eq!(setattr(&alice, &bobs, &times), Err(FsError::NotPermitted));
        assert_eq!(setattr(&alice, &mine, &SetAttrs { uid: Some(2000), ..SetAttrs::default() }), Err(FsError::NotPermitted));
        assert_eq!(setattr(&alice, &mine, &SetAttrs { uid: Some(1000), ..SetAttrs::default() }), Ok(()), "chown to oneself changes nothing");
        assert_eq!(setattr(&alice, &mine, &SetAttrs { gid: Some(50), ..SetAttrs::default() }), Ok(()));
        assert_eq!(setattr(&alice, &mine, &SetAttrs { gid: Some(51), ..SetAttrs::default() }), Err(FsError::NotPermitted));
        assert_eq!(setattr(&alice, &bobs, &SetAttrs { gid: Some(50), ..SetAttrs::default() }), Err(FsError::NotPermitted));
        assert_eq!(setattr(&Caller::ROOT, &bobs, &SetAttrs { uid: Some(1), gid: Some(1), ..mode }), Ok(()));
    }

    #[test]
    fn a_writer_may_stamp_the_time_and_give_up_privilege_bits_but_not_set_times() {
        let alice = ALICE();
        let shared = row(2000, 50, 0o664);
        let now = SetAttrs { times_to_now: true, ..SetAttrs::default() };
        let drop = SetAttrs { drop_privileges: true, ..SetAttrs::default() };
        assert_eq!(setattr(&alice, &shared, &now), Ok(()), "group write permission lets touch stamp the time");
        assert_eq!(setattr(&alice, &shared, &drop), Ok(()));
        assert_eq!(setattr(&alice, &row(2000, 51, 0o664), &now), Err(FsError::Access), "neither owner nor writer");
        assert_eq!(setattr(&alice, &row(2000, 51, 0o664), &drop), Err(FsError::Access));
        assert_eq!(setattr(&alice, &row(1000, 51, 0o444), &now), Ok(()), "the owner needs no write permission");
        let given = SetAttrs { mtime: Some(Timespec { secs: 5, nanos: 0 }), ..SetAttrs::default() };
        assert_eq!(setattr(&alice, &shared, &given), Err(FsError::NotPermitted), "a time of one's choosing needs ownership");
    }

    #[test]
    fn privilege_bits_go_with_a_change_of_owner_a_write_or_a_group_one_is_not_in() {
        let alice = ALICE();
        let file = |mode| InodeRow { kind: FileType::Regular, ..row(1000, 1000, mode) };
        let chown = SetAttrs { uid: Some(1000), ..SetAttrs::default() };
        let chgrp = SetAttrs { gid: Some(50), ..SetAttrs::default() };
        let drop = SetAttrs { drop_privileges: true, ..SetAttrs::default() };
        let mode_after = |caller: &Caller, r: &InodeRow, c: &SetAttrs| mode_after(caller, r, r.kind, c);
        assert_eq!(mode_after(&Caller::ROOT, &file(0o6755), &chown), 0o0755, "even the superuser's chown clears them");
        assert_eq!(mode_after(&alice, &file(0o6745), &chgrp), 0o2745, "setgid without group execute stays");
        assert_eq!(mode_after(&alice, &row(1000, 1000, 0o6755), &chgrp), 0o6755, "a directory keeps its bits");
        assert_eq!(mode_after(&alice, &file(0o4755), &drop), 0o0755);
        assert_eq!(mode_after(&alice, &file(0o2755), &drop), 0o0755);
        assert_eq!(mode_after(&alice, &file(0o2745), &drop), 0o2745);
        assert_eq!(mode_after(&alice, &file(0o755), &SetAttrs { mode: Some(0o2755), ..SetAttrs::default() }), 0o2755, "in its own group");
        assert_eq!(mode_after(&alice, &InodeRow { gid: 51, ..file(0o755) }, &SetAttrs { mode: Some(0o6755), ..SetAttrs::default() }), 0o4755, "not in the file's group: setgid dropped");
        assert_eq!(mode_after(&alice, &InodeRow { gid: 51, ..file(0o755) }, &SetAttrs { mode: Some(0o2755), gid: Some(50), ..SetAttrs::default() }), 0o2755, "the new group counts");
        assert_eq!(mode_after(&Caller::ROOT, &InodeRow { gid: 51, ..file(0o755) }, &SetAttrs { mode: Some(0o2755), ..SetAttrs::default() }), 0o2755);
        assert_eq!(mode_after(&Caller::ROOT, &file(0o6755), &SetAttrs { uid: Some(1), mode: Some(0o6755), ..SetAttrs::default() }), 0o6755, "a mode given with the chown is taken as given");
        assert!(alice.write_drops_privileges(0o4644) && alice.write_drops_privileges(0o2754));
        assert!(!alice.write_drops_privileges(0o2744) && !Caller::ROOT.write_drops_privileges(0o4755));
    }

    #[test]
    fn a_sticky_directory_keeps_others_from_removing_an_entry() {
        let alice = ALICE();
        let tmp = row(0, 0, 0o1777);
        assert!(sticky_allows(&alice, &tmp, 1000));
        assert!(!sticky_allows(&alice, &tmp, 2000));
        assert!(sticky_applies(&alice, &tmp));
        assert!(!sticky_applies(&alice, &row(1000, 0, 0o1777)), "the directory's owner may remove anything in it");
        assert!(!sticky_applies(&alice, &row(0, 0, 0o777)));
        assert!(!sticky_applies(&Caller::ROOT, &tmp));
    }

    #[test]
    fn a_setgid_directory_gives_new_entries_its_group_and_subdirectories_its_bit() {
        let new = NewInode { mode: 0o755, uid: 1000, gid: 1000 };
        let project = row(0, 50, 0o2775);
        assert_eq!(inherited(&project, &new, FileType::Regular), NewInode { mode: 0o755, uid: 1000, gid: 50 });
        assert_eq!(inherited(&project, &new, FileType::Directory), NewInode { mode: 0o2755, uid: 1000, gid: 50 });
        assert_eq!(inherited(&row(0, 50, 0o775), &new, FileType::Directory), new, "no setgid bit, no inheritance");
    }

    #[test]
    fn new_inodes_belong_to_their_caller() {
        let alice = ALICE();
        assert_eq!(new_owner(&alice, &NewInode { mode: 0o644, uid: 1000, gid: 50 }), Ok(()));
        assert_eq!(new_owner(&alice, &NewInode { mode: 0o644, uid: 0, gid: 1000 }), Err(FsError::NotPermitted));
        assert_eq!(new_owner(&alice, &NewInode { mode: 0o644, uid: 1000, gid: 0 }), Err(FsError::NotPermitted));
        assert_eq!(new_owner(&Caller::ROOT, &NewInode { mode: 0o644, uid: 1000, gid: 0 }), Ok(()));
    }
}
