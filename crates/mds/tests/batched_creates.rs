//! Goal: creates and unlinks answered by the group commit round (replies sent by the event
//! loop once the group is durable, groups gathered across connections, creates without
//! savepoints) keep the namespace exact, and an unlinked file's objects leave the OSDs after.
//! Method: one MDS behind its real TCP front on loopback, over real OSDs; many connections
//! create (or unlink) at once, some names contended by every connection, some their own; then
//! the namespace is read back through another connection, and the OSDs asked for the objects.

mod common;

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Barrier};

use common::*;
use tessera_mds::{DataObjects, Mds, MdsConnection};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::*;

const NEW: NewInode = NewInode { mode: 0o644, uid: 1000, gid: 100 };
const CONNECTIONS: usize = 12;
const CONTENDED: usize = 40;
const OWN: usize = 40;

fn serve(dir: &std::path::Path) -> String {
    serve_with_osds(dir).0
}

/// The server's address, the server, and a second client of its OSDs.
fn serve_with_osds(dir: &std::path::Path) -> (String, Arc<Mds>, Real) {
    let (osds, devices) = real_osds(dir, 2);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mds = Arc::new(Mds::open(&dir.join("m.db"), config(0, cluster(vec![addr.clone()], 2)), Arc::new(osds)).unwrap());
    tessera_mds::tcp::spawn(listener, mds.clone()).unwrap();
    (addr, mds, osds_of(&devices))
}

/// Runs `work(c, connection)` on [`CONNECTIONS`] connections of their own, each on its own
/// thread, all released together; their results in connection order.
fn on_every_connection<T: Send>(addr: &str, work: impl Fn(usize, &mut MdsConnection) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(CONNECTIONS);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    let mut conn = MdsConnection::connect(addr).unwrap();
                    barrier.wait();
                    work(c, &mut conn)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn created(r: Result<Reply, FsError>) -> (InodeId, FileLayout) {
    match r {
        Ok(Reply::Created { attr, layout, .. }) => (attr.ino, layout),
        other => panic!("{other:?}"),
    }
}

#[test]
fn concurrent_unlinks_have_one_winner_per_name_and_their_objects_leave_the_osds() {
    let tmp = tempfile::tempdir().unwrap();
    let (addr, mds, osds) = serve_with_osds(tmp.path());
    let mut admin = MdsConnection::connect(addr.as_str()).unwrap();
    let root = InodeId::ROOT;
    let mut doomed = Vec::new();
    for name in (0..CONTENDED).map(|i| format!("shared-{i}")).chain((0..CONNECTIONS * OWN).map(|i| format!("own-{}-{}", i / OWN, i % OWN))) {
        doomed.push(created(call(&mut admin, Request::Create { parent: root, name, new: NEW, stripe: None })).1);
    }

    // Per connection: the contended names it removed, and how many ENOENT it got.
    let outcomes: Vec<(Vec<String>, usize)> = on_every_connection(&addr, |c, conn| {
        let (mut won, mut lost) = (Vec::new(), 0);
        for i in 0..CONTENDED.max(OWN) {
            if i < CONTENDED {
                let name = format!("shared-{}", (i + c * 7) % CONTENDED);
                match call(conn, Request::Unlink { parent: root, name: name.clone() }) {
                    Ok(Reply::Done) => won.push(name),
                    Err(FsError::NotFound) => lost += 1,
                    other => panic!("{name}: {other:?}"),
                }
            }
            if i < OWN {
                assert_eq!(call(conn, Request::Unlink { parent: root, name: format!("own-{c}-{i}") }), Ok(Reply::Done));
                // Creates in the same groups as the unlinks.
                created(call(conn, Request::Create { parent: root, name: format!("new-{c}-{i}"), new: NEW, stripe: None }));
            }
        }
        (won, lost)
    });

    let mut removed: Vec<&String> = outcomes.iter().flat_map(|(won, _)| won).collect();
    removed.sort();
    removed.dedup();
    assert_eq!(removed.len(), outcomes.iter().map(|(won, _)| won.len()).sum::<usize>(), "no name removed twice");
    assert_eq!(removed.len(), CONTENDED, "every contended name removed once");
    assert_eq!(outcomes.iter().map(|(_, lost)| lost).sum::<usize>(), CONTENDED * (CONNECTIONS - 1), "every other attempt was ENOENT");
    let listed = match call(&mut admin, Request::ReadDir { dir: root, after: None, max_entries: 1000 }).unwrap() {
        Reply::DirPage { entries, .. } => entries.into_iter().map(|e| e.name).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(listed.len(), CONNECTIONS * OWN, "only the new files are left: {listed:?}");
    assert!(listed.iter().all(|n| n.starts_with("new-")), "{listed:?}");

    assert!(mds.settle_removals(std::time::Duration::from_secs(20)), "the removals were tried");
    for layout in &doomed {
        for o in &layout.objects {
            assert!(osds.logical_len(*o).is_err(), "object {o:?} of an unlinked file is off its OSD");
        }
    }
    assert_eq!(mds.repair(), Ok(tessera_mds::Audit::default()), "nothing leaked");
}

fn call(c: &mut MdsConnection, request: Request) -> Result<Reply, FsError> {
    c.call(&request).expect("transport")
}

#[test]
fn concurrent_creates_have_exactly_one_winner_per_name_and_all_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let addr = serve(tmp.path());
    let mut admin = MdsConnection::connect(addr.as_str()).unwrap();
    let dir = match call(&mut admin, Request::Mkdir { parent: InodeId::ROOT, name: "d".into(), new: NEW }).unwrap() {
        Reply::Attr(a) => a.ino,
        other => panic!("{other:?}"),
    };

    // Per connection: (name, inode) of every create it won, and how many EEXIST it got.
    let outcomes: Vec<(Vec<(String, InodeId)>, usize)> = on_every_connection(&addr, |c, conn| {
        let mut won = Vec::new();
        let mut lost = 0;
        for i in 0..CONTENDED.max(OWN) {
            // Each connection walks the contended names from a different start.
            let mut names = Vec::new();
            if i < CONTENDED {
                names.push(format!("shared-{}", (i + c * 7) % CONTENDED));
            }
            if i < OWN {
                names.push(format!("own-{c}-{i}"));
            }
            for name in names {
                match call(conn, Request::Create { parent: dir, name: name.clone(), new: NEW, stripe: None }) {
                    Ok(Reply::Created { attr, layout, .. }) => {
                        assert_eq!(layout.objects.len(), 2);
                        won.push((name, attr.ino));
                    }
                    Err(FsError::Exists) => {
                        assert!(name.starts_with("shared-"), "{name}: EEXIST for a name only this connection uses");
                        lost += 1;
                    }
                    other => panic!("{name}: {other:?}"),
                }
            }
        }
        (won, lost)
    });

    let mut winners: HashMap<String, InodeId> = HashMap::new();
    for (won, _) in &outcomes {
        for (name, ino) in won {
            assert!(winners.insert(name.clone(), *ino).is_none(), "{name} created twice");
        }
    }
    let lost: usize = outcomes.iter().map(|(_, l)| l).sum();
    assert_eq!(winners.len(), CONTENDED + CONNECTIONS * OWN, "every name has exactly one winner");
    assert_eq!(lost, CONTENDED * (CONNECTIONS - 1), "every other attempt at a contended name was EEXIST");
    let mut inos: Vec<u64> = winners.values().map(|i| i.0).collect();
    inos.sort_unstable();
    inos.dedup();
    assert_eq!(inos.len(), winners.len(), "no inode number handed out twice");

    // Read back through another connection: exactly the winners, each with its inode.
    let mut listed = HashMap::new();
    let mut after = None;
    loop {
        match call(&mut admin, Request::ReadDir { dir, after: after.clone(), max_entries: 1000 }).unwrap() {
            Reply::DirPage { entries, more } => {
                after = entries.last().map(|e| e.name.clone());
                listed.extend(entries.into_iter().map(|e| (e.name, e.attr.ino)));
                if !more {
                    break;
                }
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(listed, winners);
    // The directory's times moved with its entries (settled once per group).
    let d = match call(&mut admin, Request::GetAttr { ino: dir }).unwrap() {
        Reply::Attr(a) => a,
        other => panic!("{other:?}"),
    };
    assert!(d.mtime > Timespec::default() && d.mtime == d.ctime);
}

#[test]
fn a_pipelining_client_gets_every_reply_in_order() {
    use std::io::{Read, Write};
    let tmp = tempfile::tempdir().unwrap();
    let addr = serve(tmp.path());
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    // Many requests sent before any reply is read: creates (answered by the commit round),
    // with lookups between them (answered by a worker thread).
    let mut sent = Vec::new();
    let mut bytes = Vec::new();
    for i in 0..200u64 {
        let request = if i % 3 == 2 {
            Request::Lookup { parent: InodeId::ROOT, name: format!("p{}", i - 1) }
        } else {
            Request::Create { parent: InodeId::ROOT, name: format!("p{i}"), new: NEW, stripe: None }
        };
        bytes.extend_from_slice(&encode_frame(&Frame { request_id: 1000 + i, message: Message::Request(Caller::ROOT, request) }));
        sent.push(1000 + i);
    }
    s.write_all(&bytes).unwrap();
    for (i, id) in sent.iter().enumerate() {
        let mut header = [0u8; 4];
        s.read_exact(&mut header).unwrap();
        let mut body = vec![0u8; frame_body_len(header).unwrap()];
        s.read_exact(&mut body).unwrap();
        let frame = Frame::decode_body(&body).unwrap();
        assert_eq!(frame.request_id, *id, "reply {i} out of order");
        match frame.message {
            Message::Reply(Ok(Reply::Created { .. })) if i % 3 != 2 => {}
            Message::Reply(Ok(Reply::Attr(a))) if i % 3 == 2 => assert_eq!(a.file_type, FileType::Regular),
            other => panic!("reply {i}: {other:?}"),
        }
    }
}

/// (The small receive buffer and 3000 unread replies make the server's socket stop taking
/// them, so the event loop keeps the rest in the connection and watches for room.)
#[test]
fn a_client_that_stops_reading_holds_up_no_one_else() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let tmp = tempfile::tempdir().unwrap();
    let addr = serve(tmp.path());
    let slow = std::net::TcpStream::connect(&addr).unwrap();
    // A small receive buffer, so the server's replies soon stop fitting.
    let small: libc::c_int = 4096;
    // SAFETY: a valid socket and a c_int option value of the given size.
    let set = unsafe {
        libc::setsockopt(slow.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, (&small as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    };
    assert_eq!(set, 0);
    const PIPELINED: u64 = 3000;
    let mut writer = slow.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        for i in 0..PIPELINED {
            let request = Request::Create { parent: InodeId::ROOT, name: format!("slow{i}"), new: NEW, stripe: None };
            bytes.extend_from_slice(&encode_frame(&Frame { request_id: i, message: Message::Request(Caller::ROOT, request) }));
        }
        writer.write_all(&bytes).unwrap();
    });
    // Meanwhile, with the slow client's replies piling up unread, another client's creates go
    // through the same group commit.
    let mut other = MdsConnection::connect(addr.as_str()).unwrap();
    for i in 0..100 {
        match call(&mut other, Request::Create { parent: InodeId::ROOT, name: format!("other{i}"), new: NEW, stripe: None }) {
            Ok(Reply::Created { .. }) => {}
            r => panic!("other{i}: {r:?}"),
        }
    }
    // The slow client reads at last: every reply, in order.
    let mut reader = std::io::BufReader::new(slow);
    for i in 0..PIPELINED {
        let mut header = [0u8; 4];
        reader.read_exact(&mut header).unwrap();
        let mut body = vec![0u8; frame_body_len(header).unwrap()];
        reader.read_exact(&mut body).unwrap();
        let frame = Frame::decode_body(&body).unwrap();
        assert_eq!(frame.request_id, i);
        assert!(matches!(frame.message, Message::Reply(Ok(Reply::Created { .. }))), "reply {i}: {:?}", frame.message);
    }
    sender.join().unwrap();
}
