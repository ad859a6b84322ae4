//! Goal: with one metadata server of two stopped, what the other holds still works: a listing
//! of a directory it holds names every entry (those homed on the stopped server with their type
//! only, `ls -l` showing `?` for the rest as ls(1) does for what it cannot stat, and then
//! failing), an operation that needs the stopped server says a metadata server did not
//! answer, not that an OSD or the store failed, and a mkdir under a live parent works.
//! Method: a real cluster (two `tessera mds`, two `tessera osd`); directories made until both
//! servers home some; one server stopped; the library and the `tessera` command against it.

mod common;

use common::{run, tessera_exe};
use tessera_cli::cluster::{ClusterSpec, LocalCluster};
use tessera_client::{Client, FileType, FsError};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn with_a_metadata_server_down_listings_still_name_its_entries() {
    let dir = tempfile::Builder::new().prefix("tessera-mds-down-").tempdir().unwrap();
    let mut cluster = LocalCluster::start_spec(tessera_exe(), dir.path(), &ClusterSpec { mds: 2, ..ClusterSpec::new(2) }).unwrap();
    let client = Client::connect(cluster.config()).unwrap();
    let (mut on0, mut on1) = (Vec::new(), Vec::new());
    for i in 0..16 {
        let path = format!("/d{i:02}");
        client.mkdir(&path, 0o755).unwrap();
        client.create(&format!("{path}/f"), 0o644, None).unwrap().pwrite(0, b"data").unwrap();
        match client.lstat(&path).unwrap().ino.server() {
            0 => on0.push(path),
            _ => on1.push(path),
        }
    }
    assert!(!on0.is_empty() && !on1.is_empty(), "directories are spread over both servers: {on0:?} {on1:?}");
    assert_eq!(client.lstat("/").unwrap().ino.server(), 0, "the root lives on server 0");
    cluster.stop_mds(1).unwrap();

    // The library: every name, with attributes only for server 0's entries.
    let entries = client.readdir("/").unwrap();
    assert_eq!(entries.len(), 16);
    for e in &entries {
        let path = format!("/{}", e.name);
        assert_eq!(e.attr.file_type, FileType::Directory, "{path}: the type is kept with the name");
        assert_eq!(e.attr.known(), on0.contains(&path), "{path}: {:?}", e.attr);
    }
    let err = client.lstat(&on1[0]).expect_err("its attributes live on the stopped server");
    assert_eq!(err.fs_error(), Some(FsError::PeerDown), "{err}");
    assert!(client.readdir(&on0[0]).is_ok());

    // The command line.
    let file = cluster.cluster_file();
    let out = run(&["ls", "/"], Some(&file));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 16, "{}", text(&out.stdout));
    let out = run(&["ls", "-l", "/"], Some(&file));
    assert!(!out.status.success(), "ls -l cannot show every entry's attributes");
    let listing = text(&out.stdout);
    for path in &on1 {
        let line = listing.lines().find(|l| l.ends_with(&path[1..])).unwrap_or_else(|| panic!("{path} missing: {listing}"));
        assert!(line.starts_with("d?????????") && line.contains(" ? "), "{line}");
    }
    for path in &on0 {
        let line = listing.lines().find(|l| l.ends_with(&path[1..])).unwrap_or_else(|| panic!("{path} missing: {listing}"));
        assert!(line.starts_with("drwxr-xr-x"), "{line}");
    }
    let err = text(&out.stderr);
    assert!(err.contains(&format!("the attributes of {} entries could not be read: a metadata server did not answer", on1.len())), "{err}");

    // New directories under a live parent go on the live server, whatever placement chose.
    for i in 0..8 {
        let path = format!("/new{i}");
        client.mkdir(&path, 0o755).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(client.lstat(&path).unwrap().ino.server(), 0);
        client.mkdir(&format!("{path}/below"), 0o755).unwrap();
    }
    let out = run(&["mkdir", &format!("{}/new", on0[0])], Some(&file));
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = run(&["stat", &on1[0]], Some(&file));
    assert!(!out.status.success() && text(&out.stderr).contains("a metadata server did not answer"), "{}", text(&out.stderr));
    let out = run(&["cat", &format!("{}/f", on0[0])], Some(&file));
    assert_eq!(text(&out.stdout), "data", "{}", text(&out.stderr));
    cluster.stop().unwrap();
}
