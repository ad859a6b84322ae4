//! `put`, `get` and `cat`: whole-file copies between the local file system and Tessera, in
//! large striped pieces, with a progress bar on a terminal.

use std::cell::Cell;
use std::fs::File as LocalFile;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tessera_client::{extent_list, Client, ClientError, FileType, FsError, Mode, StripeHint};

use super::interrupt::Interrupt;
use super::local_out::LocalOut;
use super::mode::process_umask;
use super::replaced::{read_latest, Counted};
use super::ClusterArg;
use crate::units::{count, parse_size};

/// Bytes moved per client call: many stripes at once so every OSD has work in flight.
const CHUNK_MIN: u64 = 64 << 20;

#[derive(Args)]
pub struct PutArgs {
    /// Local file to copy (`-` for standard input).
    local: PathBuf,
    /// Destination path in Tessera; an existing directory receives the file by its name.
    remote: String,
    /// Stripe count of a new file (-1 or 0: every OSD); default: the directory's.
    #[arg(short = 'c', long, allow_negative_numbers = true, value_parser = crate::units::parse_stripe_count)]
    stripe_count: Option<u32>,
    /// Stripe unit of a new file (e.g. 64K, 1M); default: the directory's.
    #[arg(short = 'S', long, value_parser = parse_size)]
    stripe_size: Option<u64>,
    /// Copy a local directory and everything in it (links as links); files take their
    /// Tessera directory's striping.
    #[arg(short = 'r', long, conflicts_with_all = ["stripe_count", "stripe_size"])]
    recursive: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct GetArgs {
    /// Path in Tessera.
    remote: String,
    /// Local destination (`-` for standard output); default: the file's name here. An
    /// existing file is replaced only once the copy is whole, and keeps its mode.
    local: Option<PathBuf>,
    /// Read only these pieces: a file of `OFFSET LENGTH` lines (decimal, 0x hex, K/M/G
    /// suffixes, # comments), written out concatenated in list order. Each OSD gets one
    /// non-contiguous command for all its pieces. Past the end of file reads as zeros (with a warning).
    /// `-` reads the list from standard input.
    #[arg(long, value_name = "FILE")]
    pieces: Option<PathBuf>,
    /// Copy a Tessera directory and everything in it (links as links).
    #[arg(short = 'r', long, conflicts_with = "pieces")]
    recursive: bool,
    #[command(flatten)]
    cluster: ClusterArg,
}

#[derive(Args)]
pub struct CatArgs {
    /// Paths in Tessera, written out one after the other.
    #[arg(required = true)]
    paths: Vec<String>,
    #[command(flatten)]
    cluster: ClusterArg,
}

/// A bar for `total` bytes; with `total` 0 (a pipe on standard input: not known), the bytes
/// so far and the rate, with no total to reach.
pub(super) fn progress(total: u64, what: &str) -> ProgressBar {
    let (bar, template) = match total {
        0 => (ProgressBar::no_length(), "{msg} {bytes} {binary_bytes_per_sec}"),
        _ => (ProgressBar::new(total), "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}"),
    };
    bar.set_style(ProgressStyle::with_template(template).expect("static template").progress_chars("=> "));
    bar.set_message(what.to_string());
    bar
}

/// Whether a copy runs alone (its own progress bar, the whole chunk budget) or as one of a
/// tree's copies running together (which share the tree's bar, and the budget, so a tree of
/// large files holds no more memory than one large file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Share {
    Alone,
    InTree,
}

fn chunk_len(client_stripe_width: u64, share: Share) -> u64 {
    let budget = match share {
        Share::Alone => CHUNK_MIN,
        Share::InTree => CHUNK_MIN / super::parallel::TREE_WORKERS as u64,
    };
    budget.div_ceil(client_stripe_width.max(1)) * client_stripe_width.max(1)
}

pub fn put(args: PutArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    if args.recursive && args.local.is_dir() {
        let remote = destination(&client, &args.remote, &args.local)?;
        let mut done = super::trees::Copied::default();
        let result = super::trees::put_tree(&client, &args.local, &remote, super::parallel::TREE_WORKERS, &mut done);
        return tree_summary("put", &args.local.display().to_string(), &remote, &done, result);
    }
    // The source is opened and checked first: a bad one must not touch the destination.
    // A new file gets the local file's permission bits less the umask, as cp(1) gives; from
    // standard input, a=rw less the umask, as a shell's `> file` makes one.
    let (input, total, local_mode): (Box<dyn Read>, u64, u32) = if args.local.as_os_str() == "-" {
        // A file redirected to standard input has a size for the bar; a pipe has none.
        crate::std_fds::require_stdin("put -")?;
        let total = std::fs::metadata("/proc/self/fd/0").ok().filter(|m| m.is_file()).map_or(0, |m| m.len());
        (Box::new(io::stdin().lock()), total, 0o666 & !super::mode::process_umask())
    } else {
        let f = LocalFile::open(&args.local).with_context(|| format!("opening {}", args.local.display()))?;
        let meta = f.metadata()?;
        if meta.is_dir() {
            bail!("{} is a directory; put copies one file (-r copies a tree)", args.local.display());
        }
        (Box::new(f), meta.len(), meta.permissions().mode() & 0o777 & !super::mode::process_umask())
    };
    // Through a symlink, as cp(1): the file it points to is replaced (or made), not the link.
    let remote = super::links::through_links(&client, &destination(&client, &args.remote, &args.local)?)?;
    let hint = match (args.stripe_count, args.stripe_size) {
        (None, None) => None,
        (count, unit) => Some(super::stripe::complete(&client, &args.cluster, &remote, count, unit, None)?),
    };
    let source = args.local.display().to_string();
    let n = store(&client, Source { input, total, name: &source, verb: "put", share: Share::Alone }, &remote, local_mode, hint)?;
    eprintln!("put {source} -> {remote}: {n} bytes");
    Ok(())
}

/// Where `store` reads a file's new contents from.
pub(super) struct Source<'a> {
    pub input: Box<dyn Read + 'a>,
    /// Its length, for the progress bar (0 when not known).
    pub total: u64,
    /// For messages: the local path or remote path it comes from.
    pub name: &'a str,
    /// For messages: the command (`put`, `cp`).
    pub verb: &'a str,
    pub share: Share,
}

/// Writes `source` to `remote` and returns the bytes. A file that exists is replaced only
/// once the new contents are complete and durable: they are written under a temporary name
/// beside it, with its striping and mode, then renamed over it. A new file gets `new_mode`
/// and `hint` (or its directory's striping). On failure or interrupt the destination is as
/// it was and the partial copy is removed.
pub(super) fn store(client: &Client, source: Source<'_>, remote: &str, new_mode: u32, hint: Option<StripeHint>) -> Result<u64> {
    // A name ending in `/` that is still here did not name a directory (one would have
    // received the file by its name), so no file can be made under it, as cp(1) refuses.
    if remote.is_empty() || remote.ends_with('/') {
        bail!("cannot make file `{remote}`: {}", if remote.is_empty() { "no such file or directory (an empty path)" } else { "not a directory" });
    }
    let (target, mode, existed) = match client.open(remote) {
        Ok(_) if hint.is_some() => bail!("{remote} exists and its layout is fixed; remove it first to restripe"),
        Ok(old) => {
            let attr = client.lookup(remote)?;
            let mode = attr.mode;
            // The new file replaces the old by a rename, which the old one's mode does not
            // govern; but a copy over a file is a write to it, as cp(1) opens it for writing,
            // so a file the caller may not write is refused as a write through a handle would be.
            let me = client.caller();
            if me.data_bits(attr.uid, attr.gid, mode) & 0o2 == 0 {
                let fix = match me.is_root() || me.uid == attr.uid {
                    true => format!("`tessera chmod u+w {remote}` first, or remove it"),
                    false => format!("it is uid {}'s; ask them, or remove it if its directory lets you", attr.uid),
                };
                bail!("cannot {} over {remote}: permission denied (mode {:04o}, owner {}:{}, gives uid {} no write permission; {fix})", source.verb, mode & 0o7777, attr.uid, attr.gid, me.uid);
            }
            let s = &old.layout().stripe;
            let same = StripeHint { stripe_unit: s.stripe_unit(), stripe_count: s.stripe_count(), start_osd: None };
            (Some(same), mode, true)
        }
        Err(e) if e.fs_error() == Some(FsError::NotFound) => (hint, new_mode, false),
        Err(e) => return Err(e.into()),
    };
    let temp = temporary_name(remote, source.verb);
    let interrupt = Interrupt::catch()?;
    // Made with its final mode where that lets its owner write: a chmod afterwards would cost
    // a revocation on every OSD the file touches. A mode without the owner's write bit is set
    // at the end, since a copy that outlasts the handle's credentials (10 minutes) would get
    // fresh ones that follow the mode and refuse its writes.
    let writable = mode | 0o200;
    let file = client.create(&temp, writable, target).map_err(|e| told_by_destination(e, remote, existed.then_some(source.verb)))?;
    let (verb, name) = (source.verb, source.name);
    let copied = fill(&file, source, remote, interrupt).and_then(|n| {
        if writable != mode {
            client.chmod(&temp, mode)?;
        }
        client.rename(&temp, remote)?;
        Ok(n)
    });
    copied.map_err(|e| {
        // The destination is as it was; the partial copy goes. When it cannot (its metadata
        // server stopped answering meanwhile), it is named at once: each file of a tree that
        // fails so leaves one, and only the first error reaches the end.
        match client.unlink(&temp) {
            Err(u) if u.fs_error() != Some(FsError::NotFound) => eprintln!(
                "tessera: {verb}: the partial copy {temp} could not be removed ({u}); `tessera rm` removes it, and `tessera repair` lists it once it is an hour old"
            ),
            _ => {}
        }
        e.context(format!("{verb} {name} -> {remote} (the destination is unchanged)"))
    })
}

/// A refusal to make the temporary, told by the destination the user gave: the temporary is
/// made in the destination's directory, so a directory that is missing, is not one, or may not
/// be written to is the destination's trouble, and its hidden name would only puzzle. Other
/// failures keep the name they happened to. Over a file that exists (`replacing` names the
/// command), a refusal says why writing to the file is not enough.
fn told_by_destination(e: ClientError, remote: &str, replacing: Option<&str>) -> anyhow::Error {
    if let (Some(verb), ClientError::Fs { source: FsError::Access, .. }) = (replacing, &e) {
        return anyhow::anyhow!("cannot {verb} over {remote}: its directory refuses new files (permission denied); the copy is written beside the file, then renamed over it");
    }
    match e {
        ClientError::Fs { op, source: source @ (FsError::NotFound | FsError::NotDir | FsError::Access | FsError::Loop), .. } => {
            anyhow::anyhow!("{op} {remote}: {source}")
        }
        other => other.into(),
    }
}

/// `.<name>.<verb>-<pid>` beside `remote`.
fn temporary_name(remote: &str, verb: &str) -> String {
    let (dir, name) = remote.trim_end_matches('/').rsplit_once('/').unwrap_or(("", remote));
    format!("{dir}/{}", super::temporary::hidden_name(name, &format!("{verb}-{}", std::process::id())))
}

/// Copies `input` into `file` in large striped pieces and makes it durable; returns the bytes.
/// Stripe units of zeros are not written, so holes stay holes (as cp(1) and `mv` keep them).
fn fill(file: &tessera_client::File, source: Source<'_>, remote: &str, interrupt: &Interrupt) -> Result<u64> {
    let Source { mut input, total, name, verb, share } = source;
    let stripe = &file.layout().stripe;
    let chunk = chunk_len(stripe.stripe_unit() * stripe.stripe_count() as u64, share);
    let bar = if share == Share::Alone { progress(total, &format!("{verb} {remote}")) } else { ProgressBar::hidden() };
    // A small file needs no chunk-sized buffer (an input of unknown length gets one).
    let mut buf = vec![0u8; if total > 0 { chunk.min(total) } else { chunk } as usize];
    let mut offset = 0u64;
    let mut tail_hole = false;
    loop {
        interrupt.check()?;
        let n = read_full(&mut input, &mut buf).with_context(|| format!("reading {name}"))?;
        if n == 0 {
            break;
        }
        tail_hole = !write_data(file, offset, &buf[..n], stripe.stripe_unit() as usize)?;
        offset += n as u64;
        bar.set_position(offset);
    }
    // A hole at the end still counts in the size.
    if tail_hole {
        file.set_len(offset)?;
    }
    file.fsync()?;
    bar.finish_and_clear();
    Ok(offset)
}

/// Writes the runs of `buf` (at `offset`) that are not whole `unit`-sized pieces of zeros;
/// returns whether its end was written.
fn write_data(file: &tessera_client::File, offset: u64, buf: &[u8], unit: usize) -> Result<bool> {
    let mut run_start = None;
    for (i, piece) in buf.chunks(unit.max(1)).enumerate() {
        let at = i * unit.max(1);
        match (piece.iter().all(|&b| b == 0), run_start) {
            (false, None) => run_start = Some(at),
            (true, Some(start)) => {
                file.pwrite(offset + start as u64, &buf[start..at])?;
                run_start = None;
            }
            _ => {}
        }
    }
    if let Some(start) = run_start {
        file.pwrite(offset + start as u64, &buf[start..])?;
    }
    Ok(run_start.is_some())
}

/// Fills `buf` unless the input ends first; returns the bytes read.
fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// `remote`, or `remote/<local name>` when `remote` is a directory.
fn destination(client: &Client, remote: &str, local: &Path) -> Result<String> {
    match client.lookup_followed(remote) {
        Ok(attr) if attr.file_type == FileType::Directory => {
            if local.as_os_str() == "-" {
                bail!("standard input has no name; give a file path as destination, not the directory {remote}");
            }
            let name = local.file_name().with_context(|| format!("{} names no file to put into {remote}; give a file path as destination", local.display()))?;
            let name = name.to_str().with_context(|| format!("{} is not valid UTF-8, which Tessera's names must be; give a destination file name", local.display()))?;
            Ok(format!("{}/{name}", remote.trim_end_matches('/')))
        }
        _ => Ok(remote.to_string()),
    }
}

pub fn get(args: GetArgs) -> Result<()> {
    let (client, _) = args.cluster.connect()?;
    let name = args.remote.trim_end_matches('/').rsplit('/').next().filter(|n| !n.is_empty());
    let local = match &args.local {
        // Into a local directory by the file's name, as cp(1) does.
        Some(p) if p.is_dir() => p.join(name.context("give a local file name for the root")?),
        Some(p) => p.clone(),
        None => PathBuf::from(name.context("give a local destination")?),
    };
    if args.recursive {
        if client.lookup_followed(&args.remote)?.file_type != FileType::Directory {
            bail!("{} is not a directory; get -r copies a tree", args.remote);
        }
        let mut done = super::trees::Copied::default();
        let result = super::trees::get_tree(&client, &args.remote, &local, super::parallel::TREE_WORKERS, &mut done);
        return tree_summary("get", &args.remote, &local.display().to_string(), &done, result);
    }
    // Everything that can be refused is checked before the local file is created (and so
    // emptied, if it exists): the remote file, and the piece list.
    let file = match client.open(&args.remote) {
        Err(e) if e.fs_error() == Some(FsError::IsDir) => bail!("{} is a directory; get copies one file (-r copies a tree)", args.remote),
        other => other?,
    };
    let pieces = args.pieces.as_deref().map(load_pieces).transpose()?;
    // Another client's put may replace the file while it is read; the read then starts over
    // on the file the name holds now (`replaced`), so the first open is only used once.
    let mut opened = Some(file);
    let mut open = || -> Result<tessera_client::File> { Ok(match opened.take() { Some(f) => f, None => client.open(&args.remote)? }) };
    if local.as_os_str() == "-" {
        crate::std_fds::require_stdout("get to -")?;
        let given = Cell::new(0);
        let mut out = Counted::new(io::stdout().lock(), &given);
        let written = read_latest(&args.remote, || given.get() == 0, || {
            let file = open()?;
            match &pieces {
                Some(extents) => read_pieces(&file, extents, &mut out),
                None => copy_out(&file, &mut out, Share::Alone, true, None),
            }
        });
        return written.and_then(|_| Ok(out.flush()?)).with_context(|| format!("get {} -> standard output", args.remote));
    }
    // Written beside the destination and renamed over it when whole (`LocalOut`); a new
    // file takes the Tessera file's mode less the umask, as cp(1) gives a new copy.
    let interrupt = Interrupt::catch()?;
    let written = read_latest(&args.remote, || true, || {
        let file = open()?;
        let mode = client.lookup_followed(&args.remote)?.mode & 0o7777 & !process_umask();
        let mut out = LocalOut::create(&local, mode)?;
        let n = match &pieces {
            Some(extents) => read_pieces(&file, extents, &mut out),
            None => copy_out(&file, &mut out, Share::Alone, true, Some(interrupt)),
        }?;
        out.finish()?;
        Ok(n)
    })
    .with_context(|| format!("get {} -> {} (the destination is unchanged)", args.remote, local.display()))?;
    eprintln!("get {} -> {}: {written} bytes", args.remote, local.display());
    Ok(())
}

pub fn cat(args: CatArgs) -> Result<()> {
    crate::std_fds::require_stdout("cat")?;
    let (client, _) = args.cluster.connect()?;
    let mut out = io::stdout().lock();
    super::each_path("cat", &args.paths, |path| {
        // Started over if the file is replaced before any of it is out (`replaced`).
        let given = Cell::new(0);
        let mut counted = Counted::new(&mut out, &given);
        read_latest(path, || given.get() == 0, || copy_out(&client.open(path)?, &mut counted, Share::Alone, false, None))
            .and_then(|_| Ok(out.flush()?))
            .with_context(|| format!("cat {path} to standard output"))
    })
}

/// Reports a tree copy: what was copied, and how it ended.
fn tree_summary(verb: &str, from: &str, to: &str, done: &super::trees::Copied, result: Result<()>) -> Result<()> {
    let (files, bytes) = (done.files.load(std::sync::atomic::Ordering::Relaxed), done.bytes.load(std::sync::atomic::Ordering::Relaxed));
    let counts = format!("{} ({bytes} bytes), {}, {}", count(files, "file", "files"), count(done.directories, "directory", "directories"), count(done.links, "link", "links"));
    match result {
        Err(e) => Err(e.context(format!("{verb} -r {from} -> {to} stopped after {counts}"))),
        Ok(()) if done.skipped > 0 => bail!("{verb} -r {from} -> {to}: {counts}; {} skipped", count(done.skipped, "special file", "special files")),
        Ok(()) if done.unreadable.load(std::sync::atomic::Ordering::Relaxed) > 0 => bail!(
            "{verb} -r {from} -> {to}: {counts}; {} left out (each named above)",
            match done.unreadable.load(std::sync::atomic::Ordering::Relaxed) {
                1 => "1 entry you may not read was".to_string(),
                n => format!("{n} entries you may not read were"),
            }
        ),
        Ok(()) => {
            eprintln!("{verb} -r {from} -> {to}: {counts}");
            Ok(())
        }
    }
}

/// Streams the whole file to `out`; returns its size. With `interrupt` it stops before its
/// next chunk once a signal has come.
pub(super) fn copy_out(file: &tessera_client::File, out: &mut dyn Write, share: Share, show_progress: bool, interrupt: Option<&Interrupt>) -> Result<u64> {
    let remote = file.path();
    let size = file.size()?;
    let stripe = &file.layout().stripe;
    let chunk = chunk_len(stripe.stripe_unit() * stripe.stripe_count() as u64, share);
    let bar = if show_progress { progress(size, &format!("get {remote}")) } else { ProgressBar::hidden() };
    let mut buf = vec![0u8; chunk.min(size.max(1)) as usize];
    let mut offset = 0u64;
    while offset < size {
        if let Some(interrupt) = interrupt {
            interrupt.check()?;
        }
        let n = (size - offset).min(buf.len() as u64) as usize;
        let got = file.pread(offset, &mut buf[..n])?;
        if got != n {
            bail!("{remote}: the file shrank while being read ({} of {size} bytes)", offset + got as u64);
        }
        out.write_all(&buf[..n])?;
        offset += n as u64;
        bar.set_position(offset);
    }
    bar.finish_and_clear();
    Ok(size)
}

/// Most bytes `get --pieces` gathers in memory before writing them out.
const PIECES_BYTES_MAX: u64 = 4 << 30;

/// The extents listed in `list`, checked against what `get --pieces` can hold.
fn load_pieces(list: &Path) -> Result<Vec<tessera_client::Extent>> {
    let text = if list == Path::new("-") {
        crate::std_fds::require_stdin("--pieces -")?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text).context("reading the piece list from standard input")?;
        text
    } else {
        std::fs::read_to_string(list).with_context(|| format!("reading the piece list {}", list.display()))?
    };
    let extents = extent_list::parse(&text).with_context(|| format!("piece list {}", list.display()))?;
    let total: u64 = extents.iter().map(|e| e.len).sum();
    if total > PIECES_BYTES_MAX {
        bail!("{}: the pieces add up to {total} bytes, more than the {PIECES_BYTES_MAX} `get --pieces` holds in memory; split the list", list.display());
    }
    Ok(extents)
}

/// Reads `extents` (one non-contiguous request per OSD, the descriptor chosen per OSD) and
/// writes them out concatenated in list order; returns the byte count.
fn read_pieces(file: &tessera_client::File, extents: &[tessera_client::Extent], out: &mut dyn Write) -> Result<u64> {
    let total: u64 = extents.iter().map(|e| e.len).sum();
    let mut buf = vec![0u8; total as usize];
    file.read_extents(extents, &mut buf, Mode::Auto)?;
    // Zeros keep the pieces where the list puts them, but a list that reaches past the file
    // is more often a mistake than a wish: say so.
    if let Ok(size) = file.size() {
        let past: u64 = extents.iter().map(|e| (e.offset + e.len).saturating_sub(e.offset.max(size))).sum();
        if past > 0 {
            eprintln!("tessera: get: {past} bytes of the listed pieces lie past the end of {} ({size} bytes) and read as zeros", file.path());
        }
    }
    out.write_all(&buf)?;
    Ok(total)
}
