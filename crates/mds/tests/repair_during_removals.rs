//! Goal: a repair that runs while the reaper removes unlinked files' objects reports no
//! orphan. An object the repair's listing saw, whose removal and journal row both went before
//! the repair read the records again, was accounted for all along, by the removal journal.
//!
//! Method: one MDS over real OSDs behind a wrapper that holds the reaper's REMOVEs, and lets
//! them finish (waiting for the reaper to clear their rows) right after the repair has listed
//! the first OSD, before that listing is returned.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tessera_mds::{Audit, DataObjects};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::*;

#[test]
fn an_object_removed_while_a_repair_lists_the_osds_is_no_orphan() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let faulty = Arc::new(Faulty::new(osds));
    let m = Arc::new(open_single(tmp.path(), faulty.clone(), 2));
    let new = NewInode { mode: 0o644, uid: 0, gid: 0 };
    let layout = match m.handle(Request::Create { parent: InodeId::ROOT, name: "f".into(), new, stripe: None }) {
        Ok(Reply::Created { layout, .. }) => layout,
        other => panic!("{other:?}"),
    };

    faulty.hang_removes.store(true, Ordering::SeqCst);
    m.handle(Request::Unlink { parent: InodeId::ROOT, name: "f".into() }).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while faulty.removes_hung.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the reaper never reached the hung REMOVE");
        std::thread::sleep(Duration::from_millis(1));
    }
    let (released, mds, hold) = (Arc::new(AtomicBool::new(false)), m.clone(), faulty.clone());
    let once = released.clone();
    *faulty.after_list.lock().unwrap() = Some(Box::new(move || {
        if !once.swap(true, Ordering::SeqCst) {
            hold.hang_removes.store(false, Ordering::SeqCst);
            assert!(mds.settle_removals(Duration::from_secs(10)), "the removals finished");
        }
    }));

    let audit = m.repair();
    // Breaks the cycle the hook made (the server holds the wrapper, the hook the server).
    faulty.after_list.lock().unwrap().take();
    assert!(released.load(Ordering::SeqCst), "the removals finished during the listing");
    assert_eq!(audit, Ok(Audit::default()), "no orphan: the journal accounted for the objects");
    for o in &layout.objects {
        assert!(faulty.logical_len(*o).is_err(), "{o:?} was removed");
    }
}
