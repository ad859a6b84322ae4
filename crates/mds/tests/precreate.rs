//! Goal: files take their objects from pools precreated in batches, and no failure or crash of
//! that mechanism leaks an object or loses an acknowledged create. Method: one MDS (library
//! calls) over real in-process OSDs, with small batches so refills happen often; failures are
//! injected where a real node cannot produce them on demand (an OSD down, a CREATE whose answer
//! is lost); a crash is dropping the MDS without any shutdown step and opening the store again.

mod common;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tessera_mds::{DataObjects, Mds, PrecreateConfig};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::*;

const NEW: NewInode = NewInode { mode: 0o644, uid: 1000, gid: 100 };

fn small_batches(dir: &std::path::Path, objects: Arc<dyn DataObjects>, osds: u32) -> Mds {
    let mut config = config(0, cluster(vec!["unused".into()], osds));
    config.precreate = PrecreateConfig { batch: 4, low_water: 2, retry_after: std::time::Duration::ZERO };
    Mds::open(&dir.join("mds.db"), config, objects).unwrap()
}

fn create(m: &Mds, name: &str, stripe_count: u32) -> Result<FileLayout, FsError> {
    let stripe = Some(StripeHint { stripe_unit: 4096, stripe_count, start_osd: None });
    match m.handle(Request::Create { parent: InodeId::ROOT, name: name.into(), new: NEW, stripe })? {
        Reply::Created { layout, .. } => Ok(layout),
        other => panic!("{other:?}"),
    }
}

fn pending(m: &Mds) -> u64 {
    match m.handle(Request::StatFs).unwrap() {
        Reply::StatFs(s) => s.pending_removals,
        other => panic!("{other:?}"),
    }
}

#[test]
fn files_get_distinct_existing_objects_across_many_refills() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 3);
    let objects = Arc::new(real);
    let m = small_batches(tmp.path(), objects.clone(), 3);
    let mut seen = HashSet::new();
    for i in 0..60 {
        let layout = create(&m, &format!("f{i}"), 1 + i % 3).unwrap();
        for o in layout.objects {
            assert!(seen.insert(o), "object {o:?} handed out twice");
            assert_eq!(objects.logical_len(o).unwrap(), 0, "object {o:?} exists and is empty");
        }
    }
    assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
    // Unlinking returns nothing to a pool: the objects are removed.
    let layout = match m.handle(Request::GetLayout { ino: lookup(&m, "f7") }).unwrap() {
        Reply::Layout { layout: l, .. } => l,
        other => panic!("{other:?}"),
    };
    m.handle(Request::Unlink { parent: InodeId::ROOT, name: "f7".into() }).unwrap();
    assert!(m.settle_removals(Duration::from_secs(10)), "the removal is tried after the unlink is answered");
    assert!(layout.objects.iter().all(|o| objects.logical_len(*o).is_err()));
    assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
}

fn lookup(m: &Mds, name: &str) -> InodeId {
    match m.handle(Request::Lookup { parent: InodeId::ROOT, name: name.into() }).unwrap() {
        Reply::Attr(a) => a.ino,
        other => panic!("{other:?}"),
    }
}

#[test]
fn concurrent_creates_are_all_kept_after_a_crash_and_a_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 2);
    let objects: Arc<dyn DataObjects> = Arc::new(real);
    // Eight threads create 40 names each; every fourth name is shared by all threads, so
    // exactly one of them must win it.
    let acked: Vec<(String, FileLayout)> = {
        let m = small_batches(tmp.path(), objects.clone(), 2);
        let results: Vec<Vec<(String, Result<FileLayout, FsError>)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|t| {
                    let m = &m;
                    s.spawn(move || {
                        (0..40)
                            .map(|i| {
                                let name = if i % 4 == 0 { format!("shared{i}") } else { format!("t{t}-{i}") };
                                let r = create(m, &name, 1 + (i % 2) as u32);
                                (name, r)
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut acked = Vec::new();
        for (name, r) in results.into_iter().flatten() {
            match r {
                Ok(layout) => acked.push((name, layout)),
                Err(e) => assert!(name.starts_with("shared") && e == FsError::Exists, "{name}: {e:?}"),
            }
        }
        acked
        // The MDS is dropped here with no shutdown step: a crash as far as the store knows.
    };
    assert_eq!(acked.len(), 8 * 30 + 10, "every private name and one winner per shared name");
    let m = small_batches(tmp.path(), objects.clone(), 2);
    let mut seen = HashSet::new();
    for (name, layout) in &acked {
        let ino = lookup(&m, name);
        assert_eq!(m.handle(Request::GetLayout { ino }), Ok(Reply::Layout { layout: layout.clone(), grant: Vec::new() }), "{name}");
        assert!(layout.objects.iter().all(|o| seen.insert(*o)), "{name}: an object shared with another file");
    }
    // New files after the reopen never reuse an object.
    for i in 0..10 {
        let layout = create(&m, &format!("after{i}"), 2).unwrap();
        assert!(layout.objects.iter().all(|o| seen.insert(*o)));
    }
    assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
}

#[test]
fn a_lost_create_answer_and_a_crash_leak_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 1);
    let objects = Arc::new(Faulty::new(real));
    // Every batch CREATE runs on the OSD but its answer is lost: the MDS cannot know the
    // objects exist, so the range stays reserved and unready.
    objects.lose_create_answer.store(true, Ordering::SeqCst);
    {
        let m = small_batches(tmp.path(), objects.clone(), 1);
        assert_eq!(create(&m, "f", 1), Err(FsError::Io));
        assert_eq!(m.pool_levels(), vec![0]);
        // Until the answer comes, they are accounted for (reserved), not orphans.
        assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
        // Crash. (Listed after it: the background filler may still be retrying the range,
        // which removes the objects it finds and makes new ones.)
    }
    let made_but_unknown = objects.list(0).unwrap();
    assert!(!made_but_unknown.is_empty(), "the CREATE did run");
    objects.lose_create_answer.store(false, Ordering::SeqCst);
    let m = small_batches(tmp.path(), objects.clone(), 1);
    // Retrying the range finds its objects exist; it is abandoned (journaled, removed) and a
    // fresh range serves the create.
    let layout = create(&m, "f", 1).unwrap();
    assert!(!made_but_unknown.contains(&layout.objects[0].object_id));
    let on_osd = objects.list(0).unwrap();
    assert!(made_but_unknown.iter().all(|id| !on_osd.contains(id)), "the abandoned range was removed");
    assert_eq!(pending(&m), 0);
    assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
}

#[test]
fn a_crash_before_the_create_is_sent_retries_the_same_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 1);
    let objects = Arc::new(Faulty::new(real));
    objects.down.store(0, Ordering::SeqCst);
    {
        let m = small_batches(tmp.path(), objects.clone(), 1);
        assert_eq!(create(&m, "f", 1), Err(FsError::Io));
        // Crash with a range reserved and its CREATE never delivered.
    }
    objects.down.store(u32::MAX, Ordering::SeqCst);
    assert_eq!(objects.list(0).unwrap(), Vec::<u64>::new());
    let m = small_batches(tmp.path(), objects.clone(), 1);
    let layout = create(&m, "f", 1).unwrap();
    assert_eq!(layout.objects[0].object_id, tessera_mds::store::files::object_id(0, 1), "the reserved range was made, not replaced");
    assert_eq!(pending(&m), 0);
    assert_eq!(m.repair(), Ok(tessera_mds::Audit::default()));
}

/// Goal: an OSD that is down when the server starts is checked against the store once it
/// answers, before any new file uses it; so a store older than the OSD (restored from a
/// copy) never hands out an object its lost later life wrote. Method: every object this
/// server precreated on OSD 1 is given data behind its back (as the lost life's files did),
/// then the server starts with OSD 1 down. While it is down new files avoid it; once it
/// answers, the first new files placed on it must be empty.
#[test]
fn an_osd_down_at_start_is_checked_before_new_files_use_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (real, _devices) = real_osds(tmp.path(), 2);
    let faulty = Arc::new(Faulty::new(real));
    let m = small_batches(tmp.path(), faulty.clone(), 2);
    create(&m, "before", 2).unwrap();
    drop(m);
    for id in faulty.inner.list(1).unwrap() {
        faulty.inner.set_logical_len(ObjectRef { osd: 1, object_id: id }, 100).unwrap();
    }
    faulty.down.store(1, Ordering::SeqCst);
    let m = small_batches(tmp.path(), faulty.clone(), 2);
    let layout = create(&m, "while-down", 1).unwrap();
    assert!(layout.objects.iter().all(|o| o.osd == 0), "new files avoid the unchecked OSD: {layout:?}");
    assert_eq!(create(&m, "needs-both", 2), Err(FsError::Io), "a file that needs the unchecked OSD is refused, not given its objects");

    faulty.down.store(u32::MAX, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut on_osd1 = 0;
    for i in 0.. {
        assert!(std::time::Instant::now() < deadline, "no new file was placed on OSD 1 within 30 s of its return");
        let name = format!("after{i}");
        let Ok(layout) = create(&m, &name, 2) else {
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        if layout.objects.iter().any(|o| o.osd == 1) {
            let size = match m.handle(Request::Lookup { parent: InodeId::ROOT, name: name.clone() }).unwrap() {
                Reply::Attr(a) => a.size,
                other => panic!("{other:?}"),
            };
            assert_eq!(size, 0, "{name} got an object the lost life wrote: {layout:?}");
            on_osd1 += 1;
            if on_osd1 == 8 {
                break;
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
