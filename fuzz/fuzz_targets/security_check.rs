//! Fuzz target: the OSD's capability checks on arbitrary CDB + Data-Out bytes (the first 236
//! bytes are the CDB); nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_security::fuzzing::check_bytes(data);
});
