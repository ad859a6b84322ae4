//! The client commands on coreutils' conventions: several operands, each done even when another
//! fails; `--cluster` before the subcommand; `put` keeping the local mode and holes; `ls -d`
//! and `ls -lh`. Real `tessera` processes against a cluster `tessera up` started on loopback.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::run;

/// A cluster started with `tessera up`; stopped with `tessera down` even when a test fails.
struct UpCluster {
    dir: tempfile::TempDir,
}

impl UpCluster {
    fn start() -> UpCluster {
        let dir = tempfile::Builder::new().prefix("tessera-operands-").tempdir().unwrap();
        let out = run(&["up", "--dir", dir.path().to_str().unwrap(), "--osds", "2", "--stripe-unit", "64K"], None);
        assert!(out.status.success(), "up: {}", text(&out.stderr));
        UpCluster { dir }
    }

    fn cluster_file(&self) -> PathBuf {
        self.dir.path().join("cluster.toml")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = run(args, Some(&self.cluster_file()));
        assert!(out.status.success(), "`tessera {}` failed: {}", args.join(" "), text(&out.stderr));
        text(&out.stdout)
    }

    /// Runs a command that must fail; returns its stdout and stderr.
    fn fails(&self, args: &[&str]) -> (String, String) {
        let out = run(args, Some(&self.cluster_file()));
        assert!(!out.status.success(), "`tessera {}` should fail: {}", args.join(" "), text(&out.stdout));
        (text(&out.stdout), text(&out.stderr))
    }

    fn exists(&self, path: &str) -> bool {
        run(&["stat", path], Some(&self.cluster_file())).status.success()
    }

    /// Bytes the OSDs' stores take on disk.
    fn stored_bytes(&self) -> u64 {
        fn walk(path: &Path) -> u64 {
            let meta = std::fs::symlink_metadata(path).unwrap();
            let own = meta.blocks() * 512;
            if !meta.is_dir() {
                return own;
            }
            own + std::fs::read_dir(path).unwrap().map(|e| walk(&e.unwrap().path())).sum::<u64>()
        }
        (0..2).map(|i| walk(&self.dir.path().join(format!("osd{i}")))).sum()
    }
}

impl Drop for UpCluster {
    fn drop(&mut self) {
        run(&["down", "--dir", self.dir.path().to_str().unwrap()], None);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_operand_is_done_even_when_one_fails() {
    let c = UpCluster::start();
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    std::fs::write(&local, b"one\n").unwrap();
    let local = local.to_str().unwrap();

    c.ok(&["mkdir", "/d"]);
    let (_, err) = c.fails(&["mkdir", "/m1", "/d", "/m2"]);
    assert!(err.contains("/d") && err.contains("1 of 3"), "{err}");
    assert!(c.exists("/m1") && c.exists("/m2"), "mkdir went on after /d");

    c.ok(&["put", local, "/r1"]);
    c.ok(&["put", local, "/r2"]);
    let (_, err) = c.fails(&["rm", "/r1", "/nope", "/r2"]);
    assert!(err.contains("/nope"), "{err}");
    assert!(!c.exists("/r1") && !c.exists("/r2"), "rm went on after /nope");
    let (_, err) = c.fails(&["rm", "-r", "/m1", "/nope", "/m2"]);
    assert!(err.contains("/nope"), "{err}");
    assert!(!c.exists("/m1") && !c.exists("/m2"), "rm -r went on after /nope");

    // stat, cat, chmod and getstripe take several paths, and go on past a bad one.
    c.ok(&["put", local, "/a"]);
    c.ok(&["put", local, "/b"]);
    let stat = c.ok(&["stat", "/a", "/b"]);
    assert!(stat.contains("path: /a") && stat.contains("path: /b"), "{stat}");
    assert_eq!(c.ok(&["cat", "/a", "/b"]), "one\none\n");
    let (out, err) = c.fails(&["cat", "/a", "/nope", "/b"]);
    assert_eq!(out, "one\none\n", "{err}");
    c.ok(&["chmod", "600", "/a", "/b"]);
    for path in ["/a", "/b"] {
        assert!(c.ok(&["stat", path]).contains("mode: 0600"), "{path}");
    }
    let stripes = c.ok(&["getstripe", "/a", "/b"]);
    assert_eq!(stripes.matches("stripe_count: ").count(), 2, "{stripes}");
}

#[test]
fn cluster_may_come_before_the_subcommand() {
    let c = UpCluster::start();
    let file = c.cluster_file();
    let out = run(&["--cluster", file.to_str().unwrap(), "mkdir", "/before"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["--cluster", file.to_str().unwrap(), "ls", "/"], None);
    assert!(out.status.success() && text(&out.stdout).contains("before"), "{}", text(&out.stderr));
}

#[test]
fn put_keeps_the_local_mode_and_holes() {
    let c = UpCluster::start();
    let work = tempfile::tempdir().unwrap();
    let exe = work.path().join("exe");
    std::fs::write(&exe, b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o750)).unwrap();
    c.ok(&["put", exe.to_str().unwrap(), "/exe"]);
    let stat = c.ok(&["stat", "/exe"]);
    assert!(stat.contains("mode: 0750"), "{stat}");

    // 32 MiB with 4 KiB of data at 20 MiB: the rest are holes, the end included.
    let sparse = work.path().join("sparse");
    let file = std::fs::File::create(&sparse).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0xa5; 4096], 20 << 20).unwrap();
    file.set_len(32 << 20).unwrap();
    let before = c.stored_bytes();
    c.ok(&["put", sparse.to_str().unwrap(), "/sparse"]);
    let grew = c.stored_bytes() - before;
    assert!(grew < 4 << 20, "a 32 MiB file of 4 KiB of data took {grew} bytes on the OSDs");
    let back = work.path().join("back");
    c.ok(&["get", "/sparse", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&sparse).unwrap());
    let local = std::fs::metadata(&back).unwrap().blocks() * 512;
    assert!(local < 4 << 20, "get keeps the holes too: {local} bytes allocated locally");
}

#[test]
fn ls_lh_shows_human_sizes_and_ls_d_the_directory_itself() {
    let c = UpCluster::start();
    let work = tempfile::tempdir().unwrap();
    let big = work.path().join("big");
    std::fs::File::create(&big).unwrap().set_len(32 << 20).unwrap();
    c.ok(&["put", big.to_str().unwrap(), "/big"]);
    let ls = c.ok(&["ls", "-lh", "/"]);
    assert!(ls.lines().any(|l| l.contains(" 32M ") && l.ends_with("big")), "{ls}");
    assert!(c.ok(&["ls", "-l", "/"]).contains(" 33554432 "), "without -h, bytes");

    c.ok(&["mkdir", "/d"]);
    c.ok(&["put", big.to_str().unwrap(), "/d/inside"]);
    assert_eq!(c.ok(&["ls", "-d", "/d"]), "/d\n");
    let ld = c.ok(&["ls", "-ld", "/d"]);
    assert!(ld.starts_with("drwx") && ld.trim_end().ends_with("/d") && !ld.contains("inside"), "{ld}");
}

#[test]
fn ls_hides_dot_names_unless_asked_and_chmod_takes_symbolic_modes() {
    let c = UpCluster::start();
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    std::fs::write(&local, b"data").unwrap();
    c.ok(&["mkdir", "/d"]);
    c.ok(&["put", local.to_str().unwrap(), "/d/.hidden"]);
    c.ok(&["put", local.to_str().unwrap(), "/d/shown"]);
    assert_eq!(c.ok(&["ls", "/d"]), "shown\n");
    assert_eq!(c.ok(&["ls", "-A", "/d"]), ".hidden\nshown\n");
    assert_eq!(c.ok(&["ls", "-a", "/d"]), ".\n..\n.hidden\nshown\n");
    let la = c.ok(&["ls", "-la", "/d"]);
    let line = |name: &str| la.lines().find(|l| l.ends_with(&format!(" {name}"))).unwrap_or_else(|| panic!("{name} in {la}")).to_string();
    assert!(line(".").starts_with("drwx") && line("..").starts_with("drwx"), "{la}");
    assert_eq!(c.ok(&["ls", "/d/.hidden"]), "/d/.hidden\n", "a hidden file named on its own is listed");

    let mode = |path: &str| {
        let stat = c.ok(&["stat", path]);
        stat.lines().find_map(|l| l.trim().strip_prefix("mode: ")).map(|m| m[..4].to_string()).unwrap_or_else(|| panic!("{stat}"))
    };
    c.ok(&["chmod", "644", "/d/shown"]);
    c.ok(&["chmod", "u+x,g=u", "/d/shown"]);
    assert_eq!(mode("/d/shown"), "0774");
    c.ok(&["chmod", "a-x,o=", "/d/shown"]);
    assert_eq!(mode("/d/shown"), "0660");
    // No class named: the umask's bits are left alone (the command inherits this process's).
    // SAFETY: umask(2) cannot fail; the value is put back at once.
    let umask = unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    };
    c.ok(&["chmod", "-w", "/d/shown"]);
    let expected = format!("{:04o}", 0o660 & !(0o222 & !umask));
    assert_eq!(mode("/d/shown"), expected, "a mode that starts with `-` is a mode, not an option (umask {umask:03o})");
    c.ok(&["chmod", "a-w", "/d/shown"]);
    assert_eq!(mode("/d/shown"), "0440");
    c.ok(&["chmod", "a+X", "/d"]);
    c.ok(&["chmod", "go-rx", "/d"]);
    assert_eq!(mode("/d"), "0700");
    c.ok(&["chmod", "a+X", "/d"]);
    assert_eq!(mode("/d"), "0711", "X is search on a directory");
    let (_, err) = c.fails(&["chmod", "u+y", "/d/shown"]);
    assert!(err.contains("`u+y` is not a mode") && err.contains("e.g. u+x,go-w"), "{err}");
    assert_eq!(mode("/d/shown"), "0440", "a refused mode changes nothing");
}
