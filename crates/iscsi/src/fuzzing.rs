//! Fuzz bodies: plain functions the cargo-fuzz targets in `fuzz/` call, and that the unit tests
//! drive with proptest bytes, so both exercise the same code on stable Rust.

use crate::bhs::BHS_LEN;
use crate::login::{InitiatorNegotiator, Offer, SessionType, TargetNegotiator};
use crate::pdu::Pdu;
use crate::stream::{Digests, PduReader};
use crate::text::parse_text;

/// Frames and decodes PDUs from arbitrary bytes, with and without digests; every decoded header
/// must re-encode to a header that decodes to the same value.
pub fn pdu(data: &[u8]) {
    for digests in [Digests::default(), Digests { header: true, data: true }] {
        let mut r = PduReader::new(data, 1 << 16);
        r.digests = digests;
        for _ in 0..16 {
            let Ok(inc) = r.read_header() else { break };
            if let Ok(p) = &inc.pdu {
                let mut enc = Vec::new();
                p.encode(inc.framing.data_segment_len, &mut enc);
                let mut bhs = [0u8; BHS_LEN];
                bhs.copy_from_slice(&enc[..BHS_LEN]);
                let again = Pdu::decode(&bhs, &enc[BHS_LEN..]);
                assert_eq!(again.as_ref(), Ok(p), "re-encoded PDU decodes differently");
            }
            if r.discard_data(inc.data_segment_len()).is_err() {
                break;
            }
        }
    }
}

/// Parses text key=value data.
pub fn text(data: &[u8]) {
    let _ = parse_text(data);
}

/// Runs a target negotiator, then an initiator negotiator, over text parsed from arbitrary
/// bytes; neither may panic, and the negotiated FirstBurstLength never exceeds MaxBurstLength.
pub fn login(data: &[u8]) {
    let Ok(pairs) = parse_text(data) else { return };
    let mut t = TargetNegotiator::new(Offer::default());
    if let Ok(answer) = t.respond(&pairs) {
        assert!(t.params.first_burst_len <= t.params.max_burst_len);
        let _ = t.declarations();
        let mut i = InitiatorNegotiator::new(Offer::default(), "iqn.x", "iqn.y", SessionType::Normal);
        let _ = i.apply(&answer);
        let _ = i.apply(&pairs);
        assert!(i.params.first_burst_len <= i.params.max_burst_len);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn pdu_body_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            super::pdu(&bytes);
        }

        #[test]
        fn text_body_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            super::text(&bytes);
        }

        #[test]
        fn login_body_never_panics(s in "([A-Za-z]{1,20}=[A-Za-z0-9,]{0,12}\x00){0,12}") {
            super::login(s.as_bytes());
        }
    }
}
