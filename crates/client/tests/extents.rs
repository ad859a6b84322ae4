//! Goal: non-contiguous I/O through extent lists gives identical bytes in every [`Mode`], for
//! regular (strided, nested) and irregular (unsorted, overlapping) lists. Method: for each
//! write mode, write the list into a fresh file, then read it back in every read mode and
//! compare with a local model of the file and with the buffer that was written.

mod common;

use common::*;
use tessera_client::{Extent, Mode};

const KIB: u64 = 1024;

fn e(offset: u64, len: u64) -> Extent {
    Extent { offset, len }
}

fn lists() -> Vec<(&'static str, Vec<Extent>)> {
    let strided: Vec<Extent> = (0..64).map(|i| e(i * 10 * KIB + 100, 3 * KIB)).collect();
    // A 2-D subarray: 8 rows of 4 blocks.
    let nested: Vec<Extent> = (0..8).flat_map(|r| (0..4).map(move |c| e(r * 256 * KIB + c * 8 * KIB, 2 * KIB))).collect();
    let irregular = vec![e(500 * KIB, 7), e(3, 20 * KIB), e(90 * KIB, 1), e(40 * KIB, 33 * KIB), e(0, 0), e(1000 * KIB, 5 * KIB)];
    // The second extent overwrites part of the first: the later one wins.
    let overlapping = vec![e(10 * KIB, 30 * KIB), e(20 * KIB, 4 * KIB), e(100 * KIB, 2)];
    vec![("strided", strided), ("nested", nested), ("irregular", irregular), ("overlapping", overlapping)]
}

/// The file after writing `buf` over `extents` in order onto zeros.
fn model(extents: &[Extent], buf: &[u8]) -> Vec<u8> {
    let end = extents.iter().map(|x| x.offset + x.len).max().unwrap_or(0);
    let mut file = vec![0u8; end as usize];
    let mut at = 0usize;
    for x in extents {
        file[x.offset as usize..(x.offset + x.len) as usize].copy_from_slice(&buf[at..at + x.len as usize]);
        at += x.len as usize;
    }
    file
}

/// What reading `extents` from `file` gives.
fn gather(extents: &[Extent], file: &[u8]) -> Vec<u8> {
    extents.iter().flat_map(|x| file[x.offset as usize..(x.offset + x.len) as usize].iter().copied()).collect()
}

#[test]
fn every_mode_gives_identical_bytes() {
    let cluster = start(4, 1);
    let client = cluster.client();
    for (name, extents) in lists() {
        let total: u64 = extents.iter().map(|x| x.len).sum();
        let buf = pattern(total, total as usize);
        let expect_file = model(&extents, &buf);
        for write_mode in Mode::ALL {
            let path = format!("/{name}-{write_mode:?}");
            let f = client.create(&path, 0o644, hint(4 * KIB, 4)).unwrap();
            f.write_extents(&extents, &buf, write_mode).unwrap();
            assert!(f.read_to_end().unwrap() == expect_file, "{path}: file contents");
            for read_mode in Mode::ALL {
                let mut back = vec![0xEEu8; total as usize];
                f.read_extents(&extents, &mut back, read_mode).unwrap();
                assert!(back == gather(&extents, &expect_file), "{path}: read in {read_mode:?}");
            }
        }
    }
}

/// Reading extents that reach past end of file gives zeros there, in every mode.
#[test]
fn extents_past_end_read_as_zeros() {
    let cluster = start(3, 1);
    let client = cluster.client();
    let f = client.create("/short", 0o644, hint(4 * KIB, 3)).unwrap();
    let data = pattern(5, 10_000);
    f.pwrite(0, &data).unwrap();
    let extents = [e(9_000, 2_000), e(50_000, 100), e(100, 50)];
    for mode in Mode::ALL {
        let mut back = vec![0xEEu8; 2_150];
        f.read_extents(&extents, &mut back, mode).unwrap();
        assert_eq!(&back[..1_000], &data[9_000..]);
        assert!(back[1_000..2_100].iter().all(|&b| b == 0), "{mode:?}");
        assert_eq!(&back[2_100..], &data[100..150]);
    }
}

/// A buffer that does not match the extents is refused before any command is sent.
#[test]
fn buffer_length_must_match() {
    let cluster = start(1, 1);
    let f = cluster.client().create("/x", 0o644, None).unwrap();
    let err = f.write_extents(&[e(0, 10)], &[0u8; 9], Mode::Auto).unwrap_err();
    assert!(matches!(err, tessera_client::ClientError::BufferLength { extents_len: 10, buffer_len: 9, .. }), "{err}");
    assert_eq!(err.errno(), 22);
}
