//! Goal: attribute pages, standard and user-defined, read and write as OSD-2 says, including
//! "all attributes of a page", timestamps, logical length, and Tessera's atomics. Method: the
//! real daemon over iSCSI.

mod common;

use common::*;
use tessera_osd_proto::{AttrId, Attribute};
use tessera_types::ObjectAddr;

const USER_PAGE: u32 = 0x0002_0000;
const LOGICAL_LENGTH: AttrId = AttrId::new(0x1, 0x82);

fn attr(page: u32, number: u32, value: &[u8]) -> Attribute {
    Attribute { id: AttrId::new(page, number), value: value.to_vec() }
}

#[test]
fn user_attributes_set_get_list_page_and_delete() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    c.set_attributes(obj, &[attr(USER_PAGE, 1, b"one"), attr(USER_PAGE, 2, b"two"), attr(USER_PAGE, 7, &[0u8; 300])]).unwrap();

    let got = c.get_attributes(obj, &[AttrId::new(USER_PAGE, 2), AttrId::new(USER_PAGE, 1), AttrId::new(USER_PAGE, 3)]).unwrap();
    assert_eq!(got[0].value.as_deref(), Some(&b"two"[..]));
    assert_eq!(got[1].value.as_deref(), Some(&b"one"[..]));
    assert_eq!(got[2].value, None, "an attribute never set is undefined");

    let page = c.get_attribute_page(obj, USER_PAGE).unwrap();
    let numbers: Vec<u32> = page.iter().filter(|a| a.id.number != 0).map(|a| a.id.number).collect();
    assert_eq!(numbers, vec![1, 2, 7], "page format returns every attribute of the page");
    let all = c.get_attributes(obj, &[AttrId::new(USER_PAGE, AttrId::ALL_IN_PAGE)]).unwrap();
    assert!(all.iter().any(|a| a.id.number == 7 && a.value.as_ref().map(Vec::len) == Some(300)));

    // A zero-length value deletes.
    c.set_attributes(obj, &[attr(USER_PAGE, 1, b"")]).unwrap();
    assert_eq!(c.get_attributes(obj, &[AttrId::new(USER_PAGE, 1)]).unwrap()[0].value, None);
}

#[test]
fn user_object_information_page_reports_ids_and_length() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (pid, obj) = partition_with_object(&c);
    c.write(obj, 0, &pattern(12_345, 1), false).unwrap();
    let got = c.get_attributes(obj, &[AttrId::new(0x1, 0x1), AttrId::new(0x1, 0x2), LOGICAL_LENGTH]).unwrap();
    assert_eq!(be64(got[0].value.as_ref().unwrap()), pid);
    assert_eq!(be64(got[1].value.as_ref().unwrap()), obj.object_id.0);
    assert_eq!(be64(got[2].value.as_ref().unwrap()), 12_345);
}

#[test]
fn setting_logical_length_truncates_and_extends() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    c.write(obj, 0, &[9u8; 1000], false).unwrap();
    c.set_attributes(obj, &[Attribute { id: LOGICAL_LENGTH, value: 10u64.to_be_bytes().to_vec() }]).unwrap();
    c.set_attributes(obj, &[Attribute { id: LOGICAL_LENGTH, value: 20u64.to_be_bytes().to_vec() }]).unwrap();
    let got = c.read(obj, 0, 20).unwrap();
    assert!(!got.past_end);
    assert_eq!(&got.data[..10], &[9u8; 10]);
    assert_eq!(&got.data[10..], &[0u8; 10], "bytes beyond a truncation come back as zeros");
}

#[test]
fn read_only_standard_attributes_refuse_set() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    let err = c.set_attributes(obj, &[Attribute { id: AttrId::new(0x1, 0x2), value: 5u64.to_be_bytes().to_vec() }]).unwrap_err();
    let sense = err.sense().expect("sense");
    assert_eq!(sense.key, tessera_scsi::SenseKey::IllegalRequest, "{err}");
}

#[test]
fn root_information_page_describes_the_device() {
    let osd = TestOsd::start();
    let c = osd.client();
    c.create_partition(None).unwrap();
    c.create_partition(None).unwrap();
    let got = c.get_attributes(ObjectAddr::ROOT, &[AttrId::new(0x9000_0001, 0x3), AttrId::new(0x9000_0001, 0xC0), AttrId::new(0x9000_0001, 0xA)]).unwrap();
    assert_eq!(got[0].value.as_ref().map(Vec::len), Some(20), "system id is 20 bytes");
    assert_eq!(be64(got[1].value.as_ref().unwrap()), 2, "number of partitions");
    assert!(got[2].value.is_some(), "maximum CDB continuation length");
}

#[test]
fn timestamps_are_stored_and_follow_data_and_attribute_changes() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    let ts = |c: &tessera_initiator::osd_client::OsdClient<_>, n: u32| -> u64 {
        let v = c.get_attributes(obj, &[AttrId::new(0x3, n)]).unwrap()[0].value.clone().expect("timestamp defined");
        assert_eq!(v.len(), 6, "timestamps are 6-byte milliseconds");
        v.iter().fold(0u64, |acc, b| acc << 8 | *b as u64)
    };
    let created = ts(&c, 0x1);
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(created <= now_ms && now_ms - created < 60_000, "created {created} vs now {now_ms}");
    std::thread::sleep(std::time::Duration::from_millis(20));
    c.write(obj, 0, b"x", false).unwrap();
    let data_modified = ts(&c, 0x5);
    assert!(data_modified > created, "data modified time moves on WRITE");
}

#[test]
fn compare_and_swap_and_fetch_and_add_are_atomic() {
    let osd = TestOsd::start();
    let c = osd.client();
    let (_, obj) = partition_with_object(&c);
    let counter = AttrId::new(USER_PAGE, 0x10);
    assert_eq!(c.compare_and_swap(obj, counter, 0, 5).unwrap(), 0, "undefined reads as 0 and swaps");
    assert_eq!(c.compare_and_swap(obj, counter, 4, 9).unwrap(), 5, "mismatch returns the current value");
    assert_eq!(be64(c.get_attributes(obj, &[counter]).unwrap()[0].value.as_ref().unwrap()), 5, "mismatch did not swap");

    let threads = 8;
    let per_thread = 50;
    std::thread::scope(|s| {
        for _ in 0..threads {
            let osd = &osd;
            s.spawn(move || {
                let c = osd.client();
                for _ in 0..per_thread {
                    c.fetch_and_add(obj, counter, 1).unwrap();
                }
            });
        }
    });
    assert_eq!(be64(c.get_attributes(obj, &[counter]).unwrap()[0].value.as_ref().unwrap()), 5 + threads * per_thread);
}
