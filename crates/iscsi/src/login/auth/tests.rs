use proptest::prelude::*;

use super::*;
use crate::login::keys::AUTH_METHOD;

fn kv(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn cred(user: &str, secret: &str) -> ChapCredential {
    ChapCredential::new(user, secret.as_bytes()).unwrap()
}

fn one_way() -> ChapSecrets {
    ChapSecrets::one_way(cred("alice", "initiator-secret"))
}

fn mutual() -> ChapSecrets {
    ChapSecrets::mutual(cred("alice", "initiator-secret"), cred("osd0", "target-secret!")).unwrap()
}

fn challenge(seed: u8) -> Challenge {
    let mut r = [0u8; 1 + CHALLENGE_LEN];
    for (i, b) in r.iter_mut().enumerate() {
        *b = seed.wrapping_add((i as u8).wrapping_mul(17));
    }
    Challenge::from_random(r)
}

/// Runs the exchange the way the login loops do, until both sides are done or one fails.
/// `Err(true)` is a target-side failure, `Err(false)` an initiator-side one.
fn exchange(i: &mut InitiatorAuth, t: &mut TargetAuth) -> Result<(), (bool, AuthError)> {
    let mut request = i.offer();
    for _ in 0..6 {
        let answer = t.respond(&request).map_err(|e| (true, e))?;
        request = i.on_answer(&answer).map_err(|e| (false, e))?;
        if i.complete() && t.complete() && request.is_empty() {
            return Ok(());
        }
    }
    panic!("exchange did not finish");
}

#[test]
fn binary_values_in_hex_and_base64() {
    assert_eq!(decode_binary("0x0102ff", 16).unwrap(), [1, 2, 255]);
    assert_eq!(decode_binary("0XABC", 16).unwrap(), [0x0A, 0xBC], "odd digit count: implied leading zero");
    assert_eq!(decode_binary("0bAQL/", 16).unwrap(), [1, 2, 255]);
    assert_eq!(decode_binary("0BAQI=", 16).unwrap(), [1, 2]);
    assert_eq!(decode_binary("0bAQI", 16).unwrap(), [1, 2], "padding optional");
    assert_eq!(decode_binary("0x", 16), Err(BinaryError::Empty));
    assert_eq!(decode_binary("12", 16), Err(BinaryError::NoPrefix));
    assert_eq!(decode_binary("x", 16), Err(BinaryError::NoPrefix));
    assert_eq!(decode_binary("0x0g", 16), Err(BinaryError::BadDigit("hex")));
    assert_eq!(decode_binary("0b!!!!", 16), Err(BinaryError::BadDigit("base64")));
    assert_eq!(encode_hex(&[0, 0xAB]), "0x00ab");
    let max = "0x".to_string() + &"ab".repeat(BINARY_LEN_MAX);
    assert_eq!(decode_binary(&max, BINARY_LEN_MAX).unwrap().len(), BINARY_LEN_MAX);
    assert_eq!(decode_binary(&(max + "a"), BINARY_LEN_MAX), Err(BinaryError::TooLong { max: BINARY_LEN_MAX }));
    let b64 = "0b".to_string() + &"AAAA".repeat(BINARY_LEN_MAX / 3 + 1);
    assert_eq!(decode_binary(&b64, BINARY_LEN_MAX), Err(BinaryError::TooLong { max: BINARY_LEN_MAX }));
}

#[test]
fn chap_md5_known_answer() {
    // MD5(0x07 || "initiator-secret" || 00 01 .. 0f), computed with an independent MD5.
    let challenge: Vec<u8> = (0..16).collect();
    let r = chap_response(7, b"initiator-secret", &challenge);
    assert_eq!(encode_hex(&r), "0xa172b718126bb3191344d50be137ec5e");
    assert!(response_matches(&r, 7, b"initiator-secret", &challenge));
    assert!(!response_matches(&r, 8, b"initiator-secret", &challenge));
    assert!(!response_matches(&r[..15], 7, b"initiator-secret", &challenge));
}

#[test]
fn secret_file_formats() {
    let s = ChapSecrets::parse("# users\nalice initiator-secret\n").unwrap();
    assert_eq!(s, one_way());
    let s = ChapSecrets::parse("\n  alice   initiator-secret  \n# target\nosd0 target-secret!\n").unwrap();
    assert_eq!(s, mutual());
    assert_eq!(ChapSecrets::parse("# nothing\n\n"), Err(SecretsError::Empty));
    assert_eq!(ChapSecrets::parse("alice\n"), Err(SecretsError::Format { line: 1 }));
    assert_eq!(ChapSecrets::parse("a b c\n"), Err(SecretsError::Format { line: 1 }));
    assert!(matches!(ChapSecrets::parse("alice short\n"), Err(SecretsError::SecretTooShort { len: 5, .. })));
    assert!(ChapSecrets::parse("alice twelve-bytes\n").is_ok());
    assert_eq!(ChapSecrets::parse("alice same-secret-1\nosd0 same-secret-1\n"), Err(SecretsError::SameSecret));
    assert_eq!(
        ChapSecrets::parse("a initiator-secret\nb target-secret!\nc another-secret\n"),
        Err(SecretsError::TooManyLines)
    );
    let long = format!("alice {}\n", "s".repeat(FIELD_LEN_MAX + 1));
    assert!(matches!(ChapSecrets::parse(&long), Err(SecretsError::SecretTooLong { .. })));
    assert!(ChapCredential::new("", b"initiator-secret").is_err());
    assert!(format!("{:?}", mutual()).contains("16 bytes"), "Debug shows lengths");
    assert!(!format!("{:?}", mutual()).contains("initiator-secret"), "Debug never shows a secret");
    assert!(check_file_mode(0o100600).is_ok());
    assert!(check_file_mode(0o400).is_ok());
    assert_eq!(check_file_mode(0o100640), Err(SecretsError::Exposed { mode: 0o640 }));
    assert!(check_file_mode(0o604).is_err());
}

#[test]
fn one_way_chap_succeeds() {
    let mut i = InitiatorAuth::new(Some(one_way()), challenge(1));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    assert_eq!(i.offer(), kv(&[(AUTH_METHOD, "CHAP,None")]));
    assert!(!t.complete());
    exchange(&mut i, &mut t).unwrap();
    assert!(t.complete() && i.complete());
    assert_eq!(t.may_transit(true), Ok(true));
    assert_eq!(i.check_transit(), Ok(()));
    assert_eq!(t.check_operational(&kv(&[("MaxBurstLength", "512")])), Ok(()));
}

#[test]
fn target_messages_follow_rfc_7143() {
    let mut t = TargetAuth::new(Some(mutual()), challenge(2));
    let a = t.respond(&kv(&[("InitiatorName", "iqn.x"), (AUTH_METHOD, "KRB5,CHAP,None")])).unwrap();
    assert_eq!(a, kv(&[(AUTH_METHOD, "CHAP")]));
    assert_eq!(t.may_transit(true), Ok(false), "no transit while CHAP is under way");
    let a = t.respond(&kv(&[(CHAP_A, "7,5")])).unwrap();
    let c = challenge(2);
    assert_eq!(a, kv(&[(CHAP_A, "5"), (CHAP_I, &c.id.to_string()), (CHAP_C, &encode_hex(&c.bytes))]));
    let r = chap_response(c.id, b"initiator-secret", &c.bytes);
    let mine = [0x55u8; 20];
    let a = t.respond(&kv(&[(CHAP_N, "alice"), (CHAP_R, &encode_hex(&r)), (CHAP_I, "0x2a"), (CHAP_C, &encode_hex(&mine))])).unwrap();
    let expect = chap_response(42, b"target-secret!", &mine);
    assert_eq!(a, kv(&[(CHAP_N, "osd0"), (CHAP_R, &encode_hex(&expect))]));
    assert!(t.complete());
}

#[test]
fn mutual_chap_succeeds() {
    let mut i = InitiatorAuth::new(Some(mutual()), challenge(1));
    let mut t = TargetAuth::new(Some(mutual()), challenge(2));
    assert_eq!(i.offer(), kv(&[(AUTH_METHOD, "CHAP")]));
    exchange(&mut i, &mut t).unwrap();
}

#[test]
fn wrong_initiator_secret_or_user_is_refused() {
    let wrong = ChapSecrets::one_way(cred("alice", "not-the-secret"));
    let mut i = InitiatorAuth::new(Some(wrong), challenge(1));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    assert_eq!(exchange(&mut i, &mut t), Err((true, AuthError::WrongResponse { user: "alice".into() })));
    assert!(!t.complete());
    let stranger = ChapSecrets::one_way(cred("mallory", "initiator-secret"));
    let mut i = InitiatorAuth::new(Some(stranger), challenge(1));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    assert_eq!(exchange(&mut i, &mut t), Err((true, AuthError::UnknownUser { user: "mallory".into() })));
}

#[test]
fn initiator_without_chap_is_refused_when_required() {
    let mut i = InitiatorAuth::new(None, challenge(1));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    assert_eq!(exchange(&mut i, &mut t), Err((true, AuthError::ChapRequired { offered: "None".into() })));
    // Skipping AuthMethod altogether and asking to leave the stage is refused too.
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    assert_eq!(t.respond(&kv(&[("InitiatorName", "iqn.x")])), Ok(vec![]));
    assert_eq!(t.may_transit(true), Err(AuthError::NotAuthenticated));
    assert_eq!(t.check_operational(&[]), Err(AuthError::NotAuthenticated));
}

#[test]
fn target_without_secrets_takes_none_only() {
    let mut t = TargetAuth::new(None, challenge(2));
    assert_eq!(t.respond(&kv(&[(AUTH_METHOD, "CHAP,None")])), Ok(kv(&[(AUTH_METHOD, "None")])));
    assert!(t.complete());
    let mut t = TargetAuth::new(None, challenge(2));
    assert_eq!(t.respond(&kv(&[(AUTH_METHOD, "CHAP")])), Err(AuthError::NoCommonMethod { offered: "CHAP".into() }));
    // One-way initiator secrets are waived by such a target; mutual ones are not.
    let mut i = InitiatorAuth::new(Some(one_way()), challenge(1));
    exchange(&mut i, &mut TargetAuth::new(None, challenge(2))).unwrap();
    let mut i = InitiatorAuth::new(Some(mutual()), challenge(1));
    assert!(matches!(exchange(&mut i, &mut TargetAuth::new(None, challenge(2))), Err((true, AuthError::NoCommonMethod { .. }))));
    let mut i = InitiatorAuth::new(Some(mutual()), challenge(1));
    assert_eq!(i.on_answer(&kv(&[(AUTH_METHOD, "None")])), Err(AuthError::TargetSkippedAuth));
}

#[test]
fn wrong_target_secret_is_detected_by_the_initiator() {
    let expecting_other = ChapSecrets::mutual(cred("alice", "initiator-secret"), cred("osd0", "other-target-secret")).unwrap();
    let mut i = InitiatorAuth::new(Some(expecting_other), challenge(1));
    let mut t = TargetAuth::new(Some(mutual()), challenge(2));
    assert_eq!(exchange(&mut i, &mut t), Err((false, AuthError::TargetNotAuthenticated)));
    let other_name = ChapSecrets::mutual(cred("alice", "initiator-secret"), cred("osd9", "target-secret!")).unwrap();
    let mut i = InitiatorAuth::new(Some(other_name), challenge(1));
    let mut t = TargetAuth::new(Some(mutual()), challenge(2));
    assert!(matches!(exchange(&mut i, &mut t), Err((false, AuthError::TargetUserMismatch { .. }))));
}

#[test]
fn mutual_request_without_a_target_secret_is_refused() {
    let mut i = InitiatorAuth::new(Some(mutual()), challenge(1));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    assert_eq!(exchange(&mut i, &mut t), Err((true, AuthError::MutualNotConfigured)));
}

#[test]
fn a_target_that_skips_its_proof_is_refused() {
    let mut i = InitiatorAuth::new(Some(mutual()), challenge(1));
    i.on_answer(&kv(&[(AUTH_METHOD, "CHAP")])).unwrap();
    assert_eq!(i.check_transit(), Err(AuthError::TargetSkippedAuth));
    let c = challenge(2);
    i.on_answer(&kv(&[(CHAP_A, "5"), (CHAP_I, "1"), (CHAP_C, &encode_hex(&c.bytes))])).unwrap();
    assert_eq!(i.on_answer(&[]), Err(AuthError::TargetSkippedAuth));
}

#[test]
fn reflected_challenge_is_refused() {
    let mut t = TargetAuth::new(Some(mutual()), challenge(2));
    t.respond(&kv(&[(AUTH_METHOD, "CHAP"), (CHAP_A, "5")])).unwrap();
    let c = challenge(2);
    let r = chap_response(c.id, b"initiator-secret", &c.bytes);
    let reflect = kv(&[(CHAP_N, "alice"), (CHAP_R, &encode_hex(&r)), (CHAP_I, &c.id.to_string()), (CHAP_C, &encode_hex(&c.bytes))]);
    assert_eq!(t.respond(&reflect), Err(AuthError::ChallengeReflected));
    // And the initiator never sends back the challenge it was given.
    let mut i = InitiatorAuth::new(Some(mutual()), challenge(7));
    i.on_answer(&kv(&[(AUTH_METHOD, "CHAP")])).unwrap();
    let same = challenge(7);
    let out = i.on_answer(&kv(&[(CHAP_A, "5"), (CHAP_I, "3"), (CHAP_C, &encode_hex(&same.bytes))])).unwrap();
    let sent = out.iter().find(|(k, _)| k == CHAP_C).unwrap();
    assert_ne!(sent.1, encode_hex(&same.bytes));
}

#[test]
fn short_challenges_and_bad_keys_are_refused() {
    let mut i = InitiatorAuth::new(Some(one_way()), challenge(1));
    i.on_answer(&kv(&[(AUTH_METHOD, "CHAP")])).unwrap();
    let short = kv(&[(CHAP_A, "5"), (CHAP_I, "1"), (CHAP_C, "0x00112233")]);
    assert_eq!(i.on_answer(&short), Err(AuthError::ChallengeTooShort { len: 4, min: CHALLENGE_LEN }));

    let mut i = InitiatorAuth::new(Some(one_way()), challenge(1));
    i.on_answer(&kv(&[(AUTH_METHOD, "CHAP")])).unwrap();
    let c = encode_hex(&challenge(3).bytes);
    assert!(matches!(i.on_answer(&kv(&[(CHAP_A, "5"), (CHAP_I, "256"), (CHAP_C, &c)])), Err(AuthError::BadIdentifier { .. })));
    let mut i = InitiatorAuth::new(Some(one_way()), challenge(1));
    i.on_answer(&kv(&[(AUTH_METHOD, "CHAP")])).unwrap();
    assert!(matches!(i.on_answer(&kv(&[(CHAP_A, "6"), (CHAP_I, "1"), (CHAP_C, &c)])), Err(AuthError::AlgorithmNotOffered(_))));

    let mut t = TargetAuth::new(Some(mutual()), challenge(2));
    t.respond(&kv(&[(AUTH_METHOD, "CHAP"), (CHAP_A, "5")])).unwrap();
    let c2 = challenge(2);
    let r = encode_hex(&chap_response(c2.id, b"initiator-secret", &c2.bytes));
    let req = kv(&[(CHAP_N, "alice"), (CHAP_R, &r), (CHAP_I, "9"), (CHAP_C, "0b AAAA")]);
    assert!(matches!(t.respond(&req), Err(AuthError::Encoding { key: CHAP_C, .. })));
    let mut t = TargetAuth::new(Some(mutual()), challenge(2));
    t.respond(&kv(&[(AUTH_METHOD, "CHAP"), (CHAP_A, "5")])).unwrap();
    let req = kv(&[(CHAP_N, "alice"), (CHAP_R, &r), (CHAP_I, "9"), (CHAP_C, "0x0011")]);
    assert_eq!(t.respond(&req), Err(AuthError::ChallengeTooShort { len: 2, min: CHALLENGE_LEN }));
    let mut t = TargetAuth::new(Some(mutual()), challenge(2));
    t.respond(&kv(&[(AUTH_METHOD, "CHAP"), (CHAP_A, "5")])).unwrap();
    assert_eq!(t.respond(&kv(&[(CHAP_N, "alice"), (CHAP_R, &r), (CHAP_I, "9")])), Err(AuthError::Missing { key: CHAP_C, step: "waiting for CHAP_N and CHAP_R" }));
}

#[test]
fn out_of_order_duplicate_and_misplaced_keys_are_refused() {
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    assert!(matches!(t.respond(&kv(&[(CHAP_N, "alice")])), Err(AuthError::Unexpected { .. })));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    assert_eq!(t.respond(&kv(&[(AUTH_METHOD, "CHAP"), (AUTH_METHOD, "None")])), Err(AuthError::Duplicate(AUTH_METHOD.into())));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    t.respond(&kv(&[(AUTH_METHOD, "CHAP")])).unwrap();
    assert_eq!(t.respond(&kv(&[("InitiatorAlias", "x")])), Err(AuthError::Missing { key: CHAP_A, step: "waiting for CHAP_A" }));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    t.respond(&kv(&[(AUTH_METHOD, "CHAP")])).unwrap();
    assert!(matches!(t.respond(&kv(&[(CHAP_A, "5"), (CHAP_N, "alice")])), Err(AuthError::Unexpected { .. })));
    let mut t = TargetAuth::new(Some(one_way()), challenge(2));
    t.respond(&kv(&[(AUTH_METHOD, "CHAP")])).unwrap();
    assert!(matches!(t.respond(&kv(&[(CHAP_A, "7")])), Err(AuthError::NoCommonAlgorithm { .. })));
    let t = TargetAuth::new(None, challenge(2));
    assert_eq!(t.check_operational(&kv(&[(CHAP_A, "5")])), Err(AuthError::OutsideSecurityStage(CHAP_A.into())));
}

/// Values an attacker might put in the CHAP keys.
fn hostile_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,40}",
        "0[xXbB][0-9a-zA-Z+/=]{0,80}",
        "[0-9]{1,12}",
        "0x[0-9a-f]{0,3000}",
        "0b[A-Za-z0-9+/]{0,1500}={0,3}",
        Just("CHAP".to_string()),
        Just("None".to_string()),
        Just("5".to_string()),
    ]
}

fn hostile_request() -> impl Strategy<Value = Vec<KeyValue>> {
    let key = prop_oneof![Just(AUTH_METHOD), Just(CHAP_A), Just(CHAP_I), Just(CHAP_C), Just(CHAP_N), Just(CHAP_R)];
    proptest::collection::vec((key.prop_map(String::from), hostile_value()), 0..6)
}

proptest! {
    #[test]
    fn hostile_keys_never_panic(requests in proptest::collection::vec(hostile_request(), 1..5), seed in any::<u8>(), with in 0u8..3) {
        let secrets = match with { 0 => None, 1 => Some(one_way()), _ => Some(mutual()) };
        let mut t = TargetAuth::new(secrets.clone(), challenge(seed));
        let mut i = InitiatorAuth::new(secrets, challenge(seed.wrapping_add(1)));
        for r in &requests {
            let _ = t.respond(r);
            let _ = t.may_transit(true);
            let _ = t.check_operational(r);
            let _ = i.on_answer(r);
            let _ = i.check_transit();
        }
    }

    #[test]
    fn binary_decoding_never_panics_and_stays_bounded(v in hostile_value(), max in 0usize..64) {
        if let Ok(bytes) = decode_binary(&v, max) {
            prop_assert!(bytes.len() <= max);
        }
    }

    #[test]
    fn hex_round_trips(bytes in proptest::collection::vec(any::<u8>(), 1..64)) {
        prop_assert_eq!(decode_binary(&encode_hex(&bytes), 64).unwrap(), bytes);
    }

    #[test]
    fn secret_file_parsing_never_panics(text in "([ -~]{0,30}\n){0,5}") {
        let _ = ChapSecrets::parse(&text);
    }
}
