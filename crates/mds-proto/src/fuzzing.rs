//! Fuzz entry points: plain functions over arbitrary bytes, so the `cargo fuzz` targets
//! (fuzz/fuzz_targets/mds_frame.rs, mds_sealed_frame.rs) and the proptests below run the same
//! code. They must return for every input; a panic is a bug.

use crate::frame::{self, encode_frame};

/// Decodes `data` as one frame; when it decodes, re-encoding must give back the same bytes
/// (the encoding is canonical). Returns whether it decoded.
pub fn decode_frame(data: &[u8]) -> bool {
    let Ok(frame) = frame::decode_frame(data) else { return false };
    assert_eq!(encode_frame(&frame), data, "a decoded frame must re-encode to the same bytes");
    true
}

/// Reads `data` as a frame off a sealed connection (`seal.rs`) under a fixed key: the header's
/// length is checked and the body opened, or refused, never a panic. Then seals `data` framed
/// as a plain body and opens it at the other end: the same body must come back. Returns
/// whether `data` itself opened (which forged bytes must not).
pub fn sealed_frame(data: &[u8]) -> bool {
    use crate::frame::{BODY_LEN_MIN, FRAME_HEADER_LEN};
    use crate::limits::FRAME_LEN_MAX;
    use crate::seal::{sealed_body_len, End, Seal, SessionKey};
    let key = SessionKey([0x5a; 32]);
    let opened = data.get(..FRAME_HEADER_LEN).is_some_and(|header| {
        let Ok(len) = sealed_body_len(header.try_into().unwrap()) else { return false };
        let Some(body) = data.get(FRAME_HEADER_LEN..FRAME_HEADER_LEN + len) else { return false };
        let mut body = body.to_vec();
        Seal::new(&key, End::Server).open_body(&mut body).is_ok()
    });
    if (BODY_LEN_MIN..=FRAME_LEN_MAX - FRAME_HEADER_LEN).contains(&data.len()) {
        let mut frame = (data.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(data);
        Seal::new(&key, End::Client).seal_frame(&mut frame);
        let len = sealed_body_len(frame[..FRAME_HEADER_LEN].try_into().unwrap()).expect("a sealed frame announces a sealed length");
        let mut body = frame[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len].to_vec();
        Seal::new(&key, End::Server).open_body(&mut body).expect("what one end seals the other opens");
        assert_eq!(body, data, "a sealed body opens to itself");
    }
    opened
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

        /// Goal: no bytes panic the sealed-frame reader, none opens without the key, and
        /// whatever one end seals the other opens whole.
        #[test]
        fn sealed_frames_never_panic_and_forgeries_never_open(data in prop::collection::vec(any::<u8>(), 0..300), len in 0u32..400) {
            prop_assert!(!super::sealed_frame(&data));
            let mut framed = len.to_be_bytes().to_vec();
            framed.extend_from_slice(&data);
            prop_assert!(!super::sealed_frame(&framed));
        }
    }
}
