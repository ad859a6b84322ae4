//! Fuzz bodies: plain functions the cargo-fuzz targets in `fuzz/` call, and that the unit tests
//! drive with proptest bytes, so both exercise the same code on stable Rust.

use crate::bhs::BHS_LEN;
use crate::login::auth::{ChapCredential, ChapSecrets, Challenge, InitiatorAuth, TargetAuth};
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
/// The same text drives both sides' security stage (AuthMethod and the CHAP keys), with and
/// without secrets, one request after another; nothing may panic and a target that requires CHAP
/// never lets an initiator leave the stage without a CHAP response.
pub fn login(data: &[u8]) {
    let Ok(pairs) = parse_text(data) else { return };
    security_stage(&pairs);
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

fn security_stage(pairs: &[crate::text::KeyValue]) {
    let cred = |user: &str, secret: &[u8]| ChapCredential::new(user, secret).ok();
    let (Some(i), Some(t)) = (cred("alice", b"initiator-secret"), cred("osd0", b"target-secret!")) else { return };
    let mutual = ChapSecrets::mutual(i.clone(), t).ok();
    for secrets in [None, Some(ChapSecrets::one_way(i)), mutual] {
        let required = secrets.is_some();
        let mut target = TargetAuth::new(secrets.clone(), Challenge::from_random([7; 17]));
        let mut initiator = InitiatorAuth::new(secrets, Challenge::from_random([9; 17]));
        // Each pair alone, then all together: a request sequence the fuzzer controls.
        let mut saw_response = false;
        for request in pairs.chunks(1).chain(std::iter::once(pairs)) {
            saw_response |= request.iter().any(|(k, _)| k == "CHAP_R");
            if target.respond(request).is_err() {
                break;
            }
            if required && target.may_transit(true) == Ok(true) {
                assert!(saw_response, "authenticated without a CHAP response");
            }
            let _ = initiator.on_answer(request);
            let _ = initiator.check_transit();
        }
        let _ = target.check_operational(pairs);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// Found by the fuzzer: an answer refused after MaxBurstLength was recorded left
    /// FirstBurstLength above it.
    #[test]
    fn refused_answer_keeps_first_burst_within_max_burst() {
        super::login(b"SessionType=Discovery\0MaxBurstLength=0xeeA\0MaxBurstLength=\0");
    }

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

        #[test]
        fn login_body_with_chap_keys_never_panics(
            pairs in proptest::collection::vec(
                ("AuthMethod|CHAP_A|CHAP_I|CHAP_C|CHAP_N|CHAP_R", "CHAP|None|CHAP,None|5|7,5|[0-9]{1,4}|0x[0-9a-f]{0,40}|0b[A-Za-z0-9+/]{0,30}|alice|[ -~&&[^=]]{0,20}"),
                0..10,
            )
        ) {
            let mut text = Vec::new();
            crate::text::encode_text(&pairs, &mut text);
            super::login(&text);
        }
    }
}
