//! Fuzz target: `decode_request` on arbitrary CDB + Data-Out bytes (the first 236 bytes are the
//! CDB). A request that decodes must re-encode to itself; nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_osd_proto::fuzzing::decode_request_bytes(data);
});
