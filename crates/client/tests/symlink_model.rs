//! Goal: the client resolves paths with symbolic links exactly as the Linux kernel does.
//! Method: one tree of directories, files and randomly aimed links is built twice, in a
//! local temporary directory and in a two-server Tessera cluster on loopback. Random paths
//! (through links, `.`, `..`, trailing `/`, dangling links and loops) are then resolved on
//! both sides, with and without following a final link: locally by `openat2` with
//! `RESOLVE_IN_ROOT` (the temporary directory acts as `/`, so absolute links and `..` stay
//! inside it), in Tessera by `lookup_followed` and `lookup`. Each answer is the created entry
//! reached (by inode, mapped back to the path that made it) or the errno; both sides must
//! give the same answer for every path. The kernel is the model.

mod common;

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;

use common::*;
use tessera_client::{Client, InodeId};

const DIRS: [&str; 6] = ["a", "a/b", "a/b/c", "d", "d/e", "d/e/f"];
const FILES: [&str; 4] = ["top", "a/x", "a/b/y", "d/e/z"];
const LINK_HOMES: [&str; 5] = ["", "a", "a/b", "d", "d/e"];
/// Names paths and targets are made of: the tree's own, links', `.`, `..` and a missing one.
const NAMES: [&str; 20] = ["a", "b", "c", "d", "e", "f", "x", "y", "z", "top", ".", "..", "missing", "l0", "l1", "l2", "l3", "loopa", "up", "abs"];
/// Links in every tree besides the random ones: a loop, a way up, an absolute one.
const FIXED_LINKS: [(&str, &str); 4] = [("loopa", "loopb"), ("loopb", "loopa"), ("d/e/up", ".."), ("a/abs", "/d/e")];
const LINKS: usize = 12;

impl Rng {
    /// A path of 1 to `max` names; absolute or trailing `/` now and then.
    fn path(&mut self, max: usize, link_names: &[String]) -> String {
        let depth = 1 + self.below(max);
        let parts: Vec<String> = (0..depth)
            .map(|_| match self.below(4) {
                0 => link_names[self.below(link_names.len())].clone(),
                _ => NAMES[self.below(NAMES.len())].to_string(),
            })
            .collect();
        let mut p = parts.join("/");
        if self.below(4) == 0 {
            p = format!("/{p}");
        }
        if self.below(6) == 0 {
            p.push('/');
        }
        p
    }
}

/// What resolving a path reached: the created entry (by the path that made it), or an errno.
type Answer = Result<String, i32>;

/// The kernel's answer, resolving `path` with `root` as `/`.
fn local(root: &OwnedFd, path: &str, follow: bool, names: &HashMap<u64, String>) -> Answer {
    let c = CString::new(path).unwrap();
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW }) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT;
    // SAFETY: a valid dirfd, NUL-terminated path and open_how of the size passed.
    let fd = unsafe { libc::syscall(libc::SYS_openat2, root.as_raw_fd(), c.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>()) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a stat buffer on the stack.
    assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }, 0);
    Ok(names.get(&st.st_ino).cloned().unwrap_or_else(|| format!("unknown inode {}", st.st_ino)))
}

/// Tessera's answer for `path` (under the cluster's root).
fn remote(client: &Client, path: &str, follow: bool, names: &HashMap<InodeId, String>) -> Answer {
    let full = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    let got = if follow { client.lookup_followed(&full) } else { client.lookup(&full) };
    match got {
        Ok(attr) => Ok(names.get(&attr.ino).cloned().unwrap_or_else(|| format!("unknown inode {:?}", attr.ino))),
        Err(e) => Err(e.errno()),
    }
}

#[test]
fn paths_resolve_as_the_linux_kernel_resolves_them() {
    // Each seed aims the links differently: a fresh tree and cluster for each.
    for seed in [0x5EED_1234_ABCD_0001u64, 0x0BAD_CAFE_0000_0042, 0x7777_1111_2222_3333] {
        compare_tree(seed);
    }
}

fn compare_tree(seed: u64) {
    let cluster = start(1, 2);
    let client = cluster.client();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut rng = Rng(seed);

    for d in DIRS {
        std::fs::create_dir(root.join(d)).unwrap();
        client.mkdir(&format!("/{d}"), 0o755).unwrap();
    }
    for f in FILES {
        std::fs::write(root.join(f), b"").unwrap();
        client.create(&format!("/{f}"), 0o644, None).unwrap();
    }
    let link_names: Vec<String> = (0..LINKS).map(|i| format!("l{i}")).collect();
    let mut made: Vec<String> = std::iter::once(String::new()).chain(DIRS.iter().chain(FILES.iter()).map(|s| s.to_string())).collect();
    for (at, target) in FIXED_LINKS {
        symlink(target, root.join(at)).unwrap();
        client.symlink(target, &format!("/{at}")).unwrap();
        made.push(at.to_string());
    }
    for name in &link_names {
        let home = LINK_HOMES[rng.below(LINK_HOMES.len())];
        let at = if home.is_empty() { name.clone() } else { format!("{home}/{name}") };
        let target = rng.path(3, &link_names);
        symlink(&target, root.join(&at)).unwrap();
        client.symlink(&target, &format!("/{at}")).unwrap();
        made.push(at);
    }

    // Every created entry, by inode on each side.
    let mut local_names = HashMap::new();
    let mut remote_names = HashMap::new();
    for path in &made {
        local_names.insert(std::fs::symlink_metadata(root.join(path)).unwrap().ino(), format!("/{path}"));
        remote_names.insert(client.lookup(&format!("/{path}")).unwrap().ino, format!("/{path}"));
    }
    let root_fd: OwnedFd = std::fs::File::open(root).unwrap().into();

    let mut reached = 0;
    let mut refused: HashMap<i32, usize> = HashMap::new();
    for i in 0..2000 {
        // Half wholly random; half a created entry with a random tail, which more often
        // reaches something.
        let path = match i % 2 {
            0 => rng.path(6, &link_names),
            _ => match rng.below(3) {
                0 => made[rng.below(made.len())].clone(),
                _ => format!("{}/{}", made[rng.below(made.len())], rng.path(2, &link_names)),
            },
        };
        let path = if path.is_empty() { "/".to_string() } else { path };
        for follow in [true, false] {
            let kernel = local(&root_fd, &path, follow, &local_names);
            let tessera = remote(&client, &path, follow, &remote_names);
            assert_eq!(tessera, kernel, "seed {seed:#x}, path {path:?}, final link followed: {follow}\n{}", describe(root));
            match kernel {
                Ok(_) => reached += 1,
                Err(errno) => *refused.entry(errno).or_default() += 1,
            }
        }
    }
    // The random paths reach entries and meet each refusal, so the comparison covered them.
    eprintln!("seed {seed:#x}: {reached} of 4000 resolutions reached an entry; refusals by errno {refused:?}");
    assert!(reached > 500, "seed {seed:#x}: only {reached} paths reached an entry");
    for errno in [libc::ENOENT, libc::ENOTDIR, libc::ELOOP] {
        assert!(refused.get(&errno).copied().unwrap_or(0) > 5, "seed {seed:#x}: errno {errno} met {refused:?}");
    }
}

/// The local tree's links, for a failure message.
fn describe(root: &Path) -> String {
    let mut out = String::new();
    for home in LINK_HOMES {
        for entry in std::fs::read_dir(root.join(home)).unwrap().flatten() {
            if let Ok(target) = std::fs::read_link(entry.path()) {
                out.push_str(&format!("  /{}{} -> {}\n", if home.is_empty() { String::new() } else { format!("{home}/") }, entry.file_name().to_string_lossy(), target.display()));
            }
        }
    }
    out
}
