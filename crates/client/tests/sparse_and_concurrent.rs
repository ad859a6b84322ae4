//! Sparse files and concurrent writers.

mod common;

use common::*;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// The model's bytes for [offset, offset + len): zeros, then every write in order.
fn model_range(writes: &[(u64, Vec<u8>)], offset: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let end = offset + len as u64;
    for (at, data) in writes {
        let (a, b) = ((*at).max(offset), (at + data.len() as u64).min(end));
        if a < b {
            out[(a - offset) as usize..(b - offset) as usize].copy_from_slice(&data[(a - at) as usize..(b - at) as usize]);
        }
    }
    out
}

/// Goal: scattered writes in a 1 GiB logical file read back as written with zeros in every
/// hole, the size is one past the last written byte, and reads past it are short. Method: 40
/// seeded writes (some overlapping) across 1 GiB over 4 OSDs; compare every written region, the
/// gaps beside it and random probes against a model of (offset, bytes) pairs — never
/// allocating the whole file.
#[test]
fn scattered_writes_in_a_large_sparse_file() {
    let cluster = start(4, 1);
    let client = cluster.client();
    let f = client.create("/sparse", 0o644, hint(MIB, 4)).unwrap();
    let mut writes: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut x = 12345u64;
    let mut next = |m: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 17) % m
    };
    for i in 0..40u64 {
        let len = 1 + next(200 * KIB);
        let offset = if i % 5 == 4 { writes[next(i) as usize].0 + next(4096) } else { next(GIB - len) };
        let data = pattern(i + 1000, len as usize);
        f.pwrite(offset, &data).unwrap();
        writes.push((offset, data));
    }
    // The last byte of the file is written explicitly so the size is known.
    let tail = pattern(7, 10);
    f.pwrite(GIB - 10, &tail).unwrap();
    writes.push((GIB - 10, tail));
    assert_eq!(f.size().unwrap(), GIB);
    assert_eq!(client.stat("/sparse").unwrap().size, GIB);

    let mut probes: Vec<(u64, usize)> = Vec::new();
    for (at, data) in &writes {
        let before = at.saturating_sub(3000);
        probes.push((before, (at - before) as usize + data.len() + 3000));
    }
    for _ in 0..20 {
        probes.push((next(GIB - 300 * KIB), (1 + next(300 * KIB)) as usize));
    }
    for (offset, len) in probes {
        let len = len.min((GIB - offset) as usize);
        let mut buf = vec![0xEEu8; len];
        assert_eq!(f.pread(offset, &mut buf).unwrap(), len);
        assert!(buf == model_range(&writes, offset, len), "range {offset}+{len} differs");
    }

    // Past the end: short, zero-filled.
    let mut buf = vec![0xEEu8; 64];
    assert_eq!(f.pread(GIB - 4, &mut buf).unwrap(), 4);
    assert_eq!(&buf[..4], &model_range(&writes, GIB - 4, 4)[..]);
    assert!(buf[4..].iter().all(|&b| b == 0));
    assert_eq!(f.pread(GIB + 100, &mut buf).unwrap(), 0);

    // Truncate into the middle, then grow again: the cut bytes are gone, not resurrected.
    let (cut_at, data) = writes[0].clone();
    let cut = cut_at + data.len() as u64 / 2;
    f.set_len(cut).unwrap();
    assert_eq!(f.size().unwrap(), cut);
    f.set_len(cut + MIB).unwrap();
    let mut buf = vec![0xEEu8; data.len()];
    assert_eq!(f.pread(cut_at, &mut buf).unwrap(), data.len());
    let keep = (cut - cut_at) as usize;
    assert!(buf[..keep] == model_range(&writes, cut_at, keep));
    assert!(buf[keep..].iter().all(|&b| b == 0));
}

/// Goal: two clients (separate MDS connections and OSD sessions) writing disjoint regions of
/// one file at the same time both land. Method: interleaved 96 KiB blocks (not unit aligned, so
/// blocks share stripe units) written from two threads, then read back by a third view.
#[test]
fn two_clients_write_disjoint_regions_concurrently() {
    let cluster = start(4, 1);
    let a = cluster.client();
    let b = cluster.client();
    const BLOCK: u64 = 96 * KIB;
    const BLOCKS: u64 = 64;
    let fa = a.create("/shared", 0o644, hint(64 * KIB, 4)).unwrap();
    let fb = b.open("/shared").unwrap();
    std::thread::scope(|s| {
        for (who, file) in [(0u64, &fa), (1u64, &fb)] {
            s.spawn(move || {
                for i in (who..BLOCKS).step_by(2) {
                    file.pwrite(i * BLOCK, &pattern(i, BLOCK as usize)).unwrap();
                }
            });
        }
    });
    let back = cluster.client().open("/shared").unwrap().read_to_end().unwrap();
    assert_eq!(back.len() as u64, BLOCK * BLOCKS);
    for i in 0..BLOCKS {
        let at = (i * BLOCK) as usize;
        assert!(back[at..at + BLOCK as usize] == pattern(i, BLOCK as usize)[..], "block {i}");
    }
    fa.fsync().unwrap();
}

/// Goal: opening a name that another client keeps replacing (a new file renamed over it, as
/// `put` does) finds one of the files every time, never an inode that went between its lookup
/// and its layout. Method: one client renames fresh files over `/f` as fast as it can while
/// another opens `/f` 300 times and reads what it opened unless that was replaced meanwhile.
#[test]
fn opening_a_name_being_replaced_finds_a_file_every_time() {
    let cluster = start(2, 1);
    let (writer, reader) = (cluster.client(), cluster.client());
    writer.create("/f", 0o644, hint(64 * KIB, 2)).unwrap().pwrite(0, b"version 0").unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let replaced = std::thread::scope(|s| {
        let replacer = s.spawn(|| {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let temp = format!("/.f.{n}");
                writer.create(&temp, 0o644, hint(64 * KIB, 2)).unwrap().pwrite(0, format!("version {n}").as_bytes()).unwrap();
                writer.rename(&temp, "/f").unwrap();
            }
            n
        });
        let opened: Vec<_> = (0..300).map(|_| reader.open("/f")).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for (i, file) in opened.into_iter().enumerate() {
            let file = file.unwrap_or_else(|e| panic!("open {i}: {e}"));
            match file.read_to_end() {
                Ok(bytes) => assert!(bytes.starts_with(b"version "), "open {i}: {bytes:?}"),
                Err(e) => assert_eq!(e.fs_error(), Some(tessera_client::FsError::Stale), "open {i}: {e}"),
            }
        }
        replacer.join().unwrap()
    });
    assert!(replaced >= 10, "the name was replaced while it was opened ({replaced} times)");
}
