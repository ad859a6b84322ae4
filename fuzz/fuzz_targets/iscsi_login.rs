//! Fuzz target: `tessera_iscsi::fuzzing::login` (the same body `cargo test -p tessera-iscsi`
//! drives with proptest bytes).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tessera_iscsi::fuzzing::login(data);
});
