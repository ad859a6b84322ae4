//! Default striping as `lfs` users expect it: `tessera up` refuses a default no file could
//! have, `getstripe` of a directory shows the values new files get, and `setstripe` or `put`
//! with only one of -c/-S keeps the other from the directory's default, not a built-in one.

mod common;

use std::path::Path;

use common::run;

fn ok(args: &[&str], cluster: &Path) -> String {
    let out = run(args, Some(cluster));
    assert!(out.status.success(), "`tessera {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `tessera up` with `flags` in a new directory must be refused; returns its error.
fn up_refused(flags: &[&str]) -> String {
    let parent = tempfile::Builder::new().prefix("tessera-stripe-").tempdir().unwrap();
    let dir = parent.path().join("c");
    let mut args = vec!["up", "--dir", dir.to_str().unwrap()];
    args.extend(flags);
    let out = run(&args, None);
    if out.status.success() {
        run(&["down", "--dir", dir.to_str().unwrap()], None);
        panic!("`up {}` should be refused: {}", flags.join(" "), String::from_utf8_lossy(&out.stdout));
    }
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn up_refuses_a_default_striping_no_file_can_have() {
    let err = up_refused(&["--osds", "1", "--stripe-count", "3"]);
    assert!(err.contains("default stripe count 3 is more than the cluster's 1 OSD ("), "{err}");
    let err = up_refused(&["--osds", "1", "--stripe-unit", "0"]);
    assert!(err.contains("default stripe unit 0 bytes is outside 1 byte to 64 MiB"), "{err}");
    let err = up_refused(&["--osds", "1", "--stripe-unit", "128M"]);
    assert!(err.contains("outside 1 byte to 64 MiB"), "{err}");
}

/// Stopped with `tessera down` even when the test fails.
struct Down<'a>(&'a Path);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        run(&["down", "--dir", self.0.to_str().unwrap()], None);
    }
}

#[test]
fn an_option_not_given_keeps_the_directory_default() {
    let dir = tempfile::Builder::new().prefix("tessera-stripe-").tempdir().unwrap();
    let out = run(&["up", "--dir", dir.path().to_str().unwrap(), "--osds", "3", "--stripe-unit", "256K"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _down = Down(dir.path());
    let c = dir.path().join("cluster.toml");

    // The root has no default of its own: the cluster's is shown.
    let root = ok(&["getstripe", "/"], &c);
    assert!(root.contains("stripe_count: all OSDs  stripe_size: 262144 (256 KiB)") && root.contains("cluster default"), "{root}");

    ok(&["mkdir", "/d"], &c);
    ok(&["setstripe", "-c", "1", "/d"], &c);
    let d = ok(&["getstripe", "/d"], &c);
    assert!(d.contains("stripe_count: 1  stripe_size: 262144 (256 KiB)"), "-c alone keeps the cluster's unit: {d}");
    ok(&["setstripe", "-S", "64K", "/d"], &c);
    let d = ok(&["getstripe", "/d"], &c);
    assert!(d.contains("stripe_count: 1  stripe_size: 65536 (64 KiB)"), "-S alone keeps the directory's count: {d}");

    // put takes the directory's default for what it is not given.
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("f");
    std::fs::write(&local, vec![7u8; 200_000]).unwrap();
    ok(&["put", "-c", "2", local.to_str().unwrap(), "/d/two"], &c);
    let f = ok(&["getstripe", "/d/two"], &c);
    assert!(f.contains("stripe_count: 2  stripe_size: 65536 (64 KiB)"), "{f}");
    ok(&["put", "-S", "128K", local.to_str().unwrap(), "/root-file"], &c);
    let f = ok(&["getstripe", "/root-file"], &c);
    assert!(f.contains("stripe_count: 3  stripe_size: 131072 (128 KiB)"), "{f}");
}
