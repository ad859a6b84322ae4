//! Fuzz entry points: plain functions over arbitrary bytes, so `cargo fuzz` targets
//! (fuzz/fuzz_targets/osd_*.rs) and the proptest "never panics" tests below run the same code.
//! Each one must return (any `Result`) for every input; a panic is a bug.

use crate::continuation::{self, DataSpan};
use crate::{attr_list, builder::OsdRequestBuilder, continuation_before_data, decode_before_data, decode_before_data_with_continuation, decode_request, encode_reply, list, read_map, Reply, Request};

/// Splits `data` into a CDB-length prefix and Data-Out, decodes, and when the decode succeeds
/// checks the round trip through the builder and the reply encoder.
pub fn decode_request_bytes(data: &[u8]) -> bool {
    let split = data.len().min(crate::cdb::CDB_LEN);
    let (cdb, data_out) = data.split_at(split);
    decode_cdb_and_data(cdb, data_out)
}

/// Decodes `cdb` + `data_out`. When they decode, the request must re-encode and decode to the
/// same request, and encoding an empty reply must not panic. Returns whether it decoded.
pub fn decode_cdb_and_data(cdb: &[u8], data_out: &[u8]) -> bool {
    let early = decode_before_data(cdb, data_out.len() as u64);
    let segment = continuation_before_data(cdb, data_out.len() as u64).and_then(|len| data_out.get(..len as usize));
    let early_list = segment.and_then(|s| decode_before_data_with_continuation(cdb, s, data_out.len() as u64));
    let Ok((request, placement)) = decode_request(cdb, data_out) else {
        assert!(early.is_none(), "a command that decodes before its data must decode with it");
        assert!(early_list.is_none(), "a command that decodes from its continuation segment must decode with its data");
        return false;
    };
    for (early, early_placement) in early.into_iter().chain(early_list) {
        assert_eq!(early, Request { data: &[], ..request.clone() }, "decoding before the data must agree");
        assert_eq!(early_placement, placement);
    }
    let _ = encode_reply(&placement, Reply::default(), placement.data_in_len().min(1 << 16) as u32);
    if let Ok(encoded) = OsdRequestBuilder::from_request(&request).encode() {
        let out = encoded.data_out_vec();
        let again = decode_request(&encoded.cdb, &out).map(|(r, _)| r);
        assert_eq!(again.as_ref(), Ok(&request), "re-encoding a decoded request must round-trip");
    }
    true
}

/// Every attribute-list decoder on the same bytes.
pub fn attr_lists(data: &[u8]) {
    let _ = attr_list::decode_get_list(data);
    let _ = attr_list::decode_set_list(data);
    let _ = attr_list::decode_retrieved_list(data);
    let _ = attr_list::decode_multi_object_list(data);
}

/// The continuation decoder; the first 18 bytes choose the service action and the span.
pub fn continuation_bytes(data: &[u8]) {
    if data.len() < 18 {
        return;
    }
    let sa = u16::from_be_bytes([data[0], data[1]]);
    let start = u64::from_be_bytes(data[2..10].try_into().unwrap_or_default());
    let len = u64::from_be_bytes(data[10..18].try_into().unwrap_or_default());
    let rest = &data[18..];
    let _ = continuation::decode_continuation(rest, sa, DataSpan { start, len });
    // Also with the service action and span a valid segment would carry.
    if rest.len() >= 4 {
        let sa = u16::from_be_bytes([rest[2], rest[3]]);
        let _ = continuation::decode_continuation(rest, sa, DataSpan { start: 0, len: len % 4096 });
    }
}

/// LIST / QUERY / READ MAP result decoders.
pub fn list_results(data: &[u8]) {
    let _ = list::ListResult::decode(data);
    let _ = list::QueryResult::decode(data);
    let _ = read_map::ReadMapResult::decode(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn osd_cdb() -> impl Strategy<Value = Vec<u8>> {
        // Mostly well-formed headers so the fuzzer reaches past the first checks.
        (proptest::collection::vec(any::<u8>(), 236), 0usize..crate::command::ServiceAction::ALL.len(), any::<u8>()).prop_map(|(mut c, sa, fmt)| {
            c[0] = 0x7F;
            c[7] = 0xE4;
            c[8..10].copy_from_slice(&crate::command::ServiceAction::ALL[sa].code().to_be_bytes());
            c[11] = fmt & 0x70;
            c[12] = 0;
            for b in &mut c[16..80] {
                // Small numbers: many fields zero or near-valid.
                *b &= 0x01;
            }
            c
        })
    }

    proptest! {
        #[test]
        fn decode_request_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            decode_request_bytes(&data);
        }

        #[test]
        fn decode_structured_never_panics(cdb in osd_cdb(), data_out in proptest::collection::vec(any::<u8>(), 0..300)) {
            decode_cdb_and_data(&cdb, &data_out);
        }

        #[test]
        fn attr_lists_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            attr_lists(&data);
            let mut header = vec![0x09, 0, 0, 0];
            header.extend_from_slice(&(data.len() as u32).to_be_bytes());
            header.extend_from_slice(&data);
            attr_lists(&header);
        }

        #[test]
        fn continuation_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            continuation_bytes(&data);
        }

        #[test]
        fn list_results_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            list_results(&data);
        }
    }
}
