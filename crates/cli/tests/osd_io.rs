//! Goal: data commands move exactly the right bytes over iSCSI, at sizes from 0 bytes to past the
//! negotiated burst, and report reads past the end as the standard says. Method: the real
//! daemon, byte-for-byte comparison against a local model of the object.

mod common;

use common::*;
use tessera_osd_proto::{FlushScope, MapType};
use tessera_types::ObjectAddr;

#[test]
fn write_then_read_round_trips_at_many_sizes() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    for (i, size) in [0usize, 1, 511, 4096, 65_537, 1 << 20, (24 << 20) + 3].into_iter().enumerate() {
        let data = pattern(size, i as u32);
        c.write(obj, 0, &data, false).unwrap();
        let got = c.read(obj, 0, size as u64).unwrap();
        assert_eq!(got.data.len(), size);
        assert!(got.data == data, "size {size}: bytes differ");
    }
}

#[test]
fn writes_at_offsets_leave_holes_that_read_as_zero() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    let mut model = vec![0u8; 0];
    for (offset, len, seed) in [(1000u64, 10usize, 1u32), (0, 3, 2), (50_000, 100, 3), (995, 20, 4)] {
        let data = pattern(len, seed);
        c.write(obj, offset, &data, false).unwrap();
        let end = offset as usize + len;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[offset as usize..end].copy_from_slice(&data);
    }
    let got = c.read(obj, 0, model.len() as u64).unwrap();
    assert!(!got.past_end);
    assert!(got.data == model);
}

#[test]
fn read_past_the_end_returns_what_exists_with_recovered_error_3b17() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    c.write(obj, 0, b"0123456789", false).unwrap();
    let got = c.read(obj, 5, 100).unwrap();
    assert!(got.past_end, "3B17 reported");
    let sense = got.recovered.expect("recovered sense");
    assert_eq!(sense.asc_ascq(), 0x3B17);
    assert_eq!(&got.data[..5], b"56789");
    assert!(got.data[5..].iter().all(|b| *b == 0), "anything past the end reads as zeros");
}

#[test]
fn append_returns_its_start_address_and_extends_the_object() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    assert_eq!(c.append(obj, b"abc").unwrap(), 0);
    assert_eq!(c.append(obj, b"defg").unwrap(), 3);
    assert_eq!(c.read(obj, 0, 7).unwrap().data, b"abcdefg");
}

#[test]
fn create_and_write_makes_an_object_holding_the_data() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let data = pattern(300_000, 9);
    let oid = c.create_and_write(pid, None, 0, &data, tessera_osd_proto::DataLayout::Contiguous).unwrap();
    assert_eq!(c.read(ObjectAddr::new(pid, oid), 0, data.len() as u64).unwrap().data, data);
}

#[test]
fn punch_and_clear_zero_ranges_and_read_map_reports_holes() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    let mut model = pattern(1 << 20, 5);
    c.write(obj, 0, &model, false).unwrap();
    c.punch(obj, 256 << 10, 256 << 10).unwrap();
    model[256 << 10..512 << 10].fill(0);
    c.clear(obj, 10, 20).unwrap();
    model[10..30].fill(0);
    assert!(c.read(obj, 0, model.len() as u64).unwrap().data == model);

    let holes = c.read_map(obj, 0, 1 << 20, MapType::Holes, 4096).unwrap();
    assert!(
        holes.entries.iter().any(|e| e.offset <= 256 << 10 && e.offset + e.len >= 512 << 10),
        "the punched range is a hole: {holes:?}"
    );
    let written = c.read_map(obj, 0, 1 << 20, MapType::Written, 4096).unwrap();
    assert!(written.entries.iter().any(|e| e.offset == 0), "{written:?}");
}

#[test]
fn flush_at_every_scope_succeeds() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, obj) = partition_with_object(&c);
    c.write(obj, 0, b"durable", true).unwrap();
    c.flush(obj, FlushScope::DataAndAttributes).unwrap();
    c.flush_partition(pid, FlushScope::Everything).unwrap();
    c.flush_osd(FlushScope::Everything).unwrap();
}

#[test]
fn many_threads_share_one_session() {
    let osd = TestOsd::start();
    let c = osd.client();
    let pid = c.create_partition(None).unwrap();
    let ids = c.create(pid, None, 16).unwrap();
    std::thread::scope(|s| {
        for (i, id) in ids.iter().enumerate() {
            let c = &c;
            s.spawn(move || {
                let obj = ObjectAddr::new(pid, *id);
                for round in 0..20u32 {
                    let data = pattern(8192 + i * 100, round * 31 + i as u32);
                    c.write(obj, 0, &data, false).unwrap();
                    assert!(c.read(obj, 0, data.len() as u64).unwrap().data == data);
                }
            });
        }
    });
}
