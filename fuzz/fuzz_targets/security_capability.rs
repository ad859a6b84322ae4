//! Fuzz target: capability decoding on arbitrary bytes; what decodes must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_security::fuzzing::capability_bytes(data);
});
