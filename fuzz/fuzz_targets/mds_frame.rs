//! Fuzz target: one MDS frame (header, request or reply) must decode or fail, never panic, and
//! a decoded frame must re-encode to the same bytes. The body is a plain function so
//! `cargo test -p tessera-mds-proto` runs it too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_mds_proto::fuzzing::decode_frame(data);
});
