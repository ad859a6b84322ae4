//! Typed OSD-2 client over any [`ScsiTransport`] (an iSCSI session, or an in-process device).
//!
//! Each method is one OSD command: it builds the CDB and Data-Out with
//! [`tessera_osd_proto::OsdRequestBuilder`], sends them, and reads the answer through
//! [`tessera_osd_proto::parse_data_in`], the same codec the target uses. Write data leaves as
//! the caller's own slice in the gather list, never copied. Ids a command creates come back
//! through the Current Command attributes page (OSD-2 r05 §7.1.2.25), which every creating
//! method asks for in the same command.
//!
//! Under capability security each command is signed with a [`Credential`]: given explicitly
//! ([`OsdClient::execute_as`]) or found by the client's [`CredentialSource`] for the command's
//! object. The answer's response and Data-In integrity values are checked before anything of it
//! is returned (docs/security.md).
//!
//! Files: this one holds the client, [`OsdReply`], [`OsdError`] and `execute`;
//! `objects.rs` creation, removal and listing; `io.rs` data commands; `attrs.rs` attributes,
//! QUERY, member commands and Tessera's atomics; `keys.rs` SET KEY and SET MASTER KEY.

mod attrs;
mod io;
mod keys;
mod objects;

use std::sync::Arc;

use tessera_security::clock::now_ms;
use tessera_security::{Credential, NonceSource, ResponseError, SignError};

use tessera_osd_proto::attr_list::RetrievedList;
use tessera_osd_proto::{
    parse_data_in, AttrId, BuildError, Command, DecodeError, MemberAttr, OsdRequestBuilder, ReplyPlacement, RetrievedAttr,
    ServiceAction,
};
use tessera_scsi::{ScsiRequest, ScsiStatus, ScsiTransport, Sense, SenseKey, TransportError};
use thiserror::Error;

pub use io::{gathers, ReadInto, ReadResult, GATHER_MIN_PIECE_BYTES};
pub use keys::fresh_seed;
pub use objects::ListParams;

/// Why an OSD command did not succeed. Every variant names the peer; a refusal also names the
/// command and the object so the message says what to look at.
#[derive(Debug, Error)]
pub enum OsdError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("OSD {peer} refused {service_action:?} on object (partition {partition_id:#x}, object {object_id:#x}): {sense}")]
    /// The sense is boxed: with its integrity value it is large, and errors travel by value.
    Sense { peer: String, service_action: ServiceAction, partition_id: u64, object_id: u64, sense: Box<Sense> },
    #[error("OSD {peer} answered {service_action:?} with SCSI status {status:?}")]
    Status { peer: String, service_action: ServiceAction, status: ScsiStatus },
    #[error("cannot encode the request: {0}")]
    Build(#[from] BuildError),
    #[error("OSD {peer} sent a malformed reply to {service_action:?}: {source}")]
    Reply {
        peer: String,
        service_action: ServiceAction,
        #[source]
        source: DecodeError,
    },
    #[error("OSD {peer} did not return {what} for {service_action:?}")]
    Missing { peer: String, service_action: ServiceAction, what: &'static str },
    #[error("the answer of OSD {peer} to {service_action:?} failed its integrity check: {source}")]
    Integrity {
        peer: String,
        service_action: ServiceAction,
        #[source]
        source: ResponseError,
    },
    #[error("cannot sign the request: {0}")]
    Sign(#[from] SignError),
    #[error(transparent)]
    Keys(#[from] tessera_security::ManagerError),
}

impl OsdError {
    /// The sense data, when the OSD refused the command.
    pub fn sense(&self) -> Option<&Sense> {
        match self {
            OsdError::Sense { sense, .. } => Some(sense),
            _ => None,
        }
    }

    /// Whether the OSD refused the command because the object it names, or that object's
    /// partition, does not exist: ILLEGAL REQUEST, INVALID FIELD IN CDB pointing at the object
    /// id or the partition id, as OSD-2 r05 §4.14 has it. Other refusals with that code point
    /// elsewhere (the request ICV, a length).
    pub fn is_no_such_object(&self) -> bool {
        self.is_invalid_cdb_field(tessera_osd_proto::cdb::OBJECT_ID) || self.is_invalid_cdb_field(tessera_osd_proto::cdb::PARTITION_ID)
    }

    /// Whether the OSD refused the command as ILLEGAL REQUEST, INVALID FIELD IN CDB, with the
    /// field pointer at CDB byte `byte` (one of the offsets in `tessera_osd_proto::cdb`).
    pub fn is_invalid_cdb_field(&self, byte: usize) -> bool {
        self.sense().is_some_and(|s| {
            s.key == tessera_scsi::SenseKey::IllegalRequest
                && s.asc_ascq() == 0x2400
                && s.field_pointer.is_some_and(|f| f.in_cdb && f.byte as usize == byte)
        })
    }
}

/// One command's answer, Data-In already split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsdReply {
    /// Command data from Data-In offset 0 (READ data, LIST / QUERY / READ MAP results, the old
    /// value of an atomic).
    pub data: Vec<u8>,
    /// The retrieved attributes list, when the command asked for one.
    pub retrieved: Option<RetrievedList>,
    /// GET MEMBER ATTRIBUTES: (entries, full list length).
    pub members: Option<(Vec<MemberAttr>, u64)>,
    /// RECOVERED ERROR sense (e.g. 3B17, read past the end of the object): the command
    /// completed and its data is valid.
    pub recovered: Option<Sense>,
    pub placement: ReplyPlacement,
}

impl OsdReply {
    /// The retrieved attributes (empty when none were asked for or none arrived).
    pub fn attrs(&self) -> &[RetrievedAttr] {
        self.retrieved.as_ref().map_or(&[], |r| r.attrs.as_slice())
    }

    /// The value of one retrieved attribute, if defined.
    pub fn attr(&self, id: AttrId) -> Option<&[u8]> {
        self.attrs().iter().find(|a| a.id == id).and_then(|a| a.value.as_deref())
    }
}

/// Where a command's Data-In is received: a buffer the reply then owns, or memory the caller
/// lends for the command data (see [`OsdClient::execute_lent`]).
enum Landing<'m, 'b> {
    Buffer(Vec<u8>),
    Lent(&'m mut [&'b mut [u8]]),
}

/// The first `n` bytes of `parts` end to end, as slices.
fn prefix<'a>(parts: &'a [&mut [u8]], mut n: usize) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    for p in parts {
        if n == 0 {
            break;
        }
        let k = n.min(p.len());
        out.push(&p[..k]);
        n -= k;
    }
    out
}

/// A typed OSD-2 client for one logical unit.
/// How often one command is resent after a UNIT ATTENTION before the sense is reported.
const UNIT_ATTENTION_RETRIES: u32 = 3;

pub struct OsdClient<T: ScsiTransport> {
    transport: T,
    lun: u64,
    credentials: Option<Arc<dyn CredentialSource>>,
    nonces: NonceSource,
}

/// Where an [`OsdClient`] finds the credential for a command it was not handed one for.
/// `None` sends the command NOSEC.
pub trait CredentialSource: Send + Sync {
    fn credential(&self, command: &Command) -> Option<Arc<Credential>>;
}

/// One credential for every command (a test, or a tool acting on one object).
impl CredentialSource for Credential {
    fn credential(&self, _command: &Command) -> Option<Arc<Credential>> {
        Some(Arc::new(self.clone()))
    }
}

fn is_unit_attention(response: &tessera_scsi::ScsiResponse) -> bool {
    response.status == ScsiStatus::CheckCondition && response.sense.as_ref().is_some_and(|s| s.key == SenseKey::UnitAttention)
}

/// A random start for this client's nonce counter, from the standard library's randomly
/// seeded hasher (OS randomness), so two clients do not walk the same sequence.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(now_ms());
    h.finish()
}

/// The (partition, object) a command addresses: for error messages, and for a
/// [`CredentialSource`] choosing the credential (partition 0 is the root object).
pub fn object_of(command: &Command) -> (u64, u64) {
    use Command as C;
    match command {
        C::FormatOsd { .. } | C::FlushOsd { .. } => (0, 0),
        C::Create { partition_id, requested, .. } | C::CreateCollection { partition_id, requested } => {
            (*partition_id, requested.unwrap_or(0))
        }
        C::CreateAndWrite { partition_id, requested, .. } => (*partition_id, requested.unwrap_or(0)),
        C::CreatePartition { requested } => (requested.unwrap_or(0), 0),
        C::RemovePartition { partition_id } | C::FlushPartition { partition_id, .. } => (*partition_id, 0),
        C::List { partition_id, .. } => (*partition_id, 0),
        C::Remove { addr }
        | C::RemoveCollection { addr, .. }
        | C::ListCollection { addr, .. }
        | C::Read { addr, .. }
        | C::Write { addr, .. }
        | C::Append { addr, .. }
        | C::Punch { addr, .. }
        | C::Clear { addr, .. }
        | C::Flush { addr, .. }
        | C::FlushCollection { addr, .. }
        | C::GetAttributes { addr }
        | C::SetAttributes { addr }
        | C::Query { addr, .. }
        | C::GetMemberAttributes { addr }
        | C::SetMemberAttributes { addr }
        | C::RemoveMemberObjects { addr }
        | C::ReadMap { addr, .. }
        | C::CompareAndSwap { addr, .. }
        | C::FetchAndAdd { addr, .. } => (addr.partition_id.0, addr.object_id.0),
    }
}

impl<T: ScsiTransport> OsdClient<T> {
    /// A client that sends every command NOSEC.
    pub fn new(transport: T, lun: u64) -> Self {
        OsdClient { transport, lun, credentials: None, nonces: NonceSource::new(random_u64()) }
    }

    /// A client that signs each command with the credential `source` gives for it.
    pub fn with_credentials(transport: T, lun: u64, source: Arc<dyn CredentialSource>) -> Self {
        OsdClient { credentials: Some(source), ..Self::new(transport, lun) }
    }

    pub fn set_credentials(&mut self, source: Option<Arc<dyn CredentialSource>>) {
        self.credentials = source;
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    pub fn lun(&self) -> u64 {
        self.lun
    }

    /// Where the OSD is, for messages.
    pub fn peer(&self) -> String {
        self.transport.peer()
    }

    /// Sends one command and splits its answer. GOOD and RECOVERED ERROR succeed; any other
    /// CHECK CONDITION becomes [`OsdError::Sense`] naming the peer and the object.
    ///
    /// A UNIT ATTENTION (power on, reset) reports an event, not a failure of this command, which
    /// the device did not execute (SAM-5 §5.14); like every initiator we note it and resend.
    pub fn execute(&self, builder: &OsdRequestBuilder<'_>) -> Result<OsdReply, OsdError> {
        self.execute_with_buffer(builder, Vec::new())
    }

    /// [`OsdClient::execute`], receiving Data-In into `buffer` (e.g. the `data` of an earlier
    /// reply) instead of a fresh allocation.
    pub fn execute_with_buffer(&self, builder: &OsdRequestBuilder<'_>, buffer: Vec<u8>) -> Result<OsdReply, OsdError> {
        let credential = self.credentials.as_ref().and_then(|s| s.credential(&builder.command));
        self.execute_signed(builder, credential.as_deref(), Landing::Buffer(buffer), None).map(|(r, _)| r)
    }

    /// [`OsdClient::execute`] that runs `meanwhile` once the command has left and before its
    /// answer is awaited (at most once, also when the command is resent), so that the caller
    /// can have other commands in flight with it, on other OSDs, without a thread. On a
    /// transport that cannot overlap it runs first; on an error before the command left it
    /// does not run.
    pub fn execute_meanwhile(&self, builder: &OsdRequestBuilder<'_>, meanwhile: &mut dyn FnMut()) -> Result<OsdReply, OsdError> {
        let credential = self.credentials.as_ref().and_then(|s| s.credential(&builder.command));
        self.execute_signed(builder, credential.as_deref(), Landing::Buffer(Vec::new()), Some(meanwhile)).map(|(r, _)| r)
    }

    /// [`OsdClient::execute`], receiving the command data (Data-In from offset 0) straight
    /// into `lent`, slices end to end, which must not be longer than the command's data. The
    /// reply's `data` holds only command data beyond `lent`; also returned: how many bytes of
    /// `lent` the OSD sent. Nothing is reported as success before the answer's integrity
    /// values (retrieved attributes, and under ALLDATA every Data-In byte) are verified; on an
    /// error `lent` holds whatever arrived and must not be used.
    pub fn execute_lent(&self, builder: &OsdRequestBuilder<'_>, lent: &mut [&mut [u8]]) -> Result<(OsdReply, usize), OsdError> {
        self.execute_lent_meanwhile(builder, lent, &mut || {})
    }

    /// [`OsdClient::execute_lent`] running `meanwhile` as [`OsdClient::execute_meanwhile`] does.
    pub fn execute_lent_meanwhile(
        &self,
        builder: &OsdRequestBuilder<'_>,
        lent: &mut [&mut [u8]],
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(OsdReply, usize), OsdError> {
        let credential = self.credentials.as_ref().and_then(|s| s.credential(&builder.command));
        self.execute_signed(builder, credential.as_deref(), Landing::Lent(lent), Some(meanwhile))
    }

    /// [`OsdClient::execute`] signed with `credential`, whatever the client's own source says.
    pub fn execute_as(&self, builder: &OsdRequestBuilder<'_>, credential: &Credential) -> Result<OsdReply, OsdError> {
        self.execute_signed(builder, Some(credential), Landing::Buffer(Vec::new()), None).map(|(r, _)| r)
    }

    fn execute_signed(
        &self,
        builder: &OsdRequestBuilder<'_>,
        credential: Option<&Credential>,
        mut landing: Landing<'_, '_>,
        mut also: Option<&mut dyn FnMut()>,
    ) -> Result<(OsdReply, usize), OsdError> {
        let service_action = builder.command.service_action();
        let mut attempts = 0;
        // Each attempt is signed afresh: a resent command needs a new nonce.
        let (encoded, signed, (response, lent_filled)) = loop {
            let mut encoded = builder.encode()?;
            let mut signed = credential.map(|c| c.sign(&mut encoded, self.nonces.next(now_ms()))).transpose()?;
            let response = {
                let pieces = encoded.data_out();
                let request = ScsiRequest { lun: self.lun, cdb: &encoded.cdb, data_out: &pieces, data_in_len: encoded.data_in_len };
                // While the command is in flight: the integrity value its usual answer carries.
                let placement = &encoded.placement;
                let mut meanwhile = || {
                    if let Some(s) = signed.as_mut() {
                        s.prepare_good_answer(placement);
                    }
                    if let Some(also) = also.take() {
                        also();
                    }
                };
                match &mut landing {
                    Landing::Buffer(buffer) => (self.transport.execute_into_meanwhile(&request, std::mem::take(buffer), &mut meanwhile)?, 0),
                    Landing::Lent(lent) => {
                        let lent_len: u64 = lent.iter().map(|p| p.len() as u64).sum();
                        if lent_len > encoded.placement.data_len_max {
                            return Err(BuildError::DataLength { expected: encoded.placement.data_len_max, got: lent_len }.into());
                        }
                        let r = self.transport.execute_lent_meanwhile(&request, lent, &mut meanwhile)?;
                        (r.response, r.lent_filled)
                    }
                }
            };
            attempts += 1;
            if !is_unit_attention(&response.0) || attempts > UNIT_ATTENTION_RETRIES {
                break (encoded, signed, response);
            }
            tracing::debug!(peer = %self.peer(), sense = ?response.0.sense, "unit attention; resending");
        };
        let mut data_in = response.data_in;
        let completed = response.status == ScsiStatus::Good
            || response.sense.as_ref().is_some_and(|s| s.key == SenseKey::RecoveredError);
        // With lent memory, `data_in` holds Data-In from offset `lent_len` on.
        let lent_len = match &landing {
            Landing::Buffer(_) => 0,
            Landing::Lent(lent) => lent.iter().map(|p| p.len()).sum(),
        };
        if let (Some(signed), true) = (&signed, completed) {
            let filled = match &landing {
                Landing::Buffer(_) => Vec::new(),
                Landing::Lent(lent) => prefix(lent, lent_filled),
            };
            signed
                .verify_split(response.status.code(), response.sense.as_ref(), &encoded.placement, &filled, &mut data_in)
                .map_err(|source| OsdError::Integrity { peer: self.peer(), service_action, source })?;
        }
        let recovered = match (response.status, response.sense) {
            (ScsiStatus::Good, _) => None,
            (ScsiStatus::CheckCondition, Some(sense)) if sense.key == SenseKey::RecoveredError => Some(sense),
            (ScsiStatus::CheckCondition, Some(sense)) => {
                let (partition_id, object_id) = object_of(&builder.command);
                return Err(OsdError::Sense { peer: self.peer(), service_action, partition_id, object_id, sense: Box::new(sense) });
            }
            (status, _) => return Err(OsdError::Status { peer: self.peer(), service_action, status }),
        };
        let placement = encoded.placement;
        let parsed = parse_data_in(&placement.after(lent_len as u64), &data_in)
            .map_err(|source| OsdError::Reply { peer: self.peer(), service_action, source })?;
        let (retrieved, members) = (parsed.retrieved, parsed.members);
        // Command data always starts at Data-In offset 0, so keep the buffer instead of copying
        // what may be a many-megabyte read.
        let data_len = parsed.data.len();
        debug_assert!(data_len == 0 || parsed.data.as_ptr() == data_in.as_ptr());
        data_in.truncate(data_len);
        Ok((OsdReply { data: data_in, retrieved, members, recovered, placement }, lent_filled))
    }

    /// A retrieved attribute as an unsigned integer, or [`OsdError::Missing`].
    fn attr_u64(&self, reply: &OsdReply, id: AttrId, service_action: ServiceAction, what: &'static str) -> Result<u64, OsdError> {
        reply
            .attr(id)
            .and_then(tessera_osd_proto::pages::value_u64)
            .ok_or_else(|| OsdError::Missing { peer: self.peer(), service_action, what })
    }

    fn reply_error(&self, service_action: ServiceAction, source: DecodeError) -> OsdError {
        OsdError::Reply { peer: self.peer(), service_action, source }
    }
}

#[cfg(test)]
mod security_tests;
#[cfg(test)]
mod tests;
