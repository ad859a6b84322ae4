//! The client signer against the OSD checker, sans-IO: commands built with the real
//! `OsdRequestBuilder`, signed with a [`Credential`], decoded with the real `decode_request` and
//! checked by a [`Checker`], then the sealed answer verified by the client. Each hostile case
//! changes one thing and expects its own refusal.

use tessera_osd_proto::{
    continuation_segment, decode_request, Command, DataLayout, EncodedRequest, Extent, GetAttrs, OsdRequestBuilder, ReplyPlacement,
};
use tessera_types::ObjectAddr;

use crate::capability::{Capability, ObjectType, Permissions, Scope, SecurityMethod};
use crate::check::{Arrived, Checker, CheckerConfig, ObjectFacts};
use crate::credential::{Credential, ResponseError};
use crate::error::SecurityError;
use crate::icv::capability_key;
use crate::keys::{derive, Key, KeySlot};
use crate::nonce::{Nonce, NonceError, NonceWindow};
use crate::policy::requirement;

const NOW: u64 = 1_800_000_000_000;
const SYSTEM_ID: [u8; 20] = [0x11; 20];
const PID: u64 = 0x10000;
const OID: u64 = 0x10010;
const TAG: u32 = 77;

fn addr() -> ObjectAddr {
    ObjectAddr::new(PID, OID)
}

fn working_key() -> Key {
    let root = derive(&Key([1; 32]), KeySlot::Root, &[0; 7], &[2; 20]);
    let partition = derive(&root, KeySlot::Partition(PID), &[0; 7], &[3; 20]);
    derive(&partition, KeySlot::Working(PID, 0), &[0; 7], &[4; 20])
}

fn checker(required: SecurityMethod) -> Checker {
    let config = CheckerConfig { required, nonce_window: NonceWindow::default() };
    Checker::new(config, SYSTEM_ID, [(KeySlot::Working(PID, 0), working_key())], NOW - 1000)
}

fn capability(method: SecurityMethod, permissions: Permissions) -> Capability {
    let mut c = Capability::new(method, ObjectType::User, Scope::Object, PID, OID, permissions);
    c.expires_ms = NOW + 60_000;
    c.policy_tag = TAG;
    c
}

fn credential(c: Capability) -> Credential {
    let key = capability_key(&working_key(), &c.encode(), &SYSTEM_ID);
    Credential::new(c, &key)
}

fn facts(_: ObjectAddr) -> Result<Option<ObjectFacts>, SecurityError> {
    Ok(Some(ObjectFacts { object_type: ObjectType::User, created_ms: 5, policy_tag: TAG }))
}

/// Runs the OSD's side on an encoded command.
fn check(checker: &Checker, encoded: &EncodedRequest<'_>, now: u64) -> Result<crate::check::Authorized, SecurityError> {
    let data_out = encoded.data_out_vec();
    let (request, _) = decode_request(&encoded.cdb, &data_out).expect("a signed command still decodes");
    let arrived = Arrived {
        cdb: &encoded.cdb,
        data_out: &data_out,
        continuation: continuation_segment(request.service_action, &encoded.cdb, &data_out),
        data_in_len: encoded.data_in_len,
    };
    checker.authorize(&arrived, &requirement(&request), now, &facts)
}

fn write_builder(data: &[u8]) -> OsdRequestBuilder<'_> {
    OsdRequestBuilder::new(Command::Write { addr: addr(), offset: 0, len: data.len() as u64, layout: DataLayout::Contiguous }).data(data)
}

#[test]
fn a_signed_command_passes_under_every_method() {
    let data = vec![7u8; 100];
    for method in [SecurityMethod::CapKey, SecurityMethod::CmdRsp, SecurityMethod::AllData] {
        let checker = checker(SecurityMethod::CapKey);
        let cred = credential(capability(method, Permissions::WRITE));
        let mut enc = write_builder(&data).encode().unwrap();
        cred.sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
        assert!(check(&checker, &enc, NOW).is_ok(), "{method}");
    }
}

#[test]
fn the_method_must_meet_the_osds_minimum() {
    let data = [1u8; 8];
    let checker = checker(SecurityMethod::CmdRsp);
    let unsigned = write_builder(&data).encode().unwrap();
    assert!(matches!(check(&checker, &unsigned, NOW), Err(SecurityError::MethodRefused { got: SecurityMethod::NoSec, .. })));
    let mut capkey = write_builder(&data).encode().unwrap();
    credential(capability(SecurityMethod::CapKey, Permissions::WRITE)).sign(&mut capkey, Nonce::new(NOW, 1)).unwrap();
    assert!(matches!(check(&checker, &capkey, NOW), Err(SecurityError::MethodRefused { got: SecurityMethod::CapKey, .. })));
}

/// Goal: each capability check refuses with its own error. Method: one change per case.
#[test]
fn capability_checks_in_order() {
    let checker = checker(SecurityMethod::CapKey);
    let data = [1u8; 8];
    let sign = |c: Capability, b: OsdRequestBuilder<'_>| {
        let mut enc = b.encode().unwrap();
        credential(c).sign(&mut enc, Nonce::new(NOW, 9)).unwrap();
        check(&checker, &enc, NOW).map(drop)
    };
    let base = capability(SecurityMethod::CapKey, Permissions::WRITE);

    let mut expired = base.clone();
    expired.expires_ms = NOW - 1;
    assert!(matches!(sign(expired, write_builder(&data)), Err(SecurityError::Expired { .. })));

    let mut other = base.clone();
    other.object_id = OID + 1;
    assert!(matches!(sign(other, write_builder(&data)), Err(SecurityError::WrongObject { .. })));

    let mut ranged = base.clone();
    ranged.range_start = 4;
    ranged.range_len = 100;
    assert!(matches!(sign(ranged, write_builder(&data)), Err(SecurityError::OutsideRange { start: 0, end: 8 })));

    let mut created = base.clone();
    created.object_created_ms = 6;
    assert!(matches!(sign(created, write_builder(&data)), Err(SecurityError::CreatedTime { .. })));

    let mut revoked = base.clone();
    revoked.policy_tag = TAG + 1;
    assert_eq!(sign(revoked, write_builder(&data)), Err(SecurityError::PolicyTag));

    let read_only = capability(SecurityMethod::CapKey, Permissions::READ);
    assert_eq!(sign(read_only, write_builder(&data)), Err(SecurityError::Permissions { missing: Permissions::WRITE }));

    // A piggy-backed get list needs GET_ATTR too.
    let with_get = write_builder(&data).get_attrs(GetAttrs::List { ids: vec![tessera_osd_proto::AttrId::new(1, 0x82)], allocation_len: 64 });
    assert_eq!(sign(base.clone(), with_get), Err(SecurityError::Permissions { missing: Permissions::GET_ATTR }));

    let mut stale = base.clone();
    stale.key_version = 3;
    assert_eq!(sign(stale, write_builder(&data)), Err(SecurityError::UnknownKey(KeySlot::Working(PID, 3))));

    let mut partition_wide = Capability::new(SecurityMethod::CapKey, ObjectType::Partition, Scope::Partition, PID, 0, Permissions::WRITE);
    partition_wide.expires_ms = 0;
    assert_eq!(sign(partition_wide, write_builder(&data)), Ok(()));
}

#[test]
fn a_forged_or_altered_command_is_refused() {
    let checker = checker(SecurityMethod::CapKey);
    let data = [1u8; 8];
    // A capability widened by the client: its key no longer matches.
    let cap = capability(SecurityMethod::CapKey, Permissions::READ);
    let key = capability_key(&working_key(), &cap.encode(), &SYSTEM_ID);
    let mut widened = cap.clone();
    widened.permissions = Permissions::ALL;
    let mut enc = write_builder(&data).encode().unwrap();
    Credential::new(widened, &key).sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
    assert_eq!(check(&checker, &enc, NOW).map(drop), Err(SecurityError::RequestIcv));

    // A tampered CDB: the starting address moved after signing.
    let mut enc = write_builder(&data).encode().unwrap();
    credential(capability(SecurityMethod::CapKey, Permissions::WRITE)).sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
    enc.cdb[tessera_osd_proto::cdb::START + 7] = 8;
    assert_eq!(check(&checker, &enc, NOW).map(drop), Err(SecurityError::RequestIcv));
}

#[test]
fn a_tampered_continuation_is_refused() {
    let checker = checker(SecurityMethod::CapKey);
    let data = [1u8; 8];
    let layout = DataLayout::List(vec![Extent { offset: 0, len: 4 }, Extent { offset: 10, len: 4 }]);
    let b = OsdRequestBuilder::new(Command::Write { addr: addr(), offset: 0, len: 8, layout }).data(&data);
    let mut enc = b.encode().unwrap();
    credential(capability(SecurityMethod::CapKey, Permissions::WRITE)).sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
    assert!(check(&checker, &enc, NOW).is_ok());
    // Move the second extent: still a valid list, no longer the signed one.
    let seg = enc.continuation_mut().unwrap();
    let second_offset = 40 + 8 + 16 + 7;
    seg[second_offset] = 20;
    assert_eq!(check(&checker, &enc, NOW).map(drop), Err(SecurityError::ContinuationIcv));
}

#[test]
fn nonces_are_accepted_once_and_only_in_the_window() {
    let checker = checker(SecurityMethod::CmdRsp);
    let data = [1u8; 8];
    let cred = credential(capability(SecurityMethod::CmdRsp, Permissions::WRITE));
    let mut enc = write_builder(&data).encode().unwrap();
    cred.sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
    assert!(check(&checker, &enc, NOW).is_ok());
    assert_eq!(check(&checker, &enc, NOW + 5).map(drop), Err(SecurityError::Nonce(NonceError::NotUnique)));
    let mut old = write_builder(&data).encode().unwrap();
    cred.sign(&mut old, Nonce::new(NOW - 120_000, 2)).unwrap();
    assert!(matches!(check(&checker, &old, NOW), Err(SecurityError::Nonce(NonceError::OutOfRange { .. }))));
}

#[test]
fn alldata_protects_data_out() {
    let checker = checker(SecurityMethod::AllData);
    let data = vec![3u8; 1000];
    let cred = credential(capability(SecurityMethod::AllData, Permissions::WRITE));
    let mut enc = write_builder(&data).encode().unwrap();
    cred.sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
    let mut out = enc.data_out_vec();
    assert_eq!(out.len(), 1000 + 32);
    out[500] ^= 0xFF;
    let (request, _) = decode_request(&enc.cdb, &out).unwrap();
    let arrived = Arrived { cdb: &enc.cdb, data_out: &out, continuation: None, data_in_len: enc.data_in_len };
    assert_eq!(checker.authorize(&arrived, &requirement(&request), NOW, &facts).map(drop), Err(SecurityError::DataOutIcv));
}

/// Goal: the client accepts the sealed answer, and refuses one altered on the way back.
#[test]
fn sealed_answers_verify_at_the_client() {
    for method in [SecurityMethod::CmdRsp, SecurityMethod::AllData] {
        let checker = checker(method);
        let cred = credential(capability(method, Permissions::READ | Permissions::GET_ATTR));
        let get = GetAttrs::List { ids: vec![tessera_osd_proto::AttrId::new(1, 0x82)], allocation_len: 64 };
        let b = OsdRequestBuilder::new(Command::Read { addr: addr(), offset: 0, len: 64, layout: DataLayout::Contiguous }).get_attrs(get);
        let mut enc = b.encode().unwrap();
        let signed = cred.sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
        let auth = check(&checker, &enc, NOW).unwrap();
        let placement: ReplyPlacement = enc.placement;
        let reply = tessera_osd_proto::Reply {
            data_in: vec![9u8; 64],
            retrieved: vec![tessera_osd_proto::RetrievedAttr { id: tessera_osd_proto::AttrId::new(1, 0x82), value: Some(vec![0; 8]) }],
            ..Default::default()
        };
        let mut data_in = tessera_osd_proto::encode_reply(&placement, reply, enc.data_in_len);
        let sense = checker.seal(&auth, 0, None, &placement, &mut data_in);
        assert!(data_in.len() as u32 <= enc.data_in_len);
        let mut good = data_in.clone();
        assert_eq!(signed.verify(0, sense.as_ref(), &placement, &mut good), Ok(()));
        assert!(tessera_osd_proto::parse_data_in(&placement, &good).unwrap().retrieved.is_some());

        // An altered retrieved attribute (CMDRSP) or data byte (ALLDATA) is caught.
        let mut altered = data_in.clone();
        let at = if method == SecurityMethod::AllData { 3 } else { placement.retrieved.unwrap().offset as usize + 20 };
        altered[at] ^= 1;
        let expected = if method == SecurityMethod::AllData { ResponseError::DataInIcv } else { ResponseError::ResponseIcv };
        assert_eq!(signed.verify(0, sense.as_ref(), &placement, &mut altered), Err(expected));
        // A missing ICV is caught, as is a changed status.
        assert_eq!(signed.verify(0, None, &placement, &mut data_in.clone()), Err(ResponseError::MissingIcv(method)));
        assert_eq!(signed.verify(2, sense.as_ref(), &placement, &mut data_in.clone()), Err(ResponseError::ResponseIcv));
    }
}

/// Goal: a response ICV computed ahead of the answer (while the command is in flight) accepts
/// exactly what the full check accepts. Method: a sealed GOOD WRITE answer verifies with and
/// without preparing; with it prepared, a forged ICV, a changed status, a sense triplet other
/// than none, and an ICV taken from another command are still refused; a command with a
/// retrieved list gets nothing prepared and is checked in full.
#[test]
fn a_prepared_good_answer_accepts_only_what_the_full_check_accepts() {
    use tessera_scsi::{Sense, SenseKey};
    for method in [SecurityMethod::CmdRsp, SecurityMethod::AllData] {
        let checker = checker(method);
        let cred = credential(capability(method, Permissions::WRITE));
        let data = vec![3u8; 512];
        let mut enc = write_builder(&data).encode().unwrap();
        let plain = cred.sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
        let mut prepared = plain.clone();
        prepared.prepare_good_answer(&enc.placement);
        let auth = check(&checker, &enc, NOW).unwrap();
        let placement = enc.placement;
        let mut data_in = Vec::new();
        let sense = checker.seal(&auth, 0, None, &placement, &mut data_in);
        assert_eq!(plain.verify(0, sense.as_ref(), &placement, &mut data_in.clone()), Ok(()));
        assert_eq!(prepared.verify(0, sense.as_ref(), &placement, &mut data_in.clone()), Ok(()));

        let mut forged = sense.clone().unwrap();
        forged.response_icv.as_mut().unwrap()[0] ^= 1;
        assert_eq!(prepared.verify(0, Some(&forged), &placement, &mut Vec::new()), Err(ResponseError::ResponseIcv));
        // The GOOD answer's ICV under another status or another sense triplet.
        assert_eq!(prepared.verify(2, sense.as_ref(), &placement, &mut Vec::new()), Err(ResponseError::ResponseIcv));
        let mut recovered = Sense::new(SenseKey::RecoveredError, 0x5D, 0);
        recovered.response_icv = sense.as_ref().unwrap().response_icv;
        assert_eq!(prepared.verify(2, Some(&recovered), &placement, &mut Vec::new()), Err(ResponseError::ResponseIcv));
        // Another command's GOOD answer (another nonce, so another request ICV).
        let mut enc2 = write_builder(&data).encode().unwrap();
        let _ = cred.sign(&mut enc2, Nonce::new(NOW, 2)).unwrap();
        let auth2 = check(&checker, &enc2, NOW).unwrap();
        let other = checker.seal(&auth2, 0, None, &placement, &mut Vec::new());
        assert_eq!(prepared.verify(0, other.as_ref(), &placement, &mut Vec::new()), Err(ResponseError::ResponseIcv));
    }
    // With a retrieved list the answer is not predictable: nothing prepared, full check.
    let checker = checker(SecurityMethod::CmdRsp);
    let cred = credential(capability(SecurityMethod::CmdRsp, Permissions::READ | Permissions::GET_ATTR));
    let get = GetAttrs::List { ids: vec![tessera_osd_proto::AttrId::new(1, 0x82)], allocation_len: 64 };
    let mut enc = OsdRequestBuilder::new(Command::Read { addr: addr(), offset: 0, len: 64, layout: DataLayout::Contiguous }).get_attrs(get).encode().unwrap();
    let mut signed = cred.sign(&mut enc, Nonce::new(NOW, 3)).unwrap();
    signed.prepare_good_answer(&enc.placement);
    let auth = check(&checker, &enc, NOW).unwrap();
    let reply = tessera_osd_proto::Reply {
        data_in: vec![9u8; 64],
        retrieved: vec![tessera_osd_proto::RetrievedAttr { id: tessera_osd_proto::AttrId::new(1, 0x82), value: Some(vec![0; 8]) }],
        ..Default::default()
    };
    let mut data_in = tessera_osd_proto::encode_reply(&enc.placement, reply, enc.data_in_len);
    let sense = checker.seal(&auth, 0, None, &enc.placement, &mut data_in);
    assert_eq!(signed.verify(0, sense.as_ref(), &enc.placement, &mut data_in.clone()), Ok(()));
    let at = enc.placement.retrieved.unwrap().offset as usize + 20;
    data_in[at] ^= 1;
    assert_eq!(signed.verify(0, sense.as_ref(), &enc.placement, &mut data_in), Err(ResponseError::ResponseIcv));
}

/// Goal: an answer whose first bytes were received into the caller's memory (in several
/// slices) verifies exactly as the whole buffer does: same acceptance, same refusals, the
/// Data-In ICV cut off the rest. Method: one sealed READ with attributes, split at every
/// boundary from none to all of the data, a data byte altered in the lent part, and a split
/// reaching into the retrieved list.
#[test]
fn split_answers_verify_like_whole_ones() {
    for method in [SecurityMethod::CmdRsp, SecurityMethod::AllData] {
        let checker = checker(method);
        let cred = credential(capability(method, Permissions::READ | Permissions::GET_ATTR));
        let get = GetAttrs::List { ids: vec![tessera_osd_proto::AttrId::new(1, 0x82)], allocation_len: 64 };
        let b = OsdRequestBuilder::new(Command::Read { addr: addr(), offset: 0, len: 64, layout: DataLayout::Contiguous }).get_attrs(get);
        let mut enc = b.encode().unwrap();
        let signed = cred.sign(&mut enc, Nonce::new(NOW, 1)).unwrap();
        let auth = check(&checker, &enc, NOW).unwrap();
        let placement: ReplyPlacement = enc.placement;
        let reply = tessera_osd_proto::Reply {
            data_in: (0..64u8).collect(),
            retrieved: vec![tessera_osd_proto::RetrievedAttr { id: tessera_osd_proto::AttrId::new(1, 0x82), value: Some(vec![5; 8]) }],
            ..Default::default()
        };
        let mut data_in = tessera_osd_proto::encode_reply(&placement, reply, enc.data_in_len);
        let sense = checker.seal(&auth, 0, None, &placement, &mut data_in);
        let mut whole = data_in.clone();
        signed.verify(0, sense.as_ref(), &placement, &mut whole).unwrap();
        let retrieved_at = placement.retrieved.unwrap().offset as usize;
        for split in [0, 1, 31, 64, retrieved_at + 5] {
            let (lent, rest) = data_in.split_at(split);
            let pieces: Vec<&[u8]> = lent.chunks(7).collect();
            let mut rest = rest.to_vec();
            assert_eq!(signed.verify_split(0, sense.as_ref(), &placement, &pieces, &mut rest), Ok(()), "{method:?} split at {split}");
            assert_eq!([lent, &rest].concat(), whole, "the ICV is cut off the rest");
            // The last lent byte altered: ALLDATA covers every byte; CMDRSP only the list's.
            let mut bad = lent.to_vec();
            if let Some(b) = bad.last_mut() {
                *b ^= 1;
                let mut rest = data_in[split..].to_vec();
                let got = signed.verify_split(0, sense.as_ref(), &placement, &[&bad], &mut rest);
                let expected = if method == SecurityMethod::AllData { Err(ResponseError::DataInIcv) } else if split > retrieved_at { Err(ResponseError::ResponseIcv) } else { Ok(()) };
                assert_eq!(got, expected, "{method:?} split at {split}, last lent byte altered");
            }
        }
    }
}

#[test]
fn key_commands_are_signed_under_the_parent_key() {
    use crate::key_commands::KeyCommand;
    let master = Key([1; 32]);
    let root = derive(&master, KeySlot::Root, &[0; 7], &[2; 20]);
    let config = CheckerConfig { required: SecurityMethod::CmdRsp, nonce_window: NonceWindow::default() };
    let checker = Checker::new(config, SYSTEM_ID, [(KeySlot::Master, master.clone())], NOW - 1000);
    let command = KeyCommand { slot: KeySlot::Root, key_id: [0; 7], seed: [2; 20] };
    let mut cap = Capability::new(SecurityMethod::CmdRsp, ObjectType::Root, Scope::Root, 0, 0, Permissions::POL_SEC);
    cap.expires_ms = NOW + 1000;
    let cred = Credential::new(cap.clone(), &capability_key(&master, &cap.encode(), &SYSTEM_ID));
    let mut cdb = command.encode();
    cred.sign_bare_cdb(&mut cdb, Nonce::new(NOW, 1));
    let arrived = Arrived { cdb: &cdb, data_out: &[], continuation: None, data_in_len: 0 };
    checker.authorize_key_command(&arrived, &command, NOW).unwrap();
    assert_eq!(checker.derive(&command).unwrap(), root);
    // The same command under a key derived from something else fails.
    let wrong = Credential::new(cap.clone(), &capability_key(&root, &cap.encode(), &SYSTEM_ID));
    let mut cdb = command.encode();
    wrong.sign_bare_cdb(&mut cdb, Nonce::new(NOW, 2));
    let arrived = Arrived { cdb: &cdb, data_out: &[], continuation: None, data_in_len: 0 };
    assert_eq!(checker.authorize_key_command(&arrived, &command, NOW).map(drop), Err(SecurityError::RequestIcv));
    // A partition key needs the root key, which this OSD does not hold yet.
    let partition = KeyCommand { slot: KeySlot::Partition(PID), key_id: [0; 7], seed: [3; 20] };
    assert_eq!(checker.derive(&partition), Err(SecurityError::UnknownKey(KeySlot::Root)));
}

/// Goal: the CPU cost of one CMDRSP command at both ends (sign, check, seal, verify), the part
/// of the per-command budget (5 us) that is not the network. Method: 2000 4 KiB WRITEs through
/// the real signer and checker; prints the mean. Timing is reported, never asserted.
#[test]
fn cmdrsp_cpu_cost_per_command() {
    let n = if std::env::var_os("TESSERA_BENCH").is_some() { 20_000 } else { 200 };
    let checker = checker(SecurityMethod::CapKey);
    let cred = credential(capability(SecurityMethod::CmdRsp, Permissions::WRITE));
    let data = vec![1u8; 4096];
    let placement = ReplyPlacement { data_len_max: 0, retrieved: None };
    let (mut sign, mut auth, mut seal, mut verify) = (0u128, 0u128, 0u128, 0u128);
    for i in 0..n {
        let t = std::time::Instant::now();
        let mut enc = write_builder(&data).encode().unwrap();
        let signed = cred.sign(&mut enc, Nonce::new(NOW, i as u64)).unwrap();
        sign += t.elapsed().as_nanos();
        let t = std::time::Instant::now();
        let a = check(&checker, &enc, NOW).unwrap();
        auth += t.elapsed().as_nanos();
        let t = std::time::Instant::now();
        let mut data_in = Vec::new();
        let sense = checker.seal(&a, 0, None, &placement, &mut data_in);
        seal += t.elapsed().as_nanos();
        let t = std::time::Instant::now();
        signed.verify(0, sense.as_ref(), &placement, &mut data_in).unwrap();
        verify += t.elapsed().as_nanos();
    }
    let us = |ns: u128| ns as f64 / n as f64 / 1000.0;
    println!("CMDRSP per command: sign {:.2} us, check {:.2} us (incl. decode), seal {:.2} us, verify {:.2} us", us(sign), us(auth), us(seal), us(verify));
}

/// Goal: the HMAC-SHA256 throughput of this machine, which bounds ALLDATA. Method: 16 MiB under
/// TESSERA_BENCH=1 (1 MiB otherwise); prints MB/s.
#[test]
fn hmac_throughput() {
    let len = if std::env::var_os("TESSERA_BENCH").is_some() { 16 << 20 } else { 1 << 20 };
    let data = vec![7u8; len];
    let key = crate::icv::CapabilityKey::new(&Key([1; 32]));
    let t = std::time::Instant::now();
    let icv = key.data_in_icv(&data);
    let secs = t.elapsed().as_secs_f64();
    assert_ne!(icv, [0u8; 32]);
    println!("HMAC-SHA256: {:.0} MB/s", len as f64 / secs / 1e6);
}

proptest::proptest! {
    /// Arbitrary CDB + Data-Out bytes through decode and the OSD's checks never panic (the body
    /// of fuzz/fuzz_targets/security_check.rs). The CDB is forced to a valid READ or WRITE
    /// header with a capability-shaped prefix so most inputs get past decoding.
    #[test]
    fn checks_never_panic(mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 236..600), write in proptest::prelude::any::<bool>()) {
        let sa: u16 = if write { 0x8886 } else { 0x8885 };
        bytes[0] = 0x7F;
        bytes[7] = 0xE4;
        bytes[8..10].copy_from_slice(&sa.to_be_bytes());
        bytes[11] &= 0x30;
        bytes[12] = 0;
        bytes[16..24].copy_from_slice(&0x10000u64.to_be_bytes());
        bytes[24..32].copy_from_slice(&0x10001u64.to_be_bytes());
        let len = (bytes[39] as u64) % 64;
        bytes[32..40].copy_from_slice(&len.to_be_bytes());
        bytes[48..52].copy_from_slice(&[0; 4]);
        bytes[80] = 2;
        bytes[81] = 0x20;
        crate::fuzzing::check_bytes(&bytes);
    }
}

/// Goal: a cached capability key never outlives the key it was derived from. Method: the same
/// command (cache hit on its second check) after its working key was replaced, then after its
/// partition's keys were forgotten, each refused; re-signed under the new key, it passes.
#[test]
fn cached_capability_keys_die_with_their_working_key() {
    let data = [3u8; 16];
    let checker = checker(SecurityMethod::CmdRsp);
    let cap = capability(SecurityMethod::CmdRsp, Permissions::WRITE);
    let cred = credential(cap.clone());
    for n in 1..=2 {
        let mut enc = write_builder(&data).encode().unwrap();
        cred.sign(&mut enc, Nonce::new(NOW, n)).unwrap();
        assert!(check(&checker, &enc, NOW).is_ok(), "check {n}, the second from the cache");
    }
    let rotated = derive(&working_key(), KeySlot::Working(PID, 0), &[1; 7], &[5; 20]);
    checker.set_key(KeySlot::Working(PID, 0), rotated.clone());
    let mut stale = write_builder(&data).encode().unwrap();
    cred.sign(&mut stale, Nonce::new(NOW, 3)).unwrap();
    assert_eq!(check(&checker, &stale, NOW).unwrap_err(), SecurityError::RequestIcv);
    let fresh = Credential::new(cap.clone(), &capability_key(&rotated, &cap.encode(), &SYSTEM_ID));
    let mut enc = write_builder(&data).encode().unwrap();
    fresh.sign(&mut enc, Nonce::new(NOW, 4)).unwrap();
    assert!(check(&checker, &enc, NOW).is_ok());
    checker.forget_partition(PID);
    let mut gone = write_builder(&data).encode().unwrap();
    fresh.sign(&mut gone, Nonce::new(NOW, 5)).unwrap();
    assert_eq!(check(&checker, &gone, NOW).unwrap_err(), SecurityError::UnknownKey(KeySlot::Working(PID, 0)));
}
