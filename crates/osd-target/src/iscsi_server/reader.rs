//! The connection's reader thread in full feature phase (RFC 7143 §3.2.2): receives commands
//! and assembles their Data-Out (immediate data, unsolicited Data-Out up to FirstBurstLength,
//! then R2T-solicited bursts of MaxBurstLength, at most MaxOutstandingR2T at a time; §4.2.5),
//! answers NOP-Out, Text, task management and Logout, and rejects malformed PDUs (§11.17).
//! Data-Out is read straight from the socket into the task's buffer, never from an unchecked
//! length; a plain WRITE the device takes into place (placement.rs) goes from the socket into
//! the object's file instead.

use std::collections::HashMap;
use std::io;
use std::net::TcpStream;

use tessera_iscsi::bhs::RESERVED_TAG;
use tessera_iscsi::login::SessionType;
use tessera_iscsi::lun::decode_lun;
use tessera_iscsi::pdu::*;
use tessera_iscsi::serial::sn_lt;
use tessera_iscsi::{DecodeError, Incoming, PduReader, ReadError};
use tessera_scsi::{Destination, PlacedDataOut, Sense, SenseKey};
use tessera_types::limits::TRANSFER_LEN_MAX;
use tracing::{debug, warn};

use super::conn::RECYCLED_BUFFER_MIN;
use super::conn::{Connection, Work};
use super::placement::{FilePlacement, PLACED_WRITE_MIN};
use super::r2t::{Receiving, R2tPlan};
use super::splice::SplicePipe;
use staged::Staged;
use tessera_engine::{IoOp, StorageError};

mod staged;
mod text;

/// Failure to keep the connection: the reader stops and the connection closes.
#[derive(Debug)]
pub(crate) struct Fatal;

impl From<io::Error> for Fatal {
    fn from(_: io::Error) -> Self {
        Fatal
    }
}

impl From<ReadError> for Fatal {
    fn from(_: ReadError) -> Self {
        Fatal
    }
}

/// ILLEGAL REQUEST, INSUFFICIENT RESOURCES (55/03): the Expected Data Transfer Length exceeds
/// `limits::TRANSFER_LEN_MAX`; the command is refused without allocating.
pub(crate) fn transfer_too_long() -> Sense {
    Sense::new(SenseKey::IllegalRequest, 0x55, 0x03)
}

/// ABORTED COMMAND, DATA PHASE ERROR (4B/00): Data-Out broke the transfer rules.
fn data_phase_error() -> Sense {
    Sense::new(SenseKey::AbortedCommand, 0x4B, 0x00)
}

/// ABORTED COMMAND, PROTOCOL SERVICE CRC ERROR (47/05): a Data-Out digest did not match, and
/// ErrorRecoveryLevel 0 cannot ask for the data again.
fn digest_error() -> Sense {
    Sense::new(SenseKey::AbortedCommand, 0x47, 0x05)
}

pub(crate) struct Reader<'a> {
    conn: &'a Connection,
    pdus: &'a mut PduReader<TcpStream>,
    tasks: HashMap<u32, Receiving>,
    next_ttt: u32,
    /// For placed Data-Out; made on first use. `Err` when it could not be made: every WRITE
    /// is then received into a buffer.
    pipe: Option<Result<SplicePipe, ()>>,
}

/// Reads until Logout (`true`) or until the connection is lost or broken (`false`).
pub(crate) fn run(conn: &Connection, pdus: &mut PduReader<TcpStream>) -> bool {
    let mut r = Reader { conn, pdus, tasks: HashMap::new(), next_ttt: 1, pipe: None };
    loop {
        match r.step() {
            Ok(true) => {}
            Ok(false) => return true,
            Err(Fatal) => return false,
        }
    }
}

impl Reader<'_> {
    /// Handles one PDU; `Ok(false)` after a Logout.
    fn step(&mut self) -> Result<bool, Fatal> {
        let inc = match self.pdus.read_header() {
            Ok(i) => i,
            Err(ReadError::Closed) => return Err(Fatal),
            Err(e) => {
                warn!(session = self.conn.nexus.session_id, error = %e, "closing connection");
                return Err(Fatal);
            }
        };
        let pdu = match &inc.pdu {
            Ok(p) => p.clone(),
            Err(e) => return self.reject_malformed(&inc, e.clone()).map(|_| true),
        };
        let discovery = self.conn.params.session_type == SessionType::Discovery;
        match pdu {
            Pdu::ScsiCommand(cmd) if !discovery => self.on_command(&inc, cmd)?,
            Pdu::DataOut(d) if !discovery => self.on_data_out(&inc, d)?,
            Pdu::TaskMgmtRequest(t) if !discovery => {
                self.pdus.discard_data(inc.data_segment_len())?;
                self.advance_cmd_sn(t.immediate, t.cmd_sn);
                self.on_tmf(t)?;
            }
            Pdu::NopOut(n) => self.on_nop(&inc, n)?,
            Pdu::TextRequest(t) => self.on_text(&inc, t)?,
            Pdu::LogoutRequest(l) => {
                self.pdus.discard_data(inc.data_segment_len())?;
                self.advance_cmd_sn(l.immediate, l.cmd_sn);
                // Queued commands finish first; then the executor answers and closes.
                self.conn.push_work(Work::Logout { itt: l.itt }, false);
                return Ok(false);
            }
            _ => {
                self.pdus.discard_data(inc.data_segment_len())?;
                self.conn.reject(reject_reason::PROTOCOL_ERROR, &inc.bhs)?;
            }
        }
        Ok(true)
    }

    fn reject_malformed(&mut self, inc: &Incoming, e: DecodeError) -> Result<(), Fatal> {
        self.pdus.discard_data(inc.data_segment_len())?;
        let reason = match e {
            DecodeError::Opcode(_) => reject_reason::COMMAND_NOT_SUPPORTED,
            _ => reject_reason::INVALID_PDU_FIELD,
        };
        self.conn.reject(reason, &inc.bhs)?;
        Ok(())
    }

    /// Moves ExpCmdSN past a non-immediate command (RFC 7143 §4.2.2.1).
    fn advance_cmd_sn(&self, immediate: bool, _cmd_sn: u32) {
        if !immediate {
            let mut w = self.conn.window.lock().expect("window lock poisoned");
            w.exp_cmd_sn = w.exp_cmd_sn.wrapping_add(1);
        }
    }

    /// Checks a non-immediate CmdSN against the window; false means "silently ignore"
    /// (RFC 7143 §4.2.2.1: outside the window, or a duplicate). On one connection commands
    /// arrive in order, so a gap is also ignored.
    fn accept_cmd_sn(&self, cmd_sn: u32) -> bool {
        let w = self.conn.window.lock().expect("window lock poisoned");
        if cmd_sn == w.exp_cmd_sn && !sn_lt(w.max_cmd_sn(), cmd_sn) {
            return true;
        }
        debug!(cmd_sn, exp = w.exp_cmd_sn, max = w.max_cmd_sn(), "ignoring command outside the window");
        false
    }

    fn on_command(&mut self, inc: &Incoming, cmd: ScsiCommand) -> Result<(), Fatal> {
        let data_len = inc.data_segment_len();
        if !cmd.immediate {
            if !self.accept_cmd_sn(cmd.cmd_sn) {
                self.pdus.discard_data(data_len)?;
                return Ok(());
            }
            let mut w = self.conn.window.lock().expect("window lock poisoned");
            w.exp_cmd_sn = w.exp_cmd_sn.wrapping_add(1);
            w.outstanding += 1;
        }
        let p = &self.conn.params;
        let write_len = if cmd.write { cmd.expected_data_transfer_length } else { 0 };
        let data_in_len = match (cmd.read, cmd.bidi_read_len) {
            (true, Some(b)) if cmd.write => b,
            (true, _) => cmd.expected_data_transfer_length,
            _ => 0,
        };
        let unsolicited_max = if p.initial_r2t { 0 } else { p.first_burst_len.min(write_len) };
        // RFC 7143 §4.2.5.2 / §13.13: immediate data only when negotiated, within the first
        // burst and the transfer; unsolicited Data-Out only with InitialR2T=No.
        let bad = (data_len > 0 && (!cmd.write || !p.immediate_data))
            || data_len as u64 > p.first_burst_len.min(write_len) as u64
            || (!cmd.final_bit && (p.initial_r2t || data_len as u32 >= unsolicited_max));
        if bad || self.tasks.contains_key(&cmd.itt) || cmd.itt == RESERVED_TAG {
            self.pdus.discard_data(data_len)?;
            if !cmd.immediate {
                self.conn.command_done();
            }
            self.conn.reject(reject_reason::INVALID_PDU_FIELD, &inc.bhs)?;
            return Ok(());
        }
        let mut task = Receiving::new(&cmd, decode_lun(cmd.lun), write_len, data_in_len, unsolicited_max);
        if write_len as u64 > TRANSFER_LEN_MAX || data_in_len as u64 > TRANSFER_LEN_MAX {
            task.failed = Some(transfer_too_long());
        } else if let Some(placed) = self.offer_placement(&cmd, task.lun, write_len, data_in_len) {
            task.place(placed);
        } else if write_len as usize >= RECYCLED_BUFFER_MIN {
            task.use_buffer(self.conn.take_buffer(write_len as usize));
        }
        if data_len > 0 {
            match self.read_task_data(&mut task, 0, data_len) {
                Ok(()) => task.received(0, data_len as u32, false),
                Err(ReadError::DataDigest) => {
                    // The command cannot be trusted: reject it and forget it (§7.8).
                    if !cmd.immediate {
                        self.conn.command_done();
                    }
                    self.conn.reject(reject_reason::DATA_DIGEST_ERROR, &inc.bhs)?;
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.progress(task)
    }

    fn on_data_out(&mut self, inc: &Incoming, d: DataOut) -> Result<(), Fatal> {
        let len = inc.data_segment_len();
        let Some(mut task) = self.tasks.remove(&d.itt) else {
            // Most likely a task aborted while its data was in flight.
            debug!(itt = d.itt, "Data-Out for no task; discarded");
            self.pdus.discard_data(len)?;
            return Ok(());
        };
        if let Err(why) = task.check_data_out(&d, len as u32) {
            debug!(itt = d.itt, why, "Data-Out violates the transfer");
            self.pdus.discard_data(len)?;
            self.conn.reject(reject_reason::PROTOCOL_ERROR, &inc.bhs)?;
            task.failed.get_or_insert_with(data_phase_error);
            task.abandon();
            return self.progress(task);
        }
        match self.read_task_data(&mut task, d.buffer_offset, len) {
            Ok(()) => {}
            Err(ReadError::DataDigest) => {
                self.conn.reject(reject_reason::DATA_DIGEST_ERROR, &inc.bhs)?;
                task.failed.get_or_insert_with(digest_error);
            }
            Err(e) => return Err(e.into()),
        }
        task.received_data_out(&d, len as u32);
        self.progress(task)
    }

    /// Asks the device to take a WRITE's Data-Out straight into place. Only without data
    /// digests (the digest needs the bytes in memory; those WRITEs are buffered), for WRITEs
    /// large enough to gain, and only when every task ahead of this one already has its data in
    /// place: a buffered task still receiving or waiting for the executor is older, and its data
    /// must not land after this one's.
    fn offer_placement(&mut self, cmd: &ScsiCommand, lun: u64, write_len: u32, data_in_len: u32) -> Option<Box<dyn PlacedDataOut>> {
        let worth = write_len >= PLACED_WRITE_MIN && !self.conn.params.data_digest;
        if !worth || !self.tasks.values().all(Receiving::is_placed) || !self.conn.queue().only_placed_ahead() {
            return None;
        }
        if self.pipe.is_none() {
            let made = SplicePipe::new().map_err(|e| warn!(error = %e, "no pipe for placed Data-Out; WRITEs are buffered"));
            self.pipe = Some(made);
        }
        if !matches!(self.pipe, Some(Ok(_))) {
            return None;
        }
        self.conn.device.place_data_out(&self.conn.nexus, lun, &cmd.cdb, write_len as u64, data_in_len)
    }

    /// Reads `len` Data-Out bytes of `task` at buffer offset `offset` where they belong:
    /// dropped once the outcome is decided, into the task's file when placed, else into its
    /// buffer. A file failure decides the outcome; the stream stays framed.
    fn read_task_data(&mut self, task: &mut Receiving, offset: u32, len: usize) -> Result<(), ReadError> {
        if task.failed.is_some() {
            return self.pdus.discard_data(len);
        }
        let failure = match task.placed.as_ref().map(|p| p.destination()) {
            None => return self.pdus.read_data(task.grow(offset, len)),
            Some(Destination::Discard) => return self.pdus.discard_data(len),
            Some(Destination::Prefix { .. } | Destination::Pieces(_)) => {
                let pipe = self.pipe.as_ref().and_then(|p| p.as_ref().ok());
                let mut staged = Staged { conn: self.conn, task, base: offset as u64, pipe, failed: None };
                self.pdus.read_data_placed(len, &mut staged)?;
                staged.failed.map(|source| StorageError::Io { op: IoOp::Write, source }.sense())
            }
            Some(Destination::File { file, offset: base }) => {
                let Some(Ok(pipe)) = &self.pipe else {
                    unreachable!("a WRITE is placed only once the pipe exists");
                };
                let mut place = FilePlacement { pipe, file, base: base + offset as u64, failed: None };
                self.pdus.read_data_placed(len, &mut place)?;
                place.failure_sense()
            }
        };
        task.failed = failure;
        Ok(())
    }

    /// Sends the R2Ts a task may have outstanding, or hands it to the executor once its
    /// Data-Out is complete (or it failed and no more data is expected).
    fn progress(&mut self, mut task: Receiving) -> Result<(), Fatal> {
        if task.is_complete() {
            let failed = task.failed.take();
            super::executor::submit(self.conn, task.into_ready(failed))?;
            return Ok(());
        }
        let max_outstanding = self.conn.params.max_outstanding_r2t;
        let max_burst = self.conn.params.max_burst_len;
        while let Some(R2tPlan { r2t_sn, offset, len }) = task.next_r2t(max_outstanding, max_burst) {
            let ttt = self.next_ttt;
            self.next_ttt = self.next_ttt.wrapping_add(1);
            if self.next_ttt == RESERVED_TAG {
                self.next_ttt = 1;
            }
            task.r2t_sent(ttt, offset, len);
            let mut tx = self.conn.tx();
            let (exp_cmd_sn, max_cmd_sn) = self.conn.window_fields();
            let r2t = R2t {
                lun: task.lun_field,
                itt: task.itt,
                ttt,
                stat_sn: tx.current_stat_sn(),
                exp_cmd_sn,
                max_cmd_sn,
                r2t_sn,
                buffer_offset: offset,
                desired_data_transfer_length: len,
            };
            tx.writer.write_pdu(&Pdu::R2t(r2t), &[])?;
        }
        self.tasks.insert(task.itt, task);
        Ok(())
    }

    fn on_nop(&mut self, inc: &Incoming, n: NopOut) -> Result<(), Fatal> {
        let data = match self.pdus.read_data_vec(inc.data_segment_len()) {
            Ok(d) => d,
            Err(ReadError::DataDigest) => {
                self.conn.reject(reject_reason::DATA_DIGEST_ERROR, &inc.bhs)?;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        self.advance_cmd_sn(n.immediate, n.cmd_sn);
        if n.itt == RESERVED_TAG {
            // An answer to a target ping (we send none) or a one-way NOP: no reply.
            return Ok(());
        }
        // RFC 7143 §11.19: a ping reply echoes the data, within the initiator's segment size.
        let echo_len = data.len().min(self.conn.params.initiator_max_recv_data_segment_len as usize);
        self.conn.send_status(
            |stat_sn, exp_cmd_sn, max_cmd_sn| {
                Pdu::NopIn(NopIn { lun: n.lun, itt: n.itt, ttt: RESERVED_TAG, stat_sn, exp_cmd_sn, max_cmd_sn })
            },
            &[&data[..echo_len]],
        )?;
        Ok(())
    }

    fn on_tmf(&mut self, t: TaskMgmtRequest) -> Result<(), Fatal> {
        let lun = decode_lun(t.lun);
        let response = match t.function {
            tmf_function::ABORT_TASK => self.abort_task(&t),
            tmf_function::LOGICAL_UNIT_RESET => {
                if !self.conn.device.luns().contains(&lun) {
                    Some(tmf_response::LUN_DOES_NOT_EXIST)
                } else {
                    self.drop_tasks(|task_lun| task_lun == lun);
                    // Runs after the current task (if any) finishes.
                    self.conn.push_work(Work::LunReset { itt: t.itt, lun }, true);
                    None
                }
            }
            tmf_function::TASK_REASSIGN => Some(tmf_response::REASSIGNMENT_NOT_SUPPORTED),
            _ => Some(tmf_response::NOT_SUPPORTED),
        };
        if let Some(response) = response {
            self.send_tmf_response(t.itt, response)?;
        }
        Ok(())
    }

    /// ABORT TASK (RFC 7143 §11.5.1): a task still receiving data or queued is removed and never
    /// answered; a running one is answered first, then the TMF.
    fn abort_task(&mut self, t: &TaskMgmtRequest) -> Option<u8> {
        let itt = t.referenced_task_tag;
        if self.tasks.remove(&itt).is_some() {
            self.conn.command_done();
            return Some(tmf_response::FUNCTION_COMPLETE);
        }
        let mut q = self.conn.queue();
        let before = q.work.len();
        q.work.retain(|w| !matches!(w, Work::Task(task) if task.itt == itt));
        if q.work.len() != before {
            drop(q);
            self.conn.command_done();
            return Some(tmf_response::FUNCTION_COMPLETE);
        }
        if q.running == Some(itt) {
            q.work.push_front(Work::TmfResponse { itt: t.itt, response: tmf_response::FUNCTION_COMPLETE });
            self.conn.queue_cv.notify_one();
            return None;
        }
        Some(tmf_response::TASK_DOES_NOT_EXIST)
    }

    /// Forgets every receiving and queued task for which `matches(lun)` holds.
    fn drop_tasks(&mut self, matches: impl Fn(u64) -> bool) {
        let before = self.tasks.len();
        self.tasks.retain(|_, t| !matches(t.lun));
        let mut dropped = before - self.tasks.len();
        let mut q = self.conn.queue();
        let before = q.work.len();
        q.work.retain(|w| !matches!(w, Work::Task(task) if matches(task.lun)));
        dropped += before - q.work.len();
        drop(q);
        for _ in 0..dropped {
            self.conn.command_done();
        }
    }

    fn send_tmf_response(&self, itt: u32, response: u8) -> io::Result<()> {
        send_tmf_response(self.conn, itt, response)
    }
}

pub(crate) fn send_tmf_response(conn: &Connection, itt: u32, response: u8) -> io::Result<()> {
    debug!(itt, response, "task management response");
    conn.send_status(
        |stat_sn, exp_cmd_sn, max_cmd_sn| {
            Pdu::TaskMgmtResponse(TaskMgmtResponse { response, itt, stat_sn, exp_cmd_sn, max_cmd_sn })
        },
        &[],
    )
}

