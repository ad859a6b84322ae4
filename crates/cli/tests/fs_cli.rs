//! The file-system commands end to end: `tessera up` starts real `tessera mds` and `tessera osd`
//! processes on loopback, and every client command runs as its own `tessera` process against
//! them, exactly as a user types it. Contents are checked byte for byte against local copies.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::run;

/// A cluster started with `tessera up`; stopped with `tessera down` even when a test fails.
struct UpCluster {
    dir: tempfile::TempDir,
}

impl UpCluster {
    fn start(osds: u32) -> UpCluster {
        Self::start_with(osds, 1)
    }

    fn start_with(osds: u32, mds: u32) -> UpCluster {
        let dir = tempfile::Builder::new().prefix("tessera-fs-").tempdir().unwrap();
        let cluster = UpCluster { dir };
        cluster.up_with(osds, mds);
        cluster
    }

    fn up(&self, osds: u32) {
        self.up_with(osds, 1);
    }

    fn up_with(&self, osds: u32, mds: u32) {
        let args = ["up", "--dir", self.path_str(), "--osds", &osds.to_string(), "--mds", &mds.to_string(), "--stripe-unit", "64K"];
        let out = run_ok(&args, None);
        assert!(stdout(&out).contains("export TESSERA_CLUSTER="), "{}", stdout(&out));
    }

    fn down(&self) -> Output {
        run(&["down", "--dir", self.path_str()], None)
    }

    fn path_str(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    fn cluster_file(&self) -> PathBuf {
        self.dir.path().join("cluster.toml")
    }

    /// Runs a client command against this cluster (via TESSERA_CLUSTER) and requires success.
    fn ok(&self, args: &[&str]) -> Output {
        run_ok(args, Some(&self.cluster_file()))
    }

    fn fails(&self, args: &[&str]) -> String {
        let out = run(args, Some(&self.cluster_file()));
        assert!(!out.status.success(), "`tessera {}` should fail; stdout: {}", args.join(" "), stdout(&out));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for UpCluster {
    fn drop(&mut self) {
        self.down();
    }
}

fn run_ok(args: &[&str], cluster: Option<&Path>) -> Output {
    let out = run(args, cluster);
    assert!(
        out.status.success(),
        "`tessera {}` failed: {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr),
        stdout(&out)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Bytes that differ at every offset, so a misplaced stripe unit never compares equal.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn put_and_get_round_trip_files_of_every_awkward_size() {
    let c = UpCluster::start(3);
    let work = tempfile::tempdir().unwrap();
    // 64 KiB units over 3 OSDs: a row is 192 KiB.
    for (i, len) in [0usize, 1, 64 * 1024 - 1, 3 * 192 * 1024 + 12_345].into_iter().enumerate() {
        let local = work.path().join(format!("in{i}"));
        let back = work.path().join(format!("out{i}"));
        let data = pattern(i as u64 + 1, len);
        std::fs::write(&local, &data).unwrap();
        let remote = format!("/f{i}");
        c.ok(&["put", local.to_str().unwrap(), &remote]);
        c.ok(&["get", &remote, back.to_str().unwrap()]);
        assert_eq!(std::fs::read(&back).unwrap(), data, "round trip of {len} bytes");
        let cat = c.ok(&["cat", &remote]);
        assert_eq!(cat.stdout, data, "cat of {len} bytes");
        let stat = stdout(&c.ok(&["stat", &remote]));
        assert!(stat.contains(&format!("size: {len}")), "{stat}");
    }
    // Overwriting a file replaces its contents, including shrinking it.
    let small = work.path().join("small");
    std::fs::write(&small, b"short").unwrap();
    c.ok(&["put", small.to_str().unwrap(), "/f3"]);
    assert_eq!(c.ok(&["cat", "/f3"]).stdout, b"short");
    let ls = stdout(&c.ok(&["ls", "-l", "/"]));
    for name in ["f0", "f1", "f2", "f3"] {
        assert!(ls.contains(name), "{ls}");
    }
    // A new local copy takes the file's mode (less the umask), as cp(1) gives one; a file
    // that is there keeps its own, and its new contents replace the old whole.
    use std::os::unix::fs::PermissionsExt;
    c.ok(&["chmod", "750", "/f3"]);
    let fresh = work.path().join("fresh");
    c.ok(&["get", "/f3", fresh.to_str().unwrap()]);
    assert_eq!(std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o700, 0o700, "the owner's bits come over");
    std::fs::write(&small, b"a longer old local file").unwrap();
    std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o640)).unwrap();
    c.ok(&["get", "/f3", small.to_str().unwrap()]);
    assert_eq!(std::fs::read(&small).unwrap(), b"short");
    assert_eq!(std::fs::metadata(&small).unwrap().permissions().mode() & 0o7777, 0o640);
    // Names of the longest length go in, are copied and come back: the temporaries beside them
    // fit too.
    let (long_a, long_b) = ("a".repeat(255), "b".repeat(255));
    let local_long = work.path().join(&long_a);
    std::fs::write(&local_long, b"a long name").unwrap();
    c.ok(&["put", local_long.to_str().unwrap(), &format!("/{long_a}")]);
    c.ok(&["put", local_long.to_str().unwrap(), &format!("/{long_a}")]);
    c.ok(&["cp", &format!("/{long_a}"), &format!("/{long_b}")]);
    c.ok(&["get", &format!("/{long_b}"), work.path().join(&long_b).to_str().unwrap()]);
    assert_eq!(std::fs::read(work.path().join(&long_b)).unwrap(), b"a long name");
}

#[test]
fn striping_is_set_per_directory_and_reported_per_file() {
    let c = UpCluster::start(4);
    c.ok(&["mkdir", "-p", "/wide/narrow"]);
    c.ok(&["setstripe", "-c", "2", "-S", "128K", "/wide/narrow"]);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("x");
    std::fs::write(&local, pattern(9, 1 << 20)).unwrap();
    c.ok(&["put", local.to_str().unwrap(), "/wide/narrow/x"]);
    c.ok(&["put", local.to_str().unwrap(), "/wide/x"]);

    let narrow = stdout(&c.ok(&["getstripe", "/wide/narrow/x"]));
    assert!(narrow.contains("stripe_count: 2  stripe_size: 131072"), "{narrow}");
    assert_eq!(narrow.lines().filter(|l| l.contains("0x")).count(), 2, "{narrow}");
    let wide = stdout(&c.ok(&["getstripe", "/wide/x"]));
    assert!(wide.contains("stripe_count: 4  stripe_size: 65536"), "{wide}");
    let dir = stdout(&c.ok(&["getstripe", "/wide/narrow"]));
    assert!(dir.contains("stripe_count: 2"), "{dir}");
    // An option left out keeps the directory's, the first OSD included.
    c.ok(&["setstripe", "-i", "3", "/wide/narrow"]);
    c.ok(&["setstripe", "-S", "256K", "/wide/narrow"]);
    let dir = stdout(&c.ok(&["getstripe", "/wide/narrow"]));
    assert!(dir.contains("stripe_count: 2  stripe_size: 262144 (256 KiB)  stripe_index: 3"), "{dir}");

    // -1 is every OSD, as in Lustre's `lfs setstripe -c -1`; on put too.
    c.ok(&["mkdir", "/wide/all"]);
    c.ok(&["setstripe", "-c", "-1", "/wide/all"]);
    assert!(stdout(&c.ok(&["getstripe", "/wide/all"])).contains("stripe_count: all OSDs"));
    c.ok(&["put", "-c", "-1", "-S", "64K", local.to_str().unwrap(), "/wide/narrow/every"]);
    assert!(stdout(&c.ok(&["getstripe", "/wide/narrow/every"])).contains("stripe_count: 4  stripe_size: 65536"));

    // An explicit layout on put; an existing file's layout cannot change.
    c.ok(&["put", "-c", "1", "-S", "4M", local.to_str().unwrap(), "/one"]);
    assert!(stdout(&c.ok(&["getstripe", "/one"])).contains("stripe_count: 1  stripe_size: 4194304"));
    let err = c.fails(&["put", "-c", "2", local.to_str().unwrap(), "/one"]);
    assert!(err.contains("layout is fixed"), "{err}");
    let err = c.fails(&["setstripe", "-c", "2", "/one"]);
    assert!(err.contains("file exists") && err.contains("layout is fixed when it is made"), "{err}");

    // Attributes land on every data object of the file.
    c.ok(&["attr", "set", "/wide/x", "0x10000:1", "tag-7"]);
    let got = stdout(&c.ok(&["attr", "get", "/wide/x", "0x10000:1"]));
    assert_eq!(got.matches("\"tag-7\"").count(), 4, "{got}");
    // The pages the OSD and the file system keep are refused, and nothing changes: a logical
    // length set on each object would make every object, and so the file, that long.
    let size_of = |path: &str| stdout(&c.ok(&["stat", path])).lines().find(|l| l.trim_start().starts_with("size:")).map(str::to_string);
    let size_before = size_of("/wide/x");
    assert!(size_before.is_some());
    let err = c.fails(&["attr", "set", "/wide/x", "1:0x82", "0x0000000000100000"]);
    assert!(err.contains("page 0x1 is kept by the OSD") && err.contains("tessera truncate"), "{err}");
    let err = c.fails(&["attr", "set", "/wide/x", "0x10000:0xFFFFFFFF", "x"]);
    assert!(err.contains("attribute number 0xffffffff cannot be set"), "{err}");
    let err = c.fails(&["attr", "set", "/wide/x", "0x20000000:1", "x"]);
    assert!(err.contains("application pages 0x10000..0x1fffffff"), "{err}");
    assert_eq!(size_of("/wide/x"), size_before);
    let list = stdout(&c.ok(&["attr", "list", "/wide/x"]));
    assert!(list.contains("0x1:0x82"), "logical length listed: {list}");
    // Timestamps read as dates, as the OSD keeps them: milliseconds since the epoch.
    let year = tessera_cli::fs::namespace::time_string(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64)[..4].to_string();
    let times = stdout(&c.ok(&["attr", "list", "/wide/x", "--page", "3"]));
    let created = times.lines().find(|l| l.trim_start().starts_with("0x3:0x1 = ")).unwrap_or_else(|| panic!("{times}"));
    assert!(created.contains(&format!("({year}-")) && created.ends_with(" UTC)"), "{created}");
}

/// Goal: `mkdir` makes directories with the modes mkdir(1) gives: a=rwx less the umask, MODE
/// from `-m` (octal or symbolic, from a=rwx, special bits included), and with `-p` the mode
/// only on the last directory, its new parents getting the default with u+wx; `put -` makes a
/// file a=rw less the umask. Method: mkdir and put under umasks 022, 027 and 077, then read
/// each mode back with `stat`.
#[test]
fn mkdir_modes_follow_the_umask_and_m() {
    use std::os::unix::process::CommandExt;
    let c = UpCluster::start(1);
    let mode_of = |path: &str| {
        let stat = stdout(&c.ok(&["stat", path]));
        stat.lines().find_map(|l| l.trim().strip_prefix("mode: ")).map(|m| m[..4].to_string()).unwrap()
    };
    let mkdir_under = |umask: libc::mode_t, args: &[&str]| {
        let mut cmd = std::process::Command::new(common::tessera_exe());
        cmd.arg("mkdir").args(args).env("TESSERA_CLUSTER", c.cluster_file());
        // SAFETY: umask(2) in the child before exec; it cannot fail.
        unsafe { cmd.pre_exec(move || { libc::umask(umask); Ok(()) }) };
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "mkdir {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    mkdir_under(0o022, &["/open"]);
    mkdir_under(0o077, &["/private"]);
    mkdir_under(0o077, &["-p", "/deep/er"]);
    mkdir_under(0o022, &["-m", "1777", "/scratch"]);
    mkdir_under(0o022, &["-m", "go-rwx", "/mine"]);
    mkdir_under(0o022, &["-p", "-m", "700", "/made/last"]);
    // A file from standard input: a=rw less the umask, as a shell's `> file`.
    let mut put = std::process::Command::new(common::tessera_exe());
    put.args(["put", "-", "/open/piped"]).env("TESSERA_CLUSTER", c.cluster_file()).stdin(std::process::Stdio::null());
    // SAFETY: umask(2) in the child before exec; it cannot fail.
    unsafe { put.pre_exec(|| { libc::umask(0o027); Ok(()) }) };
    assert!(put.output().unwrap().status.success());
    for (path, mode) in
        [("/open", "0755"), ("/private", "0700"), ("/deep", "0700"), ("/deep/er", "0700"), ("/scratch", "1777"), ("/mine", "0700"), ("/made", "0755"), ("/made/last", "0700"), ("/open/piped", "0640")]
    {
        assert_eq!(mode_of(path), mode, "{path}");
    }
    let err = c.fails(&["mkdir", "-m", "888", "/bad"]);
    assert!(err.contains("`888` is not a mode"), "{err}");
}

/// Goal: `chmod -R` and `chown -R` change a whole tree, parents and contents, as coreutils
/// does: chmod leaves symbolic links inside alone, chown changes the links themselves, and a
/// file operand is changed alone. Method: a small tree with a link in it; read every mode and
/// owner back with `stat` (links not followed).
#[test]
fn chmod_and_chown_change_whole_trees_with_r() {
    let c = UpCluster::start(1);
    c.ok(&["mkdir", "-p", "/r/a/b"]);
    for (file, text) in [("/r/a/f", "f"), ("/r/a/b/g", "g")] {
        let local = c.dir.path().join("src");
        std::fs::write(&local, text).unwrap();
        std::fs::set_permissions(&local, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        c.ok(&["put", local.to_str().unwrap(), file]);
    }
    c.ok(&["ln", "-s", "/r/a/f", "/r/link"]);
    let attrs_of = |path: &str| {
        let stat = stdout(&c.ok(&["stat", path]));
        let field = |name: &str| stat.lines().find_map(|l| l.trim().strip_prefix(name).map(str::to_string)).unwrap();
        (field("mode: ")[..4].to_string(), field("owner: "))
    };
    c.ok(&["chmod", "-R", "go-rwx", "/r"]);
    for (path, mode) in [("/r", "0700"), ("/r/a", "0700"), ("/r/a/b", "0700"), ("/r/a/f", "0600"), ("/r/a/b/g", "0600"), ("/r/link", "0777")] {
        assert_eq!(attrs_of(path).0, mode, "chmod -R: {path}");
    }
    c.ok(&["chmod", "-R", "640", "/r/a/f"]);
    assert_eq!(attrs_of("/r/a/f").0, "0640", "a file operand alone");
    assert_eq!(attrs_of("/r/a/b/g").0, "0600");
    c.ok(&["chown", "-R", "123:456", "/r"]);
    for path in ["/r", "/r/a", "/r/a/b", "/r/a/f", "/r/a/b/g", "/r/link"] {
        assert_eq!(attrs_of(path).1, "uid 123 gid 456", "chown -R: {path}");
    }
    let err = c.fails(&["chmod", "-R", "700", "/r/missing"]);
    assert!(err.contains("chmod /r/missing: no such file or directory"), "{err}");
}

#[test]
fn namespace_commands_and_their_errors() {
    let c = UpCluster::start(2);
    c.ok(&["mkdir", "/a"]);
    let err = c.fails(&["mkdir", "/a"]);
    assert!(err.contains("mkdir /a: file exists"), "EEXIST: {err}");
    let err = c.fails(&["mkdir", "/missing/b"]);
    assert!(err.contains("mkdir /missing/b: no such file or directory\n"), "ENOENT named once, by the path given: {err}");
    let err = c.fails(&["touch", "/missing/t"]);
    assert!(err.contains("/missing/t: no such file or directory"), "{err}");
    c.ok(&["mkdir", "-p", "/a/b/c"]);
    // ls as GNU ls: a path named on the command line that cannot be read is status 2.
    for args in [&["ls", "/missing"][..], &["ls", "/a", "/missing"][..]] {
        let out = run(args, Some(&c.cluster_file()));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("/missing: no such file or directory"));
    }
    let err = c.fails(&["mkdir", "-p", ""]);
    assert!(err.contains("no such file or directory"), "an empty path is ENOENT, as mkdir(1) -p says: {err}");
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    std::fs::write(&local, b"payload").unwrap();
    c.ok(&["put", local.to_str().unwrap(), "/a/b/c/f"]);
    let err = c.fails(&["mkdir", "/a/b/c/f/g"]);
    assert!(err.contains("not a directory"), "ENOTDIR: {err}");
    let err = c.fails(&["mkdir", "-p", "/a/b/c/f/g"]);
    assert!(err.contains("/a/b/c/f exists and is not a directory"), "{err}");
    // A directory destination receives the file by name.
    c.ok(&["put", local.to_str().unwrap(), "/a"]);
    assert_eq!(c.ok(&["cat", "/a/f"]).stdout, b"payload");
    c.ok(&["mv", "/a/f", "/a/g"]);
    assert!(c.fails(&["cat", "/a/f"]).contains("/a/f"));
    assert_eq!(c.ok(&["cat", "/a/g"]).stdout, b"payload");
    c.ok(&["mv", "/a/g", "/a/b"]);
    assert_eq!(c.ok(&["cat", "/a/b/g"]).stdout, b"payload");
    // Several sources, as mv(1): into a directory, and refused onto anything else.
    c.ok(&["put", local.to_str().unwrap(), "/m1"]);
    c.ok(&["put", local.to_str().unwrap(), "/m2"]);
    let err = c.fails(&["mv", "/m1", "/m2", "/a/b/g"]);
    assert!(err.contains("target /a/b/g is not a directory"), "{err}");
    c.ok(&["mv", "/m1", "/m2", "/a/b/c"]);
    assert_eq!(c.ok(&["cat", "/a/b/c/m1"]).stdout, b"payload");
    assert_eq!(c.ok(&["cat", "/a/b/c/m2"]).stdout, b"payload");
    c.ok(&["rm", "/a/b/c/m1", "/a/b/c/m2"]);
    let err = c.fails(&["rm", "/a"]);
    assert!(err.contains("use -r"), "{err}");
    // As rm(1): the root and paths ending in '..' are refused before anything goes.
    for root in ["/", "//", "/a/.."] {
        let err = c.fails(&["rm", "-r", root]);
        assert!(err.contains("refusing to remove"), "{root}: {err}");
    }
    let err = c.fails(&["rm", "-r", "/a/b/.."]);
    assert!(err.contains("'.' or '..'"), "{err}");
    assert_eq!(c.ok(&["cat", "/a/b/g"]).stdout, b"payload");
    // A striping the cluster (two OSDs) cannot give is refused with its reason, nothing made.
    for (flags, reason) in [
        (["-c", "3"], "more than the cluster's 2 OSDs"),
        (["-i", "2"], "stripe index 2 names no OSD"),
        (["-S", "0"], "stripe size 0 bytes is outside"),
    ] {
        let err = c.fails(&["setstripe", flags[0], flags[1], "/a/striped"]);
        assert!(err.contains(reason), "{flags:?}: {err}");
    }
    assert!(c.fails(&["stat", "/a/striped"]).contains("no such file"));
    c.ok(&["rm", "-r", "/a"]);
    assert!(c.fails(&["ls", "/a"]).contains("/a"));
    c.ok(&["rm", "-f", "/a"]);
    // --no-preserve-root empties the root and keeps it.
    c.ok(&["mkdir", "-p", "/x/y"]);
    c.ok(&["put", local.to_str().unwrap(), "/x/y/f"]);
    c.ok(&["rm", "-r", "--no-preserve-root", "/"]);
    assert_eq!(stdout(&c.ok(&["ls", "/"])), "");
    // rmdir removes empty directories only; -p their emptied ancestors too.
    c.ok(&["mkdir", "-p", "/r/s/t"]);
    assert!(c.fails(&["rmdir", "/r"]).contains("rmdir /r: directory not empty"));
    assert!(c.fails(&["rmdir", "/"]).contains("it is the root"));
    c.ok(&["rmdir", "-p", "/r/s/t"]);
    assert_eq!(stdout(&c.ok(&["ls", "/"])), "", "/r/s/t, /r/s and /r are gone");
    // The OSDs hold no data objects once every file is removed.
    let df = stdout(&c.ok(&["df"]));
    assert!(df.contains("namespace: 0 files, 1 directory, 0 symlinks"), "{df}");
    // Both OSDs live on the test's one file system: each is formatted to its size, and the
    // total counts that file system once, with no more free space than it has.
    let row = |name: &str| -> Vec<String> {
        let line = df.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} row: {df}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        // name, [portal], size and unit, used and unit, avail and unit, use%.
        let tail = &cells[cells.len() - 7..];
        vec![format!("{} {}", tail[0], tail[1]), format!("{} {}", tail[4], tail[5])]
    };
    assert_eq!(row("osd0"), row("osd1"), "{df}");
    assert_eq!(row("total"), row("osd0"), "a shared file system counts once: {df}");
    assert!(df.contains("osd0, osd1 share one file system"), "{df}");
}

#[test]
fn restart_of_every_daemon_keeps_flushed_files_and_status_tracks_them() {
    let c = UpCluster::start(3);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("keep");
    let data = pattern(77, 700_001);
    std::fs::write(&local, &data).unwrap();
    c.ok(&["mkdir", "/d"]);
    c.ok(&["put", local.to_str().unwrap(), "/d/keep"]);
    let status = stdout(&c.ok(&["status", "--dir", c.path_str()]));
    assert_eq!(status.lines().filter(|l| l.contains(" up ")).count(), 4, "{status}");

    let err = c.fails(&["up", "--dir", c.path_str(), "--osds", "3"]);
    assert!(err.contains("already running"), "{err}");
    let down = c.down();
    assert!(down.status.success());
    assert_eq!(stdout(&down).lines().filter(|l| l.starts_with("stopped")).count(), 4);
    let out = run(&["status", "--cluster", c.cluster_file().to_str().unwrap()], None);
    assert!(!out.status.success(), "status must fail when daemons are down");
    assert_eq!(stdout(&out).lines().filter(|l| l.contains(" down ")).count(), 4, "{}", stdout(&out));
    let err = c.fails(&["ls", "/"]);
    assert!(err.contains("Connection refused") && err.contains("is the metadata server running?"), "a stopped cluster is explained: {err}");

    // Restarting with fewer OSDs would strand stripes: refused, even when meant.
    let err = c.fails(&["up", "--dir", c.path_str(), "--osds", "2"]);
    assert!(err.contains("the cluster has 3"), "{err}");
    let err = c.fails(&["up", "--dir", c.path_str(), "--osds", "2", "--reconfigure"]);
    assert!(err.contains("strand"), "{err}");
    c.up(3);
    let back = work.path().join("back");
    c.ok(&["get", "/d/keep", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), data);
}

#[test]
fn client_commands_explain_a_missing_cluster() {
    let out = run(&["ls", "/"], None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TESSERA_CLUSTER"), "{err}");
    let out = run(&["ls", "/", "--cluster", "/nonexistent/cluster.toml"], None);
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/cluster.toml"));
    // `export TESSERA_CLUSTER=` leaves it empty: that is no cluster given, said as such.
    for args in [&["ls", "/"][..], &["status"][..]] {
        let out = run(args, Some(std::path::Path::new("")));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("which cluster?") && !err.contains("a value is required"), "{args:?}: {err}");
    }
}

#[test]
fn the_readme_demo_runs_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(&["demo", "--dir", dir.path().join("c").to_str().unwrap()], None);
    let text = stdout(&out);
    for expected in ["byte for byte equal", "stripe_count: 4", "after restart", "read 1024 x 64 B", "demo finished"] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn get_pieces_reads_an_extent_list_in_list_order() {
    let c = UpCluster::start(3);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("src");
    let data = pattern(5, 1 << 20);
    std::fs::write(&local, &data).unwrap();
    c.ok(&["put", "-c", "3", "-S", "4K", local.to_str().unwrap(), "/src"]);
    // Across stripe units and OSDs, out of order, overlapping, one past the end of file.
    let pieces = [(100u64, 10u64), (0, 5), (4090, 20), (200_000, 70_000), (104, 4), ((1 << 20) - 3, 8)];
    let list = work.path().join("pieces.txt");
    let mut text = String::from("# offset length\n");
    for (o, l) in pieces {
        text.push_str(&format!("{o:#x} {l}\n"));
    }
    std::fs::write(&list, text).unwrap();
    let out = work.path().join("out");
    let got = c.ok(&["get", "--pieces", list.to_str().unwrap(), "/src", out.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&got.stderr);
    assert!(said.contains("5 bytes of the listed pieces lie past the end of /src (1048576 bytes)"), "{said}");
    let mut expected = Vec::new();
    for (o, l) in pieces {
        for i in o..o + l {
            expected.push(data.get(i as usize).copied().unwrap_or(0));
        }
    }
    assert_eq!(std::fs::read(&out).unwrap(), expected);

    // `--pieces -`: the list on standard input, the pieces on standard output.
    let mut child = std::process::Command::new(common::tessera_exe())
        .args(["get", "--pieces", "-", "/src", "-"])
        .env("TESSERA_CLUSTER", c.cluster_file())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &std::fs::read(&list).unwrap()).unwrap();
    let piped = child.wait_with_output().unwrap();
    assert!(piped.status.success());
    assert_eq!(piped.stdout, expected, "the same pieces from a list on standard input");

    std::fs::write(&list, "0 10\n5 zero\n").unwrap();
    let err = c.fails(&["get", "--pieces", list.to_str().unwrap(), "/src", out.to_str().unwrap()]);
    assert!(err.contains("line 2"), "the error names the line: {err}");
}

/// Two top-level directories, homed on server 0 and on server 1 of a two-server cluster.
fn dirs_on_both_servers(c: &UpCluster) -> (String, String) {
    for i in 0..8 {
        c.ok(&["mkdir", &format!("/d{i}")]);
    }
    let on = |server: u32| (0..8).map(|i| format!("/d{i}")).find(|d| home_server(c, d) == server).expect("a directory on each server");
    (on(0), on(1))
}

/// The metadata server a path's inode lives on, from `tessera stat`.
fn home_server(c: &UpCluster, path: &str) -> u32 {
    let out = stdout(&c.ok(&["stat", path]));
    let at = out.find("(metadata server ").unwrap_or_else(|| panic!("{out}"));
    out[at + 17..].split(')').next().unwrap().parse().unwrap()
}

/// Goal: `mv` between directories homed on different metadata servers (which cannot rename
/// across servers) moves anyway, as mv(1) does between file systems: a file keeps its bytes
/// (a run of zeros among them), mode, times and striping, a directory tree arrives whole, an existing file at the
/// destination is replaced, and nothing is left at the source.
#[test]
fn mv_across_metadata_servers_copies_and_removes() {
    let c = UpCluster::start_with(2, 2);
    let (here, there) = dirs_on_both_servers(&c);

    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    // 1 MiB of zeros in the middle: the copy skips writing them, and must still read back.
    let mut data = pattern(5, 700_001);
    data.extend(vec![0u8; 1 << 20]);
    data.extend(pattern(6, 600_000));
    std::fs::write(&local, &data).unwrap();
    let src = format!("{here}/f");
    c.ok(&["put", "-c", "2", "-S", "128K", local.to_str().unwrap(), &src]);
    // Attributes an application set on the objects go with them.
    c.ok(&["attr", "set", &src, "0x10000:7", "hello"]);
    c.ok(&["chmod", "600", &src]);
    let before = stdout(&c.ok(&["stat", &src]));
    let modify = |stat: &str| stat.lines().find(|l| l.trim_start().starts_with("modify:")).unwrap().to_string();
    c.ok(&["put", local.to_str().unwrap(), &format!("{there}/f")]);

    c.ok(&["mv", &src, &format!("{there}/f")]);
    let moved = format!("{there}/f");
    let after = stdout(&c.ok(&["stat", &moved]));
    assert!(after.contains("mode: 0600"), "{after}");
    assert_eq!(modify(&after), modify(&before));
    assert!(stdout(&c.ok(&["getstripe", &moved])).contains("stripe_count: 2  stripe_size: 131072"));
    let kept = stdout(&c.ok(&["attr", "get", &moved, "0x10000:7"]));
    assert_eq!(kept.lines().filter(|l| l.ends_with(": \"hello\"")).count(), 2, "on both objects: {kept}");
    let back = work.path().join("back");
    c.ok(&["get", &moved, back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), data);
    assert!(c.fails(&["stat", &src]).contains("no such file"));
    assert_eq!(stdout(&c.ok(&["ls", "-A", &there])), "f\n", "no temporary left beside it");
    // Several paths, as ls(1): files first, then each directory under its name.
    let both = stdout(&c.ok(&["ls", &moved, &there, &here]));
    assert_eq!(both, format!("{moved}\n\n{there}:\nf\n\n{here}:\n"));
    let err = c.fails(&["ls", &there, "/missing"]);
    assert!(err.contains("/missing") && err.contains("1 of 2 paths"), "{err}");

    // A tree, into an existing directory on the other server.
    c.ok(&["mkdir", "-p", &format!("{here}/tree/sub")]);
    c.ok(&["put", local.to_str().unwrap(), &format!("{here}/tree/sub/x")]);
    c.ok(&["mv", &format!("{here}/tree"), &there]);
    c.ok(&["get", &format!("{there}/tree/sub/x"), back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), data);
    assert_eq!(stdout(&c.ok(&["ls", &here])), "");

    // A move needs no permission on the file (rename(2) needs none), and keeps the owner:
    // read-only and unreadable files, and a directory, each owned by someone else.
    for (name, mode) in [("ro", "444"), ("none", "000")] {
        let path = format!("{here}/{name}");
        c.ok(&["put", local.to_str().unwrap(), &path]);
        c.ok(&["chown", "123:456", &path]);
        c.ok(&["chmod", mode, &path]);
        c.ok(&["mv", &path, &there]);
        let stat = stdout(&c.ok(&["stat", &format!("{there}/{name}")]));
        assert!(stat.contains(&format!("mode: 0{mode}")) && stat.contains("owner: uid 123 gid 456"), "{stat}");
        c.ok(&["chmod", "644", &format!("{there}/{name}")]);
        c.ok(&["get", &format!("{there}/{name}"), back.to_str().unwrap()]);
        assert!(std::fs::read(&back).unwrap() == data, "{name} moved whole");
    }
    c.ok(&["mkdir", &format!("{here}/owned")]);
    c.ok(&["chown", "7:8", &format!("{here}/owned")]);
    c.ok(&["mv", &format!("{here}/owned"), &there]);
    assert!(stdout(&c.ok(&["stat", &format!("{there}/owned")])).contains("owner: uid 7 gid 8"));
}

/// Goal: a command that is refused leaves both sides as they were. `get` of a missing remote
/// file or with a bad piece list does not empty the local destination; `put` of a directory
/// does not empty the remote file; `put` over a file replaces it whole, keeping its striping
/// and leaving no temporary behind; `mv` of a directory into itself is refused before anything
/// moves, also when the two directories live on different metadata servers; an empty path
/// names nothing; `mkdir -p` applies `.` and `..`.
#[test]
fn refused_commands_change_nothing_and_put_replaces_whole() {
    let c = UpCluster::start_with(2, 2);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("keep");
    std::fs::write(&local, b"precious local bytes").unwrap();
    let l = local.to_str().unwrap();

    assert!(c.fails(&["get", "/missing", l]).contains("no such file"));
    c.ok(&["put", l, "/f"]);
    let bad_list = work.path().join("pieces");
    std::fs::write(&bad_list, "0 nonsense\n").unwrap();
    c.fails(&["get", "--pieces", bad_list.to_str().unwrap(), "/f", l]);
    c.ok(&["mkdir", "/dir"]);
    c.fails(&["get", "/dir", l]);
    assert_eq!(std::fs::read(&local).unwrap(), b"precious local bytes", "refused gets left the local file alone");

    c.ok(&["setstripe", "-c", "2", "-S", "128K", "/striped"]);
    c.ok(&["put", l, "/striped"]);
    assert!(c.fails(&["put", work.path().to_str().unwrap(), "/striped"]).contains("is a directory"));
    let newer = work.path().join("newer");
    std::fs::write(&newer, pattern(3, 300_000)).unwrap();
    c.ok(&["put", newer.to_str().unwrap(), "/striped"]);
    assert!(stdout(&c.ok(&["getstripe", "/striped"])).contains("stripe_count: 2  stripe_size: 131072"), "the replaced file kept its striping");
    let back = work.path().join("back");
    c.ok(&["get", "/striped", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), pattern(3, 300_000));
    assert_eq!(stdout(&c.ok(&["ls", "-A", "/"])), "dir\nf\nstriped\n", "no temporary left behind");

    // A file no one may write is not copied over (as a write to it would be refused), by put
    // or cp; once it has a write bit it is.
    c.ok(&["chmod", "444", "/f"]);
    let err = c.fails(&["put", newer.to_str().unwrap(), "/f"]);
    assert!(err.contains("cannot put over /f: permission denied (mode 0444, owner 0:0, gives uid 0 no write permission; `tessera chmod u+w /f` first"), "{err}");
    let err = c.fails(&["cp", "/striped", "/f"]);
    assert!(err.contains("cannot cp over /f: permission denied"), "{err}");
    assert_eq!(c.ok(&["cat", "/f"]).stdout, b"precious local bytes");
    c.ok(&["chmod", "u+w", "/f"]);
    c.ok(&["cp", "/striped", "/f"]);
    assert_eq!(c.ok(&["cat", "/f"]).stdout, pattern(3, 300_000));
    assert_eq!(stdout(&c.ok(&["ls", "-A", "/"])), "dir\nf\nstriped\n", "no temporary left behind");

    // A parent and child homed on different servers: the move would have to copy.
    c.ok(&["mkdir", "-p", "/p/./q/../q/r"]);
    c.ok(&["put", l, "/p/q/r/x"]);
    let tree = stdout(&c.ok(&["ls", "/p/q/r"]));
    assert!(c.fails(&["mv", "/p", "/p/q/r"]).contains("into itself"));
    assert!(c.fails(&["mv", "/p/q", "/p/q"]).contains("into itself"), "onto itself, a directory moves into itself");
    assert!(c.fails(&["mv", "/f", "/./f"]).contains("same file"));
    // Below a file is not inside it: the rename says what is wrong with the path.
    let err = c.fails(&["mv", "/f", "/f/g"]);
    assert!(err.contains("not a directory") && !err.contains("into itself"), "{err}");
    assert_eq!(c.ok(&["cat", "/f"]).stdout, pattern(3, 300_000));
    // Through a symlink the text shows nothing amiss; the inodes do.
    c.ok(&["ln", "-s", "/p/q/r", "/rlink"]);
    let err = c.fails(&["mv", "/p", "/rlink"]);
    assert!(err.contains("cannot move /p into itself"), "{err}");
    assert_eq!(stdout(&c.ok(&["ls", "/p/q/r"])), tree, "nothing moved");
    assert_eq!(stdout(&c.ok(&["ls", "/p"])), "q\n");

    assert!(c.fails(&["stat", ""]).contains("no such file"));

    // Refusals name what the user gave, not a temporary, and change nothing.
    let err = c.fails(&["put", "-c", "9", l, "/wide"]);
    assert!(err.contains("/wide: stripe count 9 is more than the cluster's 2 OSDs") && !err.contains(".put-"), "{err}");
    assert!(c.fails(&["put", "-S", "0", l, "/wide"]).contains("/wide: stripe size 0 bytes"));
    assert!(c.fails(&["put", l, "/nodir/"]).contains("cannot make file `/nodir/`: not a directory"));
    for (verb, from) in [("put", l), ("cp", "/f")] {
        let err = c.fails(&[verb, from, "/nodir/new"]);
        assert!(err.contains("create /nodir/new: no such file or directory") && !err.contains(&format!(".{verb}-")), "{err}");
    }
    assert!(c.fails(&["cp", "/f", "/nodir/"]).contains("cannot make file `/nodir/`: not a directory"));
    assert!(c.fails(&["put", l, ""]).contains("an empty path"));
    // Every command answers an empty path as POSIX answers an empty pathname, naming it.
    for args in [&["touch", ""][..], &["mkdir", ""], &["mv", "", "/x"], &["ln", "-s", "/f", ""], &["rm", ""]] {
        let err = c.fails(args);
        assert!(err.contains("'': no such file or directory"), "{args:?}: {err}");
    }
    assert!(c.fails(&["get", "/f", &format!("{}/nodir/", work.path().display())]).contains("not a directory"));
    let missing = work.path().join("nodir/new");
    let err = c.fails(&["get", "/f", &missing.to_string_lossy()]);
    assert!(err.contains(&format!("cannot create {}: No such file or directory", missing.display())) && !err.contains(".get-"), "{err}");
    // As coreutils: `.` and `..` of a directory exist, and `rm -f` of nothing succeeds.
    assert!(c.fails(&["mkdir", "/dir/."]).contains("file exists"));
    assert!(c.fails(&["mkdir", "/nowhere/."]).contains("no such file"));
    c.ok(&["rm", "-f"]);
    assert_eq!(stdout(&c.ok(&["ls", "-A", "/"])), "dir
f
p
rlink
striped
");
}

/// Goal: Ctrl-C during a `put` that replaces a file leaves the file as it was and no partial
/// copy behind, and the command exits 128 + the signal as an interrupted one does.
/// Method: `tessera put -` reading from a pipe this test holds open, so the copy is certainly
/// in progress (its temporary name exists) when SIGINT arrives; the pipe is then closed, as
/// the producer of a real pipeline dies of the same Ctrl-C.
#[test]
fn an_interrupted_put_leaves_the_destination_and_nothing_else() {
    let c = UpCluster::start(2);
    let work = tempfile::tempdir().unwrap();
    let old = work.path().join("old");
    std::fs::write(&old, b"the old contents").unwrap();
    c.ok(&["put", old.to_str().unwrap(), "/kept"]);

    // Exit status 128 + the signal, as shells report it: 130 for Ctrl-C, 143 for SIGTERM.
    for (signal, status) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let mut put = std::process::Command::new(common::tessera_exe())
            .args(["put", "-", "/kept"])
            .env("TESSERA_CLUSTER", c.cluster_file())
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = put.stdin.take().unwrap();
        std::io::Write::write_all(&mut input, &vec![9u8; 1 << 20]).unwrap();
        let temporary = format!(".kept.put-{}", put.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !stdout(&c.ok(&["ls", "-a", "/"])).lines().any(|l| l == temporary) {
            assert!(std::time::Instant::now() < deadline, "put never made its temporary {temporary}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: kill(2) on the child this test started.
        assert_eq!(unsafe { libc::kill(put.id() as libc::pid_t, signal) }, 0);
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(input);
        let out = put.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(status), "signal {signal}: {err}");
        assert!(err.contains("(the destination is unchanged): interrupted"), "{err}");
        let names = stdout(&c.ok(&["ls", "-A", "/"]));
        assert_eq!(names.trim(), "kept", "only the old file is left: {names}");
    }
    assert_eq!(stdout(&c.ok(&["cat", "/kept"])), "the old contents");
}

/// Goal: symbolic links from the command line behave as coreutils users expect. `ln -s`
/// makes them (inside a directory when LINK is one; `-f` replaces; plain `ln` explains that
/// there are no hard links), `readlink` and `ls -l` show the target, `stat` shows the link
/// and `stat -L` what it points to; `cat`, `get` and directories on the way follow links;
/// `put` through a link replaces the file it points to (or makes it, when it dangles) and
/// leaves the link; `rm` and `mv` act on the link; `rm -r` does not descend through one.
/// `touch` and `truncate` make and size files and `chown` sets ids, through links too. Method: a real cluster
/// from `tessera up`, every command its own process.
#[test]
fn symbolic_links_and_small_file_commands() {
    let c = UpCluster::start(2);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    std::fs::write(&local, pattern(9, 200_000)).unwrap();
    let l = local.to_str().unwrap();
    c.ok(&["mkdir", "-p", "/data/sub"]);
    c.ok(&["put", l, "/data/sub/file"]);

    c.ok(&["ln", "-s", "sub", "/data/s"]);
    c.ok(&["ln", "-s", "/data/s/file", "/top"]);
    c.ok(&["mkdir", "/links"]);
    c.ok(&["ln", "-s", "/data/sub/file", "/links"]); // into a directory, by the target's name
    assert_eq!(stdout(&c.ok(&["readlink", "/top", "/links/file", "/data/s"])), "/data/s/file\n/data/sub/file\nsub\n");
    assert!(c.fails(&["readlink", "/data/sub"]).contains("not a symbolic link"));
    assert!(c.fails(&["ln", "/data/sub/file", "/hard"]).contains("hard links are not supported"));
    assert!(c.fails(&["ln", "-s", "elsewhere", "/top"]).contains("exists"));
    c.ok(&["ln", "-sf", "/data/sub/file", "/top"]);
    assert_eq!(stdout(&c.ok(&["readlink", "/top"])), "/data/sub/file\n");

    assert_eq!(c.ok(&["cat", "/top"]).stdout, pattern(9, 200_000));
    let back = work.path().join("back");
    c.ok(&["get", "/data/s/file", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), pattern(9, 200_000));
    let long = stdout(&c.ok(&["ls", "-l", "/data"]));
    assert!(long.lines().any(|l| l.starts_with('l') && l.ends_with(" s -> sub")), "{long}");
    assert_eq!(stdout(&c.ok(&["ls", "/data/s"])), "file\n", "ls follows a link to a directory");
    let stat = stdout(&c.ok(&["stat", "/top"]));
    assert!(stat.contains("type: symbolic link") && stat.contains("to: /data/sub/file") && stat.contains("size: 14"), "{stat}");
    assert!(stdout(&c.ok(&["stat", "-L", "/top"])).contains("size: 200000"));

    // put through a link: the file it points to is replaced, the link stays.
    std::fs::write(&local, b"replaced through the link").unwrap();
    c.ok(&["put", l, "/top"]);
    assert_eq!(c.ok(&["cat", "/data/sub/file"]).stdout, b"replaced through the link");
    assert_eq!(stdout(&c.ok(&["readlink", "/top"])), "/data/sub/file\n");
    c.ok(&["ln", "-s", "made-by-put", "/data/dangling"]);
    assert!(c.fails(&["cat", "/data/dangling"]).contains("no such file"));
    c.ok(&["put", l, "/data/dangling"]);
    assert_eq!(c.ok(&["cat", "/data/made-by-put"]).stdout, b"replaced through the link");

    // touch and truncate, through links and not.
    c.ok(&["touch", "/data/empty", "/data/s/new"]);
    assert!(stdout(&c.ok(&["stat", "/data/sub/new"])).contains("size: 0"));
    let before = stdout(&c.ok(&["stat", "/data/sub/file"]));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    c.ok(&["touch", "/top"]);
    let modify = |stat: &str| stat.lines().find(|l| l.trim_start().starts_with("modify:")).unwrap().to_string();
    assert_ne!(modify(&stdout(&c.ok(&["stat", "/data/sub/file"]))), modify(&before), "touch through the link moved the file's mtime");
    c.ok(&["touch", "-c", "/data/not-made"]);
    assert!(c.fails(&["stat", "/data/not-made"]).contains("no such file"));
    c.ok(&["truncate", "-s", "1M", "/top", "/data/grown"]);
    assert!(stdout(&c.ok(&["stat", "/data/sub/file"])).contains("size: 1048576"));
    assert!(stdout(&c.ok(&["stat", "/data/grown"])).contains("size: 1048576"));
    c.ok(&["truncate", "-s", "8", "/data/sub/file"]);
    assert_eq!(c.ok(&["cat", "/top"]).stdout, b"replaced");
    assert!(c.fails(&["truncate", "-s", "+1M", "/top"]).contains("relative sizes are not supported"));
    assert!(c.fails(&["truncate", "-s", "1M", "/data"]).contains("is a directory"));
    c.ok(&["truncate", "-c", "-s", "0", "/data/not-made"]);
    assert!(c.fails(&["stat", "/data/not-made"]).contains("no such file"));

    // chown, by number and by this host's names, through the link.
    c.ok(&["chown", "1234:99", "/top"]);
    assert!(stdout(&c.ok(&["stat", "/data/sub/file"])).contains("owner: uid 1234 gid 99"));
    c.ok(&["chown", ":root", "/data/sub/file"]);
    assert!(stdout(&c.ok(&["stat", "/data/sub/file"])).contains("owner: uid 1234 gid 0"));
    assert!(c.fails(&["chown", "no-such-user-here", "/top"]).contains("no user"));

    // rm and mv act on the link; rm -r does not go through one.
    c.ok(&["mv", "/top", "/links/top"]);
    assert_eq!(stdout(&c.ok(&["readlink", "/links/top"])), "/data/sub/file\n");
    c.ok(&["rm", "-r", "/data/s"]);
    assert!(stdout(&c.ok(&["ls", "/data/sub"])).contains("file"), "rm -r of a link left the directory it names");
    c.ok(&["rm", "/links/top"]);
    assert_eq!(c.ok(&["cat", "/data/sub/file"]).stdout, b"replaced");
    c.ok(&["ln", "-s", "loop-b", "/loop-a"]);
    c.ok(&["ln", "-s", "loop-a", "/loop-b"]);
    assert!(c.fails(&["cat", "/loop-a"]).contains("too many levels of symbolic links"));
    // ls(1) refuses a loop it must follow, and shows it with -l, where it is not followed.
    assert!(c.fails(&["ls", "/loop-a"]).contains("too many levels of symbolic links"));
    assert!(stdout(&c.ok(&["ls", "-l", "/loop-a"])).trim_end().ends_with("/loop-a -> loop-b"));
}

/// Goal: `cp` copies inside the cluster as cp(1) does. A file's bytes arrive exactly, a run
/// of zeros stays a hole (the copy uses no more space than the original's data); a new file
/// takes its directory's default striping, a file copied over keeps its own and its mode;
/// several sources go into a directory; `-r` copies a tree, its links as links; refusals
/// (the same file, a directory without -r, a directory into itself, several sources to a
/// non-directory) change nothing and leave no temporary. Method: a real cluster from
/// `tessera up`, every command its own process, contents compared byte for byte.
#[test]
fn cp_copies_files_and_trees_inside_the_cluster() {
    let c = UpCluster::start(2);
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    let mut data = pattern(21, 300_001);
    data.extend(vec![0u8; 4 << 20]);
    data.extend(pattern(22, 100_000));
    std::fs::write(&local, &data).unwrap();
    c.ok(&["mkdir", "-p", "/src/sub", "/wide"]);
    c.ok(&["put", local.to_str().unwrap(), "/src/sub/f"]);
    c.ok(&["chmod", "640", "/src/sub/f"]);
    c.ok(&["ln", "-s", "sub/f", "/src/link"]);
    c.ok(&["setstripe", "-c", "2", "-S", "128K", "/wide"]);
    let used = |c: &UpCluster| -> u64 {
        let df = stdout(&c.ok(&["df"]));
        let total = df.lines().find(|l| l.starts_with("total")).unwrap().to_string();
        let used = total.split_whitespace().nth(3).unwrap().to_string(); // total SIZE UNIT USED UNIT ...
        let unit = total.split_whitespace().nth(4).unwrap().to_string();
        let scale = match unit.as_str() { "B" => 1.0, "KiB" => 1024.0, "MiB" => 1048576.0, "GiB" => 1073741824.0, u => panic!("{u} in {df}") };
        (used.parse::<f64>().unwrap() * scale) as u64
    };
    let before = used(&c);

    c.ok(&["cp", "/src/sub/f", "/wide/copy"]);
    let back = work.path().join("back");
    c.ok(&["get", "/wide/copy", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == data, "the copy's bytes differ");
    assert!(stdout(&c.ok(&["getstripe", "/wide/copy"])).contains("stripe_count: 2  stripe_size: 131072"), "the directory's striping");
    assert!(stdout(&c.ok(&["stat", "/wide/copy"])).contains("mode: 0640"));
    let grew = used(&c) - before;
    assert!(grew < 1 << 20, "the 4 MiB of zeros stayed a hole: the copy used {grew} bytes");

    // Over an existing file: its layout and mode stay, its bytes are replaced.
    c.ok(&["setstripe", "-c", "1", "-S", "64K", "/one"]);
    c.ok(&["chmod", "600", "/one"]);
    c.ok(&["cp", "/src/link", "/one"]);
    c.ok(&["get", "/one", back.to_str().unwrap()]);
    assert!(std::fs::read(&back).unwrap() == data, "the copy through a link differs");
    let one = stdout(&c.ok(&["stat", "/one"]));
    assert!(one.contains("mode: 0600"), "{one}");
    assert!(stdout(&c.ok(&["getstripe", "/one"])).contains("stripe_count: 1  stripe_size: 65536"));

    // Several into a directory; a tree with its link.
    c.ok(&["cp", "/one", "/wide/copy", "/src"]);
    assert_eq!(stdout(&c.ok(&["ls", "/src"])), "copy\nlink\none\nsub\n");
    c.ok(&["cp", "-r", "/src", "/tree"]);
    assert_eq!(stdout(&c.ok(&["ls", "/tree"])), "copy\nlink\none\nsub\n");
    assert_eq!(stdout(&c.ok(&["readlink", "/tree/link"])), "sub/f\n", "a link copied as a link");
    assert_eq!(c.ok(&["cat", "/tree/link"]).stdout.len(), data.len(), "and it leads to the copy");

    // Refusals.
    assert!(c.fails(&["cp", "/one", "/one"]).contains("are the same file"));
    assert!(c.fails(&["cp", "/src/link", "/src/sub/f"]).contains("are the same file"));
    assert!(c.fails(&["cp", "/src", "/elsewhere"]).contains("use -r"));
    assert!(c.fails(&["cp", "-r", "/src", "/src/sub"]).contains("into itself"));
    assert!(c.fails(&["cp", "/one", "/wide/copy", "/nowhere"]).contains("needs an existing directory"));
    assert!(c.fails(&["stat", "/elsewhere"]).contains("no such file"));
    assert_eq!(stdout(&c.ok(&["ls", "-A", "/src/sub"])), "f\n", "nothing copied into itself, no temporary left");
    assert_eq!(stdout(&c.ok(&["ls", "-A", "/"])), "one\nsrc\ntree\nwide\n");
}

/// Goal: a directory tree goes into Tessera and comes back whole with `put -r` and `get -r`,
/// as `cp -r` copies one: every file's bytes and mode, an empty directory, a symbolic link as
/// a link, a sparse file as a sparse file on both sides; a second `put -r` merges into the
/// tree and replaces changed files; a special file is reported and skipped (and the command
/// fails) while the rest is copied; `ls -R` lists the tree as ls(1) does; a directory without
/// `-r` is refused with the hint; `cp -r` and `rm -r` handle the same tree inside the
/// cluster. Files are copied and removed several at a time. Method: a real cluster from
/// `tessera up`, a local tree in a temporary directory, compared entry by entry after the
/// round trip.
#[test]
fn trees_go_in_and_come_back_whole() {
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
    let c = UpCluster::start(2);
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    std::fs::create_dir_all(tree.join("a/b")).unwrap();
    std::fs::create_dir(tree.join("empty")).unwrap();
    std::fs::write(tree.join("a/data"), pattern(31, 1_500_001)).unwrap();
    std::fs::write(tree.join("a/b/secret"), b"mode 600").unwrap();
    std::fs::set_permissions(tree.join("a/b/secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::File::create(tree.join("sparse")).unwrap().set_len(8 << 20).unwrap();
    symlink("a/b/secret", tree.join("link")).unwrap();
    // Many files in one directory: they are copied, and removed, several at a time.
    std::fs::create_dir(tree.join("many")).unwrap();
    for i in 0..40 {
        std::fs::write(tree.join(format!("many/f{i:02}")), pattern(100 + i, 1000 + i as usize * 777)).unwrap();
    }
    let t = tree.to_str().unwrap();

    assert!(c.fails(&["put", t, "/in"]).contains("-r copies a tree"));
    c.ok(&["mkdir", "/in"]);
    c.ok(&["put", "-r", t, "/in"]); // into an existing directory, by the tree's name
    let many: String = (0..40).map(|i| format!("f{i:02}\n")).collect();
    assert_eq!(
        stdout(&c.ok(&["ls", "-R", "/in/tree"])),
        format!("/in/tree:\na\nempty\nlink\nmany\nsparse\n\n/in/tree/a:\nb\ndata\n\n/in/tree/a/b:\nsecret\n\n/in/tree/empty:\n\n/in/tree/many:\n{many}")
    );
    assert_eq!(stdout(&c.ok(&["readlink", "/in/tree/link"])), "a/b/secret\n");
    // du: apparent sizes, per directory after its contents; a link counts its target's length.
    assert_eq!(stdout(&c.ok(&["du", "/in/tree/a"])), "8\t/in/tree/a/b\n1500009\t/in/tree/a\n");
    let many_bytes: u64 = (0..40u64).map(|i| 1000 + i * 777).sum();
    let total = 1_500_009 + (8 << 20) + 10 + many_bytes;
    assert_eq!(stdout(&c.ok(&["du", "-s", "/in/tree"])), format!("{total}\t/in/tree\n"));
    assert!(stdout(&c.ok(&["stat", "/in/tree/a/b/secret"])).contains("mode: 0600"));

    assert!(c.fails(&["get", "/in/tree", work.path().join("x").to_str().unwrap()]).contains("-r copies a tree"));
    assert!(c.fails(&["get", "-r", "/in/tree/a/data", work.path().join("x").to_str().unwrap()]).contains("not a directory"));
    let back = work.path().join("back");
    c.ok(&["get", "-r", "/in/tree", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(back.join("a/data")).unwrap(), pattern(31, 1_500_001));
    assert_eq!(std::fs::read(back.join("a/b/secret")).unwrap(), b"mode 600");
    assert_eq!(std::fs::metadata(back.join("a/b/secret")).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read_link(back.join("link")).unwrap().to_str(), Some("a/b/secret"));
    assert!(std::fs::read_dir(back.join("empty")).unwrap().next().is_none());
    for i in 0..40 {
        assert!(std::fs::read(back.join(format!("many/f{i:02}"))).unwrap() == pattern(100 + i, 1000 + i as usize * 777), "many/f{i:02}");
    }
    let sparse = std::fs::metadata(back.join("sparse")).unwrap();
    assert_eq!(sparse.len(), 8 << 20);
    assert!(sparse.blocks() * 512 < 1 << 20, "the hole came back a hole ({} blocks)", sparse.blocks());

    // Again, merged: a changed file is replaced, the rest stays; a fifo is skipped and said.
    std::fs::write(tree.join("a/data"), b"changed").unwrap();
    let fifo = tree.join("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let err = c.fails(&["put", "-r", t, "/in"]);
    assert!(err.contains("skipping") && err.contains("pipe") && err.contains("1 special file skipped"), "{err}");
    assert_eq!(c.ok(&["cat", "/in/tree/a/data"]).stdout, b"changed");
    assert_eq!(stdout(&c.ok(&["ls", "/in/tree"])), "a\nempty\nlink\nmany\nsparse\n");
    assert_eq!(stdout(&c.ok(&["ls", "-A", "/in/tree/a"])), "b\ndata\n", "no temporary left");

    // cp -r of the tree inside the cluster, then rm -r of both.
    c.ok(&["cp", "-r", "/in/tree", "/copy"]);
    assert_eq!(stdout(&c.ok(&["ls", "-R", "/copy/many"])), format!("/copy/many:\n{many}"));
    assert_eq!(c.ok(&["cat", "/copy/many/f39"]).stdout, pattern(139, 1000 + 39 * 777));
    c.ok(&["rm", "-r", "/in/tree", "/copy"]);
    assert_eq!(stdout(&c.ok(&["ls", "-A", "/"])), "in\n");
    assert!(stdout(&c.ok(&["df"])).contains("namespace: 0 files, 2 directories, 0 symlinks"), "{}", stdout(&c.ok(&["df"])));
}

/// Goal: two `mv`s of one file to two destinations on another metadata server, at once: one
/// moves it, the other fails and leaves its destination as it was (before, the loser had
/// already replaced its destination with a copy when it found the source gone). A directory
/// moved onto an empty directory on the other server replaces it, as within one server.
/// Method: two servers, `tessera mv` processes started together, several rounds.
#[test]
fn racing_moves_between_servers_leave_the_losers_destination_alone() {
    let c = UpCluster::start_with(2, 2);
    let (here, there) = dirs_on_both_servers(&c);
    let work = tempfile::tempdir().unwrap();
    let (payload, precious) = (work.path().join("payload"), work.path().join("precious"));
    std::fs::write(&payload, pattern(1, 300_000)).unwrap();
    std::fs::write(&precious, b"precious").unwrap();
    let start_mv = |to: &str| {
        std::process::Command::new(common::tessera_exe())
            .args(["mv", &format!("{here}/f"), to])
            .env("TESSERA_CLUSTER", c.cluster_file())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    for round in 0..6 {
        c.ok(&["put", payload.to_str().unwrap(), &format!("{here}/f")]);
        let (a, b) = (format!("{there}/a{round}"), format!("{there}/b{round}"));
        c.ok(&["put", precious.to_str().unwrap(), &a]);
        c.ok(&["put", precious.to_str().unwrap(), &b]);
        let (first, second) = (start_mv(&a), start_mv(&b));
        let (first, second) = (first.wait_with_output().unwrap(), second.wait_with_output().unwrap());
        assert!(first.status.success() != second.status.success(), "round {round}: exactly one move succeeds");
        let moved = [&a, &b].iter().filter(|d| c.ok(&["cat", d]).stdout == pattern(1, 300_000)).count();
        let kept = [&a, &b].iter().filter(|d| c.ok(&["cat", d]).stdout == b"precious").count();
        assert_eq!((moved, kept), (1, 1), "round {round}: one destination has the file, the other is as it was");
        assert_eq!(stdout(&c.ok(&["ls", "-A", &here])), "", "round {round}: nothing left at the source");
    }
    // Into `there`, where an empty `tree` waits: it is replaced; a full one or a file is not.
    c.ok(&["mkdir", "-p", &format!("{here}/tree/sub"), &format!("{there}/tree")]);
    c.ok(&["mv", &format!("{here}/tree"), &there]);
    assert_eq!(stdout(&c.ok(&["ls", &format!("{there}/tree")])), "sub\n");
    c.ok(&["mkdir", "-p", &format!("{here}/tree"), &format!("{here}/a0")]);
    assert!(c.fails(&["mv", &format!("{here}/tree"), &there]).contains("directory not empty"));
    assert!(c.fails(&["mv", &format!("{here}/a0"), &there]).contains("cannot overwrite non-directory"));
    assert_eq!(stdout(&c.ok(&["ls", "-A", &here])), "a0\ntree\n", "a refused move puts its source back");
}

/// `get`, `cat` and `cp` racing puts that keep replacing the file they read give one version
/// or the other, whole: the old file's objects go with its name, and the reader starts over on
/// the new file rather than failing with a stale inode.
#[test]
fn reads_racing_replacing_puts_give_one_whole_version() {
    let c = UpCluster::start(2);
    let dir = tempfile::tempdir().unwrap();
    let versions: Vec<PathBuf> = (0..2u64)
        .map(|i| {
            let p = dir.path().join(format!("v{i}"));
            std::fs::write(&p, pattern(i + 40, 300_000 + i as usize * 7)).unwrap();
            p
        })
        .collect();
    let contents: Vec<Vec<u8>> = versions.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let one_version = |got: &[u8], what: &str| assert!(got == contents[0] || got == contents[1], "{what}: {} bytes, neither version", got.len());
    c.ok(&["put", "-c", "2", versions[0].to_str().unwrap(), "/f"]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let puts = std::sync::atomic::AtomicU32::new(0);
    /// Stops the puts however the reads end, a failed assertion included.
    struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let n = puts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                c.ok(&["put", versions[n as usize % 2].to_str().unwrap(), "/f"]);
            }
        });
        let _stop = StopOnDrop(&stop);
        for round in 0..25 {
            let out = dir.path().join(format!("got{round}"));
            c.ok(&["get", "/f", out.to_str().unwrap()]);
            one_version(&std::fs::read(&out).unwrap(), "get");
            one_version(&c.ok(&["cat", "/f"]).stdout, "cat");
            let copy = format!("/copy{round}");
            c.ok(&["cp", "/f", &copy]);
            one_version(&c.ok(&["cat", &copy]).stdout, "cp");
        }
    });
    assert!(puts.load(std::sync::atomic::Ordering::Relaxed) >= 10, "the puts ran beside the reads");
}

/// Goal: two crossing moves of empty directories on two servers (`mv P Q/` and `mv Q P/` at
/// once) leave no directory that neither reports: a move that fails after making its
/// destination directory removes it again. Before, about 1 round in 60 ended with both moves
/// failed and a new empty `Q/P` left behind. Method: two servers, `tessera mv` processes
/// started together, 60 rounds; after each, the tree must be the outcome the moves report
/// (one of them, or both one after the other), with every directory in it.
#[test]
fn crossing_directory_moves_between_servers_leave_no_stray_directory() {
    let c = UpCluster::start_with(2, 2);
    let (here, there) = dirs_on_both_servers(&c);
    let (p, q) = (format!("{here}/P"), format!("{there}/Q"));
    let cluster = c.cluster_file();
    let mv = |from: &str, to: &str| {
        std::process::Command::new(common::tessera_exe())
            .args(["mv", from, to])
            .env("TESSERA_CLUSTER", &cluster)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    for round in 0..60 {
        c.ok(&["rm", "-rf", &p, &q, &format!("{here}/Q"), &format!("{there}/P")]);
        c.ok(&["mkdir", &p, &q]);
        let (a, b) = (mv(&p, &format!("{there}/Q/")), mv(&q, &format!("{here}/P/")));
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let tree = stdout(&c.ok(&["ls", "-RA", &here, &there]));
        let dirs: Vec<&str> = tree.lines().filter(|l| l.ends_with(':')).collect();
        let expected: Vec<String> = match (a.status.success(), b.status.success()) {
            (false, false) => vec![format!("{here}:"), format!("{here}/P:"), format!("{there}:"), format!("{there}/Q:")],
            (true, false) => vec![format!("{here}:"), format!("{there}:"), format!("{there}/Q:"), format!("{there}/Q/P:")],
            (false, true) => vec![format!("{here}:"), format!("{here}/P:"), format!("{here}/P/Q:"), format!("{there}:")],
            // One after the other: the second finds its destination gone and, as rename(2)
            // with a trailing slash does for a directory, takes that name itself.
            (true, true) if dirs.len() == 4 && dirs[1] == format!("{here}/P:") => {
                vec![format!("{here}:"), format!("{here}/P:"), format!("{here}/P/P:"), format!("{there}:")]
            }
            (true, true) => vec![format!("{here}:"), format!("{there}:"), format!("{there}/Q:"), format!("{there}/Q/Q:")],
        };
        assert_eq!(dirs, expected, "round {round}: {}\n{}", String::from_utf8_lossy(&a.stderr), String::from_utf8_lossy(&b.stderr));
    }
    // The window those rounds rarely hit, held open: P renamed aside as a mover claims it. A
    // move onto P/ must not take the name P, which would leave that mover unable to put P
    // back; it fails and changes nothing.
    c.ok(&["rm", "-rf", &p, &q, &format!("{here}/Q"), &format!("{there}/P")]);
    c.ok(&["mkdir", &p, &q]);
    let claim = format!("{here}/.P.tessera-mv-src-4242");
    c.ok(&["mv", &p, &claim]);
    let err = c.fails(&["mv", &q, &format!("{p}/")]);
    assert!(err.contains("renamed aside as .P.tessera-mv-src-4242") || err.contains(&claim), "{err}");
    assert!(stdout(&c.ok(&["ls", "-A", &here])).contains(".P.tessera-mv-src-4242"));
    assert!(c.fails(&["stat", &p]).contains("no such file"), "P was not taken");
    c.ok(&["stat", &q]);
    c.ok(&["mv", &claim, &p]);
    c.ok(&["mv", &q, &format!("{p}/")]);
    c.ok(&["stat", &format!("{p}/Q")]);
}

/// Goal: two `rm -rf` of one tree at once both succeed and leave nothing: an entry the other
/// removed first is gone already, and the walk goes on past it (as rm(1)). Before, the first
/// such entry ended the walk, and `-f` then took the tree's NotFound as success with most of
/// the tree left. Method: a tree of 5 directories of 40 files, two real `rm -rf` racing, four
/// rounds.
#[test]
fn racing_recursive_removals_both_succeed_and_leave_nothing() {
    let c = UpCluster::start(2);
    let local = tempfile::tempdir().unwrap();
    for d in 0..5 {
        let dir = local.path().join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..40 {
            std::fs::write(dir.join(format!("f{f}")), b"").unwrap();
        }
    }
    for round in 0..4 {
        c.ok(&["put", "-r", local.path().to_str().unwrap(), "/rt"]);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| c.ok(&["rm", "-rf", "/rt"]));
            }
        });
        let err = c.fails(&["stat", "/rt"]);
        assert!(err.contains("no such file or directory"), "round {round}: the tree is gone: {err}");
    }
}

/// Goal: a command whose standard output cannot be written (a full disk, `> /dev/full`) fails
/// with the error line and status 1 every failure has, not a panic's backtrace and 101; and
/// `put -` into a directory is refused (standard input has no name), not stored as `-`.
#[test]
fn output_and_input_mistakes_fail_cleanly() {
    let c = UpCluster::start(1);
    c.ok(&["mkdir", "/d"]);
    // df(1)'s -h is a table, not help.
    assert!(stdout(&c.ok(&["df", "-h"])).starts_with("osd "), "df -h prints the table");
    let err = c.fails(&["put", "-", "/d"]);
    assert!(err.contains("standard input has no name"), "{err}");
    assert_eq!(stdout(&c.ok(&["ls", "/d"])), "", "nothing was stored");
    for args in [&["ls", "/"][..], &["stat", "/d"][..], &["df"][..]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = std::process::Command::new(common::tessera_exe())
            .args(args)
            .env("TESSERA_CLUSTER", c.cluster_file())
            .stdout(std::process::Stdio::from(full))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("writing to standard output: No space left on device") && !err.contains("panicked"), "{args:?}: {err}");
    }
    // A descriptor the caller closed (`>&-`, `<&-`) is not taken for a socket, and is an error
    // for a command that needs it, not output thrown away or an empty file stored.
    let local = c.dir.path().join("f.txt");
    std::fs::write(&local, b"kept\n").unwrap();
    c.ok(&["put", local.to_str().unwrap(), "/d/f"]);
    let closed = |fd: i32, args: &[&str]| {
        let mut cmd = std::process::Command::new(common::tessera_exe());
        cmd.args(args).env("TESSERA_CLUSTER", c.cluster_file());
        // SAFETY: close(2) in the child between fork and exec.
        unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || { libc::close(fd); Ok(()) }) };
        cmd.output().unwrap()
    };
    for args in [&["cat", "/d/f"][..], &["get", "/d/f", "-"][..], &["ls", "/"][..], &["stat", "/d"][..]] {
        let out = closed(1, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?} with stdout closed: {err}");
        assert!(err.contains("standard output is closed") && !err.contains("panicked"), "{args:?}: {err}");
    }
    let out = closed(1, &["mkdir", "/d/made"]);
    assert!(out.status.success(), "a command that prints nothing needs no stdout: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout(&c.ok(&["ls", "/d"])).contains("made"));
    let out = closed(0, &["put", "-", "/d/g"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "put - with stdin closed: {err}");
    assert!(err.contains("standard input is closed"), "{err}");
    assert!(!stdout(&c.ok(&["ls", "/d"])).contains('g'), "nothing was stored");
    let out = closed(2, &["cat", "/d/f"]);
    assert!(out.status.success() && out.stdout == b"kept\n", "stderr closed: the command still runs");
}
