//! Fuzz target: every attribute-list decoder (get 0x1, set / retrieved 0x9, multi-object 0xE).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_osd_proto::fuzzing::attr_lists(data);
});
