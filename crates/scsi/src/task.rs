//! The target-side seam: a transport (iSCSI) hands each SCSI command to a [`ScsiDevice`] as a
//! [`ScsiTask`] with its Data-Out already assembled, and sends back the [`ScsiOutcome`].

use crate::{Sense, ScsiStatus};

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

/// What a device answers to one task.
#[derive(Debug, PartialEq, Eq)]
pub struct ScsiOutcome {
    pub status: ScsiStatus,
    /// Data-In; the transport truncates to the task's `data_in_len` and reports the residual.
    pub data_in: Vec<u8>,
    pub sense: Option<Sense>,
}

impl ScsiOutcome {
    pub fn good(data_in: Vec<u8>) -> Self {
        ScsiOutcome { status: ScsiStatus::Good, data_in, sense: None }
    }

    pub fn check_condition(sense: Sense) -> Self {
        ScsiOutcome { status: ScsiStatus::CheckCondition, data_in: Vec::new(), sense: Some(sense) }
    }

    /// CHECK CONDITION that still carries Data-In (e.g. RECOVERED ERROR 3B17 on a short read).
    pub fn check_condition_with_data(sense: Sense, data_in: Vec<u8>) -> Self {
        ScsiOutcome { status: ScsiStatus::CheckCondition, data_in, sense: Some(sense) }
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

    /// LOGICAL UNIT RESET from `nexus`: abort the unit's tasks, and raise a unit attention for
    /// every other nexus.
    fn lun_reset(&self, nexus: &Nexus, lun: u64) -> TmfResult;

    /// A new nexus logged in (a power-on unit attention is pending for it).
    fn nexus_added(&self, nexus: &Nexus);

    /// The nexus logged out or its connection dropped.
    fn nexus_removed(&self, nexus: &Nexus);
}
