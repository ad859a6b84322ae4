//! Goal: a listing gives every entry the attributes a stat of it gives, across pages and
//! servers: each file its own size (from its objects), each directory its own inode on its own
//! home server. Method: two metadata servers and three OSDs on loopback; one directory holds
//! 1,100 files of distinct sizes and modes (more than a 1,024-entry page, stripe counts 1 to
//! 3, some files long enough to reach every object) and 40 directories homed on both
//! servers. readdir must list each once, with the size written and the inode, type, mode and
//! size a stat answers.

mod common;

use std::collections::HashMap;

use common::*;
use tessera_client::FileType;

const FILES: u64 = 1100;
const DIRS: u64 = 40;

fn size_of(i: u64) -> u64 {
    // Every 50th file reaches past two 64 KiB stripe units; the others stay in the first.
    if i % 50 == 0 { 3 * 65536 + i } else { 3 * i + 1 }
}

#[test]
fn a_listing_gives_each_entry_its_own_attributes() {
    let cluster = start(3, 2);
    let c = cluster.client();
    c.mkdir("/many", 0o755).unwrap();
    let mut sizes = HashMap::new();
    for i in 0..FILES {
        let name = format!("f{i:04}");
        let f = c.create(&format!("/many/{name}"), if i % 2 == 0 { 0o640 } else { 0o604 }, hint(65536, 1 + (i % 3) as u32)).unwrap();
        f.pwrite(size_of(i) - 1, &[i as u8]).unwrap();
        sizes.insert(name, size_of(i));
    }
    for j in 0..DIRS {
        c.mkdir(&format!("/many/d{j:02}"), 0o700 | j as u32 % 8).unwrap();
    }

    let listed = c.readdir("/many").unwrap();
    assert_eq!(listed.len() as u64, FILES + DIRS, "every entry once");
    let mut homes = Vec::new();
    for e in &listed {
        let stat = c.stat(&format!("/many/{}", e.name)).unwrap();
        assert_eq!((e.attr.ino, e.attr.file_type, e.attr.mode, e.attr.size), (stat.ino, stat.file_type, stat.mode, stat.size), "{}", e.name);
        match e.attr.file_type {
            FileType::Regular => assert_eq!(Some(&e.attr.size), sizes.get(&e.name), "{}", e.name),
            _ => homes.push(e.attr.ino.server()),
        }
    }
    assert!(homes.contains(&0) && homes.contains(&1), "directories on both servers: {homes:?}");
    let mut names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
    names.dedup();
    assert_eq!(names.len() as u64, FILES + DIRS, "no entry twice");
}
