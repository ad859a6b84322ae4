//! Fuzz target: the CDB continuation segment decoder (SGL, strided, nested, query criteria).
//! The first 18 bytes choose the service action and the CDB span the layouts are checked against.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tessera_osd_proto::fuzzing::continuation_bytes(data);
});
