//! Fuzz target: SET KEY / SET MASTER KEY CDB decoding; what decodes must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_security::fuzzing::key_command_bytes(data);
});
