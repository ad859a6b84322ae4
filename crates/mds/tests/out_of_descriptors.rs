//! Goal: a metadata server out of file descriptors rests its listener instead of retrying the
//! accept as fast as the CPU allows, and serves the waiting connection once descriptors are
//! free again.
//!
//! Method: one MDS behind its real TCP front on loopback, in this test's own process (alone in
//! its binary: it lowers the process's descriptor limit so that the server's next accept fails
//! with EMFILE while a client's connection waits), and the event loop thread's CPU time read
//! from /proc while it is so: a loop that retried at once would use all of it.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tessera_mds::MdsConnection;
use tessera_mds_proto::*;
use tessera_test_faults::descriptors::{LastDescriptor, ThreadCpu};

#[test]
fn out_of_descriptors_the_loop_rests_and_serves_the_waiting_connection_once_some_are_free() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 1);
    let mds = open_single(tmp.path(), Arc::new(osds), 1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    tessera_mds::tcp::spawn(listener, Arc::new(mds)).unwrap();
    let mut first = MdsConnection::connect(addr).unwrap();
    assert!(matches!(first.call(&Request::GetAttr { ino: InodeId::ROOT }), Ok(Ok(Reply::Attr(_)))));

    let looping = ThreadCpu::of("mds-loop");
    let low = LastDescriptor::leave_one();
    // The client's socket takes the last descriptor: the server's accept finds none.
    let waiting = TcpStream::connect(addr);
    let before = looping.used();
    let rest = Duration::from_millis(800);
    std::thread::sleep(rest);
    let busy = looping.used() - before;
    drop(low);
    let mut waiting = waiting.expect("the client's own socket fit under the limit");
    assert!(busy < rest / 4, "the event loop used {busy:?} of CPU in {rest:?} while out of descriptors");

    waiting.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    waiting.write_all(&encode_request_frame(7, &Caller::of_process(), &Request::GetAttr { ino: InodeId::ROOT })).unwrap();
    let mut header = [0u8; FRAME_HEADER_LEN];
    waiting.read_exact(&mut header).expect("the waiting connection served once descriptors were free");
    let mut body = vec![0u8; frame_body_len(header).unwrap()];
    waiting.read_exact(&mut body).unwrap();
    let reply = decode_frame(&[&header[..], &body].concat()).unwrap();
    assert!(matches!(reply, Frame { request_id: 7, message: Message::Reply(Ok(Reply::Attr(_))) }), "{reply:?}");
}
