//! The target-side seam: a transport (iSCSI) hands each SCSI command to a [`ScsiDevice`] as a
//! [`ScsiTask`] with its Data-Out already assembled, and sends back the [`ScsiOutcome`].

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::{MappedDataIn, PlacedDataOut, Sense, ScsiStatus};

/// One I_T nexus: an initiator port talking to this target (iSCSI: one session). Unit
/// attention conditions and reservations are kept per nexus.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Nexus {
    /// The initiator's iSCSI name plus ISID, e.g. `iqn.2026-11.org.tessera:client,isid=...`.
    pub initiator_port: String,
    /// A number unique among the target's live and past sessions (the TSIH, widened).
    pub session_id: u64,
}

/// One SCSI command with all of its Data-Out.
#[derive(Debug)]
pub struct ScsiTask<'a> {
    pub lun: u64,
    pub cdb: &'a [u8],
    /// Every Data-Out byte in buffer-offset order (immediate, unsolicited and solicited data
    /// already merged). Empty for commands without Data-Out.
    pub data_out: &'a [u8],
    /// The initiator's Expected Data Transfer Length for Data-In (the bidirectional read length
    /// for bidirectional commands). A device never returns more than this.
    pub data_in_len: u32,
}

/// Data-In held by reference: `len` bytes of `file` from `offset`, then `zeros` zero bytes.
/// A transport sends the file bytes without copying them through user space (`sendfile`) when
/// it can, and reads them with [`FileDataIn::read_at`] when it cannot (e.g. data digests on).
#[derive(Debug, Clone)]
pub struct FileDataIn {
    pub file: Arc<File>,
    pub offset: u64,
    pub len: u64,
    pub zeros: u64,
}

impl FileDataIn {
    pub fn total_len(&self) -> u64 {
        self.len + self.zeros
    }

    /// Fills `buf` with the Data-In bytes starting at Data-In offset `at`. Bytes the file no
    /// longer has (it shrank since the command ran) read as zeros.
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let from_file = self.len.saturating_sub(at).min(buf.len() as u64) as usize;
        let mut done = 0;
        while done < from_file {
            match self.file.read_at(&mut buf[done..from_file], self.offset + at + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf[done..].fill(0);
        Ok(())
    }
}

impl PartialEq for FileDataIn {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.file, &other.file) && (self.offset, self.len, self.zeros) == (other.offset, other.len, other.zeros)
    }
}

impl Eq for FileDataIn {}

/// What a device answers to one task.
#[derive(Debug, PartialEq, Eq)]
pub struct ScsiOutcome {
    pub status: ScsiStatus,
    /// Data-In; the transport truncates to the task's `data_in_len` and reports the residual.
    pub data_in: Vec<u8>,
    /// Data-In held in a file instead of `data_in` (which is then empty).
    pub data_in_file: Option<FileDataIn>,
    /// Data-In held as pieces of a mapped file instead of `data_in` (which is then empty).
    pub data_in_mapped: Option<MappedDataIn>,
    pub sense: Option<Sense>,
}

impl ScsiOutcome {
    pub fn good(data_in: Vec<u8>) -> Self {
        ScsiOutcome { status: ScsiStatus::Good, data_in, data_in_file: None, data_in_mapped: None, sense: None }
    }

    /// GOOD or RECOVERED ERROR with Data-In held in a file.
    pub fn from_file(data_in: FileDataIn, recovered: Option<Sense>) -> Self {
        let status = if recovered.is_some() { ScsiStatus::CheckCondition } else { ScsiStatus::Good };
        ScsiOutcome { status, data_in: Vec::new(), data_in_file: Some(data_in), data_in_mapped: None, sense: recovered }
    }

    /// GOOD or RECOVERED ERROR with Data-In held as mapped pieces.
    pub fn from_mapped(data_in: MappedDataIn, recovered: Option<Sense>) -> Self {
        let status = if recovered.is_some() { ScsiStatus::CheckCondition } else { ScsiStatus::Good };
        ScsiOutcome { status, data_in: Vec::new(), data_in_file: None, data_in_mapped: Some(data_in), sense: recovered }
    }

    /// Length of the Data-In this outcome carries, wherever it is held.
    pub fn data_in_len(&self) -> u64 {
        match (&self.data_in_file, &self.data_in_mapped) {
            (Some(f), _) => f.total_len(),
            (None, Some(m)) => m.total_len(),
            (None, None) => self.data_in.len() as u64,
        }
    }

    /// The Data-In as bytes, reading a file-held range into memory.
    pub fn into_data_in_bytes(self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.data_in_len() as usize];
        match (&self.data_in_file, &self.data_in_mapped) {
            (Some(f), _) => f.read_at(0, &mut buf)?,
            (None, Some(m)) => m.read_at(0, &mut buf)?,
            (None, None) => return Ok(self.data_in),
        }
        Ok(buf)
    }

    pub fn check_condition(sense: Sense) -> Self {
        ScsiOutcome { status: ScsiStatus::CheckCondition, data_in: Vec::new(), data_in_file: None, data_in_mapped: None, sense: Some(sense) }
    }

    /// CHECK CONDITION that still carries Data-In (e.g. RECOVERED ERROR 3B17 on a short read).
    pub fn check_condition_with_data(sense: Sense, data_in: Vec<u8>) -> Self {
        ScsiOutcome { status: ScsiStatus::CheckCondition, data_in, data_in_file: None, data_in_mapped: None, sense: Some(sense) }
    }
}

/// Outcome of a task management function (RFC 7143 §11.6.1 response codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmfResult {
    FunctionComplete,
    TaskDoesNotExist,
    LunDoesNotExist,
    NotSupported,
    Rejected,
}

/// A SCSI target device: one or more logical units behind one target name.
///
/// Implementations are shared by every connection thread, hence `Send + Sync`; `execute` may be
/// called concurrently from several sessions.
pub trait ScsiDevice: Send + Sync + 'static {
    /// LUNs this device exposes (REPORT LUNS answers them).
    fn luns(&self) -> Vec<u64>;

    /// Executes one command to completion.
    fn execute(&self, nexus: &Nexus, task: &ScsiTask<'_>) -> ScsiOutcome;

    /// Offered when a command arrives, before any of its `data_out_len` bytes of Data-Out: the
    /// device may take the data straight into place ([`PlacedDataOut`]). `None` (the default)
    /// leaves the transport to assemble Data-Out in memory and call [`ScsiDevice::execute`].
    fn place_data_out(&self, _nexus: &Nexus, _lun: u64, _cdb: &[u8], _data_out_len: u64, _data_in_len: u32) -> Option<Box<dyn PlacedDataOut>> {
        None
    }

    /// LOGICAL UNIT RESET from `nexus`: abort the unit's tasks, and raise a unit attention for
    /// every other nexus.
    fn lun_reset(&self, nexus: &Nexus, lun: u64) -> TmfResult;

    /// A new nexus logged in (a power-on unit attention is pending for it).
    fn nexus_added(&self, nexus: &Nexus);

    /// The nexus logged out or its connection dropped.
    fn nexus_removed(&self, nexus: &Nexus);
}
