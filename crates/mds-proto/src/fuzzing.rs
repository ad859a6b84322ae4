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
            // A request's caller (uid, gid, no supplementary group) comes before its opcode.
            let caller: &[u8] = if kind == 1 { &[0, 0, 3, 232, 0, 0, 0, 100, 0] } else { &[] };
            framed.extend_from_slice(&((data.len() + 10 + caller.len()) as u32).to_be_bytes());
            framed.extend_from_slice(&7u64.to_be_bytes());
            framed.push(kind);
            framed.extend_from_slice(caller);
            framed.push(op);
            framed.extend_from_slice(&data);
            super::decode_frame(&framed);
        }
    }
}
