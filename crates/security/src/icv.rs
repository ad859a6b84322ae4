//! Integrity check values, all HMAC-SHA256 (r05 §4.11.3, with SHA-256 where r05 has SHA-1):
//!
//! | value | key | over |
//! |---|---|---|
//! | capability key | the working (or parent) key | capability (104) \|\| OSD system id (20) |
//! | request ICV (CDB bytes 184..215) | capability key | the 236-byte CDB with the request ICV zeroed |
//! | continuation ICV (segment bytes 8..39) | capability key | the continuation segment with its ICV zeroed |
//! | response ICV (sense descriptor 0x07) | capability key | "rsp" \|\| request ICV \|\| status \|\| sense key, ASC, ASCQ \|\| retrieved attributes |
//! | Data-Out ICV (at the CDB's Data-Out ICV offset) | capability key | "out" \|\| Data-Out bytes before the offset |
//! | Data-In ICV (at the CDB's Data-In ICV offset) | capability key | "in" \|\| Data-In bytes before the offset |
//!
//! The response ICV binds the answer to the request through the request ICV, which covers the
//! nonce. The labels keep a value computed for one purpose from being valid for another.
//! [`CapabilityKey`] keeps the keyed HMAC state (the key's inner and outer pads already hashed)
//! so each value costs only the blocks of its own input. HMAC-SHA256 is `ring`'s, and only this
//! module calls it: its assembly SHA-256 (SHA extensions where the CPU has them, else AVX)
//! bounds the cost of every secured command. OpenSSL's and RustCrypto's were measured against
//! it on a CPU without SHA extensions and not kept (tools/hmac-compare; docs/benchmarks.md).

use ring::hmac;
use tessera_osd_proto::cdb::{CDB_LEN, REQUEST_ICV, REQUEST_ICV_LEN};
use tessera_osd_proto::continuation::{HEADER_LEN as CONTINUATION_HEADER_LEN, ICV_LEN};

use crate::keys::{Key, KEY_LEN};

pub const ICV_SIZE: usize = 32;
const _: () = assert!(ICV_SIZE == REQUEST_ICV_LEN && ICV_SIZE == ICV_LEN && ICV_SIZE == KEY_LEN);
/// Where the ICV sits in the continuation segment header.
pub const CONTINUATION_ICV: usize = 8;
const _: () = assert!(CONTINUATION_ICV + ICV_LEN == CONTINUATION_HEADER_LEN);

const RESPONSE_LABEL: &[u8] = b"rsp";
const DATA_OUT_LABEL: &[u8] = b"out";
const DATA_IN_LABEL: &[u8] = b"in";

/// HMAC-SHA256 of the concatenation of `parts` under `key`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    sign(&hmac::Key::new(hmac::HMAC_SHA256, key), parts)
}

fn sign(key: &hmac::Key, parts: &[&[u8]]) -> [u8; 32] {
    let mut context = hmac::Context::with_key(key);
    for p in parts {
        context.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(context.sign().as_ref());
    out
}

/// Constant-time equality, so a forger learns nothing from how long a refusal took.
pub fn icv_eq(a: &[u8; ICV_SIZE], b: &[u8]) -> bool {
    b.len() == ICV_SIZE && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The capability key of `capability` on the OSD with `system_id`, under `key` (the working
/// key, or the parent key for SET KEY / SET MASTER KEY).
pub fn capability_key(key: &Key, capability: &[u8], system_id: &[u8]) -> Key {
    KeyingKey::new(key).capability_key(capability, system_id)
}

/// A key that capability keys are derived under, with its HMAC pads hashed once: the security
/// manager derives one capability key per object of every file it creates or opens, and the
/// pads are two of the six SHA-256 blocks each would otherwise cost.
#[derive(Clone)]
pub struct KeyingKey {
    key: hmac::Key,
}

impl KeyingKey {
    pub fn new(key: &Key) -> Self {
        KeyingKey { key: hmac::Key::new(hmac::HMAC_SHA256, key.bytes()) }
    }

    /// See [`capability_key`].
    pub fn capability_key(&self, capability: &[u8], system_id: &[u8]) -> Key {
        Key(sign(&self.key, &[capability, system_id]))
    }
}

/// A capability key ready to compute integrity check values.
#[derive(Clone)]
pub struct CapabilityKey {
    key: hmac::Key,
}

impl std::fmt::Debug for CapabilityKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CapabilityKey(..)")
    }
}

impl CapabilityKey {
    pub fn new(key: &Key) -> Self {
        CapabilityKey { key: hmac::Key::new(hmac::HMAC_SHA256, key.bytes()) }
    }

    fn compute(&self, parts: &[&[u8]]) -> [u8; ICV_SIZE] {
        sign(&self.key, parts)
    }

    /// Over the CDB with its request ICV field taken as zeros (whatever it holds).
    pub fn request_icv(&self, cdb: &[u8; CDB_LEN]) -> [u8; ICV_SIZE] {
        // One contiguous input: each piece handed to the hash costs a call into its block
        // function (and a partial-block copy), which shows at a few blocks per command.
        let mut zeroed = *cdb;
        zeroed[REQUEST_ICV..REQUEST_ICV + REQUEST_ICV_LEN].fill(0);
        self.compute(&[&zeroed])
    }

    /// Over a continuation segment with its ICV field taken as zeros. `segment` is at least
    /// the 40-byte header (the decoder checked that before anyone asks).
    pub fn continuation_icv(&self, segment: &[u8]) -> [u8; ICV_SIZE] {
        const ZEROS: [u8; ICV_LEN] = [0; ICV_LEN];
        let head = &segment[..CONTINUATION_ICV.min(segment.len())];
        let tail = segment.get(CONTINUATION_HEADER_LEN..).unwrap_or(&[]);
        self.compute(&[head, &ZEROS, tail])
    }

    /// The response ICV: see the module table. `sense` is (key, ASC, ASCQ), zeros for none.
    pub fn response_icv(&self, request_icv: &[u8; ICV_SIZE], status: u8, sense: [u8; 3], retrieved: &[u8]) -> [u8; ICV_SIZE] {
        const LABEL_LEN: usize = RESPONSE_LABEL.len();
        let mut head = [0u8; LABEL_LEN + ICV_SIZE + 4];
        head[..LABEL_LEN].copy_from_slice(RESPONSE_LABEL);
        head[LABEL_LEN..LABEL_LEN + ICV_SIZE].copy_from_slice(request_icv);
        head[LABEL_LEN + ICV_SIZE] = status;
        head[LABEL_LEN + ICV_SIZE + 1..].copy_from_slice(&sense);
        if retrieved.is_empty() {
            self.compute(&[&head])
        } else {
            self.compute(&[&head, retrieved])
        }
    }

    /// Data-Out ICV over the gather list `pieces` (the bytes before the ICV's offset).
    pub fn data_out_icv(&self, pieces: &[&[u8]]) -> [u8; ICV_SIZE] {
        self.labelled(DATA_OUT_LABEL, pieces)
    }

    /// Data-In ICV over `bytes` (the Data-In before the ICV's offset).
    pub fn data_in_icv(&self, bytes: &[u8]) -> [u8; ICV_SIZE] {
        self.compute(&[DATA_IN_LABEL, bytes])
    }

    /// [`CapabilityKey::data_in_icv`] over `pieces` end to end (Data-In received in several
    /// places of the caller's memory).
    pub fn data_in_icv_pieces(&self, pieces: &[&[u8]]) -> [u8; ICV_SIZE] {
        self.labelled(DATA_IN_LABEL, pieces)
    }

    /// Over `label` and then `pieces`, however many (no list of slices to build).
    fn labelled(&self, label: &[u8], pieces: &[&[u8]]) -> [u8; ICV_SIZE] {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(label);
        for p in pieces {
            context.update(p);
        }
        let mut out = [0u8; ICV_SIZE];
        out.copy_from_slice(context.sign().as_ref());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(mac: &[u8; 32]) -> String {
        mac.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Goal: the HMAC is the standard one, for short keys, keys longer than a block, and data
    /// longer than a block. Method: RFC 4231 test cases 1-4, 6 and 7 (5 truncates its output).
    #[test]
    fn hmac_matches_rfc_4231() {
        let key_25: Vec<u8> = (1..=25).collect();
        let cases: [(&[u8], &[u8], &str); 6] = [
            (&[0x0b; 20], b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (b"Jefe", b"what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            (&[0xaa; 20], &[0xdd; 50], "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
            (&key_25, &[0xcd; 50], "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
            (&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First", "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
            (
                &[0xaa; 131],
                b"This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.",
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
            ),
        ];
        for (n, (key, data, expected)) in cases.iter().enumerate() {
            assert_eq!(hex(&hmac_sha256(key, &[data])), *expected, "RFC 4231 case {}", if n < 4 { n + 1 } else { n + 2 });
            // The same split anywhere into parts.
            let (a, b) = data.split_at(data.len() / 3);
            assert_eq!(hex(&hmac_sha256(key, &[a, &[], b])), *expected);
        }
    }

    /// Goal: a capability key's kept state (the pads hashed once) gives the plain HMAC of the
    /// label and input under that key. Method: each value against `hmac_sha256` over what the
    /// module table says it covers.
    #[test]
    fn keyed_values_are_the_plain_hmac_of_their_input() {
        let k = Key([0x3c; 32]);
        let key = CapabilityKey::new(&k);
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        assert_eq!(key.data_in_icv(&data), hmac_sha256(k.bytes(), &[DATA_IN_LABEL, &data]));
        assert_eq!(key.data_out_icv(&[&data[..100], &data[100..]]), hmac_sha256(k.bytes(), &[DATA_OUT_LABEL, &data]));
        let mut cdb = [0u8; CDB_LEN];
        cdb.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        let mut zeroed = cdb;
        zeroed[REQUEST_ICV..REQUEST_ICV + REQUEST_ICV_LEN].fill(0);
        assert_eq!(key.request_icv(&cdb), hmac_sha256(k.bytes(), &[&zeroed]));
        let request_icv = [9u8; ICV_SIZE];
        let expected = hmac_sha256(k.bytes(), &[RESPONSE_LABEL, &request_icv, &[2, 5, 0x24, 0], &data[..20]]);
        assert_eq!(key.response_icv(&request_icv, 2, [5, 0x24, 0], &data[..20]), expected);
    }

    /// Goal: the request ICV ignores what the ICV field holds and nothing else. Method: change
    /// the field, then another byte.
    #[test]
    fn request_icv_covers_all_but_its_own_field() {
        let key = CapabilityKey::new(&Key([5; 32]));
        let mut cdb = [0u8; CDB_LEN];
        cdb[0] = 0x7F;
        let icv = key.request_icv(&cdb);
        cdb[REQUEST_ICV..REQUEST_ICV + 32].copy_from_slice(&icv);
        assert_eq!(key.request_icv(&cdb), icv);
        cdb[40] ^= 1;
        assert_ne!(key.request_icv(&cdb), icv);
        cdb[40] ^= 1;
        cdb[235] ^= 1;
        assert_ne!(key.request_icv(&cdb), icv);
    }

    #[test]
    fn continuation_icv_ignores_its_field() {
        let key = CapabilityKey::new(&Key([5; 32]));
        let mut seg = vec![0u8; 64];
        seg[0] = 1;
        let icv = key.continuation_icv(&seg);
        seg[8..40].copy_from_slice(&icv);
        assert_eq!(key.continuation_icv(&seg), icv);
        seg[50] = 1;
        assert_ne!(key.continuation_icv(&seg), icv);
    }

    /// Goal: the labels separate the three Tessera-defined values even on equal input.
    #[test]
    fn values_are_domain_separated() {
        let key = CapabilityKey::new(&Key([5; 32]));
        let data = [1u8; 40];
        assert_ne!(key.data_out_icv(&[&data]), key.data_in_icv(&data));
        assert_eq!(key.data_out_icv(&[&data[..10], &data[10..]]), key.data_out_icv(&[&data]));
        assert!(icv_eq(&key.data_in_icv(&data), &key.data_in_icv(&data)));
        assert!(!icv_eq(&key.data_in_icv(&data), &[0u8; 32]));
        assert!(!icv_eq(&key.data_in_icv(&data), &[0u8; 31]));
    }

    #[test]
    fn capability_key_binds_system_id() {
        let k = Key([9; 32]);
        assert_ne!(capability_key(&k, &[1; 104], &[0; 20]), capability_key(&k, &[1; 104], &[1; 20]));
    }
}
