//! Fuzz target: LIST / QUERY / READ MAP result decoders (what an initiator parses from a target).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_osd_proto::fuzzing::list_results(data);
});
