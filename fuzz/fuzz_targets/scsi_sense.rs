//! Sense data as an initiator receives it from a target: any bytes must decode or be refused,
//! never panic, and a decoded sense must encode back to something that decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sense) = tessera_scsi::Sense::decode(data) {
        let again = tessera_scsi::Sense::decode(&sense.encode()).expect("re-encoded sense decodes");
        assert_eq!(again, sense);
    }
});
