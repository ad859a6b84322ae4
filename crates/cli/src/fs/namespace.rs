//! `ls`, `stat`, `mkdir`, `rm`, `mv`: namespace commands, answered by the metadata servers
//! alone (sizes come from the data objects' logical lengths, which the servers read).

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Result};
use clap::Args;
use tessera_client::{Attr, Client, Dir, FileType, FsError, InodeId};

use super::mode::{process_umask, ModeSpec};
use super::{each_path, ClusterArg};
use crate::report::ExitStatus;
use crate::units::{count, human_size};

/// `-h` is ls(1)'s human sizes, so help is `--help` alone.
#[derive(Args)]
#[command(disable_help_flag = true)]
pub struct LsArgs {
    /// Directories or files (default: the root). With several, each directory's listing is
    /// headed by its path, as ls(1) does.
    #[arg(default_value = "/")]
    paths: Vec<String>,
    /// Long listing: type and mode, links, owner, size, modification time.
    #[arg(short = 'l')]
    long: bool,
    /// With -l, sizes as 1.5K, 200M, 3.1G.
    #[arg(short = 'h', long = "human-readable")]
    human: bool,
    /// List directories themselves, not their contents.
    #[arg(short = 'd', long = "directory", conflicts_with = "recursive")]
    directory: bool,
    /// List subdirectories too, each under its path (symbolic links are not followed).
    #[arg(short = 'R', long = "recursive")]
    recursive: bool,
    /// Show entries whose names begin with `.` (hidden otherwise, as ls(1) does), and `.` and
    /// `..` too.
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Show entries whose names begin with `.`, without `.` and `..`.
    #[arg(short = 'A', long = "almost-all")]
    almost_all: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct StatArgs {
    /// Files, directories or links to describe.
    #[arg(required = true)]
    paths: Vec<String>,
    /// Follow a final symbolic link and show what it points to (without: the link itself,
    /// as stat(1)).
    #[arg(short = 'L', long = "dereference")]
    dereference: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct MkdirArgs {
    /// Directories to make (with -p, their missing parents too).
    #[arg(required = true)]
    paths: Vec<String>,
    /// Make parent directories as needed; no error if the directory exists.
    #[arg(short = 'p', long)]
    parents: bool,
    /// Permission bits of the directories made, as chmod(1) takes them, starting from a=rwx
    /// (e.g. 700, 1777, g+w). Without it: a=rwx less the umask. With -p only each path's last
    /// directory gets them; the parents made get the default with u+wx.
    #[arg(short = 'm', long, value_parser = ModeSpec::parse, allow_hyphen_values = true)]
    mode: Option<ModeSpec>,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct RmdirArgs {
    /// Empty directories to remove.
    #[arg(required = true)]
    paths: Vec<String>,
    /// Remove each path's ancestors too, as each becomes empty (`rmdir -p a/b/c` is
    /// `rmdir a/b/c a/b a`).
    #[arg(short = 'p', long)]
    parents: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct RmArgs {
    /// Paths to remove (with -f there may be none, as rm(1) allows, for scripts).
    #[arg(required_unless_present = "force")]
    paths: Vec<String>,
    /// Remove directories and their contents.
    #[arg(short = 'r', long)]
    recursive: bool,
    /// Ignore paths that do not exist.
    #[arg(short = 'f', long)]
    force: bool,
    /// With -r, allow a path that is the root, which empties the whole file system.
    #[arg(long)]
    no_preserve_root: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct ChmodArgs {
    /// The new permission bits as chmod(1) takes them: octal (644, 0444, 4755) or symbolic
    /// clauses joined by commas (u+x, go-w, a=rX, g=u; no class before the operator: all
    /// classes but the umask's bits). Under capability security a change on a file revokes
    /// every capability issued for it: open handles get fresh ones that follow the new bits
    /// (no write bit: writes are refused).
    #[arg(value_parser = ModeSpec::parse, allow_hyphen_values = true)]
    mode: ModeSpec,
    /// Files or directories (a symbolic link is followed to what it names).
    #[arg(required = true)]
    paths: Vec<String>,
    /// Change everything below each directory too, parents before their contents; symbolic
    /// links inside are left alone, as chmod(1) -R leaves them.
    #[arg(short = 'R', long)]
    recursive: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

pub fn chmod(args: ChmodArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let umask = process_umask();
    let mode_of = |attr: &Attr| args.mode.apply(attr.mode, attr.file_type == FileType::Directory, umask);
    each_path("chmod", &args.paths, |path| {
        let changed = client.chmod_with(path, mode_of)?;
        if args.recursive && changed.file_type == FileType::Directory {
            let changes = |attr: &Attr| tessera_client::SetAttrs { mode: Some(mode_of(attr)), ..Default::default() };
            super::tree_attrs::below(&client, path, super::tree_attrs::Links::Skip, &changes)?;
        }
        Ok(())
    })
}

pub fn ls(args: LsArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    // As ls(1): files first, then each directory's entries; a path that fails is reported and
    // the others are still listed, and the command then fails.
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let (mut failed, mut unreadable_operands) = (0, 0);
    for path in &args.paths {
        // `lookup`, not `stat`: a file whose OSD is down is listed with its size as `?`.
        // As ls(1), a symlink named here is listed as itself with -l or -d, and otherwise
        // followed: listed as a directory when it leads to one, refused when it loops, and
        // shown as itself when it dangles.
        let found = client.lookup(path).and_then(|a| match a.file_type {
            FileType::Directory if !args.directory => Ok(None),
            FileType::Symlink if !args.directory && !args.long => match client.lookup_followed(path) {
                Ok(t) if t.file_type == FileType::Directory => Ok(None),
                Err(e) if e.fs_error() == Some(FsError::Loop) => Err(e),
                _ => Ok(Some(a)),
            },
            _ => Ok(Some(a)),
        });
        match found {
            Ok(None) => dirs.push(path),
            Ok(Some(a)) => files.push((path.clone(), a)),
            // As GNU ls: a path named here that cannot be read is serious trouble (status 2),
            // a directory below one that cannot be listed a minor problem (status 1).
            Err(e) if args.paths.len() == 1 => return Err(ExitStatus { status: 2, message: e.to_string() }.into()),
            Err(e) => {
                eprintln!("tessera: ls: {e}");
                failed += 1;
                unreadable_operands += 1;
            }
        }
    }
    // Entries on a metadata server that did not answer: named, but with no attributes.
    let unknown = std::cell::Cell::new(0u64);
    // Files whose size is unknown (`?`): an OSD holding their data did not answer.
    let sizeless = std::cell::Cell::new(0u64);
    let print = |entries: Vec<(String, Attr)>, dir: Option<&str>| {
        for (name, attr) in entries {
            if args.long && !attr.known() {
                // As ls(1) shows an entry it cannot stat: its type, and `?` for the rest.
                unknown.set(unknown.get() + 1);
                println!("{}?????????   ?     ?     ? {:>12} {:>16} {name}", &mode_string(&attr)[..1], "?", "?");
            } else if args.long {
                // `?`: an OSD holding the file did not answer, so its size is unknown.
                let size = match (attr.size_known(), args.human) {
                    (false, _) => {
                        sizeless.set(sizeless.get() + 1);
                        "?".to_string()
                    }
                    (true, true) => human_size(attr.size),
                    (true, false) => attr.size.to_string(),
                };
                let link = match attr.file_type {
                    FileType::Symlink => {
                        let at = dir.map_or(name.clone(), |d| format!("{}/{name}", d.trim_end_matches('/')));
                        format!(" -> {}", client.readlink(&at).unwrap_or_else(|_| "?".into()))
                    }
                    _ => String::new(),
                };
                println!("{} {:>3} {:>5} {:>5} {:>12} {} {name}{link}", mode_string(&attr), attr.nlink, attr.uid, attr.gid, size, time_string(attr.mtime.secs));
            } else {
                println!("{name}");
            }
        }
    };
    let headed = args.paths.len() > 1 || args.recursive;
    let had_files = !files.is_empty();
    print(files, None);
    // Directories still to list, next last; with -R each one's subdirectories go next, in
    // name order, as ls -R walks.
    // A subdirectory is listed through a handle from its parent's listing (`Dir`): no walk
    // from the root, which would make a deep tree cost d²/2 lookups.
    let mut pending: Vec<(String, Option<Dir>)> = dirs.into_iter().rev().map(|d| (d.clone(), None)).collect();
    let mut listed = 0;
    while let Some((dir, handle)) = pending.pop() {
        // A directory named on the command line has no handle yet; one found by -R has.
        let operand = handle.is_none();
        let handle = match handle {
            Some(h) => Ok(h),
            None => client.open_dir(&dir),
        };
        match handle.and_then(|h| Ok((listing(&client, &dir, &h, &args)?, h))).map_err(super::vanished) {
            Ok((entries, handle)) => {
                if headed {
                    let gap = if listed > 0 || had_files { "\n" } else { "" };
                    println!("{gap}{dir}:");
                }
                listed += 1;
                if args.recursive {
                    let subdirs = entries.iter().filter(|(name, a)| a.file_type == FileType::Directory && name != "." && name != "..");
                    let next: Vec<(String, Option<Dir>)> =
                        subdirs.map(|(name, a)| (format!("{}/{name}", dir.trim_end_matches('/')), handle.entered(name, a).ok())).collect();
                    pending.extend(next.into_iter().rev());
                }
                print(entries, Some(&dir));
            }
            Err(e) => {
                eprintln!("tessera: ls: {e}");
                failed += 1;
                unreadable_operands += usize::from(operand);
            }
        }
    }
    if failed > 0 {
        let given = args.paths.len();
        let message = match failed - unreadable_operands {
            0 => format!("{failed} of {given} paths could not be listed"),
            below => format!(
                "{} could not be listed ({unreadable_operands} of the {given} paths given, {below} found below them)",
                count(failed as u64, "directory", "directories")
            ),
        };
        bail!(ExitStatus { status: if unreadable_operands > 0 { 2 } else { 1 }, message });
    }
    if unknown.get() > 0 {
        bail!("the attributes of {} could not be read: {}", count(unknown.get(), "entry", "entries"), FsError::PeerDown);
    }
    if sizeless.get() > 0 {
        // As du: the listing is whole, but a script summing its sizes must learn it cannot.
        let (files, them) = if sizeless.get() == 1 { ("file is", "it") } else { ("files are", "them") };
        bail!("the size of {} {files} unknown (`?`): an OSD holding {them} did not answer; `tessera status` shows which", sizeless.get());
    }
    Ok(())
}

/// A directory's entries as `ls` shows them: names beginning with `.` only with `-a` or `-A`,
/// and with `-a` the directory itself as `.` and its parent as `..` first.
fn listing(client: &Client, dir: &str, handle: &Dir, args: &LsArgs) -> Result<Vec<(String, Attr)>, tessera_client::ClientError> {
    let entries = handle.readdir()?;
    let mut out = Vec::with_capacity(entries.len() + 2);
    if args.all {
        out.push((".".to_string(), client.stat(dir)?));
        out.push(("..".to_string(), client.stat(&format!("{}/..", dir.trim_end_matches('/')))?));
    }
    let hidden_too = args.all || args.almost_all;
    out.extend(entries.into_iter().filter(|e| hidden_too || !e.name.starts_with('.')).map(|e| (e.name, e.attr)));
    Ok(out)
}

pub fn stat(args: StatArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    each_path("stat", &args.paths, |path| {
        let a = if args.dereference { client.stat(path)? } else { client.lstat(path)? };
        println!("  path: {path}");
        println!("  type: {}", type_name(a.file_type));
        if a.file_type == FileType::Symlink {
            println!("    to: {}", client.readlink(path)?);
        }
        println!("  size: {}", a.size);
        println!(" inode: {:#x} (metadata server {})", a.ino.0, a.ino.server());
        println!("  mode: {:04o} ({})", a.mode, mode_string(&a));
        println!(" links: {}", a.nlink);
        println!(" owner: uid {} gid {}", a.uid, a.gid);
        println!("access: {}", time_string(a.atime.secs));
        println!("modify: {}", time_string(a.mtime.secs));
        println!("change: {}", time_string(a.ctime.secs));
        Ok(())
    })
}

pub fn mkdir(args: MkdirArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let umask = process_umask();
    // As mkdir(1): a=rwx less the umask, or MODE applied to a=rwx; parents made by -p get
    // u+wx besides, so that the walk can go on into them.
    let default = 0o777 & !umask;
    let last = args.mode.as_ref().map_or(default, |m| m.apply(0o777, true, umask));
    each_path("mkdir", &args.paths, |path| {
        if !args.parents {
            client.mkdir(path, last)?;
            return Ok(());
        }
        make_parents(&client, path, default | 0o300, last)
    })
}

/// `mkdir -p`: every component of `path` made where missing, with `mode` (the last with
/// `last_mode`). The walk holds a handle on the directory it reached (`Dir`), so a path of
/// depth d costs about d requests, not a walk from the root per component (d²/2).
pub fn make_parents(client: &Client, path: &str, mode: u32, last_mode: u32) -> Result<()> {
    if path.is_empty() {
        // As mkdir(2) answers an empty pathname.
        return Err(tessera_client::ClientError::Fs { op: "mkdir", path: String::new(), source: FsError::NotFound }.into());
    }
    let mut prefix = String::new();
    let mut at = client.open_dir("/")?;
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    for (i, part) in parts.iter().enumerate() {
        prefix.push('/');
        prefix.push_str(part);
        if *part == ".." {
            // The parent of where a symlink led, as mkdir(1) finds it: the prefix walked whole.
            at = client.open_dir(&prefix)?;
            continue;
        }
        let mode = if i + 1 == parts.len() { last_mode } else { mode };
        at = super::dirs::make_in(client, &at, part, &prefix, mode)?;
    }
    Ok(())
}

pub fn rmdir(args: RmdirArgs) -> Result<()> {
    refuse_dot_paths(&args.paths)?;
    let (client, _) = args.cluster.connect()?;
    each_path("rmdir", &args.paths, |path| {
        let parts = tessera_client::path::normalized(path);
        if parts.is_empty() {
            bail!("refusing to remove {path}: it is the root, which always exists");
        }
        client.rmdir(path)?;
        if args.parents {
            for keep in (1..parts.len()).rev() {
                client.rmdir(&format!("/{}", parts[..keep].join("/")))?;
            }
        }
        Ok(())
    })
}

/// As rm(1) and rmdir(1): a path ending in `.` or `..` is refused before anything is removed.
fn refuse_dot_paths(paths: &[String]) -> Result<()> {
    for path in paths {
        if matches!(path.trim_end_matches('/').rsplit('/').next(), Some(".") | Some("..")) {
            bail!("refusing to remove {path}: its last component is '.' or '..'");
        }
    }
    Ok(())
}

pub fn rm(args: RmArgs) -> Result<()> {
    if args.paths.is_empty() {
        return Ok(()); // `rm -f` and nothing to remove
    }
    refuse_dot_paths(&args.paths)?;
    let (client, _) = args.cluster.connect()?;
    if args.recursive && !args.no_preserve_root {
        for path in &args.paths {
            if matches!(client.lookup(path), Ok(a) if a.ino == InodeId::ROOT) {
                bail!("refusing to remove {path} recursively: it is the root, and every file would go (--no-preserve-root allows it)");
            }
        }
    }
    each_path("rm", &args.paths, |path| match remove(&client, path, args.recursive, super::parallel::TREE_WORKERS) {
        Err(e) if args.force && super::fs_error_of(&e) == Some(FsError::NotFound) => Ok(()),
        other => other,
    })
}

/// Removes `path`; a directory only when `recursive`, with its contents (each directory's
/// files `workers` at a time).
pub fn remove(client: &Client, path: &str, recursive: bool, workers: usize) -> Result<()> {
    // Without the size: a file whose OSD is down can still be removed (its objects are
    // removed once the OSD answers again).
    let attr = client.lookup(path)?;
    if attr.file_type != FileType::Directory {
        client.unlink(path)?;
        return Ok(());
    }
    if !recursive {
        bail!("{path} is a directory (use -r to remove it and its contents)");
    }
    let kept = empty(&client.open_dir(path)?, workers)?;
    if kept > 0 {
        bail!("{path} stays: {} in it could not be removed (each named above)", count(kept, "entry", "entries"));
    }
    // The root itself stays (--no-preserve-root empties it).
    if attr.ino != InodeId::ROOT {
        client.rmdir(path)?;
    }
    Ok(())
}

/// Removes everything in `dir`. The walk holds a handle on each directory (`Dir`), so every
/// entry costs one request, not a walk from the root (a tree of depth d would cost d²/2).
/// Subdirectories go one after another; the files of each directory `workers` at a time, so
/// the metadata server commits their unlinks together. Returns how many entries stayed
/// because the user may not remove them.
fn empty(dir: &Dir, workers: usize) -> Result<u64> {
    let (dirs, others): (Vec<_>, Vec<_>) = dir.readdir().map_err(super::vanished)?.into_iter().partition(|e| e.attr.file_type == FileType::Directory);
    // An entry another client removed or renamed meanwhile is gone already: the walk goes on
    // (as rm(1) does), and only the directory's own rmdir says whether the tree is gone. An
    // entry the user may not remove is named and kept, and so is every directory above it.
    let mut kept = 0;
    for entry in dirs {
        let emptied = unless_vanished((|| {
            let left = empty(&dir.entered(&entry.name, &entry.attr)?, workers)?;
            if left == 0 {
                dir.rmdir(&entry.name)?;
            }
            Ok(left)
        })());
        kept += kept_if_refused(emptied)?;
    }
    let refused = AtomicU64::new(0);
    super::parallel::for_each(workers, &others, |entry| {
        refused.fetch_add(kept_if_refused(unless_vanished(dir.unlink(&entry.name).map(|()| 0).map_err(Into::into)))?, Ordering::Relaxed);
        Ok(())
    })?;
    Ok(kept + refused.into_inner())
}

/// The entries `result` kept: its own count, or 1 when it was refused for lack of permission
/// (said on stderr, as rm -r goes on past it); any other error stops the removal.
fn kept_if_refused(result: Result<u64>) -> Result<u64> {
    match result {
        Err(e) if matches!(super::fs_error_of(&e), Some(FsError::Access | FsError::NotPermitted)) => {
            eprintln!("tessera: rm: {e}");
            Ok(1)
        }
        other => other,
    }
}

/// `result`, with an error that says its path no longer exists (NotFound, Stale) taken as
/// done.
fn unless_vanished(result: Result<u64>) -> Result<u64> {
    match result {
        Err(e) if matches!(super::fs_error_of(&e), Some(FsError::NotFound | FsError::Stale)) => Ok(0),
        other => other,
    }
}

fn type_name(t: FileType) -> &'static str {
    match t {
        FileType::Regular => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
    }
}

/// `drwxr-xr-x` and friends.
pub fn mode_string(a: &Attr) -> String {
    let kind = match a.file_type {
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        FileType::Regular => '-',
    };
    let mut s = String::from(kind);
    // As ls(1): setuid, setgid and sticky show in the execute column, lower case over x.
    for (shift, special, mark) in [(6, 0o4000, 's'), (3, 0o2000, 's'), (0, 0o1000, 't')] {
        let bits = (a.mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(match (bits & 1 != 0, a.mode & special != 0) {
            (true, true) => mark,
            (false, true) => mark.to_ascii_uppercase(),
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// UTC `YYYY-MM-DD HH:MM:SS` without a time-zone database.
pub fn time_string(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::{mode_string, time_string};
    use tessera_client::{Attr, FileType, InodeId, Timespec};

    #[test]
    fn modes_read_as_ls_shows_them() {
        let t = Timespec { secs: 0, nanos: 0 };
        let attr = |file_type, mode| Attr { ino: InodeId(1), file_type, mode, uid: 0, gid: 0, nlink: 1, size: 0, atime: t, mtime: t, ctime: t, parent: InodeId(0) };
        assert_eq!(mode_string(&attr(FileType::Regular, 0o644)), "-rw-r--r--");
        assert_eq!(mode_string(&attr(FileType::Regular, 0o4755)), "-rwsr-xr-x");
        assert_eq!(mode_string(&attr(FileType::Regular, 0o2644)), "-rw-r-Sr--");
        assert_eq!(mode_string(&attr(FileType::Directory, 0o1777)), "drwxrwxrwt");
        assert_eq!(mode_string(&attr(FileType::Directory, 0o1770)), "drwxrwx--T");
    }

    #[test]
    fn civil_time() {
        assert_eq!(time_string(0), "1970-01-01 00:00:00");
        assert_eq!(time_string(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(time_string(1_795_000_000), "2026-11-18 11:06:40");
    }
}
