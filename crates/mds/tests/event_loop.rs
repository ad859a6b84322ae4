//! Goal: the event loop that runs creates and unlinks, their group commit and their replies on
//! one thread (`tcp.rs`) is never held up by a request that blocks, nor by removals that
//! hang, and creates that need an OSD (an empty pool) still complete. Method: one MDS behind its real TCP front on loopback, over
//! real OSDs (one of which can be made to hang); several connections at once.

mod common;

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tessera_mds::{DataObjects, Mds, MdsConnection, PrecreateConfig};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::*;

const NEW: NewInode = NewInode { mode: 0o644, uid: 1000, gid: 100 };

fn serve(mds: Mds) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tessera_mds::tcp::spawn(listener, Arc::new(mds)).unwrap();
    addr
}

fn create(c: &mut MdsConnection, name: &str) -> Result<Reply, FsError> {
    c.call(&Request::Create { parent: InodeId::ROOT, name: name.into(), new: NEW, stripe: None }).expect("transport")
}

/// Fifty creates on a connection of their own, on a thread of their own (so a loop that is
/// held up fails the test instead of hanging it); how many succeeded, once done.
fn fifty_creates(addr: String) -> mpsc::Receiver<usize> {
    let (creates_tx, creates_done) = mpsc::channel();
    std::thread::spawn(move || {
        let mut other = MdsConnection::connect(addr.as_str()).unwrap();
        let made = (0..50).filter(|i| matches!(create(&mut other, &format!("g{i}")), Ok(Reply::Created { .. }))).count();
        creates_tx.send(made).unwrap();
    });
    creates_done
}

#[test]
fn a_request_stuck_on_an_osd_holds_up_no_create() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let faulty = Arc::new(Faulty::new(osds));
    let objects: Arc<dyn DataObjects> = faulty.clone();
    let mds = Mds::open(&tmp.path().join("m.db"), config(0, cluster(vec!["unused".into()], 2)), objects).unwrap();
    let addr = serve(mds);
    let mut first = MdsConnection::connect(addr.as_str()).unwrap();
    assert!(matches!(create(&mut first, "f"), Ok(Reply::Created { .. })));

    // A stat reads the objects' lengths: with the node hung, it waits on its worker.
    faulty.hang_lengths.store(true, Ordering::SeqCst);
    let (stat_tx, stat_done) = mpsc::channel();
    let stat_addr = addr.clone();
    std::thread::spawn(move || {
        let mut c = MdsConnection::connect(stat_addr.as_str()).unwrap();
        stat_tx.send(c.call(&Request::Lookup { parent: InodeId::ROOT, name: "f".into() }).expect("transport")).unwrap();
    });
    // Creates on another connection go on meanwhile.
    let creates_done = fifty_creates(addr);
    assert_eq!(creates_done.recv_timeout(Duration::from_secs(20)), Ok(50), "creates waited for a stat stuck on an OSD");
    assert!(stat_done.try_recv().is_err(), "the stat answered while its OSD hung");
    faulty.hang_lengths.store(false, Ordering::SeqCst);
    match stat_done.recv_timeout(Duration::from_secs(20)).expect("the stat never answered") {
        Ok(Reply::Attr(a)) => assert_eq!(a.file_type, FileType::Regular),
        other => panic!("{other:?}"),
    }
}

/// Waits until `f` holds, for at most 20 s.
fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Unlinks run on the loop and leave their REMOVEs to the reaper; once the reaper is as far
/// behind as the server allows, an unlink removes its own objects, on a worker: the loop
/// itself never waits on an OSD.
#[test]
fn unlinks_are_answered_while_removals_hang_and_a_full_queue_holds_up_no_create() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let faulty = Arc::new(Faulty::new(osds));
    let objects: Arc<dyn DataObjects> = faulty.clone();
    let mut cfg = config(0, cluster(vec!["unused".into()], 2));
    // Two files' objects (two each) fill the queue.
    cfg.removal_queue_max = 4;
    let mds = Mds::open(&tmp.path().join("m.db"), cfg, objects).unwrap();
    let addr = serve(mds);
    let mut conn = MdsConnection::connect(addr.as_str()).unwrap();
    let mut layouts = Vec::new();
    for i in 0..4 {
        match create(&mut conn, &format!("f{i}")) {
            Ok(Reply::Created { layout, .. }) => layouts.push(layout),
            other => panic!("f{i}: {other:?}"),
        }
    }
    let unlink = |c: &mut MdsConnection, name: &str| c.call(&Request::Unlink { parent: InodeId::ROOT, name: name.into() }).expect("transport");

    faulty.hang_removes.store(true, Ordering::SeqCst);
    assert_eq!(unlink(&mut conn, "f0"), Ok(Reply::Done), "answered with its OSD hung");
    until("the reaper's REMOVE of f0 hangs", || faulty.removes_hung.load(Ordering::SeqCst) == 1);
    assert_eq!(unlink(&mut conn, "f1"), Ok(Reply::Done), "queued behind the hung REMOVE");
    assert_eq!(unlink(&mut conn, "f2"), Ok(Reply::Done), "queued; the queue is full now");

    // The next unlink removes its own objects, waiting on the hung node (on a worker).
    let (unlink_tx, unlink_done) = mpsc::channel();
    let unlink_addr = addr.clone();
    std::thread::spawn(move || {
        let mut c = MdsConnection::connect(unlink_addr.as_str()).unwrap();
        unlink_tx.send(unlink(&mut c, "f3")).unwrap();
    });
    until("f3's own REMOVE hangs", || faulty.removes_hung.load(Ordering::SeqCst) == 2);
    let creates_done = fifty_creates(addr);
    assert_eq!(creates_done.recv_timeout(Duration::from_secs(20)), Ok(50), "creates waited for an unlink stuck on an OSD");
    assert!(unlink_done.try_recv().is_err(), "f3 answered before its objects were removed");

    faulty.hang_removes.store(false, Ordering::SeqCst);
    assert_eq!(unlink_done.recv_timeout(Duration::from_secs(20)).expect("f3 never answered"), Ok(Reply::Done));
    until("every removal done", || faulty.removes_hung.load(Ordering::SeqCst) == 0);
    until("every unlinked file's objects are gone", || layouts.iter().flat_map(|l| &l.objects).all(|o| faulty.inner.logical_len(*o).is_err()));
}

#[test]
fn creates_that_find_a_pool_empty_refill_it_off_the_loop_and_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let mut cfg = config(0, cluster(vec!["unused".into()], 2));
    // Two objects per refill and no background filler: most creates find a pool empty.
    cfg.precreate = PrecreateConfig { batch: 2, low_water: 0, retry_after: Duration::ZERO };
    let mds = Mds::open(&tmp.path().join("m.db"), cfg, Arc::new(osds)).unwrap();
    let addr = serve(mds);
    let made: Vec<Vec<ObjectRef>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|c| {
                let addr = &addr;
                s.spawn(move || {
                    let mut conn = MdsConnection::connect(addr.as_str()).unwrap();
                    (0..20)
                        .flat_map(|i| match create(&mut conn, &format!("c{c}-{i}")) {
                            Ok(Reply::Created { layout, .. }) => layout.objects,
                            other => panic!("c{c}-{i}: {other:?}"),
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: Vec<ObjectRef> = made.into_iter().flatten().collect();
    assert_eq!(all.len(), 3 * 20 * 2, "two objects per file");
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len(), "no object handed out twice");
}

/// Goal: files of one stripe alternate over the OSDs even when their creates find a pool
/// empty. Such a create gives up the inode number it took and is retried with the next one;
/// when placement followed the inode number, every retried create landed on the same OSD
/// (seen as four files in a row on OSD 0 right after a cluster started under load). Method:
/// pools refilled two objects at a time with no background filler, so creates keep finding
/// them empty; twenty files of one stripe, one after another.
#[test]
fn files_alternate_over_the_osds_when_their_creates_find_pools_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let mut cfg = config(0, cluster(vec!["unused".into()], 2));
    cfg.precreate = PrecreateConfig { batch: 2, low_water: 0, retry_after: Duration::ZERO };
    let mds = Mds::open(&tmp.path().join("m.db"), cfg, Arc::new(osds)).unwrap();
    let addr = serve(mds);
    let mut conn = MdsConnection::connect(addr.as_str()).unwrap();
    let one = Some(tessera_mds_proto::StripeHint { stripe_unit: 65536, stripe_count: 1, start_osd: None });
    let mut placed = Vec::new();
    let mut inodes = Vec::new();
    for i in 0..20 {
        let request = Request::Create { parent: InodeId::ROOT, name: format!("f{i}"), new: NEW, stripe: one };
        match conn.call(&request).expect("transport") {
            Ok(Reply::Created { attr, layout, .. }) => {
                placed.push(layout.objects[0].osd);
                inodes.push(attr.ino.local());
            }
            other => panic!("f{i}: {other:?}"),
        }
    }
    assert!(inodes.windows(2).any(|w| w[1] - w[0] > 1), "no create found a pool empty (inodes {inodes:?}), so this shows nothing");
    let on_zero = placed.iter().filter(|&&o| o == 0).count();
    assert_eq!(on_zero, 10, "files placed {placed:?} (inodes {inodes:?})");
    assert!(placed.windows(2).all(|w| w[0] != w[1]), "files alternate: {placed:?}");
}
