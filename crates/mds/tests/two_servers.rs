//! Goal: two metadata servers on loopback serve one namespace split across them. Method: two
//! `Mds` instances, each with its own SQLite file and TCP listener, sharing two real OSDs; a
//! client connection per server routes each request by the inode id's home server, as the
//! client library will.

mod common;

use std::net::TcpListener;
use std::sync::Arc;

use common::*;
use tessera_mds::server::placement;
use tessera_mds::{Mds, MdsConnection};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::*;

const DIR: NewInode = NewInode { mode: 0o755, uid: 0, gid: 0 };

struct Client {
    servers: Vec<MdsConnection>,
}

impl Client {
    fn call(&mut self, server: u32, r: Request) -> Result<Reply, FsError> {
        self.servers[server as usize].call(&r).unwrap()
    }
    fn attr(&mut self, server: u32, r: Request) -> Attr {
        match self.call(server, r).unwrap() {
            Reply::Attr(a) | Reply::Created { attr: a, .. } => a,
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn one_namespace_over_two_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds0, devices) = real_osds(tmp.path(), 2);
    let listeners: Vec<TcpListener> = (0..2).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let addrs: Vec<String> = listeners.iter().map(|l| l.local_addr().unwrap().to_string()).collect();
    let map = cluster(addrs.clone(), 2);
    let mds0 = Arc::new(Mds::open(&tmp.path().join("mds0.db"), config(0, map.clone()), Arc::new(osds0)).unwrap());
    let mds1 = Arc::new(Mds::open(&tmp.path().join("mds1.db"), config(1, map), Arc::new(clients_for(&devices, 2))).unwrap());
    let mut listeners = listeners.into_iter();
    tessera_mds::tcp::spawn(listeners.next().unwrap(), mds0.clone()).unwrap();
    tessera_mds::tcp::spawn(listeners.next().unwrap(), mds1.clone()).unwrap();
    let mut c = Client { servers: addrs.iter().map(|a| MdsConnection::connect(a.as_str()).unwrap()).collect() };
    let root = InodeId::ROOT;

    // Pick names that land one directory on each server.
    let local_name = (0..).map(|i| format!("d{i}")).find(|n| placement(root, n, 2) == 0).unwrap();
    let remote_name = (0..).map(|i| format!("d{i}")).find(|n| placement(root, n, 2) == 1).unwrap();
    let near = c.attr(0, Request::Mkdir { parent: root, name: local_name.clone(), new: DIR });
    let far = c.attr(0, Request::Mkdir { parent: root, name: remote_name.clone(), new: DIR });
    assert_eq!((near.ino.server(), far.ino.server()), (0, 1));
    assert_eq!(far.parent, root);
    assert_eq!(c.call(0, Request::Mkdir { parent: root, name: remote_name.clone(), new: DIR }), Err(FsError::Exists));
    // The root (server 0) counts both subdirectories, the one homed on server 1 too.
    assert_eq!(c.attr(0, Request::GetAttr { ino: root }).nlink, 4);

    // A file in the remote directory lives on server 1, with its objects.
    let f = c.attr(1, Request::Create { parent: far.ino, name: "f".into(), new: DIR, stripe: None });
    assert_eq!(f.ino.server(), 1);
    // Asking the wrong server is refused, not silently answered.
    assert_eq!(c.call(0, Request::GetAttr { ino: f.ino }), Err(FsError::Misdirected));

    // Lookup and readdir at the root (server 0) report the remote directory's attributes.
    assert_eq!(c.attr(0, Request::Lookup { parent: root, name: remote_name.clone() }).ino, far.ino);
    match c.call(0, Request::ReadDir { dir: root, after: None, max_entries: 10 }).unwrap() {
        Reply::DirPage { entries, more } => {
            assert!(!more);
            assert_eq!(entries.iter().map(|e| e.attr.ino).collect::<Vec<_>>().len(), 2);
            assert!(entries.iter().any(|e| e.name == remote_name && e.attr.ino == far.ino));
        }
        other => panic!("{other:?}"),
    }

    // Rename between directories on different servers is refused with EXDEV.
    assert_eq!(
        c.call(1, Request::Rename { src_parent: far.ino, src_name: "f".into(), dst_parent: near.ino, dst_name: "f".into() }),
        Err(FsError::CrossServer)
    );
    // Renaming the remote directory within the root is fine (only the entry moves).
    c.call(0, Request::Rename { src_parent: root, src_name: remote_name.clone(), dst_parent: root, dst_name: "moved".into() }).unwrap();

    // rmdir of the non-empty remote directory fails on its home server; after unlink it works.
    assert_eq!(c.call(0, Request::Rmdir { parent: root, name: "moved".into() }), Err(FsError::NotEmpty));
    c.call(1, Request::Unlink { parent: far.ino, name: "f".into() }).unwrap();
    c.call(0, Request::Rmdir { parent: root, name: "moved".into() }).unwrap();
    assert_eq!(c.attr(0, Request::GetAttr { ino: root }).nlink, 3, "a cross-server rmdir is counted");
    assert_eq!(c.call(1, Request::GetAttr { ino: far.ino }), Err(FsError::Stale));
    assert_eq!(c.call(0, Request::Lookup { parent: root, name: "moved".into() }), Err(FsError::NotFound));

    // Neither server leaked an object.
    assert_eq!(mds0.repair(), Ok(tessera_mds::Audit::default()));
    assert_eq!(mds1.repair(), Ok(tessera_mds::Audit::default()));
    match c.call(0, Request::ClusterMap).unwrap() {
        Reply::ClusterMap(m) => assert_eq!(m.servers, addrs),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bad_frame_gets_an_error_reply_with_its_id() {
    use std::io::{Read, Write};
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mds = Arc::new(Mds::open(&tmp.path().join("m.db"), config(0, cluster(vec![addr.to_string()], 1)), Arc::new(osds)).unwrap());
    tessera_mds::tcp::spawn(listener, mds).unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // Request id 9, kind request, unknown opcode 200.
    let mut frame = 10u32.to_be_bytes().to_vec();
    frame.extend_from_slice(&9u64.to_be_bytes());
    frame.extend_from_slice(&[1, 200]);
    s.write_all(&frame).unwrap();
    let mut header = [0u8; 4];
    s.read_exact(&mut header).unwrap();
    let mut body = vec![0u8; frame_body_len(header).unwrap()];
    s.read_exact(&mut body).unwrap();
    assert_eq!(Frame::decode_body(&body), Ok(Frame { request_id: 9, message: Message::Reply(Err(FsError::Protocol)) }));
}
