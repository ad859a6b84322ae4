//! Goal: a `tessera` command acts for the user who runs it. What it makes is that user's, and
//! another user's private directory and file stay closed to it, with messages a person can
//! act on. Method: `tessera up` as root, then client commands run as a real process with uid
//! and gid 1000 (set before exec), from a copy of the binary in a directory that user may
//! read, as an installed `tessera` would be.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{run, tessera_exe};

const USER: u32 = 1000;

/// A cluster started with `tessera up` (stopped on drop), in a directory every user may read.
struct Shared {
    dir: tempfile::TempDir,
}

/// Copies the binary with `cp`, a process of its own: a copy written from this process would
/// hold a descriptor open for writing that a child forked meanwhile by another test thread
/// inherits until it execs, and running the copy in that window fails with ETXTBSY.
fn copy_executable(from: &Path, to: &Path) {
    let status = Command::new("cp").arg(from).arg(to).status().expect("running cp");
    assert!(status.success(), "cp {} {}", from.display(), to.display());
}

impl Shared {
    fn start() -> Shared {
        let dir = tempfile::Builder::new().prefix("tessera-users-").tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("cluster");
        let out = run(&["up", "--dir", path.to_str().unwrap(), "--osds", "2"], None);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(path.join("cluster.toml"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let exe = dir.path().join("tessera");
        copy_executable(tessera_exe(), &exe);
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        Shared { dir }
    }

    fn cluster_file(&self) -> PathBuf {
        self.dir.path().join("cluster/cluster.toml")
    }

    fn as_root(&self, args: &[&str]) -> Output {
        let out = run(args, Some(&self.cluster_file()));
        assert!(out.status.success(), "`tessera {}`: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        out
    }

    /// Runs `tessera ARGS` as uid and gid [`USER`] (std drops root's supplementary groups).
    fn as_user(&self, args: &[&str]) -> Output {
        Command::new(self.dir.path().join("tessera"))
            .args(args)
            .env("TESSERA_CLUSTER", self.cluster_file())
            .env("HOME", self.dir.path())
            .current_dir(self.dir.path())
            .uid(USER)
            .gid(USER)
            .output()
            .unwrap()
    }

    fn user_fails(&self, args: &[&str]) -> String {
        let out = self.as_user(args);
        assert!(!out.status.success(), "`tessera {}` as uid {USER} should fail: {}", args.join(" "), String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn user_ok(&self, args: &[&str]) -> String {
        let out = self.as_user(args);
        assert!(out.status.success(), "`tessera {}` as uid {USER}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn local(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        run(&["down", "--dir", self.dir.path().join("cluster").to_str().unwrap()], None);
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn commands_act_for_the_user_who_runs_them() {
    let c = Shared::start();
    let input = c.local("input");
    std::fs::write(&input, b"from the user").unwrap();
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o644)).unwrap();
    c.as_root(&["mkdir", "/pub", "/private"]);
    c.as_root(&["chmod", "1777", "/pub"]);
    c.as_root(&["chmod", "700", "/private"]);
    c.as_root(&["put", path(&input), "/private/secret"]);
    c.as_root(&["put", path(&input), "/pub/roots"]);

    // The servers know the user by the agent's word (the kernel's), not the process's.
    let who = c.user_ok(&["whoami"]);
    assert!(who.starts_with("uid=1000 gid=1000 ") && who.contains("proven by the user agent") && who.contains("sealed"), "{who}");
    let who = String::from_utf8_lossy(&c.as_root(&["whoami"]).stdout).into_owned();
    assert!(who.starts_with("uid=0 gid=0 ") && who.contains("proven with the cluster's user key"), "{who}");

    // What the user makes is the user's.
    c.user_ok(&["put", path(&input), "/pub/mine"]);
    c.user_ok(&["mkdir", "/pub/dir"]);
    let listing = c.user_ok(&["ls", "-l", "/pub"]);
    let owners: Vec<(String, String)> = listing
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 7).then(|| (f[f.len() - 1].to_string(), format!("{}:{}", f[2], f[3])))
        })
        .collect();
    assert!(owners.contains(&("mine".into(), "1000:1000".into())), "{listing}");
    assert!(owners.contains(&("dir".into(), "1000:1000".into())), "{listing}");
    assert!(owners.contains(&("roots".into(), "0:0".into())), "{listing}");
    assert_eq!(c.user_ok(&["cat", "/pub/mine"]), "from the user");

    // Another user's private directory and its file stay closed.
    assert!(c.user_fails(&["ls", "/private"]).contains("permission denied"));
    assert_eq!(c.as_user(&["ls", "/private", "/pub"]).status.code(), Some(2), "as GNU ls: a directory named that cannot be read");
    let below = c.as_user(&["ls", "-R", "/"]);
    assert_eq!(below.status.code(), Some(1), "a directory found below, a minor problem");
    let said = String::from_utf8_lossy(&below.stderr);
    assert!(said.contains("1 directory could not be listed (0 of the 1 paths given, 1 found below them)"), "{said}");
    assert!(c.user_fails(&["cat", "/private/secret"]).contains("permission denied"));
    assert!(c.user_fails(&["put", path(&input), "/private/x"]).contains("permission denied"));
    assert!(c.user_fails(&["chmod", "777", "/private"]).contains("operation not permitted"));
    // A copy over a file is a write to it: root's 0644 file is not the user's to replace.
    let err = c.user_fails(&["put", path(&input), "/pub/roots"]);
    assert!(err.contains("permission denied (mode 0644, owner 0:0, gives uid 1000 no write permission"), "{err}");
    // touch: a user with write permission may stamp a file it does not own, as with GNU touch.
    assert!(c.user_fails(&["touch", "/pub/roots"]).contains("permission denied"), "0644: no write for others");
    c.as_root(&["chmod", "666", "/pub/roots"]);
    c.user_ok(&["touch", "/pub/roots"]);
    c.as_root(&["chmod", "644", "/pub/roots"]);
    // /pub is sticky: root's file there is root's to remove.
    assert!(c.user_fails(&["rm", "/pub/roots"]).contains("operation not permitted"));
    let listing = String::from_utf8_lossy(&c.as_root(&["ls", "/private", "/pub"]).stdout).into_owned();
    assert!(listing.contains("secret") && listing.contains("roots"), "nothing refused was changed: {listing}");
    c.user_ok(&["rm", "-r", "/pub/mine", "/pub/dir"]);

    // Tree copies go on past what the user may not read, name it, and exit 1, as cp -r does.
    c.as_root(&["mkdir", "-p", "/tree/open", "/tree/private"]);
    c.as_root(&["put", path(&input), "/tree/open/a"]);
    c.as_root(&["put", path(&input), "/tree/private/s"]);
    c.as_root(&["put", path(&input), "/tree/closed"]);
    c.as_root(&["chmod", "700", "/tree/private"]);
    c.as_root(&["chmod", "600", "/tree/closed"]);
    let out = c.local("out");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::chown(&out, Some(USER), Some(USER)).unwrap();
    for (args, verb) in [(vec!["get", "-r", "/tree", path(&out.join("t"))], "get"), (vec!["cp", "-r", "/tree", "/pub/t"], "cp")] {
        let run = c.as_user(&args);
        let err = String::from_utf8_lossy(&run.stderr).into_owned();
        assert_eq!(run.status.code(), Some(1), "{err}");
        assert!(err.contains("cannot read directory /tree/private: permission denied; left out of the copy"), "{err}");
        assert!(err.contains("cannot read file /tree/closed: permission denied"), "{err}");
        assert!(err.contains(&format!("{verb} -r /tree -> ")) && err.contains("2 entries you may not read were left out"), "{err}");
    }
    let mut got: Vec<String> = walk(&out.join("t"));
    got.sort();
    assert_eq!(got, ["open", "open/a"], "the readable rest came");
    assert_eq!(std::fs::read(out.join("t/open/a")).unwrap(), b"from the user");
    assert_eq!(c.user_ok(&["ls", "-R", "/pub/t"]), "/pub/t:\nopen\n\n/pub/t/open:\na\n");

    // put -r, too, goes on past what this host does not let the user read.
    let local = c.local("mine");
    std::fs::create_dir_all(local.join("shut")).unwrap();
    std::fs::write(local.join("ok"), b"ok").unwrap();
    std::fs::write(local.join("closed"), b"no").unwrap();
    std::fs::write(local.join("shut/inside"), b"no").unwrap();
    for (p, mode) in [("", 0o755), ("ok", 0o644), ("closed", 0o000), ("shut/inside", 0o644), ("shut", 0o000)] {
        let p = if p.is_empty() { local.clone() } else { local.join(p) };
        std::os::unix::fs::chown(&p, Some(USER), Some(USER)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let run = c.as_user(&["put", "-r", path(&local), "/pub/mine"]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cannot read directory {}: permission denied", local.join("shut").display())), "{err}");
    assert!(err.contains(&format!("cannot read file {}: permission denied", local.join("closed").display())), "{err}");
    assert!(err.contains("2 entries you may not read were left out"), "{err}");
    assert_eq!(c.user_ok(&["ls", "-R", "/pub/mine"]), "/pub/mine:\nok\n");
    c.user_ok(&["rm", "-r", "/pub/mine"]);

    // rm -r goes on past what the user may not remove, names it, keeps the directories above
    // it, and exits 1, as rm -r does.
    c.as_root(&["chmod", "777", "/tree", "/tree/open"]);
    c.as_root(&["mkdir", "/tree/open/roots"]);
    c.as_root(&["put", path(&input), "/tree/open/roots/r"]);
    c.user_ok(&["put", path(&input), "/tree/open/mine"]);
    let run = c.as_user(&["rm", "-r", "/tree"]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(err.contains("unlink /tree/open/roots/r: permission denied"), "root's 0755 directory: {err}");
    assert!(err.contains("readdir /tree/private: permission denied"), "{err}");
    assert!(err.contains("/tree stays: 2 entries in it could not be removed"), "{err}");
    let left = String::from_utf8_lossy(&c.as_root(&["ls", "-R", "/tree"]).stdout).into_owned();
    assert_eq!(left, "/tree:\nopen\nprivate\n\n/tree/open:\nroots\n\n/tree/open/roots:\nr\n\n/tree/private:\ns\n", "what the user could remove went");

    // A name that is taken is EEXIST before the parent's write permission is asked, as on
    // Linux, so mkdir -p walks through directories that are not the user's.
    assert!(c.user_fails(&["mkdir", "/pub"]).contains("mkdir /pub: file exists"));
    assert!(c.user_fails(&["mkdir", "/fresh"]).contains("mkdir /fresh: permission denied"), "a free name still needs write permission");
    // chmod -R goes on past what is not the user's, names it, and fails at the end.
    c.user_ok(&["mkdir", "-p", "/pub/tree/sub"]);
    c.user_ok(&["put", path(&input), "/pub/tree/sub/mine"]);
    c.as_root(&["put", path(&input), "/pub/tree/roots"]);
    let run = c.as_user(&["chmod", "-R", "go-rwx", "/pub/tree"]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(err.contains("chmod /pub/tree/roots: operation not permitted") && err.contains("/pub/tree: 1 entry below it could not be changed"), "{err}");
    let modes = String::from_utf8_lossy(&c.as_root(&["ls", "-lR", "/pub/tree"]).stdout).into_owned();
    let mode_of = |name: &str| modes.lines().find(|l| l.ends_with(&format!(" {name}"))).map(|l| l[..10].to_string()).unwrap();
    assert_eq!((mode_of("sub"), mode_of("mine"), mode_of("roots")), ("drwx------".into(), "-rw-------".into(), "-rw-r--r--".into()), "{modes}");

    // A get into a directory the user may not write names the destination, not the hidden
    // temporary it writes first; over a file the user may write, it says why that is not enough.
    let shut = c.local("shut");
    std::fs::create_dir(&shut).unwrap();
    std::fs::set_permissions(&shut, std::fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = shut.join("theirs");
    std::fs::write(&theirs, b"before").unwrap();
    std::os::unix::fs::chown(&theirs, Some(USER), Some(USER)).unwrap();
    let fresh = shut.join("fresh");
    let err = c.user_fails(&["get", "/tree/open/roots/r", path(&fresh)]);
    assert!(err.contains(&format!("cannot create {}: Permission denied", fresh.display())) && !err.contains(".get-"), "{err}");
    let err = c.user_fails(&["get", "/tree/open/roots/r", path(&theirs)]);
    assert!(err.contains(&format!("cannot get over {}: its directory refuses new files", theirs.display())) && !err.contains(".get-"), "{err}");
    assert_eq!(std::fs::read(&theirs).unwrap(), b"before", "the file is unchanged");
    assert!(!fresh.exists());
    // The same for put and cp into the cluster.
    c.as_root(&["mkdir", "/shut"]);
    c.as_root(&["put", path(&input), "/shut/theirs"]);
    c.as_root(&["chown", &USER.to_string(), "/shut/theirs"]);
    std::fs::write(&fresh, b"new").unwrap();
    std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o644)).unwrap();
    for (verb, from) in [("put", path(&fresh)), ("cp", "/tree/open/roots/r")] {
        let err = c.user_fails(&[verb, from, "/shut/theirs"]);
        assert!(err.contains(&format!("cannot {verb} over /shut/theirs: its directory refuses new files")) && !err.contains(&format!(".{verb}-")), "{err}");
        let err = c.user_fails(&[verb, from, "/shut/fresh"]);
        assert!(err.contains("create /shut/fresh: permission denied"), "{err}");
    }
    assert_eq!(c.as_root(&["cat", "/shut/theirs"]).stdout, std::fs::read(&input).unwrap(), "the file is unchanged");
}

/// Paths under `dir`, relative to it.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()).into_iter().map(|p| format!("{name}/{p}")));
        }
        out.push(name);
    }
    out
}

/// Goal: a user who starts a cluster of their own may write in it at once: its root directory
/// is theirs, as mke2fs made it before its `root_owner` option. Method: `tessera up`, `put`,
/// `ls -l` and `down`, every one run as uid 1000 from a directory that user owns.
#[test]
fn a_user_who_starts_a_cluster_owns_its_root() {
    let dir = tempfile::Builder::new().prefix("tessera-own-").tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("tessera");
    copy_executable(tessera_exe(), &exe);
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(USER), Some(USER)).unwrap();
    let input = home.join("input");
    std::fs::write(&input, b"mine").unwrap();
    let cluster = home.join("cluster");
    let as_user = |args: &[&str]| -> Output {
        let out = Command::new(&exe).args(args).env("TESSERA_CLUSTER", cluster.join("cluster.toml")).env("HOME", &home).current_dir(&home).uid(USER).gid(USER).output().unwrap();
        assert!(out.status.success(), "`tessera {}` as uid {USER}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        out
    };
    as_user(&["up", "--dir", path(&cluster), "--osds", "1"]);
    let _down = Down(cluster.clone());
    as_user(&["put", path(&input), "/file"]);
    let root = String::from_utf8_lossy(&as_user(&["stat", "/"]).stdout).into_owned();
    assert!(root.contains("owner: uid 1000 gid 1000"), "{root}");
    as_user(&["down", "--dir", path(&cluster)]);
}

/// Stops a cluster with `tessera down` when dropped, even when a test fails.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        run(&["down", "--dir", path(&self.0)], None);
    }
}
