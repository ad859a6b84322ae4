//! Goal: the event loop polls after serving only while requests come soon enough for a poll
//! to catch them (`poll_window.rs`); a client that pauses longer than the longest poll does
//! not keep the loop spinning after each of its requests. Method: one MDS behind its real TCP
//! front on loopback, polling up to 20 ms (so a poll that runs is unmistakable in the loop
//! thread's CPU time, read from /proc), and one client creating files 40 ms apart. Alone in
//! its test binary, so the loop thread is the only one of its name.

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tessera_mds::loop_cpus::LoopCpus;
use tessera_mds::tcp::LoopConfig;
use tessera_mds::{Mds, MdsConnection};
use tessera_mds_proto::request::NewInode;
use tessera_mds_proto::*;

const LONGEST_POLL: Duration = Duration::from_millis(20);
const PAUSE: Duration = Duration::from_millis(40);
const REQUESTS: u32 = 15;

/// CPU time of this process's thread named `name` (user and system, clock ticks).
fn thread_cpu(name: &str) -> Duration {
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        if std::fs::read_to_string(dir.join("comm")).unwrap_or_default().trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
        // Fields after the parenthesised name: state is field 3, utime 14 and stime 15.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<u64> = after.split(' ').skip(11).take(2).map(|f| f.parse().unwrap()).collect();
        return Duration::from_millis((fields[0] + fields[1]) * 1000 / ticks);
    }
    panic!("no thread named {name}");
}

#[test]
fn the_loop_stops_polling_for_requests_that_come_too_far_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let (osds, _devices) = real_osds(tmp.path(), 2);
    let mds = Mds::open(&tmp.path().join("m.db"), config(0, cluster(vec!["unused".into()], 2)), Arc::new(osds)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let config = LoopConfig { busy_poll: LONGEST_POLL, cpus: LoopCpus::Any, ..LoopConfig::default() };
    let (addr, _) = tessera_mds::tcp::spawn_with(listener, Arc::new(mds), config).unwrap();
    // The thread's name as the kernel keeps it: its first 15 bytes.
    let name: String = format!("mds-loop-{addr}").chars().take(15).collect();
    let mut c = MdsConnection::connect(addr.to_string().as_str()).unwrap();
    let new = NewInode { mode: 0o644, uid: 1000, gid: 100 };
    // Answered, so the loop thread runs and has its name.
    let first = c.call(&Request::Create { parent: InodeId::ROOT, name: "first".into(), new, stripe: None }).expect("transport");
    assert!(matches!(first, Ok(Reply::Created { .. })), "{first:?}");
    let before = thread_cpu(&name);
    for i in 0..REQUESTS {
        std::thread::sleep(PAUSE);
        let reply = c.call(&Request::Create { parent: InodeId::ROOT, name: format!("f{i}"), new, stripe: None }).expect("transport");
        assert!(matches!(reply, Ok(Reply::Created { .. })), "{reply:?}");
    }
    std::thread::sleep(PAUSE);
    let spent = thread_cpu(&name).saturating_sub(before);
    // Polling the whole window after every request would spin 15 x 20 ms = 300 ms. Halving
    // from the first request that came late, the polls add up to under 40 ms; the creates
    // themselves take a few milliseconds.
    assert!(spent < REQUESTS * LONGEST_POLL / 2, "the loop spent {spent:?} of CPU on {REQUESTS} requests {PAUSE:?} apart");
}
