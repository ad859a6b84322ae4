//! The initiator-side seam: whatever carries SCSI commands to a device (an iSCSI session, or an
//! in-process device for the simulator) implements [`ScsiTransport`]; the OSD client above it
//! builds CDBs and parses Data-In without knowing the transport.

use std::sync::Arc;

use thiserror::Error;

use crate::{Nexus, ScsiDevice, ScsiStatus, ScsiTask, Sense};

/// One command to send. `data_out` is a gather list: the transport sends the slices in order
/// without first copying them into one buffer.
#[derive(Debug)]
pub struct ScsiRequest<'a> {
    pub lun: u64,
    pub cdb: &'a [u8],
    pub data_out: &'a [&'a [u8]],
    /// Bytes of Data-In the initiator expects (0 for none).
    pub data_in_len: u32,
}

impl ScsiRequest<'_> {
    pub fn data_out_len(&self) -> u64 {
        self.data_out.iter().map(|s| s.len() as u64).sum()
    }
}

/// The device's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiResponse {
    pub status: ScsiStatus,
    pub data_in: Vec<u8>,
    pub sense: Option<Sense>,
    /// Expected minus actual Data-In bytes (positive: underflow; negative: overflow).
    pub residual: i64,
}

/// The answer to [`ScsiTransport::execute_lent`]: Data-In from offset 0 went into the caller's
/// memory, the rest (a retrieved attribute list, an integrity value) is `response.data_in`,
/// whose byte 0 is Data-In offset `lent_len` (the lent memory's total length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LentResponse {
    pub response: ScsiResponse,
    /// How many bytes of the lent memory, from its start, the target sent. The rest of it was
    /// not written.
    pub lent_filled: usize,
}

#[derive(Debug, Error)]
pub enum TransportError {
    #[error("connection to {peer} failed: {source}{}", refused_hint(source))]
    Io {
        peer: String,
        #[source]
        source: std::io::Error,
    },
    #[error("iSCSI login to {peer} refused: {reason}")]
    LoginRefused { peer: String, reason: String },
    /// CHAP at login failed: the target refused our credentials (Login status 0x0201), or
    /// the target failed to prove itself under mutual CHAP.
    #[error("iSCSI authentication with {peer} failed: {reason}")]
    AuthenticationFailed { peer: String, reason: String },
    #[error("protocol error from {peer}: {detail}")]
    Protocol { peer: String, detail: String },
    #[error("session to {peer} closed")]
    SessionClosed { peer: String },
    #[error("command aborted by {peer}")]
    Aborted { peer: String },
    /// The target stayed silent past the liveness limit (a NOP-Out ping went unanswered, or a
    /// login got no answer): the connection was closed rather than waited on for ever.
    #[error("{peer} did not answer for {secs} s; connection closed (is the daemon stopped or the network down?)")]
    Unresponsive { peer: String, secs: u64 },
    #[error("request of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: u64, max: u64 },
    /// A login to the target got no answer a moment ago, so another is not tried yet: each
    /// would hold its caller for the whole login timeout.
    #[error("{peer} did not answer a login moments ago; not tried again for {secs} s (is the daemon stopped or the network down?)")]
    Silent { peer: String, secs: u64 },
}

/// What to check when nothing listens at the target's portal.
fn refused_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => " (is the target running? `tessera status` shows every daemon)",
        _ => "",
    }
}

impl TransportError {
    /// The target gave no answer in time (as opposed to refusing, or answering wrongly).
    pub fn timed_out(&self) -> bool {
        match self {
            TransportError::Unresponsive { .. } | TransportError::Silent { .. } => true,
            TransportError::Io { source, .. } => matches!(source.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock),
            _ => false,
        }
    }
}

/// Carries SCSI commands to one device. Many threads may call `execute` at once; a transport
/// keeps them all in flight.
pub trait ScsiTransport: Send + Sync {
    fn execute(&self, request: &ScsiRequest<'_>) -> Result<ScsiResponse, TransportError>;

    /// Like [`ScsiTransport::execute`], receiving Data-In into `buffer` (a previous response's
    /// `data_in`, say) so a caller moving many large transfers does not pay for a fresh
    /// multi-megabyte allocation each time. The default ignores the buffer.
    fn execute_into(&self, request: &ScsiRequest<'_>, buffer: Vec<u8>) -> Result<ScsiResponse, TransportError> {
        drop(buffer);
        self.execute(request)
    }

    /// Like [`ScsiTransport::execute`], receiving Data-In from offset 0 straight into `lent`
    /// (slices end to end; at most `request.data_in_len` bytes) and only what lies beyond it
    /// into the response, so a READ's data needs no second copy. On an error the lent memory
    /// holds whatever arrived and must not be used; the transport never writes to it after
    /// returning. The default receives into a buffer and copies.
    fn execute_lent(&self, request: &ScsiRequest<'_>, lent: &mut [&mut [u8]]) -> Result<LentResponse, TransportError> {
        let mut response = self.execute(request)?;
        let lent_filled = copy_into(&response.data_in, lent);
        let lent_len: usize = lent.iter().map(|p| p.len()).sum();
        response.data_in = response.data_in.get(lent_len..).map(<[u8]>::to_vec).unwrap_or_default();
        Ok(LentResponse { response, lent_filled })
    }

    /// [`ScsiTransport::execute_into`] that runs `meanwhile` once the command has left and
    /// before its answer is awaited: work the caller needs only after the answer (e.g. the
    /// integrity value a GOOD answer must carry) is done while the thread would wait anyway.
    /// The default runs it first.
    fn execute_into_meanwhile(&self, request: &ScsiRequest<'_>, buffer: Vec<u8>, meanwhile: &mut dyn FnMut()) -> Result<ScsiResponse, TransportError> {
        meanwhile();
        self.execute_into(request, buffer)
    }

    /// [`ScsiTransport::execute_lent`] with `meanwhile` as in
    /// [`ScsiTransport::execute_into_meanwhile`].
    fn execute_lent_meanwhile(&self, request: &ScsiRequest<'_>, lent: &mut [&mut [u8]], meanwhile: &mut dyn FnMut()) -> Result<LentResponse, TransportError> {
        meanwhile();
        self.execute_lent(request, lent)
    }

    /// Where this transport goes, for error messages (e.g. `127.0.0.1:3260`).
    fn peer(&self) -> String;
}

/// Copies `data` across `parts` in order; returns the bytes copied.
fn copy_into(data: &[u8], parts: &mut [&mut [u8]]) -> usize {
    let mut from = data;
    for p in parts.iter_mut() {
        let n = from.len().min(p.len());
        p[..n].copy_from_slice(&from[..n]);
        from = &from[n..];
    }
    data.len() - from.len()
}

/// An in-process transport that hands commands straight to a [`ScsiDevice`]. The same device
/// code runs as under iSCSI; only the wire is skipped. Used by the simulator and by engine-level
/// tests that want the exact command path without sockets.
pub struct DirectTransport<D: ScsiDevice> {
    device: Arc<D>,
    nexus: Nexus,
}

impl<D: ScsiDevice> DirectTransport<D> {
    pub fn new(device: Arc<D>, initiator_port: &str, session_id: u64) -> Self {
        let nexus = Nexus { initiator_port: initiator_port.to_string(), session_id };
        device.nexus_added(&nexus);
        DirectTransport { device, nexus }
    }
}

impl<D: ScsiDevice> Drop for DirectTransport<D> {
    fn drop(&mut self) {
        self.device.nexus_removed(&self.nexus);
    }
}

impl<D: ScsiDevice> ScsiTransport for DirectTransport<D> {
    fn execute(&self, request: &ScsiRequest<'_>) -> Result<ScsiResponse, TransportError> {
        let data_out = request.data_out.concat();
        let task = ScsiTask { lun: request.lun, cdb: request.cdb, data_out: &data_out, data_in_len: request.data_in_len };
        let outcome = self.device.execute(&self.nexus, &task);
        let (status, sense) = (outcome.status, outcome.sense.clone());
        let mut data_in = outcome.into_data_in_bytes().map_err(|source| TransportError::Io { peer: self.peer(), source })?;
        let residual = request.data_in_len as i64 - data_in.len() as i64;
        data_in.truncate(request.data_in_len as usize);
        Ok(ScsiResponse { status, data_in, sense, residual })
    }

    fn peer(&self) -> String {
        "in-process".to_string()
    }
}
