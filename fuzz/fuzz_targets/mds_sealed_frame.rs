//! Fuzz target: bytes read off a sealed MDS connection must be refused or opened, never
//! panic; forged bytes must never open; and what one end seals the other opens whole. The body
//! is a plain function so `cargo test -p tessera-mds-proto` runs it too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert!(!tessera_mds_proto::fuzzing::sealed_frame(data), "forged bytes opened without the key");
});
