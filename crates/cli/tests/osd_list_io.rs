//! Goal: list WRITEs and READs over iSCSI move exactly the right bytes on both of the target's
//! list paths: pieces copied through the object's mapping into a buffer (small pieces) and
//! pieces sent straight from the mapping (1 KiB and more), with and without data digests,
//! with pieces past the end of the object (zeros and RECOVERED ERROR 3B17), and after the
//! object grew or shrank while its mapping was cached. Method: the real daemon, byte-for-byte
//! comparison against a plain byte-array model of the object.

mod common;

use common::*;
use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_initiator::osd_client::OsdClient;
use tessera_iscsi::login::DigestKind;
use tessera_osd_proto::pages::USER_OBJECT_LOGICAL_LENGTH;
use tessera_osd_proto::{Attribute, DataLayout, Extent};
use tessera_types::ObjectAddr;

/// Applies a list WRITE to the model.
fn model_write(model: &mut Vec<u8>, extents: &[Extent], data: &[u8]) {
    let mut at = 0;
    for e in extents {
        let (o, n) = (e.offset as usize, e.len as usize);
        if model.len() < o + n {
            model.resize(o + n, 0);
        }
        model[o..o + n].copy_from_slice(&data[at..at + n]);
        at += n;
    }
}

/// What a list READ must return: the pieces end to end, zeros past the model's end.
fn model_read(model: &[u8], extents: &[Extent]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in extents {
        for i in e.offset..e.offset + e.len {
            out.push(model.get(i as usize).copied().unwrap_or(0));
        }
    }
    out
}

fn strided(count: u64, block: u64, stride: u64) -> Vec<Extent> {
    (0..count).map(|i| Extent { offset: i * stride, len: block }).collect()
}

fn total(extents: &[Extent]) -> u64 {
    extents.iter().map(|e| e.len).sum()
}

fn check_read(c: &OsdClient<Session>, obj: ObjectAddr, model: &[u8], extents: &[Extent], layout: DataLayout) {
    let got = c.read_layout(obj, 0, total(extents), layout).unwrap();
    let past = extents.iter().any(|e| e.offset + e.len > model.len() as u64);
    assert_eq!(got.past_end, past, "3B17 exactly when a piece reaches past the end");
    assert!(got.data == model_read(model, extents), "list read returned other bytes than the model");
}

fn exercise(c: &OsdClient<Session>) {
    let (_, obj) = partition_with_object(c);
    let mut model = Vec::new();
    // Small pieces (copied) and large ones (sent from the mapping), strided and as an SGL
    // with overlaps (later wins) and out of order.
    for (i, (count, block, stride)) in [(1024u64, 64u64, 1024u64), (64, 4096, 65536), (16, 20000, 30000)].into_iter().enumerate() {
        let extents = strided(count, block, stride);
        let data = pattern(total(&extents) as usize, i as u32);
        c.write_layout(obj, 0, &data, DataLayout::Strided { stride, block_len: block }, false).unwrap();
        model_write(&mut model, &extents, &data);
        check_read(c, obj, &model, &extents, DataLayout::Strided { stride, block_len: block });
    }
    let sgl = vec![
        Extent { offset: 5000, len: 3000 },
        Extent { offset: 4000, len: 2000 },
        Extent { offset: 100, len: 1500 },
        Extent { offset: 6000, len: 4096 },
    ];
    let data = pattern(total(&sgl) as usize, 9);
    c.write_layout(obj, 0, &data, DataLayout::List(sgl.clone()), false).unwrap();
    model_write(&mut model, &sgl, &data);
    check_read(c, obj, &model, &sgl, DataLayout::List(sgl.clone()));
    // Pieces straddling and beyond the end, large and small.
    let end = model.len() as u64;
    for block in [64u64, 4096] {
        let past = vec![Extent { offset: end - block / 2, len: block }, Extent { offset: end + 10_000, len: block }, Extent { offset: 0, len: block }];
        check_read(c, obj, &model, &past, DataLayout::List(past.clone()));
    }
    // Shrink (the cached mapping is now longer than the object), then grow past the mapping.
    let short = 70_000u64;
    c.set_attributes(obj, &[Attribute { id: USER_OBJECT_LOGICAL_LENGTH, value: short.to_be_bytes().to_vec() }]).unwrap();
    model.truncate(short as usize);
    let extents = strided(32, 4096, 8192);
    check_read(c, obj, &model, &extents, DataLayout::Strided { stride: 8192, block_len: 4096 });
    let far = strided(4, 4096, 8 << 20);
    let data = pattern(total(&far) as usize, 11);
    c.write_layout(obj, 0, &data, DataLayout::Strided { stride: 8 << 20, block_len: 4096 }, false).unwrap();
    model_write(&mut model, &far, &data);
    check_read(c, obj, &model, &far, DataLayout::Strided { stride: 8 << 20, block_len: 4096 });
    check_read(c, obj, &model, &extents, DataLayout::Strided { stride: 8192, block_len: 4096 });
    let whole = c.read(obj, 0, model.len() as u64).unwrap();
    assert!(whole.data == model, "a contiguous read sees what the list writes stored");
}

#[test]
fn list_io_matches_a_model() {
    let osd = TestOsd::start();
    exercise(&osd.client());
}

#[test]
fn list_io_matches_a_model_with_data_digests() {
    let osd = TestOsd::start();
    let mut config = SessionConfig::new("iqn.2026-11.org.tessera.test:digests", &osd.target_name);
    config.data_digest = DigestKind::Crc32c;
    config.header_digest = DigestKind::Crc32c;
    let session = Session::login(osd.addr.as_str(), config).expect("login with digests");
    exercise(&OsdClient::new(session, 0));
}
