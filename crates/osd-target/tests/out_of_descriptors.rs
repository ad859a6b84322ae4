//! Goal: an OSD target out of file descriptors does not spin on them (its accept thread rests),
//! keeps a connection that arrives meanwhile waiting instead of dropping it, and logs it in
//! once descriptors are free again; a session already logged in keeps working meanwhile.
//!
//! Method: a real target on loopback in this test's own process (alone in its binary: it lowers
//! the process's descriptor limit so that the client's socket takes the last descriptor), the
//! accept thread's CPU time read from /proc while it is so, then a real login over the waiting
//! socket. Linux takes a blocking accept's descriptor number before it waits, so the target
//! accepts this connection with the number it held and then finds none for the socket's clones:
//! the case that used to close the connection.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use tessera_initiator::iscsi::{RawConnection, Session, SessionConfig};
use tessera_test_faults::descriptors::{LastDescriptor, ThreadCpu};

const TARGET: &str = "iqn.2026-11.org.tessera.test:descriptors";
const INITIATOR: &str = "iqn.2026-11.org.tessera.test:client";

#[test]
fn out_of_descriptors_the_target_rests_and_logs_the_waiting_connection_in_once_some_are_free() {
    // The target's log, shown when the test fails.
    tracing_subscriber::fmt().with_env_filter("debug").with_test_writer().with_thread_names(true).init();
    let target = common::OsdTarget::start(TARGET);
    let first = Session::login(target.addr, SessionConfig::new(INITIATOR, TARGET)).expect("a login with descriptors to spare");
    // Answered only once the target runs the session (its post-login steps take descriptors).
    assert_eq!(first.nop_ping(b"in").expect("a NOP-Out before the shortage"), b"in");
    let accepting = ThreadCpu::of("iscsi-accept");

    let low = LastDescriptor::leave_one();
    // The client's socket takes the last descriptor: the target has only the number its
    // blocked accept already held, and none for the clones of the socket it accepts.
    let waiting = TcpStream::connect(target.addr);
    let before = accepting.used();
    let rest = Duration::from_millis(800);
    std::thread::sleep(rest);
    let busy = accepting.used() - before;
    // A session that was in before the shortage is served through it.
    let echoed = first.nop_ping(b"still here");
    drop(low);

    let waiting = waiting.expect("the client's own socket fit under the limit");
    assert!(busy < rest / 4, "the accept thread used {busy:?} of CPU in {rest:?} while out of descriptors");
    assert_eq!(echoed.expect("a NOP-Out on the session logged in before"), b"still here");

    waiting.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut raw = RawConnection::over(waiting).expect("splitting the waiting socket");
    let login = raw.login(&SessionConfig::new(INITIATOR, TARGET));
    assert!(login.is_ok(), "the connection that waited through the shortage logs in: {:?}", login.err());
    first.logout().expect("logging the first session out");
}
