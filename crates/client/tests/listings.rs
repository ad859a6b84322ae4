//! Goal: a listing gives every entry the attributes a stat of it gives, across pages and
//! servers: each file its own size (from its objects), each directory its own inode on its own
//! home server, whether the server reads the objects' lengths with a LIST over neighbouring
//! ids or one object at a time.
//!
//! Method: two metadata servers and three OSDs on loopback. One directory holds 1,100 files of
//! distinct sizes and modes made one after another (more than a 1,024-entry page, stripe
//! counts 1 to 3, some files long enough to reach every object; their objects take
//! neighbouring ids) and 40 directories homed on both servers. Another holds 150 files
//! each made after ten files elsewhere, so that its files' ids lie far apart. readdir must
//! list each entry once, with the size written and the inode, type, mode and size a stat
//! answers.

mod common;

use std::collections::HashMap;

use common::*;
use tessera_client::{Client, FileType};

fn size_of(i: u64) -> u64 {
    // Every 50th file reaches past two 64 KiB stripe units; the others stay in the first.
    if i.is_multiple_of(50) { 3 * 65536 + i } else { 3 * i + 1 }
}

/// Makes file `path` of `size_of(i)` bytes, striped over `1 + i % 3` OSDs.
fn make(c: &Client, path: &str, i: u64) {
    let f = c.create(path, if i.is_multiple_of(2) { 0o640 } else { 0o604 }, hint(65536, 1 + (i % 3) as u32)).unwrap();
    f.pwrite(size_of(i) - 1, &[i as u8]).unwrap();
}

/// Lists `dir` and checks every entry against a stat of it and files against `sizes`;
/// answers the home servers of the directories listed.
fn check_listing(c: &Client, dir: &str, sizes: &HashMap<String, u64>, entries: usize) -> Vec<u32> {
    let listed = c.readdir(dir).unwrap();
    assert_eq!(listed.len(), entries, "{dir}: every entry once");
    let mut homes = Vec::new();
    for e in &listed {
        let stat = c.stat(&format!("{dir}/{}", e.name)).unwrap();
        assert_eq!((e.attr.ino, e.attr.file_type, e.attr.mode, e.attr.size), (stat.ino, stat.file_type, stat.mode, stat.size), "{}", e.name);
        match e.attr.file_type {
            FileType::Regular => assert_eq!(Some(&e.attr.size), sizes.get(&e.name), "{}", e.name),
            _ => homes.push(e.attr.ino.server()),
        }
    }
    let mut names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
    names.dedup();
    assert_eq!(names.len(), entries, "{dir}: no entry twice");
    homes
}

#[test]
fn a_listing_gives_each_entry_its_own_attributes() {
    let cluster = start(3, 2);
    let c = cluster.client();
    let mut sizes = HashMap::new();

    c.mkdir("/many", 0o755).unwrap();
    for i in 0..1100 {
        let name = format!("f{i:04}");
        make(&c, &format!("/many/{name}"), i);
        sizes.insert(name, size_of(i));
    }
    for j in 0..40 {
        c.mkdir(&format!("/many/d{j:02}"), 0o700 | (j % 8)).unwrap();
    }
    let homes = check_listing(&c, "/many", &sizes, 1140);
    assert!(homes.contains(&0) && homes.contains(&1), "directories on both servers: {homes:?}");

    // Files take their objects from their directory's server's pools: the filler directory
    // must share that server for its files to take the ids between.
    c.mkdir("/scattered", 0o755).unwrap();
    let home = c.stat("/scattered").unwrap().ino.server();
    let filler = (0..)
        .map(|k| format!("/filler{k}"))
        .find(|d| {
            c.mkdir(d, 0o755).unwrap();
            c.stat(d).unwrap().ino.server() == home
        })
        .unwrap();
    for i in 0..150 {
        let name = format!("s{i:03}");
        make(&c, &format!("/scattered/{name}"), i + 7);
        sizes.insert(name, size_of(i + 7));
        for k in 0..10 {
            c.create(&format!("{filler}/{i}-{k}"), 0o644, hint(65536, 3)).unwrap();
        }
    }
    check_listing(&c, "/scattered", &sizes, 150);
}
