//! Goal: the metadata servers enforce POSIX permissions for the user each request names:
//! directory modes decide who may walk, list and change a directory; only owners change modes
//! and times, and only the superuser gives a file away; a sticky directory keeps users from
//! removing each other's entries; a file's data is granted by its mode for the caller's class;
//! a writer may touch a file, and writes and owner changes clear setuid and setgid as on Linux.
//! Method: one or two metadata servers and two OSDs under CMDRSP on loopback, and clients
//! acting for the superuser and for three users (`Client::connect_for`).

mod common;

use common::*;
use tessera_client::{Caller, Client, ClientError, FsError, InodeId, Timespec};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::{MdsConnection, Reply, Request};

fn fs_err<T: std::fmt::Debug>(r: Result<T, ClientError>) -> FsError {
    match r {
        Err(ClientError::Fs { source, .. }) => source,
        other => panic!("expected a namespace error, got {other:?}"),
    }
}

struct People {
    root: Client,
    alice: Client,
    bob: Client,
    /// In alice's second group, 50.
    carol: Client,
}

fn people(cluster: &TestCluster) -> People {
    let as_ = |caller: Caller| Client::connect_for(&cluster.config, caller).unwrap();
    People {
        root: as_(Caller::ROOT),
        alice: as_(Caller { uid: 1000, gid: 1000, groups: vec![50] }),
        bob: as_(Caller::user(2000, 2000)),
        carol: as_(Caller { uid: 3000, gid: 3000, groups: vec![50] }),
    }
}

#[test]
fn directory_modes_decide_who_may_walk_list_and_change_a_directory() {
    let cluster = start(2, 2);
    let People { root, alice, bob, carol } = people(&cluster);
    root.mkdir("/home", 0o755).unwrap();
    root.mkdir("/home/alice", 0o755).unwrap();
    root.chown("/home/alice", Some(1000), Some(1000)).unwrap();

    let notes = alice.create("/home/alice/notes", 0o644, None).unwrap();
    notes.pwrite(0, b"alice's notes").unwrap();
    let a = alice.stat("/home/alice/notes").unwrap();
    assert_eq!((a.uid, a.gid), (1000, 1000), "a new file belongs to the user who made it");

    // 0755: others may walk and list, not change.
    assert_eq!(bob.open("/home/alice/notes").unwrap().read_to_end().unwrap(), b"alice's notes");
    assert_eq!(fs_err(bob.create("/home/alice/x", 0o644, None)), FsError::Access);
    assert_eq!(fs_err(bob.mkdir("/home/alice/x", 0o755)), FsError::Access);
    assert_eq!(fs_err(bob.symlink("notes", "/home/alice/x")), FsError::Access);
    assert_eq!(fs_err(bob.unlink("/home/alice/notes")), FsError::Access);
    assert_eq!(fs_err(bob.rename("/home/alice/notes", "/home/alice/y")), FsError::Access);
    assert_eq!(fs_err(bob.open("/home/alice/notes").unwrap().pwrite(0, b"bob")), FsError::Access, "0644 gives others no write");
    assert_eq!(fs_err(bob.truncate("/home/alice/notes", 0)), FsError::Access);
    // A name that is taken is EEXIST before write permission is asked, as on Linux: what
    // lets `mkdir -p` walk through directories that are not the caller's.
    assert_eq!(fs_err(bob.create("/home/alice/notes", 0o644, None)), FsError::Exists);
    assert_eq!(fs_err(bob.mkdir("/home/alice/notes", 0o755)), FsError::Exists);
    assert_eq!(fs_err(bob.symlink("x", "/home/alice/notes")), FsError::Exists);

    // 0711: walk through, but not list.
    alice.chmod("/home/alice", 0o711).unwrap();
    assert_eq!(bob.stat("/home/alice/notes").unwrap().size, 13);
    assert_eq!(fs_err(bob.readdir("/home/alice")), FsError::Access);
    // 0700: not even walk through.
    alice.chmod("/home/alice", 0o700).unwrap();
    assert_eq!(fs_err(bob.stat("/home/alice/notes")), FsError::Access);
    assert_eq!(fs_err(bob.open("/home/alice/notes")), FsError::Access);
    assert_eq!(alice.readdir("/home/alice").unwrap().len(), 1, "the owner still lists it");

    // The group class: a supplementary group counts; the first class that matches decides.
    alice.chown("/home/alice", None, Some(50)).unwrap();
    alice.chmod("/home/alice", 0o750).unwrap();
    assert_eq!(carol.readdir("/home/alice").unwrap().len(), 1);
    assert_eq!(fs_err(bob.readdir("/home/alice")), FsError::Access);
    alice.chmod("/home/alice", 0o057).unwrap();
    assert_eq!(fs_err(alice.readdir("/home/alice")), FsError::Access, "an owner without bits is refused whatever the others have");
    assert_eq!(bob.readdir("/home/alice").unwrap().len(), 1);

    // The superuser passes every directory check.
    root.chmod("/home/alice", 0o000).unwrap();
    root.create("/home/alice/from-root", 0o600, None).unwrap();
    assert_eq!(root.readdir("/home/alice").unwrap().len(), 2);
    assert_eq!(root.open("/home/alice/notes").unwrap().read_to_end().unwrap(), b"alice's notes");
}

#[test]
fn only_owners_change_modes_and_times_and_only_the_superuser_gives_files_away() {
    // One metadata server, so the directories below can move between parents by rename.
    let cluster = start(2, 1);
    let People { root, alice, bob, .. } = people(&cluster);
    root.mkdir("/shared", 0o777).unwrap();
    alice.create("/shared/a", 0o666, None).unwrap();

    assert_eq!(fs_err(bob.chmod("/shared/a", 0o777)), FsError::NotPermitted, "write permission is not ownership");
    let t = Timespec { secs: 1_000_000, nanos: 0 };
    assert_eq!(fs_err(bob.set_times("/shared/a", Some(t), Some(t))), FsError::NotPermitted);
    assert_eq!(fs_err(alice.chown("/shared/a", Some(2000), None)), FsError::NotPermitted, "only the superuser gives a file away");
    assert_eq!(fs_err(alice.chown("/shared/a", None, Some(77))), FsError::NotPermitted, "a group alice is not in");
    assert_eq!(alice.chown("/shared/a", None, Some(50)).unwrap().gid, 50);
    alice.set_times("/shared/a", Some(t), Some(t)).unwrap();
    root.chown("/shared/a", Some(2000), Some(2000)).unwrap();
    assert_eq!(bob.chmod("/shared/a", 0o600).unwrap().mode & 0o7777, 0o600, "now bob's");

    // Data follows the caller's class: 0600 keeps everyone but the owner out.
    let private = alice.create("/shared/private", 0o600, None).unwrap();
    private.pwrite(0, b"secret").unwrap();
    assert_eq!(fs_err(bob.open("/shared/private").unwrap().read_to_end()), FsError::Access);
    // The superuser reads whatever some class may read, and writes nothing no class may write.
    assert_eq!(root.open("/shared/private").unwrap().read_to_end().unwrap(), b"secret");
    alice.chmod("/shared/private", 0o444).unwrap();
    assert_eq!(fs_err(root.open("/shared/private").unwrap().pwrite(0, b"x")), FsError::Access);

    // A create remembers its parent's facts for the next one in it; a chmod between them
    // counts.
    root.mkdir("/drop", 0o777).unwrap();
    bob.create("/drop/1", 0o644, None).unwrap();
    root.chmod("/drop", 0o755).unwrap();
    assert_eq!(fs_err(bob.create("/drop/2", 0o644, None)), FsError::Access);
    root.chmod("/drop", 0o773).unwrap();
    bob.create("/drop/2", 0o644, None).unwrap();

    // A directory moving to another parent needs write permission on itself (its `..`).
    bob.mkdir("/shared/b1", 0o755).unwrap();
    bob.mkdir("/shared/b2", 0o755).unwrap();
    bob.chmod("/shared/b1", 0o555).unwrap();
    assert_eq!(fs_err(bob.rename("/shared/b1", "/shared/b2/b1")), FsError::Access);
    bob.rename("/shared/b1", "/shared/b3").unwrap();
    bob.chmod("/shared/b3", 0o755).unwrap();
    bob.rename("/shared/b3", "/shared/b2/b1").unwrap();
}

#[test]
fn a_writer_may_touch_a_file_and_writes_and_owner_changes_take_its_privilege_bits() {
    let cluster = start(2, 1);
    let People { root, alice, bob, carol } = people(&cluster);
    let mode = |path: &str| root.stat(path).unwrap().mode & 0o7777;
    root.mkdir("/proj", 0o777).unwrap();
    alice.create("/proj/tool", 0o664, None).unwrap();
    alice.chown("/proj/tool", None, Some(50)).unwrap();

    // touch: the owner or any writer stamps the server's time; a time of one's choosing
    // needs ownership.
    let old = Timespec { secs: 1_000_000, nanos: 0 };
    alice.set_times("/proj/tool", Some(old), Some(old)).unwrap();
    let stamped = carol.set_times_to_now("/proj/tool").unwrap();
    assert!(stamped.mtime.secs > old.secs && stamped.atime == stamped.mtime, "carol may write (group 50), so she may touch: {stamped:?}");
    assert_eq!(fs_err(bob.set_times_to_now("/proj/tool")), FsError::Access, "bob may only read");
    assert_eq!(fs_err(carol.set_times("/proj/tool", Some(old), Some(old))), FsError::NotPermitted);

    // A write by anyone but the superuser clears setuid, and setgid with group execute.
    alice.chmod("/proj/tool", 0o6775).unwrap();
    root.open("/proj/tool").unwrap().pwrite(0, b"root's").unwrap();
    assert_eq!(mode("/proj/tool"), 0o6775, "the superuser's write keeps them");
    let tool = carol.open("/proj/tool").unwrap();
    tool.pwrite(0, b"carol's").unwrap();
    assert_eq!(mode("/proj/tool"), 0o0775);
    alice.chmod("/proj/tool", 0o2765).unwrap();
    carol.open("/proj/tool").unwrap().pwrite(0, b"carol's").unwrap();
    assert_eq!(mode("/proj/tool"), 0o2765, "setgid without group execute is no privilege, and stays");
    alice.chmod("/proj/tool", 0o4775).unwrap();
    carol.truncate("/proj/tool", 3).unwrap();
    assert_eq!(mode("/proj/tool"), 0o0775, "a truncate is a write");
    let own = alice.create("/proj/own", 0o4755, None).unwrap();
    own.pwrite(0, b"x").unwrap();
    assert_eq!(mode("/proj/own"), 0o0755, "the owner's own write too");

    // A change of owner clears them, even by the superuser; a directory keeps them.
    alice.chmod("/proj/tool", 0o6775).unwrap();
    root.chown("/proj/tool", Some(2000), None).unwrap();
    assert_eq!(mode("/proj/tool"), 0o0775);
    root.mkdir("/proj/d", 0o2775).unwrap();
    root.chown("/proj/d", Some(1000), Some(50)).unwrap();
    assert_eq!(mode("/proj/d"), 0o2775);

    // chmod by an owner outside the file's group drops setgid, without an error.
    root.chown("/proj/tool", Some(2000), Some(50)).unwrap();
    assert_eq!(bob.chmod("/proj/tool", 0o2775).unwrap().mode & 0o7777, 0o0775, "bob is not in group 50");
    root.chown("/proj/tool", Some(1000), Some(50)).unwrap();
    assert_eq!(alice.chmod("/proj/tool", 0o2775).unwrap().mode & 0o7777, 0o2775, "alice is");
}

#[test]
fn a_sticky_directory_keeps_users_from_removing_each_others_entries() {
    let cluster = start(2, 2);
    let People { root, alice, bob, .. } = people(&cluster);
    root.mkdir("/tmp", 0o1777).unwrap();
    alice.create("/tmp/a", 0o644, None).unwrap();
    bob.create("/tmp/b", 0o644, None).unwrap();

    assert_eq!(fs_err(bob.unlink("/tmp/a")), FsError::NotPermitted);
    assert_eq!(fs_err(bob.rename("/tmp/a", "/tmp/mine")), FsError::NotPermitted);
    assert_eq!(fs_err(bob.rename("/tmp/b", "/tmp/a")), FsError::NotPermitted, "nor replace it");
    // Directories spread over both servers: a subdirectory's owner may be on the server
    // that does not hold its entry.
    let here = alice.stat("/tmp").unwrap().ino.server();
    for i in 0..8 {
        alice.mkdir(&format!("/tmp/d{i}"), 0o755).unwrap();
    }
    let far = (0..8).find(|i| alice.stat(&format!("/tmp/d{i}")).unwrap().ino.server() != here).expect("a directory on the other server");
    let near = (0..8).find(|i| alice.stat(&format!("/tmp/d{i}")).unwrap().ino.server() == here).expect("a directory on the entry's server");
    assert_eq!(fs_err(bob.rmdir(&format!("/tmp/d{far}"))), FsError::NotPermitted);
    // An unlink of someone else's directory is EPERM before it is EISDIR, as on Linux,
    // whichever server holds the directory (a far one's owner needs the other server).
    for i in [near, far] {
        assert_eq!(fs_err(bob.unlink(&format!("/tmp/d{i}"))), FsError::NotPermitted, "bob unlinks alice's /tmp/d{i}");
        assert_eq!(fs_err(alice.unlink(&format!("/tmp/d{i}"))), FsError::IsDir, "alice unlinks her /tmp/d{i}");
    }
    alice.rmdir(&format!("/tmp/d{far}")).unwrap();
    bob.unlink("/tmp/b").unwrap();
    alice.rename("/tmp/a", "/tmp/a2").unwrap();
    root.unlink("/tmp/a2").unwrap();
}

/// Requests sent by hand for a user: what the client library never asks for is refused too.
#[test]
fn a_user_may_not_send_the_servers_own_requests_or_make_inodes_for_others() {
    let cluster = start(1, 2);
    let People { root, bob, .. } = people(&cluster);
    root.mkdir("/open", 0o777).unwrap();
    let open = root.stat("/open").unwrap();
    let mut link = MdsConnection::connect(cluster.config.mds[0].addr.as_str()).unwrap().with_caller(Caller::user(2000, 2000));

    let for_root = NewInode { mode: 0o644, uid: 0, gid: 0 };
    let create = Request::Create { parent: open.ino, name: "f".into(), new: for_root, stripe: None };
    assert_eq!(link.call(&create).unwrap(), Err(FsError::NotPermitted), "a file owned by someone else");
    let mine = NewInode { mode: 0o644, uid: 2000, gid: 2000 };
    assert!(matches!(link.call(&Request::Create { parent: open.ino, name: "f".into(), new: mine, stripe: None }).unwrap(), Ok(Reply::Created { .. })));

    assert_eq!(link.call(&Request::PeerRemoveDir { ino: open.ino }).unwrap(), Err(FsError::NotPermitted));
    assert_eq!(link.call(&Request::Repair { remove: true, older_than_secs: 0 }).unwrap(), Err(FsError::NotPermitted));
    assert_eq!(fs_err(bob.repair(false, 0)), FsError::NotPermitted);
    assert_eq!(link.call(&Request::SetDirStripe { dir: open.ino, hint: None }).unwrap(), Err(FsError::NotPermitted), "the directory is root's");
    assert_eq!(root.stat("/open").unwrap().ino, open.ino, "still there");
    assert_eq!(root.readdir("/open").unwrap().len(), 1);
    assert_eq!(link.call(&Request::GetAttr { ino: InodeId::ROOT }).unwrap().map(|_| ()), Ok(()));
}

/// A project directory: setgid (mode 2000) makes new entries take its group, and new
/// subdirectories its bit, on whichever server they are homed.
#[test]
fn a_setgid_directory_keeps_its_tree_in_its_group() {
    let cluster = start(1, 2);
    let People { root, alice, .. } = people(&cluster);
    root.mkdir("/proj", 0o2775).unwrap();
    root.chown("/proj", None, Some(50)).unwrap();
    let f = alice.create("/proj/f", 0o644, None).unwrap();
    assert_eq!(alice.stat("/proj/f").unwrap().gid, 50, "the directory's group, not alice's 1000");
    drop(f);
    let here = alice.stat("/proj").unwrap().ino.server();
    let mut servers = std::collections::HashSet::new();
    for i in 0..8 {
        let d = alice.mkdir(&format!("/proj/d{i}"), 0o755).unwrap();
        assert_eq!((d.gid, d.mode & 0o7777), (50, 0o2755), "/proj/d{i}");
        servers.insert(d.ino.server());
        let link = alice.symlink("f", &format!("/proj/d{i}/l")).unwrap();
        assert_eq!(link.gid, 50, "inherited again one level down");
    }
    assert!(servers.contains(&(1 - here)), "a subdirectory homed on the other server: {servers:?}");
    alice.chmod("/proj/d0", 0o755).unwrap();
    assert_eq!(alice.mkdir("/proj/d0/e", 0o755).unwrap().gid, 1000, "without the bit, the creator's group again");
}
