//! `mv`, as mv(1): a rename where the metadata servers can make one, and otherwise (a rename
//! between directories homed on different servers, which they answer EXDEV-like with
//! `CrossServer`) a copy and a delete, as mv(1) does between file systems.
//!
//! The source is first renamed aside in its own directory (`claim`), so that of two movers of
//! one name (or a mover and an `rm`) the second fails before it changes anything. A file is then
//! copied under a temporary name beside the destination, keeping its owner, mode, times and
//! striping (stripe unit and count) and its holes (stripes of zeros are not written), and
//! needing no permission on the file, as rename(2) needs none; renamed onto the
//! destination (one server: the two names share a directory), and only then removed at the
//! source. A failure before that rename removes the copy and puts the source back under its
//! name. A directory is made at the destination (replacing an empty one there) and its entries
//! moved one by one, each the cheapest way; a failure part-way leaves both trees partly filled,
//! as mv(1) does, the source back under its name, and says so.

use anyhow::{bail, Context, Result};
use clap::Args;
use tessera_client::path::{normalized, split_parent};
use tessera_client::{Attr, Client, FileType, FsError, StripeHint};
use tessera_osd_proto::Attribute;

use super::interrupt::Interrupt;
use super::ClusterArg;

#[derive(Args)]
pub struct MvArgs {
    /// SOURCE... DEST: what to move, then its new name, or an existing directory to move
    /// into (which several sources need), as mv(1).
    #[arg(required = true, num_args = 2.., value_name = "PATH")]
    paths: Vec<String>,
    #[command(flatten)]
    cluster: ClusterArg,
}

/// Bytes copied per round when a move has to copy: whole stripes of at least this much.
const COPY_CHUNK_MIN: u64 = 8 << 20;

pub fn mv(args: MvArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let (sources, dest) = args.paths.split_at(args.paths.len() - 1);
    let dest = &dest[0];
    if sources.len() > 1 && !matches!(client.lookup_followed(dest), Ok(a) if a.file_type == FileType::Directory) {
        bail!("target {dest} is not a directory (several sources move into a directory)");
    }
    super::each_path("mv", sources, |from| move_one(&client, from, dest))
}

/// Moves `from` to `dest`, or into it when it is an existing directory (or a link to one).
fn move_one(client: &Client, from: &str, dest: &str) -> Result<()> {
    let to = match client.lookup_followed(dest) {
        Ok(a) if a.file_type == FileType::Directory => {
            let name = from.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
            format!("{}/{name}", dest.trim_end_matches('/'))
        }
        // A name missing only because another `mv` has it renamed aside is not free: taking
        // it would leave that move unable to put its source back when it fails.
        Err(e) if e.fs_error() == Some(FsError::NotFound) => match being_moved(client, dest)? {
            // Putting the claimed source back under its name, as a failed move's message says.
            Some(claim) if puts_back(from, dest, &claim) => dest.to_string(),
            Some(claim) => bail!(
                "{dest} is renamed aside as {claim} by another mv (moving it now, or one that was cut short: `tessera repair` lists those); try again once that mv ends"
            ),
            None => dest.to_string(),
        },
        _ => dest.to_string(),
    };
    // Checked before anything moves: the copying path below would otherwise rearrange the
    // tree before the servers could refuse. The text is compared first, for the message; a
    // destination reached through a symlink is caught by inode.
    let (src, dst) = (normalized(from), normalized(&to));
    if from.is_empty() {
        bail!("cannot move '': no such file or directory (an empty path)");
    }
    if src.is_empty() {
        bail!("cannot move the root");
    }
    if dst == src {
        bail!("{from} and {to} are the same file");
    }
    let attr = client.lookup(from)?;
    // Only a directory has an inside: a path below a file is left for the rename to refuse
    // (ENOTDIR), as is a destination that cannot be walked.
    if attr.file_type == FileType::Directory {
        if dst.len() > src.len() && dst[..src.len()] == src[..] {
            bail!("cannot move {from} into itself ({to})");
        }
        if matches!(inside(client, &to, attr.ino), Ok(true)) {
            bail!("cannot move {from} into itself ({to})");
        }
    }
    move_path(client, from, &to)
}

/// Renames `from` to `to`, or copies and deletes when they are on different metadata servers.
fn move_path(client: &Client, from: &str, to: &str) -> Result<()> {
    match client.rename(from, to) {
        Err(e) if e.fs_error() == Some(FsError::CrossServer) => {}
        other => return Ok(other?),
    }
    let attr = client.lstat(from)?;
    // Claimed before anything at the destination changes: renamed aside in its own directory
    // (one server, so atomic). Another `mv` or an `rm` of the same name then finds it gone and
    // fails before it replaces anything, rather than after.
    let claimed = claim(client, from)?;
    let moved = match attr.file_type {
        FileType::Regular => copy_then_remove(client, &claimed, to, &attr),
        FileType::Symlink => (|| {
            let target = client.readlink(&claimed)?;
            replace_with(client, to, FileType::Symlink)?;
            client.symlink(&target, to)?;
            Ok(client.unlink(&claimed)?)
        })(),
        FileType::Directory => move_directory(client, &claimed, to, &attr),
    };
    // Each part of the message says what is true now: the source is back, or where it is.
    moved.map_err(|e| match client.rename(&claimed, from) {
        Ok(()) => e.context(format!("moving {from} to {to} (another metadata server); {from} is as it was")),
        Err(back) => e.context(format!(
            "moving {from} to {to} (another metadata server); {from} is left as {claimed}, which could not be renamed back ({back}); put it back with `tessera mv '{claimed}' '{from}'`"
        )),
    })
}

/// The name another `mv` has `path` renamed aside under ([`claim`]), if it has: one small
/// page of the parent's listing, from where such names sort. A parent that cannot be opened
/// has no claims to find; the move then reports what is wrong with it.
fn being_moved(client: &Client, path: &str) -> Result<Option<String>> {
    let Ok((dir, name)) = split_parent("mv", path) else { return Ok(None) };
    let prefix = format!(".{name}.{}-", super::temporary::MV_SOURCE_TAG);
    let Ok(parent) = client.open_dir(if dir.is_empty() { "/" } else { dir }) else { return Ok(None) };
    let (page, _) = parent.readdir_page(Some(&prefix), 1)?;
    Ok(page.into_iter().map(|e| e.name).find(|n| n.starts_with(&prefix) && super::temporary::claimed_source(n) == Some(name)))
}

/// Whether moving `from` to `dest` renames the claim `claim` of `dest` back to its name.
fn puts_back(from: &str, dest: &str, claim: &str) -> bool {
    let (from, dest) = (normalized(from), normalized(dest));
    from.split_last().zip(dest.split_last()).is_some_and(|((name, dir), (_, dest_dir))| *name == claim && dir == dest_dir)
}

/// Renames `path` aside in its directory, `.<name>.tessera-mv-src-<pid>`, for this process to
/// move; the name is not one `repair` removes, since until the move ends it holds the data.
fn claim(client: &Client, path: &str) -> Result<String> {
    let (dir, name) = split_parent("mv", path)?;
    let claimed = format!("{dir}/{}", super::temporary::hidden_name(name, &format!("{}-{}", super::temporary::MV_SOURCE_TAG, std::process::id())));
    client.rename(path, &claimed).with_context(|| format!("cannot move {path}"))?;
    Ok(claimed)
}

/// Makes `to` (an empty directory there is replaced, as rename(2) replaces one) and moves
/// `from`'s entries into it one by one, then removes `from`.
fn move_directory(client: &Client, from: &str, to: &str, attr: &Attr) -> Result<()> {
    match client.lookup(to) {
        Ok(a) if a.file_type != FileType::Directory => bail!("cannot overwrite non-directory {to} with a directory"),
        Ok(_) if !client.readdir(to)?.is_empty() => bail!("cannot move a directory onto {to}: directory not empty"),
        Ok(_) => client.rmdir(to)?,
        Err(e) if e.fs_error() == Some(FsError::NotFound) => {}
        Err(e) => return Err(e.into()),
    }
    let (uid, gid) = kept_owner(client, attr);
    client.mkdir_owned(to, attr.mode, uid, gid).with_context(|| format!("making {to} on another metadata server"))?;
    let mut moved = 0;
    let filled = (|| {
        for entry in client.readdir(from)? {
            Interrupt::catch()?.check()?;
            let (src, dst) = (child(from, &entry.name), child(to, &entry.name));
            move_path(client, &src, &dst).with_context(|| format!("stopped part-way, at {src}"))?;
            moved += 1;
        }
        Ok(client.set_times(to, Some(attr.atime), Some(attr.mtime))?)
    })();
    if let Err(e) = filled {
        // Entries moved so far stay where they went (the error says where it stopped); a
        // directory made for nothing goes again.
        return Err(match moved {
            0 if remove_made_dir(client, to) => e,
            0 => e.context(format!("the directory {to} made for the move is left")),
            _ => e,
        });
    }
    Ok(client.rmdir(from)?)
}

/// Removes the empty directory a failed move made at `to`. Its path may be out of reach for a
/// moment (another `mv` has a directory on it renamed aside, and puts it back when it fails),
/// so a missing path is tried again for up to a second.
fn remove_made_dir(client: &Client, to: &str) -> bool {
    for _ in 0..10 {
        match client.rmdir(to) {
            Ok(()) => return true,
            Err(e) if matches!(e.fs_error(), Some(FsError::NotFound | FsError::NotDir)) => std::thread::sleep(std::time::Duration::from_millis(100)),
            Err(_) => return false,
        }
    }
    false
}

/// Refuses to move over a directory or onto another kind, as rename(2) would.
fn replace_with(client: &Client, to: &str, kind: FileType) -> Result<()> {
    match client.lookup(to) {
        Ok(a) if a.file_type == FileType::Directory => bail!("cannot move onto directory {to}: it exists"),
        Ok(a) if a.file_type != kind => bail!("cannot move onto {to}: it exists and is of another type"),
        Ok(_) => Ok(client.unlink(to)?),
        Err(e) if e.fs_error() == Some(FsError::NotFound) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether the directory that would hold `to` is directory `ino` or lies beneath it, walking
/// up by `..` (which a symlink on the way cannot fool).
pub(super) fn inside(client: &Client, to: &str, ino: tessera_client::InodeId) -> Result<bool> {
    let (dir, _) = split_parent("mv", to)?;
    let mut up = if dir.is_empty() { "/".to_string() } else { dir.to_string() };
    loop {
        let at = client.lookup_followed(&up)?;
        if at.ino == ino {
            return Ok(true);
        }
        if at.ino == tessera_client::InodeId::ROOT {
            return Ok(false);
        }
        up.push_str("/..");
    }
}

fn child(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

fn copy_then_remove(client: &Client, from: &str, to: &str, attr: &Attr) -> Result<()> {
    if let Ok(existing) = client.lookup(to) {
        if existing.file_type == FileType::Directory {
            bail!("cannot move onto directory {to}: it exists");
        }
    }
    let (dir, name) = split_parent("mv", to)?;
    let temporary = format!("{dir}/{}", super::temporary::hidden_name(name, &format!("tessera-mv-{}", std::process::id())));
    let copied = Interrupt::catch().and_then(|interrupt| copy_file(client, from, &temporary, attr, interrupt));
    let placed = copied.and_then(|()| Ok(client.rename(&temporary, to)?));
    if let Err(e) = placed {
        // NotFound: the copy failed before its file was made.
        let left = match client.unlink(&temporary) {
            Err(u) if u.fs_error() != Some(FsError::NotFound) => {
                format!("{to} is as it was, but the partial copy {temporary} could not be removed ({u}); `tessera repair` lists it once it is an hour old")
            }
            _ => format!("{to} is as it was"),
        };
        return Err(e.context(left));
    }
    Ok(client.unlink(from)?)
}

/// The owner and group a copy keeps, as mv(1) between file systems: the original's where the
/// caller may give them (the superuser always; others a group they are in), else the caller's.
fn kept_owner(client: &Client, attr: &Attr) -> (u32, u32) {
    let me = client.caller();
    let uid = if me.is_root() { attr.uid } else { me.uid };
    let gid = if me.is_root() || me.in_group(attr.gid) { attr.gid } else { me.gid };
    (uid, gid)
}

/// Copies a regular file's bytes, owner, mode, times and striping; stripes of zeros stay
/// holes. A move needs no permission on the file itself (rename(2) needs none): a source
/// without read permission is given it for the copy (it is being moved; a failed move puts
/// the mode back), and the copy is made writable by its owner until its bytes are in.
fn copy_file(client: &Client, from: &str, to: &str, attr: &Attr, interrupt: &Interrupt) -> Result<()> {
    let unreadable = attr.mode & 0o400 == 0;
    if unreadable {
        client.chmod(from, attr.mode | 0o400)?;
    }
    let copied = copy_bytes(client, from, to, attr, interrupt);
    if unreadable && copied.is_err() {
        if let Err(e) = client.chmod(from, attr.mode) {
            return copied.context(format!("and {from}'s mode could not be put back to {:04o} ({e})", attr.mode & 0o7777));
        }
    }
    copied?;
    let (uid, gid) = kept_owner(client, attr);
    client.chown(to, Some(uid), Some(gid))?;
    client.chmod(to, attr.mode)?;
    client.set_times(to, Some(attr.atime), Some(attr.mtime))?;
    Ok(())
}

fn copy_bytes(client: &Client, from: &str, to: &str, attr: &Attr, interrupt: &Interrupt) -> Result<()> {
    let src = client.open(from)?;
    let stripe = &src.layout().stripe;
    let hint = StripeHint { stripe_unit: stripe.stripe_unit(), stripe_count: stripe.stripe_count(), start_osd: None };
    let dst = client.create(to, attr.mode | 0o600, Some(hint))?;
    let width = dst.layout().stripe.stripe_unit() * dst.layout().stripe.stripe_count() as u64;
    let chunk = COPY_CHUNK_MIN.div_ceil(width.max(1)) * width.max(1);
    let size = src.size()?;
    let mut buf = vec![0u8; chunk.min(size.max(1)) as usize];
    let mut offset = 0u64;
    while offset < size {
        interrupt.check()?;
        let want = (size - offset).min(buf.len() as u64) as usize;
        let n = src.pread(offset, &mut buf[..want])?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|&b| b != 0) {
            dst.pwrite(offset, &buf[..n])?;
        }
        offset += n as u64;
    }
    dst.set_len(size)?;
    copy_application_attributes(&src, &dst)?;
    dst.fsync()?;
    Ok(())
}

/// The attributes applications set on the objects (`tessera attr set`: pages 0x10000 and up)
/// go with the bytes, object by object; the OSD's own pages are the new objects' own. A copy
/// with another number of objects (the other server's default striping) gets on every object
/// the attributes found on any, the first object's winning, as `attr set` gives every object
/// the same ones.
fn copy_application_attributes(src: &tessera_client::File, dst: &tessera_client::File) -> Result<()> {
    let found: Vec<Vec<Attribute>> = src
        .object_attribute_page(tessera_osd_proto::pages::ALL_PAGES)?
        .into_iter()
        .map(|attrs| {
            let owned = attrs.into_iter().filter(|a| super::objects::APPLICATION_PAGES.contains(&a.id.page));
            owned.filter_map(|a| Some(Attribute { id: a.id, value: a.value? })).collect()
        })
        .collect();
    if found.iter().all(Vec::is_empty) {
        return Ok(());
    }
    let objects = dst.layout().objects.len();
    if found.len() == objects {
        return Ok(dst.set_object_attributes_each(&found)?);
    }
    let mut every: Vec<Attribute> = Vec::new();
    for a in found.into_iter().flatten() {
        if !every.iter().any(|b| b.id == a.id) {
            every.push(a);
        }
    }
    Ok(dst.set_object_attributes(&every)?)
}
