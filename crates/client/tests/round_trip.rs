//! Goal: files of every awkward size come back byte for byte, for stripe counts 1..8 and stripe
//! units 4 KiB..4 MiB, through whole-file and offset I/O. Method: real OSDs and an MDS on
//! loopback; each file is written with `pwrite`, read with `read_to_end` and `pread`, and
//! compared with the local copy; the size is checked through the MDS and the objects.

mod common;

use common::*;
use proptest::prelude::*;
use tessera_client::{Client, File};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

fn check_file(client: &Client, path: &str, unit: u64, count: u32, size: u64, seed: u64) {
    let data = pattern(seed, size as usize);
    let f = client.create(path, 0o644, hint(unit, count)).unwrap();
    assert_eq!(f.layout().stripe.stripe_count(), count);
    assert_eq!(f.pwrite(0, &data).unwrap(), data.len());
    let back = client.open(path).unwrap().read_to_end().unwrap();
    assert!(back == data, "{path}: read_to_end differs (unit {unit}, count {count}, size {size})");
    assert_eq!(client.stat(path).unwrap().size, size, "{path}: MDS size");
    assert_eq!(f.size().unwrap(), size, "{path}: object size");
    // An odd window across unit boundaries, and a read that runs off the end.
    let (off, len) = (size / 3, (size / 2 + 5) as usize);
    let mut buf = vec![0xAAu8; len];
    let n = f.pread(off, &mut buf).unwrap();
    let expect_n = (size - off).min(len as u64) as usize;
    assert_eq!(n, expect_n, "{path}: short read count");
    assert!(buf[..n] == data[off as usize..off as usize + n], "{path}: pread bytes");
    assert!(buf[n..].iter().all(|&b| b == 0), "{path}: bytes past EOF are zeroed");
}

/// Deterministic table: 0 bytes, 1 byte, one stripe unit minus one, and two full rows plus a
/// ragged tail, over counts 1, 2, 3, 5, 8 and units 4 KiB, 64 KiB, 1 MiB, 4 MiB.
#[test]
fn table_of_sizes_and_layouts() {
    let cluster = start(8, 1);
    let client = cluster.client();
    let mut seed = 1;
    for unit in [4 * KIB, 64 * KIB, MIB, 4 * MIB] {
        for count in [1u32, 2, 3, 5, 8] {
            for size in [0, 1, unit - 1, 2 * unit * count as u64 + unit / 2 + 7] {
                let path = format!("/f-{unit}-{count}-{size}");
                check_file(&client, &path, unit, count, size, seed);
                seed += 1;
            }
        }
    }
}

/// The transfer cap at its minimum (64 KiB) forces every large piece to be split into
/// pipelined commands; the bytes must not notice.
#[test]
fn small_transfer_cap_splits_and_pipelines() {
    let mut cluster = start(3, 1);
    cluster.config.max_transfer_bytes = 64 * KIB;
    let client = cluster.client();
    check_file(&client, "/split", MIB, 3, 7 * MIB + 12345, 99);
}

fn layouts() -> impl Strategy<Value = (u32, u64, u64, u64)> {
    (1u32..=8, 12u32..=22).prop_flat_map(|(count, shift)| {
        let unit = 1u64 << shift;
        let max = (3 * unit * count as u64).min(24 * MIB);
        (Just(count), Just(unit), 0..=max).prop_flat_map(|(c, u, size)| (Just(c), Just(u), Just(size), 0..=size))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Goal: overwriting a window at any offset of a file of any size leaves exactly the model's
    /// bytes. Method: write the file, overwrite [offset, offset + size / 4 + 1) (which may
    /// extend it), and read everything back.
    #[test]
    fn overwrite_at_any_offset((count, unit, size, offset) in layouts()) {
        let cluster = start(count, 1);
        let client = cluster.client();
        let mut model = pattern(size ^ 7, size as usize);
        let f: File = client.create("/p", 0o644, hint(unit, count)).unwrap();
        f.pwrite(0, &model).unwrap();
        let patch = pattern(offset + 3, (size / 4 + 1) as usize);
        f.pwrite(offset, &patch).unwrap();
        let end = offset as usize + patch.len();
        if model.len() < end {
            model.resize(end, 0);
        }
        model[offset as usize..end].copy_from_slice(&patch);
        let back = f.read_to_end().unwrap();
        prop_assert_eq!(back.len(), model.len());
        prop_assert!(back == model);
    }
}
