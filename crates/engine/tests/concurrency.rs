//! Goal: `execute` is safe from many threads. Method: threads hammer one counter with FETCH
//! AND ADD (the sum must be exact) and write distinct objects in parallel (every object must
//! read back its own bytes).

mod common;

use std::sync::Arc;

use common::*;
use tessera_osd_proto::{AttrId, Command};
use tessera_types::ObjectAddr;

#[test]
fn fetch_and_add_from_many_threads_is_exact() {
    let osd = Arc::new(Osd::new());
    let pid = osd.partition();
    let addr = ObjectAddr::new(pid, osd.create(pid));
    let attr = AttrId::new(APP_PAGE, 1);
    let threads = 8;
    let per_thread = 200;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let osd = osd.clone();
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    osd.ok(&req(Command::FetchAndAdd { addr, attr, addend: t + 1 }));
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let expected: u64 = (1..=threads).map(|t| t * per_thread).sum();
    assert_eq!(osd.get1(addr, APP_PAGE, 1).map(|v| be_bytes(&v)), Some(expected));
}

#[test]
fn parallel_writers_to_distinct_objects() {
    let osd = Arc::new(Osd::new());
    let pid = osd.partition();
    let oids: Vec<u64> = (0..8).map(|_| osd.create(pid)).collect();
    let handles: Vec<_> = oids
        .iter()
        .map(|&oid| {
            let osd = osd.clone();
            let addr = ObjectAddr::new(pid, oid);
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    let block = vec![(oid as u8).wrapping_add(i as u8); 4096];
                    osd.write(addr, i * 4096, &block);
                    // Readers run beside the writers.
                    osd.get(addr, &[AttrId::new(1, 0x82)]);
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    for oid in oids {
        let addr = ObjectAddr::new(pid, oid);
        let data = osd.read(addr, 0, 50 * 4096).data_in;
        for i in 0..50usize {
            assert!(data[i * 4096..(i + 1) * 4096].iter().all(|b| *b == (oid as u8).wrapping_add(i as u8)));
        }
    }
    assert_eq!(osd.get1(ObjectAddr::partition(pid), 0x3000_0001, 0xC2).map(|v| be_bytes(&v)), Some(8));
}
