//! The special bits of a file's mode, and the rule for when they stop applying. Both ends use
//! it: the metadata server when it changes a mode, the client to know that its first write to
//! a file must first clear them (the OSDs that take the write never see the mode).

/// The file runs as its owner.
pub const SETUID: u32 = 0o4000;
/// On a file with group execute, it runs with the file's group; on a directory, new entries
/// take the directory's group.
pub const SETGID: u32 = 0o2000;
/// On a directory, only an entry's owner, the directory's owner or the superuser may remove or
/// rename the entry (/tmp).
pub const STICKY: u32 = 0o1000;
/// Group execute, which makes a file's setgid bit take effect.
pub const GROUP_EXECUTE: u32 = 0o010;

/// `mode` without the bits that make a file run as someone else: setuid, and setgid where
/// group execute is set (without it, setgid has no effect and stays).
pub fn without_privileges(mode: u32) -> u32 {
    match mode & GROUP_EXECUTE {
        0 => mode & !SETUID,
        _ => mode & !(SETUID | SETGID),
    }
}
