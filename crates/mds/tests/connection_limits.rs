//! Goal: a metadata server serves at most `LoopConfig::connections_max` client connections; a
//! connection past it is closed at once (the client's first call fails instead of waiting),
//! and a place freed by a client that leaves is taken by the next one.
//!
//! Method: one MDS behind its real TCP front on loopback, capped at three connections.

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tessera_mds::tcp::LoopConfig;
use tessera_mds::MdsConnection;
use tessera_mds_proto::*;

fn stat_root(c: &mut MdsConnection) -> Result<Result<Reply, FsError>, tessera_mds_proto::ConnectionError> {
    c.call(&Request::GetAttr { ino: InodeId::ROOT })
}

#[test]
fn a_connection_past_the_cap_is_closed_and_a_freed_place_is_taken_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 1);
    let mds = open_single(tmp.path(), Arc::new(osds), 1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    tessera_mds::tcp::spawn_with(listener, Arc::new(mds), LoopConfig { connections_max: 3, ..LoopConfig::default() }).unwrap();

    let mut served: Vec<MdsConnection> = (0..3).map(|_| MdsConnection::connect(addr).unwrap()).collect();
    for c in &mut served {
        assert!(matches!(stat_root(c), Ok(Ok(Reply::Attr(_)))), "a connection within the cap is served");
    }
    let mut past = MdsConnection::connect_with_timeout(addr, Duration::from_secs(5)).unwrap();
    assert!(stat_root(&mut past).is_err(), "the fourth connection was closed, not served");

    drop(served.pop());
    // The server sees the close on its next turn; a new connection gets the place once it has.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut next = MdsConnection::connect_with_timeout(addr, Duration::from_secs(5)).unwrap();
        if matches!(stat_root(&mut next), Ok(Ok(Reply::Attr(_)))) {
            break;
        }
        assert!(Instant::now() < deadline, "no connection was served after one of three left");
        std::thread::sleep(Duration::from_millis(10));
    }
}
