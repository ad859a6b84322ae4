//! Path syntax: `/`-separated names from the root. Empty components and `.` are skipped, `..`
//! goes to the parent (the root is its own parent). Relative paths are taken from the root:
//! the library has no working directory. As in POSIX pathname resolution, a path ending in
//! `/` (or `/.`, `/..`) names a directory: `stat("file/")` is ENOTDIR, `create("new/")` EISDIR.

use tessera_mds_proto::limits::NAME_LEN_MAX;
use tessera_mds_proto::FsError;

use crate::error::ClientError;

/// One step of a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    Name(&'a str),
    Parent,
}

/// The steps of `path` from the root.
pub fn steps(path: &str) -> impl Iterator<Item = Step<'_>> {
    path.split('/').filter(|c| !c.is_empty() && *c != ".").map(|c| if c == ".." { Step::Parent } else { Step::Name(c) })
}

/// One step of a walk that may follow symlinks, owning its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Component {
    Name(String),
    Parent,
}

/// The steps of `path`, last first (a stack to pop from).
pub fn components(path: &str) -> Vec<Component> {
    let mut out: Vec<Component> =
        steps(path).map(|s| match s { Step::Name(name) => Component::Name(name.to_string()), Step::Parent => Component::Parent }).collect();
    out.reverse();
    out
}

/// The names of `path` from the root with `.` and `..` applied as text, as `realpath -s`
/// does: the directories a walk passes when none of them is reached through a symlink.
pub fn normalized(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for step in steps(path) {
        match step {
            Step::Name(name) => out.push(name),
            Step::Parent => {
                out.pop();
            }
        }
    }
    out
}

/// Whether `path` can only name a directory: its last component is empty, `.` or `..`.
pub fn names_dir(path: &str) -> bool {
    matches!(path.rsplit('/').next(), Some("" | "." | "..")) && path.contains('/')
}

/// Splits `path` into (parent path, final name) for an operation that makes or removes an
/// entry. The final component must be a real name: `/`, `.` and `..` are refused with EINVAL.
pub fn split_parent<'a>(op: &'static str, path: &'a str) -> Result<(&'a str, &'a str), ClientError> {
    let trimmed = path.trim_end_matches('/');
    let (parent, name) = match trimmed.rfind('/') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => ("", trimmed),
    };
    if path.is_empty() {
        return Err(ClientError::Fs { op, path: String::new(), source: FsError::NotFound }); // as POSIX has it for an empty pathname
    }
    check_name(op, path, name)?;
    Ok((parent, name))
}

/// A name an entry may have: not empty, `.` or `..`, no `/`, at most [`NAME_LEN_MAX`] bytes.
/// `path` labels the error.
pub fn check_name(op: &'static str, path: &str, name: &str) -> Result<(), ClientError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(ClientError::Fs { op, path: path.to_string(), source: FsError::Invalid });
    }
    if name.len() > NAME_LEN_MAX {
        return Err(ClientError::Fs { op, path: path.to_string(), source: FsError::NameTooLong });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_split() {
        assert_eq!(steps("/a//./b/../c/").collect::<Vec<_>>(), vec![Step::Name("a"), Step::Name("b"), Step::Parent, Step::Name("c")]);
        assert_eq!(steps("/").count(), 0);
        assert_eq!(split_parent("mkdir", "/a/b/").unwrap(), ("/a", "b"));
        assert_eq!(split_parent("mkdir", "top").unwrap(), ("", "top"));
        assert_eq!(split_parent("mkdir", "/").unwrap_err().fs_error(), Some(FsError::Invalid));
        assert_eq!(split_parent("mkdir", "/a/..").unwrap_err().fs_error(), Some(FsError::Invalid));
        assert_eq!(normalized("/a/./b/../../c/d/.."), vec!["c"]);
        assert_eq!(components("a/../b/"), vec![Component::Name("b".into()), Component::Parent, Component::Name("a".into())]);
        assert!(normalized("/../..").is_empty());
        assert!(names_dir("/a/") && names_dir("/a/.") && names_dir("a/..") && names_dir("/"));
        assert!(!names_dir("/a") && !names_dir("a") && !names_dir("") && !names_dir("/a/.b"));
        let long = format!("/{}", "x".repeat(NAME_LEN_MAX + 1));
        assert_eq!(split_parent("create", &long).unwrap_err().fs_error(), Some(FsError::NameTooLong));
    }
}
