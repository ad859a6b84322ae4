//! Fuzz target: `tessera_iscsi::fuzzing::login`, the operational negotiators and the security
//! stage (AuthMethod and the CHAP keys) over the same text (the same body `cargo test -p
//! tessera-iscsi` drives with proptest bytes). `fuzz/dict/iscsi_login.dict` holds the keys.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tessera_iscsi::fuzzing::login(data);
});
