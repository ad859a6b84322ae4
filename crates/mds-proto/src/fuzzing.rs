//! Fuzz entry point: a plain function over arbitrary bytes, so the `cargo fuzz` target
//! (fuzz/fuzz_targets/mds_frame.rs) and the proptest below run the same code. It must return
//! for every input; a panic is a bug.

use crate::frame::{self, encode_frame};

/// Decodes `data` as one frame; when it decodes, re-encoding must give back the same bytes
/// (the encoding is canonical). Returns whether it decoded.
pub fn decode_frame(data: &[u8]) -> bool {
    let Ok(frame) = frame::decode_frame(data) else { return false };
    assert_eq!(encode_frame(&frame), data, "a decoded frame must re-encode to the same bytes");
    true
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        /// Goal: no input panics the decoder. Method: random bytes, and random bytes behind a
        /// plausible header so the message decoders are reached.
        #[test]
        fn never_panics(data in prop::collection::vec(any::<u8>(), 0..300), kind in 1u8..=2, op in 0u8..40) {
            super::decode_frame(&data);
            let mut framed = Vec::new();
            framed.extend_from_slice(&((data.len() + 10) as u32).to_be_bytes());
            framed.extend_from_slice(&7u64.to_be_bytes());
            framed.push(kind);
            framed.push(op);
            framed.extend_from_slice(&data);
            super::decode_frame(&framed);
        }
    }
}
