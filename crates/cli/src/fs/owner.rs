//! `chown OWNER[:GROUP]`: set files' owner and group, as chown(1). Tessera stores numeric
//! ids; names are looked up in this host's user database, as an NFS client maps them.

use std::ffi::CString;

use anyhow::Result;
use clap::Args;
use tessera_client::{Attr, FileType, SetAttrs};

use super::{each_path, ClusterArg};

#[derive(Args)]
pub struct ChownArgs {
    /// `OWNER`, `OWNER:GROUP`, `OWNER:` (the owner's login group) or `:GROUP`; each a number or
    /// a name from this host's user and group database.
    #[arg(value_parser = Owner::parse)]
    owner: Owner,
    /// Files or directories (a symbolic link is followed to what it names).
    #[arg(required = true)]
    paths: Vec<String>,
    /// Change everything below each directory too, parents before their contents; symbolic
    /// links inside are changed themselves, not what they name, as chown(1) -R changes them.
    #[arg(short = 'R', long)]
    recursive: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

/// The ids a `chown` sets; `None` leaves one as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

impl Owner {
    pub fn parse(text: &str) -> Result<Owner, String> {
        let (user, group) = match text.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (text, None),
        };
        let uid = match user {
            "" => None,
            name => Some(user_id(name)?),
        };
        let gid = match group {
            None | Some("") if uid.is_none() => return Err(format!("`{text}`: give an owner, a group (:GROUP), or both")),
            None => None,
            Some("") => Some(login_group(user)?), // `OWNER:`, as chown(1)
            Some(name) => Some(group_id(name)?),
        };
        Ok(Owner { uid, gid })
    }
}

fn user_id(name: &str) -> Result<u32, String> {
    match numeric_id(name, "user")? {
        Some(n) => Ok(n),
        None => passwd_entry(name).map(|(uid, _)| uid),
    }
}

/// `name` as an id when it is all digits; 4294967295 is (uid_t)-1, "no change" to chown(2),
/// and no id, as chown(1) refuses it.
fn numeric_id(name: &str, what: &str) -> Result<Option<u32>, String> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(None);
    }
    match name.parse::<u32>() {
        Ok(n) if n != u32::MAX => Ok(Some(n)),
        _ => Err(format!("invalid {what} id `{name}`: ids go from 0 to {}", u32::MAX - 1)),
    }
}

fn login_group(name: &str) -> Result<u32, String> {
    if name.parse::<u32>().is_ok() {
        return Err(format!("`{name}:`: a numeric owner has no login group to take; give the group"));
    }
    passwd_entry(name).map(|(_, gid)| gid)
}

fn passwd_entry(name: &str) -> Result<(u32, u32), String> {
    let c = CString::new(name).map_err(|_| format!("`{name}` is not a user name"))?;
    // SAFETY: getpwnam reads the database into static storage, copied out at once; this
    // command parses its arguments on one thread.
    let entry = unsafe { libc::getpwnam(c.as_ptr()) };
    if entry.is_null() {
        return Err(format!("no user `{name}` on this host (give a number to set it anyway)"));
    }
    // SAFETY: non-null, and valid until the next getpw* call.
    Ok(unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

fn group_id(name: &str) -> Result<u32, String> {
    if let Some(n) = numeric_id(name, "group")? {
        return Ok(n);
    }
    let c = CString::new(name).map_err(|_| format!("`{name}` is not a group name"))?;
    // SAFETY: as in `passwd_entry`.
    let entry = unsafe { libc::getgrnam(c.as_ptr()) };
    if entry.is_null() {
        return Err(format!("no group `{name}` on this host (give a number to set it anyway)"));
    }
    // SAFETY: non-null, and valid until the next getgr* call.
    Ok(unsafe { (*entry).gr_gid })
}

pub fn chown(args: ChownArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    each_path("chown", &args.paths, |path| {
        let changed = client.chown(path, args.owner.uid, args.owner.gid)?;
        if args.recursive && changed.file_type == FileType::Directory {
            let changes = |_: &Attr| SetAttrs { uid: args.owner.uid, gid: args.owner.gid, ..SetAttrs::default() };
            super::tree_attrs::below(&client, path, super::tree_attrs::Links::Change, &changes)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::Owner;

    #[test]
    fn owners_parse_as_chown_takes_them() {
        assert_eq!(Owner::parse("1000"), Ok(Owner { uid: Some(1000), gid: None }));
        assert_eq!(Owner::parse("1000:50"), Ok(Owner { uid: Some(1000), gid: Some(50) }));
        assert_eq!(Owner::parse(":50"), Ok(Owner { uid: None, gid: Some(50) }));
        assert_eq!(Owner::parse("root:root"), Ok(Owner { uid: Some(0), gid: Some(0) }));
        assert_eq!(Owner::parse("root:"), Ok(Owner { uid: Some(0), gid: Some(0) }), "the login group");
        assert!(Owner::parse(":").unwrap_err().contains("give an owner"));
        assert!(Owner::parse("").unwrap_err().contains("give an owner"));
        assert!(Owner::parse("no-such-user-here").unwrap_err().contains("no user"));
        assert!(Owner::parse("root:no-such-group-here").unwrap_err().contains("no group"));
        assert!(Owner::parse("7:").unwrap_err().contains("numeric owner"));
        assert_eq!(Owner::parse("4294967294:4294967294"), Ok(Owner { uid: Some(u32::MAX - 1), gid: Some(u32::MAX - 1) }));
        assert!(Owner::parse("4294967295").unwrap_err().contains("invalid user id"), "(uid_t)-1 is no id");
        assert!(Owner::parse(":4294967295").unwrap_err().contains("invalid group id"));
        assert!(Owner::parse("99999999999").unwrap_err().contains("ids go from 0 to 4294967294"));
    }
}
