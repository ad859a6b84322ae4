//! Fuzz entry points (fuzz/fuzz_targets/security_*.rs), plain functions so proptest runs the
//! same code under `cargo test`. Each must return for every input; a panic is a bug.

use std::sync::OnceLock;

use tessera_osd_proto::{continuation_segment, decode_request};

use crate::capability::{Capability, ObjectType, SecurityMethod};
use crate::check::{Arrived, Checker, CheckerConfig, ObjectFacts};
use crate::key_commands::KeyCommand;
use crate::keys::{Key, KeySlot};
use crate::policy::requirement;

/// Capability decoding: whatever decodes must re-encode to bytes that decode to the same value.
pub fn capability_bytes(data: &[u8]) {
    if let Ok(c) = Capability::decode(data) {
        assert_eq!(Capability::decode(&c.encode()), Ok(c.clone()), "a decoded capability must round-trip");
    }
}

/// SET KEY / SET MASTER KEY decoding: whatever decodes must round-trip through `encode`.
pub fn key_command_bytes(data: &[u8]) {
    if let Ok(c) = KeyCommand::decode(data) {
        assert_eq!(KeyCommand::decode(&c.encode()), Ok(c), "a decoded key command must round-trip");
    }
}

/// The OSD's checks on arbitrary bytes: the first 236 bytes are the CDB, the rest Data-Out. A
/// command that decodes goes through `Checker::authorize` (every capability field, ICV offsets,
/// the Data-Out ICV split, the nonce list) and, if let through, `seal`; none may panic. Keys
/// exist for the root and partition 0x10000 so the integrity stages are reached.
pub fn check_bytes(data: &[u8]) {
    static CHECKER: OnceLock<Checker> = OnceLock::new();
    let checker = CHECKER.get_or_init(|| {
        let config = CheckerConfig { required: SecurityMethod::CapKey, nonce_window: Default::default() };
        let keys = [(KeySlot::Root, Key([1; 32])), (KeySlot::Working(0x10000, 0), Key([2; 32]))];
        Checker::new(config, [3; 20], keys, 0)
    });
    let split = data.len().min(tessera_osd_proto::cdb::CDB_LEN);
    let (cdb, data_out) = data.split_at(split);
    let Ok(cdb_array) = <&[u8; tessera_osd_proto::cdb::CDB_LEN]>::try_from(cdb) else { return };
    let Ok((request, placement)) = decode_request(cdb, data_out) else { return };
    let data_in_len = u32::try_from(placement.data_in_len()).unwrap_or(u32::MAX).min(1 << 16);
    let arrived = Arrived { cdb: cdb_array, data_out, continuation: continuation_segment(request.service_action, cdb, data_out), data_in_len };
    let facts = |_| Ok(Some(ObjectFacts { object_type: ObjectType::User, created_ms: 1, policy_tag: 7 }));
    if let Ok(auth) = checker.authorize(&arrived, &requirement(&request), 1_000, &facts) {
        let mut data_in = Vec::new();
        let _ = checker.seal(&auth, 0, None, &placement, &mut data_in);
        assert!(data_in.len() <= data_in_len as usize, "sealing never grows Data-In past the expected length");
    }
}
