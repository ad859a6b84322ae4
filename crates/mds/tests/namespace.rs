//! Goal: every namespace operation and its errors, against a real SQLite file and real OSDs.
//! Method: one MDS (library calls, no socket) over two in-process OSDs; each test states the
//! operation and checks both the reply and the objects on the OSDs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use tessera_mds::DataObjects;
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::*;

const NEW: NewInode = NewInode { mode: 0o644, uid: 1000, gid: 100 };
const DIR: NewInode = NewInode { mode: 0o755, uid: 1000, gid: 100 };

fn attr(r: Result<Reply, FsError>) -> Attr {
    match r.unwrap() {
        Reply::Attr(a) | Reply::Created { attr: a, .. } => a,
        other => panic!("not attributes: {other:?}"),
    }
}

fn mkdir(m: &tessera_mds::Mds, parent: InodeId, name: &str) -> Result<Reply, FsError> {
    m.handle(Request::Mkdir { parent, name: name.into(), new: DIR })
}

fn create(m: &tessera_mds::Mds, parent: InodeId, name: &str) -> Result<Reply, FsError> {
    m.handle(Request::Create { parent, name: name.into(), new: NEW, stripe: None })
}

fn names(m: &tessera_mds::Mds, dir: InodeId) -> Vec<String> {
    match m.handle(Request::ReadDir { dir, after: None, max_entries: 100 }).unwrap() {
        Reply::DirPage { entries, .. } => entries.into_iter().map(|e| e.name).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn namespace_operations_and_their_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let osds = Arc::new(osds);
    let m = open_single(tmp.path(), osds.clone(), 2);
    let root = InodeId::ROOT;

    let d = attr(mkdir(&m, root, "d"));
    assert_eq!(d.file_type, FileType::Directory);
    assert_eq!(mkdir(&m, root, "d"), Err(FsError::Exists));
    let f = match create(&m, d.ino, "f").unwrap() {
        Reply::Created { attr, layout, grant } => {
            assert_eq!(layout.objects.len(), 2, "default stripe count");
            assert!(grant.is_empty(), "no credentials without a security manager");
            for o in &layout.objects {
                assert_eq!(osds.logical_len(*o).unwrap(), 0, "object exists on its OSD");
            }
            attr
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(create(&m, d.ino, "f"), Err(FsError::Exists));
    assert_eq!(create(&m, f.ino, "x"), Err(FsError::NotDir));
    assert_eq!(create(&m, d.ino, &"n".repeat(256)), Err(FsError::NameTooLong));
    assert_eq!(create(&m, d.ino, "a/b"), Err(FsError::Invalid));
    assert_eq!(m.handle(Request::Lookup { parent: d.ino, name: "nope".into() }), Err(FsError::NotFound));
    assert_eq!(attr(m.handle(Request::Lookup { parent: d.ino, name: "f".into() })).ino, f.ino);

    // Size follows the objects: write 70 KiB past the first 64 KiB unit through the real OSD.
    let layout = match m.handle(Request::GetLayout { ino: f.ino }).unwrap() {
        Reply::Layout { layout: l, .. } => l,
        other => panic!("{other:?}"),
    };
    osds.set_logical_len(layout.objects[1], 6 * 1024).unwrap();
    assert_eq!(attr(m.handle(Request::GetAttr { ino: f.ino })).size, 64 * 1024 + 6 * 1024);
    assert_eq!(attr(m.handle(Request::Truncate { ino: f.ino, size: 100 })).size, 100);
    assert_eq!(osds.logical_len(layout.objects[0]).unwrap(), 100);
    assert_eq!(osds.logical_len(layout.objects[1]).unwrap(), 0);

    // chmod / chown / utimes.
    let t = Timespec { secs: 1_000_000, nanos: 5 };
    let changes = SetAttrs { mode: Some(0o600), uid: Some(7), gid: None, atime: Some(t), mtime: Some(t), ..SetAttrs::default() };
    let a = attr(m.handle(Request::SetAttr { ino: f.ino, changes }));
    assert_eq!((a.mode, a.uid, a.gid, a.mtime), (0o600, 7, 100, t));

    // Symlinks.
    let s = attr(m.handle(Request::Symlink { parent: root, name: "s".into(), target: "d/f".into(), new: NEW }));
    assert_eq!(s.size, 3);
    assert_eq!(m.handle(Request::ReadLink { ino: s.ino }), Ok(Reply::Link("d/f".into())));

    // rmdir / unlink errors.
    assert_eq!(m.handle(Request::Rmdir { parent: root, name: "d".into() }), Err(FsError::NotEmpty));
    assert_eq!(m.handle(Request::Rmdir { parent: root, name: "s".into() }), Err(FsError::NotDir));
    assert_eq!(m.handle(Request::Unlink { parent: root, name: "d".into() }), Err(FsError::IsDir));

    // rename: into a subdirectory, onto an existing file (which is removed), below itself.
    attr(mkdir(&m, root, "e"));
    let e = attr(m.handle(Request::Lookup { parent: root, name: "e".into() }));
    m.handle(Request::Rename { src_parent: d.ino, src_name: "f".into(), dst_parent: e.ino, dst_name: "g".into() }).unwrap();
    assert_eq!(names(&m, d.ino), Vec::<String>::new());
    let g2 = match create(&m, root, "g2").unwrap() {
        Reply::Created { layout, .. } => layout,
        other => panic!("{other:?}"),
    };
    m.handle(Request::Rename { src_parent: root, src_name: "g2".into(), dst_parent: e.ino, dst_name: "g".into() }).unwrap();
    // Removed after the rename is answered (`reaper.rs`).
    assert!(m.settle_removals(Duration::from_secs(10)), "the replaced file's removal is tried");
    for o in &layout.objects {
        assert!(osds.logical_len(*o).is_err(), "replaced file's objects are removed");
    }
    assert_eq!(attr(m.handle(Request::Lookup { parent: e.ino, name: "g".into() })).size, 0);
    assert!(g2.objects.iter().all(|o| osds.logical_len(*o).is_ok()));
    let err = m.handle(Request::Rename { src_parent: root, src_name: "e".into(), dst_parent: e.ino, dst_name: "x".into() });
    assert_eq!(err, Err(FsError::Invalid));
    assert_eq!(
        m.handle(Request::Rename { src_parent: root, src_name: "d".into(), dst_parent: root, dst_name: "s".into() }),
        Err(FsError::NotDir)
    );

    // unlink removes the objects (right after it answers); rmdir of the now empty directory works.
    m.handle(Request::Unlink { parent: e.ino, name: "g".into() }).unwrap();
    assert!(m.settle_removals(Duration::from_secs(10)), "the unlinked file's removal is tried");
    assert!(g2.objects.iter().all(|o| osds.logical_len(*o).is_err()));
    m.handle(Request::Rmdir { parent: root, name: "e".into() }).unwrap();
    assert_eq!(names(&m, root), vec!["d".to_string(), "s".to_string()]);
    assert_eq!(m.handle(Request::GetAttr { ino: e.ino }), Err(FsError::Stale));
    assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
}

#[test]
fn directory_default_striping_is_inherited() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 3);
    let m = open_single(tmp.path(), Arc::new(osds), 3);
    let d = attr(mkdir(&m, InodeId::ROOT, "wide"));
    let hint = StripeHint { stripe_unit: 1 << 20, stripe_count: 0, start_osd: Some(1) };
    m.handle(Request::SetDirStripe { dir: d.ino, hint: Some(hint) }).unwrap();
    let bad = StripeHint { stripe_unit: 1 << 20, stripe_count: 4, start_osd: None };
    assert_eq!(m.handle(Request::SetDirStripe { dir: d.ino, hint: Some(bad) }), Err(FsError::Invalid));
    let sub = attr(mkdir(&m, d.ino, "sub"));
    assert_eq!(m.handle(Request::GetDirStripe { dir: sub.ino }), Ok(Reply::DirStripe(Some(hint))));
    match create(&m, sub.ino, "f").unwrap() {
        Reply::Created { layout, .. } => {
            assert_eq!((layout.stripe.stripe_unit(), layout.stripe.stripe_count()), (1 << 20, 3));
            assert_eq!(layout.objects.iter().map(|o| o.osd).collect::<Vec<_>>(), vec![1, 2, 0]);
        }
        other => panic!("{other:?}"),
    }
}

/// Goal: what the writer remembers of a directory between creates in it (its type and default
/// striping, `store/hot.rs`) never outlives a change to it: a new default applies to the very
/// next create, and a directory removed and made again under the same name is a new parent.
#[test]
fn creates_see_a_directory_changed_between_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 3);
    let m = open_single(tmp.path(), Arc::new(osds), 3);
    let d = attr(mkdir(&m, InodeId::ROOT, "d"));
    let stripe_of = |r: Result<Reply, FsError>| match r.unwrap() {
        Reply::Created { layout, .. } => (layout.stripe.stripe_unit(), layout.stripe.stripe_count()),
        other => panic!("{other:?}"),
    };
    let narrow = StripeHint { stripe_unit: 64 << 10, stripe_count: 1, start_osd: None };
    m.handle(Request::SetDirStripe { dir: d.ino, hint: Some(narrow) }).unwrap();
    assert_eq!(stripe_of(create(&m, d.ino, "a")), (64 << 10, 1));
    assert_eq!(stripe_of(create(&m, d.ino, "b")), (64 << 10, 1), "the second create, from memory");
    let wide = StripeHint { stripe_unit: 1 << 20, stripe_count: 3, start_osd: None };
    m.handle(Request::SetDirStripe { dir: d.ino, hint: Some(wide) }).unwrap();
    assert_eq!(stripe_of(create(&m, d.ino, "c")), (1 << 20, 3), "the new default, at once");

    for name in ["a", "b", "c"] {
        m.handle(Request::Unlink { parent: d.ino, name: name.into() }).unwrap();
    }
    m.handle(Request::Rmdir { parent: InodeId::ROOT, name: "d".into() }).unwrap();
    assert!(create(&m, d.ino, "late").is_err(), "no create in a removed directory");
    let again = attr(mkdir(&m, InodeId::ROOT, "d"));
    assert_ne!(again.ino, d.ino);
    let plain = attr(mkdir(&m, InodeId::ROOT, "plain"));
    let server_default = stripe_of(create(&m, plain.ino, "y"));
    assert_ne!(server_default, (1 << 20, 3));
    assert_eq!(stripe_of(create(&m, again.ino, "x")), server_default, "the new directory has no default of its own");
}

#[test]
fn restart_keeps_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let osds = Arc::new(osds);
    let (d, f) = {
        let m = open_single(tmp.path(), osds.clone(), 2);
        let d = attr(mkdir(&m, InodeId::ROOT, "d"));
        let f = attr(create(&m, d.ino, "f"));
        (attr(m.handle(Request::GetAttr { ino: d.ino })), f)
    };
    let m = open_single(tmp.path(), osds, 2);
    assert_eq!(attr(m.handle(Request::Lookup { parent: InodeId::ROOT, name: "d".into() })), d);
    assert_eq!(attr(m.handle(Request::Lookup { parent: d.ino, name: "f".into() })).ino, f.ino);
    // Allocation continues after the old ids.
    assert!(attr(create(&m, d.ino, "g")).ino.local() > f.ino.local());
}

#[test]
fn unlink_journal_survives_a_failed_remove_and_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 2);
    let flaky = Arc::new(Faulty::new(real));
    let layout = {
        let m = open_single(tmp.path(), flaky.clone(), 2);
        let layout = match create(&m, InodeId::ROOT, "f").unwrap() {
            Reply::Created { layout, .. } => layout,
            other => panic!("{other:?}"),
        };
        flaky.fail_remove.store(true, std::sync::atomic::Ordering::SeqCst);
        // The namespace change succeeds; the REMOVEs fail and stay journaled.
        m.handle(Request::Unlink { parent: InodeId::ROOT, name: "f".into() }).unwrap();
        assert_eq!(m.handle(Request::Lookup { parent: InodeId::ROOT, name: "f".into() }), Err(FsError::NotFound));
        match m.handle(Request::StatFs).unwrap() {
            Reply::StatFs(s) => assert_eq!(s.pending_removals, 2),
            other => panic!("{other:?}"),
        }
        assert!(layout.objects.iter().all(|o| flaky.logical_len(*o).is_ok()), "objects still on the OSDs");
        // Repair does not call journaled objects orphans.
        assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
        layout
        // The MDS "crashes" here (dropped without draining).
    };
    flaky.fail_remove.store(false, std::sync::atomic::Ordering::SeqCst);
    let m = open_single(tmp.path(), flaky.clone(), 2);
    assert!(layout.objects.iter().all(|o| flaky.logical_len(*o).is_err()), "restart finished the removals");
    match m.handle(Request::StatFs).unwrap() {
        Reply::StatFs(s) => assert_eq!(s.pending_removals, 0),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_osd_down_fails_creates_on_it_and_leaks_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 3);
    let objects = Arc::new(Faulty::new(real));
    objects.down.store(2, std::sync::atomic::Ordering::SeqCst);
    let m = open_single(tmp.path(), objects.clone(), 3);
    let hint = StripeHint { stripe_unit: 4096, stripe_count: 3, start_osd: Some(0) };
    let create = |name: &str| m.handle(Request::Create { parent: InodeId::ROOT, name: name.into(), new: NEW, stripe: Some(hint) });
    assert_eq!(create("f"), Err(FsError::Io));
    assert_eq!(m.handle(Request::Lookup { parent: InodeId::ROOT, name: "f".into() }), Err(FsError::NotFound));
    match m.handle(Request::StatFs).unwrap() {
        Reply::StatFs(s) => assert_eq!((s.files, s.pending_removals), (0, 0), "the unreachable OSD's range waits to be retried"),
        other => panic!("{other:?}"),
    }
    // A file on the OSDs that are up works meanwhile.
    let two = StripeHint { stripe_unit: 4096, stripe_count: 2, start_osd: Some(0) };
    attr(m.handle(Request::Create { parent: InodeId::ROOT, name: "g".into(), new: NEW, stripe: Some(two) }));
    // The OSD comes back (retry_after is zero in these tests): the same range is made, and every
    // object on every OSD is a file's or precreated.
    objects.down.store(u32::MAX, std::sync::atomic::Ordering::SeqCst);
    let f = match create("f").unwrap() {
        Reply::Created { layout, .. } => layout,
        other => panic!("{other:?}"),
    };
    assert_eq!(f.objects[2].object_id, tessera_mds::store::files::object_id(0, 1), "the first range of OSD 2 was retried, not replaced");
    assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
}

#[test]
fn repair_reports_orphans() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 1);
    let objects = Arc::new(real);
    let m = open_single(tmp.path(), objects.clone(), 1);
    let one = StripeHint { stripe_unit: 4096, stripe_count: 1, start_osd: None };
    attr(m.handle(Request::Create { parent: InodeId::ROOT, name: "kept".into(), new: NEW, stripe: Some(one) }));
    // An object in this server's id range that no file, range or journal row accounts for
    // (e.g. a store restored from an old backup); far above any id precreated so far.
    let orphan = ObjectRef { osd: 0, object_id: tessera_mds::store::files::object_id(0, 1 << 40) };
    objects.create(&[orphan]).unwrap();
    // One outside its range belongs to another server and is not judged here.
    objects.create(&[ObjectRef { osd: 0, object_id: tessera_mds::store::files::object_id(1, 5) }]).unwrap();
    assert_eq!(m.repair(), Ok(tessera_mds::Audit { orphans: vec![orphan], missing: vec![] }));
}

/// Goal: repair also reports the other way round: a file's data object that its OSD no longer
/// holds (an OSD store lost or replaced), naming the file's inode; and nothing for a file
/// whose objects are all there. Method: REMOVE one object of a striped file behind the
/// server's back.
#[test]
fn repair_reports_files_whose_objects_are_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 2);
    let objects = Arc::new(real);
    let m = open_single(tmp.path(), objects.clone(), 2);
    let two = StripeHint { stripe_unit: 4096, stripe_count: 2, start_osd: Some(0) };
    let create = |name: &str| match m.handle(Request::Create { parent: InodeId::ROOT, name: name.into(), new: NEW, stripe: Some(two) }) {
        Ok(Reply::Created { attr, layout, .. }) => (attr.ino, layout),
        other => panic!("{other:?}"),
    };
    let (_, whole) = create("whole");
    let (hurt, layout) = create("hurt");
    assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
    let lost = layout.objects[1];
    objects.remove(lost).unwrap();
    let audit = m.repair().unwrap();
    assert_eq!(audit.missing, vec![tessera_mds_proto::MissingObject { ino: hurt, object: lost }]);
    assert!(audit.orphans.is_empty(), "{audit:?}");
    assert!(whole.objects.iter().all(|o| audit.missing.iter().all(|m| m.object != *o)));
}

/// Goal: a truncate never leaves a file half cut. With an OSD already down nothing changes
/// (EIO); an OSD that fails part-way gets its length when it returns, from the journal (at
/// start-up here, and by the background retry), so the file ends at the new length; a
/// later truncate replaces one still owed; unlinking the file drops what is owed.
#[test]
fn a_truncate_cut_short_by_an_osd_completes_from_its_journal() {
    use std::sync::atomic::Ordering::SeqCst;
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 2);
    let objects = Arc::new(Faulty::new(real));
    let hint = StripeHint { stripe_unit: 4096, stripe_count: 2, start_osd: Some(0) };
    let layout = {
        let m = open_single(tmp.path(), objects.clone(), 2);
        let (ino, layout) = match m.handle(Request::Create { parent: InodeId::ROOT, name: "t".into(), new: NEW, stripe: Some(hint) }).unwrap() {
            Reply::Created { attr, layout, .. } => (attr.ino, layout),
            other => panic!("{other:?}"),
        };
        for o in &layout.objects {
            objects.set_logical_len(*o, 8192).unwrap(); // 16 KiB of file
        }
        objects.down.store(1, SeqCst);
        assert_eq!(m.handle(Request::Truncate { ino, size: 100 }), Err(FsError::Io));
        objects.down.store(u32::MAX, SeqCst);
        assert_eq!(objects.logical_len(layout.objects[0]).unwrap(), 8192, "an OSD down before the truncate: nothing cut");

        objects.fail_set_len.store(1, SeqCst);
        assert_eq!(m.handle(Request::Truncate { ino, size: 5000 }), Err(FsError::Io), "cut short on OSD 1");
        assert_eq!(objects.logical_len(layout.objects[0]).unwrap(), 4096);
        assert_eq!(objects.logical_len(layout.objects[1]).unwrap(), 8192, "OSD 1 still owes its length");
        layout
        // The MDS stops here with the truncate owed.
    };
    objects.fail_set_len.store(u32::MAX, SeqCst);
    let m = open_single(tmp.path(), objects.clone(), 2);
    assert_eq!(objects.logical_len(layout.objects[1]).unwrap(), 904, "start-up finished the truncate");
    assert_eq!(attr(m.handle(Request::Lookup { parent: InodeId::ROOT, name: "t".into() })).size, 5000);

    // Owed again, then replaced by a later truncate that succeeds: the old length is not
    // applied over it.
    let ino = attr(m.handle(Request::Lookup { parent: InodeId::ROOT, name: "t".into() })).ino;
    objects.fail_set_len.store(1, SeqCst);
    assert_eq!(m.handle(Request::Truncate { ino, size: 10 }), Err(FsError::Io));
    objects.fail_set_len.store(u32::MAX, SeqCst);
    attr(m.handle(Request::Truncate { ino, size: 6000 }));
    assert_eq!(m.resume_journal(), Ok(0));
    assert_eq!(attr(m.handle(Request::Lookup { parent: InodeId::ROOT, name: "t".into() })).size, 6000);

    // What an unlinked file still owes is dropped with it.
    objects.fail_set_len.store(1, SeqCst);
    assert_eq!(m.handle(Request::Truncate { ino, size: 1 }), Err(FsError::Io));
    m.handle(Request::Unlink { parent: InodeId::ROOT, name: "t".into() }).unwrap();
    objects.fail_set_len.store(u32::MAX, SeqCst);
    assert_eq!(m.resume_journal(), Ok(0));
}

/// Goal: a directory's link count is 2 plus its subdirectories, as POSIX file systems count
/// them (find(1) uses it to skip leaf directories), through mkdir, rmdir, rename and restart,
/// and a store from before the count gets it on opening.
#[test]
fn directory_link_counts_follow_their_subdirectories() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let osds = Arc::new(osds);
    let nlink = |m: &tessera_mds::Mds, ino: InodeId| attr(m.handle(Request::GetAttr { ino })).nlink;
    let (a, b) = {
        let m = open_single(tmp.path(), osds.clone(), 2);
        let a = attr(mkdir(&m, InodeId::ROOT, "a")).ino;
        let b = attr(mkdir(&m, a, "b")).ino;
        attr(mkdir(&m, a, "c"));
        attr(create(&m, a, "f"));
        assert_eq!(nlink(&m, a), 4, "two subdirectories; a file does not count");
        assert_eq!(nlink(&m, b), 2);
        assert_eq!(nlink(&m, InodeId::ROOT), 3);
        m.handle(Request::Rmdir { parent: a, name: "c".into() }).unwrap();
        assert_eq!(nlink(&m, a), 3);
        m.handle(Request::Rename { src_parent: a, src_name: "b".into(), dst_parent: InodeId::ROOT, dst_name: "b".into() }).unwrap();
        assert_eq!((nlink(&m, a), nlink(&m, InodeId::ROOT)), (2, 4), "a rename moves the count");
        // Replacing an empty directory by a rename: the replaced one is no longer counted.
        attr(mkdir(&m, a, "x"));
        attr(mkdir(&m, InodeId::ROOT, "y"));
        m.handle(Request::Rename { src_parent: InodeId::ROOT, src_name: "y".into(), dst_parent: a, dst_name: "x".into() }).unwrap();
        assert_eq!((nlink(&m, a), nlink(&m, InodeId::ROOT)), (3, 4));
        let listed = match m.handle(Request::ReadDir { dir: InodeId::ROOT, after: None, max_entries: 100 }).unwrap() {
            Reply::DirPage { entries, .. } => entries,
            other => panic!("{other:?}"),
        };
        assert_eq!(listed.iter().find(|e| e.name == "a").unwrap().attr.nlink, 3, "readdir's attributes agree");
        (a, b)
    };
    let m = open_single(tmp.path(), osds.clone(), 2);
    assert_eq!((nlink(&m, a), nlink(&m, b), nlink(&m, InodeId::ROOT)), (3, 2, 4), "kept across a restart");
    drop(m);

    // A store written before the count: the column and its triggers gone, version 5.
    {
        let conn = rusqlite::Connection::open(tmp.path().join("mds.db")).unwrap();
        conn.execute_batch("DROP TRIGGER subdir_added; DROP TRIGGER subdir_removed; ALTER TABLE inodes DROP COLUMN subdirs; PRAGMA user_version = 5;").unwrap();
    }
    let m = open_single(tmp.path(), osds, 2);
    assert_eq!((nlink(&m, a), nlink(&m, b), nlink(&m, InodeId::ROOT)), (3, 2, 4), "counted when an older store is opened");
    attr(mkdir(&m, b, "deeper"));
    assert_eq!(nlink(&m, b), 3, "and kept from then on");
}
