//! Goal: the namespace operations work over two metadata servers, refusals surface as typed
//! errors with the path, and OSD failures name the OSD. Method: two MDSs and two OSDs on
//! loopback; names are chosen so directories land on both servers.

mod common;

use common::*;
use tessera_client::{Client, ClientError, ClusterConfig, FileType, FsError, Stripe, StripeHint};

fn fs_err<T: std::fmt::Debug>(r: Result<T, ClientError>) -> FsError {
    match r {
        Err(ClientError::Fs { source, .. }) => source,
        other => panic!("expected a namespace error, got {other:?}"),
    }
}

#[test]
fn namespace_over_two_servers() {
    let cluster = start(2, 2);
    let c = cluster.client();

    // Enough directories that both servers home some (placement hashes parent and name).
    for i in 0..8 {
        c.mkdir(&format!("/d{i}"), 0o755).unwrap();
    }
    let homes: Vec<u32> = (0..8).map(|i| c.stat(&format!("/d{i}")).unwrap().ino.server()).collect();
    assert!(homes.contains(&0) && homes.contains(&1), "{homes:?}");
    let far = (0..8).find(|&i| homes[i] == 1).unwrap();
    let near = (0..8).find(|&i| homes[i] == 0).unwrap();

    // Files inside a remote directory, nested directories, readdir.
    let dir = format!("/d{far}");
    c.mkdir(&format!("{dir}/sub"), 0o700).unwrap();
    let f = c.create(&format!("{dir}/file"), 0o640, None).unwrap();
    f.pwrite(0, b"hello").unwrap();
    assert_eq!(c.stat(&format!("{dir}/file")).unwrap().size, 5);
    assert_eq!(c.stat(&format!("{dir}/sub/..")).unwrap().ino, c.stat(&dir).unwrap().ino);
    let names: Vec<String> = c.readdir(&dir).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["file".to_string(), "sub".to_string()]);
    assert_eq!(c.readdir("/").unwrap().len(), 8);

    // Typed refusals.
    assert_eq!(fs_err(c.stat("/missing")), FsError::NotFound);
    assert_eq!(fs_err(c.open(&format!("{dir}/nope"))), FsError::NotFound);
    assert_eq!(fs_err(c.mkdir(&dir, 0o755)), FsError::Exists);
    assert_eq!(fs_err(c.create(&format!("{dir}/file"), 0o644, None)), FsError::Exists);
    assert_eq!(fs_err(c.rmdir(&dir)), FsError::NotEmpty);
    assert_eq!(fs_err(c.mkdir(&format!("{dir}/file/x"), 0o755)), FsError::NotDir);
    assert_eq!(fs_err(c.stat(&format!("{dir}/file/x"))), FsError::NotDir);
    assert_eq!(fs_err(c.open(&dir)), FsError::IsDir);
    let err = c.rmdir(&dir).unwrap_err();
    assert_eq!(err.errno(), 39);
    assert!(err.to_string().contains(&dir), "{err}");

    // Rename within a server, and EXDEV across servers.
    c.rename(&format!("{dir}/file"), &format!("{dir}/renamed")).unwrap();
    assert_eq!(c.open(&format!("{dir}/renamed")).unwrap().read_to_end().unwrap(), b"hello");
    assert_eq!(fs_err(c.rename(&format!("{dir}/renamed"), &format!("/d{near}/x"))), FsError::CrossServer);

    // Symlinks, chmod.
    c.symlink("/some/where", "/link").unwrap();
    assert_eq!(c.readlink("/link").unwrap(), "/some/where");
    assert_eq!(c.lstat("/link").unwrap().file_type, FileType::Symlink);
    assert_eq!(fs_err(c.stat("/link")), FsError::NotFound, "stat follows the link to nothing");
    assert_eq!(c.chmod(&format!("{dir}/renamed"), 0o600).unwrap().mode, 0o600);
    // chown: each id alone, then both; the mode stays.
    let owned = c.chown(&format!("{dir}/renamed"), Some(1234), None).unwrap();
    let stat = c.stat(&format!("{dir}/renamed")).unwrap();
    assert_eq!((owned.uid, stat.uid, stat.gid, stat.mode), (1234, 1234, owned.gid, 0o600));
    let both = c.chown(&format!("{dir}/renamed"), None, Some(99)).unwrap();
    assert_eq!((both.uid, both.gid), (1234, 99));
    assert_eq!(fs_err(c.chown("/no/such", Some(1), None)), FsError::NotFound);

    // Striping on a directory is inherited; on a new path it creates the file.
    let h = StripeHint { stripe_unit: 8192, stripe_count: 1, start_osd: Some(1) };
    c.setstripe(&format!("/d{near}"), Some(h)).unwrap();
    assert_eq!(c.getstripe(&format!("/d{near}")).unwrap(), Stripe::Directory(Some(h)));
    let g = c.create(&format!("/d{near}/inherits"), 0o644, None).unwrap();
    assert_eq!((g.layout().stripe.stripe_unit(), g.layout().objects[0].osd), (8192, 1));
    c.setstripe("/striped", hint(4096, 2)).unwrap();
    match c.getstripe("/striped").unwrap() {
        Stripe::File(l) => assert_eq!((l.stripe.stripe_unit(), l.stripe.stripe_count()), (4096, 2)),
        other => panic!("{other:?}"),
    }
    assert_eq!(fs_err(c.setstripe("/striped", hint(4096, 1))), FsError::Exists);

    // Truncate by path, fsync, unlink, rmdir.
    c.truncate(&format!("{dir}/renamed"), 2).unwrap();
    let r = c.open(&format!("{dir}/renamed")).unwrap();
    assert_eq!(r.read_to_end().unwrap(), b"he");
    r.fsync().unwrap();
    c.unlink(&format!("{dir}/renamed")).unwrap();
    c.rmdir(&format!("{dir}/sub")).unwrap();
    c.rmdir(&dir).unwrap();
    assert_eq!(fs_err(c.stat(&dir)), FsError::NotFound);
    let totals = c.statfs().unwrap();
    assert_eq!(totals.symlinks, 1);
    assert_eq!(totals.directories, 7 + 1, "seven left plus the root");
}

/// Goal: a failing OSD is named in the error (index, portal, object). Method: a second client
/// whose configuration points OSD 1 at a port nobody listens on.
#[test]
fn osd_failure_names_the_osd() {
    let cluster = start(2, 1);
    let good = cluster.client();
    let f = good.create("/f", 0o644, hint(4096, 2)).unwrap();
    f.pwrite(0, &[1u8; 8192]).unwrap();

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let mut config: ClusterConfig = cluster.config.clone();
    config.osds[1].addr = dead_addr.clone();
    let bad = Client::connect(&config).unwrap();
    let object = f.layout().objects.iter().find(|o| o.osd == 1).unwrap().object_id;
    let err = bad.open("/f").unwrap().pwrite(0, &[2u8; 8192]).unwrap_err();
    match &err {
        ClientError::Osd { osd_index, addr, object_id, .. } => {
            assert_eq!((*osd_index, addr.as_str(), *object_id), (1, dead_addr.as_str(), object))
        }
        other => panic!("expected an OSD error, got {other}"),
    }
    assert!(err.to_string().contains(&dead_addr), "{err}");
    assert_eq!(err.errno(), 5);

    // A wrong target name is refused at login and named the same way.
    let mut config = cluster.config.clone();
    config.osds[0].target = "iqn.2026-11.org.tessera.test:nobody".into();
    let err = Client::connect(&config).unwrap().open("/f").unwrap().read_to_end().unwrap_err();
    assert!(matches!(err, ClientError::Osd { osd_index: 0, .. }), "{err}");
}

/// Goal: a configuration pointing at no metadata server fails at connect, naming it.
#[test]
fn unreachable_mds_is_named() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let config = ClusterConfig::new(vec![tessera_client::MdsEntry { addr: addr.clone() }], vec![]);
    match Client::connect(&config) {
        Err(ClientError::Mds { server: 0, addr: a, .. }) => assert_eq!(a, addr),
        Err(other) => panic!("expected an MDS error, got {other}"),
        Ok(_) => panic!("connected to nothing"),
    }
}

/// Goal: an open directory handle makes, finds and removes entries by name in one request
/// each, keeps naming the same directory after it is renamed, and refuses names that are not
/// one component. Method: two metadata servers; the handle's directory is homed on either.
#[test]
fn directory_handles_work_by_name_and_follow_renames() {
    let cluster = start(2, 2);
    let c = cluster.client();
    for i in 0..4 {
        c.mkdir(&format!("/h{i}"), 0o755).unwrap();
        let d = c.open_dir(&format!("/h{i}")).unwrap();
        assert_eq!(d.ino(), c.stat(&format!("/h{i}")).unwrap().ino);
        let f = d.create("f", 0o640, hint(4096, 2)).unwrap();
        f.pwrite(0, b"abc").unwrap();
        assert_eq!(d.stat("f").unwrap().size, 3);
        assert_eq!(d.mkdir("sub", 0o700).unwrap().mode, 0o700);
        assert_eq!(fs_err(d.create("f", 0o640, None)), FsError::Exists);
        assert_eq!(fs_err(d.stat("nope")), FsError::NotFound);
        for bad in ["", ".", "..", "a/b"] {
            assert_eq!(fs_err(d.stat(bad)), FsError::Invalid, "{bad:?}");
        }
        assert_eq!(fs_err(d.create(&"n".repeat(256), 0o644, None)), FsError::NameTooLong);
        // Renamed under the handle: the handle still names the directory.
        c.rename(&format!("/h{i}"), &format!("/moved{i}")).unwrap();
        d.unlink("f").unwrap();
        assert_eq!(fs_err(c.stat(&format!("/moved{i}/f"))), FsError::NotFound);
        assert_eq!(c.stat(&format!("/moved{i}/sub")).unwrap().file_type, FileType::Directory);
        // A walk down by handles: listed, entered, opened by name, emptied.
        let listed = d.readdir().unwrap();
        assert_eq!(listed.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["sub"]);
        let sub = d.entered("sub", &listed[0].attr).unwrap();
        assert_eq!(sub.ino(), d.open_dir("sub").unwrap().ino());
        sub.mkdir("leaf", 0o755).unwrap();
        assert_eq!(fs_err(d.rmdir("sub")), FsError::NotEmpty);
        sub.rmdir("leaf").unwrap();
        assert!(sub.readdir().unwrap().is_empty());
        d.rmdir("sub").unwrap();
        assert!(d.readdir().unwrap().is_empty());
        assert!(matches!(fs_err(sub.readdir()), FsError::Stale | FsError::NotFound), "a removed directory's handle lists nothing");
    }
    c.create("/plain", 0o644, None).unwrap();
    assert_eq!(fs_err(c.open_dir("/plain")), FsError::NotDir);
    let root = c.open_dir("/").unwrap();
    assert_eq!(fs_err(root.open_dir("plain")), FsError::NotDir);
    assert_eq!(fs_err(root.entered("plain", &c.stat("/plain").unwrap())), FsError::NotDir);
    c.mkdir("/real", 0o755).unwrap();
    c.symlink("/real", "/link").unwrap();
    assert_eq!(fs_err(root.open_dir("link")), FsError::NotDir, "a handle's open_dir does not follow a symlink");
}

/// Goal: a file's mtime and ctime follow writes, though writes go straight to the OSDs and
/// never through the metadata server; a chmod after a write keeps the write's mtime, and a
/// utimes after the last write stands as set.
/// Method: writes and `set_times` through the real client; the server reads the objects'
/// data-modified times with their lengths.
#[test]
fn writes_move_a_files_mtime_and_utimes_sets_it() {
    use std::time::Duration;
    use tessera_client::Timespec;
    let cluster = start(2, 1);
    let c = cluster.client();
    let f = c.create("/timed", 0o644, hint(4096, 2)).unwrap();
    let created = c.stat("/timed").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    f.pwrite(5000, b"on the second object").unwrap();
    let written = c.stat("/timed").unwrap();
    assert!(written.mtime > created.mtime, "{:?} after {:?}", written.mtime, created.mtime);
    assert_eq!(written.ctime, written.mtime);
    // A chmod moves the ctime only: the write's time stays the mtime.
    std::thread::sleep(Duration::from_millis(20));
    let chmodded = c.chmod("/timed", 0o600).unwrap();
    assert_eq!(chmodded.mtime, written.mtime);
    assert!(chmodded.ctime > written.ctime);
    assert_eq!(c.stat("/timed").unwrap().mtime, written.mtime);

    let old = Timespec { secs: 1_000_000_000, nanos: 5 };
    c.set_times("/timed", Some(old), Some(old)).unwrap();
    let set = c.stat("/timed").unwrap();
    assert_eq!((set.atime, set.mtime), (old, old));
    assert!(set.ctime >= written.mtime);

    std::thread::sleep(Duration::from_millis(20));
    f.pwrite(0, b"again").unwrap();
    let rewritten = c.stat("/timed").unwrap();
    assert!(rewritten.mtime > set.ctime, "a write after the utimes moves the mtime again");
    assert_eq!(rewritten.size, 5000 + 20);
}

/// Goal: the path and errno rules POSIX users rely on. Over-long names answer ENAMETOOLONG at
/// any depth (never a panic); a trailing `/` names a directory (ENOTDIR on a file, EISDIR on
/// create); out-of-range times are EINVAL; a sparse write far
/// past the device's size is allowed (only written bytes use space); I/O through a handle
/// whose file was removed answers ESTALE. Method: a real two-OSD cluster, each case checked
/// against its errno.
#[test]
fn paths_and_errnos_follow_posix() {
    use tessera_client::Timespec;
    let cluster = start(2, 1);
    let c = cluster.client();
    c.mkdir("/d", 0o755).unwrap();
    let f = c.create("/d/file", 0o644, hint(4096, 2)).unwrap();
    f.pwrite(0, b"some bytes").unwrap();

    let long = "n".repeat(256);
    for path in [format!("/d/{long}"), format!("/{long}/x"), format!("/d/{}", "z".repeat(70_000))] {
        assert_eq!(fs_err(c.stat(&path)), FsError::NameTooLong, "stat of {} bytes", path.len());
        assert_eq!(fs_err(c.open(&path)), FsError::NameTooLong);
        assert_eq!(fs_err(c.readdir(&path)), FsError::NameTooLong);
    }
    assert_eq!(fs_err(c.mkdir(&format!("/{long}/x"), 0o755)), FsError::NameTooLong);
    assert_eq!(fs_err(c.unlink(&format!("/{long}/x"))), FsError::NameTooLong);
    assert_eq!(fs_err(c.symlink(&"t".repeat(4096), "/d/l")), FsError::NameTooLong);
    assert_eq!(fs_err(c.symlink("", "/d/l")), FsError::NotFound);
    assert_eq!(fs_err(c.mkdir("/", 0o755)), FsError::Exists);
    assert_eq!(fs_err(c.mkdir("/d/..", 0o755)), FsError::Exists);

    assert_eq!(fs_err(c.stat("/d/file/")), FsError::NotDir);
    assert_eq!(fs_err(c.stat("/d/file/.")), FsError::NotDir);
    assert_eq!(fs_err(c.open("/d/file/")), FsError::NotDir);
    assert_eq!(fs_err(c.create("/d/new/", 0o644, None)), FsError::IsDir);
    assert_eq!(fs_err(c.unlink("/d/file/")), FsError::NotDir);
    assert_eq!(fs_err(c.rename("/d/file/", "/d/other")), FsError::NotDir);
    assert_eq!(fs_err(c.rename("/d/file", "/d/other/")), FsError::NotDir);
    assert_eq!(c.stat("/d/").unwrap().file_type, FileType::Directory);
    c.rename("/d/", "/e/").unwrap();
    assert_eq!(c.stat("/e/file").unwrap().size, 10, "a directory moves with trailing slashes");

    let bad = Timespec { secs: 1, nanos: 1_000_000_000 };
    assert_eq!(fs_err(c.set_times("/e/file", Some(bad), None)), FsError::Invalid);

    let f = c.open("/e/file").unwrap();
    f.pwrite(16 << 40, b"x").expect("a sparse write 16 TiB out (8 TiB per object) uses one block");
    assert_eq!(f.size().unwrap(), (16 << 40) + 1);
    f.set_len(10).unwrap();

    c.unlink("/e/file").unwrap();
    // The objects go a moment after the answer; until then the handle still reaches them.
    until_objects_removed(&c);
    let mut buf = [0u8; 4];
    let err = f.pread(0, &mut buf).unwrap_err();
    assert_eq!(err.fs_error(), Some(FsError::Stale), "I/O through a removed file's handle: {err}");
    assert_eq!(err.errno(), 116);
    assert_eq!(f.pwrite(0, b"x").unwrap_err().fs_error(), Some(FsError::Stale));
}

/// Goal: symbolic links resolve as POSIX pathname resolution has it, across metadata servers.
/// Links on the way are always followed; a final link is followed by stat, open, readdir,
/// chmod and truncate, and not by lstat, readlink, unlink and rename. A relative target is
/// taken from the link's directory, an absolute one from the root; `..` after a link is the
/// parent of where it led (not of the text before it); a dangling link is ENOENT; a trailing
/// `/` follows a final link; 40 links in a walk are followed and the 41st is ELOOP. Method:
/// two metadata servers and two OSDs on loopback, directories on both servers, each case
/// checked by the inode or bytes it reaches.
#[test]
fn symlinks_resolve_as_posix_pathname_resolution() {
    let cluster = start(2, 2);
    let c = cluster.client();
    for i in 0..8 {
        c.mkdir(&format!("/d{i}"), 0o755).unwrap();
    }
    let homes: Vec<u32> = (0..8).map(|i| c.stat(&format!("/d{i}")).unwrap().ino.server()).collect();
    let far = format!("/d{}", (0..8).find(|&i| homes[i] == 1).unwrap());
    let near = format!("/d{}", (0..8).find(|&i| homes[i] == 0).unwrap());
    c.mkdir(&format!("{far}/deep"), 0o755).unwrap();
    let target = format!("{far}/deep/file");
    c.create(&target, 0o644, hint(4096, 2)).unwrap().pwrite(0, b"through the link").unwrap();
    let file_ino = c.stat(&target).unwrap().ino;

    // An absolute link on one server to a file on the other; a relative link to a directory.
    c.symlink(&target, &format!("{near}/abs")).unwrap();
    c.symlink("deep", &format!("{far}/rel")).unwrap();
    c.symlink(&format!("..{far}/rel"), &format!("{near}/hop")).unwrap(); // relative, via `..`
    assert_eq!(c.open(&format!("{near}/abs")).unwrap().read_to_end().unwrap(), b"through the link");
    assert_eq!(c.stat(&format!("{near}/abs")).unwrap().ino, file_ino);
    assert_eq!(c.stat(&format!("{near}/abs")).unwrap().size, 16);
    let link = c.lstat(&format!("{near}/abs")).unwrap();
    assert_eq!((link.file_type, link.size), (FileType::Symlink, target.len() as u64));
    assert_eq!(c.stat(&format!("{far}/rel/file")).unwrap().ino, file_ino, "a link on the way");
    assert_eq!(c.stat(&format!("{near}/hop/file")).unwrap().ino, file_ino, "a link to a link");
    assert_eq!(c.readdir(&format!("{near}/hop")).unwrap().into_iter().map(|e| e.name).collect::<Vec<_>>(), vec!["file"]);
    assert_eq!(c.lookup(&format!("{near}/hop/")).unwrap().file_type, FileType::Directory, "a trailing / follows");
    assert_eq!(c.lookup(&format!("{near}/hop")).unwrap().file_type, FileType::Symlink);

    // `..` after a link is the parent of where it led: rel/.. is {far}, not the link's text.
    assert_eq!(c.stat(&format!("{near}/hop/..")).unwrap().ino, c.stat(&far).unwrap().ino);
    // Creating through a link to a directory makes the file where the link leads.
    c.create(&format!("{near}/hop/made"), 0o644, None).unwrap();
    assert!(c.stat(&format!("{far}/deep/made")).is_ok());

    // Acting on the target: chmod and truncate follow; the link's own mode stays 0777.
    c.chmod(&format!("{near}/abs"), 0o600).unwrap();
    assert_eq!(c.stat(&target).unwrap().mode, 0o600);
    assert_eq!(c.lstat(&format!("{near}/abs")).unwrap().mode, 0o777);
    c.truncate(&format!("{near}/abs"), 7).unwrap();
    assert_eq!(c.open(&target).unwrap().read_to_end().unwrap(), b"through");

    // Acting on the name: rename and unlink move and remove the link, not the file.
    c.rename(&format!("{near}/abs"), &format!("{near}/abs2")).unwrap();
    assert_eq!(c.readlink(&format!("{near}/abs2")).unwrap(), target);
    c.unlink(&format!("{near}/abs2")).unwrap();
    assert_eq!(c.stat(&target).unwrap().size, 7, "removing a link leaves its file");

    // Dangling links, loops and the limit of 40.
    c.symlink("missing", &format!("{near}/dangling")).unwrap();
    assert_eq!(fs_err(c.open(&format!("{near}/dangling"))), FsError::NotFound);
    assert_eq!(c.lookup(&format!("{near}/dangling")).unwrap().file_type, FileType::Symlink);
    c.symlink("loop-b", &format!("{near}/loop-a")).unwrap();
    c.symlink("loop-a", &format!("{near}/loop-b")).unwrap();
    assert_eq!(fs_err(c.stat(&format!("{near}/loop-a"))), FsError::Loop);
    assert_eq!(fs_err(c.open(&format!("{near}/loop-a/x"))), FsError::Loop);
    c.symlink(&target, &format!("{near}/chain0")).unwrap();
    for i in 1..=40 {
        c.symlink(&format!("chain{}", i - 1), &format!("{near}/chain{i}")).unwrap();
    }
    assert_eq!(c.stat(&format!("{near}/chain39")).unwrap().ino, file_ino, "40 links are followed");
    assert_eq!(fs_err(c.stat(&format!("{near}/chain40"))), FsError::Loop, "the 41st is a loop");
    assert_eq!(fs_err(c.readlink(&target)), FsError::Invalid, "readlink of a file");
}

/// Goal: two renames that cross (`mv a b/` and `mv b a/` at once) never make a directory its
/// own ancestor: one moves, the other is refused, and both directories stay reachable from
/// the root. Found by running two `tessera mv` processes at once: the server gathered the
/// target's ancestors before its transaction, so each rename passed the check against a
/// chain the other was changing, and both directories (and the files below them) fell out of
/// the tree as a cycle. Method: one metadata server, two clients released together by a
/// barrier, many rounds.
#[test]
fn crossing_directory_renames_never_make_a_cycle() {
    let cluster = start(1, 1);
    let (one, two) = (cluster.client(), cluster.client());
    let barrier = std::sync::Barrier::new(2);
    let mut both_refused = 0;
    for round in 0..300 {
        let top = format!("/r{round}");
        one.mkdir(&top, 0o755).unwrap();
        one.mkdir(&format!("{top}/a"), 0o755).unwrap();
        one.mkdir(&format!("{top}/b"), 0o755).unwrap();
        let (a, b) = (one.stat(&format!("{top}/a")).unwrap().ino, one.stat(&format!("{top}/b")).unwrap().ino);
        let (first, second) = std::thread::scope(|s| {
            let first = s.spawn(|| {
                barrier.wait();
                one.rename(&format!("{top}/a"), &format!("{top}/b/a"))
            });
            let second = s.spawn(|| {
                barrier.wait();
                two.rename(&format!("{top}/b"), &format!("{top}/a/b"))
            });
            (first.join().unwrap(), second.join().unwrap())
        });
        assert!(!(first.is_ok() && second.is_ok()), "round {round}: both crossing renames succeeded");
        both_refused += usize::from(first.is_err() && second.is_err());
        // Whatever happened, both directories hang below `top`.
        let reachable = reachable_below(&one, &top);
        assert!(reachable.contains(&a) && reachable.contains(&b), "round {round}: {first:?} {second:?}; reachable {reachable:?}");
    }
    assert!(both_refused < 300, "some rounds must move a directory");
}

/// Makes a directory `parent/stem<k>` whose inode is homed on `server` (placement hashes the
/// parent and the name, so names are tried in turn); returns its path.
fn mkdir_on(c: &Client, parent: &str, stem: &str, server: u32) -> String {
    for k in 0..200 {
        let path = format!("{parent}/{stem}{k}");
        if c.mkdir(&path, 0o755).unwrap().ino.server() == server {
            return path;
        }
        c.rmdir(&path).unwrap();
    }
    panic!("no name under {parent} lands on server {server}");
}

/// Goal: two directory moves on different metadata servers that cross through each other's
/// directories never close a cycle. Server 0 moves `x` (homed on 0) below `q1`, whose chain to
/// the root passes through `y` on server 1; server 1 at once moves `y` below `q2`, whose chain
/// passes through `x`. Each move alone is legal; done together they would leave x, q1, y and q2
/// a cycle out of the tree, because each server checks the part of the chain homed on the
/// other from what that server answered a moment before. Method: two servers, directories
/// placed by name, two clients released together by a barrier, many rounds.
#[test]
fn crossing_moves_on_two_servers_never_make_a_cycle() {
    let cluster = start(1, 2);
    let (one, two) = (cluster.client(), cluster.client());
    let barrier = std::sync::Barrier::new(2);
    for round in 0..60 {
        let top = format!("/c{round}");
        one.mkdir(&top, 0o755).unwrap();
        let p = mkdir_on(&one, &top, "p", 0);
        let x = mkdir_on(&one, &p, "x", 0);
        let p2 = mkdir_on(&one, &top, "p2-", 1);
        let y = mkdir_on(&one, &p2, "y", 1);
        let q1 = mkdir_on(&one, &y, "q1-", 0);
        let q2 = mkdir_on(&one, &x, "q2-", 1);
        let (xi, yi) = (one.stat(&x).unwrap().ino, one.stat(&y).unwrap().ino);
        let (x_name, y_name) = (x.rsplit('/').next().unwrap(), y.rsplit('/').next().unwrap());
        let (first, second) = std::thread::scope(|s| {
            let first = s.spawn(|| {
                barrier.wait();
                one.rename(&x, &format!("{q1}/{x_name}"))
            });
            let second = s.spawn(|| {
                barrier.wait();
                two.rename(&y, &format!("{q2}/{y_name}"))
            });
            (first.join().unwrap(), second.join().unwrap())
        });
        assert!(!(first.is_ok() && second.is_ok()), "round {round}: both crossing moves succeeded");
        let reachable = reachable_below(&one, &top);
        assert!(reachable.contains(&xi) && reachable.contains(&yi), "round {round}: {first:?} {second:?}");
    }
}

/// Every inode reachable from directory `top` by walking down its entries.
fn reachable_below(client: &tessera_client::Client, top: &str) -> Vec<tessera_client::InodeId> {
    let mut reachable = Vec::new();
    let mut queue = vec![top.to_string()];
    while let Some(dir) = queue.pop() {
        for e in client.readdir(&dir).unwrap() {
            reachable.push(e.attr.ino);
            queue.push(format!("{dir}/{}", e.name));
        }
    }
    reachable
}
