//! The initiator side: a [`Credential`] (capability + capability key, as the security manager
//! hands them out) signs an encoded command ([`Credential::sign`]) and checks the answer
//! ([`Signed::verify`]).
//!
//! Signing order: capability and nonce into the CDB; the continuation ICV; under ALLDATA the
//! Data-Out ICV (appended at the first encodable offset after the Data-Out) and the Data-In ICV
//! offset (after the largest Data-In the command can return, which grows the expected Data-In
//! length by 32); last the request ICV, which covers all of the above.

use tessera_osd_proto::cdb::{self, CDB_LEN};
use tessera_osd_proto::offset::{encode_offset_at_least, OFFSET_UNUSED};
use tessera_osd_proto::{EncodedRequest, ReplyPlacement};
use tessera_scsi::Sense;
use thiserror::Error;

use crate::capability::{Capability, SecurityMethod, CAPABILITY_LEN};
use crate::check::retrieved_area;
use crate::icv::{icv_eq, CapabilityKey, ICV_SIZE};
use crate::keys::Key;
use crate::nonce::Nonce;

/// A capability and its key: what a client needs to send commands the capability allows.
#[derive(Clone, Debug)]
pub struct Credential {
    capability: Capability,
    bytes: [u8; CAPABILITY_LEN],
    key: CapabilityKey,
}

impl Credential {
    pub fn new(capability: Capability, key: &Key) -> Self {
        let bytes = capability.encode();
        Credential { capability, bytes, key: CapabilityKey::new(key) }
    }

    pub fn capability(&self) -> &Capability {
        &self.capability
    }

    pub fn method(&self) -> SecurityMethod {
        self.capability.method
    }

    /// Signs `encoded` in place. `nonce` is used under CMDRSP and ALLDATA (ignored below).
    pub fn sign(&self, encoded: &mut EncodedRequest<'_>, nonce: Nonce) -> Result<Signed, SignError> {
        let method = self.capability.method;
        self.put_capability(&mut encoded.cdb, method, nonce);
        if let Some(segment) = encoded.continuation_mut() {
            let icv = self.key.continuation_icv(segment);
            segment[crate::icv::CONTINUATION_ICV..crate::icv::CONTINUATION_ICV + ICV_SIZE].copy_from_slice(&icv);
        }
        let mut data_in_icv_offset = None;
        if method == SecurityMethod::AllData {
            let data_out_len = encoded.data_out_len();
            let out_raw = if data_out_len == 0 {
                OFFSET_UNUSED
            } else {
                let (raw, offset) = encode_offset_at_least(data_out_len.div_ceil(8) * 8).ok_or(SignError::TooLarge)?;
                let mut tail = vec![0u8; (offset - data_out_len) as usize];
                let icv = {
                    let mut pieces = encoded.data_out();
                    pieces.push(&tail);
                    self.key.data_out_icv(&pieces)
                };
                tail.extend_from_slice(&icv);
                encoded.push_data_out(tail);
                raw
            };
            let in_raw = if encoded.data_in_len == 0 {
                OFFSET_UNUSED
            } else {
                let (raw, offset) = encode_offset_at_least((encoded.data_in_len as u64).div_ceil(8) * 8).ok_or(SignError::TooLarge)?;
                encoded.data_in_len = u32::try_from(offset + ICV_SIZE as u64).map_err(|_| SignError::TooLarge)?;
                data_in_icv_offset = Some(offset);
                raw
            };
            encoded.cdb[cdb::DATA_OUT_ICV_OFFSET..cdb::DATA_OUT_ICV_OFFSET + 4].copy_from_slice(&out_raw.to_be_bytes());
            encoded.cdb[cdb::DATA_IN_ICV_OFFSET..cdb::DATA_IN_ICV_OFFSET + 4].copy_from_slice(&in_raw.to_be_bytes());
        }
        let request_icv = self.sign_cdb(&mut encoded.cdb);
        Ok(Signed { method, key: self.key.clone(), request_icv, data_in_icv_offset, good_answer_icv: None })
    }

    /// Signs a bare CDB (SET KEY, SET MASTER KEY: no Data-Out, no Data-In).
    pub fn sign_bare_cdb(&self, cdb_bytes: &mut [u8; CDB_LEN], nonce: Nonce) -> Signed {
        let method = self.capability.method;
        self.put_capability(cdb_bytes, method, nonce);
        cdb_bytes[cdb::DATA_OUT_ICV_OFFSET..cdb::DATA_OUT_ICV_OFFSET + 4].copy_from_slice(&OFFSET_UNUSED.to_be_bytes());
        cdb_bytes[cdb::DATA_IN_ICV_OFFSET..cdb::DATA_IN_ICV_OFFSET + 4].copy_from_slice(&OFFSET_UNUSED.to_be_bytes());
        let request_icv = self.sign_cdb(cdb_bytes);
        Signed { method, key: self.key.clone(), request_icv, data_in_icv_offset: None, good_answer_icv: None }
    }

    fn put_capability(&self, cdb_bytes: &mut [u8; CDB_LEN], method: SecurityMethod, nonce: Nonce) {
        cdb_bytes[cdb::CAPABILITY..cdb::CAPABILITY + CAPABILITY_LEN].copy_from_slice(&self.bytes);
        let nonce_bytes = if method >= SecurityMethod::CmdRsp { nonce.0 } else { [0; cdb::REQUEST_NONCE_LEN] };
        cdb_bytes[cdb::REQUEST_NONCE..cdb::REQUEST_NONCE + cdb::REQUEST_NONCE_LEN].copy_from_slice(&nonce_bytes);
    }

    fn sign_cdb(&self, cdb_bytes: &mut [u8; CDB_LEN]) -> [u8; ICV_SIZE] {
        let icv = self.key.request_icv(cdb_bytes);
        cdb_bytes[cdb::REQUEST_ICV..cdb::REQUEST_ICV + ICV_SIZE].copy_from_slice(&icv);
        icv
    }
}

#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum SignError {
    #[error("the command is too large to carry integrity check values")]
    TooLarge,
}

/// Why an answer was not accepted.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum ResponseError {
    #[error("the response carries no integrity check value although the command asked for {0}")]
    MissingIcv(SecurityMethod),
    #[error("the response integrity check value does not verify (altered or forged answer)")]
    ResponseIcv,
    #[error("the Data-In integrity check value is missing or does not verify (altered data)")]
    DataInIcv,
}

/// What a signed command needs to check its answer.
#[derive(Clone, Debug)]
pub struct Signed {
    method: SecurityMethod,
    key: CapabilityKey,
    request_icv: [u8; ICV_SIZE],
    data_in_icv_offset: Option<u64>,
    /// The response ICV a plain GOOD answer must carry, once computed ahead of the answer.
    good_answer_icv: Option<[u8; ICV_SIZE]>,
}

/// GOOD status, with no sense (key, ASC, ASCQ all zero) and no retrieved attributes.
const GOOD: u8 = 0;

impl Signed {
    pub fn method(&self) -> SecurityMethod {
        self.method
    }

    /// Computes, ahead of the answer, the response ICV that a GOOD answer with no sense and no
    /// retrieved attributes must carry (the usual answer to a READ or WRITE), so the check of
    /// such an answer is a comparison. Meant for the time the command is in flight (see
    /// `ScsiTransport::execute_into_meanwhile`); any other answer is checked in full as before.
    pub fn prepare_good_answer(&mut self, placement: &ReplyPlacement) {
        if self.method >= SecurityMethod::CmdRsp && placement.retrieved.is_none() && self.good_answer_icv.is_none() {
            self.good_answer_icv = Some(self.key.response_icv(&self.request_icv, GOOD, [0; 3], &[]));
        }
    }

    /// Checks a completed answer (GOOD or RECOVERED ERROR) and, under ALLDATA, cuts the Data-In
    /// ICV off `data_in`.
    pub fn verify(&self, status: u8, sense: Option<&Sense>, placement: &ReplyPlacement, data_in: &mut Vec<u8>) -> Result<(), ResponseError> {
        self.verify_split(status, sense, placement, &[], data_in)
    }

    /// [`Signed::verify`] for a Data-In received in two parts: `lent` (its first bytes, in the
    /// caller's memory, slices end to end, as many as arrived) and `rest` (what followed them),
    /// from which the Data-In ICV is cut under ALLDATA. Every byte both ICVs cover is checked,
    /// wherever it was received.
    pub fn verify_split(&self, status: u8, sense: Option<&Sense>, placement: &ReplyPlacement, lent: &[&[u8]], rest: &mut Vec<u8>) -> Result<(), ResponseError> {
        if self.method < SecurityMethod::CmdRsp {
            return Ok(());
        }
        let Some(sense) = sense else { return Err(ResponseError::MissingIcv(self.method)) };
        let Some(received) = sense.response_icv else { return Err(ResponseError::MissingIcv(self.method)) };
        let lent_len: usize = lent.iter().map(|p| p.len()).sum();
        let covered = match self.data_in_icv_offset {
            Some(offset) => {
                // The ICV lies after all command data, so never in the lent part.
                let at = usize::try_from(offset).ok().and_then(|o| o.checked_sub(lent_len)).ok_or(ResponseError::DataInIcv)?;
                let end = at + ICV_SIZE;
                if rest.len() < end {
                    return Err(ResponseError::DataInIcv);
                }
                let pieces: Vec<&[u8]> = lent.iter().copied().chain([&rest[..at]]).collect();
                if !icv_eq(&self.key.data_in_icv_pieces(&pieces), &rest[at..end]) {
                    return Err(ResponseError::DataInIcv);
                }
                at
            }
            None => rest.len(),
        };
        let triplet = [sense.key as u8, sense.asc, sense.ascq];
        let retrieved = if lent.is_empty() {
            std::borrow::Cow::Borrowed(retrieved_area(placement, &rest[..covered]))
        } else {
            retrieved_split(placement, lent, lent_len, &rest[..covered])
        };
        let expected = match self.good_answer_icv {
            Some(icv) if status == GOOD && triplet == [0; 3] && retrieved.is_empty() => icv,
            _ => self.key.response_icv(&self.request_icv, status, triplet, &retrieved),
        };
        if !icv_eq(&expected, &received) {
            return Err(ResponseError::ResponseIcv);
        }
        rest.truncate(covered);
        Ok(())
    }
}

/// The retrieved-attributes area of a Data-In received as `lent` then `rest`, cut as
/// [`retrieved_area`] cuts it. It follows the command data, so it is normally all in `rest`;
/// otherwise its bytes are gathered.
fn retrieved_split<'a>(placement: &ReplyPlacement, lent: &[&[u8]], lent_len: usize, rest: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
    use std::borrow::Cow;
    let Some(r) = placement.retrieved else { return Cow::Borrowed(&[]) };
    let total = lent_len + rest.len();
    let start = usize::try_from(r.offset).unwrap_or(usize::MAX).min(total);
    let end = start.saturating_add(r.allocation_len as usize).min(total);
    if start >= lent_len {
        return Cow::Borrowed(&rest[start - lent_len..end - lent_len]);
    }
    let mut out = Vec::with_capacity(end - start);
    let mut at = 0usize;
    for p in lent.iter().copied().chain([rest]) {
        let (a, b) = (start.max(at), end.min(at + p.len()));
        if a < b {
            out.extend_from_slice(&p[a - at..b - at]);
        }
        at += p.len();
    }
    Cow::Owned(out)
}
