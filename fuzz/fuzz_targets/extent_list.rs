//! Fuzz target: the extent-list text format of `tessera get --pieces` must parse or fail with a
//! line number, never panic, and a parsed list must read back unchanged from its own text. The
//! body is a plain function so `cargo test -p tessera-client` runs it too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_client::extent_list::fuzz_parse(data);
});
