//! Negotiation tests: each key's result function, out-of-range values, unknown and irrelevant
//! keys, and a full initiator/target exchange.

use super::*;
use crate::text::KeyValue;

fn kv(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn answer(t: &mut TargetNegotiator, k: &str, v: &str) -> String {
    let out = t.respond(&kv(&[(k, v)])).unwrap();
    find(&out, k).unwrap_or("<none>").to_string()
}

fn target() -> TargetNegotiator {
    TargetNegotiator::new(Offer { max_burst_len: 1 << 20, first_burst_len: 1 << 18, ..Offer::default() })
}

#[test]
fn result_functions() {
    let mut t = target();
    // Min
    assert_eq!(answer(&mut t, MAX_BURST_LENGTH, "4194304"), "1048576");
    assert_eq!(answer(&mut t, MAX_BURST_LENGTH, "8192"), "8192");
    assert_eq!(t.params.max_burst_len, 8192);
    // Max
    assert_eq!(answer(&mut t, DEFAULT_TIME2WAIT, "0"), "2");
    assert_eq!(answer(&mut t, DEFAULT_TIME2WAIT, "7"), "7");
    // AND
    assert_eq!(answer(&mut t, IMMEDIATE_DATA, "No"), "No");
    assert!(!t.params.immediate_data);
    assert_eq!(answer(&mut t, IMMEDIATE_DATA, "Yes"), "Yes");
    // OR (ours is No, so theirs decides)
    assert_eq!(answer(&mut t, INITIAL_R2T, "Yes"), "Yes");
    assert_eq!(answer(&mut t, INITIAL_R2T, "No"), "No");
    assert!(!t.params.initial_r2t);
    // ErrorRecoveryLevel: Min with our 0.
    assert_eq!(answer(&mut t, ERROR_RECOVERY_LEVEL, "2"), "0");
    // Hex numbers are numbers too.
    assert_eq!(answer(&mut t, MAX_OUTSTANDING_R2T, "0x4"), "1");
}

#[test]
fn digests_pick_first_supported() {
    let mut t = target();
    assert_eq!(answer(&mut t, HEADER_DIGEST, "CRC32C,None"), "CRC32C");
    assert!(t.params.header_digest);
    assert_eq!(answer(&mut t, DATA_DIGEST, "None,CRC32C"), "None");
    assert_eq!(answer(&mut t, DATA_DIGEST, "MD5"), REJECT);
    let mut strict = TargetNegotiator::new(Offer { header_digests: vec![DigestKind::Crc32c], ..Offer::default() });
    assert_eq!(answer(&mut strict, HEADER_DIGEST, "None"), REJECT);
}

#[test]
fn out_of_range_and_malformed_rejected() {
    let mut t = target();
    assert_eq!(answer(&mut t, MAX_BURST_LENGTH, "100"), REJECT); // below 512
    assert_eq!(answer(&mut t, MAX_BURST_LENGTH, "16777216"), REJECT); // above 2^24-1
    assert_eq!(answer(&mut t, MAX_CONNECTIONS, "0"), REJECT);
    assert_eq!(answer(&mut t, IMMEDIATE_DATA, "maybe"), REJECT);
    assert_eq!(answer(&mut t, MAX_RECV_DATA_SEGMENT_LENGTH, "-1"), REJECT);
    assert_eq!(answer(&mut t, DEFAULT_TIME2WAIT, "3601"), REJECT);
}

#[test]
fn unknown_and_irrelevant_keys() {
    let mut t = target();
    assert_eq!(answer(&mut t, "X-com.example.Foo", "1"), NOT_UNDERSTOOD);
    assert_eq!(answer(&mut t, "Bogus", "1"), NOT_UNDERSTOOD);
    assert_eq!(answer(&mut t, IF_MARKER, "Yes"), "No");
    assert_eq!(answer(&mut t, OF_MARK_INT, "2048~8192"), IRRELEVANT);
    let mut d = target();
    let out = d.respond(&kv(&[(SESSION_TYPE, "Discovery"), (MAX_BURST_LENGTH, "8192"), (HEADER_DIGEST, "None")])).unwrap();
    assert_eq!(find(&out, MAX_BURST_LENGTH), Some(IRRELEVANT));
    assert_eq!(find(&out, HEADER_DIGEST), Some("None"));
    assert!(d.respond(&kv(&[(SESSION_TYPE, "Weird")])).is_err());
}

#[test]
fn declarative_mrdsl_per_direction() {
    let mut t = target();
    assert_eq!(answer(&mut t, MAX_RECV_DATA_SEGMENT_LENGTH, "65536"), (1u32 << 20).to_string());
    assert_eq!(t.params.initiator_max_recv_data_segment_len, 65536);
    assert_eq!(t.params.target_max_recv_data_segment_len, 1 << 20);
    assert!(t.declarations().is_empty(), "already declared in the answer");
    let mut t2 = target();
    assert_eq!(t2.declarations().len(), 1);
}

#[test]
fn first_burst_clamped_to_max_burst() {
    let mut t = target();
    t.respond(&kv(&[(MAX_BURST_LENGTH, "65536"), (FIRST_BURST_LENGTH, "262144")])).unwrap();
    assert_eq!(t.params.first_burst_len, 65536);
}

#[test]
fn full_exchange_agrees() {
    let mut i = InitiatorNegotiator::new(
        Offer { header_digests: vec![DigestKind::Crc32c], data_digests: vec![DigestKind::Crc32c], ..Offer::default() },
        "iqn.i",
        "iqn.t",
        SessionType::Normal,
    );
    let mut t = target();
    let answers = t.respond(&i.offers()).unwrap();
    i.apply(&answers).unwrap();
    let mut tp = t.params.clone();
    tp.initiator_name.clear();
    tp.target_name.clear();
    let mut ip = i.params.clone();
    ip.initiator_name.clear();
    ip.target_name.clear();
    assert_eq!(ip, tp);
    assert!(ip.header_digest && ip.data_digest);
    assert_eq!(ip.max_burst_len, 1 << 20);
    assert_eq!(ip.first_burst_len, 1 << 18);
    assert!(ip.immediate_data && !ip.initial_r2t);
}

#[test]
fn initiator_refuses_impossible_answers() {
    let mut i = InitiatorNegotiator::new(Offer { max_burst_len: 8192, ..Offer::default() }, "a", "b", SessionType::Normal);
    assert!(i.apply(&kv(&[(MAX_BURST_LENGTH, "65536")])).is_err());
    assert!(i.apply(&kv(&[(HEADER_DIGEST, "MD5")])).is_err());
    let mut i = InitiatorNegotiator::new(Offer { immediate_data: false, ..Offer::default() }, "a", "b", SessionType::Normal);
    assert!(i.apply(&kv(&[(IMMEDIATE_DATA, "Yes")])).is_err());
    assert!(i.apply(&kv(&[(MAX_BURST_LENGTH, NOT_UNDERSTOOD)])).is_ok());
}
